"""``manage.py add_device --name N --kind tiiny|tensorsharp --url URL [--api-key KEY] [--no-check]``.

Idempotent by name (an existing device is updated). Checks the connection unless ``--no-check`` and exits
non-zero with one clear line when the device can't be reached or the key is wrong. The key is never printed;
``--api-key -`` reads it from stdin, and ``HUB_DEVICE_API_KEY`` is used when the flag is absent (so the key
need not appear in a process list).
"""

from __future__ import annotations

import os
import sys

from django.core.exceptions import ValidationError
from django.core.management.base import BaseCommand, CommandError

from devices.models import Device
from devices.services import device_check_now, device_register, device_update


class Command(BaseCommand):
    help = "Add or update a device (idempotent by name) and check that the hub can talk to it."

    def add_arguments(self, parser) -> None:
        parser.add_argument("--name", required=True)
        parser.add_argument("--kind", required=True, choices=[k for k, _ in Device.Kind.choices])
        parser.add_argument("--url", required=True)
        parser.add_argument("--api-key", default=None, help="'-' reads it from stdin")
        parser.add_argument("--no-check", action="store_true", help="save without testing the connection")
        parser.add_argument("--default", action="store_true", help="make it the default device")

    def handle(self, *args, **opts) -> None:
        key = opts["api_key"]
        if key == "-":
            key = sys.stdin.readline().strip()
        elif key is None:
            key = os.environ.get("HUB_DEVICE_API_KEY")
        existing = Device.objects.filter(name=opts["name"]).first()
        try:
            if existing is None:
                device = device_register(
                    name=opts["name"],
                    kind=opts["kind"],
                    base_url=opts["url"],
                    api_key=key or "",
                    is_default=opts["default"],
                )
                verb = "added"
            else:
                fields = {"kind": opts["kind"], "base_url": opts["url"]}
                if opts["default"]:
                    fields["is_default"] = True
                if key is not None:
                    fields["api_key"] = key
                device = device_update(device=existing, **fields)
                verb = "updated"
        except ValidationError as exc:
            raise CommandError(_one_line(exc)) from None
        if opts["no_check"]:
            self.stdout.write(f"{device.name}: {verb} (not checked)")
            return
        report = device_check_now(device=device)
        if not report.ok:
            detail = f" ({report.detail})" if report.detail else ""
            raise CommandError(
                f"{device.name}: {verb}, but the check failed: {report.human}{detail}"
                + (f" Fix: {report.fix}" if report.fix else "")
            )
        self.stdout.write(
            f"{device.name}: {verb}, {report.human.lower().rstrip('.')} ({report.models} models installed)"
        )


def _one_line(exc: ValidationError) -> str:
    if hasattr(exc, "message_dict"):
        return "; ".join(f"{k}: {' '.join(v)}" for k, v in exc.message_dict.items())
    return " ".join(exc.messages)

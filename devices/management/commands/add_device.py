"""``manage.py add_device --name N --kind tiiny|tensorsharp --url URL [--api-key-file PATH] [--no-check]``.

Idempotent by name (an existing device is updated). Checks the connection unless ``--no-check`` and exits
non-zero with one clear line when the device can't be reached or the key is wrong. The key is never printed.

Where the key comes from, first match wins: ``--api-key-file PATH`` (its first line), ``--api-key -`` (a
line on stdin), the ``HUB_DEVICE_API_KEY`` environment variable, or, for a new device when stdin is a
terminal, a prompt that does not echo. ``--api-key KEY`` still works for scripts, with a warning: a
command line is visible to every local user (``ps``, /proc/<pid>/cmdline) and stays in shell history.
An existing device keeps its key when none is given.
"""

from __future__ import annotations

import getpass
import os
import stat
import sys
from pathlib import Path

from django.core.exceptions import ValidationError
from django.core.management.base import BaseCommand, CommandError

from devices.models import Device
from devices.services import device_check_now, device_register, device_update

ENV_KEY = "HUB_DEVICE_API_KEY"


class Command(BaseCommand):
    help = "Add or update a device (idempotent by name) and check that the hub can talk to it."

    def add_arguments(self, parser) -> None:
        parser.add_argument("--name", required=True)
        parser.add_argument("--kind", required=True, choices=[k for k, _ in Device.Kind.choices])
        parser.add_argument("--url", required=True)
        parser.add_argument(
            "--api-key",
            default=None,
            help="'-' reads it from stdin. A key here is visible in `ps` and shell history: prefer "
            "--api-key-file, $HUB_DEVICE_API_KEY or the prompt",
        )
        parser.add_argument(
            "--api-key-file", default=None, metavar="PATH", help="read the key from this file"
        )
        parser.add_argument("--no-check", action="store_true", help="save without testing the connection")
        parser.add_argument("--default", action="store_true", help="make it the default device")

    def handle(self, *args, **opts) -> None:
        existing = Device.objects.filter(name=opts["name"]).first()
        key = self._key(opts, new=existing is None)
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

    def _key(self, opts: dict, *, new: bool) -> str | None:
        """The key from the first source that has one; None = none given (an existing device keeps its own)."""
        flag, path = opts["api_key"], opts["api_key_file"]
        if flag is not None and path is not None:
            raise CommandError("give --api-key or --api-key-file, not both")
        if path is not None:
            return _read_key_file(path, warn=self.stderr.write)
        if flag == "-":
            return sys.stdin.readline().strip()
        if flag is not None:
            self.stderr.write(
                "warning: --api-key puts the key on the command line, where other users of this machine "
                "can read it (ps, /proc) and your shell history keeps it. Use --api-key-file PATH, "
                "HUB_DEVICE_API_KEY=… or leave it out to be asked."
            )
            return flag
        if os.environ.get(ENV_KEY) is not None:
            return os.environ[ENV_KEY].strip()
        if new and sys.stdin.isatty():
            return getpass.getpass(f"API key for {opts['name']} (input hidden; empty for none): ").strip()
        return None


def _read_key_file(path: str, *, warn) -> str:
    file = Path(path)
    try:
        text = file.read_text()
        mode = file.stat().st_mode
    except OSError as exc:
        raise CommandError(f"--api-key-file {path}: {exc.strerror or exc}") from None
    key = text.strip().splitlines()[0].strip() if text.strip() else ""
    if not key:
        raise CommandError(f"--api-key-file {path} is empty")
    if mode & (stat.S_IRGRP | stat.S_IROTH):
        warn(f"warning: {path} is readable by other users; `chmod 600 {path}` keeps the key yours.")
    return key


def _one_line(exc: ValidationError) -> str:
    if hasattr(exc, "message_dict"):
        return "; ".join(f"{k}: {' '.join(v)}" for k, v in exc.message_dict.items())
    return " ".join(exc.messages)

"""Adding, changing and removing devices (``devices.services`` re-exports these: the doors' one name for them).

Each is recorded in the audit log (``hub.accounts.audit``) with who did it (``by``; None: the command line): what
kind and address a device was added with, which fields changed (whether its key changed, never the key).
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from django.core.exceptions import ValidationError
from django.db import IntegrityError, transaction

from devices.clients.base import validate_base_url
from devices.models import Device
from hub.accounts import audit

_KEEP = object()


def _clean_url(base_url: str) -> str:
    try:
        return validate_base_url(base_url)
    except ValueError as exc:
        raise ValidationError({"base_url": str(exc)}) from None


def device_register(
    *,
    name: str,
    kind: str,
    base_url: str,
    api_key: str = "",
    night_start: dt.time | None = None,
    night_end: dt.time | None = None,
    time_zone: str | None = None,
    is_default: bool = False,
    by: Any = None,
) -> Device:
    """A new device (``by``: the admin who added it, for the audit log; None: the command line)."""
    device = Device(name=name.strip(), kind=kind, base_url=_clean_url(base_url))
    device.api_key = api_key
    for attr, value in (("night_start", night_start), ("night_end", night_end), ("time_zone", time_zone)):
        if value is not None:
            setattr(device, attr, value)
    device.is_default = is_default or not Device.objects.exists()
    device.full_clean()
    with _name_taken_is_invalid(device):
        with transaction.atomic():
            if device.is_default:
                Device.objects.filter(is_default=True).update(is_default=False)
            device.save()
            audit.record(audit.Action.DEVICE_ADDED, actor=by, target=device,
                         data={"kind": device.kind, "url": device.base_url})  # fmt: skip
    return device


NAME_TAKEN = "A device with that name already exists."


@contextmanager
def _name_taken_is_invalid(device: Device) -> Iterator[None]:
    """``full_clean`` checks the name is free, but two requests at once can both pass it: the database's unique
    constraint then decides, and the loser gets the same form error instead of an IntegrityError (a 500)."""
    try:
        yield
    except IntegrityError:
        if not Device.objects.filter(name=device.name).exclude(pk=device.pk).exists():
            raise
        raise ValidationError({"name": NAME_TAKEN}) from None


def device_update(*, device: Device, api_key: Any = _KEEP, by: Any = None, **fields: Any) -> Device:
    """Change fields; ``api_key`` left out keeps the stored key, ``""`` clears it.

    Changing the URL, kind or key resets the state to "unknown" until the next poll or test. ``by``: the admin
    who changed it, for the audit log (which names the fields changed, never the key).
    """
    if "base_url" in fields:
        fields["base_url"] = _clean_url(fields["base_url"])
    changed = sorted(k for k, v in fields.items() if getattr(device, k) != v)
    reset = any(fields.get(k, getattr(device, k)) != getattr(device, k) for k in ("base_url", "kind"))
    for key, value in fields.items():
        setattr(device, key, value)
    if api_key is not _KEEP:
        device.api_key = api_key
        reset = True
    if reset:
        device.state, device.state_message, device.state_fix = Device.State.UNKNOWN, "", ""
        device.next_poll_at = None  # poll at the next beat
    device.full_clean()
    with _name_taken_is_invalid(device):
        with transaction.atomic():
            if device.is_default:
                Device.objects.filter(is_default=True).exclude(pk=device.pk).update(is_default=False)
            device.save()
            if changed or api_key is not _KEEP:
                audit.record(audit.Action.DEVICE_CHANGED, actor=by, target=device,
                             data={"fields": changed, "credentials_changed": api_key is not _KEEP})  # fmt: skip
    return device


def device_remove(*, device: Device, by: Any = None) -> None:
    """Delete a device (the admin site's delete; a device with jobs is protected by them). Recorded in the audit
    log with its name, which outlives it."""
    with transaction.atomic():
        audit.record(audit.Action.DEVICE_REMOVED, actor=by, target=device, data={"kind": device.kind})
        device.delete()

"""What a job's device call tells the hub about the device: away (locked, unreachable, its key refused), or back.

The metric poller (``devices.tasks``) is what notices a device coming back; while a job waits for it, the poller
looks at its fast rate.
"""

from __future__ import annotations

import datetime as dt
import logging

from django.utils import timezone

from devices import errors
from devices.live import device_push
from devices.models import Device
from devices.services import device_mark_active, device_set_state, state_for_error

logger = logging.getLogger("jobs.queue.device_watch")

#: How long the poller looks at a device at its fast rate after a job found it away.
WATCH_FOR = dt.timedelta(minutes=30)


def device_state_from(device_id: int, exc: errors.DeviceError) -> None:
    """The device's state as the error says (locked, unreachable, auth failed), pushed to its pages."""
    state, message, fix = state_for_error(exc)
    if state:
        if device_set_state(device_id=device_id, state=state, message=message, fix=fix):
            try:
                device_push(device_id)
            except Exception:
                logger.warning("device push failed", exc_info=True)


def watch_device(device_id: int) -> None:
    """A job waits for this device to come back: have the metric poller check it at its fast rate."""
    device_mark_active(device_id=device_id, until=timezone.now() + WATCH_FOR)


def device_online(device_id: int, *, as_of: dt.datetime | None = None) -> None:
    """The device answered a job call sent at ``as_of``: it is reachable and unlocked whatever the last poll said,
    unless its state changed after the call was sent (``devices.services.device_set_state``)."""
    if Device.objects.filter(pk=device_id).exclude(state=Device.State.ONLINE).exists():
        device_set_state(device_id=device_id, state=Device.State.ONLINE, seen=True, as_of=as_of)

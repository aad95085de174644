"""Which failed create calls may have reached the device (``engine._maybe_created``): those the hub looks for on
the device before sending again, never resubmitting blindly (a second render), never leaving the job "Sending"."""

from __future__ import annotations

import pytest

from devices import errors
from jobs.queue.engine import _maybe_created


@pytest.mark.parametrize(
    ("exc", "maybe"),
    [
        (
            errors.DeviceTimeout(detail="POST /v1/videos: no answer in time"),
            True,
        ),  # sent; the answer never came
        (errors.Transient("The connection to the device broke."), True),  # broke mid-request
        (errors.DeviceSilent(), False),  # the silent link's gate kept it back: nothing sent
        (errors.DeviceUnreachable(detail="ConnectError"), False),  # never connected
        (errors.DeviceLocked(status=502), False),
        (errors.Transient("busy", status=503), False),  # the device answered: it refused
        (errors.BadRequest("bad size", status=400), False),
    ],
)
def test_it_looks_before_sending_again_only_when_the_create_may_have_reached_the_device(exc, maybe):
    assert _maybe_created(exc) is maybe

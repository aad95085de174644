"""A reading answered after the device's state changed says nothing newer than that change.

The metric poller sends ``sys/status``; while it waits, a job's own request finds the device gone (unplugged) and
marks it unreachable, and the pool hands its waiting jobs to another device. The reading then answers (it was sent
before the cable came out): writing "online" now would undo the newer word, and the pool would take the device's
jobs back for a device that is gone. Found by ``jobs/tests/queue/test_pool_live.py`` failing once under load.
Against the Tiiny emulator over HTTP.
"""

from __future__ import annotations

from collections.abc import Callable

import httpx

from devices.clients.tiiny import TiinyClient
from devices.models import Device
from devices.services import device_refresh, device_set_state


class _Meanwhile(httpx.HTTPTransport):
    """A real transport that runs ``meanwhile`` once, after the device answered the first request (or the connection
    failed), before the client sees the answer."""

    def __init__(self, meanwhile: Callable[[], None]) -> None:
        super().__init__()
        self.meanwhile: Callable[[], None] | None = meanwhile

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        try:
            return super().handle_request(request)
        finally:
            if self.meanwhile is not None:
                self.meanwhile, meanwhile = None, self.meanwhile
                meanwhile()


def _state(device: Device) -> str:
    return Device.objects.values_list("state", flat=True).get(pk=device.pk)


def test_a_reading_sent_before_a_job_found_the_device_away_does_not_undo_it(tiiny, pocket):
    assert device_refresh(device_id=pocket.pk) == Device.State.ONLINE

    def a_job_finds_it_away() -> None:
        device_set_state(
            device_id=pocket.pk, state=Device.State.UNREACHABLE, message="The device cannot be reached."
        )

    late = TiinyClient(tiiny.base_url, tiiny.api_key, transport=_Meanwhile(a_job_finds_it_away))
    device_refresh(device_id=pocket.pk, client=late)
    assert _state(pocket) == Device.State.UNREACHABLE

    # A reading sent after the change is news: the device is back.
    assert device_refresh(device_id=pocket.pk) == Device.State.ONLINE
    assert _state(pocket) == Device.State.ONLINE


def test_a_failed_reading_sent_before_the_device_came_back_does_not_undo_it(pocket):
    Device.objects.filter(pk=pocket.pk).update(state=Device.State.UNREACHABLE)

    def a_job_finds_it_back() -> None:
        device_set_state(device_id=pocket.pk, state=Device.State.ONLINE, seen=True)

    gone = TiinyClient("http://127.0.0.1:9", "k", transport=_Meanwhile(a_job_finds_it_back))  # discard port
    device_refresh(device_id=pocket.pk, client=gone)
    assert _state(pocket) == Device.State.ONLINE

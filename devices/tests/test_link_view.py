"""The device's link, honestly (issue 36, item 4): the devices and health pages tell "no answer since 21:03" apart
from "locked" and from "slow link: answers in 4.2 s (p95)", with the round trip the poller measured. The pages read
the Device row; only the poller asks the device."""

from __future__ import annotations

import time

import httpx
import pytest
from django.urls import reverse

from devices import errors, silence
from devices.clients.tiiny import TiinyClient
from devices.models import Device
from devices.round_trips import device_note_round_trips, p95_of
from devices.services import device_refresh, device_register, device_set_state, state_for_error

pytestmark = pytest.mark.django_db


@pytest.fixture
def device():
    return device_register(name="Pocket", kind="tiiny", base_url="http://192.0.2.10", api_key="k")


def test_the_p95_is_the_nearest_rank():
    assert p95_of([10]) == 10
    assert p95_of(list(range(1, 101))) == 95
    assert p95_of([40] * 19 + [4000]) == 40  # one slow answer in twenty is not the link
    assert p95_of([40] * 18 + [4000, 4200]) == 4000


def test_it_keeps_the_last_round_trips_and_stores_their_p95(device):
    silence.cache.delete(f"devices:round-trips:{device.pk}")
    assert device_note_round_trips(device_id=device.pk, seconds=[0.04] * 30) == 40
    assert (
        device_note_round_trips(device_id=device.pk, seconds=[4.2] * 30) == 4200
    )  # the last 40 are mostly slow
    device.refresh_from_db()
    assert device.link_p95_ms == 4200 and device.slow_link_s == 4.2 and device.round_trip_text == "4.2 s"
    silence.cache.delete(f"devices:round-trips:{device.pk}")


def test_the_poller_measures_the_round_trip(pocket, tiiny):
    silence.cache.delete(f"devices:round-trips:{pocket.pk}")
    assert device_refresh(device_id=pocket.pk) == Device.State.ONLINE
    pocket.refresh_from_db()
    assert pocket.link_p95_ms is not None and pocket.round_trip_text


def test_the_device_and_health_pages_tell_a_slow_link_from_a_quick_one(admin_client, member_client, device):
    device_set_state(device_id=device.pk, state=Device.State.ONLINE, seen=True)
    Device.objects.filter(pk=device.pk).update(link_p95_ms=40)
    page = member_client.get(reverse("devices-list")).content.decode()
    assert "Answers in 40 ms (p95)" in page and "Slow link" not in page
    Device.objects.filter(pk=device.pk).update(link_p95_ms=4200)
    for c, url in (
        (member_client, reverse("devices-list")),
        (member_client, reverse("devices-detail", args=[device.pk])),
        (admin_client, reverse("hub-health")),
    ):
        assert "Slow link: answers in 4.2 s (p95)" in c.get(url).content.decode(), url


def test_a_silent_device_says_since_when_and_a_locked_one_that_it_refuses(member_client, device):
    base_url = f"http://silent-{time.monotonic_ns()}.test"

    def silent(request):
        raise httpx.ReadTimeout("timed out", request=request)

    client = TiinyClient(base_url, "k", transport=httpx.MockTransport(silent))
    client.link = silence.LinkGate(device.pk, base_url)
    with pytest.raises(errors.DeviceTimeout):
        client.sys_status()
    with pytest.raises(errors.DeviceSilent) as caught:
        client.sys_status()
    since = silence._clock(silence.silence_of(device.pk, base_url)["since"])
    assert caught.value.human == f"No answer since {since}."
    state, message, _fix = state_for_error(caught.value)
    device_set_state(device_id=device.pk, state=state, message=message)
    Device.objects.filter(pk=device.pk).update(
        link_p95_ms=4200
    )  # an old measure: not shown while unreachable
    page = member_client.get(reverse("devices-list")).content.decode()
    assert f"No answer since {since}." in page and "Slow link" not in page

    state, message, _fix = state_for_error(errors.DeviceLocked(status=502))
    device_set_state(device_id=device.pk, state=state, message=message)
    page = member_client.get(reverse("devices-list")).content.decode()
    assert "Locked after a restart" in page and "No answer since" not in page

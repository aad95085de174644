"""A device whose link went silent is asked once per backoff window, by one call at a time (``devices.silence``):
over ``httpx.MockTransport`` (a read that times out, as a silent Wi-Fi link does) and the hub's Redis cache."""

from __future__ import annotations

import time

import httpx
import pytest

from devices import errors, silence
from devices.clients.base import _Pace
from devices.clients.tiiny import TiinyClient


class Link:
    """A device behind a link: silent (every request times out) or answering."""

    def __init__(self) -> None:
        self.silent = True
        self.asked: list[float | None] = []  # each request's read deadline

    def __call__(self, request: httpx.Request) -> httpx.Response:
        self.asked.append(request.extensions["timeout"]["read"])
        if self.silent:
            raise httpx.ReadTimeout("timed out", request=request)
        return httpx.Response(200, json={"status": "ok"})


@pytest.fixture
def link():
    return Link()


def gated(link: Link, device_id: int) -> TiinyClient:
    base_url = f"http://silent-{device_id}-{time.monotonic_ns()}.test"  # a link of its own per test
    client = TiinyClient(base_url, "key", transport=httpx.MockTransport(link))
    client.link = silence.LinkGate(device_id, base_url)
    return client


def test_it_asks_a_silent_device_once_per_window_and_fails_the_other_calls_at_once(link):
    client = gated(link, 901)
    with pytest.raises(errors.DeviceTimeout):
        client.sys_status()
    assert len(link.asked) == 1
    for _ in range(5):  # within the window: refused without a request
        with pytest.raises(errors.DeviceSilent):
            client.sys_status()
    assert len(link.asked) == 1
    assert silence.silence_of(901, client.base_url)["misses"] == 1


def test_it_tries_the_link_once_the_window_ends_with_a_short_deadline_and_an_answer_ends_the_silence(link):
    client = gated(link, 902)
    with pytest.raises(errors.DeviceTimeout):
        client.video_get("v1")  # the status deadline (10 s)
    mark = silence.silence_of(902, client.base_url)
    silence.cache.set(silence._key(client.link.link), {**mark, "until": time.time() - 1})  # the window ended
    link.silent = False
    assert client.video_get("v1") == {"status": "ok"}
    assert link.asked == [client.timeouts.status, silence.TRY_DEADLINE_S]
    assert silence.silence_of(902, client.base_url) is None
    client.video_get("v1")
    assert link.asked[-1] == client.timeouts.status  # its own deadline again


def test_one_call_tries_the_link_while_the_others_fail_at_once(link):
    one, other = gated(link, 903), None
    with pytest.raises(errors.DeviceTimeout):
        one.sys_status()
    other = TiinyClient(one.base_url, "key", transport=httpx.MockTransport(link))
    other.link = silence.LinkGate(903, one.base_url)
    mark = silence.silence_of(903, one.base_url)
    silence.cache.set(silence._key(one.link.link), {**mark, "until": time.time() - 1})
    assert one.link.before(5.0) == silence.TRY_DEADLINE_S  # this one tries
    with pytest.raises(errors.DeviceSilent, match="another call is trying"):
        other.sys_status()
    assert len(link.asked) == 1


def test_windows_grow_to_a_cap():
    assert [silence.window_s(n) for n in range(1, 7)] == [4, 8, 16, 30, 30, 30]


def test_a_refused_connection_is_no_silence():
    def refuse(request):
        raise httpx.ConnectError("refused", request=request)

    base_url = f"http://refused-{time.monotonic_ns()}.test"
    client = TiinyClient(base_url, "key", transport=httpx.MockTransport(refuse))
    client.link = silence.LinkGate(904, base_url)
    for _ in range(3):
        with pytest.raises(errors.DeviceUnreachable) as caught:
            client.sys_status()
        assert not isinstance(caught.value, errors.DeviceSilent)
    assert silence.silence_of(904, base_url) is None


def test_a_download_that_crawls_below_its_rate_is_given_up_not_one_that_keeps_pace():
    now = [0.0]
    pace = _Pace(1000.0, 30.0, clock=lambda: now[0])
    for _ in range(10):  # 2000 B/s for 40 s
        now[0] += 4
        pace.check(8000, "/content")
    crawl = _Pace(1000.0, 30.0, clock=lambda: now[0])
    with pytest.raises(errors.DeviceTimeout, match="too slow"):
        for _ in range(10):  # 100 B/s
            now[0] += 4
            crawl.check(400, "/content")


@pytest.mark.django_db
def test_every_client_the_hub_makes_for_a_device_has_its_link_gate():
    from devices.services import client_for, device_register

    device = device_register(name="Gated", kind="tiiny", base_url="http://gated.test", api_key="k")
    with client_for(device) as client, client_for(device, note_asked=False) as poller:
        for c in (client, poller):
            assert isinstance(c.link, silence.LinkGate)
            assert (c.link.device_id, c.link.link) == (device.pk, silence._link(device.pk, device.base_url))


def test_a_long_call_never_tries_a_silent_link_a_short_one_does(link):
    client = gated(link, 905)
    with pytest.raises(errors.DeviceTimeout):
        client.sys_status()
    mark = silence.silence_of(905, client.base_url)
    silence.cache.set(silence._key(client.link.link), {**mark, "until": time.time() - 1})
    with pytest.raises(errors.DeviceSilent, match="a short call tries"):
        client.request("POST", "/v1/images/generations", read=600.0)  # a blocking render: not cut to 5 s
    assert len(link.asked) == 1
    link.silent = False
    client.sys_status()  # the poller's probe tries it, and the silence ends
    assert silence.silence_of(905, client.base_url) is None


def test_a_refused_connection_ends_a_silence():
    answers = iter([httpx.ReadTimeout("timed out"), httpx.ConnectError("refused")])

    def handler(request):
        exc = next(answers)
        exc.request = request
        raise exc

    base_url = f"http://restarting-{time.monotonic_ns()}.test"
    client = TiinyClient(base_url, "key", transport=httpx.MockTransport(handler))
    client.link = silence.LinkGate(906, base_url)
    with pytest.raises(errors.DeviceTimeout):
        client.sys_status()
    mark = silence.silence_of(906, base_url)
    silence.cache.set(silence._key(client.link.link), {**mark, "until": time.time() - 1})
    with pytest.raises(errors.DeviceUnreachable):
        client.sys_status()
    assert silence.silence_of(906, base_url) is None

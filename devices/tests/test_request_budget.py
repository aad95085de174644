"""How many requests the hub sends a device (issue 13: at most about one a second, busy or idle, however many
watch): the watched status tick gives way to the job's own requests, and a model load is read by how near its
expected end is. Requests are counted, never timed: loads run on a fake clock."""

from __future__ import annotations

import datetime as dt
import math

import httpx
import pytest
from django.utils import timezone

from devices import tasks
from devices.clients import TiinyClient
from devices.clients.tiiny import LOAD_LATE_S
from devices.loads import device_load_seconds, device_note_load_seconds
from devices.models import Device
from devices.services import (
    POLL_BUSY,
    YIELD_WINDOW,
    client_for,
    device_mark_active,
    device_note_asked,
    device_tick_yields,
)
from hub import live

pytestmark = pytest.mark.django_db
BASE = "http://tiiny.local"
MODEL = "MiniMaxAI/MiniMax-H3-Turbo"


@pytest.fixture
def device():
    from django.core.cache import cache

    d = Device.objects.create(
        name="d",
        kind="tiiny",
        base_url=BASE,
        state=Device.State.ONLINE,
        reading_at=timezone.now(),
        capabilities={
            "kind": "tiiny",
            "models": [{"id": MODEL, "name": "v", "kind": "video", "load_s": 5.0}],
        },
    )
    for key in (
        live.watch_key(f"device:{d.pk}"),
        f"devices:asked:{d.pk}",
        f"devices:load-s:{d.pk}:{MODEL}",
        f"devices:units-noted:{d.pk}",
        f"devices:full-reading:{d.pk}",
    ):
        cache.delete(key)
    return d


@pytest.fixture
def enqueued(monkeypatch):
    sent: list[int] = []
    monkeypatch.setattr(tasks.poll_device, "apply_async", lambda args, **kw: sent.append(args[0]))
    return sent


def _render(device, member, *, next_poll_in: float):
    from jobs.models import Job

    return Job.objects.create(
        owner=member,
        device=device,
        kind="video",
        model_id=MODEL,
        state="running",
        next_poll_at=timezone.now() + dt.timedelta(seconds=next_poll_in),
    )


# -- the watched tick gives way ------------------------------------------------------------------------------


def test_it_gives_way_to_a_job_that_just_asked_the_device(device, enqueued):
    live.mark_watched(f"device:{device.pk}")
    device_note_asked(device.pk)
    assert tasks.poll_all() == 0
    assert enqueued == []
    device.refresh_from_db()
    assert device.next_poll_at is None  # not claimed: still due at the next beat


def test_it_ticks_while_watched_when_the_job_asked_longer_ago_than_a_tick(device, enqueued):
    from django.core.cache import cache

    live.mark_watched(f"device:{device.pk}")
    long_ago = timezone.now() - YIELD_WINDOW - dt.timedelta(seconds=0.5)
    cache.set(f"devices:asked:{device.pk}", long_ago.timestamp())
    assert tasks.poll_all() == 1


def test_it_gives_way_when_a_render_poll_is_due_within_the_tick(device, member, enqueued):
    live.mark_watched(f"device:{device.pk}")
    _render(device, member, next_poll_in=1.0)
    assert tasks.poll_all() == 0


def test_it_ticks_when_the_render_poll_is_further_than_a_tick_away(device, member, enqueued):
    live.mark_watched(f"device:{device.pk}")
    _render(device, member, next_poll_in=8.0)
    assert tasks.poll_all() == 1


def test_it_still_reads_the_gauges_every_10_seconds_during_a_dense_render(device, member, enqueued):
    live.mark_watched(f"device:{device.pk}")
    _render(device, member, next_poll_in=0.2)
    device_note_asked(device.pk)
    Device.objects.filter(pk=device.pk).update(reading_at=timezone.now() - POLL_BUSY)
    assert tasks.poll_all() == 1


@pytest.mark.parametrize("state", [Device.State.LOCKED, Device.State.UNREACHABLE, Device.State.UNKNOWN])
def test_it_never_gives_way_while_the_device_is_not_known_online(device, state):
    Device.objects.filter(pk=device.pk).update(state=state)
    device.refresh_from_db()
    device_note_asked(device.pk)
    assert not device_tick_yields(device=device, now=timezone.now())


def test_a_job_poll_renewing_the_activity_does_not_pull_the_next_tick_forward(device, enqueued):
    device_mark_active(device_id=device.pk, until=timezone.now() + dt.timedelta(seconds=90))
    assert tasks.poll_all() == 1  # it became busy: polled at the next beat
    device.refresh_from_db()
    scheduled = device.next_poll_at
    device_mark_active(device_id=device.pk, until=timezone.now() + dt.timedelta(seconds=95))  # the next poll
    device.refresh_from_db()
    assert device.next_poll_at == scheduled
    assert device.active_until > scheduled


def test_job_clients_note_their_requests_and_the_pollers_own_does_not(device):
    from devices.services import device_asked_at

    def handler(request: httpx.Request) -> httpx.Response:
        return httpx.Response(200, json={"cpu": {}, "memory": {}, "npus": [{}]})

    with client_for(device, note_asked=False, transport=httpx.MockTransport(handler)) as poller:
        poller.sys_status()
    assert device_asked_at(device.pk) is None
    with client_for(device, transport=httpx.MockTransport(handler)) as job_client:
        job_client.sys_status()
    assert device_asked_at(device.pk) is not None


# -- model loads: sparse far from the expected end, fast near it ------------------------------------------------


class FakeClock:
    def __init__(self) -> None:
        self.t = 0.0

    def monotonic(self) -> float:
        return self.t

    def sleep(self, s: float) -> None:
        self.t += s


def _loading_device(clock: FakeClock, load_s: float, reads: list[float]):
    launched: list[float] = []

    def handler(request: httpx.Request) -> httpx.Response:
        path = request.url.path
        if path == "/api/v1/models/running":
            reads.append(clock.t)
            if launched and clock.t - launched[0] >= load_s:
                return httpx.Response(200, json={"running": [MODEL], "pending": []})
            return httpx.Response(200, json={"running": [], "pending": [MODEL] if launched else []})
        if path.endswith("/unload_candidate"):
            return httpx.Response(
                200, json={"unload_required": False, "npu_required": 45, "npu_available": 100}
            )
        if path.endswith("/launch"):
            launched.append(clock.t)
            return httpx.Response(200, json={"message": "start loading", "progress": 0})
        return httpx.Response(404)

    return handler


def _load(load_s: float, expected: float | None) -> tuple[list[float], float, TiinyClient]:
    clock, reads = FakeClock(), []
    c = TiinyClient(
        BASE,
        "k",
        transport=httpx.MockTransport(_loading_device(clock, load_s, reads)),
        clock=clock,
        poll_interval=0.25,
        load_poll_max_s=20.0,
        load_grace_s=0.0,
    )
    if expected:
        c.load_seconds = {MODEL: expected}
    c.ensure_loaded(MODEL, deadline_s=600)
    return reads[1:], clock.t - load_s, c  # the reads after the launch; how late its end was seen


@pytest.mark.parametrize("load_s", [5.0, 30.0, 90.0])
def test_a_load_with_a_known_time_costs_a_handful_of_reads_and_its_end_is_seen_within_half_a_second(load_s):
    reads, late, _ = _load(load_s, expected=load_s)
    assert late <= 0.5
    assert len(reads) <= 12 + 2.5 * math.log(load_s / 5.0, 1.5)  # before: one read every 0.25 s, 4 a second


def test_a_load_that_overruns_its_expected_time_is_read_every_half_second_past_it():
    reads, late, _ = _load(20.0, expected=10.0)
    assert late <= LOAD_LATE_S
    past = [t for t in reads if t > 10.0]
    assert all(b - a <= LOAD_LATE_S + 1e-9 for a, b in zip(past, past[1:], strict=False))


def test_a_load_that_ends_far_earlier_than_expected_is_seen_within_half_its_time_again():
    reads, late, _ = _load(4.0, expected=60.0)
    assert late <= 0.5 * 4.0 + 1e-9


def test_a_load_with_no_expectation_is_read_every_half_second_not_every_quarter():
    reads, late, _ = _load(30.0, expected=None)
    assert late <= LOAD_LATE_S
    assert len(reads) <= 30.0 / LOAD_LATE_S + 8


def test_every_load_the_hub_launches_teaches_its_time(device):
    learned: list[tuple[str, float]] = []
    clock, reads = FakeClock(), []
    c = TiinyClient(
        BASE,
        "k",
        transport=httpx.MockTransport(_loading_device(clock, 12.0, reads)),
        clock=clock,
        load_grace_s=0,
    )
    c.poll_interval = 0.25
    c.on_loaded = lambda m, s: learned.append((m, s))
    c.ensure_loaded(MODEL, deadline_s=600)
    assert learned and learned[0][0] == MODEL and 11.5 <= learned[0][1] <= 12.5


def test_the_expected_load_time_is_the_learned_one_else_the_devices_own(device):
    assert device_load_seconds(device) == {MODEL: 5.0}  # the model list's load_time
    device_note_load_seconds(device.pk, MODEL, 0.5)
    assert device_load_seconds(device) == {MODEL: 0.5}
    device_note_load_seconds(device.pk, MODEL, 1.5)
    assert device_load_seconds(device)[MODEL] == pytest.approx(0.3 * 1.5 + 0.7 * 0.5)
    assert client_for(device).load_seconds[MODEL] == pytest.approx(0.8)


def test_a_tensorsharp_tick_is_one_request():
    from devices.clients import TensorSharpClient
    from devices.services import device_refresh

    d = Device.objects.create(
        name="ts",
        kind="tensorsharp",
        base_url="http://ts.local",
        state=Device.State.ONLINE,
        capabilities={"kind": "tensorsharp"},
        capabilities_at=timezone.now(),
        loaded_models=[{"model_id": "m.gguf", "npu_usage": None, "status": "running"}],
    )
    sent: list[str] = []

    def handler(request: httpx.Request) -> httpx.Response:
        sent.append(request.url.path)
        return httpx.Response(200, json={"models": ["m.gguf"], "loaded": "m.gguf"})

    client = TensorSharpClient("http://ts.local", transport=httpx.MockTransport(handler))
    assert device_refresh(device_id=d.pk, client=client) == Device.State.ONLINE
    assert sent == ["/api/models"]  # was /health and /api/models


# -- a render polled every few seconds: its polls stand in for the ticks between them ----------------------------


def test_it_gives_way_to_a_render_polled_every_few_seconds(device, member, enqueued):
    """A poll 3 s away used to let a tick through between two render polls 5 s apart: they then cost a request
    each and the gauges one more in every gap."""
    live.mark_watched(f"device:{device.pk}")
    _render(device, member, next_poll_in=3.0)
    assert tasks.poll_all() == 0
    Device.objects.filter(pk=device.pk).update(next_poll_at=None)
    from jobs.models import Job

    Job.objects.filter(device=device).update(next_poll_at=timezone.now() + YIELD_WINDOW * 2)
    assert tasks.poll_all() == 1  # further than that: the tick reads the gauges


# -- after a load the hub made: the loaded list and the units are already known ------------------------------------


def _ticking_device(sent: list[str], *, mem_used: float):
    def handler(request: httpx.Request) -> httpx.Response:
        sent.append(request.url.path)
        if request.url.path == "/api/v1/sys/status":
            return httpx.Response(
                200,
                json={
                    "cpu": {"total_percent": 5.0},
                    "memory": {"usage_percent": 20.0},
                    "npus": [
                        {"utilization_percent": 0, "memory_used_mb": mem_used, "memory_total_mb": 10000}
                    ],
                },
            )
        if request.url.path == "/api/v1/models/npu/status":
            return httpx.Response(
                200,
                json={
                    "npu_total": 100,
                    "npu_used": 45,
                    "npu_available": 55,
                    "models": [{"model_id": MODEL, "npu_usage": 45, "status": "running"}],
                },
            )
        return httpx.Response(404)

    return handler


def _after_a_load(device, *, job_read_the_list: bool, mem_then: float = 5500.0) -> list[str]:
    """The device read at 1000 MB of 10000 with nothing loaded, then a load of 45 units (a share of the NPU
    memory) moved it to ``mem_then``; the tick comes after."""
    from devices.clients.tiiny import RunningModels
    from devices.services import device_note_running, device_refresh

    Device.objects.filter(pk=device.pk).update(
        npu_mem_used_mb=1000.0,
        npu_mem_total_mb=10000.0,
        npu_units_used=0,
        npu_units_total=100,
        reading_at=timezone.now() - dt.timedelta(seconds=3),
        capabilities_at=timezone.now(),
    )
    from django.core.cache import cache

    cache.set(f"devices:full-reading:{device.pk}", (timezone.now() - dt.timedelta(seconds=20)).timestamp())
    if job_read_the_list:  # as the runner does after its load (ensure_loaded's last read of ``running``)
        device_note_running(
            device_id=device.pk, state=RunningModels(running=[MODEL], usage={MODEL: 45}), loaded=MODEL
        )
    sent: list[str] = []
    client = TiinyClient(BASE, "k", transport=httpx.MockTransport(_ticking_device(sent, mem_used=mem_then)))
    assert device_refresh(device_id=device.pk, client=client) == Device.State.ONLINE
    return sent


def test_after_a_load_the_hub_made_the_tick_reads_the_status_alone(device):
    sent = _after_a_load(device, job_read_the_list=True)
    assert sent == ["/api/v1/sys/status"]  # was sys/status and npu/status: the job had just read the list
    device.refresh_from_db()
    assert device.npu_units_used == 45
    assert [m["model_id"] for m in device.loaded_models] == [MODEL]
    assert device.npu_mem_used_mb == 5500.0


def test_a_change_beyond_what_the_hub_saw_still_gets_a_full_reading(device):
    # The job saw its model loaded, then someone unloaded everything before the tick: the memory is back.
    sent = _after_a_load(device, job_read_the_list=True, mem_then=1000.0)
    assert sent[:2] == ["/api/v1/sys/status", "/api/v1/models/npu/status"]


def test_a_load_nobody_in_the_hub_saw_still_gets_a_full_reading(device):
    sent = _after_a_load(device, job_read_the_list=False)
    assert sent[:2] == ["/api/v1/sys/status", "/api/v1/models/npu/status"]  # then the capabilities: it is new
    device.refresh_from_db()
    assert device.npu_units_used == 45


def test_a_load_onto_an_empty_npu_does_not_ask_whom_to_unload():
    clock, reads = FakeClock(), []
    asked: list[str] = []
    handler = _loading_device(clock, 1.0, reads)

    def counting(request: httpx.Request) -> httpx.Response:
        asked.append(request.url.path)
        return handler(request)

    c = TiinyClient(
        BASE, "k", transport=httpx.MockTransport(counting), clock=clock, poll_interval=0.25, load_grace_s=0.0
    )
    result = c.ensure_loaded(MODEL, deadline_s=60)
    assert not result.already_loaded and result.evicted == []
    assert not any(p.endswith("/unload_candidate") for p in asked)  # nothing else runs: nobody to unload
    assert sum(p.endswith("/launch") for p in asked) == 1


def test_a_job_client_reads_the_learned_load_times_only_when_a_load_needs_them(device, monkeypatch):
    from django.core.cache import cache

    reads: list[list[str]] = []
    get_many = cache.get_many
    monkeypatch.setattr(
        cache, "get_many", lambda keys, **kw: reads.append(list(keys)) or get_many(keys, **kw)
    )
    client = client_for(device)
    assert reads == []  # made per job step; most steps load nothing
    assert client.load_seconds == {MODEL: 5.0}
    assert len(reads) == 1
    assert client._load_wait(MODEL, 1.0) > 0 and len(reads) == 1  # read once per client

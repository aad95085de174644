"""The pool with real parts (issue 25, item 4): two emulated Tiinys over HTTP, real Celery workers and beat.

Jobs for "any device" spread over both devices; a device that goes away hands its waiting pool jobs to the other at
once while its pinned jobs wait and say why; a render in flight on it keeps its claim while the device may still
finish it and moves on after ``JOBS_DEVICE_LOST_S``; a device that comes back rejoins the pool by itself.

What ran where is read from the hub's own record of device time (``DeviceUse``: one span per run of a job on a
device) and from each emulator's counters, never from timings.
"""

from __future__ import annotations

import time

import pytest

from devices.emulator.testing import run_tiiny
from devices.models import Device
from devices.services import device_register
from hub.testing import start_worker, wait_for
from jobs.models import ACTIVE_STATES, WAITING_STATES, DeviceUse, Job
from jobs.queue.services import job_submit
from jobs.tests.conftest import ENGINE_ENV, make_device, wait_job
from jobs.tests.doors.test_api_queue import token_client
from jobs.tests.queue.test_engine_tiiny import VIDEO, video

pytestmark = pytest.mark.integration

#: Both emulators' clock: a 2 s 832x480 video (420 device-seconds) renders in ~4 s, long enough to act mid-render.
SPEED = 100
#: The lock that makes a device "away" while it keeps rendering (tiiny-device-api.md: locked after a power cycle).
QUIRKS = "locked_after_power_cycle"


@pytest.fixture(scope="module")
def pool_emulators():
    with (
        run_tiiny(speed=SPEED, api_key="home-key", quirks=QUIRKS) as home,
        run_tiiny(speed=SPEED, api_key="office-key", quirks=QUIRKS) as office,
    ):
        yield home, office


def _fresh(emulator):
    """Running (a test may have stopped it) and reset: nothing loaded or rendering, counters zero, unlocked."""
    if emulator.process.poll() is not None:
        emulator.restart()
    emulator.reset(speed=SPEED, quirks=QUIRKS)
    return emulator


@pytest.fixture
def home(pool_emulators):
    yield _fresh(pool_emulators[0])
    _fresh(pool_emulators[0])


@pytest.fixture
def office(pool_emulators):
    yield _fresh(pool_emulators[1])
    _fresh(pool_emulators[1])


def pool_video(member, devices: list[Device], prompt: str) -> Job:
    """A video for "any device" of ``devices`` (it waits first where the first admits it to be ready soonest)."""
    params = {"prompt": prompt, "size": "832x480", "seconds": 2, "steps": 4}
    return job_submit(
        owner=member, device=devices[0], kind="video", model_id=VIDEO, params=params, pool=devices
    )


def spans(job: Job) -> list[tuple[int, object, object]]:
    """(device, started, ended) of each run of ``job`` that held a device, in order."""
    return list(
        DeviceUse.objects.filter(job=job).order_by("started").values_list("device_id", "started", "ended")
    )


def ran_on(job: Job) -> list[int]:
    return [device for device, _start, _end in spans(job)]


def assert_one_device_at_a_time(job: Job) -> None:
    """The job held one device at a time: each run ended before the next one began."""
    runs = spans(job)
    for (_d1, _s1, ended), (_d2, started, _e2) in zip(runs, runs[1:], strict=False):
        assert ended <= started, (job.pk, runs)


def story(job: Job) -> list[tuple[int, str, str, dict]]:
    return list(job.events.order_by("seq").values_list("seq", "state", "message", "data"))


def rendering_on(device: Device) -> Job | None:
    """The job whose render the device has (its remote id stored), if any."""
    return (
        Job.objects.filter(device=device, state__in=ACTIVE_STATES)
        .exclude(remote_id="")
        .order_by("pk")
        .first()
    )


def waiting_pool_jobs(device: Device) -> set[int]:
    return set(
        Job.objects.filter(device=device, state__in=WAITING_STATES, pinned=False).values_list("pk", flat=True)
    )


def device_state(device: Device) -> str:
    return Device.objects.filter(pk=device.pk).values_list("state", flat=True).get()


def timeline(jobs: list[Job], note: object = "") -> str:
    """Which job ran where and when (a failing assertion's story)."""
    rows = sorted(
        (started, f"job {job.pk} on device {device}: {started:%H:%M:%S.%f} → {ended:%H:%M:%S.%f}")
        for job in jobs
        for device, started, ended in spans(job)
    )
    return f"{note}\n" + "\n".join(line for _t, line in rows)


def settle(jobs: list[Job], engine, timeout: float = 60.0) -> None:
    """Each job done, and its last run's device time recorded (just after the job's end, when the device is given
    back)."""
    for job in jobs:
        wait_job(job, timeout=timeout, engine=engine)
        wait_for(
            lambda job=job: DeviceUse.objects.filter(job=job, ended__gte=job.finished_at).exists(),
            timeout=10,
            what=f"job {job.pk}'s device time",
        )


# -- a: two at once -----------------------------------------------------------------------------------------------


def test_two_pool_jobs_submitted_at_once_run_on_both_devices_at_the_same_time(engine, home, office, member):
    a, b = make_device(home, name="Home"), make_device(office, name="Office")
    jobs = [pool_video(member, [a, b], "a fox at dawn"), pool_video(member, [a, b], "a heron at dusk")]
    settle(jobs, engine)

    assert sorted(d for job in jobs for d in ran_on(job)) == sorted(
        [a.pk, b.pk]
    )  # one run each, one per device
    assert home.counters()["renders_submitted"] == 1 and office.counters()["renders_submitted"] == 1
    (_d1, start1, end1), (_d2, start2, end2) = spans(jobs[0]) + spans(jobs[1])
    assert start1 < end2 and start2 < end1, "the two renders did not overlap: one device waited for the other"
    assert home.counters()["peak_concurrent_work"] == 1 and office.counters()["peak_concurrent_work"] == 1


# -- b and d: a device goes away while jobs wait in its lane, then comes back ---------------------------------------


def test_a_device_that_goes_away_hands_its_waiting_pool_jobs_over_and_takes_pool_jobs_again_once_back(
    engine, home, office, member
):
    a, b = make_device(home, name="Home"), make_device(office, name="Office")
    # Both devices learn the shape first (one video each), so the planner sees them alike: a device with no history
    # is planned at the reference's 7 minutes, the emulators take seconds.
    settle([pool_video(member, [a, b], "warm-up one"), pool_video(member, [a, b], "warm-up two")], engine)
    assert home.counters()["renders_submitted"] == 1 and office.counters()["renders_submitted"] == 1

    # Six, so that Home's lane holds pool jobs whatever the planner learned in the warm-up: on a loaded machine one
    # device can look slower, and with four the pool gave every waiting one to Office (no job behind Home's render).
    pool = [pool_video(member, [a, b], f"a lighthouse, take {n}") for n in range(6)]
    pinned = video(member, a, prompt="only the home Tiiny may render this")
    wait_for(
        lambda: rendering_on(a) is not None and waiting_pool_jobs(a),
        timeout=30,
        what="a render on Home with a pool job waiting behind it",
    )
    in_flight = rendering_on(a)
    behind = waiting_pool_jobs(a)

    home.stop()  # unplugged mid-render
    wait_for(lambda: not waiting_pool_jobs(a), timeout=20, what="Home's waiting pool jobs to move")
    # They moved at once: the render in flight on Home still holds its claim (JOBS_DEVICE_LOST_S is 10 minutes).
    in_flight.refresh_from_db()
    assert in_flight.state in ACTIVE_STATES and in_flight.device_id == a.pk
    assert device_state(a) == "unreachable"
    assert all(Job.objects.get(pk=pk).device_id == b.pk for pk in behind)
    # The pinned job waits for its own device, and the plan says why.
    pinned.refresh_from_db()
    assert pinned.state in WAITING_STATES and pinned.device_id == a.pk
    plan = token_client(member).get(f"/api/devices/{a.pk}/plan").json()
    row = next(r for r in plan["jobs"] if r["id"] == pinned.pk)
    assert row["waiting_because"] == "The device cannot be reached.", plan
    # Jobs for "any device" queued while it is away wait for the other device.
    later = [pool_video(member, [a, b], f"a harbour at night, take {n}") for n in range(4)]
    assert all(Job.objects.get(pk=job.pk).device_id == b.pk for job in later)
    settle([Job.objects.get(pk=pk) for pk in behind], engine)
    assert all(ran_on(Job.objects.get(pk=pk)) == [b.pk] for pk in behind)

    # Home comes back on the same address: nobody tells the hub, it finds out and hands it work again.
    waiting_on_office = waiting_pool_jobs(b)
    assert waiting_on_office, "nothing left for Home to take: the test needs pool jobs still waiting"
    home.restart()
    everything = [*pool, pinned, *later]
    settle(everything, engine, timeout=90)

    took = [pk for pk in waiting_on_office if a.pk in ran_on(Job.objects.get(pk=pk))]
    assert took, timeline(everything, waiting_on_office)
    assert ran_on(pinned) == [a.pk]
    # The render Home lost with its power (a fresh emulator does not know it) ran again, once; nothing ran twice.
    in_flight.refresh_from_db()
    assert in_flight.state == "done" and len(ran_on(in_flight)) == 2 and ran_on(in_flight)[0] == a.pk
    for job in everything:
        job.refresh_from_db()
        assert job.state == "done"
        assert_one_device_at_a_time(job)
        if job.pk != in_flight.pk:
            assert len(ran_on(job)) == 1, (job.pk, spans(job))
    assert home.counters()["peak_concurrent_work"] == 1 and office.counters()["peak_concurrent_work"] == 1


# -- c: a render in flight on a device that goes away ------------------------------------------------------------


@pytest.mark.parametrize("away", ["unplugged", "locked"])
def test_a_render_on_a_device_away_for_device_lost_s_moves_on_and_runs_once_on_the_other(
    engine, home, office, member, away
):
    """``unplugged``: the device is gone for good, its render with it. ``locked``: every call answers 502 while it
    keeps rendering; once it is back, the render the hub gave up is stopped there before it runs anything else."""
    engine.stop_all()  # workers that give a device away mid-render 3 s instead of 10 minutes
    engine.workers["lost"] = start_worker("lost", **ENGINE_ENV, JOBS_DEVICE_LOST_S="3")
    a, b = make_device(home, name="Home"), make_device(office, name="Office")
    job = pool_video(member, [a, b], "a glacier calving")
    wait_for(lambda: rendering_on(a) is not None, timeout=30, what="the render to start on Home")
    first_remote = rendering_on(a).remote_id
    assert home.counters()["renders_submitted"] == 1

    home.stop() if away == "unplugged" else home.lock()
    settle([job], engine)

    assert ran_on(job) == [a.pk, b.pk]
    assert_one_device_at_a_time(job)
    assert office.counters()["renders_submitted"] == 1  # sent once to Office …
    events = story(job)
    lost = [e for e in events if e[1] == "interrupted"]
    assert len(lost) == 1, events
    [(seq_lost, _state, message, data)] = lost
    assert (
        data["lost_device"] == a.pk and data["remote_id"] == first_remote and "Home has been away" in message
    )
    sent = [seq for seq, _state, message, _d in events if message == "Sending to the device."]
    # … and only after the hub gave Home's render up: never sent twice while that render held its claim.
    assert len(sent) == 2 and sent[0] < seq_lost < sent[1], events
    job.refresh_from_db()
    assert job.requeues == 1
    if away == "locked":
        home.unlock()  # back: the render given up is stopped there, and Home never got a second one
        stopped = "Its earlier render on Home was stopped there."
        wait_for(lambda: any(e[2] == stopped for e in story(job)), timeout=30, what="the lost render's stop")
        counters = home.counters()
        assert counters["renders_submitted"] == 1 and counters["peak_concurrent_work"] == 1, counters
        assert any(k.startswith("DELETE /v1/videos/") for k in counters["requests"]), counters
        wait_for(lambda: device_state(a) == "online", timeout=20, what="Home online again")


def test_a_render_on_a_device_away_for_less_than_device_lost_s_keeps_its_claim_and_finishes_there(
    engine, home, office, member
):
    a, b = make_device(home, name="Home"), make_device(office, name="Office")
    job = pool_video(member, [a, b], "a city in the rain")
    wait_for(lambda: rendering_on(a) is not None, timeout=30, what="the render to start on Home")
    remote = rendering_on(a).remote_id

    home.lock()  # away (every call answers 502), while it keeps rendering
    wait_for(lambda: device_state(a) == "locked", timeout=20, what="the hub to see Home locked")
    # A few reconcile rounds (every second here) pass while Home is away: none gives the render up.
    time.sleep(3)
    job.refresh_from_db()
    assert job.state in ACTIVE_STATES and job.device_id == a.pk and job.remote_id == remote
    home.unlock()
    settle([job], engine)

    assert job.remote_id == remote and ran_on(job) == [a.pk]
    assert home.counters()["renders_submitted"] == 1 and office.counters()["renders_submitted"] == 0
    assert not [e for e in story(job) if e[1] == "interrupted"]
    wait_for(lambda: device_state(a) == "online", timeout=20, what="Home back online")


# -- a device added while jobs wait for any device ------------------------------------------------------------------


def test_a_device_added_while_jobs_wait_for_any_device_takes_its_share_of_them(engine, home, office, member):
    a = make_device(home, name="Home")
    bearer = token_client(member)
    body = {"kind": "video", "model": VIDEO, "size": "832x480", "seconds": 2, "steps": 4}
    posted = [
        bearer.post("/api/jobs", {**body, "prompt": f"a fox {i}"}, content_type="application/json")
        for i in range(4)
    ]
    assert [r.status_code for r in posted] == [201] * 4, posted[0].content
    jobs = list(Job.objects.filter(pk__in=[r.json()["id"] for r in posted]).order_by("pk"))
    assert [(job.pinned, job.pool) for job in jobs] == [(False, [a.pk])] * 4  # Home is the only device yet

    # An admin adds the office's Tiiny: the hub knows nothing of it until its first poll reads what it can do.
    b = device_register(name="Office", kind="tiiny", base_url=office.base_url, api_key=office.api_key)
    settle(jobs, engine, timeout=90)

    where = sorted(d for job in jobs for d in ran_on(job))
    assert b.pk in where and a.pk in where, timeline(jobs, "the jobs did not spread to the new device")
    assert office.counters()["renders_submitted"] >= 1
    joined = [job for job in jobs if any("Office can run it now too" in m for _s, _st, m, _d in story(job))]
    assert joined, "no waiting job's story tells that the new device may run it"
    for job in jobs:
        assert_one_device_at_a_time(job)

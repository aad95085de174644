"""The engine wastes no device time: it notices the end of a render or a stage quickly, sends the first request
after a load at once, and after a crash tells two identical prompts apart. Real worker, beat and emulator.

These tests run their own worker with the production poll rhythm (2 s base, 20 s cap, 0.15 s near the end),
not the short test intervals, so that a wait the engine no longer makes would show.
"""

from __future__ import annotations

import pytest

from jobs.models import Job, RenderStat
from jobs.queue.services import job_submit
from jobs.tests.conftest import ENGINE_ENV, wait_job

pytestmark = pytest.mark.integration

VIDEO = "MiniMaxAI/MiniMax-H3-Turbo"
IMAGE = "Tongyi-MAI/Z-Image-Turbo"
PNG = (
    b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR\x00\x00\x00\x01\x00\x00\x00\x01\x08\x02\x00\x00\x00\x90wS\xde\x00"
    b"\x00\x00\x0cIDATx\x9cc\xf8\x0f\x00\x00\x01\x01\x00\x05\x18\xd8N\x00\x00\x00\x00IEND\xaeB`\x82"
)
PRODUCTION_RHYTHM = {"JOBS_POLL_INTERVAL_S": "2", "JOBS_POLL_MAX_S": "20", "JOBS_POLL_MIN_S": "0.15"}


@pytest.fixture
def rhythm_engine(engine):
    """The engine fixture's beat, with one worker on the production poll rhythm instead of ``e1``."""
    from hub.testing import start_worker

    engine.stop_all()

    def start(**env: str):
        engine.stop_all()
        engine.workers["waits"] = start_worker("waits", concurrency=2, **{**ENGINE_ENV, **env})
        return engine

    start(**PRODUCTION_RHYTHM)
    engine.restart = start
    yield engine
    engine.stop_all()


def _event_at(job: Job, text: str):
    return next(e.at for e in job.events.order_by("seq") if text in e.message)


def video(member, device, **params):
    p = {"prompt": "a red fox in the snow", "size": "832x480", "seconds": 2, "steps": 4, **params}
    return job_submit(owner=member, device=device, kind="video", model_id=VIDEO, params=p)


@pytest.mark.rhythm
def test_it_notices_the_end_of_a_render_within_a_fraction_of_a_second(rhythm_engine, tiiny, pocket, member):
    from devices.emulator.catalog import video_render_seconds

    tiiny.set_quirks("none")
    speed = 60.0
    tiiny.set_speed(speed)  # 420 device-seconds: 7 s here, several 2 s base polls long
    job = video(member, pocket)
    wait_job(job, timeout=60, engine=rhythm_engine)
    render_s = video_render_seconds(832, 480, 2, 4) / speed
    ended = _event_at(job, "The device accepted it").timestamp() + render_s
    noticed = _event_at(job, "Rendered; downloading").timestamp()
    # The create call returns once the render is under way, so `ended` is if anything a little early.
    assert -0.1 < noticed - ended < 0.75, f"noticed {noticed - ended:.2f} s after the render ended"


@pytest.mark.rhythm
def test_a_watched_render_costs_the_device_at_most_one_request_a_second(rhythm_engine, tiiny, pocket, member):
    """Issue 13: from submit to done, its model load included, with someone watching the device (the status
    tick every 2 s). Requests are counted against the render's own length (device time / speed), not timed."""
    import time

    from devices.emulator.catalog import video_render_seconds
    from devices.models import Device
    from hub import live
    from hub.testing import wait_for

    tiiny.set_quirks("none")
    speed = 10.0
    tiiny.set_speed(speed)  # 420 device-seconds: 42 s here
    live.mark_watched(f"device:{pocket.pk}")
    # Someone has been watching: the poller has read the device (a first contact also refreshes what it can do).
    wait_for(
        lambda: Device.objects.get(pk=pocket.pk).reading_at is not None, timeout=20, what="a first reading"
    )
    time.sleep(2.5)
    before = dict(tiiny.counters()["requests"])
    job = video(member, pocket)
    wait_job(job, timeout=120, engine=rhythm_engine)
    sent = {k: v - before.get(k, 0) for k, v in tiiny.counters()["requests"].items() if v > before.get(k, 0)}
    render_s = video_render_seconds(832, 480, 2, 4) / speed
    assert sum(sent.values()) <= render_s, sent
    assert sent["POST /api/v1/models/{id}/launch"] == 1  # the load was part of it


@pytest.mark.rhythm
def test_a_short_3d_stage_is_not_left_waiting_for_a_full_poll(rhythm_engine, tiiny, pocket, member):
    from django.core.files.uploadedfile import SimpleUploadedFile

    tiiny.set_quirks("none")
    job = job_submit(
        owner=member,
        device=pocket,
        kind="mesh",
        model_id="tencent/Hunyuan3D-2.1",
        params={"stages": ["shape", "export"], "format": "glb", "seed": 5},
        upload_files={"image": SimpleUploadedFile("obj.png", PNG, "image/png")},
    )
    wait_job(job, timeout=60, engine=rhythm_engine)
    # Each stage takes milliseconds at this speed: the first poll of a stage comes well before the 2 s base.
    sent = _event_at(job, "Next stage sent")
    noticed = _event_at(job, "Rendered; downloading")
    assert (noticed - sent).total_seconds() < 1.0
    first = (sent - _event_at(job, "The device accepted it")).total_seconds()
    assert first < 1.0


@pytest.mark.rhythm
@pytest.mark.parametrize("quirks", ["none", "all"])
def test_it_sends_the_first_request_after_a_load_at_once(rhythm_engine, tiiny, pocket, member, quirks):
    """A 5 s readiness window on the hub's side: the job does not sit it out, it sends and retries inside it.
    With the quirks on, the emulator answers 502 inside its own (device-time) window and xh2a once."""
    rhythm_engine.restart(**PRODUCTION_RHYTHM, JOBS_LOAD_GRACE_S="5")
    tiiny.set_quirks(quirks)
    job = job_submit(
        owner=member,
        device=pocket,
        kind="image",
        model_id=IMAGE,
        params={"prompt": "a cat", "size": "512x512", "n": 1, "steps": 8},
    )
    wait_job(job, timeout=40, engine=rhythm_engine)
    # From the claim to the answer: the load (milliseconds here) and the first request, not a 5 s wait.
    took = (_event_at(job, "Saved the result") - _event_at(job, "Started")).total_seconds()
    assert took < 2.5, f"{took:.1f} s from the start to the image: the window was sat out"
    calls = sum(v for k, v in tiiny.counters()["requests"].items() if "images/generations" in k)
    assert calls == (1 if quirks == "none" else 2)  # at once; with the quirk, one xh2a and one retry
    # The wait for the model is the load's: the shape learns the render alone.
    job.refresh_from_db()
    wait = job.remote_data["ready_wait_s"]
    assert wait < 0.05 if quirks == "none" else wait > 0
    stat = RenderStat.objects.get(device=pocket, kind="image", model_id=IMAGE)
    render = job.device_seconds - job.remote_data["load_s"] - wait
    assert stat.samples == 1 and stat.mean_s == pytest.approx(render, abs=0.01)


# -- crash recovery: two identical prompts -----------------------------------------------------------------------


def _crash_after_submit(job: Job, *, reach_device: bool) -> str | None:
    """Play the worker that died: up to the create call (the hub's tag stored first, as the engine does),
    then SIGKILL-equivalent: nothing after it. Returns the device's id if the create reached it."""
    from django.utils import timezone

    from jobs.kinds.table import runner_for

    job = Job.objects.select_related("device").get(pk=job.pk)
    runner = runner_for(job)
    marks = runner.submit_marks()
    now = timezone.now()
    Job.objects.filter(pk=job.pk).update(
        state="submitted",
        submit_started_at=now,
        attempts=1,
        started_at=now,
        remote_data={**job.remote_data, **marks},
    )
    if not reach_device:
        return None
    job.refresh_from_db()
    runner.job = job
    return runner.submit()[0]


def _recover(engine, pocket) -> None:
    from jobs.core import lease

    lease.lease_release(pocket.pk)
    engine.restart(**PRODUCTION_RHYTHM)  # reconcile (beat) finds it: submitted, no remote id, no live lease


@pytest.mark.parametrize("seed", [None, 7])
def test_it_does_not_adopt_an_identical_prompts_render_after_a_crash(
    rhythm_engine, tiiny, pocket, member, seed
):
    """A finished a moment ago; B (same prompt, and with ``seed`` the same seed too) died before its create
    reached the device. Matching on prompt and time alone, B took A's render as its own."""
    tiiny.set_speed(600)  # the one-hour cut-off is 6 s away here: room for a loaded machine
    params = {} if seed is None else {"seed": seed}
    a = video(member, pocket, **params)
    wait_job(a, timeout=40, engine=rhythm_engine)
    rhythm_engine.stop_all()
    b = video(member, pocket, **params)
    _crash_after_submit(b, reach_device=False)
    _recover(rhythm_engine, pocket)
    wait_job(b, timeout=40, engine=rhythm_engine)
    assert b.remote_id and b.remote_id != a.remote_id
    assert tiiny.counters()["renders_submitted"] == 2
    assert not any("already started" in e.message for e in b.events.all())


def test_it_adopts_its_own_render_not_the_identical_one_before_it(rhythm_engine, tiiny, pocket, member):
    tiiny.set_speed(600)
    a = video(member, pocket)
    wait_job(a, timeout=40, engine=rhythm_engine)
    rhythm_engine.stop_all()
    b = video(member, pocket)
    created = _crash_after_submit(b, reach_device=True)
    _recover(rhythm_engine, pocket)
    wait_job(b, timeout=40, engine=rhythm_engine)
    assert b.remote_id == created != a.remote_id
    assert tiiny.counters()["renders_submitted"] == 2
    assert any("already started" in e.message for e in b.events.all())

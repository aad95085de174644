"""The planner's own arithmetic: learning from finished jobs, time left from a job's progress, replanning.

The per-kind shapes and seeds it starts from are ``jobs.kinds.estimates`` (tested in ``jobs/tests/kinds``)."""

from __future__ import annotations

import datetime as dt
from types import SimpleNamespace

import pytest
from django.core.cache import cache
from django.utils import timezone

from devices import loads
from devices.models import Device
from jobs.models import Job
from jobs.queue.engine import _note_load, _note_ready_wait
from jobs.queue.eta import estimate, learn, note_progress, plan, remaining_seconds

V = "MiniMaxAI/MiniMax-H3-Turbo"


def test_it_learns_from_finished_jobs(member, db):
    device = Device.objects.create(name="d", base_url="http://127.0.0.1:1")
    params = {"prompt": "x", "size": "832x480", "seconds": 2, "steps": 4}
    assert estimate(
        device_id=device.pk, device_kind="tiiny", kind="video", model_id=V, params=params
    ) == pytest.approx(420, rel=0.01)
    for secs in (300.0, 400.0):
        learn(
            Job.objects.create(
                owner=member, device=device, kind="video", model_id=V, params=params, device_seconds=secs
            )
        )
    assert estimate(
        device_id=device.pk, device_kind="tiiny", kind="video", model_id=V, params=params
    ) == pytest.approx(0.3 * 400 + 0.7 * 300)


def test_the_jobs_waiting_with_the_same_shape_on_that_device_take_what_it_learned(member, db):
    device = Device.objects.create(name="d", base_url="http://127.0.0.1:1")
    other = Device.objects.create(name="e", base_url="http://127.0.0.1:2")
    params = {"prompt": "x", "size": "832x480", "seconds": 2, "steps": 4}
    longer = dict(params, seconds=7)

    def job(on, state="queued", **kw):
        fields = {"params": params, "estimate_s": 420.0, **kw}
        return Job.objects.create(owner=member, device=on, kind="video", model_id=V, state=state, **fields)

    alike, waiting_later = job(device), job(device, params=dict(params, prompt="y"), state="scheduled")
    unlike, elsewhere, started = job(device, params=longer), job(other), job(device, state="running")
    learn(job(device, state="done", device_seconds=300.0))
    for row, estimate_s in [(alike, 300.0), (waiting_later, 300.0), (unlike, 420.0), (elsewhere, 420.0),
                            (started, 420.0)]:  # fmt: skip
        row.refresh_from_db()
        assert row.estimate_s == pytest.approx(estimate_s), row


def _learned_image(member, runs: list[tuple[float, dict]]) -> float:
    """An image shape's estimate on a new device once it learned ``runs``: (device seconds, the job's memory)."""
    device = Device.objects.create(name="d", base_url="http://127.0.0.1:1")
    params = {"prompt": "x", "size": "512x512", "steps": 8, "n": 1}
    model = "Tongyi-MAI/Z-Image-Turbo"
    for secs, data in runs:
        learn(
            Job.objects.create(
                owner=member,
                device=device,
                kind="image",
                model_id=model,
                params=params,
                device_seconds=secs,
                remote_data=data,
            )
        )
    return estimate(device_id=device.pk, device_kind="tiiny", kind="image", model_id=model, params=params)


def test_it_learns_the_render_without_the_model_load_before_it(member, db):
    """The first job after a load spends the load on the device too; its shape learns the render alone (the
    plan adds a load where one is due), so the next jobs, with the model loaded, are not told a load too long."""
    assert _learned_image(member, [(39.0, {"load_s": 30.0}), (9.0, {})]) == pytest.approx(9.0)


def test_it_learns_the_render_without_the_wait_for_the_model_after_a_load(member, db):
    """A Tiiny's first request after a load waits out the readiness window (retried inside it): that wait is the
    load's, not the render's. An image that renders in 9 s taught its shape 19 s before."""
    assert _learned_image(member, [(49.0, {"load_s": 30.0, "ready_wait_s": 10.0})]) == pytest.approx(9.0)


def test_the_engine_notes_a_load_and_nothing_when_the_model_was_loaded(member, db):
    device = Device.objects.create(name="d", base_url="http://127.0.0.1:1")
    job = Job.objects.create(
        owner=member,
        device=device,
        kind="image",
        model_id="m",
        params={},
        started_at=timezone.now() - dt.timedelta(seconds=12),
        remote_data={"tag": 7},
    )
    _note_load(job, SimpleNamespace(loaded=False))
    assert Job.objects.get(pk=job.pk).remote_data == {"tag": 7}
    _note_load(job, SimpleNamespace(loaded=True))
    stored = Job.objects.get(pk=job.pk).remote_data
    assert stored["tag"] == 7 and 12 <= stored["load_s"] < 20
    assert job.remote_data == stored


def test_the_engine_notes_the_wait_after_a_load_and_the_plans_count_it_with_the_load(member, db):
    device = Device.objects.create(
        name="d",
        base_url="http://127.0.0.1:1",
        capabilities={"models": [{"id": "m", "load_s": 30.0}]},
    )
    cache.delete(loads._ready_key(device.pk))
    cache.delete(loads._load_key(device.pk, "m"))
    job = Job.objects.create(owner=member, device=device, kind="image", model_id="m", params={}, state="done")
    _note_ready_wait(
        job, SimpleNamespace(loaded=False, ready_wait_s=4.0)
    )  # the model was loaded: no load's wait
    _note_ready_wait(
        job, SimpleNamespace(loaded=True, ready_wait_s=None)
    )  # the first request never went through
    assert Job.objects.get(pk=job.pk).remote_data == {}
    assert loads.device_load_costs(device) == {"m": 30.0}

    _note_ready_wait(job, SimpleNamespace(loaded=True, ready_wait_s=8.0))
    assert Job.objects.get(pk=job.pk).remote_data == {"ready_wait_s": 8.0}
    assert loads.device_load_costs(device) == {"m": 38.0}
    assert loads.device_load_seconds(device) == {"m": 30.0}  # what the client expects of a load: unchanged

    # The device's own plan counts the load and the wait where a load is due (a job for the unloaded model).
    waiting = Job.objects.create(
        owner=member, device=device, kind="image", model_id="m", params={}, estimate_s=5.0
    )
    now = timezone.now()
    ((_job, start, finish),) = [row for row in plan(device.pk, now=now) if row[0].pk == waiting.pk]
    assert (finish - start).total_seconds() == pytest.approx(5.0 + 38.0)
    cache.delete(loads._ready_key(device.pk))


# -- time left follows the job's own progress ---------------------------------------------------------------


def _running(progress: float, estimate_s: float = 1020.0, anchor=None):
    data = {"eta_anchor": [anchor[0].isoformat(), anchor[1]]} if anchor else {}
    return SimpleNamespace(estimate_s=estimate_s, progress=progress, remote_data=data)


def test_time_left_is_never_zero_while_work_remains():
    now = dt.datetime(2026, 12, 1, 12, tzinfo=dt.UTC)
    # A job at 18 % long past its start once showed "in 0 s": what is left of the estimate still counts.
    assert remaining_seconds(_running(18.0, 600.0), now=now) == pytest.approx(492)


def _polled(progress: float, *, read_s: float, seen: float | None = None):
    """A 420 s render sent at noon, last polled ``read_s`` seconds later, when it read ``seen`` (default: the
    progress it shows)."""
    sent = dt.datetime(2026, 12, 1, 12, tzinfo=dt.UTC)
    pace = {
        "id": "v1",
        "polls": [[0.0, 0.0], [read_s, progress / 100]],
        "progress": progress if seen is None else seen,
    }
    return SimpleNamespace(
        estimate_s=420.0,
        progress=progress,
        remote_id="v1",
        submit_started_at=sent,
        remote_data={"pace": pace},
    ), sent


def test_time_left_counts_down_from_when_the_progress_was_read():
    """The hub polls a long render rarely until near its end (bench_pool: a lane planned to free in 16 s, and
    later in 18 s, that freed in 2 s): the render goes on between polls, and so does the clock."""
    job, sent = _polled(50.0, read_s=210.0)
    assert remaining_seconds(job, now=sent + dt.timedelta(seconds=210)) == pytest.approx(210)
    assert remaining_seconds(job, now=sent + dt.timedelta(seconds=310)) == pytest.approx(110)
    # Past the end it foretold: a little is still left, never nothing.
    assert remaining_seconds(job, now=sent + dt.timedelta(seconds=600)) == pytest.approx(21)
    # A poll under way has just read more than the last noted one: the progress is as of now.
    fresh, _ = _polled(60.0, read_s=210.0, seen=50.0)
    assert remaining_seconds(fresh, now=sent + dt.timedelta(seconds=310)) == pytest.approx(168)


def test_time_left_follows_a_job_faster_than_its_estimate():
    now = dt.datetime(2026, 12, 1, 12, tzinfo=dt.UTC)
    # A 3D job estimated at 17 min moved from 7 % to 57 % in 2 minutes: the rest should take about 2.4 min.
    job = _running(57.0, 1020.0, anchor=(now - dt.timedelta(minutes=2), 0.07))
    left = remaining_seconds(job, now=now)
    own = 0.43 * 120 / 0.5
    assert left == pytest.approx(0.9 * own + 0.1 * 1020 * 0.43, rel=1e-6)
    assert left < 200  # not "in 17 min" any more
    # Early on, the model's history still weighs most.
    early = remaining_seconds(_running(9.0, 1020.0, anchor=(now - dt.timedelta(seconds=10), 0.07)), now=now)
    assert early > 0.5 * 1020 * 0.91


def test_a_progress_update_replans_the_device_when_the_finish_drifts(member, db):
    device = Device.objects.create(name="d", base_url="http://127.0.0.1:1")
    now = timezone.now()
    job = Job.objects.create(
        owner=member,
        device=device,
        kind="video",
        model_id=V,
        params={"size": "832x480", "seconds": 2, "steps": 4},
        state="running",
        started_at=now - dt.timedelta(minutes=2),
        estimate_s=1020.0,
        progress=7.0,
    )
    waiting = Job.objects.create(
        owner=member, device=device, kind="video", model_id=V, params=job.params, estimate_s=420.0
    )
    note_progress(job.pk)  # first movement seen: the anchor
    job.refresh_from_db()
    assert job.remote_data["eta_anchor"][1] == pytest.approx(0.07)
    anchor_at = dt.datetime.fromisoformat(job.remote_data["eta_anchor"][0])
    Job.objects.filter(pk=job.pk).update(
        progress=57.0,
        remote_data={"eta_anchor": [(anchor_at - dt.timedelta(minutes=2)).isoformat(), 0.07]},
    )
    note_progress(job.pk)
    job.refresh_from_db()
    waiting.refresh_from_db()
    assert job.predicted_finish - timezone.now() < dt.timedelta(minutes=4)
    assert waiting.predicted_start == job.predicted_finish  # the next job's start moved with it

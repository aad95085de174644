"""The path from a render's end to the next request: the device waits for no live update on it.

Each step there (collecting, done, the next job's claim, its submit) used to replan the device and push the job
and the queue on its own, 10-30 ms of CPU each, before the next step. Now a step's live updates go out once, after
the next job is under way (``jobs.core.transitions.held``), a job moving on while it holds the device replans only
when its finish drifted, and a replan that moved nothing keeps the stored plan.
"""

from __future__ import annotations

import datetime as dt

import pytest
from django.utils import timezone

from jobs.kinds.runners import PollResult
from jobs.tests.ui_fixtures import hold_device, make_job

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.integration]


@pytest.fixture
def seen(monkeypatch):
    """The order of what happens: 'run:<job>' (the next job's task is sent), 'plan' (the device is replanned),
    'queue' (the queue is pushed); '~' marks what another thread did."""
    import threading

    from jobs.live import broadcast
    from jobs.queue import enqueue, eta

    out: list[str] = []
    plan, queue = eta.plan_device, broadcast.broadcast_queue
    main = threading.current_thread()

    def mark(what: str) -> str:
        return what if threading.current_thread() is main else f"~{what}"

    def planned(device_id):
        out.append(mark("plan"))
        plan(device_id)

    def pushed(device_id):
        out.append(mark("queue"))
        queue(device_id)

    monkeypatch.setattr(eta, "plan_device", planned)
    monkeypatch.setattr(broadcast, "broadcast_queue", pushed)
    send = enqueue.send

    def sent(task, *args, **options):
        if task == "run_job":  # seen, not run
            out.append(f"run:{args[0]}")
        elif task != "make_thumbnail":
            return send(task, *args, **options)

    monkeypatch.setattr(enqueue, "send", sent)
    return out


def test_held_changes_go_out_once_when_the_block_ends(member, device, seen):
    from jobs.core.changes import held, replan
    from jobs.core.transitions import job_note, job_transition

    a = make_job(member, device, state="running")
    b = make_job(member, device)
    hold_device(device, a)
    with held():
        assert job_transition(a.pk, from_states=["running"], to="done", message="Done.")
        job_note(b.pk, "A note.")
        replan(device.pk)
        assert seen == []  # nothing yet
    assert seen == ["plan", "queue"]  # once, for the whole block


class FakeRunner:
    """A poll-style runner whose render is over: the poll says done, the download is instant."""

    style = "poll"

    def __init__(self, job, log):
        self.job, self.device, self.log = job, job.device, log

    def poll(self):
        return PollResult("done", 100.0, "Rendered")

    def advance(self):
        return None

    def collect(self):
        _join_aside()
        self.log.append("download")


def _join_aside() -> None:
    import threading

    for t in threading.enumerate():
        if t.name == "live-updates":
            t.join(5)


def test_the_poll_that_sees_the_end_starts_the_next_job_before_any_replan_or_push(
    member, device, seen, monkeypatch
):
    from jobs.models import Job
    from jobs.queue import engine

    a = make_job(member, device, state="running", remote_id="v1", poll_ticket=7)
    b = make_job(member, device, kind="image")
    hold_device(device, a)
    monkeypatch.setattr(engine, "runner_for", lambda job: FakeRunner(job, seen))
    engine.poll(a.pk, 7)
    assert Job.objects.get(pk=a.pk).state == "done"
    assert Job.objects.get(pk=b.pk).state == "preparing"
    # "collecting" goes out (from a thread) before the download; the rest once, after the next job's start
    assert seen == ["~plan", "~queue", "download", f"run:{b.pk}", "plan", "queue"]


def test_a_blocking_jobs_end_starts_the_next_job_before_any_replan_or_push(member, device, seen):
    from jobs.models import Job
    from jobs.queue import engine

    a = make_job(member, device, kind="image", state="running")
    b = make_job(member, device)
    hold_device(device, a)
    engine._executed(Job.objects.select_related("device").get(pk=a.pk), None)
    assert Job.objects.get(pk=a.pk).state == "done"
    assert Job.objects.get(pk=b.pk).state == "preparing"
    assert seen == [f"run:{b.pk}", "plan", "queue"]


def test_the_dispatch_task_sends_the_run_before_any_replan_or_push(member, device, seen):
    """A free device's dispatch (the ``dispatch`` task, not a job's end): its claim used to replan the device, and
    through the pool every other one, before the run was sent (``bench/bench_plan_scale.py`` measured it)."""
    from jobs.models import Job
    from jobs.queue.dispatch import dispatch_device

    job = make_job(member, device)
    assert dispatch_device(device.pk) == job.pk
    assert Job.objects.get(pk=job.pk).state == "preparing"
    assert seen[0] == f"run:{job.pk}" and "plan" in seen[1:]


def test_the_submitted_jobs_replan_and_pushes_wait_for_the_create_call(member, device, seen, monkeypatch):
    from jobs.models import Job
    from jobs.queue import engine

    a = make_job(member, device, state="preparing", predicted_finish=None)  # no plan yet: it replans
    hold_device(device, a)

    class Submitting(FakeRunner):
        def prepare(self, *, polite):
            return []

        def submit(self):
            seen.append("create")
            return "v9", {}

    monkeypatch.setattr(engine, "runner_for", lambda job: Submitting(job, seen))
    monkeypatch.setattr(engine, "schedule_poll", lambda *a, **kw: None)
    engine.run(a.pk)
    assert Job.objects.get(pk=a.pk).remote_id == "v9"
    assert seen[0] == "create" and "plan" in seen and "queue" in seen


@pytest.mark.parametrize(("drift_s", "replans"), [(0, False), (120, True)])
def test_a_job_moving_on_while_it_holds_the_device_replans_only_when_its_finish_drifted(
    member, device, seen, drift_s, replans
):
    from jobs.core.transitions import job_transition

    # 37 % of 420 s done: 264.6 s left. Stored finish: that, or two minutes off.
    finish = timezone.now() + dt.timedelta(seconds=264.6 + drift_s)
    a = make_job(member, device, state="submitted", predicted_finish=finish)
    hold_device(device, a)
    assert job_transition(a.pk, from_states=["submitted"], to="running", message="Rendering.")
    assert ("plan" in seen) is replans
    assert "queue" in seen  # the running card shows the state either way


def test_a_replan_that_moved_nothing_keeps_the_stored_plan(member, device, seen, monkeypatch):
    from jobs.queue import eta

    make_job(member, device, state="running")
    make_job(member, device)
    make_job(member, device, prompt="the last one")
    eta.plan_device(device.pk)
    writes = []
    write = eta._write_plan
    monkeypatch.setattr(eta, "_write_plan", lambda rows: writes.append(len(rows)))
    eta.plan_device(device.pk)  # a few milliseconds later: every time moved by them
    assert writes == []
    monkeypatch.setattr(eta, "_write_plan", write)
    from jobs.models import Job

    Job.objects.filter(device=device, state="running").update(progress=90.0)  # minutes sooner
    monkeypatch.setattr(eta, "_write_plan", lambda rows: writes.append(len(rows)))
    eta.plan_device(device.pk)
    assert writes == [3]  # the whole plan, so a start is still the finish before it


def test_a_blocking_jobs_request_goes_out_before_the_pushes_of_its_start(member, device, seen, monkeypatch):
    """Its request holds the worker for the whole render: "running" and the runner's first report (made just
    before the request) are pushed from a thread of their own, once that report is made."""
    import threading

    from jobs.live import broadcast
    from jobs.models import Job
    from jobs.queue import engine

    a = make_job(member, device, kind="speech", state="preparing", predicted_finish=None)
    hold_device(device, a)
    main = threading.current_thread()
    log: list[tuple[str, bool]] = []  # (what, in the engine's own thread)
    push = broadcast.broadcast_job

    def pushed(job_id, **kw):
        log.append((f"push:{kw.get('entered') or 'tick'}", threading.current_thread() is main))
        push(job_id, **kw)

    monkeypatch.setattr(broadcast, "broadcast_job", pushed)

    class Speaking(FakeRunner):
        style = "blocking"

        def execute(self, progress):
            assert not progress(5.0, "Speaking")
            log.append(("request", True))

    job = Job.objects.select_related("device").get(pk=a.pk)
    engine._execute(job, Speaking(job, seen), threading.Event())
    for t in threading.enumerate():
        if t.name == "live-updates":
            t.join(5)
    assert Job.objects.get(pk=a.pk).state == "done"
    mine = [what for what, in_main in log if in_main]
    assert mine[0] == "request"  # the engine's thread pushed nothing before the request
    assert ("push:running", False) in log  # "running" went out, from the other thread

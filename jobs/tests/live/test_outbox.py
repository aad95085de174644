"""transition -> outbox -> pages/pushes/notifications.

A transaction's changes are collected while it runs (``jobs.core.changes``) and handed to the outbox
(``jobs.live.outbox``) once it commits: once per transaction, nothing on a rollback, every registered handler with
what changed, stage by stage.
"""

from __future__ import annotations

import datetime as dt

import pytest
from django.db import connection, transaction
from django.utils import timezone

from jobs.core.changes import Changes, Entered, held, job_ticked, plan_changed
from jobs.core.transitions import job_note, job_transition
from jobs.live import outbox
from jobs.models import Job
from jobs.tests.ui_fixtures import make_job

pytestmark = pytest.mark.django_db


@pytest.fixture
def sent(monkeypatch) -> list[tuple[str, Changes]]:
    """(stage, collection) for every handler call the outbox makes; the real handlers are set aside."""
    calls: list[tuple[str, Changes]] = []
    handlers = {stage: [lambda c, stage=stage: calls.append((stage, c))] for stage in outbox.STAGES}
    monkeypatch.setattr(outbox, "_handlers", handlers)
    return calls


def _collections(sent: list[tuple[str, Changes]]) -> list[Changes]:
    """Each collection sent, once, in the order sent (every stage got the same object)."""
    out: list[Changes] = []
    for _, changes in sent:
        if not any(changes is c for c in out):
            out.append(changes)
    return out


def test_a_transactions_changes_are_collected_and_sent_once_after_it_commits(
    member, device, sent, django_capture_on_commit_callbacks
):
    a, b, c = (make_job(member, device) for _ in range(3))
    with django_capture_on_commit_callbacks(execute=True):
        with transaction.atomic():
            assert job_transition(a.pk, from_states=["queued"], to="preparing", message="Loading.")
            job_note(b.pk, "A note.")
            job_ticked(c.pk)
            plan_changed(device.pk)
            assert sent == []  # nothing before the commit
    (changes,) = _collections(sent)
    assert [stage for stage, _ in sent] == list(outbox.STAGES)  # each stage once, in order
    seq = Job.objects.get(pk=a.pk).last_seq
    assert changes.jobs == {a.pk: "preparing", b.pk: None}
    assert changes.ticks == {c.pk}
    assert changes.replan == {device.pk} and changes.queues == {device.pk}  # a job entered the plan
    assert changes.entered == [Entered(a.pk, "preparing", seq)]


def test_a_rolled_back_transaction_sends_nothing_and_holds_back_nothing(
    member, device, sent, django_capture_on_commit_callbacks
):
    a, b = make_job(member, device), make_job(member, device)
    with django_capture_on_commit_callbacks(execute=True):
        try:
            with transaction.atomic():
                assert job_transition(a.pk, from_states=["queued"], to="cancelled", message="Cancelled.")
                job_note(b.pk, "A note.")
                raise RuntimeError("the caller's transaction fails after the changes")
        except RuntimeError:
            pass
    assert sent == []
    assert Job.objects.get(pk=a.pk).state == "queued"
    with django_capture_on_commit_callbacks(execute=True):
        job_note(b.pk, "Another note.")
    (changes,) = _collections(sent)  # the next change goes out, alone
    assert changes.jobs == {b.pk: None}


def test_a_state_entered_in_a_savepoint_that_rolls_back_tells_nobody(
    member, device, django_capture_on_commit_callbacks
):
    """With the real handlers: the transaction goes on and commits, its collection goes out, and notify tells of
    the state that committed only (it takes the change's notice, and the rolled-back one left none)."""
    from notify.models import Delivery
    from notify.services import channel_create

    channel_create(owner=member, kind="webhook", name="hook", url="https://hooks.invalid/x")
    a, b = make_job(member, device, state="running"), make_job(member, device, state="running")
    with django_capture_on_commit_callbacks(execute=True):
        with transaction.atomic():
            assert job_transition(a.pk, from_states=["running"], to="done", message="Done.")
            try:
                with transaction.atomic():
                    assert job_transition(b.pk, from_states=["running"], to="failed", message="Failed.")
                    raise RuntimeError("this savepoint fails; the transaction goes on")
            except RuntimeError:
                pass
    assert list(Delivery.objects.values_list("job_id", "event")) == [(a.pk, "job.done")]
    assert Job.objects.get(pk=b.pk).state == "running"


def test_a_change_after_a_savepoint_rolled_back_still_goes_out(
    member, device, sent, django_capture_on_commit_callbacks
):
    """The savepoint's rollback discarded the sending its change registered; the next change registers it again."""
    a, b = make_job(member, device), make_job(member, device)
    with django_capture_on_commit_callbacks(execute=True):
        with transaction.atomic():
            try:
                with transaction.atomic():
                    job_note(a.pk, "A note rolled back.")
                    raise RuntimeError
            except RuntimeError:
                pass
            job_note(b.pk, "A note that stays.")
    (changes,) = _collections(sent)
    assert b.pk in changes.jobs


def test_held_changes_wait_for_the_block_but_what_a_job_entered_goes_with_its_commit(
    member, device, sent, django_capture_on_commit_callbacks
):
    a = make_job(member, device, state="running")
    before = len(connection.run_on_commit)
    with django_capture_on_commit_callbacks(execute=True):
        with held():
            assert job_transition(a.pk, from_states=["running"], to="done", message="Done.")
            assert len(connection.run_on_commit) == before + 1  # what it tells, with the transition's commit
        assert len(connection.run_on_commit) == before + 2  # the block's live updates, at its end
    told, live = _collections(sent)
    assert [e.state for e in told.entered] == ["done"] and not (told.jobs or told.queues)
    assert live.jobs == {a.pk: "done"} and live.replan == {device.pk} and not live.entered


def test_send_calls_every_handler_stage_by_stage_and_a_failing_one_stops_none(monkeypatch):
    monkeypatch.setattr(outbox, "_handlers", {stage: [] for stage in outbox.STAGES})
    calls = []

    def failing(changes: Changes) -> None:
        raise RuntimeError("a handler fails")

    outbox.register("notify", lambda changes: calls.append(("notify", changes)))
    outbox.register("plan", failing)
    outbox.register("plan", lambda changes: calls.append(("plan", changes)))
    outbox.register("push", lambda changes: calls.append(("push", changes)))
    outbox.register("plan", failing)  # once is enough
    changes = Changes(jobs={1: "done"})
    outbox.send(changes)
    assert [stage for stage, _ in calls] == ["plan", "push", "notify"]
    assert all(c is changes for _, c in calls)
    assert len(outbox._handlers["plan"]) == 2


def test_the_apps_register_the_planner_the_pushes_the_page_cache_and_the_notifications():
    from jobs.queue.eta import replan_changed as replan
    from notify.job_news import jobs_entered, jobs_waiting_for_disk

    assert outbox._handlers == {
        "plan": [replan],
        "push": [outbox.push, outbox.pages_changed],
        "notify": [jobs_entered, jobs_waiting_for_disk],
    }


def test_push_sends_each_job_tick_and_queue_once(monkeypatch):
    from jobs.live import broadcast

    pushed = []
    monkeypatch.setattr(broadcast, "broadcast_job", lambda job_id, **kw: pushed.append(("job", job_id, kw)))
    monkeypatch.setattr(
        broadcast, "broadcast_queue", lambda device_id: pushed.append(("queue", device_id, {}))
    )
    outbox.push(Changes(jobs={1: "done", 2: None}, ticks={2, 3}, queues={9, 4}))
    assert pushed == [
        ("job", 1, {"entered": "done"}),
        ("job", 2, {"entered": None}),
        ("job", 3, {"tick": True}),  # job 2's tick went with its change
        ("queue", 4, {}),
        ("queue", 9, {}),
    ]


def test_kept_pages_are_drawn_again_after_a_change_but_not_after_ticks_alone(monkeypatch):
    from hub import pagecache

    changed = []
    monkeypatch.setattr(pagecache, "changed", lambda: changed.append(True))
    outbox.pages_changed(Changes(ticks={1}))
    assert changed == []
    outbox.pages_changed(Changes(queues={1}))
    outbox.pages_changed(Changes(jobs={1: None}))
    assert changed == [True, True]


def test_the_planner_replans_each_device_once_and_for_a_moved_job_only_when_its_finish_drifted(
    member, device, monkeypatch
):
    from jobs.queue import eta
    from jobs.queue.eta import replan_changed as replan

    planned = []
    monkeypatch.setattr(eta, "plan_device", planned.append)
    # 37 % of 420 s done: 264.6 s left. Stored finish: just that (on plan), or two minutes off.
    on_plan = make_job(member, device, state="running")
    Job.objects.filter(pk=on_plan.pk).update(predicted_finish=timezone.now() + dt.timedelta(seconds=264.6))
    replan(Changes(moved={on_plan.pk: device.pk}))
    assert planned == []
    Job.objects.filter(pk=on_plan.pk).update(predicted_finish=timezone.now() + dt.timedelta(seconds=384.6))
    replan(Changes(moved={on_plan.pk: device.pk}))
    assert planned == [device.pk]
    replan(Changes(replan={device.pk}, moved={on_plan.pk: device.pk}))
    assert planned == [device.pk, device.pk]  # once, whatever moved

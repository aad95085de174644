"""A job's news survives the process that committed it (``jobs.core.notices``, ``notify.job_news``).

A transition into a state someone follows leaves a notice in its own transaction; the outbox's hand-over after
the commit makes the deliveries and deletes it. Killed in between (played here by a commit whose after-commit
callbacks never run), the notice stays and the sweep prepares it, once."""

from __future__ import annotations

import datetime as dt

import pytest
from django.db import transaction
from django.utils import timezone

from jobs.core.transitions import job_transition
from jobs.models import Notice
from jobs.tests.ui_fixtures import make_job
from notify.job_news import NOTICE_HORIZON, TOLD_STATES, notices_sweep
from notify.models import Delivery
from notify.services import channel_create

pytestmark = pytest.mark.django_db
NOTICE_GRACE = dt.timedelta(seconds=30)


@pytest.fixture(autouse=True)
def grace(settings):
    settings.NOTIFY_NOTICE_GRACE_S = NOTICE_GRACE.total_seconds()


def _hook(owner):
    return channel_create(owner=owner, kind="webhook", name="hook", url="https://hooks.invalid/x")


def _finish(job) -> None:
    assert job_transition(job.pk, from_states=["running"], to="done", message="Done.")


def test_the_hand_over_after_commit_makes_the_delivery_and_clears_the_notice(
    member, device, django_capture_on_commit_callbacks
):
    _hook(member)
    job = make_job(member, device, state="running")
    with django_capture_on_commit_callbacks(execute=True):
        _finish(job)
    assert Delivery.objects.filter(job=job, event="job.done").count() == 1
    assert not Notice.objects.exists()


def test_a_process_killed_after_the_commit_leaves_a_notice_the_sweep_tells_of_once(member, device):
    _hook(member)
    job = make_job(member, device, state="running")
    _finish(job)  # pytest-django's transaction never runs after-commit callbacks: the hand-over is lost
    (notice,) = Notice.objects.all()
    assert (notice.job_id, notice.kind, notice.state) == (job.pk, "entered", "done")
    assert not Delivery.objects.exists()

    assert notices_sweep() == 0  # within its grace the hand-over may still come
    later = timezone.now() + NOTICE_GRACE + dt.timedelta(seconds=1)
    assert notices_sweep(now=later) == 1
    assert Delivery.objects.filter(job=job, event="job.done").count() == 1
    assert not Notice.objects.exists()
    assert notices_sweep(now=later) == 0
    assert Delivery.objects.count() == 1


def test_the_hand_over_and_the_sweep_at_once_make_one_delivery(member, device):
    from notify.job_news import job_entered

    _hook(member)
    job = make_job(member, device, state="running")
    _finish(job)
    seq = Notice.objects.get().seq
    notices_sweep(now=timezone.now() + NOTICE_GRACE * 2)
    job_entered(job_id=job.pk, state="done", seq=seq)  # the late hand-over finds the notice taken
    assert Delivery.objects.count() == 1
    Delivery.objects.all().delete()
    job_entered(job_id=job.pk, state="done", seq=seq)  # not even the delivery's key is needed
    assert not Delivery.objects.exists()


def test_a_rolled_back_transition_leaves_no_notice(member, device):
    job = make_job(member, device, state="running")
    with pytest.raises(RuntimeError), transaction.atomic():
        _finish(job)
        raise RuntimeError
    assert not Notice.objects.exists()


def test_only_the_states_someone_follows_leave_a_notice(member, device):
    job = make_job(member, device, state="queued")
    assert job_transition(job.pk, from_states=["queued"], to="held", message="held")
    assert not Notice.objects.exists()
    assert "held" not in TOLD_STATES and {"done", "failed", "preparing", "cancelled"} <= TOLD_STATES


def test_a_notice_never_told_in_a_day_is_dropped_not_sent(member, device):
    _hook(member)
    job = make_job(member, device, state="running")
    _finish(job)
    notices_sweep(now=timezone.now() + NOTICE_HORIZON + dt.timedelta(minutes=1))
    assert not Notice.objects.exists() and not Delivery.objects.exists()


def test_a_result_waiting_for_disk_space_is_told_by_the_sweep_too(admin_user, member, device):
    from jobs.queue.outcomes import _tell_disk_full

    channel_create(owner=None, kind="webhook", name="house", url="https://h.invalid/", on_disk_full=True)
    job = make_job(member, device, state="collecting")
    _tell_disk_full(job.pk)
    assert Notice.objects.get().kind == "disk_full"
    assert notices_sweep(now=timezone.now() + NOTICE_GRACE * 2) == 1
    assert Delivery.objects.filter(event="disk.full", job=job).count() == 1
    assert not Notice.objects.exists()

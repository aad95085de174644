"""A retention rule's announcement tells the results' owner, through the hook ``notify`` registers with
``jobs.queue.retention`` at start-up (jobs never imports notify): once per person and day, to the channels that
want "my job finished"; the message counts the results and names the day."""

from __future__ import annotations

import datetime as dt

import pytest
from django.utils import timezone

from jobs.models import Job
from jobs.queue import retention
from jobs.tests.ui_fixtures import add_artifact, make_job
from notify.models import Delivery
from notify.services import build_message, channel_create

pytestmark = pytest.mark.django_db


def _old(owner, device, media, days):
    job = make_job(owner, device, state="done")
    when = timezone.now() - dt.timedelta(days=days)
    Job.objects.filter(pk=job.pk).update(created=when, finished_at=when)
    add_artifact(job, media)
    return job


def test_an_announcement_tells_the_owner_once(
    admin_user, member, other_member, device, media, django_capture_on_commit_callbacks
):
    mine = channel_create(owner=member, kind="webhook", name="hook", url="https://hooks.invalid/x")
    channel_create(owner=member, kind="webhook", name="quiet", url="https://hooks.invalid/y", on_done=False)
    channel_create(owner=other_member, kind="webhook", name="otto", url="https://hooks.invalid/z")
    jobs = [_old(member, device, media, 40), _old(member, device, media, 50)]
    retention.rule_set(by=admin_user, user=None, keep_days=30, keep_gb=None)
    with django_capture_on_commit_callbacks(execute=True):
        out = retention.retention_apply()
    with django_capture_on_commit_callbacks(execute=True):
        retention.retention_apply()  # the next run announces nothing new: no second message
    (delivery,) = Delivery.objects.all()
    assert delivery.channel_id == mine.pk and delivery.event == "results.expiring"
    message = build_message(delivery)
    day = f"{timezone.localtime(out.due_at):%A %d %b}"
    assert message.title == f"2 results go to the trash on {day}"
    assert message.path == "/jobs/retention/" and sorted(message.data["results"]) == sorted(
        j.pk for j in jobs
    )

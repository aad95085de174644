"""Retention rules (``jobs.queue.retention``): what a rule takes (days, newest GB, bookmarks and hooks kept), the
week's notice, the daily run that moves announced results to the trash on their day, the dry run."""

from __future__ import annotations

import datetime as dt
from io import StringIO

import pytest
import time_machine
from django.core.exceptions import PermissionDenied, ValidationError
from django.core.management import call_command
from django.utils import timezone

from jobs import tasks
from jobs.models import Bookmark, Job, RetentionNotice
from jobs.queue import retention
from jobs.tests.ui_fixtures import add_artifact, make_job

pytestmark = pytest.mark.django_db

MB = 1024 * 1024


def aged(owner, device, media, *, days: float, size: int = 1000, prompt: str = "old fox"):
    """A done job with one result, finished ``days`` days ago."""
    when = timezone.now() - dt.timedelta(days=days)
    job = make_job(owner, device, state="done", prompt=prompt)
    Job.objects.filter(pk=job.pk).update(created=when, finished_at=when)
    add_artifact(job, media, data=b"x" * size)
    job.refresh_from_db()
    return job


def test_rules_are_admins_a_persons_replaces_the_households(admin_user, member, other_member):
    with pytest.raises(PermissionDenied):
        retention.rule_set(by=member, user=None, keep_days=30, keep_gb=None)
    retention.rule_set(by=admin_user, user=None, keep_days=30, keep_gb=None)
    retention.rule_set(by=admin_user, user=member, keep_days=None, keep_gb=2.5)
    assert retention.rule_for(other_member) == retention.Rule(keep_days=30, keep_gb=None, own=False)
    assert retention.rule_for(member) == retention.Rule(keep_days=None, keep_gb=2.5, own=True)
    assert retention.rule_for(member).describe() == "only the newest 2.5 GB are kept"
    retention.rule_set(
        by=admin_user, user=member, keep_days=None, keep_gb=None
    )  # removed: the household's again
    assert retention.rule_for(member).keep_days == 30
    with pytest.raises(ValidationError):
        retention.parse_rule("0", "")
    with pytest.raises(ValidationError):
        retention.parse_rule("", "lots")
    assert retention.parse_rule(" 14 ", "0,5") == (14, 0.5)


def test_a_rule_takes_old_or_beyond_the_newest_gb_and_keeps_bookmarks_and_hooked_ones(
    admin_user, member, other_member, device, media
):
    old = aged(member, device, media, days=40)
    marked = aged(member, device, media, days=41)
    hooked = aged(member, device, media, days=42)
    aged(member, device, media, days=1)  # the newest: the GB rule keeps it
    running = make_job(member, device, state="running")
    Bookmark.objects.create(user=other_member, job=marked)  # anyone's bookmark keeps it
    retention.register_kept(lambda ids: {hooked.pk} & ids)
    try:
        rule = retention.Rule(keep_days=30, keep_gb=None, own=False)
        assert retention.taken(member, rule, at=timezone.now()) == {old.pk: "older than 30 days"}
        gb_rule = retention.Rule(keep_days=None, keep_gb=1500 / 1024**3, own=True)  # room for one result
        assert set(retention.taken(member, gb_rule, at=timezone.now())) == {old.pk}  # fresh is the newest
    finally:
        retention._kept_by.clear()
    assert running.pk not in retention.taken(member, rule, at=timezone.now() + dt.timedelta(days=99))


def test_announced_a_week_before_then_trashed_on_time(admin_user, member, device, media):
    """The daily run announces what the rule will take a week on, and moves it to the trash on that day."""
    start = timezone.now()
    job = aged(member, device, media, days=25)  # 30-day rule: taken in 5 days, announced now
    young = aged(member, device, media, days=10)  # taken in 20 days: not announced yet
    retention.rule_set(by=admin_user, user=None, keep_days=30, keep_gb=None)
    out = retention.retention_apply(now=start)
    assert out.announced == {member.pk: [job.pk]}
    notice = RetentionNotice.objects.get()
    assert notice.job_id == job.pk and notice.due_at == retention.due_for(start)
    assert notice.due_at - start <= dt.timedelta(days=7) and notice.due_at - start > dt.timedelta(days=6)
    for day in range(1, 7):  # the daily runs of the week: it waits, announced, and nothing is told twice
        with time_machine.travel(start + dt.timedelta(days=day)):
            out = tasks.apply_retention()
        assert out == (0, 0), day
        job.refresh_from_db()
        assert job.trashed_at is None
    with time_machine.travel(start + dt.timedelta(days=7)):
        assert tasks.apply_retention() == (0, 1)
    job.refresh_from_db()
    assert job.trashed_at is not None and not RetentionNotice.objects.filter(job=job).exists()
    assert "retention: older than 30 days" in job.events.order_by("-seq").first().message
    young.refresh_from_db()
    assert young.trashed_at is None


def test_a_result_bookmarked_after_its_notice_is_kept(admin_user, member, device, media):
    start = timezone.now()
    job = aged(member, device, media, days=28)
    retention.rule_set(by=admin_user, user=None, keep_days=30, keep_gb=None)
    retention.retention_apply(now=start)
    Bookmark.objects.create(user=member, job=job)
    out = retention.retention_apply(now=start + dt.timedelta(days=7))
    assert out.counts == (0, 0) and out.dropped == [job.pk]
    job.refresh_from_db()
    assert job.trashed_at is None and not RetentionNotice.objects.exists()


def test_the_dry_run_changes_nothing_and_says_what_would_happen(admin_user, member, device, media):
    job = aged(member, device, media, days=40)
    retention.rule_set(by=admin_user, user=member, keep_days=30, keep_gb=None)
    out = StringIO()
    call_command("apply_retention", "--dry-run", stdout=out)
    text = out.getvalue()
    assert "mia: would announce 1 result(s) for the trash on" in text and f"#{job.pk}" in text
    assert "dry run, nothing changed" in text
    assert not RetentionNotice.objects.exists()
    call_command("apply_retention", stdout=out)
    assert RetentionNotice.objects.filter(job=job).exists()
    with time_machine.travel(timezone.now() + dt.timedelta(days=7)):
        dry = StringIO()
        call_command("apply_retention", "--dry-run", stdout=dry)
        assert f"mia: would move 1 result(s) to the trash: #{job.pk}" in dry.getvalue()
    job.refresh_from_db()
    assert job.trashed_at is None


def test_the_hook_is_told_once_after_commit(
    admin_user, member, device, media, django_capture_on_commit_callbacks
):
    told = []
    retention.register_announced(lambda owner, ids, due: told.append((owner, ids, due)))
    try:
        job = aged(member, device, media, days=40)
        retention.rule_set(by=admin_user, user=None, keep_days=30, keep_gb=None)
        with django_capture_on_commit_callbacks(execute=True):
            out = retention.retention_apply()
        with django_capture_on_commit_callbacks(execute=True):
            retention.retention_apply()  # nothing new: nothing told
    finally:
        retention._announced.pop()
    assert told == [(member.pk, [job.pk], out.due_at)]


def test_a_result_in_an_album_is_kept(admin_user, member, device, media):
    """An album's items are the household's keepsakes: no rule takes them, whoever's album holds them."""
    from jobs.queue.albums import album_add_jobs, album_create

    kept = aged(member, device, media, days=40)
    taken = aged(member, device, media, days=41)
    album_add_jobs(album=album_create(by=member, name="Summer"), by=member, job_ids=[kept.pk])
    rule = retention.Rule(keep_days=30, keep_gb=None, own=False)
    assert retention.taken(member, rule, at=timezone.now()) == {taken.pk: "older than 30 days"}

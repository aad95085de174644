"""The trash (``jobs.queue.trash``): a delete hides the job and keeps its files untouched; a restore gives them back
byte for byte; emptying it (the page, ``manage.py empty_trash``, the daily task) removes them for good, on the
local disk and on S3; the trash counts against the storage limit until then."""

from __future__ import annotations

import datetime as dt
import hashlib
from io import StringIO

import pytest
import time_machine
from django.core.exceptions import PermissionDenied, ValidationError
from django.core.management import CommandError, call_command
from django.http import Http404
from django.utils import timezone

from jobs import tasks
from jobs.core.selectors import can_view, jobs_visible_to
from jobs.files import store
from jobs.models import Artifact, Job, JobLink, JobState, PersonQuota
from jobs.queue import trash
from jobs.quotas import services as quotas
from jobs.tests.ui_fixtures import PNG, add_artifact, make_job

pytestmark = pytest.mark.django_db

DATA = bytes(i * 7 % 251 for i in range(50_000))


def _done_with_files(owner, device, media, **kw):
    job = make_job(owner, device, state="done", **kw)
    video = add_artifact(job, media, data=DATA)
    thumb = add_artifact(job, media, kind="thumb", name="thumb.png", mime="image/png", data=PNG)
    return job, video, thumb


def _digest(path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def test_a_delete_hides_the_job_and_a_restore_gives_it_back_byte_for_byte(member, device, media):
    job, video, thumb = _done_with_files(member, device, media)
    before = {a.pk: _digest(media / a.file.name) for a in (video, thumb)}
    trash.trash_move(job=job, by=member)
    job.refresh_from_db()
    assert job.trashed_at is not None and job.hidden_at is not None and job.trashed_by == member
    assert not jobs_visible_to(member).filter(pk=job.pk).exists()
    assert not can_view(member, job)
    assert list(trash.trash_of(member)) == [job]
    assert {a.pk: _digest(media / a.file.name) for a in (video, thumb)} == before  # untouched
    trash.trash_restore(job=job, by=member)
    job.refresh_from_db()
    assert job.trashed_at is None and job.hidden_at is None
    assert jobs_visible_to(member).filter(pk=job.pk).exists()
    assert {a.pk: _digest(media / a.file.name) for a in Artifact.objects.filter(job=job)} == before
    assert list(job.events.values_list("message", flat=True))[-2:] == [
        "Moved to the trash by its owner; removed for good after 30 days unless restored.",
        "Restored from the trash by its owner.",
    ]


def test_a_running_job_is_refused_and_a_stranger_may_not(member, other_member, admin_user, device, media):
    running = make_job(member, device, state="running")
    with pytest.raises(ValidationError, match="still running"):
        trash.trash_move(job=running, by=member)
    job, _v, _t = _done_with_files(member, device, media)
    with pytest.raises(PermissionDenied):
        trash.trash_move(job=job, by=other_member)
    trash.trash_move(job=job, by=admin_user)
    with pytest.raises(PermissionDenied):
        trash.trash_restore(job=job, by=other_member)
    with pytest.raises(Http404):
        trash.trashed_job_for(other_member, job.pk)
    assert trash.trashed_job_for(member, job.pk) == job
    assert trash.trashed_job_for(admin_user, job.pk) == job
    with pytest.raises(Http404):  # not in the trash: not found here either
        trash.trashed_job_for(member, running.pk)


def test_a_job_others_wait_for_is_refused_unless_forced_and_then_they_are_cancelled(member, device, media):
    parent = make_job(member, device, state="failed")  # a failed parent: its children wait for a retry
    child = make_job(member, device, state="held", kind="image")
    JobLink.objects.create(child=child, parent=parent, parent_number=parent.pk, field="image")
    assert trash.waiting_children(parent) == [child.pk]
    with pytest.raises(trash.ChildrenWaiting, match=f"#{child.pk}"):
        trash.trash_move(job=parent, by=member, force=False)
    parent.refresh_from_db()
    assert parent.trashed_at is None
    trash.trash_move(job=parent, by=member, force=True)
    child.refresh_from_db()
    assert child.state == JobState.CANCELLED and "were deleted" in child.cancel_reason


def test_the_trash_counts_against_storage_until_it_is_emptied(
    member, device, media, django_capture_on_commit_callbacks
):
    job, video, thumb = _done_with_files(member, device, media)
    size = video.bytes + thumb.bytes
    PersonQuota.objects.create(user=member, storage_mb=0)
    trash.trash_move(job=job, by=member)
    usage = quotas.usage_for(member)
    assert usage.storage_bytes == size and usage.trash_bytes == size
    refusal = quotas.quota_check(owner=member, estimate_s=60).refused
    assert "in the trash" in refusal and "empty the trash" in refusal
    assert "in the trash" in quotas.usage_line(quotas.limits_for(member), usage)
    assert quotas.results_of(user=member) == []  # the Usage page's list leaves the trash out
    with django_capture_on_commit_callbacks(execute=True):
        done = trash.trash_empty(user=member)
    assert (done.jobs, done.bytes) == (1, size)
    usage = quotas.usage_for(member)
    assert usage.storage_bytes == 0 and usage.trash_bytes == 0
    assert not (media / video.file.name).exists() and not (media / thumb.file.name).exists()
    job.refresh_from_db()
    assert job.trashed_at is None and job.hidden_at is not None  # gone for good: the row stays, hidden
    assert "Removed from the trash for good" in job.events.order_by("-seq").first().message


def test_a_purge_removes_the_live_preview_too(member, device, media, django_capture_on_commit_callbacks):
    job, _v, _t = _done_with_files(member, device, media)
    preview = media / store.preview_name(job)
    preview.parent.mkdir(parents=True, exist_ok=True)
    preview.write_bytes(PNG)
    trash.trash_move(job=job, by=member)
    with django_capture_on_commit_callbacks(execute=True):
        trash.trash_purge(job=job, by=member)
    assert not preview.exists()
    assert not [p for p in (media / store.job_folder(job)).rglob("*") if p.is_file()]


def test_empty_trash_command_and_the_daily_task_take_only_what_is_old_enough(
    member, other_member, device, media, settings, django_capture_on_commit_callbacks
):
    settings.HUB_TRASH_DAYS = 30
    old, _v, _t = _done_with_files(member, device, media)
    recent, _v2, _t2 = _done_with_files(other_member, device, media)
    start = timezone.now()
    with time_machine.travel(start - dt.timedelta(days=31)):
        trash.trash_move(job=old, by=member)
    with time_machine.travel(start - dt.timedelta(days=5)):
        trash.trash_move(job=recent, by=other_member)
    with django_capture_on_commit_callbacks(execute=True):
        assert tasks.empty_trash() == 1
    assert set(Job.objects.filter(trashed_at__isnull=False)) == {recent}
    out = StringIO()
    with django_capture_on_commit_callbacks(execute=True):
        call_command("empty_trash", "--older-than", "6", stdout=out)
    assert "removed 0 job(s)" in out.getvalue()
    with django_capture_on_commit_callbacks(execute=True):
        call_command("empty_trash", "--older-than", "5", stdout=out)
    assert "removed 1 job(s)" in out.getvalue() and not Job.objects.filter(trashed_at__isnull=False).exists()
    with pytest.raises(CommandError, match="0 or more"):
        call_command("empty_trash", "--older-than", "-1")


def test_days_left_counts_down_from_hub_trash_days(member, device, media, settings):
    settings.HUB_TRASH_DAYS = 7
    job, _v, _t = _done_with_files(member, device, media)
    trash.trash_move(job=job, by=member)
    job.refresh_from_db()
    assert trash.days_left(job, now=job.trashed_at) == 7
    assert trash.days_left(job, now=job.trashed_at + dt.timedelta(days=6, hours=1)) == 1
    assert trash.days_left(job, now=job.trashed_at + dt.timedelta(days=8)) == 0


def test_emptying_the_trash_removes_the_files_from_s3(
    s3_store, member, device, django_capture_on_commit_callbacks
):
    job = make_job(member, device, state="running")
    video = store.save_artifact(job, kind="video", name="video.mp4", data=DATA)
    thumb = store.save_artifact(job, kind="thumb", name="thumb.png", data=PNG)
    preview = store.save_bytes(store.preview_name(job), PNG)
    Job.objects.filter(pk=job.pk).update(state=JobState.DONE)
    job.refresh_from_db()
    trash.trash_move(job=job, by=member)
    assert s3_store.get(str(video.file)) == DATA  # kept while in the trash
    trash.trash_restore(job=job, by=member)
    assert s3_store.get(str(video.file)) == DATA and s3_store.get(str(thumb.file)) == PNG
    trash.trash_move(job=job, by=member)
    with django_capture_on_commit_callbacks(execute=True):
        trash.trash_empty(older_than_days=0)
    assert str(video.file) not in s3_store.keys() and str(thumb.file) not in s3_store.keys()
    assert preview not in s3_store.keys()

"""The trash: deleting a job's results moves the job to the trash, from where it is restored or removed for good.

A job in the trash (``Job.trashed_at`` set) is hidden like a job deleted through ``/v1`` always was
(``hidden_at`` is set with it, so every list, search, feed and page that leaves hidden jobs out leaves it out):
only its owner (and admins) see it, on the Trash page. Its files are not touched, so a restore gives them back
byte for byte. ``HUB_TRASH_DAYS`` after it went in, the daily task (``jobs.tasks.empty_trash``, and
``manage.py empty_trash``) removes its files for good: results, thumbnail and live preview, through the storage
API (the local disk or S3). The job row stays hidden afterwards, for fair share and the record, as ``/v1`` did.

The trash counts against the person's storage limit: its files are still on the disk. The Trash and Usage
pages say how much of it is in the trash, and emptying the trash is what frees it.

Jobs that wait for a result of the job (a chain's children, ``jobs.core.links``) can't have it while it is in
the trash: moving it there cancels them. The callers ask first (:func:`waiting_children`); the page warns, the
REST API refuses with 409 unless ``?force=true``, ``/v1`` goes ahead as it always did.
"""

from __future__ import annotations

import datetime as dt
import logging
from dataclasses import dataclass
from typing import Any

from django.conf import settings
from django.core.exceptions import PermissionDenied, ValidationError
from django.db import transaction
from django.db.models import QuerySet, Sum
from django.http import Http404
from django.utils import timezone

from jobs.core.links import cancel_children
from jobs.core.transitions import job_note
from jobs.files.store import delete, preview_name
from jobs.models import ACTIVE_STATES, PENDING_STATES, Artifact, Job, JobLink, JobState
from jobs.quotas.services import MB, can_delete_results, results_delete

logger = logging.getLogger("jobs.queue.trash")

__all__ = [
    "ChildrenWaiting",
    "can_delete_results",
    "days_left",
    "purge_at",
    "trash_bytes",
    "trash_days",
    "trash_empty",
    "trash_expire",
    "trash_move",
    "trash_of",
    "trash_purge",
    "trash_restore",
    "trashed_job_for",
    "waiting_children",
]

RUNNING = "This job is still running; cancel it or wait until it ends."
WAITING = "This job is still waiting in the queue; cancel it first."


class ChildrenWaiting(ValidationError):
    """Moving the job to the trash would cancel the jobs waiting for its result (``ids``)."""

    def __init__(self, ids: list[int]) -> None:
        self.ids = ids
        listed = ", ".join(f"#{pk}" for pk in ids[:10]) + (" …" if len(ids) > 10 else "")
        super().__init__(
            f"{len(ids)} job(s) wait for this job's result ({listed}); moving it to the trash cancels them. "
            "Confirm to go ahead (force=true in the API)."
        )


def trash_days() -> int:
    return int(settings.HUB_TRASH_DAYS)


def waiting_children(job: Job | int) -> list[int]:
    """The jobs still waiting for ``job``'s result (held, not released yet)."""
    pk = getattr(job, "pk", job)
    rows = JobLink.objects.filter(parent_id=pk, released_at__isnull=True, child__state=JobState.HELD)
    return sorted(set(rows.values_list("child_id", flat=True)))


def _who(by: Any, job: Job) -> str:
    if by is None:
        return "the hub"
    return "its owner" if by.pk == job.owner_id else f"an admin ({by.username})"


# -- services ----------------------------------------------------------------------------------------------------
def trash_move(*, job: Job, by: Any, force: bool = True, why: str = "") -> Job:
    """Move a finished job (and its results) to the trash. ``by`` None: the hub itself (a retention rule).

    Refuses a running or waiting job, and (``force=False``) a job other jobs still wait for (:class:`ChildrenWaiting`).
    Idempotent: a job already in the trash stays as it is."""
    if by is not None and not can_delete_results(by, job):
        raise PermissionDenied("You can only delete your own results.")
    if job.state in ACTIVE_STATES:
        raise ValidationError(RUNNING)
    if job.state in PENDING_STATES:  # it would still run, unseen
        raise ValidationError(WAITING)
    if job.trashed_at is not None:
        return job
    children = waiting_children(job)
    if children and not force:
        raise ChildrenWaiting(children)
    now = timezone.now()
    with transaction.atomic():
        size = Artifact.objects.filter(job_id=job.pk).aggregate(b=Sum("bytes"))["b"] or 0
        moved = job_note(
            job.pk,
            f"Moved to the trash by {_who(by, job)}{why}; removed for good after {trash_days()} days unless "
            "restored.",
            data={"trash_bytes": size},
            trashed_at=now,
            trashed_by_id=getattr(by, "pk", None),
            hidden_at=job.hidden_at or now,
        )
        if moved:
            cancel_children(job.pk, f"the results of job {job.pk}, which it waited for, were deleted.")
    job.refresh_from_db()
    return job


def trash_restore(*, job: Job, by: Any) -> Job:
    """Take a job out of the trash: listed again, its files as they were."""
    if not can_delete_results(by, job):
        raise PermissionDenied("You can only restore your own results.")
    if job.trashed_at is None:
        raise ValidationError("This job is not in the trash.")
    job_note(
        job.pk,
        f"Restored from the trash by {_who(by, job)}.",
        trashed_at=None,
        trashed_by_id=None,
        hidden_at=None,
    )
    job.refresh_from_db()
    return job


def trash_purge(*, job: Job, by: Any | None) -> int:
    """Remove a trashed job's files for good (results, thumbnail, live preview; the job row stays hidden).
    ``by`` None: the daily task or the command line. Returns the bytes freed."""
    if by is not None and not can_delete_results(by, job):
        raise PermissionDenied("You can only delete your own results.")
    if job.trashed_at is None:
        raise ValidationError("This job is not in the trash.")
    with transaction.atomic():
        # The artifacts (results, sidecars, the thumbnail) through their storage, after commit (quotas does it).
        freed = results_delete(job=job, by=by) if Artifact.objects.filter(job_id=job.pk).exists() else 0
        job_note(
            job.pk,
            f"Removed from the trash for good by {_who(by, job)}: {freed / MB:.1f} MB freed.",
            data={"freed_bytes": freed},
            trashed_at=None,
            trashed_by_id=None,
        )
        preview = preview_name(job)
        transaction.on_commit(lambda: delete([preview]))
    return freed


@dataclass
class Emptied:
    jobs: int = 0
    bytes: int = 0


def trash_empty(
    *, user: Any | None = None, older_than_days: int | None = None, now: dt.datetime | None = None
) -> Emptied:
    """Remove for good what is in the trash: ``user``'s (None: everyone's), only what went in at least
    ``older_than_days`` days ago (None: all of it)."""
    qs = Job.objects.filter(trashed_at__isnull=False)
    if user is not None:
        qs = qs.filter(owner_id=getattr(user, "pk", user))
    if older_than_days is not None:
        qs = qs.filter(trashed_at__lte=(now or timezone.now()) - dt.timedelta(days=older_than_days))
    out = Emptied()
    for job in qs.select_related("owner").order_by("trashed_at", "pk").iterator():
        try:
            out.bytes += trash_purge(job=job, by=None)
        except ValidationError:  # restored in the meantime
            continue
        out.jobs += 1
    if out.jobs:
        logger.info("trash emptied: %d job(s), %.1f MB", out.jobs, out.bytes / MB)
    return out


def trash_expire(*, now: dt.datetime | None = None) -> Emptied:
    """The daily task: remove what has been in the trash for ``HUB_TRASH_DAYS`` days."""
    return trash_empty(older_than_days=trash_days(), now=now)


# -- selectors ---------------------------------------------------------------------------------------------------
def trash_of(user: Any) -> QuerySet[Job]:
    """``user``'s jobs in the trash, the last one in first."""
    return (
        Job.objects.filter(owner_id=getattr(user, "pk", user), trashed_at__isnull=False)
        .select_related("owner", "device")
        .order_by("-trashed_at", "-pk")
    )


def trash_bytes(user: Any) -> int:
    uid = getattr(user, "pk", user)
    files = Artifact.objects.filter(job__owner_id=uid, job__trashed_at__isnull=False)
    return files.aggregate(b=Sum("bytes"))["b"] or 0


def trashed_job_for(user: Any, job_id: Any) -> Job:
    """A job in the trash its owner (or an admin) may restore or remove; Http404 for anyone else and for a job
    not in the trash (no existence leak)."""
    try:
        job = Job.objects.select_related("owner", "device").get(pk=int(job_id), trashed_at__isnull=False)
    except (Job.DoesNotExist, ValueError, TypeError, OverflowError):
        raise Http404("No such job in the trash.") from None
    if not can_delete_results(user, job):
        raise Http404("No such job in the trash.")
    return job


def purge_at(job: Job) -> dt.datetime | None:
    return None if job.trashed_at is None else job.trashed_at + dt.timedelta(days=trash_days())


def days_left(job: Job, *, now: dt.datetime | None = None) -> int:
    """Whole days (rounded up) before the daily task removes it; 0 = at its next run."""
    end = purge_at(job)
    if end is None:
        return 0
    seconds = (end - (now or timezone.now())).total_seconds()
    return max(0, -int(-seconds // 86400))

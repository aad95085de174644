"""Deleting a finished job's result files to free storage (the Usage page; owners and admins).

Storage for results is a quota (``jobs.quotas.services``, which re-exports these): deleting frees it.
"""

from __future__ import annotations

import logging
from typing import Any

from django.core.exceptions import PermissionDenied, ValidationError
from django.db import transaction

from jobs.core.links import cancel_children
from jobs.core.transitions import job_note
from jobs.models import ACTIVE_STATES, Artifact, Job

logger = logging.getLogger("jobs.quotas.services")
MB = 1024 * 1024


def can_delete_results(user: Any, job: Job) -> bool:
    if not getattr(user, "is_authenticated", False):
        return False
    return bool(user.is_admin or job.owner_id == user.pk)


def results_delete(*, job: Job, by: Any | None) -> int:
    """Delete a finished job's result files (thumbnail included) for good; the job and its story stay. People
    delete through the trash (``jobs.queue.trash``), which calls this when it is emptied (``by`` None: the daily
    task or the command line). Returns the bytes freed. The files go after commit, so a rolled-back delete leaves
    them all in place."""
    if by is not None and not can_delete_results(by, job):
        raise PermissionDenied("You can only delete your own results.")
    if job.state in ACTIVE_STATES:
        raise ValidationError("This job is still running; cancel it or wait until it ends.")
    with transaction.atomic():
        artifacts = list(Artifact.objects.select_for_update().filter(job_id=job.pk))
        if not artifacts:
            return 0
        freed = sum(a.bytes for a in artifacts)
        names = [a.file.name for a in artifacts]
        Artifact.objects.filter(pk__in=[a.pk for a in artifacts]).delete()
        if by is None:
            who = "the hub (trash emptied)"
        else:
            who = "its owner" if by.pk == job.owner_id else f"an admin ({by.username})"
        job_note(
            job.pk,
            f"Results deleted by {who}: {len(artifacts)} file(s), {freed / MB:.1f} MB freed.",
            data={"freed_bytes": freed, "files": [n.rsplit("/", 1)[-1] for n in names]},
        )
        # The jobs that still wait for a result of it (a release left undone) can't have it any more.
        cancel_children(job.pk, f"the results of job {job.pk}, which it waited for, were deleted.")
        # The files through the artifacts' storage (the store's, ``jobs.files.store``; quotas don't import files).
        storage = artifacts[0].file.storage

        def remove() -> None:
            for name in names:
                try:
                    storage.delete(name)
                except OSError:
                    logger.warning("could not remove %s", name, exc_info=True)

        transaction.on_commit(remove)
    return freed


__all__ = ["can_delete_results", "results_delete"]

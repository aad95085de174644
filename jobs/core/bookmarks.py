"""Bookmarks: a person's own marks on jobs they can see (no effect on anyone else)."""

from __future__ import annotations

from typing import Any

from django.db import IntegrityError, transaction

from jobs.models import Bookmark, Job


def bookmark_toggle(*, user: Any, job: Job) -> bool:
    """Add the bookmark, or remove it if it exists. Returns whether the job is bookmarked afterwards."""
    deleted, _ = Bookmark.objects.filter(user=user, job=job).delete()
    if deleted:
        return False
    try:
        with transaction.atomic():
            Bookmark.objects.create(user=user, job=job)
    except IntegrityError:  # a double click raced us to it: it is bookmarked either way
        pass
    return True


def is_bookmarked(user: Any, job: Job) -> bool:
    return Bookmark.objects.filter(user=user, job=job).exists()


def bookmarked_ids(user: Any, job_ids: list[int]) -> set[int]:
    return set(Bookmark.objects.filter(user=user, job_id__in=job_ids).values_list("job_id", flat=True))

"""The only code that changes a job's state: a compare-and-set UPDATE plus a JobEvent, broadcast after commit.

A transition names the states it may leave (``from_states``); if the row is no longer in one of them (a double
click, a second worker, a cancel that got there first) nothing happens and the caller gets ``False``.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from typing import Any

from django.db import transaction
from django.db.models import F
from django.utils import timezone

from jobs.models import Job, JobEvent

logger = logging.getLogger("jobs")


def _after_commit(job_id: int, device_id: int | None = None, *, queue: bool = False) -> None:
    from jobs import broadcast

    transaction.on_commit(lambda: broadcast.broadcast_job(job_id))
    if queue and device_id is not None:
        transaction.on_commit(lambda: broadcast.broadcast_queue(device_id))


def job_transition(
    job_id: int,
    *,
    from_states: Iterable[str],
    to: str,
    message: str,
    data: dict[str, Any] | None = None,
    **fields: Any,
) -> bool:
    """CAS ``from_states → to`` with ``fields``; write the event with the next ``seq``. True if it happened."""
    now = timezone.now()
    with transaction.atomic():
        changed = Job.objects.filter(pk=job_id, state__in=list(from_states)).update(
            state=to, last_seq=F("last_seq") + 1, updated=now, **fields
        )
        if not changed:
            return False
        seq, device_id = Job.objects.filter(pk=job_id).values_list("last_seq", "device_id").get()
        JobEvent.objects.create(job_id=job_id, seq=seq, state=to, message=message[:500], data=data or {})
        _after_commit(job_id, device_id, queue=True)
    logger.info("job %s -> %s: %s", job_id, to, message)
    return True


def job_note(
    job_id: int,
    message: str,
    *,
    data: dict[str, Any] | None = None,
    only_in: Iterable[str] = (),
    **fields: Any,
) -> bool:
    """An event in the job's story without a state change (e.g. "device locked, waiting")."""
    with transaction.atomic():
        qs = Job.objects.filter(pk=job_id)
        if only_in:
            qs = qs.filter(state__in=list(only_in))
        if not qs.update(last_seq=F("last_seq") + 1, updated=timezone.now(), **fields):
            return False
        seq, state, device_id = (
            Job.objects.filter(pk=job_id).values_list("last_seq", "state", "device_id").get()
        )
        JobEvent.objects.create(job_id=job_id, seq=seq, state=state, message=message[:500], data=data or {})
        _after_commit(job_id, device_id)
    return True


def job_set(job_id: int, *, only_in: Iterable[str] = (), **fields: Any) -> bool:
    """Plain field update (progress, phase, remote bookkeeping) guarded by state; no event, no broadcast."""
    qs = Job.objects.filter(pk=job_id)
    if only_in:
        qs = qs.filter(state__in=list(only_in))
    return bool(qs.update(updated=timezone.now(), **fields))

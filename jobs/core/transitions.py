"""The only code that changes a job's state: a compare-and-set UPDATE plus a JobEvent, sent out after commit.

A transition names the states it may leave (``from_states``); if the row is no longer in one of them (a double
click, a second worker, a cancel that got there first) nothing happens and the caller gets ``False``.

A transition only records what it changed (``jobs.core.changes``: the job, the state it entered, its device);
once the transaction commits, the outbox registered at start-up sends it, once:
transition -> outbox -> pages/pushes/notifications (``jobs.live.outbox``).
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from typing import Any

from django.db import transaction
from django.db.models import F
from django.utils import timezone

from jobs.core import changes, notices
from jobs.models import ACTIVE_STATES, Job, JobEvent

logger = logging.getLogger("jobs")


def job_transition(
    job_id: int,
    *,
    from_states: Iterable[str],
    to: str,
    message: str,
    data: dict[str, Any] | None = None,
    on_device: int | None = None,
    **fields: Any,
) -> bool:
    """CAS ``from_states → to`` with ``fields``; write the event with the next ``seq``. True if it happened.
    ``on_device``: only while the job is still in that device's lane (the pool planner may have moved it)."""
    now = timezone.now()
    with transaction.atomic():
        rows = Job.objects.filter(pk=job_id, state__in=list(from_states))
        if on_device is not None:
            rows = rows.filter(device_id=on_device)
        changed = rows.update(state=to, last_seq=F("last_seq") + 1, updated=now, **fields)
        if not changed:
            return False
        seq, device_id = Job.objects.filter(pk=job_id).values_list("last_seq", "device_id").get()
        JobEvent.objects.create(job_id=job_id, seq=seq, state=to, message=message[:500], data=data or {})
        notices.job_entered(
            job_id, seq, to
        )  # kept until told: a crash after the commit loses no notification
        changes.job_entered(job_id, device_id, state=to, seq=seq, moved_on=_stays_active(from_states, to))
    logger.info("job %s -> %s: %s", job_id, to, message)
    return True


def _stays_active(from_states: Iterable[str], to: str) -> bool:
    """The job moves on while it holds the device (preparing → submitted → running → collecting): it changes the
    plan only by where its finish now lies (the planner replans when that drifted). Every other transition moves
    a job into or out of the plan."""
    return to in ACTIVE_STATES and set(from_states) <= set(ACTIVE_STATES)


def job_note(
    job_id: int,
    message: str,
    *,
    data: dict[str, Any] | None = None,
    only_in: Iterable[str] = (),
    **fields: Any,
) -> bool:
    """An event in the job's story without a state change (e.g. "device locked, waiting").

    A change of ``shared`` also sends the queue: the plan everyone sees labels a private job "Video by …".
    """
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
        changes.job_noted(job_id, device_id, queue="shared" in fields)
    return True


def job_set(job_id: int, *, only_in: Iterable[str] = (), **fields: Any) -> bool:
    """Plain field update (progress, phase, remote bookkeeping) guarded by state; no event, no broadcast
    (after a progress update, ``jobs.core.changes.job_ticked`` sends it)."""
    qs = Job.objects.filter(pk=job_id)
    if only_in:
        qs = qs.filter(state__in=list(only_in))
    return bool(qs.update(updated=timezone.now(), **fields))

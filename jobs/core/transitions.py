"""The only code that changes a job's state: a compare-and-set UPDATE plus a JobEvent, broadcast after commit.

A transition names the states it may leave (``from_states``); if the row is no longer in one of them (a double
click, a second worker, a cancel that got there first) nothing happens and the caller gets ``False``.

Every change is recorded in the transaction's collection (``jobs.core.changes``), which the outbox sends once
after commit: a state change replans the device first, then pushes the job and the queue once. What happens
beyond the hub's pages comes in through hooks the higher layers register at start-up: whether a job moving on
drifted from its plan (the planner's), and what a job entering a state tells people (``notify``'s).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable
from typing import Any

from django.db import transaction
from django.db.models import F
from django.utils import timezone

from jobs.core.changes import schedule
from jobs.models import ACTIVE_STATES, Job, JobEvent

logger = logging.getLogger("jobs")


# -- hooks, registered at start-up by the layers above -----------------------------------------------------------
#: ``(job) -> bool``: whether a job that moved on while holding its device finished off its stored plan.
_drift_check: Callable[[Job], bool] | None = None
#: ``(job_id=, state=, seq=)`` after a state change commits: the notifications (``notify``), never raising here.
_entered_hooks: list[Callable[..., None]] = []


def register_drift_check(check: Callable[[Job], bool]) -> None:
    global _drift_check
    _drift_check = check


def register_entered(hook: Callable[..., None]) -> None:
    if hook not in _entered_hooks:
        _entered_hooks.append(hook)


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
        replan = not _stays_active(from_states, to) or _finish_drifted(job_id)
        schedule(job_id=job_id, device_id=device_id, entered=to, replan=replan, queue=True)
        # Notifications (notify/): prepared after commit, outside this transaction; they never raise here.
        transaction.on_commit(lambda: _notify(job_id=job_id, state=to, seq=seq), robust=True)
    logger.info("job %s -> %s: %s", job_id, to, message)
    return True


def _stays_active(from_states: Iterable[str], to: str) -> bool:
    return to in ACTIVE_STATES and set(from_states) <= set(ACTIVE_STATES)


def _finish_drifted(job_id: int) -> bool:
    """A job that moves on while it holds the device (preparing → submitted → running → collecting) changes the
    plan only by where its finish now lies: the device is replanned when that drifted from the stored plan, as
    a progress report does (``jobs.queue.eta.finish_drifted``; after a model load, say). Every other transition
    moves a job into or out of the plan, and replans."""
    if _drift_check is None:
        return True
    job = (
        Job.objects.filter(pk=job_id)
        .only("pk", "estimate_s", "progress", "remote_data", "predicted_finish")
        .first()
    )
    return job is None or _drift_check(job)


def _notify(*, job_id: int, state: str, seq: int) -> None:
    for hook in _entered_hooks:
        hook(job_id=job_id, state=state, seq=seq)


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
        schedule(job_id=job_id, device_id=device_id, queue="shared" in fields)
    return True


def job_set(job_id: int, *, only_in: Iterable[str] = (), **fields: Any) -> bool:
    """Plain field update (progress, phase, remote bookkeeping) guarded by state; no event, no broadcast
    (after a progress update, :func:`job_ticked` sends it)."""
    qs = Job.objects.filter(pk=job_id)
    if only_in:
        qs = qs.filter(state__in=list(only_in))
    return bool(qs.update(updated=timezone.now(), **fields))

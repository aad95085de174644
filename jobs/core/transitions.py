"""The only code that changes a job's state: a compare-and-set UPDATE plus a JobEvent, broadcast after commit.

A transition names the states it may leave (``from_states``); if the row is no longer in one of them (a double
click, a second worker, a cancel that got there first) nothing happens and the caller gets ``False``.

This module is also the one sender of live updates for jobs and queues (``jobs.live.broadcast``): every change
is collected per transaction and sent once, after commit (:func:`flush`) — a state change replans the
device first, then pushes the job and the queue once. Other changes come in through :func:`job_ticked`
(progress moved), :func:`plan_changed` (the planner stored new predictions, or a queue setting changed) and
the ``shared`` flag of :func:`job_note`.
"""

from __future__ import annotations

import contextvars
import logging
import threading
import time
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from django.db import connections, transaction
from django.db.models import F
from django.utils import timezone

from jobs.models import ACTIVE_STATES, Job, JobEvent

logger = logging.getLogger("jobs")


# -- live updates: collected per transaction, sent once after commit ---------------------------------------------
@dataclass
class Pending:
    """What one transaction changed, for the live pages."""

    #: job id -> the state it entered (None: an event without a state change)
    jobs: dict[int, str | None] = field(default_factory=dict)
    ticks: set[int] = field(default_factory=set)  # jobs whose progress alone moved
    replan: set[int] = field(default_factory=set)  # devices to replan before anything is rendered
    queues: set[int] = field(default_factory=set)  # devices whose queue goes out
    callback: Any = None


_flushing: contextvars.ContextVar[Pending | None] = contextvars.ContextVar("hub_live_flushing", default=None)
_held: contextvars.ContextVar[Pending | None] = contextvars.ContextVar("hub_live_held", default=None)
_PENDING_ATTR = "_hub_live_pending"


def _pending() -> tuple[Pending, bool]:
    """The current transaction's collection (and whether it is new); outside one, a fresh collection. Inside
    :func:`held`, the held collection.

    A collection whose callback a rollback discarded is replaced, so a rolled-back change never holds back
    a later one.
    """
    if (flushing := _flushing.get()) is not None:
        return flushing, False
    if (holding := _held.get()) is not None:
        return holding, False
    conn = transaction.get_connection()
    if not conn.in_atomic_block:
        return Pending(), True
    current: Pending | None = getattr(conn, _PENDING_ATTR, None)
    if current is not None and any(entry[1] is current.callback for entry in conn.run_on_commit):
        return current, False
    current = Pending()
    setattr(conn, _PENDING_ATTR, current)
    return current, True


def _schedule(
    *,
    job_id: int | None = None,
    device_id: int | None = None,
    entered: str | None = None,
    tick: bool = False,
    replan: bool = False,
    queue: bool = False,
) -> None:
    pending, new = _pending()
    if job_id is not None:
        if tick:
            pending.ticks.add(job_id)
        else:
            pending.jobs[job_id] = entered or pending.jobs.get(job_id)
    if device_id is not None:
        if replan:
            pending.replan.add(device_id)
        if queue or replan:
            pending.queues.add(device_id)
    if new:

        def run() -> None:
            conn = transaction.get_connection()
            if getattr(conn, _PENDING_ATTR, None) is pending:
                setattr(conn, _PENDING_ATTR, None)
            flush(pending)

        pending.callback = run
        transaction.on_commit(run)  # outside a transaction: at once


def flush(pending: Pending) -> None:
    """Send what ``pending`` collected: replan first, then each job once, then each queue once."""
    from hub import pagecache
    from jobs.live import broadcast
    from jobs.queue.eta import plan_device

    t0 = t1 = t2 = time.monotonic()
    token = _flushing.set(pending)  # a replan's plan_changed joins this flush instead of sending on its own
    try:
        while pending.replan:
            device_id = pending.replan.pop()
            try:
                plan_device(device_id)
            except Exception:
                logger.exception("planning device %s failed", device_id)
        t1 = time.monotonic()
        for job_id, entered in pending.jobs.items():
            broadcast.broadcast_job(job_id, entered=entered)
        for job_id in pending.ticks - pending.jobs.keys():
            broadcast.broadcast_job(job_id, tick=True)
        t2 = time.monotonic()
        for device_id in sorted(pending.queues):
            broadcast.broadcast_queue(device_id)
        if pending.jobs or pending.queues:  # not for ticks alone: pages kept a few seconds show them late
            pagecache.changed()
    finally:
        _flushing.reset(token)
        t3 = time.monotonic()  # what live updates cost, beside the engine's steps (HUB_DEBUG_LOGGERS=jobs)
        logger.debug(
            "trace flush jobs=%s took=%.4f t=%.4f plan=%.4f job=%.4f queue=%.4f",
            list(pending.jobs),
            t3 - t0,
            time.time(),
            t1 - t0,
            t2 - t1,
            t3 - t2,
        )


@contextmanager
def held(*, aside: bool = False) -> Iterator[None]:
    """Hold the live updates (the replan, the pushes) of every change made in the block and send them once, when
    it ends (after commit). For the path from a render's end to the next request: each step's change would
    otherwise replan the device and push the job and the queue on its own, 10-30 ms of CPU each, while the
    device waits. What is sent is read from the database then, so nothing is lost by sending it later; a change
    that was rolled back only sends the truth again. Nested blocks join the outermost.

    ``aside``: send them from a thread of their own while this one goes on, for a caller that is about to sit
    in a device call for the whole render (a blocking job's request)."""
    if _held.get() is not None:
        yield
        return
    token = _held.set(Pending())
    try:
        yield
    finally:
        pending = _held.get()  # send_held may have started a new collection
        _held.reset(token)
        if pending is not None:
            _send(pending, aside=aside)


def send_held(*, aside: bool = False) -> None:
    """Inside :func:`held`: send what the block collected so far now, and go on collecting. Before a long wait
    that is not the device's (a result's download): the pages show what happened up to it."""
    pending = _held.get()
    if pending is not None:
        _held.set(Pending())
        _send(pending, aside=aside)


def _send(pending: Pending, *, aside: bool) -> None:
    if not (pending.jobs or pending.ticks or pending.replan or pending.queues):
        return
    if aside and not transaction.get_connection().in_atomic_block:
        _flush_aside(pending)
    else:
        transaction.on_commit(lambda: flush(pending))  # outside a transaction: at once


def _flush_aside(pending: Pending) -> None:
    def run() -> None:
        try:
            flush(pending)
        except Exception:  # best effort, as every live update
            logger.exception("sending live updates failed")
        finally:
            connections.close_all()  # this thread's own connections

    threading.Thread(target=run, name="live-updates", daemon=True).start()


def replan(device_id: int) -> None:
    """The device's plan must be computed anew (a job started or ended there): done with the change's pushes,
    once per collection (inside :func:`held`, once for the whole block)."""
    _schedule(device_id=device_id, replan=True)


def job_ticked(job_id: int) -> None:
    """A running job's progress or phase moved (saved with :func:`job_set`): its status, row and the running
    card go out, each at most about once a second."""
    _schedule(job_id=job_id, tick=True)


def plan_changed(device_id: int) -> None:
    """The device's plan was stored anew or one of its queue settings changed: its queue goes out once."""
    _schedule(device_id=device_id, queue=True)


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
        _schedule(job_id=job_id, device_id=device_id, entered=to, replan=replan, queue=True)
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
    from jobs.queue.eta import finish_drifted

    job = (
        Job.objects.filter(pk=job_id)
        .only("pk", "estimate_s", "progress", "remote_data", "predicted_finish")
        .first()
    )
    return job is None or finish_drifted(job, now=timezone.now())


def _notify(*, job_id: int, state: str, seq: int) -> None:
    from notify.services import job_entered

    job_entered(job_id=job_id, state=state, seq=seq)


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
        _schedule(job_id=job_id, device_id=device_id, queue="shared" in fields)
    return True


def job_set(job_id: int, *, only_in: Iterable[str] = (), **fields: Any) -> bool:
    """Plain field update (progress, phase, remote bookkeeping) guarded by state; no event, no broadcast
    (after a progress update, :func:`job_ticked` sends it)."""
    qs = Job.objects.filter(pk=job_id)
    if only_in:
        qs = qs.filter(state__in=list(only_in))
    return bool(qs.update(updated=timezone.now(), **fields))

"""What a transaction changed for the live pages, collected per transaction and handed to the outbox once.

Transitions (``jobs.core.transitions``) and the planner only *record* what changed: a job's new state, an
event, a progress tick, a device to replan, a queue to send. Once the transaction commits, the collection goes,
once, to the outbox that the jobs app registers at start-up (``jobs.live.outbox.send``, in ``JobsConfig.ready``):
it replans, pushes the pages and marks kept pages stale. The core never imports what sends.

The flow: transition -> changes (collected) -> commit -> outbox -> plan, pushes, page cache.
:func:`held` holds a whole block's changes (the path from a render's end to the next request) and sends them
once at its end.
"""

from __future__ import annotations

import contextvars
import logging
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from django.db import connections, transaction

logger = logging.getLogger("jobs")


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


def schedule(
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


#: The outbox: sends what one collection changed (registered by the jobs app; nothing is sent before).
_outbox: Callable[[Pending], None] | None = None


def register_outbox(send: Callable[[Pending], None]) -> None:
    """Called once at start-up (``JobsConfig.ready``) with the function that sends a collection."""
    global _outbox
    _outbox = send


def flush(pending: Pending) -> None:
    """Hand ``pending`` to the outbox. Changes recorded while it sends (a replan storing a new plan) join it."""
    if _outbox is None:
        return
    t0 = time.monotonic()
    token = _flushing.set(pending)  # a replan's plan_changed joins this flush instead of sending on its own
    try:
        _outbox(pending)
    finally:
        _flushing.reset(token)
        logger.debug(  # what live updates cost, beside the engine's steps (HUB_DEBUG_LOGGERS=jobs)
            "trace flush jobs=%s took=%.4f t=%.4f", list(pending.jobs), time.monotonic() - t0, time.time()
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
    schedule(device_id=device_id, replan=True)


def job_ticked(job_id: int) -> None:
    """A running job's progress or phase moved (saved with :func:`job_set`): its status, row and the running
    card go out, each at most about once a second."""
    schedule(job_id=job_id, tick=True)


def plan_changed(device_id: int) -> None:
    """The device's plan was stored anew or one of its queue settings changed: its queue goes out once."""
    schedule(device_id=device_id, queue=True)

"""What a transaction changed, collected while it runs and handed to the outbox once, after it commits.

The flow: transition -> outbox -> pages/pushes/notifications. Transitions (``jobs.core.transitions``), the
planner and the engine's progress reports only *record* here what changed: which jobs moved (and the state each
entered), which devices to replan, whose queue to send, which progress ticks. Once the transaction commits, its
collection (:class:`Changes`) goes, once, to the outbox the jobs app registers at start-up
(``jobs.live.outbox.send``, in ``JobsConfig.ready``), whose handlers replan, push, mark kept pages stale and
notify. The core never imports what sends; a rolled-back transaction sends nothing.

:func:`held` holds a block's live updates (the path from a render's end to the next request) and sends them once,
at its end. What a job entering a state tells people (``Changes.entered``) is never held: it goes out with the
commit of its own transaction.
"""

from __future__ import annotations

import contextvars
import logging
import threading
import time
import weakref
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

from django.db import connections, transaction

logger = logging.getLogger("jobs")


@dataclass(frozen=True)
class Entered:
    """A job entered ``state``; ``seq`` is its event's (what tells people of it is keyed on it)."""

    job_id: int
    state: str
    seq: int


@dataclass
class Changes:
    """What one transaction (or one :func:`held` block) changed."""

    #: job id -> the state it entered (None: an event without a state change)
    jobs: dict[int, str | None] = field(default_factory=dict)
    ticks: set[int] = field(default_factory=set)  # jobs whose progress alone moved
    replan: set[int] = field(default_factory=set)  # devices to replan before anything is rendered
    #: job id -> its device, for a job that moved on while it holds the device (preparing → submitted → running →
    #: collecting): the device is replanned only when that job's finish drifted from the stored plan
    moved: dict[int, int] = field(default_factory=dict)
    queues: set[int] = field(default_factory=set)  # devices whose queue goes out
    entered: list[Entered] = field(default_factory=list)  # each state a job entered, in order
    #: jobs whose finished result found the hub's disk full and now wait for space (the admins are told)
    disk_full: list[int] = field(default_factory=list)
    sent: bool = field(default=False, repr=False)  # a transaction's collection: sent after its commit already
    #: a transaction's collection: its sendings registered after commit that no rollback has discarded yet (a
    #: rollback drops Django's last reference to them); none left, and the collection is of no transaction.
    registered: weakref.WeakSet = field(default_factory=weakref.WeakSet, repr=False)

    def is_empty(self) -> bool:
        return not (
            self.jobs
            or self.ticks
            or self.replan
            or self.moved
            or self.queues
            or self.entered
            or self.disk_full
        )


_flushing: contextvars.ContextVar[Changes | None] = contextvars.ContextVar("hub_live_flushing", default=None)
_held: contextvars.ContextVar[Changes | None] = contextvars.ContextVar("hub_live_held", default=None)
_CONN_ATTR = "_hub_live_changes"


# -- recording ---------------------------------------------------------------------------------------------------
def job_entered(job_id: int, device_id: int | None, *, state: str, seq: int, moved_on: bool) -> None:
    """A job entered ``state`` (its event ``seq``): the job and its device's queue go out, the device is replanned
    (``moved_on``, a job moving on while it holds the device: only when its finish drifted), and the outbox's
    notification handlers hear of it."""
    with _recording() as live:
        live.jobs[job_id] = state
        if device_id is not None:
            if moved_on:
                live.moved[job_id] = device_id
            else:
                live.replan.add(device_id)
            live.queues.add(device_id)
    # Not a live update, so never held: it goes with its transaction's commit.
    with _recording(hold=False, exact=True) as told:
        told.entered.append(Entered(job_id, state, seq))


def job_noted(job_id: int, device_id: int | None, *, queue: bool = False) -> None:
    """An event in a job's story without a state change: the job goes out (``queue``: its device's queue too)."""
    with _recording() as live:
        live.jobs.setdefault(job_id, None)
        if queue and device_id is not None:
            live.queues.add(device_id)


def job_waits_for_disk(job_id: int) -> None:
    """A job's result found the disk full and the job now waits for space: the outbox's notification handlers
    tell the admins. Never held, like a state entered."""
    with _recording(hold=False, exact=True) as told:
        told.disk_full.append(job_id)


def job_ticked(job_id: int) -> None:
    """A running job's progress or phase moved (saved with ``job_set``): its status, row and the running
    card go out, each at most about once a second."""
    with _recording() as live:
        live.ticks.add(job_id)


def replan(device_id: int) -> None:
    """The device's plan must be computed anew (a job started or ended there): done with the change's pushes,
    once per collection (inside :func:`held`, once for the whole block)."""
    with _recording() as live:
        live.replan.add(device_id)
        live.queues.add(device_id)


def plan_changed(device_id: int) -> None:
    """The device's plan was stored anew or one of its queue settings changed: its queue goes out once."""
    with _recording() as live:
        live.queues.add(device_id)


@contextmanager
def _recording(*, hold: bool = True, exact: bool = False) -> Iterator[Changes]:
    """The collection a change is recorded in, sent after commit (outside a transaction: at once)."""
    changes, register = _collection(hold=hold, exact=exact)
    yield changes
    if register:
        _send_after_commit(changes)


def _collection(*, hold: bool, exact: bool) -> tuple[Changes, bool]:
    """The collection a change joins, and whether the change must register its sending after commit: while the
    outbox sends one, that one (a replan's new plan joins its own sending); inside :func:`held` (``hold``), the
    block's; else the transaction's, or a fresh one outside a transaction (sent at once). ``exact``: a state
    entered never joins a collection being sent or held (it goes with its own transaction's commit).

    Every change made in a transaction registers the sending of the transaction's collection, which sends once
    (:func:`_send_after_commit`): a savepoint rolled back discards only its own registrations, so a later change
    in the same transaction still sends the collection. What a rolled-back savepoint's change recorded may go out
    with it; that only sends the truth again (every handler reads the database, and notify tells only of a change
    whose notice committed: ``jobs.core.notices``). Once a rollback discarded every sending a collection
    registered, the next change starts a new one.
    """
    if not exact and (flushing := _flushing.get()) is not None:
        return flushing, False
    if hold and (holding := _held.get()) is not None:
        return holding, False
    conn = transaction.get_connection()
    if not conn.in_atomic_block:
        return Changes(), True
    current: Changes | None = getattr(conn, _CONN_ATTR, None)
    if current is None or current.sent or not current.registered:  # sent, or every change in it rolled back
        current = Changes()
        setattr(conn, _CONN_ATTR, current)
    return current, True


def _send_after_commit(changes: Changes) -> None:
    def run() -> None:
        if changes.sent:
            return  # another change of the same transaction sent it
        changes.sent = True
        conn = transaction.get_connection()
        if getattr(conn, _CONN_ATTR, None) is changes:
            setattr(conn, _CONN_ATTR, None)
        flush(changes)

    changes.registered.add(run)
    transaction.on_commit(run)  # outside a transaction: at once


# -- sending -----------------------------------------------------------------------------------------------------
#: The outbox: sends what one collection changed (registered by the jobs app; nothing is sent before).
_outbox: Callable[[Changes], None] | None = None


def register_outbox(send: Callable[[Changes], None]) -> None:
    """Called once at start-up (``JobsConfig.ready``) with the function that sends a collection."""
    global _outbox
    _outbox = send


def flush(changes: Changes) -> None:
    """Hand ``changes`` to the outbox. Changes recorded while it sends (a replan storing a new plan) join it."""
    if _outbox is None:
        return
    t0 = time.monotonic()
    token = _flushing.set(changes)
    try:
        _outbox(changes)
    finally:
        _flushing.reset(token)
        logger.debug(  # what live updates cost, beside the engine's steps (HUB_DEBUG_LOGGERS=jobs)
            "trace flush jobs=%s took=%.4f t=%.4f", list(changes.jobs), time.monotonic() - t0, time.time()
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
    token = _held.set(Changes())
    try:
        yield
    finally:
        changes = _held.get()  # send_held may have started a new collection
        _held.reset(token)
        if changes is not None:
            _send(changes, aside=aside)


def send_held(*, aside: bool = False) -> None:
    """Inside :func:`held`: send what the block collected so far now, and go on collecting. Before a long wait
    that is not the device's (a result's download): the pages show what happened up to it."""
    changes = _held.get()
    if changes is not None:
        _held.set(Changes())
        _send(changes, aside=aside)


def _send(changes: Changes, *, aside: bool) -> None:
    if changes.is_empty():
        return
    if aside and not transaction.get_connection().in_atomic_block:
        _flush_aside(changes)
    else:
        transaction.on_commit(lambda: flush(changes))  # outside a transaction: at once


def _flush_aside(changes: Changes) -> None:
    def run() -> None:
        try:
            flush(changes)
        except Exception:  # best effort, as every live update
            logger.exception("sending live updates failed")
        finally:
            connections.close_all()  # this thread's own connections

    threading.Thread(target=run, name="live-updates", daemon=True).start()

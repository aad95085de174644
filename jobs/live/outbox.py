"""The outbox: what a transaction changed goes out once, after it commits, through handlers registered at start-up.

The flow: transition -> outbox -> pages/pushes/notifications.

1. ``jobs.core.transitions`` (and the planner, and the engine's progress reports) only record what changed in the
   transaction's collection (``jobs.core.changes.Changes``): which jobs moved and the state each entered, which
   devices to replan, whose queue to send, which progress ticks.
2. Once the transaction commits, ``jobs.core.changes`` hands the collection, once, to :func:`send` (registered in
   ``JobsConfig.ready``: the core never imports what sends). A rolled-back transaction sends nothing.
3. :func:`send` calls the handlers registered here, stage by stage (:data:`STAGES`): ``plan``, the planner
   (``jobs.queue.eta.replan_changed``: the pages show its times, so it goes first); ``push``, this module's :func:`push`
   (``jobs.live.broadcast``) then :func:`pages_changed` (``hub.pagecache``); ``notify``, what a job entering a
   state tells people (``notify.job_news.jobs_entered``, registered by ``notify.apps``, the layer above jobs).

Every handler is best effort: one that fails is logged, the ones after it still run, and no job ever fails by it.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from hub import pagecache
from jobs.core.changes import Changes
from jobs.live import broadcast

logger = logging.getLogger("jobs")

#: The order handlers are called in; within a stage, the order they were registered in.
STAGES = ("plan", "push", "notify")
Handler = Callable[[Changes], None]
_handlers: dict[str, list[Handler]] = {stage: [] for stage in STAGES}


def register(stage: str, handler: Handler) -> None:
    """At start-up (an ``AppConfig.ready``): ``handler`` is called with every collection sent, in ``stage``."""
    if handler not in _handlers[stage]:
        _handlers[stage].append(handler)


def send(changes: Changes) -> None:
    """Call every registered handler with ``changes`` (``jobs.core.changes`` calls it once per collection)."""
    for stage in STAGES:
        for handler in _handlers[stage]:
            try:
                handler(changes)
            except Exception:
                logger.exception(
                    "the outbox's %s handler %s failed", stage, getattr(handler, "__name__", handler)
                )


def push(changes: Changes) -> None:
    """``push``: each changed job once, then each job whose progress alone moved, then each device's queue once."""
    for job_id, entered in changes.jobs.items():
        broadcast.broadcast_job(job_id, entered=entered)
    for job_id in changes.ticks - changes.jobs.keys():
        broadcast.broadcast_job(job_id, tick=True)
    for device_id in sorted(changes.queues):
        broadcast.broadcast_queue(device_id)


def pages_changed(changes: Changes) -> None:
    """``push``, after the pushes: a new generation for the pages kept in the page cache (``hub.pagecache``), so no
    browser is shown a page from before the change. Not for ticks alone: pages kept a few seconds show them late."""
    if changes.jobs or changes.queues:
        pagecache.changed()

"""The outbox: sends what one transaction changed, once, after it commits.

``jobs.core.changes`` collects the changes (transitions and the planner record them); this module is what
``JobsConfig.ready`` registers to send them. In order: the devices to replan first (their plan is what the
pages show), then each changed job once, each progress tick once, each queue once, and last a new generation
for pages kept in the page cache (``hub.pagecache``), so no browser is shown a page from before the change.
"""

from __future__ import annotations

import logging

from hub import pagecache
from jobs.core.changes import Pending
from jobs.live import broadcast
from jobs.queue import eta

logger = logging.getLogger("jobs")


def send(pending: Pending) -> None:
    while pending.replan:  # a replan may record a queue change: it joins this same sending
        device_id = pending.replan.pop()
        try:
            eta.plan_device(device_id)
        except Exception:
            logger.exception("planning device %s failed", device_id)
    for job_id, entered in pending.jobs.items():
        broadcast.broadcast_job(job_id, entered=entered)
    for job_id in pending.ticks - pending.jobs.keys():
        broadcast.broadcast_job(job_id, tick=True)
    for device_id in sorted(pending.queues):
        broadcast.broadcast_queue(device_id)
    if pending.jobs or pending.queues:  # not for ticks alone: pages kept a few seconds show them late
        pagecache.changed()

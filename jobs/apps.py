"""The jobs app's start-up: its websocket topics, the outbox's handlers and the hooks the device layer calls.

transition -> outbox -> pages/pushes/notifications: what a transaction changed (``jobs.core.changes``) goes, once
it commits, to ``jobs.live.outbox.send``, which calls the handlers registered here (the planner, the pushes, the
page cache) and notify's (``NotifyConfig.ready``).
"""

from __future__ import annotations

import datetime as dt
import logging
from typing import Any

from django.apps import AppConfig
from django.utils import timezone

from hub import live
from jobs.core import changes

logger = logging.getLogger("jobs")


class JobsConfig(AppConfig):
    name = "jobs"
    verbose_name = "Jobs"

    def ready(self) -> None:
        # These import the models, which the app registry has ready only now.
        from devices import hooks as device_hooks
        from jobs.kinds.table import kinds_for
        from jobs.live import outbox, topics

        live.register_topic("job", topics.job_topic)
        live.register_topic("queue", topics.queue_topic)
        live.register_topic("plan", topics.plan_topic)
        live.register_topic("mine", topics.mine_topic)
        # What a transaction changed goes out through the outbox, stage by stage; the core never imports what
        # sends. The planner first (the pages show its times), then the pushes and the page cache.
        changes.register_outbox(outbox.send)
        outbox.register("plan", replan)
        outbox.register("push", outbox.push)
        outbox.register("push", outbox.pages_changed)
        # The device layer asks jobs through hooks (it never imports jobs): the kinds a device can run, and
        # whether one of its jobs is about to poll it (the metric poller's optional tick then gives way).
        device_hooks.register_job_kinds(kinds_for)
        device_hooks.register_jobs_ask_soon(jobs_ask_soon)


def replan(collected: changes.Changes) -> None:
    """The outbox's ``plan`` stage: each device whose plan moved is planned anew (``jobs.queue.eta.plan_device``)
    before anything is pushed; one whose job only moved on while holding it, when that job's finish drifted."""
    # The planner imports the models, which apps.py may not (it is imported before the app registry is ready).
    from jobs.queue import eta

    collected.replan |= _drifted(collected)
    while collected.replan:  # a replan records its queue in this same collection: it goes out with it
        device_id = collected.replan.pop()
        try:
            eta.plan_device(device_id)
        except Exception:
            logger.exception("planning device %s failed", device_id)


def _drifted(collected: changes.Changes) -> set[int]:
    """The devices of the jobs that moved on while holding them whose finish drifted from the stored plan
    (``jobs.queue.eta.finish_drifted``; after a model load, say), or that are gone."""
    # The planner and the models can't be imported with apps.py (before the app registry is ready).
    from jobs.models import Job
    from jobs.queue import eta

    moved = {job: device for job, device in collected.moved.items() if device not in collected.replan}
    if not moved:
        return set()
    fields = ("pk", "estimate_s", "progress", "remote_data", "predicted_finish")
    jobs = {job.pk: job for job in Job.objects.filter(pk__in=moved).only(*fields)}
    now = timezone.now()
    return {
        device for job, device in moved.items() if job not in jobs or eta.finish_drifted(jobs[job], now=now)
    }


def jobs_ask_soon(device: Any, now: dt.datetime, window: dt.timedelta) -> bool:
    """``devices.hooks.jobs_ask_soon``: a submitted or running job of ``device`` polls it within ``window`` of now."""
    from jobs.models import JobState  # apps.py is imported before the app registry is ready

    return device.jobs.filter(
        state__in=(JobState.SUBMITTED, JobState.RUNNING),
        next_poll_at__lte=now + window,
        next_poll_at__gte=now - window,
    ).exists()

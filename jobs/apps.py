from __future__ import annotations

import datetime as dt
from typing import Any

from django.apps import AppConfig


class JobsConfig(AppConfig):
    name = "jobs"
    verbose_name = "Jobs"

    def ready(self) -> None:
        # The app registry is ready only now: these modules import the models.
        from django.utils import timezone

        from devices import hooks as device_hooks
        from hub import live
        from jobs.core import changes, transitions
        from jobs.kinds.table import kinds_for
        from jobs.live import outbox
        from jobs.live import topics as jobs_live
        from jobs.queue import eta

        live.register_topic("job", jobs_live.job_topic)
        live.register_topic("queue", jobs_live.queue_topic)
        live.register_topic("plan", jobs_live.plan_topic)
        live.register_topic("mine", jobs_live.mine_topic)
        # What a transaction changed goes out through the outbox; the core never imports what sends.
        changes.register_outbox(outbox.send)
        transitions.register_drift_check(lambda job: eta.finish_drifted(job, now=timezone.now()))
        # The device layer asks jobs through hooks (it never imports jobs): the kinds a device can run, and
        # whether one of its jobs is about to poll it (the metric poller's optional tick then gives way).
        device_hooks.register_job_kinds(kinds_for)
        device_hooks.register_jobs_ask_soon(jobs_ask_soon)


def jobs_ask_soon(device: Any, now: dt.datetime, window: dt.timedelta) -> bool:
    """``devices.hooks.jobs_ask_soon``: a submitted or running job of ``device`` polls it within ``window`` of now."""
    from jobs.models import JobState  # apps.py is imported before the app registry is ready

    return device.jobs.filter(
        state__in=(JobState.SUBMITTED, JobState.RUNNING),
        next_poll_at__lte=now + window,
        next_poll_at__gte=now - window,
    ).exists()

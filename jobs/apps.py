from __future__ import annotations

from django.apps import AppConfig


class JobsConfig(AppConfig):
    name = "jobs"
    verbose_name = "Jobs"

    def ready(self) -> None:
        # The app registry is ready only now: these modules import the models.
        from django.utils import timezone

        from hub import live
        from jobs.core import changes, transitions
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

from __future__ import annotations

from django.apps import AppConfig


class JobsConfig(AppConfig):
    name = "jobs"
    verbose_name = "Jobs"

    def ready(self) -> None:
        from hub import live
        from jobs.live import topics as jobs_live

        live.register_topic("job", jobs_live.job_topic)
        live.register_topic("queue", jobs_live.queue_topic)
        live.register_topic("plan", jobs_live.plan_topic)
        live.register_topic("mine", jobs_live.mine_topic)

"""The jobs app's start-up: its websocket topics, the outbox's handlers and the hooks the device layer calls.

transition -> outbox -> pages/pushes/notifications: what a transaction changed (``jobs.core.changes``) goes, once
it commits, to ``jobs.live.outbox.send``, which calls the handlers registered here (the planner, the pushes, the
page cache) and notify's (``NotifyConfig.ready``).
"""

from __future__ import annotations

from django.apps import AppConfig

from hub import live
from jobs.core import changes


class JobsConfig(AppConfig):
    name = "jobs"
    verbose_name = "Jobs"

    def ready(self) -> None:
        # These import the models, which the app registry has ready only now.
        from devices import hooks as device_hooks
        from jobs.core.selectors import jobs_ask_soon
        from jobs.kinds.table import kinds_for
        from jobs.live import outbox, topics
        from jobs.queue.eta import replan_changed
        from jobs.queue.pool import device_capabilities_changed, device_state_changed

        live.register_topic("job", topics.job_topic)
        live.register_topic("queue", topics.queue_topic)
        live.register_topic("plan", topics.plan_topic)
        live.register_topic("mine", topics.mine_topic)
        live.register_topic("album", topics.album_topic)
        # What a transaction changed goes out through the outbox, stage by stage; the core never imports what
        # sends. The planner first (the pages show its times), then the pushes and the page cache.
        changes.register_outbox(outbox.send)
        outbox.register("plan", replan_changed)
        outbox.register("push", outbox.push)
        outbox.register("push", outbox.pages_changed)
        # The device layer asks jobs through hooks (it never imports jobs): the kinds a device can run, and
        # whether one of its jobs is about to poll it (the metric poller's optional tick then gives way).
        device_hooks.register_job_kinds(kinds_for)
        device_hooks.register_jobs_ask_soon(jobs_ask_soon)
        # A device that goes away or comes back: the pool's waiting jobs move to the devices that may run them.
        device_hooks.register_device_state_changed(device_state_changed)
        # A device added, or one that gained or lost a model: the waiting pool jobs it can run take it in.
        device_hooks.register_device_capabilities_changed(device_capabilities_changed)

from __future__ import annotations

from django.apps import AppConfig


class NotifyConfig(AppConfig):
    name = "notify"
    verbose_name = "Notifications"

    def ready(self) -> None:
        # These import the models, which the app registry has ready only now.
        from devices import hooks as device_hooks
        from jobs.core import notices
        from jobs.live import outbox
        from jobs.queue import retention
        from notify.job_news import TOLD_STATES, jobs_entered, jobs_waiting_for_disk
        from notify.retention import results_expiring
        from notify.services import device_locked

        # Notify is above jobs: it hears of what a transaction changed from the outbox, last (after the pushes).
        outbox.register("notify", jobs_entered)  # a job entering a state tells the people who follow it
        outbox.register(
            "notify", jobs_waiting_for_disk
        )  # a result waiting for disk space tells the household
        notices.tell_of_states(TOLD_STATES)  # these transitions keep a notice until told: a crash loses none
        device_hooks.register_device_locked(device_locked)  # a device locked tells the household
        retention.register_announced(results_expiring)  # a rule's announcement tells the results' owner

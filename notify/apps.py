from __future__ import annotations

from django.apps import AppConfig


class NotifyConfig(AppConfig):
    name = "notify"
    verbose_name = "Notifications"

    def ready(self) -> None:
        # The app registry is ready only now: these modules import the models.
        from devices import hooks as device_hooks
        from jobs.core import transitions
        from notify.services import device_locked, job_entered

        transitions.register_entered(job_entered)  # a job entering a state tells the people who follow it
        device_hooks.register_device_locked(device_locked)  # a device locked tells the household

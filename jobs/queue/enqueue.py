"""The queue's one way to hand work to Celery: by task name.

``jobs.tasks`` holds the Celery tasks, thin ways into the engine, so it imports ``jobs.queue``; the queue in turn
sends tasks by their registered names (``jobs.tasks.<name>``) and never imports that module. Sending through a
signature keeps Celery's own behaviour: ``task_always_eager`` runs the task in place, options such as
``countdown`` and time limits pass through as given.

Work that talks to a device goes to that device's queue (``hub.celery.device_queue``), so a worker limited to some
devices (``HUB_WORKER_DEVICES``) is the one that drives them; the rest goes to the default queue.
"""

from __future__ import annotations

from typing import Any

from celery import current_app
from django.db import transaction

from hub.celery import device_queue
from jobs.models import Job

#: The tasks that talk to a device, and what their first argument is: the device's id, or a job's.
DEVICE_TASKS = {
    "dispatch": "device",  # claims the next job and sends its run: with the device, so a device nobody drives
    # keeps its jobs queued instead of claimed
    "run_job": "job",  # the model load and the submit (for blocking and stream runners, the whole call)
    "poll_job": "job",  # a render's poll and, at its end, the download (collect)
    "recover_job": "job",
    "cancel_on_device": "job",
    "stop_lost_renders": "device",  # renders given up while the device was away (jobs.queue.pool)
}


def queue_for(task: str, args: tuple) -> str | None:
    """The queue ``jobs.tasks.<task>`` with ``args`` goes to: its device's, or None (the default queue) for work
    that touches no device, or a job that is gone (its task finds nothing to do wherever it runs)."""
    first = DEVICE_TASKS.get(task)
    if first is None or not args:
        return None
    if first == "device":
        return device_queue(args[0])
    device_id = Job.objects.filter(pk=args[0]).values_list("device_id", flat=True).first()
    return device_queue(device_id) if device_id is not None else None


def send(task: str, *args: Any, **options: Any) -> Any:
    """Queue ``jobs.tasks.<task>`` with these arguments now (``options`` as for ``apply_async``), on its device's
    queue when it talks to one."""
    if "queue" not in options and (queue := queue_for(task, args)):
        options["queue"] = queue
    return current_app.signature(f"jobs.tasks.{task}", args=args).apply_async(**options)


def send_on_commit(task: str, *args: Any, robust: bool = False) -> None:
    """Queue ``jobs.tasks.<task>`` once the transaction commits (at once outside one).

    ``robust``: a send that fails (the broker is down) is logged by Django instead of raised, for callers whose
    work stands whatever the broker says and whose task beat's reconcile sends later.
    """
    transaction.on_commit(lambda: send(task, *args), robust=robust)

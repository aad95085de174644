"""The queue's one way to hand work to Celery: by task name.

``jobs.tasks`` holds the Celery tasks, thin ways into the engine, so it imports ``jobs.queue``; the queue in turn
sends tasks by their registered names (``jobs.tasks.<name>``) and never imports that module. Sending through a
signature keeps Celery's own behaviour: ``task_always_eager`` runs the task in place, options such as
``countdown`` and time limits pass through as given.
"""

from __future__ import annotations

from typing import Any

from celery import current_app
from django.db import transaction


def send(task: str, *args: Any, **options: Any) -> Any:
    """Queue ``jobs.tasks.<task>`` with these arguments now (``options`` as for ``apply_async``)."""
    return current_app.signature(f"jobs.tasks.{task}", args=args).apply_async(**options)


def send_on_commit(task: str, *args: Any, robust: bool = False) -> None:
    """Queue ``jobs.tasks.<task>`` once the transaction commits (at once outside one).

    ``robust``: a send that fails (the broker is down) is logged by Django instead of raised, for callers whose
    work stands whatever the broker says and whose task beat's reconcile sends later.
    """
    transaction.on_commit(lambda: send(task, *args), robust=robust)

"""Celery tasks: thin, id-taking ways into ``notify.services``. Safe to run twice (the row is claimed first).

``notify.services`` sends them by name (``notify.tasks.deliver``) and never imports this module.
"""

from __future__ import annotations

from celery import shared_task

from notify.services import delivery_attempt, delivery_sweep


@shared_task(ignore_result=True, soft_time_limit=60, time_limit=75)
def deliver(delivery_id: int) -> str:
    """One attempt of one delivery: short (every sender has a timeout); a retry is a new task with a countdown."""
    return delivery_attempt(delivery_id=delivery_id)


@shared_task(ignore_result=True, soft_time_limit=20, time_limit=30)
def sweep() -> int:
    """Beat, every minute: deliveries whose task was lost (see ``notify.services.delivery_sweep``)."""
    return delivery_sweep()

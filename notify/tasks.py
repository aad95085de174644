"""Celery tasks: thin, id-taking ways into ``notify.services``. Safe to run twice (the row is claimed first).

``notify.services`` and ``notify.confirm`` send them by name (``notify.tasks.deliver``, ``notify.tasks.confirm_mail``)
and never import this module.
"""

from __future__ import annotations

from smtplib import SMTPException

from celery import shared_task

from notify.confirm import confirmation_mail_send
from notify.job_news import notices_sweep
from notify.services import delivery_attempt, delivery_sweep


@shared_task(ignore_result=True, soft_time_limit=60, time_limit=75)
def deliver(delivery_id: int) -> str:
    """One attempt of one delivery: short (every sender has a timeout); a retry is a new task with a countdown."""
    return delivery_attempt(delivery_id=delivery_id)


@shared_task(ignore_result=True, soft_time_limit=20, time_limit=30)
def sweep() -> int:
    """Beat, every minute: job notices whose hand-over was lost (``notify.job_news.notices_sweep``), then
    deliveries whose task was lost (``notify.services.delivery_sweep``)."""
    return notices_sweep() + delivery_sweep()


@shared_task(
    ignore_result=True,
    autoretry_for=(OSError, SMTPException),  # a mail server that is down or slow: try again, a few times
    retry_backoff=30,
    max_retries=3,
)
def confirm_mail(confirmation_id: int, origin: str) -> bool:
    """One email-confirmation mail; the link's token is made here, so none travels through the broker."""
    return confirmation_mail_send(confirmation_id=confirmation_id, origin=origin)

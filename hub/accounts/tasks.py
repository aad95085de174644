"""Celery tasks of the accounts app: thin doors to services (they take ids, never rows)."""

from __future__ import annotations

from smtplib import SMTPException

from celery import shared_task

from hub.accounts.services import password_reset_mail_send


@shared_task(
    ignore_result=True,
    autoretry_for=(OSError, SMTPException),  # a mail server that is down or slow: try again, a few times
    retry_backoff=30,
    max_retries=3,
)
def password_reset_mail(user_id: int, base_url: str) -> None:
    password_reset_mail_send(user_id=user_id, base_url=base_url)

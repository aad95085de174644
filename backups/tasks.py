"""Celery tasks: beat's daily backup (``backups.services.daily_backup``)."""

from __future__ import annotations

from celery import shared_task

from backups.services import daily_backup


# A backup is the one long task: a first backup copies every result (hours on a big hub and a slow disk). It runs
# once a day, outside the night window, and takes one worker slot while it lasts.
@shared_task(ignore_result=True, soft_time_limit=6 * 3600, time_limit=6 * 3600 + 300)
def daily() -> str:
    return daily_backup()

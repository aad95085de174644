"""Retention's announcement, told to the results' owner: ``NotifyConfig.ready`` registers :func:`results_expiring`
with ``jobs.queue.retention`` (jobs never imports notify). One message per person and day their results go, to
each of their channels that wants "my job finished" (the event has no flag of its own); never raises."""

from __future__ import annotations

import datetime as dt
import logging
from typing import Any

from celery import current_app
from django.contrib.auth import get_user_model
from django.db import transaction
from django.utils import timezone

from jobs.queue import retention
from notify.models import Channel, Delivery, Event

logger = logging.getLogger("notify")


def _enqueue(delivery_id: int) -> None:
    """``notify.tasks.deliver`` after commit, by its name (as ``notify.services`` enqueues)."""

    def send() -> None:
        current_app.signature("notify.tasks.deliver", args=(delivery_id,)).apply_async()

    transaction.on_commit(send, robust=True)


def results_expiring(owner_id: int, job_ids: list[int], due: dt.datetime) -> list[int]:
    """The hook ``jobs.queue.retention`` calls after a run announced some of a person's results: one message to
    each of their channels that wants "my job finished", once per person and day it is due. Never raises."""
    try:
        if not job_ids:
            return []
        owner = get_user_model().objects.filter(pk=owner_id, is_active=True).first()
        if owner is None:
            return []
        key = f"{Event.RESULTS_EXPIRING}:{owner_id}:{due:%Y%m%d}"
        made = []
        with transaction.atomic():
            for channel_id in Channel.objects.filter(
                Channel.wanting(Event.JOB_DONE), owner=owner
            ).values_list("pk", flat=True):
                delivery, created = Delivery.objects.get_or_create(
                    channel_id=channel_id,
                    key=key[:100],
                    attempt=1,
                    defaults={"event": Event.RESULTS_EXPIRING, "job_id": max(job_ids)},
                )
                if created:
                    made.append(delivery.pk)
                    _enqueue(delivery.pk)
        return made
    except Exception:
        logger.exception("notifications for person %s (results expiring) could not be prepared", owner_id)
        return []


def expiring_message(delivery: Delivery) -> tuple[str, str, str, dict[str, Any]]:
    owner_id = delivery.job.owner_id if delivery.job else delivery.channel.owner_id
    notices = list(retention.notices_of(owner_id))
    when = min((n.due_at for n in notices), default=None)
    day = f"{timezone.localtime(when):%A %d %b}" if when else "in a week"
    count = len(notices)
    title = f"{count} result{'s' if count != 1 else ''} go to the trash on {day}"
    body = (
        "A retention rule of the hub moves them to the trash then (restorable there for a while). Bookmark the ones "
        "you want to keep; the Retention page lists them."
    )
    return "/jobs/retention/", title, body, {"results": [n.job_id for n in notices[:50]], "count": count}

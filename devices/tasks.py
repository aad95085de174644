"""Beat-driven device polling. Tasks take ids, claim before acting, and are safe to run twice."""

from __future__ import annotations

import logging

from celery import shared_task
from django.utils import timezone

from devices.live import device_push
from devices.metrics import metrics_prune
from devices.models import Device
from devices.services import (
    device_claim_enqueue,
    device_poll_claim,
    device_poll_interval,
    device_refresh,
    device_tick_yields,
)
from hub.live import is_watched

logger = logging.getLogger("devices")


@shared_task(ignore_result=True, soft_time_limit=10, time_limit=15)
def poll_all() -> int:
    """Every 2 s (beat): enqueue ``poll_device`` for each device that is due. Returns how many."""
    now = timezone.now()
    enqueued = 0
    for device in Device.objects.only("pk", "next_poll_at", "active_until", "state", "reading_at"):
        watched = is_watched(f"device:{device.pk}")
        interval = device_poll_interval(device=device, watched=watched, now=now)
        # Due when its time has come, or when it sits on the slow schedule but someone started watching.
        due = (
            device.next_poll_at is None
            or device.next_poll_at <= now
            or (device.next_poll_at - now > interval)
        )
        if due and watched and device_tick_yields(device=device, now=now):
            continue  # the job's own requests come now: look again at the next beat (still due then)
        if due and device_claim_enqueue(device=device, interval=interval, now=now):
            # Expires: a poll that waited longer than a slow interval in a backed-up queue is worthless.
            poll_device.apply_async((device.pk,), expires=30)
            enqueued += 1
    return enqueued


@shared_task(ignore_result=True, soft_time_limit=25, time_limit=30)
def poll_device(device_id: int) -> str | None:
    """Read the device once, record what happened, push the card and gauges."""
    with device_poll_claim(device_id=device_id) as held:
        if not held:
            return None  # another worker is polling it right now
        try:
            state = device_refresh(device_id=device_id)
        except Exception:
            logger.exception("polling device %s failed", device_id)
            return None
    device_push(device_id)
    return state


@shared_task(ignore_result=True)
def prune_metrics() -> int:
    return metrics_prune()

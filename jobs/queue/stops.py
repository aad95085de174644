"""The stop of a cancelled render, as the device lease records it: is one pending, was it sent, or could it not be.

A cancelled poll-style render may still run on the device until ``jobs.queue.engine.cancel_on_device`` stops it
there and frees the lease; until then nothing else starts on the device (``jobs.queue.dispatch``), and reconcile
sends the stop again when its message is lost (``jobs.queue.reconcile.resend_stops``).
"""

from __future__ import annotations

import datetime as dt

from django.conf import settings
from django.utils import timezone

from jobs.core import lease
from jobs.kinds.table import style_of
from jobs.models import DeviceLease, JobState


def stops_pending(device_ids: list[int]) -> dict[int, int]:
    """{device: job} for the devices whose lease a cancelled poll-style render still holds: the device may still
    be rendering it (cancel_on_device frees the lease when the stop is done), so nothing else may start there."""
    rows = (
        DeviceLease.objects.filter(pk__in=device_ids, job__state=JobState.CANCELLED)
        .exclude(job__remote_id="")
        .values_list("device_id", "job_id", "job__kind", "device__kind")
    )
    return {
        device_id: job_id
        for device_id, job_id, kind, device_kind in rows
        if style_of(device_kind, kind) == "poll"
    }


def stop_pickup() -> dt.timedelta:
    """How long a queued stop may wait for a worker before reconcile sends it again (a few reconcile rounds)."""
    return dt.timedelta(seconds=max(15.0, 3 * settings.JOBS_RECONCILE_S))


def stop_sent(job_id: int, device_id: int) -> None:
    """The stop of a cancelled render is queued: if its message is lost, reconcile re-sends it after
    ``stop_pickup()``, not after the job's whole lease TTL (the device would render a cancelled job meanwhile)."""
    lease.lease_stop_sent(device_id, job_id, pickup=stop_pickup())


def stop_unsent(job_id: int, device_id: int) -> None:
    """The stop of a cancelled render could not be queued (the broker is down): its lease is marked expired
    (nobody is stopping it), so reconcile sends the stop at its first run once the broker is back."""
    DeviceLease.objects.filter(pk=device_id, job_id=job_id).update(expires_at=timezone.now())

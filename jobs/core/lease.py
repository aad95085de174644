"""One job per device, model loads included: a lease row per device, taken and renewed by conditional UPDATEs.

* ``lease_acquire`` takes a free or expired lease for a job (``expires_at < now OR job IS NULL``).
* ``lease_renew`` extends it while the job works; it only succeeds for the job that holds it (or re-takes a
  lapsed lease for that job: the poll chain revived by reconcile does this).
* ``lease_release`` frees it, only for its holder.
* ``keep_alive`` renews from a background thread while a worker sits in one long device call (a model load, a
  blocking render, an SSE stream). If the worker process is killed, the thread dies with it, the lease lapses
  after ``JOBS_LEASE_TTL_S`` and reconcile recovers the job.
"""

from __future__ import annotations

import datetime as dt
import logging
import secrets
import threading
from collections.abc import Iterator
from contextlib import contextmanager

from django.conf import settings
from django.db import IntegrityError, close_old_connections, connection, transaction
from django.db.models import Q
from django.utils import timezone

from devices.services import device_mark_active
from jobs.models import DeviceLease, Job

logger = logging.getLogger("jobs.core.lease")


def ttl() -> dt.timedelta:
    return dt.timedelta(seconds=settings.JOBS_LEASE_TTL_S)


def _ensure_row(device_id: int) -> None:
    if DeviceLease.objects.filter(pk=device_id).exists():
        return
    try:
        with transaction.atomic():
            DeviceLease.objects.create(device_id=device_id)
    except IntegrityError:
        pass  # another process created it first


def lease_acquire(device_id: int, job_id: int | None = None, *, now: dt.datetime | None = None) -> str | None:
    """Take the device's lease (for ``job_id``, or for a dispatcher when None). Returns the token or None."""
    _ensure_row(device_id)
    now = now or timezone.now()
    token = secrets.token_hex(16)
    # A dispatcher holds a lease with no job only for a moment; "job IS NULL AND token = ''" marks it free.
    taken = (
        DeviceLease.objects.filter(pk=device_id)
        .filter(Q(expires_at__lt=now) | Q(expires_at__isnull=True) | Q(job__isnull=True, token=""))
        .update(job_id=job_id, token=token, expires_at=now + ttl())
    )
    return token if taken else None


def lease_assign(device_id: int, token: str, job_id: int) -> bool:
    """Hand a dispatcher's lease to the job it claimed."""
    return bool(
        DeviceLease.objects.filter(pk=device_id, token=token).update(
            job_id=job_id, expires_at=timezone.now() + ttl()
        )
    )


def lease_renew(device_id: int, job_id: int, *, retake: bool = True) -> bool:
    """Extend the lease for ``job_id``. With ``retake`` a lapsed or free lease is taken back for it."""
    _ensure_row(device_id)
    now = timezone.now()
    cond = Q(job_id=job_id)
    if retake:
        cond |= Q(expires_at__lt=now) | Q(job__isnull=True, token="")
    return bool(
        DeviceLease.objects.filter(pk=device_id).filter(cond).update(job_id=job_id, expires_at=now + ttl())
    )


def lease_release(device_id: int, *, job_id: int | None = None, token: str | None = None) -> bool:
    qs = DeviceLease.objects.filter(pk=device_id)
    if job_id is not None:
        qs = qs.filter(job_id=job_id)
    if token is not None:
        qs = qs.filter(token=token)
    return bool(qs.update(job=None, token="", expires_at=None))


#: The token of a lease whose cancelled render a worker is stopping right now (``lease_claim_stop``).
STOPPING = "stopping:"


def lease_claim_stop(device_id: int, job_id: int) -> bool:
    """Become the one worker that stops ``job_id``'s cancelled render: the lease must still be the job's, and no
    other live stopper may hold it. A stop message delivered twice (reconcile re-sent it while the first was
    only late) then makes one stop on the device, never two at once; a stopper that died leaves an expired
    claim, which the next one takes."""
    now = timezone.now()
    return bool(
        DeviceLease.objects.filter(pk=device_id, job_id=job_id)
        .filter(~Q(token__startswith=STOPPING) | Q(expires_at__lt=now))
        .update(token=f"{STOPPING}{secrets.token_hex(8)}", expires_at=now + ttl())
    )


def lease_stop_sent(device_id: int, job_id: int, *, pickup: dt.timedelta) -> bool:
    """A stop for ``job_id`` was queued: unless a worker claims it within ``pickup`` (its message was lost with
    Redis, or its worker died before the claim), the lease lapses and reconcile sends the stop again, instead of
    the device rendering a cancelled job for a whole TTL. The device stays shut meanwhile
    (``jobs.queue.stops.stops_pending``). A live stopper's claim is left alone."""
    now = timezone.now()
    return bool(
        DeviceLease.objects.filter(pk=device_id, job_id=job_id)
        .filter(~Q(token__startswith=STOPPING) | Q(expires_at__lt=now))
        .update(token="", expires_at=now + pickup)
    )


def lease_is_live(device_id: int, job_id: int) -> bool:
    """Whether ``job_id`` holds the device's lease and it has not lapsed."""
    return DeviceLease.objects.filter(pk=device_id, job_id=job_id, expires_at__gte=timezone.now()).exists()


@contextmanager
def keep_alive(device_id: int, job_id: int, *, poll_chain: bool = False) -> Iterator[threading.Event]:
    """Renew the lease every TTL/3 from a daemon thread until the block ends. Yields a 'lost' event.

    ``poll_chain``: also push the job's ``next_poll_at`` ahead, so reconcile doesn't revive a poll chain whose
    current step (a download) is simply long.
    """
    lost = threading.Event()
    stop = threading.Event()
    period = max(0.2, settings.JOBS_LEASE_TTL_S / 3)

    def run() -> None:
        try:
            while not stop.wait(period):
                try:
                    if not lease_renew(device_id, job_id, retake=False):
                        lost.set()
                        logger.warning("job %s lost the lease on device %s", job_id, device_id)
                        return
                    mark_device_active(device_id)
                    if poll_chain:
                        Job.objects.filter(pk=job_id).update(next_poll_at=timezone.now() + ttl())
                except Exception:
                    logger.warning("lease renewal for job %s failed", job_id, exc_info=True)
        finally:
            close_old_connections()
            connection.close()

    thread = threading.Thread(target=run, name=f"lease-{device_id}", daemon=True)
    thread.start()
    try:
        yield lost
    finally:
        stop.set()
        thread.join(timeout=5)


def mark_device_active(device_id: int) -> None:
    """While a job runs, the metric poller polls the device fast (devices.services.device_mark_active)."""
    device_mark_active(device_id=device_id, until=timezone.now() + ttl())

"""Celery tasks: thin, id-taking ways into ``jobs.queue`` (the engine, dispatch, reconcile, the planner) and the
result files. Each is safe to run twice (CAS claims inside).

The queue sends these by their names (``jobs.queue.enqueue``), never importing this module: beat's schedule in
``hub.celery`` names them too, so the names stay as they are.
"""

from __future__ import annotations

import logging

from celery import shared_task
from django.utils import timezone

from jobs.files.thumbnails import missing_recent, thumbnail_for_job
from jobs.models import Job
from jobs.queue import engine
from jobs.queue.dispatch import dispatch_device
from jobs.queue.eta import plan_device
from jobs.queue.reconcile import reconcile as run_reconcile
from jobs.queue.retention import retention_apply
from jobs.queue.trash import trash_expire

logger = logging.getLogger("jobs.tasks")


@shared_task(ignore_result=True, soft_time_limit=30, time_limit=40)
def dispatch(device_id: int) -> int | None:
    """Short: take the device lease, pick the next job, claim it (queued → preparing), start its runner."""
    return dispatch_device(device_id)


@shared_task(ignore_result=True)
def run_job(job_id: int) -> None:
    """Prepare (model load under the lease) and submit; for blocking/stream runners, the whole call.

    Its time limits are set per call by dispatch from the job's estimate (a long render needs a long limit).
    """
    engine.run(job_id)


@shared_task(ignore_result=True, soft_time_limit=600, time_limit=660)
def poll_job(job_id: int, ticket: int) -> None:
    """One poll of a poll-style job; only the holder of the current ticket polls, then it re-enqueues itself."""
    engine.poll(job_id, ticket)


@shared_task(ignore_result=True, soft_time_limit=600, time_limit=660)
def recover_job(job_id: int) -> None:
    engine.recover(job_id)


@shared_task(ignore_result=True, soft_time_limit=400, time_limit=460)
def cancel_on_device(job_id: int) -> None:
    """Stop a cancelled render on the device (for video: DELETE, then stop the model — slow), free the device."""
    engine.cancel_on_device(job_id)


@shared_task(ignore_result=True, soft_time_limit=400, time_limit=460)
def stop_lost_renders(device_id: int) -> None:
    """The device is back: stop the renders the hub gave up on while it was away (their jobs moved on)."""
    engine.stop_lost_renders(device_id)


@shared_task(ignore_result=True, soft_time_limit=20, time_limit=30)
def reconcile() -> dict[str, int]:
    """Beat, every few seconds: revive dead poll chains, recover jobs whose worker died, start idle queues."""
    return run_reconcile()


@shared_task(ignore_result=True, soft_time_limit=30, time_limit=40)
def plan(device_id: int) -> None:
    plan_device(device_id)


@shared_task(ignore_result=True, soft_time_limit=20, time_limit=30)
def sweep_thumbnails() -> int:
    """Beat: queue the thumbnails whose task was lost (``jobs.files.thumbnails.missing_recent``). Returns how many."""
    ids = missing_recent(now=timezone.now())
    for job_id in ids:
        make_thumbnail.delay(job_id)
    return len(ids)


@shared_task(ignore_result=True, soft_time_limit=60, time_limit=90)
def make_thumbnail(job_id: int) -> None:
    """The gallery thumbnail of a done job, made after the device is free for the next one."""
    job = Job.objects.filter(pk=job_id).select_related("owner").first()
    if job is not None:
        thumbnail_for_job(job)


@shared_task(ignore_result=True, soft_time_limit=1800, time_limit=1900)
def empty_trash() -> int:
    """Beat, daily: remove for good what has been in the trash ``HUB_TRASH_DAYS`` days. Returns how many jobs."""
    return trash_expire().jobs


@shared_task(ignore_result=True, soft_time_limit=1800, time_limit=1900)
def apply_retention() -> tuple[int, int]:
    """Beat, daily: the retention rules (``jobs.queue.retention``): what was announced for today goes to the trash,
    what they take a week from now is announced. Returns (announced, moved to the trash)."""
    return retention_apply().counts

"""A device's turns: ``dispatch_device`` claims its next job under the device lease, ``end_job`` gives the device
back after a job's end and starts the next one at once.

One job per device at a time, its model load included: the lease (``jobs.core.lease``) is held by the job from
the claim (queued → preparing) to its end; nothing else starts while any job of the device is active, nor while a
cancelled render may still run there (``jobs.queue.stops``).
"""

from __future__ import annotations

import datetime as dt
import logging
import time

from django.db.models import F
from django.utils import timezone

from jobs.core import lease
from jobs.core.changes import held, replan
from jobs.core.scheduler import next_job, snapshot_for
from jobs.core.transitions import job_transition
from jobs.models import ACTIVE_STATES, WAITING_STATES, Job, JobState, LostRender, waiting_on
from jobs.queue import enqueue, pool
from jobs.queue.stops import stops_pending
from jobs.quotas.services import device_use_record

logger = logging.getLogger("jobs.queue.dispatch")


def trace(job_id: int, step: str) -> None:
    """Timing of the path from a render's end to the next request (``HUB_DEBUG_LOGGERS=jobs``)."""
    logger.debug("trace job=%s step=%s t=%.4f", job_id, step, time.time())


def release_device(device_id: int, job_id: int, *, ended: dt.datetime | None = None) -> bool:
    """Give the device back and record the span the job held it (``jobs.quotas.services``: usage is the hub's own
    measure, the model load, the render and the download). Once per span: only one release of a held lease
    succeeds. The claim time is read before the release: once released, another process may claim the same job
    again (a re-queued one) and move ``started_at`` on."""
    held = Job.objects.filter(pk=job_id).values_list("started_at", "owner_id").first()
    if not lease.lease_release(device_id, job_id=job_id):
        return False
    if held is not None:
        started, owner_id = held
        ended = ended or timezone.now()
        try:
            device_use_record(
                job_id=job_id, owner_id=owner_id, device_id=device_id, started=started, ended=ended
            )
        except Exception:  # the device is free whatever the bookkeeping says
            logger.exception("recording the device time of job %s failed", job_id)
    return True


def end_job(job: Job) -> None:
    """After a final state: free the device and start the next job at once (dispatch runs right here, in the
    process that saw the end: no device I/O, and one queue hop less of device idle), then plan."""
    trace(job.pk, "end_job")
    release_device(job.device_id, job.pk)
    trace(job.pk, "released")
    try:
        started = dispatch_device(job.device_id)
    except Exception:
        logger.exception("dispatching device %s after job %s failed; queueing it", job.device_id, job.pk)
        started = None
        enqueue.send("dispatch", job.device_id)
    trace(job.pk, "dispatched")
    if started is None:  # dispatch replans when it starts a job
        replan(job.device_id)


def dispatch_device(device_id: int) -> int | None:
    """Start the device's next job if the device is free. Returns the started job's id."""
    if Job.objects.filter(device_id=device_id, state__in=ACTIVE_STATES).exists():
        return None  # busy (or an orphan reconcile is about to recover)
    if stops_pending([device_id]):
        return None  # a cancelled render may still run there: reconcile sends its stop first
    if LostRender.objects.filter(device_id=device_id).exists():
        enqueue.send(
            "stop_lost_renders", device_id
        )  # a render given up while it was away may still run there
        return None
    token = lease.lease_acquire(device_id)
    if token is None:
        return None
    # The claim's live updates (the planner's replan of the devices, the pushes) wait until the run is sent: the
    # device must not wait on a plan of the queue (bench_plan_scale measured it behind one plan per device).
    with held():
        claimed = None
        try:
            claimed = _claim_next(device_id, token)
        finally:
            if claimed is None:
                lease.lease_release(device_id, token=token)
        if claimed is None:
            return None
        job, jumped = claimed
        if jumped:  # the jobs it went ahead of: a job jumped too often is never jumped again (the scheduler)
            Job.objects.filter(pk__in=[j.pk for j in jumped]).update(bypassed=F("bypassed") + 1)
        _send_run(job)
    # The run is on its way: now the pool's other jobs go to their lanes again, this device busy with it.
    pool.rebalance_and_wake(besides=device_id)
    replan(device_id)
    trace(job.pk, "dispatch_replanned")
    return job.pk


def _claim_next(device_id: int, token: str) -> tuple[Job, list[Job]] | None:
    """Under the dispatcher's lease ``token``: the next job by the scheduler, claimed (waiting → preparing) and
    handed the lease, with the jobs it jumps; None when there is none (or another dispatcher won it)."""
    if Job.objects.filter(device_id=device_id, state__in=ACTIVE_STATES).exists():
        return None
    # Its own lane's next job, as the pool last placed it (``jobs.queue.pool``: where each job finishes first, at
    # the last claim or change); the lanes are placed again once this job's run is sent (``dispatch_device``), so
    # a device that frees starts its next job without waiting for a whole plan of the pool. An empty lane waits
    # for it: the device, free now, may take a job from a busy device's lane.
    job, jumped = next_job(snapshot_for(device_id), waiting_on(device_id))
    if job is None:
        pool.rebalance_and_wake(besides=device_id)
        job, jumped = next_job(snapshot_for(device_id), waiting_on(device_id))
    if job is None:
        return None
    if not job_transition(
        job.pk,
        from_states=WAITING_STATES,
        on_device=device_id,  # still in this lane: the pool may have moved it to another device meanwhile
        to=JobState.PREPARING,
        message=f"Started (attempt {job.attempts + 1}).",
        attempts=F("attempts") + 1,
        started_at=timezone.now(),
        phase="Preparing",
        retry_after=None,
        progress=0.0,
    ):
        return None
    trace(job.pk, "claimed")
    lease.lease_assign(device_id, token, job.pk)
    return job, jumped


def _send_run(job: Job) -> None:
    """Queue the claimed job's run, its time limits from its estimate (a long render needs a long limit)."""
    job.refresh_from_db()
    limit = max(600, int(3 * (job.estimate_s or 60)) + 600)
    enqueue.send("run_job", job.pk, soft_time_limit=limit, time_limit=limit + 60)
    trace(job.pk, "run_sent")

"""How a job's run ends: done, failed, back in the queue, interrupted; and the policy for a device error met while
preparing or submitting. Each end is a CAS (``jobs.core.transitions``); the one that wins gives the device back
and starts the next job (``jobs.queue.dispatch.end_job``).
"""

from __future__ import annotations

import datetime as dt
import logging
from typing import Any

from django.db.models import F
from django.utils import timezone

from devices import errors
from jobs.core.transitions import job_transition
from jobs.models import ACTIVE_STATES, Job, JobState
from jobs.queue import enqueue
from jobs.queue.device_watch import device_state_from, watch_device
from jobs.queue.dispatch import end_job, trace
from jobs.queue.eta import learn

logger = logging.getLogger("jobs.queue.outcomes")
S = JobState
MAX_ATTEMPTS = 4  # transient failures before a job is failed for good
MAX_AUTO_REQUEUES = 1  # interrupted jobs are re-queued once


def _backoff(attempt: int, *, base: float = 5.0, cap: float = 300.0) -> dt.timedelta:
    return dt.timedelta(seconds=min(cap, base * 2 ** max(0, attempt - 1)))


def device_seconds(job: Job, end: dt.datetime) -> float:
    return max(0.0, (end - job.started_at).total_seconds()) if job.started_at else 0.0


def _error_fields(exc: errors.DeviceError | None, human: str = "") -> dict[str, Any]:
    if exc is None:
        return {"error_code": "hub", "error_human": human[:500], "error_detail": ""}
    return {
        "error_code": exc.code[:50],
        "error_human": (human or exc.human)[:500],
        "error_detail": (exc.detail or "")[:5000],
    }


def finish_done(job: Job) -> bool:
    now = timezone.now()
    ok = job_transition(
        job.pk,
        from_states=[S.COLLECTING],
        to=S.DONE,
        message="Done.",
        progress=100.0,
        phase="Done",
        finished_at=now,
        device_seconds=device_seconds(job, now),
        next_poll_at=None,
    )
    trace(job.pk, "done_transition")
    if ok:
        job.refresh_from_db()
        try:
            learn(job)
        except Exception:
            logger.exception("learning from job %s failed", job.pk)
        trace(job.pk, "learned")
        end_job(job)
        # After the lease is given back: the next job does not wait for its thumbnail.
        enqueue.send_on_commit("make_thumbnail", job.pk)
    return ok


def fail(job: Job, exc: errors.DeviceError | None, *, human: str = "", data: dict | None = None) -> bool:
    now = timezone.now()
    fields = _error_fields(exc, human)
    ok = job_transition(
        job.pk,
        from_states=ACTIVE_STATES,
        to=S.FAILED,
        message=f"Failed: {fields['error_human']}" + (f" — {exc.detail}" if exc and exc.detail else ""),
        data=data or {},
        finished_at=now,
        device_seconds=device_seconds(job, now),
        next_poll_at=None,
        phase="Failed",
        **fields,
    )
    if ok:
        end_job(job)
    return ok


def back_to_queue(
    job: Job, message: str, *, retry_after: dt.datetime | None = None, data: dict | None = None
) -> bool:
    """Not the job's fault (device locked, unreachable, busy, polite wait): it waits in the queue again."""
    ok = job_transition(
        job.pk,
        from_states=ACTIVE_STATES,
        to=S.QUEUED,
        message=message,
        data=data or {},
        retry_after=retry_after,
        progress=0.0,
        phase="Waiting",
        next_poll_at=None,
        remote_id="",
        submit_started_at=None,
    )
    if ok:
        end_job(job)
    return ok


def interrupt(job: Job, message: str, *, data: dict | None = None) -> bool:
    """The render was lost (power cycle, hub restart mid-call): ``interrupted``, then re-queued once."""
    if not job_transition(
        job.pk,
        from_states=ACTIVE_STATES,
        to=S.INTERRUPTED,
        message=message,
        data=data or {},
        next_poll_at=None,
        phase="Interrupted",
    ):
        return False
    job.refresh_from_db()
    if job.requeues < MAX_AUTO_REQUEUES:
        _requeue_interrupted(job)
    else:
        _fail_interrupted(job)
    end_job(job)
    return True


def _requeue_interrupted(job: Job) -> None:
    job_transition(
        job.pk,
        from_states=[S.INTERRUPTED],
        to=S.QUEUED,
        message="Re-queued automatically (an interrupted job is retried once).",
        requeues=F("requeues") + 1,
        remote_id="",
        remote_data={},
        progress=0.0,
        phase="Waiting",
        submit_started_at=None,
        retry_after=None,
    )


def _fail_interrupted(job: Job) -> None:
    now = timezone.now()
    job_transition(
        job.pk,
        from_states=[S.INTERRUPTED],
        to=S.FAILED,
        message="Failed: interrupted again after its automatic retry.",
        finished_at=now,
        error_code="interrupted",
        error_human="The render was interrupted twice.",
        device_seconds=device_seconds(job, now),
    )


def handle_error(job: Job, exc: errors.DeviceError, *, where: str) -> None:
    """Policy for an error raised while preparing or submitting (nothing is rendering for this job)."""
    job.refresh_from_db()
    if isinstance(exc, (errors.DeviceLocked, errors.DeviceUnreachable, errors.AuthFailed)):
        device_state_from(job.device_id, exc)
        watch_device(job.device_id)
        retry = timezone.now() + _backoff(job.attempts, base=2.0, cap=60.0)
        back_to_queue(
            job, f"Waiting: {exc.human}", retry_after=retry, data={"code": exc.code, "where": where}
        )
        return
    if isinstance(exc, errors.PoliteRefusal):
        back_to_queue(
            job,
            f"Waiting politely: {', '.join(exc.blocking) or 'another model'} is in use and was "
            "not loaded by the hub. It runs tonight, or untick “Polite”.",
            retry_after=timezone.now() + dt.timedelta(minutes=10),
            data={"blocking": exc.blocking},
        )
        return
    if not exc.permanent and job.attempts < MAX_ATTEMPTS:
        back_to_queue(
            job,
            f"Will try again: {exc.human}" + (f" ({exc.detail})" if exc.detail else ""),
            retry_after=timezone.now() + _backoff(job.attempts),
            data={"code": exc.code, "where": where},
        )
        return
    fail(job, exc, data={"where": where})

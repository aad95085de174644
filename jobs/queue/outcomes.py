"""How a job's run ends: done, failed, back in the queue, interrupted; and the policy for a device error met while
preparing or submitting. Each end is a CAS (``jobs.core.transitions``); the one that wins gives the device back
and starts the next job (``jobs.queue.dispatch.end_job``).
"""

from __future__ import annotations

import datetime as dt
import logging
from typing import Any

from django.conf import settings
from django.db import transaction
from django.db.models import F
from django.utils import timezone

from devices import errors
from hub.disk import disk_space, is_store_unreachable, size_text
from hub.media_storage import UNREACHABLE
from jobs.core import notices
from jobs.core.changes import job_ticked, job_waits_for_disk
from jobs.core.links import note_parent_failed
from jobs.core.transitions import job_note, job_set, job_transition
from jobs.files.store import discard_partials
from jobs.models import ACTIVE_STATES, Job, JobState
from jobs.queue import chains, enqueue
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
    """COLLECTING → DONE, and in the same transaction the jobs waiting for its result get it and become ready
    (``jobs.queue.chains.release_children``): a worker killed in between leaves neither done."""
    now = timezone.now()
    with transaction.atomic():
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
        if ok:
            chains.release_children(job)
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
        job.refresh_from_db()
        note_parent_failed(job)  # its waiting children keep waiting, and say why
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
    if job_transition(
        job.pk,
        from_states=[S.INTERRUPTED],
        to=S.FAILED,
        message="Failed: interrupted again after its automatic retry.",
        finished_at=now,
        error_code="interrupted",
        error_human="The render was interrupted twice.",
        device_seconds=device_seconds(job, now),
    ):
        job.refresh_from_db()
        note_parent_failed(job)


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


# -- a full disk ---------------------------------------------------------------------------------------------------
#: ``remote_data`` key of a job whose result waits for disk space (the time it began waiting, epoch seconds)
DISK_WAIT = "waiting_for_disk"
#: ``remote_data`` key of a job whose result waits for the result store to answer (an S3 bucket)
STORE_WAIT = "waiting_for_store"


def _free_now() -> tuple[str, int | None]:
    try:
        free = disk_space().free
    except OSError:
        return "unknown", None
    return size_text(free), free


def wait_for_disk(job: Job, exc: OSError) -> None:
    """Saving a finished render's result found the hub's disk full (``ENOSPC``/``EDQUOT``): nothing is lost.

    1. What the save wrote is removed (``discard_partials``): the disk gets its room back.
    2. The job stays where it is (collecting, or running between two 3D stages) with ``remote_data`` marking the
       wait, so a worker restart keeps waiting; its phase says so on the job page, and its story once.
    3. The device keeps the result: the hub never deletes a render on the device before its result is saved, and
       the job keeps the device (its lease, and no other job starts there) so nothing there replaces it.
    4. The admins hear of it once per wait (``job_waits_for_disk``: notify's household channels).
    The caller schedules the next try (the poll chain, ``JOBS_DISK_RETRY_S`` later; reconcile revives it after a
    crash), which downloads the result again from the device: never a second render.

    A result store that can't be reached (an S3 bucket: ``StoreUnreachable``) takes the same path, in its own words:
    the upload is whole or absent, never half an object."""
    if is_store_unreachable(exc):
        _wait_for_store(job, exc)
        return
    removed = discard_partials(job)
    free_text, free = _free_now()
    phase = f"Waiting for disk space: {free_text} free; the device still holds the result"
    job.refresh_from_db()
    if job.remote_data.get(DISK_WAIT):
        if job_set(job.pk, only_in=ACTIVE_STATES, phase=phase[:100]):
            job_ticked(job.pk)
        return
    with transaction.atomic():
        noted = job_note(
            job.pk,
            f"{phase}. The hub's disk is full ({exc.strerror or exc}), so the result could not be saved; it is "
            f"downloaded again by itself once there is room (tried every {settings.JOBS_DISK_RETRY_S:g} s). "
            "Delete results on the Usage page, or free space on the hub's machine.",
            data={"code": "disk_full", "errno": exc.errno, "free_bytes": free, "removed": removed},
            only_in=ACTIVE_STATES,
            remote_data={**job.remote_data, DISK_WAIT: round(timezone.now().timestamp())},
            phase=phase[:100],
        )
        if noted:
            _tell_disk_full(job.pk)
    logger.warning(
        "job %s: the disk is full (%s free); waiting for space to save its result", job.pk, free_text
    )


def _wait_for_store(job: Job, exc: OSError) -> None:
    removed = discard_partials(job)
    phase = f"Waiting for the result store: {UNREACHABLE}; the device still holds the result"
    job.refresh_from_db()
    if job.remote_data.get(STORE_WAIT):
        if job_set(job.pk, only_in=ACTIVE_STATES, phase=phase[:100]):
            job_ticked(job.pk)
        return
    job_note(
        job.pk,
        f"{phase}. {UNREACHABLE[0].upper()}{UNREACHABLE[1:]} ({exc.__cause__ or exc}), so the result could not be "
        f"saved; it is downloaded again by itself once the store answers (tried every "
        f"{settings.JOBS_DISK_RETRY_S:g} s). The health page (/healthz) shows the store's state.",
        data={"code": "store_unreachable", "removed": removed},
        only_in=ACTIVE_STATES,
        remote_data={**job.remote_data, STORE_WAIT: round(timezone.now().timestamp())},
        phase=phase[:100],
    )
    logger.warning("job %s: %s; waiting to save its result", job.pk, UNREACHABLE)


def _tell_disk_full(job_id: int) -> None:
    """The admins hear that a result waits for disk space: a notice kept until told (a crash loses nothing),
    and the outbox's notification handlers after commit."""
    with transaction.atomic():
        notices.job_waits_for_disk(job_id)
        job_waits_for_disk(job_id)


def disk_recovered(job: Job) -> None:
    """After a save that waited for disk space succeeded: the wait ends in the job's story."""
    waited = [key for key in (DISK_WAIT, STORE_WAIT) if job.remote_data.get(key)]
    if not waited:
        return
    job.remote_data = {k: v for k, v in job.remote_data.items() if k not in waited}
    said = "There is room again" if DISK_WAIT in waited else "The result store answers again"
    job_note(job.pk, f"{said}: the result is saved.", remote_data=job.remote_data)


def requeue_for_disk(job: Job, exc: OSError) -> bool:
    """A blocking or streamed render's result found the disk full. The device does not keep such a result (it came
    in the call's answer), so the job waits in the queue and renders again once there is room: not failed, and
    the admins are told (once: a try that finds the disk still full says so in the job's story only). Each wait
    is longer than the last (``JOBS_DISK_RETRY_S``, doubling, at most an hour)."""
    discard_partials(job)
    free_text, free = _free_now()
    job.refresh_from_db()
    first = not job.remote_data.get(DISK_WAIT)
    wait = _backoff(job.attempts, base=settings.JOBS_DISK_RETRY_S, cap=3600.0)
    store_down = is_store_unreachable(exc)
    if store_down:
        story = (
            f"Waiting for the result store: {UNREACHABLE} ({exc.__cause__ or exc}) while saving the result, "
            "which this device does not keep, so it renders again once the store answers "
            f"(in {wait.total_seconds():g} s at the earliest)."
        )
        data: dict[str, Any] = {"code": "store_unreachable"}
    else:
        story = (
            f"Waiting for disk space: {free_text} free. The hub's disk filled up ({exc.strerror or exc}) while "
            "saving the result, which this device does not keep, so it renders again once there is room "
            f"(in {wait.total_seconds():g} s at the earliest). Delete results on the Usage page, or free space on "
            "the hub's machine."
        )
        data = {"code": "disk_full", "errno": exc.errno, "free_bytes": free}
    ok = back_to_queue(job, story, retry_after=timezone.now() + wait, data=data)
    if ok and first and not store_down:  # after the move: end_job has sent the device's next turn
        stamp = {**job.remote_data, DISK_WAIT: round(timezone.now().timestamp())}
        job_set(job.pk, remote_data=stamp)
        _tell_disk_full(job.pk)
    return ok

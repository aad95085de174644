"""The job engine: run a claimed job (prepare, submit, or the whole blocking/stream call), poll it, collect its
result, recover it after a crash, stop a cancelled render on its device. Tasks (``jobs.tasks``) are thin ways in.

Beside it in ``jobs.queue``: ``dispatch`` (a device's turns: claim the next job, give the device back),
``outcomes`` (how a run ends), ``pacing`` (when to poll), ``stops`` (a cancelled render's stop), ``reconcile``
(the safety net), ``enqueue`` (Celery by task name).

Invariants:
* One job per device at a time, its model load included: the device lease (``jobs.core.lease``) is held by the job
  from the claim (queued → preparing) to its end; nothing else starts while any job of the device is active.
* Every state change is a CAS (``jobs.core.transitions``); a runner that finds its job moved on (cancelled,
  recovered by reconcile) stops without side effects beyond cleaning up what it created.
* No device I/O inside a transaction.
* Poll style stores the device-side id right after the create call. The window between the call and that write
  is covered by ``submit_started_at``: a job found ``submitted`` with no ``remote_id`` and a lapsed lease is
  matched against the device's own list (``Runner.find_lost``) before anything is resubmitted.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import logging
import time
from typing import Any

from django.conf import settings
from django.utils import timezone

from devices import errors
from devices.loads import device_note_ready_wait
from hub.disk import is_save_blocked
from jobs.core import lease
from jobs.core.changes import held, job_ticked, send_held
from jobs.core.scheduler import in_night
from jobs.core.transitions import job_note, job_set, job_transition
from jobs.kinds.runners import PollResult, Stopped
from jobs.kinds.table import runner_for, style_of
from jobs.models import ACTIVE_STATES, FINAL_STATES, WAITING_STATES, Job, JobState, LostRender
from jobs.queue import enqueue
from jobs.queue.device_watch import device_online, device_state_from, watch_device
from jobs.queue.dispatch import end_job, trace
from jobs.queue.eta import note_progress
from jobs.queue.outcomes import (
    MAX_ATTEMPTS,
    back_to_queue,
    disk_recovered,
    fail,
    finish_done,
    handle_error,
    interrupt,
    requeue_for_disk,
    wait_for_disk,
)
from jobs.queue.pacing import first_interval, next_interval, stored_remote_data

logger = logging.getLogger("jobs.queue.engine")
S = JobState
POLLING_STATES = (S.SUBMITTED, S.RUNNING, S.COLLECTING)
PROGRESS_EVERY_S = 0.5  # stream/blocking progress: at most two DB writes per second (pushes: one, hub.live)


def _now() -> dt.datetime:
    return timezone.now()


# -- run (prepare + submit, or the whole blocking/stream call) -------------------------------------------------


def _polite_now(job: Job) -> bool:
    d = job.device
    return job.polite and not in_night(_now(), d.night_start, d.night_end, d.time_zone or "UTC")


def _note_load(job: Job, runner) -> None:
    """When the prepare loaded the job's model, keep how long it took (since the job started) in the job's
    memory: the shape's history learns the render alone (``jobs.queue.eta.learn``), as the plan adds a load of its own
    where one is due (``jobs.queue.eta.LOAD_SECONDS``)."""
    if not getattr(runner, "loaded", False) or job.started_at is None:
        return
    load_s = round(max(0.0, (_now() - job.started_at).total_seconds()), 3)
    data = {**stored_remote_data(job), "load_s": load_s}
    Job.objects.filter(pk=job.pk).update(remote_data=data)
    job.remote_data = data


def _note_ready_wait(job: Job, runner) -> None:
    """After a load, how long the job's first request waited for the model to take requests (the runner's retries
    in the readiness window): kept in the job's memory, so its shape's history learns the render alone, and
    learned for the device, so the planners count it with the load (``devices.loads.device_load_costs``)."""
    wait = getattr(runner, "ready_wait_s", None)
    if not getattr(runner, "loaded", False) or wait is None:
        return
    data = {**stored_remote_data(job), "ready_wait_s": wait}
    Job.objects.filter(pk=job.pk).update(remote_data=data)
    job.remote_data = data
    device_note_ready_wait(job.device_id, wait)


def run(job_id: int) -> None:
    trace(job_id, "run_start")
    job = Job.objects.select_related("device").filter(pk=job_id).first()
    if job is None or job.state != S.PREPARING:
        return
    runner = runner_for(job)
    with lease.keep_alive(job.device_id, job.pk) as lost:
        try:
            trace(job_id, "prepare")
            evicted = runner.prepare(polite=_polite_now(job))
            trace(job_id, "prepared")
        except errors.DeviceError as exc:
            handle_error(job, exc, where="prepare")
            return
        _note_load(job, runner)
        if evicted:
            job_note(
                job.pk,
                f"Unloaded {', '.join(evicted)} to make room.",
                data={"evicted": evicted},
                evicted=evicted,
            )
        if lost.is_set():
            return
        if runner.style == "poll":
            with held():  # the create call goes out first, the replan and the pushes of "submitted" after it
                _submit_poll(job, runner)
        else:
            _execute(job, runner, lost)


def _submit_poll(job: Job, runner) -> None:
    """preparing → submitted (nonce time) → device create → store remote_id → first poll."""
    now = _now()
    # A tag the device echoes (e.g. a seed), stored before the create call: crash recovery matches on it.
    marks = getattr(runner, "submit_marks", dict)()
    if not job_transition(
        job.pk,
        from_states=[S.PREPARING],
        to=S.SUBMITTED,
        message="Sending to the device.",
        submit_started_at=now,
        phase="Sending",
        **({"remote_data": {**job.remote_data, **marks}} if marks else {}),
    ):
        _cleanup_abandoned(job)
        return
    job.refresh_from_db()
    trace(job.pk, "submit_request")
    try:
        remote_id, data = runner.submit()
    except errors.DeviceError as exc:
        if _maybe_created(exc):
            # The device may have created the render (the request went out, its answer never came): look before
            # sending it again.
            _recover_submission(job.pk)
            return
        handle_error(job, exc, where="submit")
        return
    _note_ready_wait(job, runner)
    _adopt(job, runner, remote_id, data)


def _maybe_created(exc: errors.DeviceError) -> bool:
    """A create call that failed this way may have reached the device: the connection broke mid-request, or the
    request went out and no answer came in time (a link gone silent). A refused or never-made connection, a lock,
    or a call the silent link's gate kept back (``DeviceSilent``) created nothing."""
    if isinstance(exc, errors.DeviceSilent):
        return False
    if isinstance(exc, errors.DeviceTimeout):
        return True
    return exc.status is None and not isinstance(exc, (errors.DeviceUnreachable, errors.DeviceLocked))


def _wait_to_look(job: Job, exc: errors.DeviceError) -> None:
    """The device can't say yet whether it got the render (silent, unreachable, locked): the job stays submitted
    without a remote id, saying so once, and recovery looks again (reconcile, once the lease lapses) until the
    device answers; then the render is adopted, or sent once."""
    if isinstance(exc, (errors.DeviceLocked, errors.DeviceUnreachable, errors.AuthFailed)):
        device_state_from(job.device_id, exc)
        watch_device(job.device_id)
    job.refresh_from_db()
    if job.remote_data.get("waiting_on") == exc.code:
        return
    job_note(
        job.pk,
        f"Waiting for the device: {exc.human} It may have the render already; the hub looks before sending it "
        "again.",
        data={"code": exc.code},
        only_in=[S.SUBMITTED],
        remote_data={**stored_remote_data(job), "waiting_on": exc.code},
        phase=f"Waiting for the device: {exc.human}"[:100],
    )


def _adopt(job: Job, runner, remote_id: str, data: dict[str, Any]) -> None:
    stored = Job.objects.filter(pk=job.pk, state=S.SUBMITTED, remote_id="").update(
        remote_id=remote_id, remote_data={**job.remote_data, **data}, updated=_now()
    )
    if not stored:
        # Cancelled while the create call ran: cancel what we just created on the device.
        job.remote_id = remote_id
        try:
            runner.job = job
            runner.cancel()
        except errors.DeviceError as exc:
            logger.warning("job %s: cancelling the abandoned render failed: %s", job.pk, exc)
        _cleanup_abandoned(job)
        return
    job_note(job.pk, f"The device accepted it (id {remote_id}).", data={"remote_id": remote_id})
    job.refresh_from_db()
    schedule_poll(job.pk, countdown=first_interval(job, runner))


def _cleanup_abandoned(job: Job) -> None:
    job.refresh_from_db()
    if job.state in FINAL_STATES or job.state in WAITING_STATES:
        end_job(job)


def _execute(job: Job, runner, lost) -> None:
    """Blocking and stream runners: preparing → running → (runner saves results) → collecting → done.

    The live updates of "running" and of the runner's first report (made just before its request) go out from a
    thread of their own once it is made, while this one sends the request (``held(aside=True)``)."""
    starting = contextlib.ExitStack()
    starting.enter_context(held(aside=True))
    if not job_transition(
        job.pk,
        from_states=[S.PREPARING],
        to=S.RUNNING,
        message="Rendering.",
        phase="Rendering",
        submit_started_at=_now(),
    ):
        starting.close()
        _cleanup_abandoned(job)
        return
    job.refresh_from_db()
    runner.job = job
    trace(job.pk, "execute_request")
    last = [0.0]

    def report(pct: float, phase: str) -> bool:
        if lost.is_set():
            return True
        t = time.monotonic()
        if t - last[0] < PROGRESS_EVERY_S and pct < 95:
            return False
        last[0] = t
        if not job_set(job.pk, only_in=[S.RUNNING], progress=round(min(pct, 99.9), 1), phase=phase[:100]):
            return True  # cancelled: stop
        note_progress(job.pk)
        job_ticked(job.pk)
        return False

    def progress(pct: float, phase: str) -> bool:
        try:
            return report(pct, phase)
        finally:
            starting.close()  # the first report sends what was held (once)

    try:
        runner.execute(progress)
        trace(job.pk, "executed")
    except (Stopped, errors.DeviceError) as exc:
        ended: BaseException | None = exc
    except OSError as exc:
        if not is_save_blocked(exc):
            raise
        ended = exc
    else:
        ended = None
    finally:
        starting.close()  # a runner that never reported
    _note_ready_wait(job, runner)
    _executed(job, ended)


def _executed(job: Job, exc: BaseException | None) -> None:
    """After a blocking or stream call: record its end (``exc``: how it failed, None: it succeeded). The device
    is free: the next job is started before this one's replan and pushes go out (``held``)."""
    with held():
        _record_end(job, exc)


def _record_end(job: Job, exc: BaseException | None) -> None:
    if isinstance(exc, Stopped):
        _cleanup_abandoned(job)
        return
    if isinstance(exc, OSError):  # the disk is full (``_execute``)
        if not requeue_for_disk(job, exc):
            _cleanup_abandoned(job)
        return
    if isinstance(exc, errors.DeviceError):
        job.refresh_from_db()
        if job.state != S.RUNNING:
            _cleanup_abandoned(job)
        elif isinstance(exc, (errors.DeviceLocked, errors.DeviceUnreachable)) or (
            isinstance(exc, errors.Transient) and exc.status is None
        ):
            device_state_from(job.device_id, exc)
            watch_device(job.device_id)  # the re-queued job waits for it: the poller must notice the unlock
            interrupt(job, f"Interrupted: {exc.human}", data={"code": exc.code, "detail": exc.detail})
        elif exc.permanent:
            fail(job, exc)
        else:
            handle_error(job, exc, where="run")
        return
    if job_transition(
        job.pk, from_states=[S.RUNNING], to=S.COLLECTING, message="Saved the result.", phase="Saving"
    ):
        trace(job.pk, "collecting")
        disk_recovered(job)
        finish_done(job)
    else:
        _cleanup_abandoned(job)


# -- poll chain ----------------------------------------------------------------------------------------------------


def schedule_poll(job_id: int, *, countdown: float, ticket: int | None = None) -> int | None:
    """Move the poll chain on: bump the ticket (CAS on the one we hold) and enqueue the next poll."""
    qs = Job.objects.filter(pk=job_id, state__in=POLLING_STATES)
    if ticket is not None:
        qs = qs.filter(poll_ticket=ticket)
    current = qs.values_list("poll_ticket", flat=True).first()
    if current is None:
        return None
    new = current + 1
    if not Job.objects.filter(pk=job_id, poll_ticket=current).update(
        poll_ticket=new, next_poll_at=_now() + dt.timedelta(seconds=countdown)
    ):
        return None
    enqueue.send("poll_job", job_id, new, countdown=countdown)
    return new


def _claim_poll(job_id: int, ticket: int) -> bool:
    # How long a claimed poll may take before reconcile revives the chain. Short is safe: a revived chain moves
    # the ticket on, so a slow old poll can no longer schedule, and every transition it might make is a CAS.
    stall = dt.timedelta(seconds=max(2.0, 2 * settings.JOBS_POLL_MAX_S))
    return bool(
        Job.objects.filter(pk=job_id, poll_ticket=ticket, state__in=POLLING_STATES).update(
            poll_ticket=ticket + 1, next_poll_at=_now() + stall
        )
    )


def poll(job_id: int, ticket: int) -> None:
    """One step of a poll-style job. Runs only with the current ticket; schedules the next step itself.

    The step's live updates go out once, at its end (``held``): the step that sees a render's end also
    downloads it, finishes the job and starts the next one, and the device waits for none of their pushes."""
    with held():
        _poll(job_id, ticket)


def _poll(job_id: int, ticket: int) -> None:
    if not _claim_poll(job_id, ticket):
        return
    ticket += 1
    job = Job.objects.select_related("device").get(pk=job_id)
    if not lease.lease_renew(job.device_id, job.pk):
        logger.warning("job %s: the device lease is held by another job; polling later", job_id)
        schedule_poll(job_id, countdown=settings.JOBS_POLL_MAX_S, ticket=ticket)
        return
    lease.mark_device_active(job.device_id)
    runner = runner_for(job)
    if job.state == S.COLLECTING:
        _collect(job, runner)
        return
    trace(job.pk, "poll_start")
    asked_at = _now()
    try:
        result = runner.poll()
    except errors.NotFound as exc:
        device_online(job.device_id, as_of=asked_at)
        interrupt(
            job,
            "The device no longer knows this render (it was restarted?).",
            data={"remote_id": job.remote_id, "detail": exc.detail},
        )
        return
    except (errors.DeviceLocked, errors.DeviceUnreachable, errors.AuthFailed) as exc:
        device_state_from(job.device_id, exc)
        watch_device(job.device_id)
        # When a request of its own last found the device away: the pool gives a render up on that, never on a
        # state no request has confirmed since (``jobs.queue.pool.lost_renders``).
        seen = {"waiting_on": exc.code, "away_seen_at": _now().timestamp()}
        if job.remote_data.get("waiting_on") != exc.code:
            job_note(
                job.pk,
                f"Waiting for the device: {exc.human}",
                data={"code": exc.code},
                remote_data={**stored_remote_data(job), **seen},
                phase=exc.human[:100],
            )
        else:
            Job.objects.filter(pk=job.pk).update(remote_data={**stored_remote_data(job), **seen})
        job.refresh_from_db()
        schedule_poll(job_id, countdown=next_interval(job, moved=False, trouble=True), ticket=ticket)
        return
    except errors.DeviceError as exc:  # transient: try again a bit later
        logger.info("job %s poll: %s", job_id, exc)
        schedule_poll(job_id, countdown=next_interval(job, moved=False, trouble=True), ticket=ticket)
        return
    _on_poll(job, runner, result, ticket, asked_at)


def _on_poll(job: Job, runner, result: PollResult, ticket: int, asked_at: dt.datetime) -> None:
    if job.remote_data.get("waiting_on"):
        device_online(job.device_id, as_of=asked_at)
        job.remote_data = {
            k: v for k, v in job.remote_data.items() if k not in ("waiting_on", "away_seen_at")
        }
        job_note(job.pk, "The device answers again.", remote_data=job.remote_data)
    if result.status == "failed":
        _on_remote_failure(job, runner, result)
        return
    if result.status == "done":
        trace(job.pk, "poll_done")
        try:
            nxt = runner.advance()
        except errors.DeviceError as exc:
            handle_poll_error(job, exc, ticket)
            return
        except OSError as exc:  # a stage's mesh found the disk full: the device keeps it, ask again later
            if not is_save_blocked(exc):
                raise
            wait_for_disk(job, exc)
            schedule_poll(job.pk, countdown=settings.JOBS_DISK_RETRY_S, ticket=ticket)
            return
        disk_recovered(job)
        _on_done(job, runner, result, ticket, nxt)
        return
    moved = result.progress > job.progress
    if job.state == S.SUBMITTED and (result.started or result.progress > 0):
        job_transition(
            job.pk,
            from_states=[S.SUBMITTED],
            to=S.RUNNING,
            message="Rendering.",
            progress=result.progress,
            phase=result.phase[:100],
        )
    elif moved or result.phase != job.phase:
        job_set(job.pk, only_in=POLLING_STATES, progress=result.progress, phase=result.phase[:100])
        if moved:
            note_progress(job.pk)
        job_ticked(job.pk)
    job.refresh_from_db()
    schedule_poll(job.pk, countdown=next_interval(job, moved=moved, runner=runner), ticket=ticket)


def _on_done(
    job: Job, runner, result: PollResult, ticket: int, nxt: tuple[str, dict[str, Any]] | None
) -> None:
    """The device says the render (or this stage) is done and the runner took what it keeps of it: send the next
    stage (``nxt``), or download the result."""
    if nxt is not None:  # a multi-stage job submitted its next stage
        remote_id, data = nxt
        Job.objects.filter(pk=job.pk).update(
            remote_id=remote_id,
            remote_data={**job.remote_data, **data},
            progress=result.progress,
            submit_started_at=_now(),
        )
        job_note(job.pk, f"Next stage sent (id {remote_id}).", data={"remote_id": remote_id})
        job.refresh_from_db()
        schedule_poll(job.pk, countdown=first_interval(job, runner), ticket=ticket)
        return
    trace(job.pk, "advanced")
    if job_transition(
        job.pk,
        from_states=[S.SUBMITTED, S.RUNNING],
        to=S.COLLECTING,
        message="Rendered; downloading the result.",
        progress=result.progress,
        phase="Saving",
    ):
        trace(job.pk, "collecting")
        job.refresh_from_db()  # the runner's own job, read anew
        _collect(job, runner)


def handle_poll_error(job: Job, exc: errors.DeviceError, ticket: int) -> None:
    if exc.permanent:
        fail(job, exc)
    else:
        schedule_poll(job.pk, countdown=next_interval(job, moved=False, trouble=True), ticket=ticket)


def _on_remote_failure(job: Job, runner, result: PollResult) -> None:
    exc = result.error or errors.BadRequest("The device reported the render as failed.")
    if isinstance(exc, errors.GenerationTimeout):
        story: list[str] = []
        try:
            with lease.keep_alive(job.device_id, job.pk):
                story = runner.recover_after_timeout()
        except errors.DeviceError as cleanup_exc:
            story.append(f"Cleaning up the device failed: {cleanup_exc.human}")
        fail(
            job,
            exc,
            human="The device stopped the render after its one-hour limit. The hub stopped the video "
            "model and relaunched it so the next job can run. Try a shorter or smaller video.",
            data={"cleanup": story},
        )
        return
    fail(job, exc)


DOWNLOADING_AGAIN = "Downloading the result again"


def _collect(job: Job, runner) -> None:
    send_held(aside=True)  # "downloading the result" goes out while it downloads (a big file takes a while)
    try:
        with lease.keep_alive(job.device_id, job.pk, poll_chain=True):
            trace(job.pk, "download")
            runner.collect()
            trace(job.pk, "downloaded")
    except errors.DeviceError as exc:
        job.refresh_from_db()
        if exc.permanent or job.attempts >= MAX_ATTEMPTS:
            fail(job, exc, human=f"Downloading the result failed: {exc.human}")
        else:  # collecting it stays: the next poll step downloads it again, never the render
            if job.phase != DOWNLOADING_AGAIN:  # told once, not at every try
                job_note(
                    job.pk,
                    f"Downloading the result broke ({exc.human}); the device keeps it, downloading again.",
                    data={"code": exc.code, "detail": exc.detail},
                    only_in=[S.COLLECTING],
                    phase=DOWNLOADING_AGAIN,
                )
            schedule_poll(job.pk, countdown=settings.JOBS_POLL_MAX_S)
        return
    except OSError as exc:
        if not is_save_blocked(exc):
            raise
        # Collecting it stays: the poll chain (or reconcile, after a crash) downloads it again later.
        wait_for_disk(job, exc)
        schedule_poll(job.pk, countdown=settings.JOBS_DISK_RETRY_S)
        return
    trace(job.pk, "collected")
    disk_recovered(job)
    finish_done(job)


# -- recovery after a crash --------------------------------------------------------------------------------------


def _recover_submission(job_id: int) -> None:
    """A poll-style job is ``submitted`` without a remote id and nobody works on it: did the create reach the
    device? Adopt the render if the device lists it, else send it (that is the only resubmission path)."""
    job = Job.objects.select_related("device").get(pk=job_id)
    if job.state != S.SUBMITTED or job.remote_id:
        return
    runner = runner_for(job)
    try:
        found = runner.find_lost()
    except errors.DeviceError as exc:
        logger.info("job %s: cannot look for its render yet: %s", job_id, exc)
        _wait_to_look(job, exc)
        return  # reconcile tries again
    if found:
        job_note(
            job.pk,
            "Found the render the device had already started (its answer to the hub was lost).",
            data={"remote_id": found},
        )
        _adopt(job, runner, found, {})
        return
    job_note(job.pk, "The device has no render for this job; sending it (once).")
    # The new create is what a later recovery looks for, and what the poll rhythm counts from.
    Job.objects.filter(pk=job.pk, state=S.SUBMITTED, remote_id="").update(submit_started_at=_now())
    job.refresh_from_db()
    runner.job = job
    try:
        remote_id, data = runner.submit()
    except errors.DeviceError as exc:
        if _maybe_created(exc):
            _wait_to_look(job, exc)  # sent, maybe: the next recovery looks for it before sending again
            return
        handle_error(job, exc, where="resubmit")
        return
    _adopt(job, runner, remote_id, data)


def recover(job_id: int) -> None:
    """Reconcile found an active job whose lease lapsed (its worker died). Take the lease for it and repair."""
    job = Job.objects.select_related("device").filter(pk=job_id).first()
    if job is None or job.state not in ACTIVE_STATES:
        return
    if lease.lease_is_live(job.device_id, job.pk):
        return
    if not lease.lease_renew(job.device_id, job.pk):
        return  # someone else holds it
    style = style_of(job.device.kind, job.kind)
    if job.state == S.PREPARING:
        back_to_queue(job, "The hub restarted while preparing; starting again.")
        return
    if style == "poll":
        if job.remote_id:
            schedule_poll(job.pk, countdown=0)
        elif job.state == S.SUBMITTED:
            _recover_submission(job.pk)
        return
    if job.state == S.COLLECTING:
        # A blocking or stream call's result is saved before the job is collecting: only "done" was lost.
        job_note(job.pk, "The hub restarted after saving the result; finishing it.")
        finish_done(job)
        return
    # Blocking and stream calls die with the worker that held them.
    interrupt(job, "Interrupted: the hub lost the connection to the render (a worker restarted).")


def cancel_on_device(job_id: int) -> None:
    """After a cancel of a poll-style job that the device is rendering: stop it there, then free the device."""
    job = Job.objects.select_related("device").filter(pk=job_id).first()
    if job is None or job.state != S.CANCELLED:
        return
    if not lease.lease_claim_stop(job.device_id, job.pk):
        # Stopped already (its end freed the lease), or another worker is stopping it right now: twice is
        # harmless, never two stops at once, never a stop of the next job's model.
        return
    runner = runner_for(job)
    try:
        with lease.keep_alive(job.device_id, job.pk):
            runner.cancel()
        job_note(job.pk, "Stopped on the device.")
    except errors.DeviceError as exc:
        job_note(job.pk, f"Stopping it on the device failed: {exc.human}", data={"detail": exc.detail})
    # Its time limit, a bug: free the device all the same (else reconcile would send the stop again and again).
    except Exception:
        logger.exception("stopping job %s on the device failed", job.pk)
        job_note(job.pk, "Stopping it on the device failed.")
    end_job(job)


# -- renders given up with their device (the pool) ---------------------------------------------------------------


def stop_lost_renders(device_id: int) -> int:
    """The device is back: stop there each render the hub gave up on while it was away (``LostRender``: its job
    went to another device), under the device's lease, before it runs anything else; then its queue moves on.
    A device away again keeps the rest for its next return. Returns how many were stopped (or found gone)."""
    stopped = 0
    for row in LostRender.objects.filter(device_id=device_id).select_related("device").order_by("pk"):
        if not lease.lease_acquire(device_id, row.job_id):
            return stopped  # a job holds the device: its end dispatches, and dispatch sends this task again
        try:
            ghost = Job.objects.get(pk=row.job_id)
            ghost.device, ghost.remote_id = row.device, row.remote_id  # the render as it was on this device
            with lease.keep_alive(device_id, row.job_id):
                runner_for(ghost).cancel()
        except errors.DeviceError as exc:
            if not exc.permanent or isinstance(exc, errors.AuthFailed):
                return stopped  # away again, busy, or its key refused: the next return (or round) tries again
            # Gone from the device already (finished, or lost with its power): nothing left to stop.
        except Job.DoesNotExist:
            pass
        finally:
            lease.lease_release(device_id, job_id=row.job_id)
        row.delete()
        stopped += 1
        job_note(row.job_id, f"Its earlier render on {row.device.name} was stopped there.")
    enqueue.send("dispatch", device_id)
    return stopped

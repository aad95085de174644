"""The job engine: dispatch, run, poll, finish, recover. Tasks (``jobs.tasks``) are thin ways in to these.

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
from types import SimpleNamespace
from typing import Any

from django.conf import settings
from django.db.models import F, Q
from django.utils import timezone

from devices import errors
from devices.models import Device
from jobs.core import lease
from jobs.core.changes import held, job_ticked, replan, send_held
from jobs.core.transitions import job_note, job_set, job_transition
from jobs.kinds.runners import PollResult, Stopped
from jobs.kinds.table import runner_for, shape_of, style_of
from jobs.models import ACTIVE_STATES, FINAL_STATES, WAITING_STATES, Job, JobState, waiting_on
from jobs.queue import enqueue

logger = logging.getLogger("jobs.queue.engine")
S = JobState
POLLING_STATES = (S.SUBMITTED, S.RUNNING, S.COLLECTING)
MAX_ATTEMPTS = 4  # transient failures before a job is failed for good
MAX_AUTO_REQUEUES = 1  # interrupted jobs are re-queued once
PROGRESS_EVERY_S = 0.5  # stream/blocking progress: at most two DB writes per second (pushes: one, hub.live)


# -- helpers ---------------------------------------------------------------------------------------------------


def _now() -> dt.datetime:
    return timezone.now()


def _trace(job_id: int, step: str) -> None:
    """Timing of the path from a render's end to the next request (``HUB_DEBUG_LOGGERS=jobs``)."""
    logger.debug("trace job=%s step=%s t=%.4f", job_id, step, time.time())


def _enqueue_dispatch(device_id: int) -> None:
    enqueue.send("dispatch", device_id)


def _replan(device_id: int) -> None:
    """Through the one sender of live updates: inside ``held`` once with the block's other changes."""
    replan(device_id)


def _backoff(attempt: int, *, base: float = 5.0, cap: float = 300.0) -> dt.timedelta:
    return dt.timedelta(seconds=min(cap, base * 2 ** max(0, attempt - 1)))


def _device_state_from(device_id: int, exc: errors.DeviceError) -> None:
    from devices.live import device_push
    from devices.services import device_set_state, state_for_error

    state, message, fix = state_for_error(exc)
    if state:
        if device_set_state(device_id=device_id, state=state, message=message, fix=fix):
            try:
                device_push(device_id)
            except Exception:
                logger.warning("device push failed", exc_info=True)


def _watch_device(device_id: int) -> None:
    """A job waits for this device to come back: have the metric poller check it at its fast rate."""
    from devices.services import device_mark_active

    device_mark_active(device_id=device_id, until=_now() + dt.timedelta(minutes=30))


def _device_online(device_id: int) -> None:
    """The device answered a job call: it is reachable and unlocked whatever the last poll said."""
    from devices.services import device_set_state

    if Device.objects.filter(pk=device_id).exclude(state=Device.State.ONLINE).exists():
        device_set_state(device_id=device_id, state=Device.State.ONLINE, seen=True)


def _device_seconds(job: Job, end: dt.datetime) -> float:
    return max(0.0, (end - job.started_at).total_seconds()) if job.started_at else 0.0


def _error_fields(exc: errors.DeviceError | None, human: str = "") -> dict[str, Any]:
    if exc is None:
        return {"error_code": "hub", "error_human": human[:500], "error_detail": ""}
    return {
        "error_code": exc.code[:50],
        "error_human": (human or exc.human)[:500],
        "error_detail": (exc.detail or "")[:5000],
    }


def release_device(device_id: int, job_id: int, *, ended: dt.datetime | None = None) -> bool:
    """Give the device back and record the span the job held it (``jobs.quotas.services``: usage is the hub's own measure,
    the model load, the render and the download). Once per span: only one release of a held lease succeeds. The
    claim time is read before the release: once released, another process may claim the same job again (a
    re-queued one) and move ``started_at`` on."""
    from jobs.quotas.services import device_use_record

    held = Job.objects.filter(pk=job_id).values_list("started_at", "owner_id").first()
    if not lease.lease_release(device_id, job_id=job_id):
        return False
    if held is not None:
        try:
            device_use_record(
                job_id=job_id, owner_id=held[1], device_id=device_id, started=held[0], ended=ended or _now()
            )
        except Exception:  # the device is free whatever the bookkeeping says
            logger.exception("recording the device time of job %s failed", job_id)
    return True


def end_job(job: Job) -> None:
    """After a final state: free the device and start the next job at once (dispatch runs right here, in the
    process that saw the end: no device I/O, and one queue hop less of device idle), then plan."""
    _trace(job.pk, "end_job")
    release_device(job.device_id, job.pk)
    _trace(job.pk, "released")
    try:
        started = dispatch_device(job.device_id)
    except Exception:
        logger.exception("dispatching device %s after job %s failed; queueing it", job.device_id, job.pk)
        started = None
        _enqueue_dispatch(job.device_id)
    _trace(job.pk, "dispatched")
    if started is None:  # dispatch replans when it starts a job
        _replan(job.device_id)


def finish_done(job: Job) -> bool:
    now = _now()
    ok = job_transition(
        job.pk,
        from_states=[S.COLLECTING],
        to=S.DONE,
        message="Done.",
        progress=100.0,
        phase="Done",
        finished_at=now,
        device_seconds=_device_seconds(job, now),
        next_poll_at=None,
    )
    _trace(job.pk, "done_transition")
    if ok:
        from jobs.queue.eta import learn

        job.refresh_from_db()
        try:
            learn(job)
        except Exception:
            logger.exception("learning from job %s failed", job.pk)
        _trace(job.pk, "learned")
        end_job(job)
        enqueue.send_on_commit(
            "make_thumbnail", job.pk
        )  # after the lease is given back: the next job does not wait
    return ok


def fail(job: Job, exc: errors.DeviceError | None, *, human: str = "", data: dict | None = None) -> bool:
    now = _now()
    fields = _error_fields(exc, human)
    ok = job_transition(
        job.pk,
        from_states=ACTIVE_STATES,
        to=S.FAILED,
        message=f"Failed: {fields['error_human']}" + (f" — {exc.detail}" if exc and exc.detail else ""),
        data=data or {},
        finished_at=now,
        device_seconds=_device_seconds(job, now),
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
    else:
        now = _now()
        job_transition(
            job.pk,
            from_states=[S.INTERRUPTED],
            to=S.FAILED,
            message="Failed: interrupted again after its automatic retry.",
            finished_at=now,
            error_code="interrupted",
            error_human="The render was interrupted twice.",
            device_seconds=_device_seconds(job, now),
        )
    end_job(job)
    return True


def handle_error(job: Job, exc: errors.DeviceError, *, where: str) -> None:
    """Policy for an error raised while preparing or submitting (nothing is rendering for this job)."""
    job.refresh_from_db()
    if isinstance(exc, (errors.DeviceLocked, errors.DeviceUnreachable, errors.AuthFailed)):
        _device_state_from(job.device_id, exc)
        _watch_device(job.device_id)
        retry = _now() + _backoff(job.attempts, base=2.0, cap=60.0)
        back_to_queue(
            job, f"Waiting: {exc.human}", retry_after=retry, data={"code": exc.code, "where": where}
        )
        return
    if isinstance(exc, errors.PoliteRefusal):
        back_to_queue(
            job,
            f"Waiting politely: {', '.join(exc.blocking) or 'another model'} is in use and was "
            "not loaded by the hub. It runs tonight, or untick “Polite”.",
            retry_after=_now() + dt.timedelta(minutes=10),
            data={"blocking": exc.blocking},
        )
        return
    if not exc.permanent and job.attempts < MAX_ATTEMPTS:
        back_to_queue(
            job,
            f"Will try again: {exc.human}" + (f" ({exc.detail})" if exc.detail else ""),
            retry_after=_now() + _backoff(job.attempts),
            data={"code": exc.code, "where": where},
        )
        return
    fail(job, exc, data={"where": where})


# -- dispatch ----------------------------------------------------------------------------------------------------


def dispatch_device(device_id: int) -> int | None:
    """Start the device's next job if the device is free. Returns the started job's id."""
    from jobs.core.scheduler import next_job, snapshot_for

    if Job.objects.filter(device_id=device_id, state__in=ACTIVE_STATES).exists():
        return None  # busy (or an orphan reconcile is about to recover)
    if stops_pending([device_id]):
        return None  # a cancelled render may still run there: reconcile sends its stop first
    token = lease.lease_acquire(device_id)
    if token is None:
        return None
    started = None
    try:
        if Job.objects.filter(device_id=device_id, state__in=ACTIVE_STATES).exists():
            return None
        snap = snapshot_for(device_id)
        waiting = waiting_on(device_id)
        job, jumped = next_job(snap, waiting)
        if job is None:
            return None
        now = _now()
        if not job_transition(
            job.pk,
            from_states=WAITING_STATES,
            to=S.PREPARING,
            message=f"Started (attempt {job.attempts + 1}).",
            attempts=F("attempts") + 1,
            started_at=now,
            phase="Preparing",
            retry_after=None,
            progress=0.0,
        ):
            return None
        _trace(job.pk, "claimed")
        lease.lease_assign(device_id, token, job.pk)
        started = job.pk
        if jumped:
            Job.objects.filter(pk__in=[j.pk for j in jumped]).update(bypassed=F("bypassed") + 1)
    finally:
        if started is None:
            lease.lease_release(device_id, token=token)
    job.refresh_from_db()
    limit = max(600, int(3 * (job.estimate_s or 60)) + 600)
    enqueue.send("run_job", started, soft_time_limit=limit, time_limit=limit + 60)
    _trace(started, "run_sent")
    _replan(device_id)
    _trace(started, "dispatch_replanned")
    return started


# -- run (prepare + submit, or the whole blocking/stream call) -------------------------------------------------


def _polite_now(job: Job) -> bool:
    from jobs.core.scheduler import in_night

    d = job.device
    return job.polite and not in_night(_now(), d.night_start, d.night_end, d.time_zone or "UTC")


def _note_load(job: Job, runner) -> None:
    """When the prepare loaded the job's model, keep how long it took (since the job started) in the job's
    memory: the shape's history learns the render alone (``jobs.queue.eta.learn``), as the plan adds a load of its own
    where one is due (``jobs.queue.eta.LOAD_SECONDS``)."""
    if not getattr(runner, "loaded", False) or job.started_at is None:
        return
    load_s = round(max(0.0, (_now() - job.started_at).total_seconds()), 3)
    data = {**_stored_remote_data(job), "load_s": load_s}
    Job.objects.filter(pk=job.pk).update(remote_data=data)
    job.remote_data = data


def run(job_id: int) -> None:
    _trace(job_id, "run_start")
    job = Job.objects.select_related("device").filter(pk=job_id).first()
    if job is None or job.state != S.PREPARING:
        return
    runner = runner_for(job)
    with lease.keep_alive(job.device_id, job.pk) as lost:
        try:
            _trace(job_id, "prepare")
            evicted = runner.prepare(polite=_polite_now(job))
            _trace(job_id, "prepared")
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
    _trace(job.pk, "submit_request")
    try:
        remote_id, data = runner.submit()
    except errors.DeviceError as exc:
        if exc.status is None and not isinstance(exc, (errors.DeviceUnreachable, errors.DeviceLocked)):
            # The connection broke mid-request: the device may have created the render. Look before resubmitting.
            _recover_submission(job.pk)
            return
        handle_error(job, exc, where="submit")
        return
    _adopt(job, runner, remote_id, data)


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
    schedule_poll(job.pk, countdown=_first_interval(job, runner))


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
    _trace(job.pk, "execute_request")
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
        from jobs.queue.eta import note_progress

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
        _trace(job.pk, "executed")
    except (Stopped, errors.DeviceError) as exc:
        ended: BaseException | None = exc
    else:
        ended = None
    finally:
        starting.close()  # a runner that never reported
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
    if isinstance(exc, errors.DeviceError):
        job.refresh_from_db()
        if job.state != S.RUNNING:
            _cleanup_abandoned(job)
        elif isinstance(exc, (errors.DeviceLocked, errors.DeviceUnreachable)) or (
            isinstance(exc, errors.Transient) and exc.status is None
        ):
            _device_state_from(job.device_id, exc)
            _watch_device(job.device_id)  # the re-queued job waits for it: the poller must notice the unlock
            interrupt(job, f"Interrupted: {exc.human}", data={"code": exc.code, "detail": exc.detail})
        elif exc.permanent:
            fail(job, exc)
        else:
            handle_error(job, exc, where="run")
        return
    if job_transition(
        job.pk, from_states=[S.RUNNING], to=S.COLLECTING, message="Saved the result.", phase="Saving"
    ):
        _trace(job.pk, "collecting")
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


#: Poll when this share of the time left to the end of the render (or stage) has passed: far from the end the
#: polls are rare, near it they come every ``JOBS_POLL_MIN_S``; an estimate up to 1/share too long still sees
#: the end within one fast poll.
NEAR_SHARE = 0.4
#: ... and this share once the job's own progress has covered ``OWN_RATE_SURE_AT`` of the render (or stage): its
#: own rate then says when it ends to within a few percent, and the last stretch takes fewer polls. From then on
#: the far rule allows waiting as long as the render has run (``SURE_FAR_SHARE``), not half of it.
SURE_NEAR_SHARE = 0.6
SURE_FAR_SHARE = 1.0
OWN_RATE_SURE_AT = 0.25
SURE_UNTIL_LEFT = 0.05
#: The job's own progress rate is trusted once this share of the render (or stage) is done: the first percent
#: comes after the device's own start-up and says little.
OWN_RATE_FROM = 0.05
#: A shape's history is trusted to say how long a render (or stage) at least lasts once it has this many samples:
#: until the job's own progress shows, it is then polled every ``START_SHARE`` of that time at the most often
#: (not from the first fraction of a second: a render its history says lasts minutes is not over after 0.3 s).
TRUSTED_SAMPLES = 2
START_SHARE = 0.05


#: How many of the latest polls ``_note_pace`` keeps (what each read, and when), and of the first trusted ones.
PACE_KEEP = 8
PACE_EARLY = 4
#: The end its pace foretells is trusted to this share of the time left, beyond what the polls leave open
#: (progress is not quite even): until then the polls wait for the earliest end that allows.
PACE_SLACK = 0.02
#: Within the window its pace leaves for the end, poll every this many ``JOBS_POLL_MIN_S``: the end is seen
#: within that, for half the polls.
PACE_STRIDE = 2
#: Once its pace is known, the far rule allows waiting this many times as long as the render has run (an end
#: far earlier than its pace says, a render that failed, is seen within 1 + this times its time; beyond
#: ``JOBS_POLL_MAX_S`` / this of a render, the cap decides).
PACED_FAR_SHARE = 2.0


def _stored_remote_data(job: Job) -> dict[str, Any]:
    data = Job.objects.filter(pk=job.pk).values_list("remote_data", flat=True).first()
    return data if isinstance(data, dict) else dict(job.remote_data or {})


def _progress_and_history(
    job: Job, runner, now: dt.datetime
) -> tuple[float | None, float | None, float, tuple[float, float | None, tuple[float, float] | None]]:
    """Seconds until the render (or, for a multi-stage job, the current stage) should end: (from the job's own
    progress since it was sent, from its shape's history through ``jobs.queue.eta``; None where nothing says), the
    seconds since it was sent, and (the share of the render or stage done, how long its trusted history says
    the whole render or stage takes: None below ``TRUSTED_SAMPLES``, the window its pace leaves for the end:
    seconds from now to the earliest and to the latest end it allows, None without a pace). With a pace the
    history is not read: the job's own progress says more about this render than its shape's past ones."""
    from jobs.models import RenderStat
    from jobs.queue.eta import remaining_seconds

    done, share = _done_and_share(job, runner)
    elapsed = (now - job.submit_started_at).total_seconds() if job.submit_started_at else 0.0
    own = elapsed * (1.0 - done) / done if done >= OWN_RATE_FROM and elapsed > 0 else None
    paced = _paced_end(job, done) if own is not None else None
    if paced is not None:
        end, margin = paced
        margin += PACE_SLACK * max(0.0, end - elapsed)
        window = (end - margin - elapsed, end + margin - elapsed)
        # Before the end its pace foretells, the time to it; past it (the pace was wrong: a slower last
        # stretch), the time since the latest end it allowed, never more than the rate since it was sent says.
        own = end - elapsed if window[1] >= 0 else min(-window[1], own)
        return own, None, elapsed, (done, None, window)
    history = None
    shape = shape_of(job.device.kind, job.kind, job.model_id, job.params)
    learned, samples = (
        RenderStat.objects.filter(
            device_id=job.device_id, kind=job.kind, model_id=job.model_id, shape=shape, samples__gt=0
        )
        .values_list("mean_s", "samples")
        .first()
    ) or (None, 0)
    if learned:
        # The shape's history as it is now (the job's own estimate was fixed when it was queued).
        if share >= 1.0:
            seen = SimpleNamespace(estimate_s=learned, progress=job.progress, remote_data=job.remote_data)
            history = remaining_seconds(seen, now=now)
        else:
            history = learned * share * (1.0 - done)
    trusted = learned * min(share, 1.0) if learned and samples >= TRUSTED_SAMPLES else None
    return own, history, elapsed, (done, trusted, None)


def _done_and_share(job: Job, runner) -> tuple[float, float]:
    """(The share of the render or, for a multi-stage job, its current stage done; that stage's share of the job.)"""
    stage = getattr(runner, "stage_progress", None)
    done, share = stage(job.progress) if stage else (float(job.progress or 0.0) / 100.0, 1.0)
    return min(max(done, 0.0), 1.0), share


def _note_pace(job: Job, runner, data: dict[str, Any], now: dt.datetime) -> dict[str, Any]:
    """``data`` (the job's ``remote_data``) with this poll noted under ``pace``: what the latest polls read and
    when, the smallest step progress was seen to move by, and when the first trusted value was crossed into
    (between the poll that first read it and the one before). Kept per render or stage (its ``remote_id``),
    in seconds since it was sent."""
    if not job.submit_started_at:
        return data
    t = round((now - job.submit_started_at).total_seconds(), 3)
    done = round(_done_and_share(job, runner)[0], 5)
    pace = data.get("pace")
    if not isinstance(pace, dict) or pace.get("id") != job.remote_id or not pace.get("polls"):
        pace = {"id": job.remote_id, "polls": [[0.0, 0.0]]}
    polls = list(pace["polls"])
    last_t, last_done = polls[-1]
    pace = {**pace, "polls": [*polls, [t, done]][-PACE_KEEP:]}  # a copy: ``data`` is compared with the result
    if done >= OWN_RATE_FROM and len(pace.get("early") or []) < PACE_EARLY:
        pace["early"] = [*(pace.get("early") or []), [t, done]]  # the far end of its rate
    if done > last_done:
        pace["step"] = round(min(done - last_done, pace.get("step") or 1.0), 5)
        cross = [done, last_t, t]
        pace["crossed"] = [*(pace.get("crossed") or []), cross][-PACE_KEEP:]
        if not pace.get("first") and done >= OWN_RATE_FROM:
            pace["first"] = cross  # the first value that says more than the device's own start-up
    return {**data, "pace": pace}


def _paced_end(job: Job, done: float) -> tuple[float, float] | None:
    """When (seconds since it was sent) the render or stage should end by the pace ``_note_pace`` noted, and
    how far off that may be; None until its rate spans ``OWN_RATE_FROM``, or while the progress read is not
    the latest noted. A poll that read ``d`` at ``t`` says the device crossed into ``d`` before ``t`` and into
    ``d + step`` after it: at its rate the end lies in a window one step wide, however far apart the polls;
    the latest polls fall at different points of their steps, and where their windows overlap the end lies
    in all of them (the percent a poll happens to read is up to a whole step old: 4 s of a 7-minute render)."""
    pace = (job.remote_data or {}).get("pace") if isinstance(job.remote_data, dict) else None
    if not isinstance(pace, dict) or pace.get("id") != job.remote_id or not pace.get("first"):
        return None
    try:
        d0, lo0, hi0 = map(float, pace["first"])
        crossed = [tuple(map(float, c)) for c in pace["crossed"] if float(c[0]) - d0 >= OWN_RATE_FROM]
        polls, step = [tuple(map(float, p)) for p in pace["polls"]], float(pace["step"])
    except (KeyError, IndexError, TypeError, ValueError):
        return None
    if abs(polls[-1][1] - round(done, 5)) > 1e-6 or not crossed or step <= 0:
        return None
    bounds = _pace_bounds(pace, step)
    if bounds is not None:
        return (bounds[0] + bounds[1]) / 2.0, (bounds[1] - bounds[0]) / 2.0
    # Where an even pace fits no corner: its rate from the first trusted crossing to the latest one known most
    # narrowly for the span between them.
    d1, lo1, hi1 = min(crossed, key=lambda c: (c[2] - c[1] + hi0 - lo0) / (c[0] - d0))
    whole = ((lo1 + hi1) - (lo0 + hi0)) / 2.0 / (d1 - d0)  # seconds for the whole render or stage
    if whole <= 0:
        return None
    off = ((hi0 - lo0) + (hi1 - lo1)) / 2.0 / (d1 - d0)  # ... give or take this (its ends' windows)
    # Each window, widened by what the rate leaves open over the rest of the render after it.
    windows = [(lo + (1.0 - d) * whole, hi + (1.0 - d) * whole, 1.0 - d) for d, lo, hi in crossed]
    windows += [(t + (1.0 - d - step) * whole, t + (1.0 - d) * whole, 1.0 - d) for t, d in polls]
    lo_end = max(lo - rest * off for lo, _, rest in windows)
    hi_end = min(hi + rest * off for _, hi, rest in windows)
    if lo_end > hi_end:  # they disagree (progress is not quite even): trust the latest poll
        lo, hi, rest = windows[-1]
        lo_end, hi_end = lo - rest * off, hi + rest * off
    return (lo_end + hi_end) / 2.0, (hi_end - lo_end) / 2.0


def _pace_bounds(pace: dict[str, Any], step: float) -> tuple[float, float] | None:
    """The earliest and latest end (seconds since sent) an even pace allows: the device crossed into ``x`` at
    ``start + x * whole``, and every noted poll and crossing bounds that (a poll that read ``d`` at ``t``: into
    ``d`` by ``t``, into ``d + step`` after it). Two unknowns, so the bounds are at the corners where two of
    those limits meet. None where they disagree (progress is not even) or leave the end open."""
    limits: list[tuple[float, float, float]] = []  # start + x * whole lies in (lo, hi]
    inf = float("inf")
    for t, d in [*(pace.get("early") or []), *pace["polls"]]:
        if float(d) >= OWN_RATE_FROM:
            limits += [(float(d), -inf, float(t)), (float(d) + step, float(t), inf)]
    for d, lo, hi in [pace["first"], *pace["crossed"]]:
        if float(d) >= OWN_RATE_FROM:
            limits.append((float(d), float(lo), float(hi)))
    lines = [(x, v) for x, lo, hi in limits for v in (lo, hi) if abs(v) != inf]
    ends = []
    for i, (x1, v1) in enumerate(lines):
        for x2, v2 in lines[i + 1 :]:
            if abs(x1 - x2) < 1e-9:
                continue
            whole = (v1 - v2) / (x1 - x2)
            start = v1 - x1 * whole
            if whole > 0 and all(lo - 1e-6 <= start + x * whole <= hi + 1e-6 for x, lo, hi in limits):
                ends.append(start + whole)
    return (min(ends), max(ends)) if ends else None


def _first_interval(job: Job, runner) -> float:
    return _interval_for(job, runner, stalls=0)


def _interval_for(job: Job, runner, *, stalls: int) -> float:
    """Near the end (by the job's own progress or its shape's history, whichever says sooner: an early poll
    costs one request, a late one costs device time) every ``JOBS_POLL_MIN_S``, far from it up to
    ``JOBS_POLL_MAX_S``. Until the job's own progress shows, start fast (a short stage may be over already)
    and slow to the base rate: history alone (a whole job's time, load and download included) is not trusted
    to push the first polls out. Once its pace is known, ``_paced_interval``."""
    floor = min(settings.JOBS_POLL_MIN_S, settings.JOBS_POLL_INTERVAL_S)
    base, cap = settings.JOBS_POLL_INTERVAL_S, settings.JOBS_POLL_MAX_S
    own, history, elapsed, (done, trusted, window) = _progress_and_history(job, runner, _now())
    if window is not None and own is not None:
        return _paced_interval(own, elapsed, window, floor=floor, cap=cap)
    start = min(base, 2 * floor * 1.5**stalls)
    sure = own is not None and done >= OWN_RATE_SURE_AT
    # Its own rate knows the end to about a percent of the render (whole-percent progress): in the last few
    # percent the time left is mostly that uncertainty, and the closer rule sees the end sooner.
    share = SURE_NEAR_SHARE if sure and own > SURE_UNTIL_LEFT * elapsed / done else NEAR_SHARE
    near = [max(floor, share * left) for left in (own, history) if left is not None]
    # Never wait longer than half the time the render has run so far: an end far earlier than expected is seen
    # within 1.5 times its time (twice, once its own progress is sure; with a trusted history and no progress
    # yet, within START_SHARE of what that says), whatever the estimates say.
    far = min(cap, max(floor, (SURE_FAR_SHARE if sure else 0.5) * elapsed))
    if own is None and trusted:
        return min([min(cap, max(far, START_SHARE * trusted - elapsed)), *near])
    if own is None and done <= 0:
        # Nothing is known yet: start fast (a short stage may be over already). Once its progress moves, the
        # render is under way and the far rule alone paces the polls until its own rate can be trusted.
        return min([start, far, *near])
    return min([far, *near])


def _paced_interval(
    own: float, elapsed: float, window: tuple[float, float], *, floor: float, cap: float
) -> float:
    """The wait once the job's pace says the end lies ``window`` away (seconds from now to the earliest and to
    the latest end it allows; ``own``: to the end it foretells, or once past the latest, the time since it,
    at most what its rate says is left). Its own progress decides alone (a shape's history, learned at another
    speed or for another load, only pulled the polls in for nothing): sleep to just before the earliest end
    (or ``SURE_NEAR_SHARE`` of the way to the end foretold where the window is wider than that leaves, never
    past its latest end), capped by the far rule only, then poll every ``PACE_STRIDE`` fast polls inside the
    window, and past it every fast poll again, backing off as the render overruns."""
    to_lo, to_hi = window
    if to_hi < 0:  # overrun: the pace was wrong (a slower last stretch, a render sitting at 99 %)
        return min(cap, max(floor, SURE_NEAR_SHARE * own))
    if to_lo <= floor:  # inside the window: the end may come at any poll now
        return max(floor, min(PACE_STRIDE * floor, to_hi))
    # Far from it, the end is foretold from the progress so far, and each poll on the way narrows the window.
    far = min(cap, max(floor, PACED_FAR_SHARE * elapsed))
    return min(far, max(floor, to_lo, min(SURE_NEAR_SHARE * own, to_hi)))


def _next_interval(job: Job, moved: bool, *, runner=None, trouble: bool = False) -> float:
    """The wait before the next poll. ``trouble``: the device did not answer as it should (locked, unreachable,
    an error): back off on the number of such polls in a row, as before."""
    base, cap = settings.JOBS_POLL_INTERVAL_S, settings.JOBS_POLL_MAX_S
    data = _stored_remote_data(job)  # never write back a stale copy (the ETA keeps its anchor here)
    stalls = 0 if moved else int(data.get("stalls", 0)) + 1
    noted = {**data, "stalls": stalls}
    if runner is not None and not trouble:  # the device answered: this poll read its progress
        noted = _note_pace(job, runner, noted, _now())
    if noted != data:
        data = noted
        Job.objects.filter(pk=job.pk).update(remote_data=data)
    job.remote_data = data
    if trouble or runner is None:
        return min(cap, base * (1.5**stalls))
    return _interval_for(job, runner, stalls=stalls)


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
    lease._mark_device_active(job.device_id)
    runner = runner_for(job)
    if job.state == S.COLLECTING:
        _collect(job, runner)
        return
    _trace(job.pk, "poll_start")
    try:
        result = runner.poll()
    except errors.NotFound as exc:
        _device_online(job.device_id)
        interrupt(
            job,
            "The device no longer knows this render (it was restarted?).",
            data={"remote_id": job.remote_id, "detail": exc.detail},
        )
        return
    except (errors.DeviceLocked, errors.DeviceUnreachable, errors.AuthFailed) as exc:
        _device_state_from(job.device_id, exc)
        _watch_device(job.device_id)
        if job.remote_data.get("waiting_on") != exc.code:
            job_note(
                job.pk,
                f"Waiting for the device: {exc.human}",
                data={"code": exc.code},
                remote_data={**job.remote_data, "waiting_on": exc.code},
                phase=exc.human[:100],
            )
        job.refresh_from_db()
        schedule_poll(job_id, countdown=_next_interval(job, moved=False, trouble=True), ticket=ticket)
        return
    except errors.DeviceError as exc:  # transient: try again a bit later
        logger.info("job %s poll: %s", job_id, exc)
        schedule_poll(job_id, countdown=_next_interval(job, moved=False, trouble=True), ticket=ticket)
        return
    _on_poll(job, runner, result, ticket)


def _on_poll(job: Job, runner, result: PollResult, ticket: int) -> None:
    if job.remote_data.get("waiting_on"):
        _device_online(job.device_id)
        job.remote_data = {k: v for k, v in job.remote_data.items() if k != "waiting_on"}
        job_note(job.pk, "The device answers again.", remote_data=job.remote_data)
    if result.status == "failed":
        _on_remote_failure(job, runner, result)
        return
    if result.status == "done":
        _trace(job.pk, "poll_done")
        nxt = None
        try:
            nxt = runner.advance()
        except errors.DeviceError as exc:
            handle_poll_error(job, exc, ticket)
            return
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
            schedule_poll(job.pk, countdown=_first_interval(job, runner), ticket=ticket)
            return
        _trace(job.pk, "advanced")
        if job_transition(
            job.pk,
            from_states=[S.SUBMITTED, S.RUNNING],
            to=S.COLLECTING,
            message="Rendered; downloading the result.",
            progress=result.progress,
            phase="Saving",
        ):
            _trace(job.pk, "collecting")
            job.refresh_from_db()  # the runner's own job, read anew
            _collect(job, runner)
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
        from jobs.queue.eta import note_progress

        if moved:
            note_progress(job.pk)
        job_ticked(job.pk)
    job.refresh_from_db()
    schedule_poll(job.pk, countdown=_next_interval(job, moved=moved, runner=runner), ticket=ticket)


def handle_poll_error(job: Job, exc: errors.DeviceError, ticket: int) -> None:
    if exc.permanent:
        fail(job, exc)
    else:
        schedule_poll(job.pk, countdown=_next_interval(job, moved=False, trouble=True), ticket=ticket)


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


def _collect(job: Job, runner) -> None:
    send_held(aside=True)  # "downloading the result" goes out while it downloads (a big file takes a while)
    try:
        with lease.keep_alive(job.device_id, job.pk, poll_chain=True):
            _trace(job.pk, "download")
            runner.collect()
            _trace(job.pk, "downloaded")
    except errors.DeviceError as exc:
        job.refresh_from_db()
        if exc.permanent or job.attempts >= MAX_ATTEMPTS:
            fail(job, exc, human=f"Downloading the result failed: {exc.human}")
        else:
            schedule_poll(job.pk, countdown=settings.JOBS_POLL_MAX_S)
        return
    _trace(job.pk, "collected")
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
        return  # reconcile tries again
    if found:
        job_note(
            job.pk,
            "Found the render the device had already started (after a hub restart).",
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


def stops_pending(device_ids: list[int]) -> dict[int, int]:
    """{device: job} for the devices whose lease a cancelled poll-style render still holds: the device may still
    be rendering it (cancel_on_device frees the lease when the stop is done), so nothing else may start there."""
    rows = (
        lease.DeviceLease.objects.filter(pk__in=device_ids, job__state=S.CANCELLED)
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
    lease.DeviceLease.objects.filter(pk=device_id, job_id=job_id).update(expires_at=_now())


def _send_stops(leases: dict, busy: set[int], now: dt.datetime) -> int:
    """Reconcile's part for cancels: a cancelled render whose stop was never sent (the broker was down), or was
    lost (Redis restarted, the worker died before or during the stop: its lease lapsed), is stopped now. Its
    device counts as busy meanwhile. Sending gives the stop ``stop_pickup()`` to be claimed, so the next runs
    don't send it again while it is on its way, and do soon if it never arrives."""
    held = [device_id for device_id, row in leases.items() if row.job_id and device_id not in busy]
    sent = 0
    for device_id, job_id in (stops_pending(held) if held else {}).items():
        busy.add(device_id)
        row = leases[device_id]
        if row.expires_at is not None and row.expires_at >= now:
            continue  # a worker is on it (or its message is on the way)
        try:
            enqueue.send("cancel_on_device", job_id)
        except Exception:
            logger.warning("job %s: the stop could not be queued; next round", job_id, exc_info=True)
            continue
        stop_sent(job_id, device_id)
        sent += 1
    return sent


def reconcile(now: dt.datetime | None = None) -> dict[str, int]:
    """The safety net (beat, every few seconds). Cheap: a few indexed queries when all is well."""
    now = now or _now()
    counts = {"polls": 0, "recovered": 0, "released": 0, "dispatched": 0}
    grace = dt.timedelta(seconds=max(3.0, 2 * settings.JOBS_POLL_INTERVAL_S))
    active = list(
        Job.objects.filter(state__in=ACTIVE_STATES)
        .select_related("device")
        .only("pk", "state", "remote_id", "next_poll_at", "poll_ticket", "kind", "device_id", "device__kind")
    )
    leases = {row.device_id: row for row in lease.DeviceLease.objects.all()}
    for job in active:
        poll_style = style_of(job.device.kind, job.kind) == "poll"
        if poll_style and job.remote_id and job.state in POLLING_STATES:
            if job.next_poll_at is None or job.next_poll_at < now - grace:
                if schedule_poll(job.pk, countdown=0, ticket=job.poll_ticket):
                    counts["polls"] += 1
            continue
        held = leases.get(job.device_id)
        if held is None or held.job_id != job.pk or held.expires_at is None or held.expires_at < now:
            enqueue.send("recover_job", job.pk)
            counts["recovered"] += 1
    busy = {j.device_id for j in active}
    counts["stops"] = _send_stops(leases, busy, now)
    # Leases left by jobs that ended without releasing (a runner died after a cancel).
    for device_id, row in leases.items():
        if row.job_id and device_id not in busy and row.expires_at and row.expires_at < now:
            ended = Job.objects.filter(pk=row.job_id).values_list("finished_at", flat=True).first()
            counts["released"] += release_device(device_id, row.job_id, ended=min(ended or now, now))
    waiting_devices = set(
        Job.objects.filter(state__in=WAITING_STATES).values_list("device_id", flat=True).distinct()
    )
    for device_id in waiting_devices - busy:
        device = Device.objects.filter(pk=device_id).only("state", "queue_paused", "active_until").first()
        if device is None or device.queue_paused or device.state == "auth_failed":
            continue
        if device.state in ("locked", "unreachable"):
            # Jobs wait for it to come back, and the poller is what notices: at its fast rate, as when a job
            # found the device away itself (the poller may have found it first, and no job tried it since).
            if device.active_until is None or device.active_until <= now:
                _watch_device(device_id)
            continue
        row = leases.get(device_id)
        if row and row.expires_at and row.expires_at >= now:
            continue
        _enqueue_dispatch(device_id)
        counts["dispatched"] += 1
    return counts


def active_q() -> Q:
    return Q(state__in=ACTIVE_STATES)

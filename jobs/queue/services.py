"""Every change people make to jobs and queues goes through here (views, API and tests are ways in).

Keyword-only, typed; raise ``ValidationError`` / ``PermissionDenied`` with clear messages. State changes are
CAS transitions (``jobs.core.transitions``), so double clicks and races are harmless. Device work is enqueued after
commit; these functions never call a device.

A submission is admitted once, before it gets here: services import admission (``jobs.queue.admission``), never
the other way round, because admission only reads and decides while services write. The one way in
(``jobs.queue.submission.submit``) and "run again" hand over an admitted request (``submit_checked``,
``job_run_again``); ``job_submit``, for code with no form, admits it itself.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import logging
from collections.abc import Sequence
from dataclasses import replace
from typing import Any

from django.conf import settings
from django.core.exceptions import PermissionDenied, ValidationError
from django.db import IntegrityError, transaction
from django.db.models import Max
from django.urls import reverse
from django.utils import timezone

from devices.models import Device
from devices.services import device_set_queue_paused
from hub.accounts import audit
from hub.disk import is_disk_full
from jobs.core import share_links
from jobs.core.links import cancel_children, note_parent_retried
from jobs.core.scheduler import opens_at, snapshot_for
from jobs.core.selectors import can_manage, can_view, queue_plan
from jobs.core.transitions import job_note, job_transition
from jobs.files.store import delete, save_input
from jobs.kinds.table import style_of
from jobs.models import (
    ACTIVE_STATES,
    PENDING_STATES,
    RETRYABLE_STATES,
    WAITING_STATES,
    Job,
    JobEvent,
    JobKind,
    JobState,
    When,
)
from jobs.models import new_share_token as _new_token
from jobs.queue import chains, enqueue
from jobs.queue.admission import CheckedRequest, RequestInvalid, admit, earliest_of, uploads_refused
from jobs.queue.eta import plan_device
from jobs.queue.stops import stop_sent, stop_unsent
from jobs.quotas.services import lift_message

S = JobState
PROMPT_KEYS = ("prompt", "caption", "input")


def _dispatch_on_commit(device_id: int) -> None:
    # Robust: the job is committed whatever the broker says. With Redis down the send raised after the commit,
    # so the page and the API answered 500 for a job that was queued (and a retry queued it twice; found by
    # scripts/chaos.py). A dispatch that can't be sent is only late: beat's reconcile starts idle queues.
    enqueue.send_on_commit("dispatch", device_id, robust=True)


def _stop_on_device_on_commit(job_id: int, device_id: int) -> None:
    """After commit, ask a worker to stop the cancelled render on the device.

    The cancel stands whatever the broker says: with Redis down the send raised after the commit, and the page,
    the API and /v1 answered 500 for a job that was cancelled. The stop is then only late: the lease the job
    still holds is marked expired (nobody is stopping it), which keeps the device's queue shut and lets beat's
    reconcile send the stop as soon as the broker is back (``jobs.queue.reconcile``).
    """

    def send() -> None:
        try:
            enqueue.send("cancel_on_device", job_id)
        except Exception:
            logging.getLogger("jobs").warning(
                "job %s: the stop could not be queued; reconcile sends it", job_id, exc_info=True
            )
            stop_unsent(job_id, device_id)
            job_note(
                job_id, "The device will be told shortly (the hub's task queue is unreachable right now)."
            )
        else:
            stop_sent(job_id, device_id)

    transaction.on_commit(send)


def _replan_on_commit(device_id: int) -> None:
    def run() -> None:
        try:
            plan_device(device_id)
        except Exception:
            logging.getLogger("jobs").exception("planning device %s failed", device_id)

    transaction.on_commit(run)


def _require_admin(by: Any) -> None:
    if not getattr(by, "is_admin", False):
        raise PermissionDenied("Only admins can change the queue.")


def _require_manage(job: Job, by: Any) -> None:
    if not can_manage(by, job):
        raise PermissionDenied("You can only change your own jobs.")


def _save_uploads(job: Job, files: dict[str, Any]) -> dict[str, str]:
    """Inputs live beside the results, in the job's inputs folder of the store (``jobs.files.store.save_input``).

    A disk that fills up meanwhile refuses the request (``RequestInvalid``: the caller's transaction drops the row)
    and takes back the files already saved: a later job given the same number must not find them."""
    saved: dict[str, str] = {}
    try:
        for name, f in files.items():
            saved[name] = save_input(job, name, f)
    except OSError as exc:
        if not is_disk_full(exc):
            raise
        delete(saved.values())
        raise uploads_refused(exc) from None
    return saved


def _hold(job: Job, refs: dict[str, Any]) -> str:
    """``chains.hold`` for the job being queued; a disk that fills up while a parent's result is copied in
    refuses the request as an upload would (``RequestInvalid``; the caller's transaction drops the row)."""
    try:
        return chains.hold(job, refs)
    except OSError as exc:
        if not is_disk_full(exc):
            raise
        raise uploads_refused(exc) from None


def _require_submitter(owner: Any) -> None:
    if not getattr(owner, "can_submit", False):
        raise PermissionDenied("Viewers can watch but not submit jobs.")


def submit_checked(
    *, owner: Any, device: Any, checked: CheckedRequest, idempotency_key: str | None = None
) -> Job:
    """Queue a request ``jobs.queue.submission.preview`` bound to the kind's form and
    ``jobs.queue.admission.check_form`` admitted: admission is not asked again. Dispatch and the queue plan run after commit.

    With ``idempotency_key`` (the submit form's per-render token, or an API caller's ``Idempotency-Key``), the
    same owner sending the same key again queues nothing: the job the first request queued comes back, marked
    ``idempotent_replay = True``. The database is the arbiter (a unique column), so two requests at once in two
    processes still make one job."""
    _require_submitter(owner)
    if idempotency_key and (queued := job_already_submitted(owner=owner, idempotency_key=idempotency_key)):
        return queued
    return _queue_job(owner=owner, device=device, checked=checked, idempotency_key=idempotency_key)


def job_submit(
    *,
    owner: Any,
    device: Any,
    kind: str,
    model_id: str,
    params: dict[str, Any],
    when: str = When.ASAP,
    not_before: dt.datetime | None = None,
    polite: bool = True,
    shared: bool = False,
    upload_files: dict[str, Any] | None = None,
    idempotency_key: str | None = None,
    lift_limits: bool = False,
    pool: Sequence[Any] = (),
) -> Job:
    """Queue a job from its parameters (the way in for code with no form: scripts, tests, the bench). Admits it
    once (``jobs.queue.admission.admit``) and refuses whatever that refuses, so nothing can queue what the device
    would turn down; then as ``submit_checked`` (the same ``idempotency_key`` again returns the job it queued).

    A file of ``upload_files`` may be another job's result (``jobs.core.links.ResultRef``): checked by
    ``jobs.queue.chains.check_refs``; the job is held until that result is stored.

    Not a ``jobs.queue.submission.Submission``, on purpose: a submission is the kind's form's fields, and this
    takes the device's parameters (and a start time, a pool, sharing) that no form's fields express one to one;
    wrapping it would change what it accepts. Its admission is the same ``admit`` the form's check ends in
    (docs/development.md, "The submit path: one way in")."""
    _require_submitter(owner)
    if idempotency_key and (queued := job_already_submitted(owner=owner, idempotency_key=idempotency_key)):
        return queued
    if kind not in JobKind.values:
        raise ValidationError({"kind": f"Unknown kind {kind!r}."})
    if not model_id:
        raise ValidationError({"model_id": "Choose a model."})
    uploads, refs = chains.split_files(upload_files)
    parents = _parents(owner, refs)
    schedule = {"when": when, "not_before": not_before, "polite": polite, "shared": shared}
    asked = dict(
        owner=owner,
        kind=kind,
        model_id=model_id,
        params=params,
        when=when,
        not_before=not_before,
        polite=polite,
        lift_limits=lift_limits,
        after=chains.chained(parents) if parents else None,
    )
    # "Any device" of ``pool`` (with ``device``): those that admit it; the job starts where it is ready first.
    candidates = list(dict.fromkeys([device, *pool])) if pool else [device]
    admitted = [(d, admit(device=d, **asked)) for d in candidates]
    fit = [(d, a) for d, a in admitted if not a.refused]
    if not fit:
        admission = admitted[0][1]
        raise ValidationError({admission.refused_field or "__all__": admission.refused})
    device, admission = earliest_of(fit)
    checked = CheckedRequest(kind, model_id, params, uploads, schedule, admission, refs=refs)
    if pool:
        checked.pool = [d.pk for d, _a in fit]
    return _queue_job(owner=owner, device=device, checked=checked, idempotency_key=idempotency_key)


def _parents(owner: Any, refs: dict[str, Any]) -> dict[str, Job]:
    """``chains.check_refs`` for code with no form: its refusal as a ``ValidationError`` by field."""
    try:
        return chains.check_refs(owner=owner, refs=refs) if refs else {}
    except RequestInvalid as exc:
        raise ValidationError(exc.errors) from None


def _create_job(*, owner: Any, device: Any, checked: CheckedRequest, idempotency_key: str | None) -> Job:
    """The row, in a savepoint: losing the race on the token must not end the caller's transaction."""
    params, schedule = checked.params, checked.schedule
    when = schedule.get("when") or When.ASAP
    with transaction.atomic():
        return Job.objects.create(
            owner=owner,
            device=device,
            kind=checked.kind,
            model_id=checked.model_id,
            params=dict(params),
            prompt=next((str(params[k]) for k in PROMPT_KEYS if params.get(k)), ""),
            when=when,
            not_before=schedule.get("not_before") if when == When.NOT_BEFORE else None,
            polite=schedule.get("polite", True),
            shared=schedule.get("shared", False),
            estimate_s=checked.admission.estimate_s,
            pinned=not checked.pool,
            pool=sorted(set(checked.pool) | {device.pk}) if checked.pool else [],
            devices_allowed=checked.devices_allowed,
            last_seq=1,
            submit_token=_submit_token(owner, idempotency_key) if idempotency_key else None,
        )


def _queue_job(*, owner: Any, device: Any, checked: CheckedRequest, idempotency_key: str | None) -> Job:
    """The admitted request as a job: its row, its inputs, its first state and event; dispatch after commit."""
    estimate = checked.admission.estimate_s
    with transaction.atomic():
        try:
            job = _create_job(owner=owner, device=device, checked=checked, idempotency_key=idempotency_key)
        except IntegrityError:
            queued = job_already_submitted(owner=owner, idempotency_key=idempotency_key)
            if queued is None:
                raise
            return queued
        if checked.upload_files:
            job.params = {
                **job.params,
                "files": {**job.params.get("files", {}), **_save_uploads(job, checked.upload_files)},
            }
        snap = checked.admission.snap
        if snap is None or snap.device_id != device.pk:  # run again on another device of the pool
            snap = snapshot_for(device.pk)
        waits = opens_at(job, snap) > snap.now
        job.state = S.SCHEDULED if waits else S.QUEUED
        job.save(update_fields=["params", "state"])
        message = "Queued." if not waits else f"Waiting for its time ({job.get_when_display().lower()})."
        if checked.refs and (held := _hold(job, checked.refs)):
            message = held
        if not job.pinned:
            names = list(
                Device.objects.filter(pk__in=job.pool).order_by("name").values_list("name", flat=True)
            )
            message += f" Runs on whichever of {', '.join(names)} can finish it first."
        JobEvent.objects.create(
            job=job, seq=1, state=job.state, message=message, data={"estimate_s": round(estimate, 1)}
        )
        if lifted := checked.admission.lifted:  # an admin's lift is part of the job's story (jobs.quotas)
            job_note(job.pk, lift_message(owner, lifted), data={"quota_lifted": lifted})
        _dispatch_on_commit(device.pk)
        _replan_on_commit(device.pk)
    return job


def _submit_token(owner: Any, key: str) -> str:
    """What is stored for an idempotency key: per owner (two people's keys never collide), fixed length."""
    return hashlib.sha256(f"{getattr(owner, 'pk', owner)}:{key}".encode()).hexdigest()


def job_already_submitted(*, owner: Any, idempotency_key: str | None) -> Job | None:
    """The job ``owner`` already queued with this key (marked ``idempotent_replay``), or None."""
    if not idempotency_key:
        return None
    job = Job.objects.filter(owner=owner, submit_token=_submit_token(owner, idempotency_key)).first()
    if job is not None:
        job.idempotent_replay = True
    return job


def job_cancel(*, job: Job, by: Any, reason: str = "") -> Job:
    """Cancel a waiting job at once, or a running one (the device is told; for video the model is stopped too,
    because the device's DELETE does not stop the render). Admins may cancel anyone's job with a reason."""
    _require_manage(job, by)
    who = "an admin" if by.pk != job.owner_id else "its owner"
    why = f" Reason: {reason}" if reason else ""
    fields = {
        "cancel_reason": reason[:300],
        "finished_at": timezone.now(),
        "phase": "Cancelled",
        "next_poll_at": None,
    }
    if job_transition(
        job.pk, from_states=PENDING_STATES, to=S.CANCELLED, message=f"Cancelled by {who}.{why}", **fields
    ):
        _replan_on_commit(job.device_id)
    elif job_transition(
        job.pk, from_states=ACTIVE_STATES, to=S.CANCELLED, message=f"Cancelled by {who}.{why}", **fields
    ):
        job.refresh_from_db()
        if style_of(job.device.kind, job.kind) == "poll" and job.remote_id:
            _stop_on_device_on_commit(job.pk, job.device_id)
        # Otherwise the runner holding the call sees the cancel at its next step and frees the device itself.
        _replan_on_commit(job.device_id)
    else:
        job.refresh_from_db()
        if job.state not in (S.CANCELLED,):
            raise ValidationError("This job has already finished.")
    cancel_children(job.pk, f"job {job.pk}, whose result it waited for, was cancelled.")
    job.refresh_from_db()
    return job


def job_hide(*, job: Job, by: Any, message: str = "Deleted through the API (hidden).") -> Job:
    """A finished job deleted (``/v1``'s videos.delete): kept for fair share and the record, listed nowhere; the
    jobs still waiting for its result are cancelled, down the chain."""
    _require_manage(job, by)
    job_note(job.pk, message, hidden_at=timezone.now())
    cancel_children(job.pk, f"job {job.pk}, whose result it waited for, was deleted.")
    job.refresh_from_db()
    return job


def job_retry(*, job: Job, by: Any) -> Job:
    """Put a failed, cancelled or interrupted job back in the queue (its results so far are kept)."""
    _require_manage(job, by)
    if not by.can_submit:
        raise PermissionDenied("Viewers cannot queue jobs.")
    if job.parent_links.filter(released_at__isnull=True).exists():
        return _retry_held(job, by)
    ok = job_transition(
        job.pk,
        from_states=RETRYABLE_STATES,
        to=S.QUEUED,
        message=f"Queued again by {by.username}.",
        remote_id="",
        remote_data={},
        progress=0.0,
        phase="Waiting",
        error_code="",
        error_human="",
        error_detail="",
        finished_at=None,
        cancel_reason="",
        retry_after=None,
        submit_started_at=None,
        next_poll_at=None,
        requeues=0,
    )
    if not ok:
        job.refresh_from_db()
        if job.state not in WAITING_STATES:
            raise ValidationError("Only failed, cancelled or interrupted jobs can be retried.")
    else:
        note_parent_retried(job.pk)  # its waiting children say what they wait for again
        _dispatch_on_commit(job.device_id)
        _replan_on_commit(job.device_id)
    job.refresh_from_db()
    return job


def _retry_held(job: Job, by: Any) -> Job:
    """Retry of a child cancelled before its input came: held again for its parents (released at once from a
    parent already done); refused when a parent can't give its result any more."""
    with transaction.atomic():
        gone = chains.gone_parents(job)
        if gone:
            raise ValidationError(f"It can't run: {gone}")
        if not job_transition(
            job.pk,
            from_states=RETRYABLE_STATES,
            to=S.HELD,
            message=f"Queued again by {by.username}.",
            finished_at=None,
            cancel_reason="",
            error_code="",
            error_human="",
            phase="Waiting",
        ):
            job.refresh_from_db()
            if job.state not in PENDING_STATES:
                raise ValidationError("Only failed, cancelled or interrupted jobs can be retried.")
            return job
        chains.rehold(job.pk)
        _replan_on_commit(job.device_id)
    job.refresh_from_db()
    return job


def job_run_again(
    *, job: Job, by: Any, checked: CheckedRequest, idempotency_key: str | None = None, device: Any = None
) -> Job:
    """A new job like ``job`` (``by``'s) with the admitted request's settings; its inputs are reused, so files
    the form checked again are not saved a second time. On ``job``'s device, or, for a request checked on the
    pool (``checked.pool``), in the pool, waiting first on ``device``."""
    if not can_view(by, job):
        raise PermissionDenied("You cannot see this job.")
    again = replace(checked, params={**job.params, **checked.params}, upload_files={})
    return submit_checked(
        owner=by, device=device or job.device, checked=again, idempotency_key=idempotency_key
    )


def job_set_shared(*, job: Job, by: Any, shared: bool) -> Job:
    _require_manage(job, by)
    if job.shared != shared:
        job_note(job.pk, "Shared with the household." if shared else "No longer shared.", shared=shared)
    job.refresh_from_db()
    return job


def job_share_link(*, job: Job, by: Any, enable: bool) -> Job:
    """A read-only link to the job and its results; disabling revokes it (a new link differs)."""
    _require_manage(job, by)
    fresh = {"share_expires_at": None, "share_password": "", "share_opens": 0}  # a new link starts clean
    if enable and not job.share_token:
        job_note(job.pk, "Read-only link created.", share_token=_new_token(), **fresh)
        audit.record(audit.Action.SHARE_CREATED, actor=by, target=job, target_name=f"job {job.pk}",
                     data={"kind": job.kind, "owner": job.owner.username})  # fmt: skip
    elif not enable and job.share_token:
        job_note(job.pk, "Read-only link revoked.", share_token="", **fresh)
    job.refresh_from_db()
    return job


def job_share_link_options(
    *, job: Job, by: Any, expires: str = "keep", password: str = "", remove_password: bool = False
) -> Job:
    """Set the read-only link's expiry (``share_links.EXPIRY_CHOICES``) and password (stored hashed; blank keeps
    the one it has, ``remove_password`` takes it off). Raises ``ValidationError`` with a sentence for the page."""
    _require_manage(job, by)
    fields, notes = share_links.option_changes(
        job, expires=expires, password=password, remove_password=remove_password
    )
    if fields:
        job_note(job.pk, " ".join(notes), **fields)
    job.refresh_from_db()
    return job


def share_link_url(*, request: Any, job: Job) -> str:
    """The read-only link's full address, or "" while the job has none.

    Built on ``HUB_PUBLIC_URL`` when it is set: the address a request came in on (http://127.0.0.1:8000 on the
    hub's own machine, or the inside of a reverse proxy) is often not one the person receiving the link can open.
    """
    if not job.share_token:
        return ""
    path = reverse("jobs-public", args=[job.share_token])
    return f"{settings.HUB_PUBLIC_URL}{path}" if settings.HUB_PUBLIC_URL else request.build_absolute_uri(path)


# -- queue control (admins) -----------------------------------------------------------------------------------


def queue_pause(*, device: Any, by: Any) -> None:
    _require_admin(by)
    device_set_queue_paused(device_id=device.pk, paused=True)
    _replan_on_commit(device.pk)


def queue_resume(*, device: Any, by: Any) -> None:
    _require_admin(by)
    device_set_queue_paused(device_id=device.pk, paused=False)
    _dispatch_on_commit(device.pk)
    _replan_on_commit(device.pk)


def queue_run_next(*, job: Job, by: Any) -> None:
    """Admin "run next": this job goes before every other waiting job of its device."""
    _require_admin(by)
    top = (
        Job.objects.filter(device_id=job.device_id, state__in=WAITING_STATES).aggregate(m=Max("priority"))[
            "m"
        ]
        or 0
    )
    if not job_note(
        job.pk, f"Moved to the front by {by.username}.", only_in=WAITING_STATES, priority=top + 1
    ):
        raise ValidationError("Only waiting jobs can be moved.")
    _dispatch_on_commit(job.device_id)
    _replan_on_commit(job.device_id)


def queue_move(*, job: Job, by: Any, direction: str) -> None:
    """Admin reorder: swap with the neighbour in the current plan. The admin's order then holds (priorities
    are rewritten for the device's waiting jobs, which overrides fair share for them)."""
    _require_admin(by)
    if direction not in ("up", "down"):
        raise ValidationError("Direction must be up or down.")
    order = [j for j in queue_plan(job.device) if j.state in WAITING_STATES]
    ids = [j.pk for j in order]
    if job.pk not in ids:
        raise ValidationError("Only waiting jobs can be moved.")
    i = ids.index(job.pk)
    k = i - 1 if direction == "up" else i + 1
    if not 0 <= k < len(ids):
        return
    ids[i], ids[k] = ids[k], ids[i]
    with transaction.atomic():
        for rank, pk in enumerate(ids):
            Job.objects.filter(pk=pk, state__in=WAITING_STATES).update(priority=len(ids) - rank, bypassed=0)
        job_note(job.pk, f"Moved {direction} by {by.username}.")
    _replan_on_commit(job.device_id)


__all__ = [
    "job_cancel",
    "job_hide",
    "job_retry",
    "job_run_again",
    "job_set_shared",
    "job_share_link",
    "job_share_link_options",
    "job_submit",
    "queue_move",
    "queue_pause",
    "queue_resume",
    "queue_run_next",
    "share_link_url",
]

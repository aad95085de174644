"""Chains: a job whose file input is another job's result (``jobs.core.links.ResultRef``).

At submit (every door, through ``jobs.doors.intake.check_request`` or ``services.job_submit``):

    check_refs(owner, kind, refs)  -> parents by field, or ``RequestInvalid`` naming the field
    stand_ins(refs)                -> a small valid file per field, so the kind's form checks everything else
                                      (its "i2v needs a start image", the required picture) as for an upload

When the child is queued (``services._queue_job``, in its transaction), ``hold`` stores a ``JobLink`` per field and
holds the child (``JobState.HELD``) while a parent has no result yet; a parent already done releases it at once.

When a parent's result is stored and it becomes done (``jobs.queue.outcomes.finish_done``), ``release_children``
runs IN THE SAME TRANSACTION: each held child gets the parent's file as its input, fitted to what its device takes
(``jobs.files.fitting``), and becomes ready (queued, or scheduled for its window); dispatch follows the commit. A
worker killed between the two leaves neither done (the collect step runs again). Beat's reconcile calls
``release_ready`` as a safety net: a held child whose parents are all done is released (idempotent, CAS).
"""

from __future__ import annotations

import io
import logging
import struct
import wave
import zlib
from collections.abc import Mapping
from typing import Any

from django.core.files.uploadedfile import SimpleUploadedFile
from django.db import transaction
from django.utils import timezone

from jobs.core.links import (
    MEDIA_WORDS,
    ResultRef,
    cancel_children,
    fits,
    fitting_artifact,
    release_estimate,
    takes,
    unreleased_parents,
    waits_message,
)
from jobs.core.scheduler import opens_at, snapshot_for
from jobs.core.selectors import can_view
from jobs.core.transitions import job_note, job_transition
from jobs.files.store import save_input
from jobs.kinds import fitting
from jobs.models import HELD_STATES, Artifact, Job, JobLink, JobState
from jobs.queue import enqueue
from jobs.queue.admission import Chained, RequestInvalid

logger = logging.getLogger("jobs.queue.chains")
S = JobState
#: A parent in one of these can't give a result any more.
GONE_STATES = (S.CANCELLED,)


# -- at submit ------------------------------------------------------------------------------------------------
def split_files(files: Mapping[str, Any] | None) -> tuple[dict[str, Any], dict[str, ResultRef]]:
    """(uploads, references) of a request's files."""
    uploads, refs = {}, {}
    for name, value in (files or {}).items():
        (refs if isinstance(value, ResultRef) else uploads)[name] = value
    return uploads, refs


def _no_such(ref: ResultRef) -> str:
    return f"There is no job {ref.job_id} whose result you can use."


def _ref_problem(owner: Any, field: str, ref: ResultRef, parent: Job | None) -> str:
    """Why ``ref`` can't feed ``field`` ("" when it can). A job the owner may not see reads as one that doesn't
    exist: no leak."""
    if parent is None or not can_view(owner, parent) or parent.hidden_at is not None:
        return _no_such(ref)
    media = MEDIA_WORDS.get(takes(field)[0], "file") if takes(field) else "file"
    if not takes(field):
        return f"This field takes no result of another job ({field})."
    if not fits(parent.kind, field):
        return f"Job {parent.pk} makes {parent.get_kind_display().lower()}, not a {media}: it can't be used here."
    if parent.state in GONE_STATES:
        return f"Job {parent.pk} was cancelled: it will have no result to use."
    if parent.state == S.DONE and fitting_artifact(parent, field, ref.artifact) is None:
        if ref.artifact:
            return f"Job {parent.pk} has no {media} named “{ref.artifact[:80]}”."
        return f"Job {parent.pk} has no {media} left to use (its results were deleted)."
    return ""


def check_refs(*, owner: Any, refs: Mapping[str, ResultRef]) -> dict[str, Job]:
    """The parent of each referenced field, checked: the owner may see it, it is not cancelled or deleted, and it
    makes (or, done, has) a result the field takes. ``RequestInvalid`` naming each field otherwise."""
    errors: dict[str, list[str]] = {}
    parents: dict[str, Job] = {}
    for field, ref in refs.items():
        parent = Job.objects.filter(pk=ref.job_id).first() if _valid_id(ref.job_id) else None
        if why := _ref_problem(owner, field, ref, parent):
            errors[field] = [why]
        else:
            parents[field] = parent  # type: ignore[assignment]
    if errors:
        raise RequestInvalid(errors)
    return parents


def chained(parents: Mapping[str, Job]) -> Chained:
    """What admission plans for a child of ``parents``: released at their last predicted finish; a failed parent
    is said (the child waits for its retry)."""
    now = timezone.now()
    unique = list({p.pk: p for p in parents.values()}.values())
    warnings = [
        f"Job {p.pk} failed: this job waits until it is retried and succeeds."
        for p in unique
        if p.state in (S.FAILED, S.INTERRUPTED)
    ]
    pending = [p for p in unique if p.state != S.DONE]
    release = release_estimate(pending, now=now) if pending else now
    return Chained(release, tuple(sorted(p.pk for p in pending)), warnings)


def _valid_id(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and 0 < value < 2**63


def _png(size: int = 64) -> bytes:
    """A small grey PNG written with the standard library."""

    def chunk(tag: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + tag + data + struct.pack(">I", zlib.crc32(tag + data))

    rows = b"".join(b"\x00" + b"\x80" * size * 3 for _ in range(size))
    header = struct.pack(">IIBBBBB", size, size, 8, 2, 0, 0, 0)
    return (
        b"\x89PNG\r\n\x1a\n"
        + chunk(b"IHDR", header)
        + chunk(b"IDAT", zlib.compress(rows))
        + chunk(b"IEND", b"")
    )


def _wav(seconds: float = 1.0, rate: int = 16_000) -> bytes:
    out = io.BytesIO()
    with wave.open(out, "wb") as w:
        w.setnchannels(1)
        w.setsampwidth(2)
        w.setframerate(rate)
        w.writeframes(b"\x00\x00" * int(seconds * rate))
    return out.getvalue()


def stand_ins(refs: Mapping[str, ResultRef]) -> dict[str, Any]:
    """A small valid file for each referenced field: the kind's form checks the rest of the request as it would
    with an upload there (the referenced result itself is checked by ``check_refs`` and fitted at release)."""
    out: dict[str, Any] = {}
    for field in refs:
        if Artifact.Kind.AUDIO in takes(field):
            out[field] = SimpleUploadedFile(f"{field}.wav", _wav(), content_type="audio/wav")
        else:
            out[field] = SimpleUploadedFile(f"{field}.png", _png(), content_type="image/png")
    return out


# -- when the child is queued -----------------------------------------------------------------------------------
def hold(job: Job, refs: Mapping[str, ResultRef]) -> str:
    """Inside the child's queuing transaction: a link per referenced field; the child is held while a parent has
    no result yet, released at once from a parent already done. Returns what its first event says when it is
    held ("Waits for job 12, “a lighthouse at dusk”."), "" when it is ready. ``RequestInvalid`` when a done
    parent's result can't be this input."""
    for field, ref in refs.items():
        JobLink.objects.create(
            child=job,
            parent_id=ref.job_id,
            parent_number=ref.job_id,
            field=field,
            artifact=ref.artifact or "",
        )
    for link in JobLink.objects.filter(child=job).select_related("parent"):
        if link.parent is not None and link.parent.state == S.DONE:
            link.child = job
            try:
                _give_input(link)
            except ReleaseRefused as exc:
                raise RequestInvalid({link.field: [str(exc)]}) from None
    waiting = unreleased_parents(job.pk)
    if not waiting:
        return ""
    message = waits_message(waiting)
    job.state = S.HELD
    job.phase = message[:100]
    job.save(update_fields=["state", "phase"])
    return message


# -- release ----------------------------------------------------------------------------------------------------
class ReleaseRefused(Exception):
    """The parent's result can't become this child's input (it does not decode, or the device can't take it)."""


def _give_input(link: JobLink) -> None:
    """The parent's result, fitted to the child's device, saved as the child's input; the link marked released.
    ``ReleaseRefused`` when the result can't be used; ``OSError`` when the store fails (the child stays held)."""
    child, parent = link.child, link.parent
    artifact = fitting_artifact(parent, link.field, link.artifact or None)
    if artifact is None:
        wanted = f"“{link.artifact}”" if link.artifact else "a result it can use"
        raise ReleaseRefused(f"Job {link.parent_number} has no {wanted}.")
    try:
        upload = fitting.fit_input(child, link.field, artifact.file.name, artifact.mime)
    except fitting.Unfit as exc:
        raise ReleaseRefused(str(exc)) from None
    stored = save_input(child, link.field, upload)
    files = {**(child.params.get("files") or {}), link.field: stored}
    child.params = {**child.params, "files": files}
    Job.objects.filter(pk=child.pk).update(params=child.params)
    JobLink.objects.filter(pk=link.pk).update(released_at=timezone.now(), used=artifact.name)


def release_children(parent: Job) -> list[int]:
    """Each child held for ``parent`` gets its input; those with every input become ready. Called in the
    parent's done transaction. Returns the ids that became ready. A store failure leaves the child held for
    reconcile (``release_ready``); a result the child can't use cancels it (and its own children)."""
    ready = []
    links = JobLink.objects.filter(parent_id=parent.pk, released_at__isnull=True, child__state=S.HELD)
    for link in links.select_related("child", "parent"):
        if _release_link(link):
            ready.append(link.child_id)
    return ready


def _release_link(link: JobLink) -> bool:
    try:
        with transaction.atomic():
            _give_input(link)
    except ReleaseRefused as exc:
        _refuse(link.child, str(exc))
        return False
    except OSError:
        logger.warning("job %s: its input from job %s could not be saved yet", link.child_id, link.parent_number,
                       exc_info=True)  # fmt: skip
        return False
    return _make_ready(link.child)


def _refuse(child: Job, why: str) -> None:
    if job_transition(
        child.pk,
        from_states=HELD_STATES,
        to=S.CANCELLED,
        message=f"Cancelled: {why}",
        cancel_reason=why[:300],
        finished_at=timezone.now(),
        phase="Cancelled",
    ):
        cancel_children(child.pk, f"job {child.pk} could not use its input ({why})")


def _make_ready(child: Job) -> bool:
    """HELD → QUEUED (or SCHEDULED for its window) once no parent is awaited; dispatch and replan after commit."""
    if unreleased_parents(child.pk):
        child.refresh_from_db()
        job_note(child.pk, waits_message(unreleased_parents(child.pk)), only_in=HELD_STATES)
        return False
    snap = snapshot_for(child.device_id)
    waits = opens_at(child, snap) > snap.now
    used = ", ".join(
        f"job {link.parent_number}'s {link.used}" for link in JobLink.objects.filter(child_id=child.pk)
    )
    ok = job_transition(
        child.pk,
        from_states=HELD_STATES,
        to=S.SCHEDULED if waits else S.QUEUED,
        message=f"Ready: its input is here ({used}).",
        phase="Waiting",
    )
    if ok:
        enqueue.send_on_commit("dispatch", child.device_id, robust=True)
        for device_id in child.pool or []:
            if device_id != child.device_id:
                enqueue.send_on_commit("dispatch", device_id, robust=True)
    return ok


def release_ready() -> int:
    """Beat's safety net: every held child whose awaited parents are all done is released now (a release a
    crash or a store failure left undone), and every held child whose parent is gone is cancelled. Idempotent."""
    count = 0
    links = JobLink.objects.filter(released_at__isnull=True, child__state=S.HELD).select_related(
        "child", "parent"
    )
    for link in links.order_by("child_id"):
        parent = link.parent
        if parent is None or parent.hidden_at is not None or parent.state in GONE_STATES:
            cancel_children(link.parent_number, _gone_reason(link.parent_number, parent))
            continue
        if parent.state == S.DONE:
            with transaction.atomic():
                count += _release_link(link)
    return count


def _gone_reason(number: int, parent: Job | None) -> str:
    if parent is None or parent.hidden_at is not None:
        return f"job {number}, whose result it waited for, was deleted."
    return f"job {number}, whose result it waited for, was cancelled."


def gone_parents(child: Job) -> str:
    """Why a child can't wait for its parents again ("" when it can): a parent cancelled or deleted, or done with
    no result it can use."""
    for link in JobLink.objects.filter(child=child, released_at__isnull=True).select_related("parent"):
        parent = link.parent
        if parent is None or parent.hidden_at is not None or parent.state in GONE_STATES:
            return _gone_reason(link.parent_number, parent)
        if parent.state == S.DONE and fitting_artifact(parent, link.field, link.artifact or None) is None:
            return f"job {parent.pk} has no result left that it can use."
    return ""


def rehold(child_id: int) -> None:
    """A child held again (its retry): inputs from parents already done are given now, then it is ready or says
    what it waits for."""
    links = JobLink.objects.filter(child_id=child_id, released_at__isnull=True, parent__state=S.DONE)
    for link in links.select_related("child", "parent"):
        _release_link(link)
    if waiting := unreleased_parents(child_id):
        job_note(child_id, waits_message(waiting), only_in=HELD_STATES, phase=waits_message(waiting)[:100])
    else:
        _make_ready(Job.objects.get(pk=child_id))


__all__ = [
    "GONE_STATES",
    "ReleaseRefused",
    "chained",
    "check_refs",
    "hold",
    "release_children",
    "release_ready",
    "split_files",
    "stand_ins",
]

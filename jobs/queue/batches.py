"""Batches: several jobs submitted together, admitted all or nothing, shown and cancelled as one group.

A door (the page's batch mode, ``POST /api/jobs/batch``) hands over one ``Submission`` per member
(``jobs.queue.submission``): a batch is several submissions admitted together, each as a single submit would be
(``preview``: the kind's form and ``jobs.queue.admission``, on its device or on the pool). ``batch_submit``
runs them in order inside one transaction and queues each member as soon as it is admitted, so the next member's
admission sees the members before it as queued work: the owner's quotas count the whole batch's device time and
jobs, its plan times them after the ones before (the last member's ready time is the batch's), and "any device"
members spread over the pool (a device with members already waiting is ready later than a free one). If any member
is refused, the transaction is rolled back: nothing is queued, and ``BatchInvalid`` names every refused member.
``batch_preview`` is the same run, always rolled back (the page's summary: how many jobs, when the last is ready).

Every member carries the batch's id (``Job.batch``); ``batch_cancel`` cancels every member that may still be
cancelled, for the owner or an admin (``jobs.core.selectors.can_manage`` of every member).
"""

from __future__ import annotations

import secrets
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

from django.core.exceptions import PermissionDenied, ValidationError
from django.db import transaction

from jobs.core.selectors import can_manage
from jobs.files.store import delete
from jobs.models import ACTIVE_STATES, CANCELLABLE_STATES, WAITING_STATES, Job, JobState
from jobs.queue.admission import Admission, RequestInvalid
from jobs.queue.services import job_already_submitted, job_cancel, submit_checked
from jobs.queue.submission import Submission, preview

#: A batch's member: its submission, or why its door could not read it (refused with the batch's other refusals).
Member = Submission | RequestInvalid

#: The most jobs one batch may hold (the page and the REST API say so when a batch would be bigger).
MAX_BATCH = 50


class BatchInvalid(Exception):
    """Some members were refused: ``errors`` maps each refused member's index to its ``RequestInvalid``."""

    def __init__(self, errors: dict[int, RequestInvalid], size: int) -> None:
        self.errors = errors
        self.size = size
        first = min(errors)
        super().__init__(f"Job {first + 1} of the batch: {errors[first].summary()}")


class _RolledBack(Exception):
    """Leaves the batch's transaction so that nothing it wrote stays."""


def too_big(size: int) -> str | None:
    """Why a batch of ``size`` jobs can't be queued, or None."""
    if size < 1:
        return "A batch needs at least one job."
    if size > MAX_BATCH:
        return f"A batch holds at most {MAX_BATCH} jobs; this one would make {size}. Split it in two."
    return None


def new_batch_id() -> str:
    return secrets.token_hex(8)


def _member_key(key: str, index: int) -> str:
    """Each member's own idempotency key (a batch's key never collides with a single submit's)."""
    return f"{key}#batch#{index}"


def batch_already_submitted(*, owner: Any, idempotency_key: str | None) -> list[Job]:
    """The batch ``owner`` already queued with this key (each member marked ``idempotent_replay``), or []."""
    if not idempotency_key:
        return []
    first = job_already_submitted(owner=owner, idempotency_key=_member_key(idempotency_key, 0))
    if first is None:
        return []
    jobs = list(Job.objects.filter(owner=owner, batch=first.batch).order_by("pk")) if first.batch else [first]
    for job in jobs:
        job.idempotent_replay = True
    return jobs


def _inputs_of(jobs: list[Job]) -> list[str]:
    return [str(name) for job in jobs for name in (job.params.get("files") or {}).values()]


def _run(
    owner: Any,
    members: Sequence[Member],
    *,
    key: str | None,
    save_files: bool,
    jobs: list[Job],
) -> tuple[list[Admission], dict[int, RequestInvalid]]:
    """Admit and queue each member in turn (inside the caller's transaction), adding the jobs to ``jobs``."""
    admissions: list[Admission] = []
    errors: dict[int, RequestInvalid] = {}
    for i, member in enumerate(members):
        try:
            if isinstance(
                member, RequestInvalid
            ):  # a member its door could not read: refused with the others
                raise member
            device, checked = preview(member)
        except RequestInvalid as exc:
            errors[i] = exc
            continue
        if not save_files:
            checked = replace(checked, upload_files={})
        job = submit_checked(
            owner=owner, device=device, checked=checked, idempotency_key=_member_key(key, i) if key else None
        )
        if getattr(job, "idempotent_replay", False):  # the same batch, sent twice at once, won elsewhere
            raise _RolledBack
        job.admission = checked.admission  # what the hub expected of it at submit (its place in the batch)
        jobs.append(job)
        admissions.append(checked.admission)
    return admissions, errors


def batch_submit(*, owner: Any, members: Sequence[Member], idempotency_key: str | None = None) -> list[Job]:
    """Queue every member, or none: ``BatchInvalid`` (by member) when any is refused. The same
    ``idempotency_key`` again returns the batch it queued (each job marked ``idempotent_replay``)."""
    if not getattr(owner, "can_submit", False):
        raise PermissionDenied("Viewers can watch but not submit jobs.")
    if why := too_big(len(members)):
        raise RequestInvalid({"jobs": [why]})
    if queued := batch_already_submitted(owner=owner, idempotency_key=idempotency_key):
        return queued
    batch = new_batch_id()
    jobs: list[Job] = []
    errors: dict[int, RequestInvalid] = {}
    try:
        with transaction.atomic():
            _admissions, errors = _run(owner, members, key=idempotency_key, save_files=True, jobs=jobs)
            if errors:
                raise _RolledBack
            Job.objects.filter(pk__in=[j.pk for j in jobs]).update(batch=batch)
    except Exception as exc:  # refused, replayed, or anything else (a disk that filled up): nothing stays
        # the batch's saved inputs go too: a later job given the same number must not find them
        delete(_inputs_of(jobs))
        if errors:
            raise BatchInvalid(errors, len(members)) from None
        if isinstance(exc, _RolledBack):
            return batch_already_submitted(owner=owner, idempotency_key=idempotency_key)
        raise
    for job in jobs:
        job.batch = batch
    return jobs


@dataclass
class BatchPreview:
    """What queuing the batch now would give: each admitted member's admission, and the refused members."""

    size: int
    admissions: list[Admission]
    errors: dict[int, RequestInvalid]

    @property
    def last_ready(self) -> Any:
        times = [a.ready_at for a in self.admissions if a.ready_at is not None]
        return max(times) if times else None

    @property
    def estimate_s(self) -> float:
        return sum(a.estimate_s for a in self.admissions)


def batch_preview(*, owner: Any, members: Sequence[Member]) -> BatchPreview:
    """``batch_submit`` tried and rolled back: nothing is written, no file saved (the page's summary)."""
    result = BatchPreview(len(members), [], {})
    try:
        with transaction.atomic():
            result.admissions, result.errors = _run(owner, members, key=None, save_files=False, jobs=[])
            raise _RolledBack
    except _RolledBack:
        pass
    return result


# -- the group ------------------------------------------------------------------------------------------------


@dataclass
class BatchCounts:
    """ "batch of 6: 2 done, 1 running, 3 queued" """

    batch: str
    size: int
    counts: dict[str, int]

    @property
    def can_cancel(self) -> bool:
        return any(self.counts.get(state, 0) for state in CANCELLABLE_STATES)

    @property
    def text(self) -> str:
        parts = []
        for label, states in (
            ("done", (JobState.DONE,)),
            ("running", ACTIVE_STATES),
            ("queued", WAITING_STATES),
            ("failed", (JobState.FAILED, JobState.INTERRUPTED)),
            ("cancelled", (JobState.CANCELLED,)),
        ):
            if n := sum(self.counts.get(s, 0) for s in states):
                parts.append(f"{n} {label}")
        return f"batch of {self.size}: " + ", ".join(parts)


def batch_counts(batch_ids: Sequence[str]) -> dict[str, BatchCounts]:
    """Each batch's size and its members by state, in one query."""
    out: dict[str, BatchCounts] = {}
    ids = [b for b in dict.fromkeys(batch_ids) if b]
    for batch, state in Job.objects.filter(batch__in=ids).values_list("batch", "state"):
        group = out.setdefault(batch, BatchCounts(batch, 0, {}))
        group.size += 1
        group.counts[state] = group.counts.get(state, 0) + 1
    return out


def batch_jobs(batch: str) -> list[Job]:
    return list(Job.objects.filter(batch=batch).order_by("pk")) if batch else []


def batch_cancel(*, batch: str, by: Any, reason: str = "") -> list[Job]:
    """Cancel every member of the batch that may still be cancelled; the owner or an admin only (every member
    is checked before any is cancelled). The members, as they are after."""
    jobs = batch_jobs(batch)
    if not jobs or not all(can_manage(by, job) for job in jobs):
        raise PermissionDenied("You can only cancel your own batches.")
    with transaction.atomic():
        for job in jobs:
            if job.can_cancel:
                try:
                    job_cancel(job=job, by=by, reason=reason)
                except ValidationError:  # it finished meanwhile
                    continue
    return batch_jobs(batch)


__all__ = [
    "MAX_BATCH",
    "Member",
    "BatchCounts",
    "BatchInvalid",
    "BatchPreview",
    "batch_already_submitted",
    "batch_cancel",
    "batch_counts",
    "batch_jobs",
    "batch_preview",
    "batch_submit",
    "too_big",
]

"""Jobs that wait for another job's result (chains): the reference a file input may carry, and the links' reads.

A file input (``start_image``, ``end_image``, ``image``, ``ref_audio``) may name another job's result instead of an
upload: ``ResultRef(job_id, artifact)``. Every door and the queue take it the same way (``jobs.queue.chains``
checks it at submit, stores a ``JobLink`` per field and holds the child in ``JobState.HELD`` until its parent's
result is stored, then releases it in the same transaction).

What lives here (low, so doors, queue, files and quotas can all use it): the value, which media each field takes
and which a kind produces, and the reads and the one cascade that need no device and no file: ``cancel_children``
(a parent cancelled, hidden or its results deleted: its waiting children are cancelled, down the chain).
"""

from __future__ import annotations

import datetime as dt
import logging
from dataclasses import dataclass
from typing import Any

from django.db import transaction
from django.utils import timezone

from jobs.core.transitions import job_note, job_transition
from jobs.models import ACTIVE_STATES, PENDING_STATES, Artifact, Job, JobKind, JobLink, JobState

logger = logging.getLogger("jobs")


@dataclass(frozen=True)
class ResultRef:
    """Another job's result used as a file input: job ``job_id``'s artifact named ``artifact``, or (None) its
    first result that fits the field (an image for an image field, a recording for ``ref_audio``)."""

    job_id: int
    artifact: str | None = None

    def __str__(self) -> str:
        return f"job {self.job_id}" + (f" ({self.artifact})" if self.artifact else "")


@dataclass(frozen=True)
class StepRef:
    """In a chain queued in one go (``jobs.doors.intake.submit_chain``): the result of its step ``step`` (0-based,
    an earlier one), ``artifact`` as in ``ResultRef``."""

    step: int
    artifact: str | None = None


#: What each file input takes: the artifact kinds that fit it.
FIELD_MEDIA: dict[str, tuple[str, ...]] = {
    "start_image": (Artifact.Kind.IMAGE,),
    "end_image": (Artifact.Kind.IMAGE,),
    "image": (Artifact.Kind.IMAGE,),
    "ref_audio": (Artifact.Kind.AUDIO,),
}
#: What each kind of job produces (its results' kinds; thumbnails and sidecars are not results to feed on).
PRODUCES: dict[str, tuple[str, ...]] = {
    JobKind.IMAGE: (Artifact.Kind.IMAGE,),
    JobKind.VIDEO: (Artifact.Kind.VIDEO,),
    JobKind.MESH: (Artifact.Kind.MESH,),
    JobKind.MUSIC: (Artifact.Kind.AUDIO,),
    JobKind.SPEECH: (Artifact.Kind.AUDIO,),
}
#: How a field's media is named in messages.
MEDIA_WORDS = {Artifact.Kind.IMAGE: "picture", Artifact.Kind.AUDIO: "recording"}


def takes(field: str) -> tuple[str, ...]:
    """The artifact kinds ``field`` takes (none for a field that is not a file input)."""
    return FIELD_MEDIA.get(field, ())


def fits(kind: str, field: str) -> bool:
    """Whether a job of ``kind`` produces something ``field`` takes."""
    return bool(set(PRODUCES.get(kind, ())) & set(takes(field)))


def fitting_artifact(parent: Job, field: str, name: str | None = None) -> Artifact | None:
    """The parent's result ``field`` takes: ``name`` if given (and of a fitting kind), else its first that fits."""
    rows = Artifact.objects.filter(job_id=parent.pk, kind__in=takes(field)).order_by("id")
    if name:
        rows = rows.filter(name=name)
    return rows.first()


def job_title(job: Job, limit: int = 60) -> str:
    """ "job 12, “a lighthouse at dusk”" (the prompt cut to ``limit``; just "job 12" without one)."""
    text = " ".join((job.prompt or "").split())
    if not text:
        return f"job {job.pk}"
    return f"job {job.pk}, “{text[:limit]}…”" if len(text) > limit else f"job {job.pk}, “{text}”"


def waits_message(parents: list[Job]) -> str:
    """ "Waits for job 12, “a lighthouse at dusk”." (every unreleased parent, in order)."""
    return "Waits for " + " and ".join(job_title(p) for p in parents) + "."


# -- reads -------------------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Link:
    """One edge as the pages and the API show it: the other job's id, the field it feeds, the artifact."""

    job_id: int | None
    field: str
    artifact: str
    released: bool


def parents_of(job: Job | int) -> list[Link]:
    """The jobs whose results ``job`` takes as inputs (a deleted parent's id is kept)."""
    pk = getattr(job, "pk", job)
    return [
        Link(link.parent_number, link.field, link.used or link.artifact, link.released_at is not None)
        for link in JobLink.objects.filter(child_id=pk).order_by("field")
    ]


def children_of(job: Job | int) -> list[Link]:
    """The jobs that take ``job``'s results as inputs."""
    pk = getattr(job, "pk", job)
    return [
        Link(link.child_id, link.field, link.used or link.artifact, link.released_at is not None)
        for link in JobLink.objects.filter(parent_id=pk).order_by("child_id", "field")
    ]


def unreleased_parents(child_id: int) -> list[Job]:
    """The parents ``child_id`` still waits for (those whose result it has not been given yet)."""
    ids = JobLink.objects.filter(child_id=child_id, released_at__isnull=True).values_list(
        "parent_id", flat=True
    )
    return list(Job.objects.filter(pk__in=[i for i in ids if i is not None]).order_by("pk"))


def release_estimate(parents: list[Job], *, now: dt.datetime) -> dt.datetime | None:
    """When a child of ``parents`` may be released by the plans: the last of their predicted finishes (now for
    one done; for one not planned yet, now and its estimate). None while a parent has failed or was cancelled (it
    waits for a retry nobody has planned)."""
    out = now
    for parent in parents:
        if parent.state == JobState.DONE:
            continue
        if parent.state not in PENDING_STATES + ACTIVE_STATES:
            return None
        finish = parent.predicted_finish or now + dt.timedelta(seconds=float(parent.estimate_s or 0.0))
        out = max(out, finish)
    return out


def held_on(
    device_ids: list[int] | set[int] | None, *, now: dt.datetime, pinned: bool | None = None
) -> list[Job]:
    """The held jobs waiting in these devices' lanes that the plans can place, each with ``release_at`` (its
    parents' last predicted finish: ``opens_at`` holds it until then) and ``parent_ids`` (the jobs it waits for;
    the planner moves its release to where it places them). A child whose parent failed is left out: nothing
    says when it will run. ``device_ids`` None: every lane; ``pinned`` narrows them to the pinned ones or the
    pool's."""
    rows = Job.objects.filter(state=JobState.HELD).order_by()
    if device_ids is not None:
        rows = rows.filter(device_id__in=list(device_ids))
    if pinned is not None:
        rows = rows.filter(pinned=pinned)
    held = list(rows.select_related("owner"))
    if not held:
        return []
    links = JobLink.objects.filter(child__in=held, released_at__isnull=True).values_list(
        "child_id", "parent_id"
    )
    waits: dict[int, list[int]] = {}
    for child_id, parent_id in links:
        if parent_id is not None:
            waits.setdefault(child_id, []).append(parent_id)
    parents = Job.objects.in_bulk({pk for ids in waits.values() for pk in ids})
    out = []
    for job in held:
        ids = sorted(waits.get(job.pk, []))
        release = release_estimate([parents[pk] for pk in ids if pk in parents], now=now) if ids else now
        if release is None:
            continue
        job.release_at, job.parent_ids = release, ids
        out.append(job)
    return out


# -- the cascade ---------------------------------------------------------------------------------------------------
def cancel_children(parent_id: int, reason: str) -> list[int]:
    """Cancel every child still waiting for ``parent_id``'s result, and theirs, down the chain, each with
    ``reason``. Idempotent (a CAS from ``HELD``); returns the ids cancelled. A child already released (it has its
    input) runs on: the parent's result it took is its own copy."""
    done: list[int] = []
    todo = [(parent_id, reason)]
    with transaction.atomic():
        while todo:
            pid, why = todo.pop()
            held = JobLink.objects.filter(
                parent_id=pid, released_at__isnull=True, child__state=JobState.HELD
            ).values_list("child_id", flat=True)
            for child_id in sorted(set(held)):
                if _cancel_held(child_id, why):
                    done.append(child_id)
                    todo.append((child_id, f"Job {child_id}, which it waited for, was cancelled: {why}"))
    return done


def _cancel_held(child_id: int, why: str) -> bool:
    return job_transition(
        child_id,
        from_states=[JobState.HELD],
        to=JobState.CANCELLED,
        message=f"Cancelled: {why}",
        cancel_reason=why[:300],
        finished_at=timezone.now(),
        phase="Cancelled",
    )


def note_parent_failed(parent: Job) -> None:
    """A parent failed: each child still waiting for it keeps waiting, and says why (a retry that succeeds
    releases it)."""
    why = parent.error_human or "it failed"
    for child_id in JobLink.objects.filter(
        parent_id=parent.pk, released_at__isnull=True, child__state=JobState.HELD
    ).values_list("child_id", flat=True):
        job_note(
            child_id,
            f"Job {parent.pk}, which it waits for, failed ({why.rstrip('.')}). It keeps waiting: if that job "
            "is retried and succeeds, this one runs.",
            only_in=[JobState.HELD],
            phase=f"Waits: job {parent.pk} failed"[:100],
        )


def note_parent_retried(parent_id: int) -> None:
    """A parent queued again: each child still waiting for it says what it waits for again."""
    for child_id in JobLink.objects.filter(
        parent_id=parent_id, released_at__isnull=True, child__state=JobState.HELD
    ).values_list("child_id", flat=True):
        message = waits_message(unreleased_parents(child_id))
        job_note(child_id, f"Job {parent_id} was queued again. {message}", only_in=[JobState.HELD],
                 phase=message[:100])  # fmt: skip


def describe(value: Any) -> str:
    """How a file input's value is named in messages: a reference as "job 12", an upload by its name."""
    if isinstance(value, ResultRef):
        return str(value)
    return str(getattr(value, "name", "") or "the file")


__all__ = [
    "FIELD_MEDIA",
    "Link",
    "MEDIA_WORDS",
    "PRODUCES",
    "ResultRef",
    "StepRef",
    "cancel_children",
    "children_of",
    "describe",
    "fits",
    "fitting_artifact",
    "held_on",
    "release_estimate",
    "job_title",
    "note_parent_failed",
    "note_parent_retried",
    "parents_of",
    "takes",
    "unreleased_parents",
    "waits_message",
]

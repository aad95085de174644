"""Chains at the doors: a JSON body's file field naming another job's result, and a whole chain queued in one go.

    REST ``POST /api/jobs`` / ``/v1`` ``extra_body``   {"start_image": {"from_job": 12}} → result_refs → ResultRef
    the new-job form's "then animate it" steps         submit_chain([ChainStep, …]) → ChainQueued (all or nothing)

Each step goes the one way every request goes: one ``Submission`` to ``jobs.queue.submission.submit`` (on its
device, or the pool's for any capable device); the references are checked and the children held and released by
``jobs.queue.chains``.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from dataclasses import field as _field
from typing import Any

from django.core.exceptions import PermissionDenied
from django.db import transaction

from devices.models import Device
from jobs.core.links import ResultRef, StepRef
from jobs.doors.intake import already_queued, with_defaults
from jobs.models import Job
from jobs.queue.admission import Admission, RequestInvalid
from jobs.queue.submission import Submission, submit


def _require_submitter(owner: Any) -> None:
    if not getattr(owner, "can_submit", False):
        raise PermissionDenied("Viewers can watch but not submit jobs.")


#: A JSON body's file field that takes another job's result: ``{"from_job": 12, "artifact": "image-1.png"}``.
FROM_JOB = "from_job"


def result_refs(data: dict[str, Any], fields: Iterable[str]) -> dict[str, ResultRef]:
    """The file fields of a JSON body that name another job's result, taken out of ``data``: ``{"from_job": <id>,
    "artifact": "<name>"}`` (``artifact`` optional: the job's first result that fits). ``RequestInvalid`` naming
    the field for any other shape. (REST's ``POST /api/jobs`` and ``/v1``'s ``extra_body``.)"""
    refs: dict[str, ResultRef] = {}
    errors: dict[str, list[str]] = {}
    for name in [k for k in fields if isinstance(data.get(k), dict)]:
        value = data.pop(name)
        job_id, artifact = value.get(FROM_JOB), value.get("artifact")
        extra = sorted(set(value) - {FROM_JOB, "artifact"})
        if extra:
            errors[name] = [
                f'Unknown key {extra[0][:40]!r}: give {{"from_job": <job id>, "artifact": "<name>"}}.'
            ]
        elif isinstance(job_id, bool) or not isinstance(job_id, int) or not 0 < job_id < 2**63:
            errors[name] = ["“from_job” must be a job's id (a positive whole number)."]
        elif artifact is not None and (not isinstance(artifact, str) or not 0 < len(artifact) <= 200):
            errors[name] = [
                "“artifact” must be the name of one of that job's results (at most 200 characters)."
            ]
        else:
            refs[name] = ResultRef(job_id, artifact)
    if errors:
        raise RequestInvalid(errors)
    return refs


# -- a chain queued in one go --------------------------------------------------------------------------------------
@dataclass
class ChainStep:
    """One step of a chain: a kind, its form's fields (those left out take the form's defaults), its files (uploads, ``ResultRef`` to an existing job's
    result, or ``StepRef`` to an earlier step's), and the device (None: any capable device, the pool)."""

    kind: str
    data: Mapping[str, Any]
    files: Mapping[str, Any] = _field(default_factory=dict)
    device: Device | None = None


@dataclass
class ChainQueued:
    """A chain as queued: its jobs and admissions in step order, and when its last step is expected."""

    jobs: list[Job]
    admissions: list[Admission]

    @property
    def ready_at(self) -> Any:
        return self.admissions[-1].ready_at if self.admissions else None


class ChainRefused(RequestInvalid):
    """A step of a chain refused (``step``, 0-based; ``errors`` by that step's field): nothing was queued."""

    def __init__(self, step: int, exc: RequestInvalid) -> None:
        self.step = step
        super().__init__(exc.errors)

    def summary(self) -> str:
        return f"Step {self.step + 1}: {super().summary()}"


def _step_files(step: ChainStep, index: int, jobs: list[Job]) -> dict[str, Any]:
    """The step's files with each ``StepRef`` made a ``ResultRef`` to the job queued for that earlier step."""
    out: dict[str, Any] = {}
    for name, value in (step.files or {}).items():
        if isinstance(value, StepRef):
            if not 0 <= value.step < index:
                raise RequestInvalid(
                    {name: [f"A step can only use the result of an earlier step (steps 1 to {index})."]}
                )
            value = ResultRef(jobs[value.step].pk, value.artifact)
        out[name] = value
    return out


def submit_chain(*, owner: Any, steps: list[ChainStep], idempotency_key: str | None = None) -> ChainQueued:
    """Queue a whole chain at once, all or nothing ("an image, then animate it, then make 3D of it"): each step
    checked and admitted as its door would (one ``Submission`` each, on its device or the pool), a step's
    file may be an earlier step's result (``StepRef``); the later steps are held until their parents' results
    are stored. Admission plans each step after the one it waits for, and counts the steps queued before it
    against the owner's quotas, so the whole chain is. ``ChainRefused`` (the step and its fields) when any step is
    refused: nothing is queued. The same ``idempotency_key`` again returns the chain it queued."""
    _require_submitter(owner)
    if not steps:
        raise RequestInvalid({"__all__": ["A chain needs at least one step."]})
    if idempotency_key and (first := already_queued(owner, f"{idempotency_key}#0")) is not None:
        jobs = [already_queued(owner, f"{idempotency_key}#{i}") for i in range(len(steps))]
        return ChainQueued([j for j in jobs if j is not None] or [first], [])
    jobs: list[Job] = []
    admissions: list[Admission] = []
    with transaction.atomic():
        for index, step in enumerate(steps):
            try:
                job, admission = _queue_step(owner, step, index, jobs, idempotency_key)
            except RequestInvalid as exc:
                raise ChainRefused(index, exc) from None
            jobs.append(job)
            admissions.append(admission)
    return ChainQueued(jobs, admissions)


def _queue_step(
    owner: Any, step: ChainStep, index: int, jobs: list[Job], key: str | None
) -> tuple[Job, Admission]:
    files = _step_files(step, index, jobs)

    def fields_on(on: Device) -> tuple[Mapping[str, Any], Mapping[str, Any]]:
        """The step's fields on ``on``'s form, those left out taking its defaults (as the page pre-fills them)."""
        return with_defaults(owner=owner, device=on, kind=step.kind, data=dict(step.data), files=files), files

    token = f"{key}#{index}" if key else None
    job = submit(
        Submission(owner, step.kind, {}, files, device=step.device, fields_on=fields_on, token=token)
    )
    # Its expected times, for the admission of the steps after it (the plan after commit replaces them).
    job.predicted_start, job.predicted_finish = job.admission.starts_at, job.admission.ready_at
    Job.objects.filter(pk=job.pk).update(
        predicted_start=job.predicted_start, predicted_finish=job.predicted_finish
    )
    return job, job.admission


__all__ = ["FROM_JOB", "ChainQueued", "ChainRefused", "ChainStep", "StepRef", "result_refs", "submit_chain"]

"""Admission: the one place that decides whether a request may join a device's queue, and what to expect.

Every door goes through here: the submit page (``jobs.doors.views``), the REST API (``jobs.doors.api``), the OpenAI-style
``/v1`` routes (``jobs.doors.v1``), and ``jobs.queue.services.job_submit`` itself, which refuses whatever ``admit``
refuses. The checks are against what the device reports (its capabilities), so a person learns at submit time,
not at 3 a.m.

    admit(...)           -> Admission      estimate, predicted start/ready, warnings, or a refusal
    check_request(...)   -> CheckedRequest raw fields (a form's names) validated through the kind's form, then admit
    submit_request(...)  -> (Job, Admission)
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from django.core.exceptions import PermissionDenied
from django.utils import timezone

from jobs.models import MAX_NOT_BEFORE, JobKind, When


@dataclass
class Admission:
    """What the hub expects if the request is queued now."""

    estimate_s: float
    starts_at: dt.datetime | None
    ready_at: dt.datetime | None
    warnings: list[str] = field(default_factory=list)
    refused: str | None = None
    refused_field: str | None = None
    usage: str = ""  # the owner's limits and usage ("Today 12 of 60 device minutes"), "" without limits
    lifted: list[str] = field(
        default_factory=list
    )  # limits an admin lifted for this job (``jobs.quotas.services``)


class RequestInvalid(Exception):
    """A request that can't be queued: messages by field (the form's names; ``__all__`` for the whole)."""

    def __init__(self, errors: Mapping[str, list[str]]) -> None:
        self.errors = {k: [str(m) for m in v] for k, v in errors.items() if v}
        super().__init__(self.summary())

    def first(self) -> tuple[str | None, str]:
        name, messages = next(iter(self.errors.items()), ("__all__", ["The request is not valid."]))
        return (None if name == "__all__" else name), messages[0]

    def summary(self) -> str:
        parts = []
        for name, messages in self.errors.items():
            text = " ".join(messages)
            parts.append(text if name == "__all__" else f"{name}: {text}")
        return " ".join(parts) or "The request is not valid."


@dataclass
class _Probe:
    """A not-yet-saved job as the scheduler and the planner see it: it sorts after every job already waiting."""

    kind: str
    model_id: str
    params: dict[str, Any]
    when: str
    not_before: dt.datetime | None
    polite: bool
    owner_id: int | None
    created: dt.datetime
    estimate_s: float
    priority: int = 0
    retry_after: dt.datetime | None = None
    bypassed: int = 0
    pk: int = 2**62
    shared: bool = False


def _refusal(device: Any, kind: str, model_id: str, estimate_s: float) -> tuple[str | None, str | None]:
    from jobs.kinds.table import spec_for

    limit = spec_for(device.kind, kind).estimate
    if limit.refuse_over_s is not None and estimate_s > limit.refuse_over_s:
        return (
            f"This render would take about {estimate_s / 60:.0f} minutes; {limit.refuse_why}, so the hub "
            f"refuses anything over {limit.refuse_over_s / 60:.0f} minutes. "
            "Choose a smaller size, fewer seconds or fewer steps.",
            None,
        )
    return None, None


def admit(
    *,
    owner: Any,
    device: Any,
    kind: str,
    model_id: str,
    params: dict[str, Any],
    when: str = When.ASAP,
    not_before: dt.datetime | None = None,
    polite: bool = True,
    lift_limits: bool = False,
) -> Admission:
    """Estimate, predicted start and ready times, warnings, and a refusal (with the field it concerns).

    The owner's quotas are part of it (``jobs.quotas.services.quota_check``): over a limit is a refusal naming the limit,
    the usage and when it frees up, unless an admin lifts the limits for this job (``lift_limits``)."""
    from jobs.core.scheduler import blocked_reason, polite_blocked, snapshot_for
    from jobs.kinds.table import spec_for
    from jobs.queue import eta

    try:
        spec_for(device.kind, kind)
    except ValueError as exc:
        return Admission(0.0, None, None, refused=str(exc), refused_field="kind")
    now = timezone.now()
    if when not in When.values:
        return Admission(0.0, None, None, refused=f"Unknown choice {when!r}.", refused_field="when")
    if when == When.NOT_BEFORE:
        if not not_before:
            return Admission(
                0.0, None, None, refused="Give the time the job may start.", refused_field="not_before"
            )
        if not_before > now + MAX_NOT_BEFORE:
            return Admission(
                0.0,
                None,
                None,
                refused=f"Choose a time within the next {MAX_NOT_BEFORE.days} days.",
                refused_field="not_before",
            )
    est = eta.estimate(
        device_id=device.pk, device_kind=device.kind, kind=kind, model_id=model_id, params=params
    )
    refused, refused_field = _refusal(device, kind, model_id, est)
    from jobs.quotas.services import LIFT_ADMINS_ONLY, quota_check

    if lift_limits and not getattr(owner, "is_admin", False) and refused is None:
        refused, refused_field = LIFT_ADMINS_ONLY, "lift_limits"
    quota = quota_check(owner=owner, estimate_s=est, lift=lift_limits, now=now)
    if refused is None and quota.refused:
        refused, refused_field = quota.refused, "__all__"  # the request as a whole, not one of its fields

    snap = snapshot_for(device.pk, now=now)
    probe = _Probe(
        kind=kind,
        model_id=model_id,
        params=params,
        when=when,
        not_before=not_before if when == When.NOT_BEFORE else None,
        polite=polite,
        owner_id=getattr(owner, "pk", None),
        created=now,
        estimate_s=est,
    )
    warnings: list[str] = []
    if reason := blocked_reason(snap):
        warnings.append(f"{reason} The job will wait until that changes.")
    if model_id not in snap.loaded:
        warnings.append("The model is not loaded yet; loading it adds a little time.")
    if polite_blocked(probe, snap):
        warnings.append(
            "Loading this model by day would unload a model someone else is using; with "
            "“Polite” on, the job waits for the night window."
        )
    starts = ready = None
    for job, start, finish in eta.plan(device.pk, now=now, extra=probe):
        if job is probe:
            starts, ready = start, finish
    if quota.lifted and refused is None:
        warnings.extend(f"Over a limit, lifted for this job: {why}" for why in quota.lifted)
    return Admission(
        estimate_s=est,
        starts_at=starts,
        ready_at=ready,
        warnings=warnings,
        refused=refused,
        refused_field=refused_field,
        usage=quota.line,
        lifted=quota.lifted if refused is None else [],
    )


# -- raw requests (the API doors) and the page's form, one path -------------------------------------------------


@dataclass
class CheckedRequest:
    kind: str
    model_id: str
    params: dict[str, Any]
    upload_files: dict[str, Any]
    schedule: dict[
        str, Any
    ]  # when, not_before, polite, shared, an admin's lift_limits (job_submit's keywords)
    admission: Admission


def _require_submitter(owner: Any) -> None:
    if not getattr(owner, "can_submit", False):
        raise PermissionDenied("Viewers can watch but not submit jobs.")


def form_for(*, owner: Any, device: Any, kind: str, data: Mapping[str, Any] | None, files: Any = None):
    """The kind's form for this device, bound to ``data``; ``RequestInvalid`` for a kind it can't run."""
    from jobs.kinds.table import spec_for

    if kind not in JobKind.values:
        raise RequestInvalid({"kind": [f"Unknown kind {kind!r}; choose one of {', '.join(JobKind.values)}."]})
    try:
        spec = spec_for(device.kind, kind)
    except ValueError as exc:
        raise RequestInvalid({"kind": [str(exc)]}) from None
    return spec.form(data, files, device=device, user=owner)


def resolve_model(*, owner: Any, device: Any, kind: str, value: Any) -> Any:
    """The device's own model id for what a script typed: the id itself, or its name without the publisher
    ("MiniMax-H3-Turbo", any case) when exactly one of the models this device offers for the kind has it."""
    if not isinstance(value, str) or not value:
        return value
    offered = form_for(owner=owner, device=device, kind=kind, data=None).fields["model"].choices
    ids = [choice for choice, _label in offered]
    if value in ids:
        return value
    name = value.rsplit("/", 1)[-1].casefold()
    matches = [i for i in ids if i.rsplit("/", 1)[-1].casefold() == name]
    return matches[0] if len(matches) == 1 else value


def form_admission(form: Any) -> Admission:
    """``admit`` for what a (cleaned) form holds: the summary under the submit form and the decision alike."""
    schedule = form.schedule()
    return admit(
        owner=form.user,
        device=form.device,
        kind=form.kind,
        model_id=form.cleaned_data["model"],
        params=form.cleaned_params(),
        when=schedule["when"],
        not_before=schedule["not_before"],
        polite=schedule["polite"],
        lift_limits=bool(form.cleaned_data.get("lift_limits")),
    )


def check_form(form: Any) -> CheckedRequest:
    """A bound form's request, validated and admitted; ``RequestInvalid`` with the form's messages otherwise."""
    if not form.is_valid():
        raise RequestInvalid({name: list(errs) for name, errs in form.errors.items()})
    schedule = form.schedule()
    params = form.cleaned_params()
    model_id = form.cleaned_data["model"]
    admission = form_admission(form)
    if admission.refused:
        raise RequestInvalid({admission.refused_field or "__all__": [admission.refused]})
    return CheckedRequest(
        kind=str(form.kind),
        model_id=model_id,
        params=params,
        upload_files=form.upload_files(),
        schedule=schedule,
        admission=admission,
    )


def check_request(
    *, owner: Any, device: Any, kind: str, data: Mapping[str, Any], files: Mapping[str, Any] | None = None
) -> CheckedRequest:
    """Validate raw fields (the page form's names) through the same form the page uses, then admit them.

    Fields the API caller leaves out take the form's defaults: ``when`` is "asap" and ``polite`` is on.
    """
    _require_submitter(owner)
    data = dict(data)
    data.setdefault("when", When.ASAP)
    data.setdefault("polite", True)
    if data["polite"] in (False, "false", "False", "0", 0, "off", ""):
        data.pop("polite")  # a checkbox that isn't ticked is simply absent
    if data.get("lift_limits") not in (None, False, "false", "False", "0", 0, "off", "") and not getattr(
        owner, "is_admin", False
    ):
        from jobs.quotas.services import LIFT_ADMINS_ONLY

        raise RequestInvalid({"lift_limits": [LIFT_ADMINS_ONLY]})
    if "model" in data:
        data["model"] = resolve_model(owner=owner, device=device, kind=kind, value=data["model"])
    form = form_for(owner=owner, device=device, kind=kind, data=data, files=files or {})
    return check_form(form)


def submit_checked(*, owner: Any, device: Any, checked: CheckedRequest, idempotency_key: str | None = None):
    """Queue a checked request; the same ``idempotency_key`` again returns the job it queued (see job_submit)."""
    from jobs.queue.services import job_submit

    return job_submit(
        owner=owner,
        device=device,
        kind=checked.kind,
        model_id=checked.model_id,
        params=checked.params,
        upload_files=checked.upload_files,
        idempotency_key=idempotency_key,
        **checked.schedule,
    )


def submit_request(
    *,
    owner: Any,
    device: Any,
    kind: str,
    data: Mapping[str, Any],
    files: Mapping[str, Any] | None = None,
    idempotency_key: str | None = None,
):
    """``check_request`` then queue it: (job, admission). Raises ``RequestInvalid`` or ``PermissionDenied``.
    The same ``idempotency_key`` again (a script's retry) returns the job it queued instead of a second one."""
    checked = check_request(owner=owner, device=device, kind=kind, data=data, files=files)
    job = submit_checked(owner=owner, device=device, checked=checked, idempotency_key=idempotency_key)
    return job, checked.admission


__all__ = [
    "MAX_NOT_BEFORE",
    "Admission",
    "CheckedRequest",
    "RequestInvalid",
    "admit",
    "check_form",
    "check_request",
    "form_admission",
    "form_for",
    "submit_checked",
    "submit_request",
]

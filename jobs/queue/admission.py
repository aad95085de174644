"""Admission: the one place that decides whether a request may join a device's queue, and what to expect.

Every door comes here once per submission and candidate device, through the one way in
(``jobs.queue.submission``): the door builds a ``Submission``, ``preview`` binds it to the kind's form and
``check_form`` admits it, and the admitted request (``CheckedRequest``) goes to
``jobs.queue.services.submit_checked``, which queues it without asking
again. The checks are against what the device reports (its capabilities), so a person learns at submit time, not
at 3 a.m.

Why services import admission and never the other way round: admission only reads (the estimate, the plan, the
owner's quotas) and decides; services write. The writer depends on the decision, so ``services.job_submit`` (the
way in for code with no form: scripts, the engine's tests) admits once and queues, and nothing here queues a job.

    admit(...)         -> Admission       estimate, predicted start/ready, warnings, or a refusal
    form_admission(f)  -> Admission       ``admit`` for what a cleaned form holds (the summary under the page form)
    check_form(f)      -> CheckedRequest  a bound form validated and admitted; ``RequestInvalid`` otherwise
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from django.urls import reverse
from django.utils import timezone

from hub.accounts.groups import allowance_for, refusal_word
from hub.disk import disk_space, low_space
from jobs.core.scheduler import DeviceSnapshot, blocked_reason, polite_blocked, snapshot_for
from jobs.kinds.table import KindSpec, spec_for
from jobs.models import MAX_NOT_BEFORE, JobKind, When
from jobs.queue import eta
from jobs.quotas.services import LIFT_ADMINS_ONLY, Verdict, quota_check


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
    #: limits an admin lifted for this job (``jobs.quotas.services``)
    lifted: list[str] = field(default_factory=list)
    #: why the device may not start work now (away, paused: ``blocked_reason``); "" when it may
    blocked: str = ""
    #: the device's scheduling facts admission planned with (``snapshot_for``): the queue reuses them for the job's
    #: first state instead of reading the device again (one look at a device per submission)
    snap: DeviceSnapshot | None = field(default=None, repr=False, compare=False)


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


@dataclass(frozen=True)
class Chained:
    """What admission knows of a chain's child: when its parents are expected to finish (None: not known, e.g.
    a parent failed and waits for a retry), which they are, and what to tell the person about them."""

    release_at: dt.datetime | None
    parent_ids: tuple[int, ...]
    warnings: list[str] = field(default_factory=list)


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
    #: a chain's child: its parents' last predicted finish, and which they are (``jobs.core.links.held_on``)
    release_at: dt.datetime | None = None
    parent_ids: tuple[int, ...] | None = None


def _refused(why: str, field_name: str) -> Admission:
    """A refusal before anything is estimated (an unknown pair, a choice or a time that can't be)."""
    return Admission(0.0, None, None, refused=why, refused_field=field_name)


def group_refusal(*, owner: Any, device: Any, kind: str, model_id: Any) -> tuple[str, str] | None:
    """What the person's groups don't let them use in this request, by name, with the field it concerns: the kind,
    the model, then the device ("Your group may not use MiniMax-H3-Turbo."); None when they may
    (``hub.accounts.groups``: the stricter of their groups wins). The one check of the rule: ``admit`` and
    ``check_form`` (before the form, whose model choices leave such a model out) ask it."""
    allowance = allowance_for(owner)
    if not allowance.limited:
        return None
    if kind and not allowance.kind_ok(kind):
        label = JobKind(kind).label.lower() if kind in JobKind.values else repr(kind)
        return f"Your group may not use {label} jobs.", "kind"
    if isinstance(model_id, str) and model_id and not allowance.model_ok(model_id):
        return f"Your group may not use {refusal_word(model_id)}.", "model"
    if device is not None and not allowance.device_ok(device.pk):
        return f"Your group may not use {device.name}.", "device"
    return None


def _schedule_refusal(when: str, not_before: dt.datetime | None, now: dt.datetime) -> Admission | None:
    """``when`` and ``not_before`` as the request gives them: a refusal naming the field, or None."""
    if when not in When.values:
        return _refused(f"Unknown choice {when!r}.", "when")
    if when != When.NOT_BEFORE:
        return None
    if not not_before:
        return _refused("Give the time the job may start.", "not_before")
    if not_before > now + MAX_NOT_BEFORE:
        return _refused(f"Choose a time within the next {MAX_NOT_BEFORE.days} days.", "not_before")
    return None


def _disk_refusal() -> Admission | None:
    """Below ``HUB_MIN_FREE_MB`` free under the results' folder: no new render (its result would have nowhere to
    go). Jobs already queued keep their place; a download that finds the disk full waits for space."""
    space = low_space()
    if space is None:
        return None
    return _refused(
        f"The hub's disk is nearly full: {space.free_text} free, and new renders need at least "
        f"{space.minimum_text}. {what_to_delete()}",
        "__all__",
    )


def what_to_delete() -> str:
    return (
        f"Delete results you no longer need on the Usage page ({reverse('usage')}), or ask an admin to free "
        "space on the hub's machine, then try again."
    )


def uploads_refused(exc: OSError) -> RequestInvalid:
    """The request's files found the disk full while they were saved (no floor, or files bigger than the room
    above it): the request is refused as a whole, nothing queued."""
    try:
        free = disk_space().free_text
    except OSError:
        free = "too little"
    return RequestInvalid(
        {
            "__all__": [
                f"The hub's disk is full ({exc.strerror or exc}; {free} free): the files could not be "
                f"saved. {what_to_delete()}"
            ]
        }
    )


def _limit_refusal(spec: KindSpec, estimate_s: float) -> str | None:
    """The pair's hard limit (the device would cut the render off), or None."""
    limit = spec.estimate
    if limit.refuse_over_s is None or estimate_s <= limit.refuse_over_s:
        return None
    return (
        f"This render would take about {estimate_s / 60:.0f} minutes; {limit.refuse_why}, so the hub "
        f"refuses anything over {limit.refuse_over_s / 60:.0f} minutes. "
        "Choose a smaller size, fewer seconds or fewer steps."
    )


def limit_refusal(*, device: Any, kind: str, model_id: str, params: dict[str, Any]) -> str | None:
    """The pair's hard limit for this request on ``device`` (its own estimate there), or None: what a device
    joining a waiting job's pool must pass besides its form (``jobs.queue.membership``)."""
    est = eta.estimate(
        device_id=device.pk, device_kind=device.kind, kind=kind, model_id=model_id, params=params
    )
    return _limit_refusal(spec_for(device.kind, kind), est)


def _refusal(
    spec: KindSpec, *, owner: Any, estimate_s: float, lift_limits: bool, quota: Verdict
) -> tuple[str | None, str | None]:
    """The first refusal that applies, with its field: the pair's limit, a lift only admins may ask for, a quota."""
    if why := _limit_refusal(spec, estimate_s):
        return why, None
    if lift_limits and not getattr(owner, "is_admin", False):
        return LIFT_ADMINS_ONLY, "lift_limits"
    if quota.refused:
        return quota.refused, "__all__"  # the request as a whole, not one of its fields
    return None, None


def _warnings(snap: DeviceSnapshot, probe: _Probe) -> list[str]:
    """What will make the job wait or take longer, though it may be queued."""
    warnings: list[str] = []
    if reason := blocked_reason(snap):
        warnings.append(f"{reason} The job will wait until that changes.")
    if probe.model_id not in snap.loaded:
        warnings.append("The model is not loaded yet; loading it adds a little time.")
    if polite_blocked(probe, snap):
        warnings.append(
            "Loading this model by day would unload a model someone else is using; with "
            "“Polite” on, the job waits for the night window."
        )
    return warnings


def _planned(
    snap: DeviceSnapshot, now: dt.datetime, probe: _Probe
) -> tuple[dt.datetime | None, dt.datetime | None]:
    """When the probe would start and be ready, planned behind every job already waiting."""
    for job, start, finish in eta.plan(snap.device_id, now=now, extra=probe, snap=snap):
        if job is probe:
            return start, finish
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
    after: Chained | None = None,
) -> Admission:
    """Estimate, predicted start and ready times, warnings, and a refusal (with the field it concerns).

    The owner's quotas are part of it (``jobs.quotas.services.quota_check``): over a limit is a refusal naming the
    limit, the usage and when it frees up, unless an admin lifts the limits for this job (``lift_limits``).
    ``after``: a chain's child, planned as released at its parents' predicted finish (``Chained``)."""
    if group := group_refusal(owner=owner, device=device, kind=kind, model_id=model_id):
        return _refused(*group)
    try:
        spec = spec_for(device.kind, kind)
    except ValueError as exc:
        return _refused(str(exc), "kind")
    now = timezone.now()
    if early := _schedule_refusal(when, not_before, now) or _disk_refusal():
        return early
    est = eta.estimate(
        device_id=device.pk, device_kind=device.kind, kind=kind, model_id=model_id, params=params
    )
    quota = quota_check(owner=owner, estimate_s=est, lift=lift_limits, now=now)
    refused, refused_field = _refusal(spec, owner=owner, estimate_s=est, lift_limits=lift_limits, quota=quota)
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
    if after is not None:
        probe.release_at, probe.parent_ids = after.release_at or now, after.parent_ids
    snap = snapshot_for(device.pk, now=now)
    warnings = _warnings(snap, probe) + (after.warnings if after is not None else [])
    starts, ready = _planned(snap, now, probe)
    lifted = quota.lifted if refused is None else []
    warnings.extend(f"Over a limit, lifted for this job: {why}" for why in lifted)
    return Admission(
        estimate_s=est,
        starts_at=starts,
        ready_at=ready,
        warnings=warnings,
        refused=refused,
        refused_field=refused_field,
        usage=quota.line,
        lifted=lifted,
        blocked=blocked_reason(snap),
        snap=snap,
    )


def earliest_of(admitted: list[tuple[Any, Admission]]) -> tuple[Any, Admission]:
    """Of the devices that admitted a request ("any device"), the one where it would be ready first (then the
    shorter render, then the older device): where the job waits at first; the pool may move it later. A device
    that may start nothing now (away, paused) comes last, as in the pool's own choice (``jobs.queue.pool``): its
    plan's times assume it is there."""
    far = dt.datetime.max.replace(tzinfo=dt.UTC)
    return min(
        admitted,
        key=lambda pair: (bool(pair[1].blocked), pair[1].ready_at or far, pair[1].estimate_s, pair[0].pk),
    )


# -- the admitted request: what ``jobs.queue.submission.preview`` hands to ``services.submit_checked`` ---------


@dataclass
class CheckedRequest:
    """A request validated by its kind's form and admitted: everything ``submit_checked`` needs to queue it."""

    kind: str
    model_id: str
    params: dict[str, Any]
    upload_files: dict[str, Any]
    #: when, not_before, polite, shared, and an admin's lift_limits (the form's ``schedule()``)
    schedule: dict[str, Any]
    admission: Admission
    #: "any device": the ids of every device that admitted exactly this request (the same model and parameters);
    #: the job waits in the pool for whichever frees first (``jobs.queue.pool``). Empty: pinned to its device.
    pool: list[int] = field(default_factory=list)
    #: file inputs taken from other jobs' results (``jobs.core.links.ResultRef`` by field, checked by
    #: ``jobs.queue.chains.check_refs``): the job is held until they are there (``chains.hold``).
    refs: dict[str, Any] = field(default_factory=dict)
    #: the devices the request's token is bound to (``hub.accounts.tokens.token_devices``); None: no limit.
    devices_allowed: list[int] | None = None


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
        after=getattr(form, "chained", None),  # set by ``submission.check_on`` for a job's result as input
    )


def check_form(form: Any) -> CheckedRequest:
    """A bound form's request, validated and admitted (``admit`` runs once, here); ``RequestInvalid`` with the
    form's messages, or the admission's refusal on the field it concerns, otherwise. What the person's groups
    don't allow is refused first, by name (the form offers no such model: it would only say "not a choice")."""
    model = form.data.get("model") if form.is_bound else None
    if group := group_refusal(owner=form.user, device=form.device, kind=form.kind, model_id=model):
        raise RequestInvalid({group[1]: [group[0]]})
    if not form.is_valid():
        raise RequestInvalid({name: list(errs) for name, errs in form.errors.items()})
    admission = form_admission(form)
    if admission.refused:
        raise RequestInvalid({admission.refused_field or "__all__": [admission.refused]})
    return CheckedRequest(
        kind=str(form.kind),
        model_id=form.cleaned_data["model"],
        params=form.cleaned_params(),
        upload_files=form.upload_files(),
        schedule=form.schedule(),
        admission=admission,
    )


__all__ = [
    "MAX_NOT_BEFORE",
    "Admission",
    "Chained",
    "CheckedRequest",
    "RequestInvalid",
    "admit",
    "check_form",
    "earliest_of",
    "form_admission",
    "group_refusal",
    "limit_refusal",
    "uploads_refused",
]

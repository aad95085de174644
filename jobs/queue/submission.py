"""One way in: every door builds one ``Submission`` and hands it to ``preview`` or ``submit`` here.

    page form / REST POST /api/jobs / /v1 / a batch's member / a chain's step / run again
        → Submission(owner, kind, fields, files, device or None for the pool, …)
        → preview(submission)  (device it waits on first, CheckedRequest): nothing written
        → submit(submission)   Job (QUEUED, SCHEDULED or HELD): ``preview`` then ``services.submit_checked``

``preview`` owns the choice of device and the pool's fan-out: a pinned submission is bound to its device's form
and admitted once (``jobs.queue.admission.check_form``); one for "any capable device" is checked on every device
of the kind's pool the person may use, once each, and queued for the pool of those that admit exactly it
(``check_pool``). A door whose fields depend on the device (REST's defaults and preset, /v1's translation of
OpenAI's fields, a chain step's defaults) gives ``fields_on``; every other door gives ``fields`` and ``files``.
A batch is several submissions admitted together (``jobs.queue.batches``), a chain several whose later files
name earlier steps' results (``jobs.core.links.ResultRef``, held by ``jobs.queue.chains``).

The doors keep only their wording: a refusal is ``RequestInvalid`` by field (the form's names), and a pinned
request a device can't do names the device and the value it lacks (``named_refusal``).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from dataclasses import field as _field
from typing import Any

from django import forms
from django.core.exceptions import PermissionDenied
from django.db.models import QuerySet
from django.http import QueryDict

from devices.models import Device
from devices.selectors import device_list_for
from hub.accounts.groups import allowance_for
from hub.accounts.tokens import token_devices
from jobs.core.links import ResultRef
from jobs.files.inputs import stored_inputs
from jobs.kinds.forms import JobForm
from jobs.kinds.table import form_class_for, kinds_for
from jobs.models import Job, JobKind, JobLink, When
from jobs.queue import chains, services
from jobs.queue.admission import CheckedRequest, RequestInvalid, check_form, earliest_of, group_refusal
from jobs.quotas.services import LIFT_ADMINS_ONLY

#: A door's fields and files for one device (``RequestInvalid``: why that device can't take the request).
FieldsOn = Callable[[Device], tuple[Mapping[str, Any], Mapping[str, Any] | None]]


@dataclass(frozen=True)
class Submission:
    """One request to queue a job, whatever door it came through.

    ``fields``: the kind's form's fields (those left out: ``when`` "asap", ``polite`` on); ``files``: uploads, or
    another job's result (``jobs.core.links.ResultRef``); ``device``: the device it is pinned to, None for any
    capable device of the pool; ``fields_on``: instead of ``fields`` and ``files``, the door's own for each device
    (its defaults depend on the device's form); ``token``: the submit form's per-render token or an API caller's
    ``Idempotency-Key`` (the same again queues nothing and returns the job it queued); ``again``: the job this one
    runs again (``again_files``: its stored inputs are checked again and reused, its parent links kept)."""

    owner: Any
    kind: str
    fields: Mapping[str, Any] = _field(default_factory=dict)
    files: Mapping[str, Any] | None = None
    device: Any = None
    fields_on: FieldsOn | None = None
    token: str | None = None
    again: Job | None = None

    def __post_init__(self) -> None:
        if self.again is not None and self.files is not None:
            raise ValueError("Run again reuses the job's input files; a submission for it carries none.")

    def on(self, device: Device) -> tuple[Mapping[str, Any], Mapping[str, Any] | None]:
        """The fields and files this submission gives ``device``'s form."""
        return self.fields_on(device) if self.fields_on else (self.fields, self.files)


def again_files(job: Job) -> dict[str, Any]:
    """What "run again" gives the form for ``job``'s inputs: a ``ResultRef`` for each input taken from a parent
    still there (the new job is linked to it as ``job`` was: held until its result is stored, or given it at
    once), and each other stored input reopened from the store (the caller closes them: ``_closed``)."""
    refs = {
        link.field: ResultRef(link.parent_number, link.artifact or None)
        for link in JobLink.objects.filter(child=job, parent__isnull=False)
    }
    stored = stored_inputs(job)
    for name in set(stored) & set(refs):
        stored.pop(name).close()  # the parent's result is given again, fitted to the new job's device
    return {**stored, **refs}


def _closed(files: Mapping[str, Any] | None) -> None:
    for f in (files or {}).values():
        if hasattr(f, "close"):
            f.close()


def _require_submitter(owner: Any) -> None:
    if not getattr(owner, "can_submit", False):
        raise PermissionDenied("Viewers can watch but not submit jobs.")


# -- the kind's form -------------------------------------------------------------------------------------------


def form_for(
    *, owner: Any, device: Any, kind: str, data: Mapping[str, Any] | None, files: Any = None, **kw: Any
) -> JobForm:
    """The kind's form for this device, bound to ``data``; ``RequestInvalid`` for a kind it can't run."""
    return _form_class(device, kind)(data, files, device=device, user=owner, **kw)


def _form_class(device: Any, kind: str) -> type[JobForm]:
    """The kind's form class on this device; ``RequestInvalid`` for a kind it can't run."""
    if kind not in JobKind.values:
        raise RequestInvalid({"kind": [f"Unknown kind {kind!r}; choose one of {', '.join(JobKind.values)}."]})
    try:
        return form_class_for(device.kind, kind)
    except ValueError as exc:
        raise RequestInvalid({"kind": [str(exc)]}) from None


def resolve_model(*, owner: Any, device: Any, kind: str, value: Any) -> Any:
    """The device's own model id for what a script typed: the id itself, or its name without the publisher
    ("MiniMax-H3-Turbo", any case) when exactly one of the models this device offers for the kind has it."""
    if not isinstance(value, str) or not value:
        return value
    return _resolved(form_for(owner=owner, device=device, kind=kind, data=None), value)


def _resolved(form: JobForm, value: Any) -> Any:
    """``resolve_model`` among the models ``form`` offers."""
    if not isinstance(value, str) or not value:
        return value
    ids = [choice for choice, _label in form.fields["model"].choices]
    if value in ids:
        return value
    name = value.rsplit("/", 1)[-1].casefold()
    matches = [i for i in ids if i.rsplit("/", 1)[-1].casefold() == name]
    return matches[0] if len(matches) == 1 else value


def with_defaults(
    *, owner: Any, device: Any, kind: str, data: dict[str, Any], files: Mapping[str, Any]
) -> dict[str, Any]:
    """Fields left out take the form's defaults, as the page pre-fills them (steps, format, "simplify" on…).

    A checkbox the page shows ticked would otherwise read as unticked when a script leaves it out.
    """
    form = form_for(owner=owner, device=device, kind=kind, data={"model": data.get("model")})
    out = dict(data)
    for name, field in form.fields.items():
        if name in out or name in files or isinstance(field, forms.FileField):
            continue
        initial = field.initial() if callable(field.initial) else field.initial
        if initial is not None:
            out[name] = initial
    return out


# -- one device ------------------------------------------------------------------------------------------------

_OFF = (None, False, "false", "False", "0", 0, "off", "")


def _with_schedule(owner: Any, data: Mapping[str, Any]) -> dict[str, Any]:
    """The fields with ``when`` "asap" and ``polite`` on where left out; an unticked checkbox absent; a lift of
    the limits refused for anyone but an admin."""
    data = data.copy() if isinstance(data, QueryDict) else dict(data)  # a page's multiple choices stay lists
    data.setdefault("when", When.ASAP)
    data.setdefault("polite", True)
    if data["polite"] in _OFF:
        data.pop("polite")  # a checkbox that isn't ticked is simply absent
    if data.get("lift_limits") not in _OFF and not getattr(owner, "is_admin", False):
        raise RequestInvalid({"lift_limits": [LIFT_ADMINS_ONLY]})
    return data


def check_on(
    *,
    owner: Any,
    device: Any,
    kind: str,
    data: Mapping[str, Any],
    files: Mapping[str, Any] | None = None,
    pinned: bool = True,
    keep_files: bool = False,
) -> CheckedRequest:
    """Raw fields (the page form's names) validated through the same form the page uses, then admitted, on one
    device. Raises ``RequestInvalid`` (by field) or ``PermissionDenied``; for a ``pinned`` request, a value the
    device lacks is named with the device (``named_refusal``; the pool names each device itself).

    A file may be another job's result (``jobs.core.links.ResultRef``) instead of an upload: checked by
    ``jobs.queue.chains.check_refs`` and carried in ``CheckedRequest.refs`` (the job waits for it).
    ``keep_files``: a job that already holds its inputs (run again): no file field is asked for.
    """
    _require_submitter(owner)
    data = _with_schedule(owner, data)
    if isinstance(data.get("model"), str) and data["model"]:
        _form_class(device, kind)  # a kind the device can't run is refused before the files are looked at
    uploads, refs = chains.split_files(files)
    parents = chains.check_refs(owner=owner, refs=refs) if refs else {}
    files = {**uploads, **chains.stand_ins(refs)}
    form = _bound(owner=owner, device=device, kind=kind, data=data, files=files, keep_files=keep_files)
    if parents:
        form.chained = chains.chained(parents)  # admission plans it after its parents (``form_admission``)
    if unknown := [name for name in refs if name not in form.fields]:
        raise RequestInvalid({name: [f"This form has no file field {name!r}."] for name in unknown})
    try:
        checked = check_form(form)
    except RequestInvalid as exc:
        raise (named_refusal(exc, device=device, data=data) if pinned else exc) from None
    for name in refs:
        checked.upload_files.pop(name, None)
    checked.refs = dict(refs)
    return checked


def _bound(
    *, owner: Any, device: Any, kind: str, data: dict[str, Any], files: dict[str, Any], keep_files: bool
) -> JobForm:
    """The kind's form bound to ``data``, its model named loosely resolved (``resolve_model``) among the models the
    same form offers: one form for the device, a second only when the model's name had to be resolved."""
    form = form_for(owner=owner, device=device, kind=kind, data=data, files=files)
    if "model" in data and (model := _resolved(form, data["model"])) != data["model"]:
        data["model"] = model
        form = form_for(owner=owner, device=device, kind=kind, data=data, files=files)
    return form.keep_files() if keep_files else form


#: How a refusal by the person's groups begins (``admission.group_refusal``; it names what it refuses itself).
GROUP_WORDS = "Your group may not use "

#: The values a device may lack, named in a pinned request's refusal ("Pocket does not render “640x640”.").
_LACKED = {"model": "{device} has no model {value}.", "size": "{device} does not render {value}.",
           "voice": "{device} has no voice {value}."}  # fmt: skip


def quoted(raw: str, limit: int = 40) -> str:
    text = " ".join(str(raw).split())
    return f"“{text[:limit]}…”" if len(text) > limit else f"“{text}”"


def named_refusal(exc: RequestInvalid, *, device: Any, data: Mapping[str, Any]) -> RequestInvalid:
    """A refusal of a request pinned to ``device`` that says what it lacks: the value asked for and the device
    ("Pocket has no model “Foo”. Model: choose MiniMax-H3-Turbo."), where the form's words give only the choices,
    and the device by its name where they say "This device"."""
    errors = {}
    for name, messages in exc.errors.items():
        first, value = messages[0], data.get(name) if name in _LACKED else None
        if first.startswith(GROUP_WORDS):  # names what the person's groups don't allow already
            pass
        elif first.startswith("This device "):
            first = f"{device.name} {first.removeprefix('This device ')}"
        elif isinstance(value, str) and value.strip() and value.strip() not in first:
            first = f"{_LACKED[name].format(device=device.name, value=quoted(value))} {first}"
        errors[name] = [first, *messages[1:]]
    return RequestInvalid(errors)


# -- "any device": the pool ---------------------------------------------------------------------------------------


def pool_devices(owner: Any, kind: str) -> list[Device]:
    """The devices "any device" chooses among for ``kind``: those the person may use that run the kind now (none
    for a kind their groups don't allow; only their groups' devices: ``hub.accounts.groups``; and, for a request
    by a token bound to devices, of those only: ``hub.accounts.tokens.token_devices``)."""
    allowance = allowance_for(owner)
    if not allowance.kind_ok(kind):
        return []
    bound = token_devices(owner)
    return [
        device
        for device in with_capabilities(owner)
        if kind in kinds_for(device)
        and allowance.device_ok(device.pk)
        and (bound is None or device.pk in bound)
    ]


def token_refusal(owner: Any, device: Device | None) -> RequestInvalid | None:
    """Why a token bound to devices may not queue on ``device`` (None: "any device"), or None when it may.

    The one rule for bound tokens, asked by ``preview`` for every submission whatever its door: a pinned device
    must be one of the token's; "any device" is any of them (``pool_devices``), and none of them able to run it
    now is refused by name too."""
    bound = token_devices(owner)
    if bound is None or (device is not None and device.pk in bound):
        return None
    names = list(Device.objects.filter(pk__in=bound).order_by("name").values_list("name", flat=True))
    if not names:
        return RequestInvalid({"device": ["This token's devices are gone; create a new token."]})
    listed = names[0] if len(names) == 1 else ", ".join(names[:-1]) + " or " + names[-1]
    return RequestInvalid({"device": [f"This token may only use {listed}."]})


def with_capabilities(owner: Any) -> QuerySet[Device]:
    """The devices the person may use with what they report read at once (``kinds_for`` reads it from each)."""
    return usable_devices(owner).defer(None).defer("api_key_encrypted")


# -- what a person may use: the one selector every door's listing asks (the rule: ``hub.accounts.groups``) ------


def usable_devices(owner: Any) -> QuerySet[Device]:
    """The devices the person may send work to: every device, or only their groups' (the default first)."""
    devices = device_list_for(owner)
    allowed = allowance_for(owner).devices
    return devices if allowed is None else devices.filter(pk__in=sorted(allowed))


def usable_kinds(owner: Any, device: Any) -> list[str]:
    """The kinds ``device`` runs now that the person may use there, with a model they may use (none on a device
    their groups don't allow). The models: the kind's form offers only the allowed ones (``JobForm``, with
    ``user=owner``)."""
    allowance = allowance_for(owner)
    if device is None or not allowance.device_ok(device.pk):
        return []
    kinds = [k for k in kinds_for(device) if allowance.kind_ok(k)]
    if allowance.models:  # only the kinds with a model the person may use there
        kinds = [
            k
            for k in kinds
            if form_for(owner=owner, device=device, kind=k, data=None).fields["model"].choices
        ]
    return kinds


def rewound(files: Mapping[str, Any] | None) -> dict[str, Any]:
    """The uploads ready to be read again from their start (each device's form checks them in turn)."""
    for f in (files or {}).values():
        if hasattr(f, "seek"):
            f.seek(0)
    return dict(files or {})


#: A way to check a request on one device of the pool.
CheckOn = Callable[[Device], CheckedRequest]


def check_pool(*, owner: Any, kind: str, check: CheckOn) -> tuple[Device, CheckedRequest]:
    """``check`` on every device of ``kind``'s pool, once each: the request goes to the pool of those that admit
    exactly it (the same model and parameters as the one where it is ready first), waiting first on that one.
    ``RequestInvalid`` when none does, saying what each device lacks."""
    _require_submitter(owner)
    devices = pool_devices(owner, kind)
    if not devices:
        raise _no_pool(owner, kind)
    admitted: list[tuple[Device, CheckedRequest]] = []
    refused: list[tuple[Device, RequestInvalid]] = []
    for device in devices:
        try:
            admitted.append((device, check(device)))
        except RequestInvalid as exc:
            refused.append((device, exc))
    if not admitted:
        if len({exc.first() for _device, exc in refused}) == 1:
            raise refused[0][1]  # the same reason everywhere (a field left out): said once, as for one device
        raise RequestInvalid(_no_device_can(refused))
    device, _admission = earliest_of([(d, checked.admission) for d, checked in admitted])
    checked = next(c for d, c in admitted if d is device)
    checked.pool = [d.pk for d, c in admitted if (c.model_id, c.params) == (checked.model_id, checked.params)]
    return device, checked


def _no_pool(owner: Any, kind: str) -> RequestInvalid:
    """Why "any device" has no device for ``kind``: the person's groups (by name), or no device runs it now."""
    if group := group_refusal(owner=owner, device=None, kind=kind, model_id=None):
        return RequestInvalid({group[1]: [group[0]]})
    label = JobKind(kind).label.lower() if kind in JobKind.values else repr(kind)
    if allowance_for(owner).devices is not None:
        return RequestInvalid({"device": [f"No device your group may use can run {label} jobs right now."]})
    return RequestInvalid({"kind": [f"No device can run {label} jobs right now."]})


def _no_device_can(refused: list[tuple[Device, RequestInvalid]]) -> dict[str, list[str]]:
    """Each device's first reason, on the field they share (or on the whole request)."""
    fields = {exc.first()[0] for _d, exc in refused}
    name = fields.pop() if len(fields) == 1 and None not in fields else "__all__"
    return {name: [no_device_can([(device, exc.first()[1]) for device, exc in refused])]}


def no_device_can(reasons: list[tuple[Device, str]]) -> str:
    """ "No device can do exactly this. Home: <why>; Office: <why>." (the submit and the page's summary)."""
    return (
        "No device can do exactly this. "
        + "; ".join(f"{d.name}: {why.rstrip('.')}" for d, why in reasons)
        + "."
    )


# -- the one way in ----------------------------------------------------------------------------------------------


def preview(submission: Submission) -> tuple[Device, CheckedRequest]:
    """The submission checked and admitted, nothing written: (the device it would wait on first, the request).
    Pinned: its device's form, once; "any capable device": each device of the pool, once each. Run again
    (``again``): the job's inputs are its files (``again_files``), none asked for."""
    sub = submission
    keep = sub.again is not None
    opened = again_files(sub.again) if keep else None

    def check(device: Device, pinned: bool) -> CheckedRequest:
        data, files = sub.on(device)  # (files read from their start: a batch's members share them)
        files = opened if keep else files
        return check_on(owner=sub.owner, device=device, kind=sub.kind, data=data, files=rewound(files),
                        pinned=pinned, keep_files=keep)  # fmt: skip

    try:
        if sub.device is not None:
            if refusal := token_refusal(sub.owner, sub.device):
                raise refusal
            device, checked = sub.device, check(sub.device, True)
        else:
            bound = token_devices(sub.owner) is not None  # (asked first: no extra query for everyone else)
            if (
                bound
                and not pool_devices(sub.owner, sub.kind)
                and (refusal := token_refusal(sub.owner, None))
            ):
                raise refusal  # the token's devices can't run it, though others could: say which it may use
            device, checked = check_pool(owner=sub.owner, kind=sub.kind, check=lambda d: check(d, False))
        checked.devices_allowed = token_devices(sub.owner)  # kept on the job: its pool stays within them
        return device, checked
    finally:
        rewound(sub.files)
        _closed({k: f for k, f in (opened or {}).items() if not isinstance(f, ResultRef)})


def submit(submission: Submission, *, previewed: tuple[Device, CheckedRequest] | None = None) -> Job:
    """``preview`` then queue it (``services.submit_checked``): the job, with ``job.admission`` what the hub
    expected of it. The same ``token`` again returns the job it queued (``idempotent_replay``).

    ``previewed``: this submission's ``preview``, when the door looked at it first (/v1 looks for the job an SDK
    retry already queued): it is not checked again."""
    device, checked = previewed or preview(submission)
    if submission.again is not None:  # its inputs are reused, not saved again (``services.job_run_again``)
        job = services.job_run_again(job=submission.again, by=submission.owner, checked=checked,
                                     idempotency_key=submission.token, device=device)  # fmt: skip
    else:
        job = services.submit_checked(
            owner=submission.owner, device=device, checked=checked, idempotency_key=submission.token
        )
    job.admission = checked.admission
    return job


__all__ = [
    "CheckOn",
    "FieldsOn",
    "Submission",
    "again_files",
    "check_on",
    "check_pool",
    "form_for",
    "named_refusal",
    "no_device_can",
    "pool_devices",
    "preview",
    "resolve_model",
    "rewound",
    "submit",
    "token_refusal",
    "usable_devices",
    "usable_kinds",
    "with_capabilities",
    "with_defaults",
]

"""The doors' one intake: a request taken in as the device, the kind's form and its uploads, for admission to judge.

Every submission goes one way, once: door → intake → admission → services.

    page (``views.job_new``)       page_request → page_form → submit_page_form ─┐
    REST (``api.submit``)          read_body → find_device → check_request ─────┼→ admission.check_form (``admit``,
    /v1 (``v1.*``)                 its own fields → find_device → check_request ┘   once) → services.submit_checked

What the three doors share lives here: binding fields to the kind's form (``form_for``), the models a form offers
and a model named loosely (``offered_models``, ``resolve_model``), the form's defaults for fields left out, the
device a request names (``find_device``), the page's submit token, the uploads a re-shown page form keeps between
tries, and one error for a request that can't be queued (``RequestInvalid``, ``jobs.queue.admission``). How a body
is parsed (JSON, multipart, OpenAI's fields) and how an error is worded stays with each door. The page builders
(``jobs.doors.pages``) only draw what comes out; nothing here calls them or the views.
"""

from __future__ import annotations

import hashlib
import json
import re
import secrets
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from django import forms
from django.core.exceptions import PermissionDenied
from django.core.files.uploadedfile import SimpleUploadedFile
from django.db.models import QuerySet
from django.http import HttpRequest

from devices.models import Device
from devices.selectors import device_default, device_list_for
from hub.parsing import parse_id
from jobs.files import store
from jobs.kinds.forms import JobForm
from jobs.kinds.table import form_class_for, kinds_for
from jobs.models import Job, JobKind, When
from jobs.queue import services
from jobs.queue.admission import Admission, CheckedRequest, RequestInvalid, check_form, earliest_of
from jobs.quotas.services import LIFT_ADMINS_ONLY

# -- the device and the kind ---------------------------------------------------------------------------------


def find_device(ref: Any, *, among: QuerySet[Device] | None = None, by_name: bool = False) -> Device | None:
    """The device a request names: its id (``hub.parsing.parse_id``: no "²" or 10,000-digit ids), or with
    ``by_name`` its name (exactly, then ignoring case); only ``among`` those given (every device by default)."""
    devices = Device.objects.all() if among is None else among
    pk = parse_id(ref)
    device = devices.filter(pk=pk).first() if pk is not None else None
    if device is None and by_name:
        device = devices.filter(name=ref).first() or devices.filter(name__iexact=ref).first()
    return device


def _quoted(raw: str, limit: int = 40) -> str:
    text = " ".join(str(raw).split())
    return f"“{text[:limit]}…”" if len(text) > limit else f"“{text}”"


def _kind_problem(request: HttpRequest, device: Device, raw_kind: str) -> str:
    """Why the page can't use the kind it was sent ("" when it can, or when a GET may quietly fall back)."""
    if raw_kind not in JobKind.values:
        return f"Unknown kind {_quoted(raw_kind)}; choose one of the kinds below."
    if request.method == "POST":
        label = JobKind(raw_kind).label.lower()
        return f"{device.name} can't run {label} jobs right now; choose one of the kinds below."
    return ""


@dataclass
class PageRequest:
    """What a submit page's request names: the device, a kind it can run, what was wrong ("" when nothing was),
    and the form's idempotency token (None when it sent none)."""

    device: Device | None
    kind: str
    problem: str
    token: str | None


def page_request(request: HttpRequest) -> PageRequest:
    """The device (``device``, else the default one), a kind it can run (``kind``, else its first), what was
    wrong with the request, and the submit token.

    A device or kind the request names but that doesn't exist is never replaced silently by the default: the
    page says so ("No such device", "Unknown kind “bogus”") and offers the valid choices, and a POST queues
    nothing. On a GET, a known kind the chosen device can't run falls back to its first kind without a word:
    that is what the device picker sends when one switches from a Tiiny's speech form to a TensorSharp server.
    """
    data = request.POST if request.method == "POST" else request.GET
    problems: list[str] = []
    raw_device = data.get("device")
    device = None
    if raw_device not in (None, ""):
        device = find_device(raw_device, among=device_list_for(request.user))
        if device is None:
            problems.append(f"No such device {_quoted(raw_device)}; choose one of the devices below.")
    device = device or device_default()
    kinds = kinds_for(device) if device else []
    raw_kind = data.get("kind") or ""
    kind = raw_kind if raw_kind in kinds else (kinds[0] if kinds else str(JobKind.VIDEO))
    if raw_kind and raw_kind not in kinds and device is not None:
        problems.append(_kind_problem(request, device, raw_kind))
    return PageRequest(device, kind, " ".join(p for p in problems if p), submit_token_of(request))


# -- the submit token (``templates/jobs/new.html``) -----------------------------------------------------------

#: The per-form idempotency token: random, URL-safe, bounded.
SUBMIT_TOKEN = re.compile(r"[A-Za-z0-9_-]{16,64}")


def submit_token_of(request: HttpRequest) -> str | None:
    """The form's idempotency token from a POST, when it is one (anything else means "no token")."""
    raw = request.POST.get("submit_token") if request.method == "POST" else None
    return raw if isinstance(raw, str) and SUBMIT_TOKEN.fullmatch(raw) else None


def new_submit_token() -> str:
    return secrets.token_urlsafe(24)


def already_queued(owner: Any, token: str | None) -> Job | None:
    """The job this form's token already queued (a double click, a retried POST), or None."""
    return services.job_already_submitted(owner=owner, idempotency_key=token) if token else None


# -- the kind's form -------------------------------------------------------------------------------------------


def form_for(
    *, owner: Any, device: Any, kind: str, data: Mapping[str, Any] | None, files: Any = None, **kw: Any
) -> JobForm:
    """The kind's form for this device, bound to ``data``; ``RequestInvalid`` for a kind it can't run."""
    if kind not in JobKind.values:
        raise RequestInvalid({"kind": [f"Unknown kind {kind!r}; choose one of {', '.join(JobKind.values)}."]})
    try:
        form_class = form_class_for(device.kind, kind)
    except ValueError as exc:
        raise RequestInvalid({"kind": [str(exc)]}) from None
    return form_class(data, files, device=device, user=owner, **kw)


def offered_models(device: Any, kind: str) -> list[str]:
    """The models the hub can queue for ``kind`` on ``device`` right now: exactly the submit form's choices
    (none for a kind the device can't run now)."""
    if kind not in kinds_for(device):
        return []
    form = form_class_for(device.kind, kind)(device=device)
    return [str(choice) for choice, _label in form.fields["model"].choices]


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


_OFF = (None, False, "false", "False", "0", 0, "off", "")


def _require_submitter(owner: Any) -> None:
    if not getattr(owner, "can_submit", False):
        raise PermissionDenied("Viewers can watch but not submit jobs.")


def check_request(
    *, owner: Any, device: Any, kind: str, data: Mapping[str, Any], files: Mapping[str, Any] | None = None
) -> CheckedRequest:
    """Raw fields (the page form's names) validated through the same form the page uses, then admitted.

    Fields the API caller leaves out take the form's defaults: ``when`` is "asap" and ``polite`` is on.
    Raises ``RequestInvalid`` (by field) or ``PermissionDenied``.
    """
    _require_submitter(owner)
    data = dict(data)
    data.setdefault("when", When.ASAP)
    data.setdefault("polite", True)
    if data["polite"] in _OFF:
        data.pop("polite")  # a checkbox that isn't ticked is simply absent
    if data.get("lift_limits") not in _OFF and not getattr(owner, "is_admin", False):
        raise RequestInvalid({"lift_limits": [LIFT_ADMINS_ONLY]})
    if "model" in data:
        data["model"] = resolve_model(owner=owner, device=device, kind=kind, value=data["model"])
    form = form_for(owner=owner, device=device, kind=kind, data=data, files=files or {})
    return check_form(form)


def submit_request(
    *,
    owner: Any,
    device: Any,
    kind: str,
    data: Mapping[str, Any],
    files: Mapping[str, Any] | None = None,
    idempotency_key: str | None = None,
) -> tuple[Job, Admission]:
    """``check_request`` then queue it: (job, admission). Raises ``RequestInvalid`` or ``PermissionDenied``.
    The same ``idempotency_key`` again (a script's retry) returns the job it queued instead of a second one."""
    checked = check_request(owner=owner, device=device, kind=kind, data=data, files=files)
    job = services.submit_checked(
        owner=owner, device=device, checked=checked, idempotency_key=idempotency_key
    )
    return job, checked.admission


# -- "any device": the pool ---------------------------------------------------------------------------------------

#: What a request names to let the pool choose the device (``device`` left out does too, on the API doors).
ANY_DEVICE = "any"


def pool_devices(owner: Any, kind: str) -> list[Device]:
    """The devices "any device" chooses among for ``kind``: those the person may use that run the kind now."""
    return [device for device in device_list_for(owner) if kind in kinds_for(device)]


def _rewound(files: Mapping[str, Any] | None) -> dict[str, Any]:
    """The uploads ready to be read again from their start (each device's form checks them in turn)."""
    for f in (files or {}).values():
        if hasattr(f, "seek"):
            f.seek(0)
    return dict(files or {})


def check_request_any(
    *, owner: Any, kind: str, data: Mapping[str, Any], files: Mapping[str, Any] | None = None
) -> tuple[Device, CheckedRequest]:
    """``check_request`` on every device of the pool that runs ``kind``: the request goes to the pool of those
    that admit exactly it (the same model and parameters as the one where it is ready first), waiting first on
    that one. ``RequestInvalid`` when none does, saying what each device lacks."""
    _require_submitter(owner)
    devices = pool_devices(owner, kind)
    if not devices:
        label = JobKind(kind).label.lower() if kind in JobKind.values else repr(kind)
        raise RequestInvalid({"kind": [f"No device can run {label} jobs right now."]})
    admitted: list[tuple[Device, CheckedRequest]] = []
    refused: list[tuple[Device, RequestInvalid]] = []
    for device in devices:
        try:
            admitted.append(
                (
                    device,
                    check_request(owner=owner, device=device, kind=kind, data=data, files=_rewound(files)),
                )
            )
        except RequestInvalid as exc:
            refused.append((device, exc))
    _rewound(files)
    if not admitted:
        if len({exc.first() for _device, exc in refused}) == 1:
            raise refused[0][1]  # the same reason everywhere (a field left out): said once, as for one device
        raise RequestInvalid(_no_device_can(refused))
    device, _admission = earliest_of([(d, checked.admission) for d, checked in admitted])
    checked = next(c for d, c in admitted if d is device)
    checked.pool = [d.pk for d, c in admitted if (c.model_id, c.params) == (checked.model_id, checked.params)]
    return device, checked


def _no_device_can(refused: list[tuple[Device, RequestInvalid]]) -> dict[str, list[str]]:
    """Each device's first reason, on the field they share (or on the whole request)."""
    fields = {exc.first()[0] for _d, exc in refused}
    name = fields.pop() if len(fields) == 1 and None not in fields else "__all__"
    reasons = "; ".join(f"{device.name}: {exc.first()[1].rstrip('.')}" for device, exc in refused)
    return {name: [f"No device can do exactly this. {reasons}."]}


def submit_request_any(
    *,
    owner: Any,
    kind: str,
    data: Mapping[str, Any],
    files: Mapping[str, Any] | None = None,
    idempotency_key: str | None = None,
) -> tuple[Job, Admission]:
    """``check_request_any`` then queue it in the pool: (job, admission of the device it waits on first)."""
    device, checked = check_request_any(owner=owner, kind=kind, data=data, files=files)
    job = services.submit_checked(
        owner=owner, device=device, checked=checked, idempotency_key=idempotency_key
    )
    return job, checked.admission


def form_again(
    *, owner: Any, job: Job, data: Mapping[str, Any] | None, files: Any = None, initial: Any = None
) -> JobForm:
    """The job's kind's form for "run again": its input files are reused (``services.job_run_again``), so file
    fields are optional (a browser can't pre-fill a file input; a script sends none)."""
    form = form_for(
        owner=owner, device=job.device, kind=job.kind, data=data, files=files, initial=initial or {}
    )
    for field in form.fields.values():
        if isinstance(field, forms.FileField):
            field.required = False
    return form


def add_errors(form: JobForm, exc: RequestInvalid) -> None:
    """An intake or admission refusal shown on the form: on its field, or on the whole form."""
    for name, errs in exc.errors.items():
        form.add_error(name if name in form.fields else None, errs)


# -- uploads kept between tries (the page) ----------------------------------------------------------------------
# A browser can't pre-fill a file input, so a refused or invalid submit would make the person pick the picture
# (or the voice recording) again. The page keeps each upload that passed its checks, keyed by the person and the
# form's idempotency token (the token lives exactly as long as this filled-in form: it comes back with every
# try and a new render gets a new one), and uses it when the next try of the same form sends no file for that
# field. Queued (or abandoned for a day): the stash goes. Nobody else can reach it: the folder is named by a hash
# of the owner and the token, and only the submit page reads it, for the signed-in owner.
STASH_TTL_S = 24 * 3600


STASH = "stash"


def _stash_dir(user: Any, token: str) -> str:
    """The stash's folder in the store (``stash/<user>/<hash>``): on MEDIA_ROOT or the bucket, like the results, so
    any web process of the hub (on any machine) finds what another one kept."""
    digest = hashlib.sha256(f"{user.pk}:{token}".encode()).hexdigest()[:32]
    return f"{STASH}/{user.pk}/{digest}"


def _stash_prune() -> None:
    """Drop the stashes abandoned for a day (by the age of their first file)."""
    cutoff_ns = (time.time() - STASH_TTL_S) * 1_000_000_000
    for folder in store.subfolders(STASH, depth=2):
        files = store.files_in(folder)
        found = store.find(f"{folder}/{files[0]}", within=STASH) if files else None
        if found is not None and found.mtime_ns < cutoff_ns:
            store.delete([*(f"{folder}/{name}" for name in files), folder])  # the folder: on the filesystem


def stash_uploads(*, user: Any, token: str | None, files: dict[str, Any]) -> None:
    """Keep these (already checked) uploads for the next try of the form ``token`` names."""
    if not token or not files:
        return
    folder = _stash_dir(user, token)
    for name, f in files.items():
        f.seek(0)
        data = f.read()
        f.seek(0)
        store.save_bytes(f"{folder}/{name}.bin", data)
        meta = {
            "name": str(getattr(f, "name", "") or name)[-120:],
            "type": getattr(f, "content_type", "") or "",
            "size": len(data),
        }
        store.save_bytes(f"{folder}/{name}.json", json.dumps(meta).encode())
    try:
        _stash_prune()
    except OSError:
        pass  # pruning is housekeeping: a store that hiccups here must not refuse the form


def _stash_meta(folder: str, name: str) -> dict[str, Any]:
    info = json.loads(store.read_bytes(f"{folder}/{name}.json"))
    if not isinstance(info, dict):
        raise ValueError("not a stash entry")
    return info


def stashed_uploads(*, user: Any, token: str | None, names: list[str]) -> dict[str, SimpleUploadedFile]:
    """The uploads kept for the form ``token`` names, as fresh upload objects (the form checks them again)."""
    if not token:
        return {}
    folder = _stash_dir(user, token)
    out = {}
    for name in names:
        try:
            info = _stash_meta(folder, name)
            data = store.read_bytes(f"{folder}/{name}.bin")
        except (OSError, ValueError):
            continue
        out[name] = SimpleUploadedFile(info.get("name") or name, data, info.get("type") or "")
    return out


def stash_forget(*, user: Any, token: str | None, names: list[str] | None = None) -> None:
    """Drop the kept uploads (all of them, or those ``names``)."""
    if not token:
        return
    folder = _stash_dir(user, token)
    try:
        kept = (
            store.files_in(folder) if names is None else [f"{n}{x}" for n in names for x in (".bin", ".json")]
        )
    except OSError:
        return
    store.delete([f"{folder}/{name}" for name in kept] + ([folder] if names is None else []))


def stash_listing(*, user: Any, token: str | None, names: list[str]) -> dict[str, dict[str, Any]]:
    """What is kept, without reading the files: ``{field: {"name": file name, "kb": size}}``."""
    if not token:
        return {}
    folder = _stash_dir(user, token)
    out = {}
    for name in names:
        try:
            info = _stash_meta(folder, name)
            size = info.get("size")
            if not isinstance(size, int):  # kept before the size was noted
                found = store.find(f"{folder}/{name}.bin", within=STASH)
                if found is None:
                    continue
                size = found.size
        except (OSError, ValueError):
            continue
        out[name] = {"name": info.get("name") or name, "kb": max(1, round(size / 1024))}
    return out


def file_fields(form_or_class: Any) -> list[str]:
    fields = form_or_class.fields if isinstance(form_or_class, forms.BaseForm) else form_or_class.base_fields
    return [n for n, f in fields.items() if isinstance(f, forms.FileField)]


def uploads_for_try(request: HttpRequest, form_class: type[JobForm]) -> dict[str, Any]:
    """The files to bind a submitted form with: a new upload wins over a kept one, and a kept one the person
    ticked "don't use it" is dropped."""
    token = submit_token_of(request)
    names = file_fields(form_class)
    unstash = [n for n in request.POST.getlist("unstash") if n in names]
    stash_forget(user=request.user, token=token, names=unstash)
    wanted = [n for n in names if n not in request.FILES and n not in unstash]
    return {**stashed_uploads(user=request.user, token=token, names=wanted), **request.FILES.dict()}


def keep_uploads(request: HttpRequest, form: JobForm) -> None:
    """After a try that queued nothing (or before the fields are swapped for another model's): keep the uploads
    that passed their checks for the next try, drop those that didn't, and note on the form what the page shows
    next to each file input (``kept_uploads``; ``lost_uploads``: sent, but it must be chosen again)."""
    token = submit_token_of(request)
    names = file_fields(form)
    sent = {n: f for n, f in request.FILES.items() if n in names}
    good = {n: f for n, f in sent.items() if n not in form.errors}
    stash_uploads(user=request.user, token=token, files=good)
    stash_forget(user=request.user, token=token, names=[n for n in sent if n not in good])
    form.kept_uploads = stash_listing(
        user=request.user, token=token, names=[n for n in names if n not in form.errors]
    )
    form.lost_uploads = [n for n in sent if n not in form.kept_uploads]


# -- the page's submit -----------------------------------------------------------------------------------------

#: What the page posts besides the form's own fields.
_PAGE_ONLY = {"csrfmiddlewaretoken", "submit_token", "device", "kind", "fields_for", "unstash", "again"}


def typed_form(request: HttpRequest, taken: PageRequest) -> JobForm:
    """An unbound form showing what a person typed into a request we can't take as it is (an unknown device or
    kind): the valid choices are offered, and nothing typed is lost."""
    typed = {k: v for k, v in request.POST.items() if k not in _PAGE_ONLY} if request.method == "POST" else {}
    return form_class_for(taken.device.kind, taken.kind)(
        initial=typed, device=taken.device, user=request.user
    )


def page_form(request: HttpRequest, taken: PageRequest) -> JobForm:
    """The kind's form: unbound for a GET; for a POST bound with this try's uploads, where a refused try's kept
    uploads stand in for a file the browser couldn't send again."""
    form_class = form_class_for(taken.device.kind, taken.kind)
    if request.method != "POST":
        return form_class(None, None, device=taken.device, user=request.user)
    files = uploads_for_try(request, form_class)
    return form_class(request.POST or None, files or None, device=taken.device, user=request.user)


def submit_page_form(request: HttpRequest, form: JobForm, token: str | None) -> Job | None:
    """The page's try, admitted once and queued (the kept uploads go); None when the form or admission refused
    it, with the reasons on the form."""
    if not form.is_valid():
        return None
    try:
        checked = check_form(form)
        # (a disk that fills up while the uploads are saved refuses it too)
        job = services.submit_checked(
            owner=request.user, device=form.device, checked=checked, idempotency_key=token
        )
    except RequestInvalid as exc:
        add_errors(form, exc)
        return None
    if not getattr(job, "idempotent_replay", False):
        stash_forget(user=request.user, token=token)
    return job


__all__ = [
    "PageRequest",
    "RequestInvalid",
    "add_errors",
    "already_queued",
    "check_request",
    "file_fields",
    "find_device",
    "form_again",
    "form_for",
    "keep_uploads",
    "new_submit_token",
    "offered_models",
    "page_form",
    "page_request",
    "resolve_model",
    "submit_page_form",
    "submit_request",
    "submit_token_of",
    "typed_form",
    "with_defaults",
]

"""The doors' intake: what the page, REST and /v1 share before a request becomes one ``Submission``.

Every submission goes one way, once: door → ``Submission`` → ``jobs.queue.submission.preview`` / ``submit`` (the
device choice, the pool's fan-out, the kind's form, admission) → ``services.submit_checked``.

    page (``views.job_new``)   page_request → page_form → submit_page_form → Submission → submit (pinned: the
                                                              page's bound form admitted, handed as ``previewed``)
    REST (``api.submit``)      read_body → submission_of → submit
    /v1 (``v1.*``)             its own fields → check_on (preview) → queue (submit, not checked again)

What the doors share lives here: the device a request names (``find_device``), the page's device and kind
(``page_request``) and its "any capable device" (``any_kinds``, ``any_by_default``), the models a form offers
(``offered_models``), the page's submit token and the uploads a re-shown page form keeps between tries
(``jobs.doors.stash``, re-exported), "run again" (``form_again``, ``again_submission``) and a refusal shown on a form
(``show_refusal``). The form's helpers of the queue (``form_for``, ``resolve_model``, ``with_defaults``,
``pool_devices``, ``named_refusal``, ``no_device_can``) are re-exported under the names the doors know, and
``check_request``, ``submit_request``, ``check_request_any`` and ``submit_request_any`` are thin wrappers that build
a ``Submission`` (tests, the bench and scripts call them). How a body is parsed and how an error is worded stays
with each door. The page builders (``jobs.doors.pages``) only draw what comes out.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from dataclasses import field as _field
from typing import Any

from django.core.exceptions import NON_FIELD_ERRORS
from django.db.models import QuerySet
from django.http import HttpRequest

from devices.models import Device
from devices.selectors import device_default, device_list_for
from hub.accounts.groups import allowance_for
from hub.parsing import parse_id
from jobs.doors.stash import (  # the page's state between tries, re-exported: the doors import it from here
    file_fields,
    keep_uploads,
    new_submit_token,
    stash_forget,
    stash_listing,
    stash_uploads,
    stashed_uploads,
    submit_token_of,
    uploads_for_try,
)
from jobs.kinds.forms import JobForm
from jobs.kinds.table import form_class_for, kinds_for
from jobs.models import Job, JobKind
from jobs.queue import services
from jobs.queue.admission import Admission, CheckedRequest, RequestInvalid, check_form, group_refusal
from jobs.queue.submission import (  # the one way in; the form's helpers re-exported for the doors
    FieldsOn,
    Submission,
    check_on,
    check_pool,
    form_for,
    named_refusal,
    no_device_can,
    pool_devices,
    preview,
    quoted,
    resolve_model,
    submit,
    usable_devices,
    usable_kinds,
    with_capabilities,
    with_defaults,
)

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


_quoted = quoted


def _kind_problem(request: HttpRequest, device: Device, raw_kind: str) -> str:
    """Why the page can't use the kind it was sent ("" when it can, or when a GET may quietly fall back)."""
    if raw_kind not in JobKind.values:
        return f"Unknown kind {_quoted(raw_kind)}; choose one of the kinds below."
    model = request.POST.get("model") if request.method == "POST" else None
    if group := group_refusal(owner=request.user, device=None, kind=raw_kind, model_id=model):
        return f"{group[0]} Choose one of the kinds below."  # (the one rule's words: ``admission``)
    if raw_kind in kinds_for(
        device
    ):  # it runs the kind, but none of its models for it is the person's groups'
        return f"Your group may use no {JobKind(raw_kind).label.lower()} model on {device.name}; choose one of the kinds below."
    if request.method == "POST":
        label = JobKind(raw_kind).label.lower()
        return f"{device.name} can't run {label} jobs right now; choose one of the kinds below."
    return ""


@dataclass
class PageRequest:
    """What a submit page's request names: the device, a kind it can run, what was wrong ("" when nothing was),
    and the form's idempotency token (None when it sent none). With "any capable device", ``pool`` holds the
    devices that run the kind, and ``device`` is the one whose form the page shows (the default among them)."""

    device: Device | None
    kind: str
    problem: str
    token: str | None
    pool: list[Device] = _field(default_factory=list)


def page_request(request: HttpRequest, *, kind: str | None = None) -> PageRequest:
    """The device (``device``: an id or "any"; else the default choice), a kind it can run (``kind``, else its
    first), what was wrong with the request, and the submit token.

    With no device named, "any capable device" is the choice when more than one online device runs the kind
    (``any_by_default``), else the default device. A device or kind the request names but that doesn't exist is
    never replaced silently by the default: the page says so ("No such device", "Unknown kind “bogus”") and
    offers the valid choices, and a POST queues nothing. On a GET, a known kind the chosen device can't run falls
    back to its first kind without a word: that is what the device picker sends when one switches from a Tiiny's
    speech form to a TensorSharp server. ``kind`` stands in for the request's own (a form filled in from a file).
    """
    data = request.POST if request.method == "POST" else request.GET
    raw_device, raw_kind = data.get("device"), (data.get("kind") if kind is None else kind) or ""
    if raw_device == ANY_DEVICE or (raw_device in (None, "") and any_by_default(request.user, raw_kind)):
        return _pool_request(request, raw_kind)
    return _pinned_request(request, raw_device, raw_kind)


def _pinned_request(request: HttpRequest, raw_device: str | None, raw_kind: str) -> PageRequest:
    """The device named (else the default one) and a kind it runs."""
    problems: list[str] = []
    device = None
    if raw_device not in (None, ""):
        device = find_device(raw_device, among=usable_devices(request.user))
        if device is None and (named := find_device(raw_device, among=device_list_for(request.user))):
            group = group_refusal(owner=request.user, device=named, kind="", model_id=None)
            problems.append(f"{group[0] if group else ''} Choose one of the devices below.".strip())
        elif device is None:
            problems.append(f"No such device {_quoted(raw_device)}; choose one of the devices below.")
    device = device or _default_for(request.user)
    kinds = usable_kinds(request.user, device) if device else []
    kind = raw_kind if raw_kind in kinds else (kinds[0] if kinds else str(JobKind.VIDEO))
    if raw_kind and raw_kind not in kinds and device is not None:
        problems.append(_kind_problem(request, device, raw_kind))
    return PageRequest(device, kind, " ".join(p for p in problems if p), submit_token_of(request))


def _default_for(owner: Any) -> Device | None:
    """The default device, or the first the person may use when their groups don't allow it."""
    device = device_default()
    if device is None or usable_kinds(owner, device) or not allowance_for(owner).limited:
        return device
    return usable_devices(owner).first() or device


def any_kinds(owner: Any) -> list[str]:
    """The kinds some device the person may use runs now that they may use, in the kinds' own order."""
    runnable = {k for device in with_capabilities(owner) for k in usable_kinds(owner, device)}
    return [k for k in JobKind.values if k in runnable]


def any_by_default(owner: Any, raw_kind: str) -> bool:
    """Whether the page offers "any capable device" first: more than one online device runs the kind (the one
    named, else the first any device runs) with a model for it."""
    kind = raw_kind or next(iter(any_kinds(owner)), "")
    able = [
        d
        for d in pool_devices(owner, kind)
        if d.state == Device.State.ONLINE and offered_models(d, kind, owner=owner)
    ]
    return len(able) > 1


def _pool_request(request: HttpRequest, raw_kind: str) -> PageRequest:
    """ "Any capable device": the kind (any device's), the pool that runs it, and the device whose form is shown."""
    kinds = any_kinds(request.user)
    kind = raw_kind if raw_kind in kinds else (kinds[0] if kinds else str(JobKind.VIDEO))
    problem = ""
    if raw_kind and raw_kind not in JobKind.values:
        problem = f"Unknown kind {_quoted(raw_kind)}; choose one of the kinds below."
    elif raw_kind and (group := group_refusal(owner=request.user, device=None, kind=raw_kind, model_id=None)):
        problem = f"{group[0]} Choose one of the kinds below."
    elif raw_kind and raw_kind not in kinds and request.method == "POST":
        label = JobKind(raw_kind).label.lower()
        problem = f"No device can run {label} jobs right now; choose one of the kinds below."
    pool = pool_devices(request.user, kind)
    if not pool:  # no device runs anything: the default device's page says so
        return PageRequest(device_default(), kind, problem, submit_token_of(request))
    # The form shown: an online device with a model for the kind, the default first (then any with a model).
    ranked = sorted(
        pool,
        key=lambda d: (not offered_models(d, kind, owner=request.user), d.state != Device.State.ONLINE),
    )
    return PageRequest(ranked[0], kind, problem, submit_token_of(request), pool)


# -- the submit token (``templates/jobs/new.html``; made and read in ``jobs.doors.stash``) -------------------------


def already_queued(owner: Any, token: str | None) -> Job | None:
    """The job this form's token already queued (a double click, a retried POST), or None."""
    return services.job_already_submitted(owner=owner, idempotency_key=token) if token else None


# -- the kind's form -------------------------------------------------------------------------------------------


def offered_models(device: Any, kind: str, *, owner: Any = None) -> list[str]:
    """The models the hub can queue for ``kind`` on ``device`` right now: exactly the submit form's choices
    (none for a kind the device can't run now); with ``owner``, only those the person may use there."""
    if kind not in (usable_kinds(owner, device) if owner is not None else kinds_for(device)):
        return []
    form = form_class_for(device.kind, kind)(device=device, user=owner)
    return [str(choice) for choice, _label in form.fields["model"].choices]


# -- the doors' old names for the one way in (``jobs.queue.submission``) ------------------------------------------

#: What a request names to let the pool choose the device (``device`` left out does too, on the API doors).
ANY_DEVICE = "any"

#: A door's fields and files for one device (``RequestInvalid``: why that device can't take the request).
Prepare = FieldsOn

#: ``check_on`` under the name the doors and tests know: raw fields checked and admitted on one device.
check_request = check_on


def submit_request(
    *,
    owner: Any,
    device: Any,
    kind: str,
    data: Mapping[str, Any],
    files: Mapping[str, Any] | None = None,
    idempotency_key: str | None = None,
) -> tuple[Job, Admission]:
    """A pinned ``Submission`` queued (``jobs.queue.submission.submit``): (job, admission). Raises
    ``RequestInvalid`` or ``PermissionDenied``; the same ``idempotency_key`` again returns the job it queued."""
    job = submit(Submission(owner, kind, data, files, device=device, token=idempotency_key))
    return job, job.admission


def check_request_any(
    *,
    owner: Any,
    kind: str,
    data: Mapping[str, Any] | None = None,
    files: Mapping[str, Any] | None = None,
    prepare: Prepare | None = None,
) -> tuple[Device, CheckedRequest]:
    """A ``Submission`` for any capable device, previewed (``jobs.queue.submission.preview``): (the device it
    waits on first, the request). ``prepare`` gives each device its own fields (``Submission.fields_on``)."""
    return preview(Submission(owner, kind, data or {}, files, fields_on=prepare))


def submit_request_any(
    *,
    owner: Any,
    kind: str,
    data: Mapping[str, Any] | None = None,
    files: Mapping[str, Any] | None = None,
    prepare: Prepare | None = None,
    idempotency_key: str | None = None,
) -> tuple[Job, Admission]:
    """A ``Submission`` for any capable device, queued in the pool: (job, admission where it waits first)."""
    job = submit(Submission(owner, kind, data or {}, files, fields_on=prepare, token=idempotency_key))
    return job, job.admission


def again_submission(request: HttpRequest, job: Job, token: str | None) -> Submission:
    """The page's "run again" of ``job`` as a ``Submission``: its form's fields (an unticked checkbox off, as on
    the page's submit), for its device or, a pool job's, for the pool again; its inputs reused (``again``)."""
    data = request.POST.copy()
    data.setdefault("polite", "")
    device = job.device if job.pinned else None
    return Submission(request.user, job.kind, data, device=device, token=token, again=job)


def form_again(
    *,
    owner: Any,
    job: Job,
    data: Mapping[str, Any] | None,
    files: Any = None,
    initial: Any = None,
    device: Device | None = None,
) -> JobForm:
    """The job's kind's form for "run again" (on its device, or ``device`` of its pool): its input files are
    reused (``services.job_run_again``), so file fields are optional (a browser can't pre-fill a file input; a
    script sends none)."""
    return form_for(
        owner=owner, device=device or job.device, kind=job.kind, data=data, files=files, initial=initial or {}
    ).keep_files()


def add_errors(form: JobForm, exc: RequestInvalid) -> None:
    """An intake or admission refusal shown on the form: on its field, or on the whole form."""
    for name, errs in exc.errors.items():
        form.add_error(name if name in form.fields else None, errs)


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


def page_form(
    request: HttpRequest, taken: PageRequest, *, initial: Mapping[str, Any] | None = None
) -> JobForm:
    """The kind's form: unbound for a GET (filled with ``initial``: a preset's values); for a POST bound with this
    try's uploads, where a refused try's kept uploads stand in for a file the browser couldn't send again."""
    form_class = form_class_for(taken.device.kind, taken.kind)
    if request.method != "POST":
        return form_class(None, None, device=taken.device, user=request.user, initial=dict(initial or {}))
    files = uploads_for_try(request, form_class)
    return form_class(request.POST or None, files or None, device=taken.device, user=request.user)


def submit_page_form(
    request: HttpRequest, form: JobForm, token: str | None, *, pool: bool = False
) -> Job | None:
    """The page's try, admitted once and queued (the kept uploads go); None when the form or admission refused
    it, with the reasons on the form. With ``pool`` ("any capable device") the try is checked on every device
    of the pool (``check_request_any``); the form shown is one device's, and the pool's words replace its own."""
    if not form.is_bound:  # an empty POST: nothing to check, the page shows the form
        return None
    if not pool and not form.is_valid():
        show_refusal(form, named_refusal(RequestInvalid(form.errors), device=form.device, data=form.data))
        return None
    data = request.POST.copy()
    data.setdefault("polite", "")  # an unticked checkbox is absent: off, not the API's default (on)
    submission = Submission(request.user, form.kind, data, dict(form.files.items()), token=token,
                            device=None if pool else form.device)  # fmt: skip
    try:
        # Pinned: the form the page bound is the device's, already valid; admitted here, not bound again.
        previewed = None if pool else (form.device, check_form(form))
        job = submit(submission, previewed=previewed)  # (a disk that fills up while saving refuses it too)
    except RequestInvalid as exc:
        show_refusal(form, exc)
        return None
    if not getattr(job, "idempotent_replay", False):
        stash_forget(user=request.user, token=token)
    return job


def show_refusal(form: JobForm, exc: RequestInvalid) -> None:
    """The refusal's words on the form (on its field, or on the whole form), each in place of the form's own
    words there: the pool's "No device can do exactly this…" over the shown device's, a device named."""
    errors = form.errors  # the form's own check first (add_error needs it)
    for name, messages in exc.errors.items():
        key = name if name in form.fields else NON_FIELD_ERRORS
        errors.pop(key, None)
        form.add_error(None if key == NON_FIELD_ERRORS else key, messages)


__all__ = [
    "add_errors",
    "again_submission",
    "already_queued",
    "ANY_DEVICE",
    "any_kinds",
    "check_request",
    "check_request_any",
    "check_on",
    "check_pool",
    "file_fields",
    "find_device",
    "form_again",
    "form_for",
    "keep_uploads",
    "named_refusal",
    "new_submit_token",
    "no_device_can",
    "offered_models",
    "page_form",
    "page_request",
    "PageRequest",
    "preview",
    "Submission",
    "submit",
    "pool_devices",
    "RequestInvalid",
    "resolve_model",
    "show_refusal",
    "stash_forget",
    "stash_listing",
    "stash_uploads",
    "stashed_uploads",
    "submit_page_form",
    "submit_request",
    "submit_request_any",
    "usable_devices",
    "usable_kinds",
    "submit_token_of",
    "typed_form",
    "uploads_for_try",
    "with_defaults",
]

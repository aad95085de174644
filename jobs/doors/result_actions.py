"""What a result can become next, at the page doors: its actions, the form filled in from it, and "then …" steps.

    job page, gallery card   actions_for(viewer, job, offers)  -> "Animate", "Make 3D", "Edit", "Use this voice"
    the new-job form (GET)   refs_in(request, form) -> the results its file inputs take (``start_image_from=12``)
    the new-job form (POST)  submit_page_chain(...) -> the job and its "then animate it" / "then make 3D" steps,
                             queued in one go (``jobs.doors.chaining.submit_chain``: every step admitted there)
    the summary              chain_preview(...) -> when the last step is expected, or which step is refused

One place decides which actions a result has (``offers``: what the devices a person may use report, through their
forms), and which "then" steps a form offers; the templates only draw them. A result named in the form is
checked again at submit like any other job's result (``jobs.queue.chains.check_refs``): another person's private
job reads as one that does not exist, here (404) as there.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any
from urllib.parse import urlencode

from django import forms
from django.http import Http404, HttpRequest
from django.urls import reverse

from devices.capabilities import voices_for_model
from hub.accounts.groups import allowance_for
from hub.parsing import parse_id, parse_int
from jobs.core.links import ResultRef, StepRef, fits, fitting_artifact, job_title, takes
from jobs.core.selectors import job_for, job_links
from jobs.doors.chaining import ChainQueued, ChainRefused, ChainStep, submit_chain
from jobs.doors.intake import file_fields, form_for, pool_devices, show_refusal, usable_devices, with_defaults
from jobs.kinds.forms import JobForm
from jobs.kinds.table import form_class_for, kinds_for
from jobs.models import Artifact, Job, JobKind, JobState
from jobs.queue.admission import Admission, Chained, RequestInvalid, earliest_of, form_admission
from jobs.queue.chains import chained, check_refs, stand_ins


# -- which actions a result has ------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Kind:
    """One thing a result can become: the job kind it opens, the field the result fills, the results it takes."""

    name: str
    label: str
    kind: str
    field: str
    source: str  # the kind of job whose result it takes


ACTIONS: tuple[Kind, ...] = (
    Kind("animate", "Animate", JobKind.VIDEO, "start_image", JobKind.IMAGE),
    Kind("animate_to", "Animate to it (end frame)", JobKind.VIDEO, "end_image", JobKind.IMAGE),
    Kind("mesh", "Make 3D", JobKind.MESH, "image", JobKind.IMAGE),
    Kind("edit", "Edit", JobKind.IMAGE, "image", JobKind.IMAGE),
    Kind("voice", "Use this voice", JobKind.SPEECH, "ref_audio", JobKind.SPEECH),
)
BY_NAME = {a.name: a for a in ACTIONS}


@dataclass(frozen=True)
class Offer:
    """Where an action can run for this person: the device to pin the form to (None: every device of the kind's
    pool can), and a model to choose first (a voice-cloning one)."""

    device: int | None
    model: str = ""


def _models_for(form: JobForm, field: str) -> list[str]:
    """The form's models that use ``field`` (a voice to clone: only the cloning models do)."""
    models = [str(m) for m, _label in form.fields["model"].choices]
    if field == "ref_audio":
        return [m for m in models if voices_for_model(m).mode == "clone"]
    return models


def offers(user: Any) -> dict[str, Offer]:
    """Which actions ``user`` can take on a result at all, by what their devices report now (read once per page)."""
    if not getattr(user, "can_submit", False):
        return {}
    out: dict[str, Offer] = {}
    # One read for every action: the devices the person may use (their groups': ``usable_devices``).
    devices = list(usable_devices(user).defer(None).defer("api_key_encrypted"))
    allowance = allowance_for(user)
    for action in ACTIONS:
        able: list[tuple[int, str]] = []
        # as ``pool_devices`` (the forms offer only the models the person may use)
        pool = [d for d in devices if action.kind in kinds_for(d) and allowance.kind_ok(action.kind)]
        for device in pool:
            form = form_class_for(device.kind, action.kind)(device=device, user=user)
            models = _models_for(form, action.field) if action.field in form.fields else []
            if models:
                able.append((device.pk, models[0]))
        if able:
            pinned = None if len(able) == len(pool) else able[0][0]
            model = able[0][1] if action.field == "ref_audio" else ""
            out[action.name] = Offer(pinned, model)
    return out


@dataclass(frozen=True)
class ResultAction:
    """One button: what it says and the new-job form it opens."""

    name: str
    label: str
    url: str


def action_url(action: Kind, offer: Offer, job_id: int, artifact: str = "") -> str:
    ref = f"{job_id}:{artifact}" if artifact else str(job_id)
    query: dict[str, Any] = {"kind": action.kind, f"{action.field}_from": ref}
    if offer.device is not None:
        query["device"] = offer.device
    if offer.model:
        query["model"] = offer.model
    return f"{reverse('jobs-new')}?{urlencode(query)}"


def actions_for(user: Any, job: Job | Any, offered: Mapping[str, Offer] | None = None) -> list[ResultAction]:
    """The actions of a finished result (a job row, or a gallery card with ``pk``, ``kind`` and ``state``), for
    ``user``: none for a viewer, a result not done, or one nobody's device can use. "Run again" is the job
    page's own button."""
    if not getattr(user, "can_submit", False) or job.state != JobState.DONE:
        return []
    offered = offers(user) if offered is None else offered
    return [
        ResultAction(a.name, a.label, action_url(a, offered[a.name], job.pk))
        for a in ACTIONS
        if a.name in offered and job.kind == a.source and fits(job.kind, a.field)
    ]


def with_actions(user: Any, cards: list[Any]) -> list[Any]:
    """Gallery cards (``jobs.doors.filters.GalleryCard``) with their actions for ``user`` (devices read once)."""
    sources = {a.source for a in ACTIONS}
    if not getattr(user, "can_submit", False) or not any(
        c.state == JobState.DONE and c.kind in sources for c in cards
    ):
        return cards  # nothing to offer: no device is read
    offered = offers(user)
    return [replace(c, actions=tuple((a.label, a.url) for a in actions_for(user, c, offered))) for c in cards]


# -- the form filled in from a result ------------------------------------------------------------------------------
FROM = "_from"


@dataclass(frozen=True)
class FromResult:
    """A file input filled with another job's result: the reference, and what the form shows of it."""

    field: str
    ref: ResultRef
    title: str
    thumb_url: str
    state: str

    @property
    def value(self) -> str:
        return f"{self.ref.job_id}:{self.ref.artifact}" if self.ref.artifact else str(self.ref.job_id)


def parse_from(raw: str) -> ResultRef | None:
    """ "12" or "12:image-1.png" as a reference (None for anything else)."""
    head, _sep, artifact = str(raw or "").strip().partition(":")
    pk = parse_id(head)
    if pk is None or len(artifact) > 200:
        return None
    return ResultRef(pk, artifact or None)


def _thumb(job: Job, field: str, artifact: str | None) -> str:
    """The picture the form shows for the result: the thumbnail (or the picture itself); "" for a recording or a
    result not made yet."""
    if job.state != JobState.DONE or Artifact.Kind.IMAGE not in takes(field):
        return ""
    thumb = job.artifacts.filter(kind=Artifact.Kind.THUMB).order_by("id").first()
    shown = thumb or fitting_artifact(job, field, artifact)
    return reverse("jobs-file", args=[job.pk, shown.pk]) if shown else ""


def refs_in(request: HttpRequest, fields: Any) -> dict[str, FromResult]:
    """The results the request's ``<field>_from`` values name for the form's file inputs (``fields``: names).
    A job ``request.user`` may not see is Http404, as its page is; a malformed value or a result that does not
    fit the field, too (nothing to show or queue)."""
    data = request.POST if request.method == "POST" else request.GET
    out: dict[str, FromResult] = {}
    for field in fields:
        raw = data.get(f"{field}{FROM}")
        if raw in (None, "") or not takes(field):
            continue
        ref = parse_from(raw)
        if ref is None:
            raise Http404("No such job.")
        job = job_for(request.user, ref.job_id)
        if job.hidden_at is not None or not fits(job.kind, field):
            raise Http404("No such job.")
        out[field] = FromResult(field, ref, job_title(job), _thumb(job, field, ref.artifact), job.state)
    return out


def mark_from(form: JobForm | None, refs: Mapping[str, FromResult]) -> None:
    """Each file input of the form filled from a result knows it (the template shows the result, not an upload)."""
    if form is None:
        return
    for name in file_fields(form):
        form[name].from_result = refs.get(name)


def from_initial(request: HttpRequest, kind: str, refs: Mapping[str, FromResult]) -> dict[str, Any]:
    """What a form opened from a result starts with: the model the action chose (a voice-cloning one), a
    TensorSharp video's "start image to video" mode, a cloned voice's words (the speech job's own text)."""
    if not refs:
        return {}
    initial: dict[str, Any] = {}
    if model := request.GET.get("model"):
        initial["model"] = model[:200]
    if kind == JobKind.VIDEO and ("start_image" in refs or "end_image" in refs):
        initial["video_mode"] = "fl2v" if "end_image" in refs else "i2v"
    if voice := refs.get("ref_audio"):  # "Use this voice": the hub's own recording says its job's text
        source = job_for(request.user, voice.ref.job_id)  # refs_in has checked it may be seen
        if source.kind == JobKind.SPEECH and isinstance(text := source.params.get("input"), str):
            initial["ref_text"] = text[:2000]
    return initial


# -- "then …" steps -----------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Then:
    """A step the form can queue after its job, on that job's result: a checkbox and its few fields."""

    name: str
    label: str
    action: str  # the result action it is (its capability)


THENS: dict[str, tuple[Then, ...]] = {
    JobKind.IMAGE: (
        Then("animate", "Then animate it", "animate"),
        Then("mesh", "Then make 3D of it", "mesh"),
    ),
}
SECONDS_DEFAULT = 2


def thens_for(user: Any, kind: str, offered: Mapping[str, Offer] | None = None) -> list[Then]:
    """The "then" steps the form of ``kind`` offers ``user`` (those some device of theirs can do)."""
    steps = THENS.get(kind, ())
    if not steps:
        return []
    offered = offers(user) if offered is None else offered
    return [t for t in steps if t.action in offered]


def ticked(data: Mapping[str, Any], thens: list[Then]) -> list[Then]:
    return [t for t in thens if data.get(f"then_{t.name}") in ("1", "on", "true")]


def _area(size: str) -> int:
    w, _sep, h = str(size).partition("x")
    return parse_int(w, 0, minimum=0) * parse_int(h, 0, minimum=0)


def _shape(w: int, h: int) -> int:
    return (w > h) - (w < h)  # 1 landscape, -1 portrait, 0 square


def video_size(user: Any, data: Mapping[str, Any]) -> str:
    """The canvas a "then animate it" step asks for where the devices offer a list of sizes (a Tiiny's): the
    smallest (the quickest render, as the form starts with) of the picture's orientation, among the sizes of the
    devices that animate pictures; "" where none offers a list (TensorSharp's width and height have defaults)."""
    sizes: set[str] = set()
    for device in pool_devices(user, JobKind.VIDEO):
        form = form_class_for(device.kind, JobKind.VIDEO)(device=device, user=user)
        if "size" in form.fields and "start_image" in form.fields:
            sizes |= {str(c) for c, _label in form.fields["size"].choices}
    if not sizes:
        return ""
    w, _sep, h = str(data.get("size") or "").partition("x")
    w, h = parse_int(data.get("width") or w, 0, minimum=0), parse_int(data.get("height") or h, 0, minimum=0)
    if w and h and _shape(w, h) != 0:
        alike = [s for s in sizes if _shape(*map(int, s.split("x"))) == _shape(w, h)]
        sizes = set(alike) or sizes
    return min(sorted(sizes), key=_area)


def then_step(then: Then, data: Mapping[str, Any], user: Any = None) -> ChainStep:
    """The step's request: the earlier step's first picture as its input, its few fields from the form."""
    action = BY_NAME[then.action]
    fields: dict[str, Any] = {}
    if then.name == "animate":
        prompt = str(data.get("then_animate_prompt") or data.get("prompt") or "").strip()
        fields = {
            "prompt": prompt[:2000],
            "seconds": parse_int(data.get("then_animate_seconds"), SECONDS_DEFAULT, minimum=1),
            "video_mode": "i2v",
        }
        if size := video_size(user, data):
            fields["size"] = size
    return ChainStep(action.kind, fields, files={action.field: StepRef(0)})


def then_labels(thens: list[Then]) -> list[str]:
    return [t.label for t in thens]


# -- the page's submit -------------------------------------------------------------------------------------------
#: What the page posts besides the first step's own fields.
_NOT_FIELDS = {"csrfmiddlewaretoken", "submit_token", "device", "kind", "fields_for", "unstash", "again"}


def _first_data(request: HttpRequest, form: JobForm) -> dict[str, Any]:
    """The first step's fields as the page posted them (a multiple choice stays a list; a checkbox left unticked
    is off, not the form's default)."""
    data: dict[str, Any] = {}
    for key, values in request.POST.lists():
        if key in _NOT_FIELDS or key.startswith("then_") or key.endswith(FROM):
            continue
        data[key] = values if len(values) > 1 else values[0]
    for name, field in form.fields.items():
        if isinstance(field, forms.BooleanField) and name not in data:
            data[name] = ""
    return data


def wants_chain(request: HttpRequest, form: JobForm, thens: list[Then]) -> bool:
    """Whether the page's POST goes the chain's way: a file filled from a result, or a "then" step ticked."""
    return bool(ticked(request.POST, thens)) or any(
        request.POST.get(f"{name}{FROM}") for name in file_fields(form)
    )


def submit_page_chain(
    request: HttpRequest,
    form: JobForm,
    refs: Mapping[str, FromResult],
    thens: list[Then],
    token: str | None,
    *,
    pool: bool,
) -> ChainQueued | None:
    """The page's job and its "then" steps queued in one go (all or nothing); None when a step is refused, with
    the reason on the form: the first step's on its fields, a later one's naming the step and its field."""
    errors = (
        form.errors
    )  # the page's form checked alone: "a picture is required" where the result is the picture
    for name in refs:
        errors.pop(name, None)
    files: dict[str, Any] = {k: v for k, v in form.files.items() if k not in refs}
    files.update({name: r.ref for name, r in refs.items()})
    first = ChainStep(form.kind, _first_data(request, form), files, None if pool else form.device)
    chosen = ticked(request.POST, thens)
    steps = [first, *(then_step(t, request.POST, request.user) for t in chosen)]
    try:
        return submit_chain(owner=request.user, steps=steps, idempotency_key=token)
    except ChainRefused as exc:
        if exc.step == 0:
            show_refusal(form, exc)
        else:
            form.add_error(None, step_refusal(chosen[exc.step - 1], exc))
        return None
    except RequestInvalid as exc:
        show_refusal(form, exc)
        return None


def step_refusal(then: Then, exc: RequestInvalid) -> str:
    """ "Step 2, then animate it — Length: The device renders 1 to 7 seconds." """
    name, message = exc.first()
    label = {"seconds": "Length", "prompt": "Prompt", "start_image": "Start image", "image": "Picture"}.get(
        name or "", ""
    )
    index = next(i for i, t in enumerate(THENS[JobKind.IMAGE]) if t.name == then.name)
    step = f"Step {index + 2}, {then.label.lower()}"
    return f"{step} — {label}: {message}" if label else f"{step}: {message}"


# -- the summary -------------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class ChainPreview:
    """What the summary says of the "then" steps: how many, when the last is expected, or which is refused."""

    steps: int
    last_ready: dt.datetime | None
    refused: str = ""


def _step_admission(user: Any, step: ChainStep, release: dt.datetime | None) -> tuple[Admission | None, str]:
    """The step judged on every device of its kind's pool, released at ``release`` (its parent's expected end):
    the earliest admission, or why none admits it."""
    refs = {name: ResultRef(1) for name, v in step.files.items() if isinstance(v, StepRef)}
    fit: list[tuple[Any, Admission]] = []
    why = ""
    for device in pool_devices(user, step.kind):
        data = with_defaults(owner=user, device=device, kind=step.kind, data=dict(step.data), files=refs)
        form = form_for(owner=user, device=device, kind=step.kind, data=data, files=stand_ins(refs))
        form.chained = Chained(release, (), [])
        if not form.is_valid():
            why = why or RequestInvalid(form.errors).first()[1]
            continue
        admission = form_admission(form)
        if admission.refused:
            why = why or admission.refused
        else:
            fit.append((device, admission))
    if not fit:
        return None, why or "No device can do it right now."
    return earliest_of(fit)[1], ""


def chain_preview(
    user: Any, first: Admission | None, data: Mapping[str, Any], thens: list[Then]
) -> ChainPreview | None:
    """The summary's line for the ticked "then" steps, after the first step's admission ``first`` (the same
    admission each step gets at submit, with the first step's expected end as its release)."""
    chosen = ticked(data, thens)
    if not chosen or first is None or first.refused:
        return None
    last = first.ready_at
    for then in chosen:
        admission, why = _step_admission(user, then_step(then, data, user), first.ready_at)
        if admission is None:
            return ChainPreview(len(chosen) + 1, None, step_refusal(then, RequestInvalid({"__all__": [why]})))
        if admission.ready_at and (last is None or admission.ready_at > last):
            last = admission.ready_at
    return ChainPreview(len(chosen) + 1, last)


__all__ = [
    "ACTIONS",
    "ChainPreview",
    "FromResult",
    "Offer",
    "ResultAction",
    "Then",
    "action_url",
    "actions_for",
    "chain_preview",
    "from_initial",
    "mark_from",
    "offers",
    "parse_from",
    "refs_in",
    "submit_page_chain",
    "summary_form",
    "thens_for",
    "wants_chain",
]


def summary_form(request: HttpRequest, form: JobForm, refs: Mapping[str, FromResult]) -> JobForm:
    """The summary's form with the results it takes standing in for uploads, planned after their jobs (as
    ``check_request`` does at submit): its estimate counts the parents' expected ends."""
    if not refs:
        return form
    wanted = {name: r.ref for name, r in refs.items() if name in form.fields}
    try:
        parents = check_refs(owner=request.user, refs=wanted)
    except RequestInvalid:
        return form  # the submit names what is wrong with it
    files = {**{k: v for k, v in (form.files or {}).items() if k not in wanted}, **stand_ins(wanted)}
    judged = form_for(owner=request.user, device=form.device, kind=form.kind, data=form.data, files=files)
    judged.chained = chained(parents)
    return judged


# -- the job page's chain -----------------------------------------------------------------------------------------
FIELD_WORDS = {
    "start_image": "start frame",
    "end_image": "end frame",
    "image": "picture",
    "ref_audio": "voice",
}


@dataclass(frozen=True)
class LinkedJob:
    """A parent or child as the job page shows it: "made from job 12, “a lighthouse” (its start frame)"."""

    job_id: int
    title: str
    field: str
    state: str
    state_label: str
    thumb_url: str
    exists: bool


def job_chain(viewer: Any, job: Job) -> dict[str, list[LinkedJob]]:
    """The job's parents and children the viewer may see (``jobs.core.selectors.job_links``), each with its
    title, state and (a picture's) thumbnail."""
    parents, children = job_links(viewer, job)
    ids = {link.job_id for link in parents + children if link.job_id is not None}
    rows = Job.objects.in_bulk(ids) if ids else {}
    thumbs = dict(
        Artifact.objects.filter(job_id__in=ids, kind=Artifact.Kind.THUMB)
        .order_by("-id")
        .values_list("job_id", "pk")
    )

    def shown(link: Any) -> LinkedJob:
        other = rows.get(link.job_id)
        if other is None:
            return LinkedJob(link.job_id or 0, f"job {link.job_id} (deleted)", FIELD_WORDS.get(link.field, link.field),
                             "", "", "", False)  # fmt: skip
        thumb = thumbs.get(other.pk)
        url = reverse("jobs-file", args=[other.pk, thumb]) if thumb and other.state == JobState.DONE else ""
        return LinkedJob(other.pk, job_title(other), FIELD_WORDS.get(link.field, link.field), other.state,
                         other.get_state_display(), url, True)  # fmt: skip

    return {"parents": [shown(p) for p in parents], "children": [shown(c) for c in children]}

"""Context builders for the job pages (kept out of the views so each view stays a few lines)."""

from __future__ import annotations

import datetime as dt
from typing import Any

from django import forms
from django.contrib import messages
from django.http import HttpRequest
from django.utils import timezone

from devices.live import fragment_context
from devices.models import Device
from devices.selectors import device_list_for
from hub.parsing import parse_int
from jobs.core import share_links
from jobs.core.bookmarks import is_bookmarked
from jobs.core.selectors import PagePlan, can_manage, job_plan_line
from jobs.doors.batch import MAX_BATCH, MODES
from jobs.doors.intake import (
    ANY_DEVICE,
    any_kinds,
    file_fields,
    form_again,
    form_for,
    new_submit_token,
    no_device_can,
    submit_token_of,
    usable_devices,
    usable_kinds,
)
from jobs.doors.result_actions import actions_for, job_chain
from jobs.files.story import settings_of
from jobs.kinds.forms import JobForm
from jobs.kinds.table import form_class_for
from jobs.live.fragments import RECENT_SHOWN, JobRow, job_context, queue_context, sparkline, sparklines
from jobs.models import Job, JobKind, JobState
from jobs.queue.admission import Admission, RequestInvalid, earliest_of, form_admission
from jobs.queue.presets import PROMPT_FIELDS, presets_in_effect, with_preset
from jobs.queue.services import share_link_url

KIND_HINTS = {
    JobKind.VIDEO: "A short clip from a prompt (up to 7 s).",
    JobKind.MESH: "A 3D model (GLB) from one picture.",
    JobKind.MUSIC: "A loop or a song.",
    JobKind.IMAGE: "A picture from a prompt, or an edit of one.",
    JobKind.SPEECH: "Text read aloud.",
}
PARAM_LABELS = {
    "prompt": "Prompt",
    "size": "Size",
    "seconds": "Length",
    "steps": "Steps",
    "seed": "Seed",
    "width": "Width",
    "height": "Height",
    "frames": "Frames",
    "cfg": "Guidance",
    "video_mode": "Mode",
    "stages": "Stages",
    "input": "Text",
    "voice": "Voice",
    "instruct": "Voice description",
    "n": "Images",
    "caption": "Description",
    "generation_type": "Tracks",
    "negative_prompt": "Avoid",
    "response_format": "Format",
    "inputs": "Inputs",
}


# What people decide first comes first; tuning knobs (seed, guidance, ...) come last.
FIELD_ORDER = [
    "model",
    "prompt",
    "caption",
    "lyrics",
    "input",
    "voice",
    "instruct",
    "ref_audio",
    "ref_text",
    "image",
    "video_mode",
    "size",
    "width",
    "height",
    "seconds",
    "frames",
    "steps",
    "ts_steps",
    "n",
    "generation_type",
    "start_image",
    "end_image",
    "simplify",
    "texture",
    "target_faces",
    "response_format",
    "language",
    "negative_prompt",
    "generate_audio",
    "cfg",
    "cfg_scale",
    "seed",
]


def _arrange(form: JobForm) -> None:
    form.order_fields([name for name in FIELD_ORDER if name in form.fields])
    for name in ("prompt", "lyrics", "input"):
        if name in form.fields:
            form.fields[name].widget.attrs["rows"] = 4
    size = form.fields.get("size")
    if size is not None and not form.is_bound and not form.initial.get("size") and size.choices:
        # Start from the cheapest canvas: the quickest render, and never one the hub would refuse.
        size.initial = min((c for c, _ in size.choices), key=_area)


def _area(size: str) -> int:
    w, _, h = str(size).partition("x")
    return parse_int(w, 0, minimum=0) * parse_int(h, 0, minimum=0)


def fields_not_for(form: JobForm, kind: str, model: str, voice_spec: Any = None) -> set[str]:
    """Fields the chosen model doesn't use, left out of the page (the form treats them as optional)."""
    if kind == JobKind.MUSIC and hasattr(form, "_is_song"):
        song = form._is_song(model)
        return {"prompt", "steps", "cfg_scale"} if song else {"caption", "lyrics", "generation_type"}
    if kind == JobKind.SPEECH and voice_spec is not None:
        return {
            "preset": {"instruct", "ref_audio", "ref_text"},
            "instruct": {"ref_audio", "ref_text"},
            "clone": {"instruct"},
        }.get(voice_spec.mode, set())
    return set()


def _current_model(form: JobForm) -> str:
    return form.chosen_model()


def refusal_for(
    form: JobForm | None, admission: Admission | None, skip: set[str] | frozenset = frozenset()
) -> str:
    """Why the form can't be queued as it stands ("" when it can, or when it is only incomplete).

    The admission's refusal (too long for the device, a time too far ahead), or the first message about a value
    the person gave that the form refuses ("SongGeneration makes songs of 10 to 240 seconds."). A field left
    empty isn't a refusal: the summary asks for it, and the button stays usable so the server can say which.
    """
    if admission is not None and admission.refused:
        return admission.refused
    if form is None or not form.is_bound:
        return ""
    for name, errors in form.errors.items():
        if name == "__all__":
            return errors[0]
        field = form.fields.get(name)
        if field is None or name in skip or isinstance(field, forms.FileField):
            continue
        raw = form.data.getlist(name) if hasattr(form.data, "getlist") else [form.data.get(name)]
        if any(str(v).strip() for v in raw if v is not None):
            return errors[0]
    return ""


def new_job_context(
    request: HttpRequest,
    device: Device | None,
    kind: str,
    *,
    form: JobForm | None,
    again: Job | None = None,
    pool: list[Device] | None = None,
) -> dict[str, Any]:
    """The submit page's context. With ``pool`` ("any capable device"), ``device`` is the pool's device whose form
    is shown; the kinds offered are every device's."""
    ctx: dict[str, Any] = {
        **_choice_context(request, device, pool or []),
        # The devices the person may use (their groups': ``usable_devices``).
        "devices": usable_devices(request.user).order_by("name").only("pk", "name", "state"),
        "kind": kind,
        "kind_label": JobKind(kind).label,
        "form": form,
        "again": again,
        "can_submit": request.user.can_submit,
        "admission": None,
        # A double click or a retried POST sends the same token again and queues nothing new; a form that
        # came back with errors keeps its token (nothing was queued under it).
        "submit_token": submit_token_of(request) or new_submit_token(),
        # the batch mode (jobs.doors.batch): what was chosen survives a refused try
        "batch_modes": list(MODES.items()),
        "batch_max": MAX_BATCH,
        "batch_mode": request.POST.get("batch_mode", "") if request.method == "POST" else "",
        "batch_count": request.POST.get("batch_count", "") if request.method == "POST" else "",
    }
    if device is not None:
        ctx.update(queue_context(device))
    # The preset picker: one's own presets, and the household's that one's own don't hide.
    if request.user.is_authenticated:
        # Read only where the picker is drawn (the template calls it), not for each summary under the form.
        ctx["presets"] = lambda: presets_in_effect(request.user, kind)
        ctx["preset_name"] = request.GET.get("preset", "")
    if form is not None:
        _arrange(form)
        model = _current_model(form)
        ctx["model"] = model
        if kind == JobKind.SPEECH and model:
            ctx["voice_spec"] = form.voice_spec(model)
        ctx["skip"] = fields_not_for(form, kind, model, ctx.get("voice_spec"))
        ctx["missing"] = [
            form.fields[name].label or name
            for name in form.errors
            if name in form.fields and not isinstance(form.fields[name], forms.FileField)
        ]
        ctx["refusal"] = refusal_for(form, None, ctx["skip"]) if form.is_bound else ""
        # File inputs: what the page kept from the last try, or that the file must be chosen again.
        _mark_uploads(form)
    return ctx


def preset_initial(request: HttpRequest, kind: str) -> dict[str, Any]:
    """What the new-job form starts with when a preset is picked (``?preset=<name>``): its values under the text
    already typed (the prompt goes along with the pick, ``templates/jobs/new.html``), so picking one never loses
    what was written; then the person may change any field. An unknown preset: a message, the form's defaults."""
    typed = {k: request.GET[k] for k in PROMPT_FIELDS if request.GET.get(k)}
    try:
        return with_preset(owner=request.user, kind=kind, name=request.GET.get("preset"), data=typed)
    except RequestInvalid as exc:
        messages.error(request, exc.first()[1])
        return typed


def _choice_context(request: HttpRequest, device: Device | None, pool: list[Device]) -> dict[str, Any]:
    """The device choice: the device (or the pool's device whose form is shown), the pool, the kinds offered."""
    kinds = any_kinds(request.user) if pool else usable_kinds(request.user, device) if device else []
    return {
        "device": device,
        "pool": pool,
        # The picker's value and the kind links' device: "any", or the device's id.
        "device_choice": ANY_DEVICE if pool else (device.pk if device else ""),
        # The pool can start now unless every device of it is away (the page then says so, as for one device).
        "pool_online": any(d.state == Device.State.ONLINE for d in pool),
        "kinds": [(k, JobKind(k).label, KIND_HINTS.get(k, "")) for k in kinds],
    }


def _mark_uploads(form: JobForm) -> None:
    """File inputs: what the page kept from the last try, or that the file must be chosen again."""
    kept = getattr(form, "kept_uploads", {})
    lost = getattr(form, "lost_uploads", [])
    for name in file_fields(form):
        bound = form[name]  # the template's {% for f in form %} yields these same (cached) objects
        bound.kept = kept.get(name)
        bound.choose_again = name in lost


#: Fields of the page outside the swapped part (#job-fields), or that can't be given a typed value back.
_NOT_CARRIED = {"model", "when", "not_before", "polite", "shared"}


def swapped_fields_form(form: JobForm) -> JobForm:
    """The form another model's fields are rendered from (the out-of-band swap when the model changes): what was
    typed, with the new model's defaults where a value doesn't fit it (the other model's size or steps) or where
    the field wasn't on the page before (SongGeneration's track choice after Foundation-1)."""
    fresh = type(form)(initial={"model": form.chosen_model()}, device=form.device, user=form.user)
    _arrange(fresh)
    data = form.data.copy()
    for name, field in fresh.fields.items():
        if name in _NOT_CARRIED or isinstance(field, (forms.FileField, forms.BooleanField)):
            continue
        raw, default = data.get(name), fresh[name].initial
        fits = not isinstance(field, forms.ChoiceField) or str(raw) in {str(c) for c, _ in field.choices}
        if raw in (None, "") or not fits:
            data[name] = "" if default is None else default
    shown = type(form)(data, device=form.device, user=form.user)
    _arrange(shown)
    shown.kept_uploads = getattr(form, "kept_uploads", {})
    shown.lost_uploads = getattr(form, "lost_uploads", [])
    _mark_uploads(shown)
    return shown


def pool_admission(
    request: HttpRequest, pool: list[Device], form: JobForm, skip: set[str] | frozenset = frozenset()
) -> tuple[Admission | None, dict[str, Any] | None]:
    """The summary for "any capable device": what is filled in so far, judged on every device of the pool.

    (admission, where): where it would start first and which devices can do exactly this (``where``: the device,
    the names), as the submit's pool will be (``jobs.doors.intake.check_request_any``). When none can: the shown
    device's admission, or, once every device has refused what was given, each device's reason.
    """
    judged = []
    for device in pool:
        on = form if device.pk == form.device.pk else _bound_like(request, form, device)
        judged.append((device, on, admission_for(on)))
    fit = [(d, a) for d, _f, a in judged if a is not None and not a.refused]
    if not fit:
        return _pool_refusal(judged, form, skip), None
    first, admission = earliest_of(fit)
    forms_of = {d.pk: f for d, f, _a in judged}
    same = _request_key(forms_of[first.pk])
    names = [d.name for d, _a in fit if _request_key(forms_of[d.pk]) == same]
    return admission, {"device": first, "names": names}


def _pool_refusal(
    judged: list[tuple[Device, JobForm, Admission | None]], form: JobForm, skip: set[str] | frozenset
) -> Admission | None:
    """No device of the pool can do it: each device's reason once every one has one ("No device can do exactly
    this. Home: …; Office: …"); the shown device's admission while the form is incomplete, or when every device
    says the same."""
    reasons = [(d, a.refused if a is not None else refusal_for(f, None, skip)) for d, f, a in judged]
    shown = next(a for d, _f, a in judged if d.pk == form.device.pk)
    if not all(why for _d, why in reasons) or len({why for _d, why in reasons}) == 1:
        return shown
    return Admission(0.0, None, None, refused=no_device_can(reasons), refused_field="__all__")


def _bound_like(request: HttpRequest, form: JobForm, device: Device) -> JobForm:
    """``form``'s data and files bound to ``device``'s form of the same kind."""
    for f in (form.files or {}).values():
        if hasattr(f, "seek"):
            f.seek(0)
    on = form_for(owner=request.user, device=device, kind=form.kind, data=form.data, files=form.files or None)
    if chained := getattr(form, "chained", None):  # a job's result as an input: planned after that job too
        on.chained = chained
    return on


def _request_key(form: JobForm) -> Any:
    """What makes two devices' requests the same one (the model and the parameters the device is sent)."""
    try:
        return (form.cleaned_data.get("model"), form.cleaned_params())
    except (KeyError, ValueError, TypeError, AttributeError):  # a half-filled form
        return None


def device_line(job: Job) -> dict[str, Any]:
    """Where the job page says the job is: "on Pocket" (pinned), "Any device · waiting on Home" (a pool job
    waiting in Home's lane), "Any device · ran on Office" (after)."""
    if job.pinned:
        return {"any": False, "where": "on"}
    if job.is_waiting:
        where = "waiting on"
    elif job.is_active:
        where = "running on"
    elif job.started_at:
        where = "ran on"
    else:  # cancelled (or failed) before it started
        where = "was waiting on"
    return {"any": True, "where": where}


def admission_for(form: JobForm) -> Admission | None:
    """The summary for what is filled in so far. Missing files don't stop it: the estimate doesn't need them.
    (htmx 2 posts a multipart form's chosen files with each summary request; ``job_admission`` keeps them only
    when the fields are about to be swapped for another model's.)"""
    valid = form.is_valid()
    files_only = bool(form.errors) and all(
        isinstance(form.fields.get(n), forms.FileField) for n in form.errors
    )
    if not (valid or (files_only and form.cleaned_data.get("model"))):
        return None
    try:
        return form_admission(form)
    except (KeyError, ValueError, TypeError):  # a half-filled form the estimator can't price yet
        return None


def again_form(request: HttpRequest, job: Job) -> JobForm:
    """The job's form filled in with its settings (its input files are reused: file fields are optional)."""
    initial = form_class_for(job.device.kind, job.kind).fields_from_job(job)
    return form_again(owner=request.user, job=job, data=request.POST or None, initial=initial)


# -- a form filled in from a file the hub made (``jobs.files.story``) ---------------------------------------------
NO_STORY = "This file carries no hub settings: only a picture the hub made (downloaded from a job page) fills in the form."


def story_kind(story: dict[str, Any] | None) -> str | None:
    """The kind of job a file's story was made by, if it is one the hub knows."""
    kind = (story or {}).get("kind")
    return kind if kind in JobKind.values else None


def story_form(
    request: HttpRequest, device: Device, kind: str, story: dict[str, Any] | None, filename: str
) -> tuple[JobForm, str]:
    """The kind's form (unbound) filled in with a file's story, and a sentence on what was filled in: only the
    file's own values (it names a job, but nothing is looked up by it). The kind's form maps the settings to its
    fields (``fields_from_params``, as "run again" does)."""
    form_class = form_class_for(device.kind, kind)
    if story is None:
        return form_class(None, None, device=device, user=request.user), NO_STORY
    initial = {**form_class.fields_from_params(settings_of(story)), "model": story.get("model")}
    form = form_class(initial=initial, device=device, user=request.user)
    note = f"Filled in from {filename}: how it was made. Check the settings, then queue it."
    if story_kind(story) != kind:
        told = JobKind(story_kind(story)).label.lower() if story_kind(story) else "unknown"
        note = f"{filename} is a {told} result, which {device.name} can't make; its prompt and settings are filled in where this form has them."
    elif story.get("model") not in {m for m, _ in form.fields["model"].choices}:
        note += f" Its model ({story.get('model')}) isn't on {device.name}; choose one of these."
    return form, note


def param_rows(job: Job) -> list[tuple[str, str]]:
    rows = []
    for key, value in (job.params or {}).items():
        if key == "files" and isinstance(value, dict):  # stored inputs: their names, never server paths
            key, value = "inputs", ", ".join(str(v).rsplit("/", 1)[-1] for v in value.values())
        elif key == "seconds":
            value = f"{value} s"
        elif isinstance(value, list):
            value = ", ".join(map(str, value))
        elif isinstance(value, bool):
            value = "yes" if value else "no"
        rows.append((PARAM_LABELS.get(key, key.replace("_", " ").capitalize()), str(value)))
    return rows


def job_spark(job: Job) -> dict[str, Any]:
    """The device's NPU from a minute before the job started until it ended (or now)."""
    if not job.started_at:
        return {"points": ""}
    until = (job.finished_at or timezone.now()) + dt.timedelta(minutes=1)
    return sparkline(job.device_id, since=job.started_at - dt.timedelta(minutes=1), until=until)


def detail_context(request: HttpRequest, job: Job, *, light: bool = False) -> dict[str, Any]:
    """The job page's context; ``light`` is the action box alone (no events, files or chart)."""
    user = request.user
    ctx: dict[str, Any] = {"job": job} if light else job_context(job)
    ctx["may"] = {"manage": can_manage(user, job), "submit": user.can_submit}
    ctx["bookmarked"] = is_bookmarked(user, job)
    # "Add to album": a finished result of theirs or the household's (jobs.queue.albums checks it again on adding).
    ctx["album_add"] = job.state == JobState.DONE and (job.owner_id == user.pk or job.shared)
    ctx["share_url"] = share_link_url(request=request, job=job)  # on HUB_PUBLIC_URL when set
    if job.share_token and ctx["may"]["manage"]:  # the link's options (jobs.core.share_links), for its owner
        ctx["share_choices"] = [(value, label) for value, label, _ in share_links.EXPIRY_CHOICES]
        ctx["share_expired"] = share_links.is_expired(job)
    if not light:
        ctx["device_line"] = device_line(job)
        # The version everyone who may view the job may read, as its pushes (jobs.live.fragments.render_plan_line).
        ctx["plan_line"] = job_plan_line(job)
        ctx["params"] = param_rows(job)
        ctx["model_name"] = job.model_id.rsplit("/", 1)[-1]
        ctx["spark"] = job_spark(job)
        # What the result can become next, and the jobs it was made from or feeds (jobs.doors.result_actions).
        ctx["result_actions"] = actions_for(user, job)
        ctx["chain"] = job_chain(user, job)
    return ctx


def dashboard_context(user: Any) -> dict[str, Any]:
    """Per device: card, gauges, sparkline, running job and plan; then the person's recent jobs.

    7 queries whatever the number of devices (the session, the person, the devices, then their active jobs, plan
    counts and sparklines read together: ``PagePlan.for_devices``, ``sparklines``; my recent jobs), plus one per
    device whose plan has entries; ``test_views_dashboard`` holds the budget.
    """
    now = timezone.now()
    devices = list(device_list_for(user).defer(None))
    plans = PagePlan.for_devices(devices)
    sparks = sparklines([d.pk for d in devices], since=now - dt.timedelta(hours=1), until=now)
    panels = []
    for device in devices:
        panel = fragment_context(device)
        # the everyone version, exactly what pushes send
        panel.update(queue_context(device, now=now, plan=plans[device.pk]))
        panel["spark"] = sparks[device.pk]
        panels.append(panel)
    # (as the pushes' list, jobs.live.fragments.recent_jobs: one deleted through /v1 is gone from it)
    recent = list(
        Job.objects.filter(owner=user, hidden_at__isnull=True).order_by("-created", "-id")[:RECENT_SHOWN]
    )
    shown = {d.pk: d for d in devices}  # every device is on the page: a join would build each again per job
    for job in recent:
        job.device = shown.get(job.device_id) or job.device
    return {
        "panels": panels,
        "recent": [JobRow.of(j) for j in recent],
        # Nothing to watch (no device, no job) keeps the plain socket: the live wire still works.
        "watch": ",".join(
            [f"device:{p['device'].pk},queue:{p['device'].pk}" for p in panels]
            + ([f"mine:{user.pk}"] if recent else [])
        ),
        "wire": None,
    }

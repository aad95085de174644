"""Preset pages: the Presets page (one's own and the household's; rename, delete after a confirmation, export and
import), and "Save as preset" from the new-job form.

Every rule is ``jobs.queue.presets``'s (the same service REST uses); these views check access, read the request,
call it, and render or redirect. A refused save or rename keeps what was typed; a refused import saves nothing.
"""

from __future__ import annotations

import json
from typing import Any

from django.contrib import messages
from django.core.exceptions import PermissionDenied
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.utils.http import urlencode
from django.views.decorators.http import require_GET, require_http_methods, require_POST

from hub.accounts.decorators import member_required
from jobs.doors.intake import page_request, typed_form
from jobs.doors.pages import new_job_context
from jobs.models import JobKind, Preset
from jobs.queue import presets as svc
from jobs.queue.admission import RequestInvalid

PAGE = "jobs/presets.html"
#: An import is a small file of settings; anything bigger is refused before it is read.
IMPORT_MAX_BYTES = 512 * 1024


def _shown(value: Any) -> str:
    return ("on" if value else "off") if isinstance(value, bool) else str(value)


def _rows(presets: list[Preset], user: Any) -> list[dict[str, Any]]:
    return [
        {
            "preset": p,
            "kind_label": JobKind(p.kind).label,
            "may_change": svc.may_change(user, p),
            "settings": ", ".join(f"{k} {_shown(v)}" for k, v in sorted(p.values.items()))
            or "the form's defaults",
        }
        for p in presets
    ]


def _page(request: HttpRequest, *, status: int = 200, **extra: Any) -> HttpResponse:
    visible = list(svc.presets_visible_to(request.user))
    ctx = {
        "own": _rows([p for p in visible if p.owner_id is not None], request.user),
        "household": _rows([p for p in visible if p.owner_id is None], request.user),
        "can_keep": request.user.can_submit,
        **extra,
    }
    return render(request, PAGE, ctx, status=status)


@require_GET
def presets(request: HttpRequest) -> HttpResponse:
    return _page(request)


def _new_job_url(kind: str, device: Any, name: str) -> str:
    query = {"kind": kind, "preset": name, **({"device": device} if device not in (None, "") else {})}
    return f"{reverse('jobs-new')}?{urlencode(query)}"


@member_required
@require_POST
def preset_save(request: HttpRequest) -> HttpResponse:
    """ "Save as preset" on the new-job form: the form's settings (not its files; its prompt only when asked),
    then back to the form with the preset picked. A refusal shows the form again with what was typed."""
    taken = page_request(request)
    data = request.POST
    try:
        preset = svc.preset_create(
            by=request.user,
            kind=taken.kind,
            name=data.get("preset_name"),
            values=svc.values_from_form(taken.kind, data, keep_prompt=bool(data.get("preset_keep_prompt"))),
            household=bool(data.get("preset_household")),
        )
    except RequestInvalid as exc:
        # A name's error needs no "name:" prefix: the box it names is opened beside it (preset_save_failed).
        why = " ".join(exc.errors["name"]) if set(exc.errors) == {"name"} else exc.summary()
        messages.error(request, f"The preset was not saved. {why}")
        if taken.device is None:
            return redirect("jobs-presets")
        ctx = new_job_context(
            request, taken.device, taken.kind, form=typed_form(request, taken), pool=taken.pool
        )
        ctx["preset_name_typed"] = data.get("preset_name", "")
        ctx["preset_save_failed"] = True
        return render(request, "jobs/new.html", ctx, status=400)
    messages.success(request, f"Saved the preset “{preset.name}”; pick it here next time.")
    return redirect(_new_job_url(taken.kind, data.get("device"), preset.name))


def _preset(request: HttpRequest, preset_id: int) -> Preset:
    return svc.preset_for(request.user, preset_id)


@member_required
@require_POST
def preset_rename(request: HttpRequest, preset_id: int) -> HttpResponse:
    preset = _preset(request, preset_id)
    try:
        svc.preset_update(preset=preset, by=request.user, name=request.POST.get("name", ""))
    except RequestInvalid as exc:
        typed = {"id": preset.pk, "name": request.POST.get("name", ""), "error": exc.first()[1]}
        return _page(request, status=400, rename=typed)
    messages.success(request, f"Renamed to “{preset.name}”.")
    return redirect("jobs-presets")


@member_required
@require_http_methods(["GET", "POST"])
def preset_delete(request: HttpRequest, preset_id: int) -> HttpResponse:
    """A confirmation page, then the POST deletes."""
    preset = _preset(request, preset_id)
    if not svc.may_change(request.user, preset):
        raise PermissionDenied("Only admins change the household's presets.")
    if request.method == "POST":
        svc.preset_delete(preset=preset, by=request.user)
        messages.success(request, f"Deleted the preset “{preset.name}”.")
        return redirect("jobs-presets")
    return render(
        request, "jobs/preset_delete.html", {"preset": preset, "kind_label": JobKind(preset.kind).label}
    )


def _download(payload: dict[str, Any], filename: str) -> HttpResponse:
    response = JsonResponse(payload, json_dumps_params={"indent": 2, "ensure_ascii": False})
    response["Content-Disposition"] = f'attachment; filename="{filename}"'
    return response


@require_GET
def presets_export(request: HttpRequest) -> HttpResponse:
    """Your presets (``?household=1``: the household's) as a JSON file that import takes back."""
    household = request.GET.get("household") == "1"
    chosen = [p for p in svc.presets_visible_to(request.user) if (p.owner_id is None) == household]
    return _download(svc.presets_export(chosen), "household-presets.json" if household else "presets.json")


@require_GET
def preset_export(request: HttpRequest, preset_id: int) -> HttpResponse:
    preset = _preset(request, preset_id)
    slug = "".join(c if c.isalnum() else "-" for c in preset.name).strip("-")[:40] or "preset"
    return _download(svc.presets_export([preset]), f"preset-{preset.kind}-{slug}.json")


def _uploaded_json(request: HttpRequest) -> Any:
    """The uploaded file's JSON, or ``RequestInvalid`` on ``file`` saying what is wrong with it."""
    upload = request.FILES.get("file")
    if upload is None:
        raise RequestInvalid({"file": ["Choose a presets file (JSON, as Export writes it)."]})
    if upload.size > IMPORT_MAX_BYTES:
        raise RequestInvalid(
            {"file": [f"This file is too big for presets (at most {IMPORT_MAX_BYTES // 1024} KB)."]}
        )
    try:
        return json.loads(upload.read())
    except (ValueError, RecursionError):
        raise RequestInvalid(
            {"file": ["This file is not valid JSON; export presets here to see the format."]}
        ) from None


@member_required
@require_POST
def presets_import(request: HttpRequest) -> HttpResponse:
    """An exported file back in: all of it, or (with a message naming each problem) none of it."""
    try:
        payload = _uploaded_json(request)
        made = svc.presets_import(
            by=request.user, payload=payload, household=bool(request.POST.get("household"))
        )
    except RequestInvalid as exc:
        problems = [f"{name}: {' '.join(msgs)}" if name not in ("__all__", "file") else " ".join(msgs)
                    for name, msgs in exc.errors.items()]  # fmt: skip
        return _page(request, status=400, import_problems=problems)
    messages.success(request, f"Imported {len(made)} preset{'s' if len(made) != 1 else ''}.")
    return redirect("jobs-presets")


__all__ = [
    "preset_delete",
    "preset_export",
    "preset_rename",
    "preset_save",
    "presets",
    "presets_export",
    "presets_import",
]

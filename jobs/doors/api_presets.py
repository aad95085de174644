"""REST routes for presets (``/api/presets``): list, create, get, change, delete, export and import.

A door to what the Presets page does, through the same service (``jobs.queue.presets``): one's own presets and the
household's are visible (another person's is "No such preset.", a 404 exactly like a missing one); the household's
are changed by admins only (403). Values are checked against the kind's form fields with the page's messages
(422 naming the field). GET needs the ``read`` scope; everything that changes a preset ``submit``.
A submit names a preset with ``"preset": "<name>"`` in ``POST /api/jobs`` (``jobs.doors.api``).
"""

from __future__ import annotations

from typing import Any, Literal

from django.http import HttpRequest
from ninja import Query, Router, Schema
from ninja.responses import Status
from pydantic import Field

from hub.api_auth import require_scope
from hub.api_errors import ERRORS
from hub.parsing import parse_id
from jobs.doors.api import json_body, json_request_body
from jobs.kinds.schemas import Strict
from jobs.models import JobKind, Preset
from jobs.queue import presets as svc
from jobs.queue.admission import RequestInvalid

router = Router(tags=["presets"])

READ, SUBMIT = "read", "submit"
KindName = Literal["video", "mesh", "music", "image", "speech"]


class PresetIn(Strict):
    name: str = Field(description="Unique per kind among yours (or the household's).", max_length=200)
    kind: KindName
    values: dict[str, Any] = Field(
        default_factory=dict,
        description="The kind's form fields (as for `POST /api/jobs`, without files and `not_before`), e.g. "
        '`{"model": "…", "steps": 20, "width": 832}`. Checked against the kind\'s form; a model or size a device '
        "lacks is refused when the preset is used.",
    )
    household: bool = Field(False, description="The household's preset (admins only).")


class PresetPatchIn(Strict):
    name: str | None = Field(None, max_length=200)
    values: dict[str, Any] | None = Field(None, description="Replaces the preset's values.")


class PresetItem(Schema):
    name: str
    kind: str
    values: dict[str, Any]


class PresetImportIn(Strict):
    format: str | None = Field(None, description=f"`{svc.EXPORT_FORMAT}`, as export writes it.")
    presets: list[dict[str, Any]] = Field(description="Each `{name, kind, values}`.")


class PresetOut(Schema):
    id: int
    name: str
    kind: str
    values: dict[str, Any]
    household: bool
    may_change: bool
    created: Any
    updated: Any


class PresetListOut(Schema):
    items: list[PresetOut]


class PresetExportOut(Schema):
    format: str
    presets: list[PresetItem]


def preset_out(request: HttpRequest, preset: Preset) -> dict[str, Any]:
    return {
        "id": preset.pk,
        "name": preset.name,
        "kind": preset.kind,
        "values": preset.values,
        "household": preset.household,
        "may_change": svc.may_change(request.user, preset),
        "created": preset.created,
        "updated": preset.updated,
    }


def _preset(request: HttpRequest, preset_id: str) -> Preset:
    return svc.preset_for(request.user, parse_id(preset_id))


def _kind(kind: str | None) -> str | None:
    if kind not in (None, "") and kind not in JobKind.values:
        raise RequestInvalid({"kind": [f"Unknown kind; one of {', '.join(JobKind.values)}."]})
    return kind or None


@router.get("", url_name="preset_list", response={200: PresetListOut, **ERRORS}, summary="List presets")
def preset_list(
    request: HttpRequest,
    kind: str | None = Query(None, description="video, mesh, music, image, speech."),
):
    """Yours and the household's (`household` true), by kind and name."""
    require_scope(request, READ)
    return {"items": [preset_out(request, p) for p in svc.presets_visible_to(request.user, _kind(kind))]}


@router.post(
    "",
    url_name="preset_create",
    response={201: PresetOut, **ERRORS},
    openapi_extra=json_request_body(PresetIn),
    summary="Create a preset",
)
def preset_create(request: HttpRequest):
    """A preset of yours (or, `household` true, the household's: admins only). A name you already use for the
    kind is a 422 naming `name`."""
    require_scope(request, SUBMIT)
    payload = json_body(request, PresetIn)
    preset = svc.preset_create(
        by=request.user,
        kind=payload.kind,
        name=payload.name,
        values=payload.values,
        household=payload.household,
    )
    return Status(201, preset_out(request, preset))


@router.get(
    "/export", url_name="preset_export", response={200: PresetExportOut, **ERRORS}, summary="Export presets"
)
def preset_export(
    request: HttpRequest,
    household: bool = Query(False, description="The household's presets instead of yours."),
    kind: str | None = Query(None),
):
    """Your presets (or the household's) as JSON that `POST /api/presets/import` takes back."""
    require_scope(request, READ)
    qs = svc.presets_visible_to(request.user, _kind(kind)).filter(owner__isnull=household)
    return svc.presets_export(list(qs))


@router.post(
    "/import",
    url_name="preset_import",
    response={201: PresetListOut, **ERRORS},
    openapi_extra=json_request_body(PresetImportIn),
    summary="Import presets",
)
def preset_import(
    request: HttpRequest,
    household: bool = Query(False, description="Import as the household's presets (admins only)."),
):
    """What export wrote: every preset is checked first, and one bad preset (a 422 naming it, e.g.
    `presets[2].values.steps`) imports nothing. A preset of the same name and kind takes the imported values."""
    require_scope(request, SUBMIT)
    body = json_body(request, PresetImportIn).model_dump(exclude_none=True)
    created = svc.presets_import(by=request.user, payload=body, household=household)
    return Status(201, {"items": [preset_out(request, p) for p in created]})


@router.get(
    "/{preset_id}", url_name="preset_get", response={200: PresetOut, **ERRORS}, summary="Get a preset"
)
def preset_get(request: HttpRequest, preset_id: str):
    require_scope(request, READ)
    return preset_out(request, _preset(request, preset_id))


@router.patch(
    "/{preset_id}", url_name="preset_update", response={200: PresetOut, **ERRORS}, summary="Change a preset"
)
def preset_update(request: HttpRequest, preset_id: str, payload: PresetPatchIn):
    """Rename it, or replace its values; only the fields sent change."""
    require_scope(request, SUBMIT)
    preset = svc.preset_update(
        preset=_preset(request, preset_id), by=request.user, name=payload.name, values=payload.values
    )
    return preset_out(request, preset)


@router.delete(
    "/{preset_id}", url_name="preset_delete", response={204: None, **ERRORS}, summary="Delete a preset"
)
def preset_delete(request: HttpRequest, preset_id: str):
    require_scope(request, SUBMIT)
    svc.preset_delete(preset=_preset(request, preset_id), by=request.user)
    return Status(204, None)


__all__ = ["router"]

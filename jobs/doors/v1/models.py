"""``/v1/models``: the models a device can run now (exactly the submit forms' choices), or with no device named every
device's (a request with no device goes to any that can do it); and the catch-all 404."""

from __future__ import annotations

from typing import Any

from django.http import HttpRequest, HttpResponse, JsonResponse

from devices.capabilities import Capabilities
from jobs.doors.intake import usable_devices, usable_kinds
from jobs.doors.v1.door import door
from jobs.doors.v1.errors import not_found
from jobs.doors.v1.fields import device_for, model_ids


def _model_objects(device, owner) -> list[dict[str, Any]]:
    """The device's models the person may use (their groups': ``usable_kinds``, the forms' allowed choices)."""
    caps = Capabilities.from_dict(device.capabilities)
    created = int((device.capabilities_at or device.created).timestamp())
    out: dict[str, dict[str, Any]] = {}
    for kind in usable_kinds(owner, device):
        for model_id in model_ids(device, kind, owner=owner):
            row = out.setdefault(
                model_id,
                {
                    "id": model_id,
                    "object": "model",
                    "created": created,
                    "owned_by": model_id.split("/", 1)[0] if "/" in model_id else device.name,
                    "kinds": [],
                    "device": device.name,
                    "loaded": bool((m := caps.model(model_id)) and m.loaded),
                },
            )
            row["kinds"].append(kind)
    for row in out.values():
        row["kind"] = row["kinds"][0]
    return list(out.values())


def _listed(request: HttpRequest) -> tuple[list[dict[str, Any]], str]:
    """The models of the device named, or of every device (each model once, as its first device reports it,
    the default device first), and whose they are."""
    device = device_for(request, {})
    if device is not None:
        return _model_objects(device, request.user), device.name
    seen: dict[str, dict[str, Any]] = {}
    for each in usable_devices(request.user):
        for row in _model_objects(each, request.user):
            seen.setdefault(row["id"], row)
    return list(seen.values()), "any device"


@door(GET="read")
def models(request: HttpRequest) -> HttpResponse:
    return JsonResponse({"object": "list", "data": _listed(request)[0]})


@door(GET="read")
def model(request: HttpRequest, model_id: str) -> HttpResponse:
    rows, whose = _listed(request)
    found = next((m for m in rows if m["id"] == model_id), None)
    if found is None:
        raise not_found(f"The model {model_id!r} is not one {whose} can run (GET /v1/models lists them).")
    return JsonResponse(found)


@door(GET="read", POST="read", DELETE="read", PUT="read", PATCH="read")
def unknown(request: HttpRequest, rest: str = "") -> HttpResponse:
    raise not_found(
        f"No route /v1/{rest}; the hub offers videos, images/generations, audio/speech and models."
    )

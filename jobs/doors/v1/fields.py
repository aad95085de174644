"""What every /v1 submit route shares: its body (JSON or multipart), its fields checked by name and type, the device
and the model it names, and its way through the intake (``jobs.doors.intake``) to admission and the queue."""

from __future__ import annotations

import base64
import binascii
import json
import math
from collections.abc import Callable
from typing import Any

from django.core.files.uploadedfile import SimpleUploadedFile
from django.http import HttpRequest

from devices.models import Device
from hub.ratelimit import rate_key, submit_allowed
from jobs.core.links import ResultRef
from jobs.doors.chaining import result_refs
from jobs.doors.intake import (
    ANY_DEVICE,
    find_device,
    offered_models,
    resolve_model,
)
from jobs.doors.v1.errors import V1Error
from jobs.models import Job, JobKind
from jobs.queue.admission import CheckedRequest, RequestInvalid
from jobs.queue.presets import with_preset
from jobs.queue.submission import Submission, preview, submit

HUB_FIELDS = {
    "device", "seed", "steps", "when", "not_before", "polite", "shared", "user", "lift_limits", "preset",
}  # fmt: skip


def read_body(request: HttpRequest) -> tuple[dict[str, Any], dict[str, Any]]:
    """The fields and files of a JSON or multipart body. Nested multipart keys (``a[b]``) become dicts."""
    ctype = request.content_type or ""
    if ctype.startswith("multipart/form-data") or ctype == "application/x-www-form-urlencoded":
        data: dict[str, Any] = {}
        for key in request.POST:
            value = request.POST.get(key)
            head, sep, rest = key.partition("[")
            if sep and rest.endswith("]"):
                data.setdefault(head, {})
                if isinstance(data[head], dict):
                    data[head][rest[:-1]] = value
            else:
                data[key] = value
        return data, {key: request.FILES[key] for key in request.FILES}
    raw = request.body
    if not raw.strip():
        return {}, {}
    try:
        data = json.loads(raw)
    except (ValueError, UnicodeDecodeError, RecursionError):  # RecursionError: JSON nested ~1,000 deep
        raise V1Error(400, "We could not parse the JSON body of your request.", code="invalid_json") from None
    if not isinstance(data, dict):
        raise V1Error(400, "The request body must be a JSON object.", code="invalid_json")
    return data, {}


def check_fields(
    data: dict[str, Any], files: dict[str, Any], allowed: set[str], *, objects: set[str] = frozenset()
) -> None:
    for key in [*data, *files]:
        if key not in allowed:
            raise V1Error(
                400, f"Unrecognized request argument supplied: {key}.", param=key, code="unknown_parameter"
            )
    for key, value in data.items():
        if isinstance(value, (list, dict)) and key not in objects:
            raise V1Error(400, f"'{key}' must be a string or a number.", param=key, code="invalid_type")
    if not isinstance(data.get("prompt", data.get("input", "")), str):
        key = "prompt" if "prompt" in data else "input"
        raise V1Error(400, f"'{key}' must be a string.", param=key, code="invalid_type")
    if not isinstance(
        data.get("not_before", ""), (str, type(None))
    ):  # the form's date parser takes text only
        raise V1Error(
            400,
            "'not_before' must be a date and time as text, e.g. \"2026-12-01T23:00\".",
            param="not_before",
            code="invalid_type",
        )


def device_for(request: HttpRequest, data: dict[str, Any]) -> Device | None:
    """The device named (id or name) in a ``device`` field, query or ``X-Hub-Device``, which pins the job to it;
    None for "any capable device" (none named, or "any"): the pool (``check_on``)."""
    ref = data.pop("device", None) or request.headers.get("X-Hub-Device") or request.GET.get("device")
    ref = "" if ref is None else str(ref).strip()
    if ref in ("", ANY_DEVICE):
        if not Device.objects.exists():
            raise V1Error(400, "The hub has no device yet; an admin adds one under Devices.", param="device")
        return None
    device = find_device(ref, by_name=True)
    if device is None:
        names = ", ".join(Device.objects.order_by("name").values_list("name", flat=True)) or "none"
        raise V1Error(400, f"No device {ref!r}. Devices: {names}.", param="device", code="device_not_found")
    return device


def take_preset(request: HttpRequest, kind: str, data: dict[str, Any]) -> str | None:
    """``extra_body={"preset": "<name>"}``: the preset's values fill OpenAI's fields the request leaves out (the
    model, seed, steps…; ``jobs.queue.presets.with_preset``), in place; its name, for ``preset_build``."""
    name = data.pop("preset", None)
    if name in (None, ""):
        return None
    try:
        merged = with_preset(owner=request.user, kind=kind, name=name, data=data)
    except RequestInvalid as exc:
        raise V1Error(400, exc.first()[1], param="preset", code="preset_not_found") from None
    data.clear()
    data.update(merged)
    return name


def canvas_of(data: dict[str, Any]) -> str | None:
    """The size asked for, else a preset's canvas (its width and height), else None (the route's default)."""
    if data.get("size") not in (None, ""):
        return data["size"]
    if data.get("width") and data.get("height"):
        return f"{data['width']}x{data['height']}"
    return None


def preset_build(request: HttpRequest, kind: str, name: str | None, build: Build) -> Build:
    """``build`` whose form fields lie over the preset's (the preset's own fields /v1 doesn't translate: cfg,
    frames…); ``build`` itself without a preset."""
    if name is None:
        return build

    def built(on: Device) -> tuple[dict[str, Any], dict[str, Any]]:
        form, upload = build(on)
        return with_preset(owner=request.user, kind=kind, name=name, data=form), upload

    return built


class DeviceCant(RequestInvalid):
    """Why one device of the pool can't take a /v1 request, keeping /v1's own error (its code, e.g.
    ``model_not_found``) for when it is the only reason given (``errors.translate``)."""

    def __init__(self, error: V1Error) -> None:
        super().__init__({error.param or "__all__": [error.message]})
        self.v1 = error


#: OpenAI's fields as one device's form takes them: (form fields, uploads); ``V1Error`` when it can't.
Build = Callable[[Device], tuple[dict[str, Any], dict[str, Any]]]


def _submission(request: HttpRequest, device: Device | None, kind: str, fields_on: Any) -> Submission:
    """The one ``Submission`` of a /v1 call. A caller's Idempotency-Key (curl users, other clients; the OpenAI
    SDK sends none): the same key again answers with the job it queued instead of queuing another."""
    key = (request.headers.get("Idempotency-Key") or "").strip()[:200] or None
    return Submission(request.user, kind, device=device, fields_on=fields_on, token=key)


def check_on(
    request: HttpRequest, device: Device | None, kind: str, build: Build
) -> tuple[Device, CheckedRequest]:
    """The request admitted on the device it names, or on the pool (``device`` None): each device of the kind's
    pool gets its own translation of OpenAI's fields (``build``), and the job may run on any that admits exactly
    it (``jobs.queue.submission.preview``). (the device it waits on first, the request)."""
    if device is not None:
        return preview(_submission(request, device, kind, build))

    tried: list[Device] = []
    cant: list[V1Error] = []

    def prepare(on: Device) -> tuple[dict[str, Any], dict[str, Any]]:
        tried.append(on)
        try:
            return build(on)
        except V1Error as exc:
            cant.append(exc)
            raise DeviceCant(exc) from None

    try:
        return preview(_submission(request, None, kind, prepare))
    except DeviceCant:
        raise
    except RequestInvalid as exc:
        codes = {e.code for e in cant}
        if len(cant) == len(tried) and len(codes) == 1 and None not in codes:
            # Each device said it in /v1's words (its model isn't there…): the pool's sentence, /v1's code.
            raise V1Error(400, exc.first()[1], param=cant[0].param, code=codes.pop()) from None
        raise


def model_ids(device, kind: str, *, owner: Any = None) -> list[str]:
    """The models the hub can queue for ``kind`` on ``device`` right now: exactly the submit form's choices (with
    ``owner``, those the person's groups allow)."""
    return offered_models(device, kind, owner=owner)


def pick_model(device, kind: str, data: dict[str, Any]) -> str:
    models = model_ids(device, kind)
    label = JobKind(kind).label.lower()
    if not models:
        raise V1Error(
            400,
            f"{device.name} cannot make {label} right now (no such model on it).",
            param="model",
            code="model_not_found",
        )
    model = data.get("model")
    if model in (None, ""):
        if len(models) == 1:
            return models[0]
        raise V1Error(400, f"Choose a model: {', '.join(models)}.", param="model")
    model = resolve_model(owner=None, device=device, kind=kind, value=model)  # e.g. without its publisher
    if str(model) not in models:
        raise V1Error(
            400,
            f"The model {model!r} is not on {device.name}; its {label} models are: {', '.join(models)} "
            "(GET /v1/models lists them).",
            param="model",
            code="model_not_found",
        )
    return str(model)


def size_of(value: Any) -> tuple[int, int]:
    try:
        w, h = str(value).lower().split("x", 1)
        return int(w), int(h)
    except (ValueError, AttributeError):
        raise V1Error(
            400, f"Give the size as WIDTHxHEIGHT (e.g. 832x480), not {value!r}.", param="size"
        ) from None


def whole(value: Any, param: str) -> int:
    try:
        number = float(value)
    except (TypeError, ValueError):
        number = float("nan")
    # Not finite first: int() of an infinity (e.g. JSON 1e999) raises OverflowError.
    if not math.isfinite(number) or number != int(number):
        raise V1Error(400, f"'{param}' must be a whole number, not {value!r}.", param=param)
    return int(number)


def from_job(data: dict[str, Any], name: str) -> ResultRef | None:
    """``{"from_job": 12, "artifact": "image-1.png"}`` in field ``name`` (what ``extra_body`` adds to the body):
    another job's result as the input (a chain, ``jobs.doors.intake.result_refs``); None for anything else."""
    value = data.get(name)
    if not (isinstance(value, dict) and "from_job" in value):
        return None
    try:
        return result_refs({name: dict(value)}, [name])[name]
    except RequestInvalid as exc:
        raise V1Error(400, exc.first()[1], param=name) from None


def reference_file(data: dict[str, Any], files: dict[str, Any]):
    """``input_reference`` as an uploaded file: a multipart file, ``{"image_url": "data:…;base64,…"}``, or
    another job's result, ``{"from_job": 12}`` (``from_job``; ``start_image`` takes the same, for ``extra_body``)."""
    if "input_reference" in files:
        return files["input_reference"]
    for name in ("input_reference", "start_image"):
        if (ref := from_job(data, name)) is not None:
            return ref
    if isinstance(data.get("start_image"), (dict, str)):
        raise V1Error(
            400, 'start_image takes another job\'s result: {"from_job": <id>}.', param="start_image"
        )
    ref = data.get("input_reference")
    if ref in (None, ""):
        return None
    url = ref.get("image_url") if isinstance(ref, dict) else ref if isinstance(ref, str) else None
    if not isinstance(url, str) or not url.startswith("data:"):
        raise V1Error(
            400,
            "input_reference must be an uploaded image or {'image_url': 'data:image/png;base64,…'}; "
            "the hub does not fetch URLs or know file ids.",
            param="input_reference",
        )
    head, _, payload = url.partition(",")
    try:
        blob = base64.b64decode(payload, validate=True)
    except (binascii.Error, ValueError):
        raise V1Error(
            400, "input_reference's data URL is not valid base64.", param="input_reference"
        ) from None
    mime = head[5:].split(";", 1)[0] or "application/octet-stream"
    return SimpleUploadedFile("input_reference", blob, mime)


def passthrough(data: dict[str, Any], *names: str) -> dict[str, Any]:
    return {n: data[n] for n in names if data.get(n) not in (None, "")}


def rate_limit(request: HttpRequest) -> None:
    retry_after = submit_allowed(rate_key(request))
    if retry_after is not None:
        raise V1Error(
            429,
            f"Too many submissions; try again in {retry_after} s.",
            type="requests",
            code="rate_limit_exceeded",
            headers={"Retry-After": str(retry_after)},
        )


def queue(request: HttpRequest, *, device, checked) -> Job:
    """The request ``check_on`` admitted, queued (``jobs.queue.submission.submit``, not checked again)."""
    return submit(_submission(request, device, checked.kind, None), previewed=(device, checked))

"""OpenAI-compatible routes under /v1/: videos, images, speech and models, as the official SDK calls them.

A request becomes a Job in the same single lane as everyone's, through the one admission path
(``jobs.queue.admission``): the same form the web page uses checks it, so the same refusals come back — here in
OpenAI's error shape ``{"error": {"message", "type", "param", "code"}}``.

Plain Django views, not ninja: the SDK sends multipart for videos and JSON elsewhere, and every answer —
401, 404, a refused size — must be OpenAI's shape, which ninja's own validation and auth answers are not.

* Videos return at once (``status: queued``); the SDK polls ``GET /v1/videos/{id}``.
* Images and speech wait for their turn and their result inside the HTTP call: an async view reads the Job
  row every ``POLL_S`` (never the device, so a waiting caller adds no device requests) for at most
  ``HUB_V1_WAIT_S``. Past that the answer is an error naming the job, to be fetched from the REST API later.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import datetime as dt
import json
import logging
import math
import os
import subprocess
import time
from functools import wraps
from pathlib import Path
from typing import Any

from asgiref.sync import sync_to_async
from django.conf import settings
from django.core.exceptions import PermissionDenied, RequestDataTooBig, TooManyFieldsSent, ValidationError
from django.core.files.uploadedfile import SimpleUploadedFile
from django.http import FileResponse, Http404, HttpRequest, HttpResponse, JsonResponse
from django.urls import path, re_path
from django.utils import timezone
from django.views.decorators.csrf import csrf_exempt

from hub.accounts.tokens import TokenInvalid
from hub.db import give_back
from hub.parsing import parse_id, parse_int, parse_int_or_none
from jobs.models import ACTIVE_STATES, WAITING_STATES, Artifact, Job, JobKind, JobState
from jobs.queue.admission import resolve_model

log = logging.getLogger("jobs.doors.v1")

POLL_S = 0.5  # how often a waiting images/speech call re-reads its Job row
LIST_LIMIT_MAX = 100
VIDEO_PREFIX = "video_"
#: Hub fields every submit route also accepts (OpenAI's ``extra_body``), passed to the form as they are.
HUB_FIELDS = {"device", "seed", "steps", "when", "not_before", "polite", "shared", "user", "lift_limits"}
#: The form's field names → the OpenAI parameter a client sent, for ``error.param``.
PARAM_OF = {
    "start_image": "input_reference",
    "width": "size",
    "height": "size",
    "frames": "seconds",
    "ts_steps": "steps",
    "instruct": "instructions",
    "kind": "model",
}


# ---------------------------------------------------------------------------------------------------------
# Errors in OpenAI's shape
# ---------------------------------------------------------------------------------------------------------


class V1Error(Exception):
    def __init__(
        self,
        status: int,
        message: str,
        *,
        type: str = "invalid_request_error",
        param: str | None = None,
        code: str | None = None,
        headers: dict[str, str] | None = None,
    ) -> None:
        super().__init__(message)
        self.status, self.message, self.type, self.param, self.code = status, message, type, param, code
        self.headers = headers or {}

    def response(self) -> JsonResponse:
        body = {"error": {"message": self.message, "type": self.type, "param": self.param, "code": self.code}}
        response = JsonResponse(body, status=self.status)
        for name, value in self.headers.items():
            response[name] = value
        if self.status != 429:
            # The SDK retries 408/409/5xx by itself; a retried submit would queue a second job.
            response["x-should-retry"] = "false"
        return response


def _not_found(message: str) -> V1Error:
    return V1Error(404, message, code="not_found")


def _translate(exc: Exception) -> HttpResponse:
    from jobs.queue.admission import RequestInvalid

    if isinstance(exc, V1Error):
        return exc.response()
    if isinstance(exc, TokenInvalid):
        return V1Error(401, exc.message, code="invalid_api_key").response()
    if isinstance(exc, RequestInvalid):
        field, message = exc.first()
        return V1Error(400, message, param=PARAM_OF.get(field or "", field)).response()
    if isinstance(exc, PermissionDenied):
        return V1Error(403, str(exc) or "You may not do this.", code="permission_denied").response()
    if isinstance(exc, Http404):
        return _not_found(str(exc) or "Not found.").response()
    if isinstance(exc, ValidationError):
        field = next(iter(exc.message_dict), None) if hasattr(exc, "error_dict") else None
        message = " ".join(exc.messages) or "The request is not valid."
        return V1Error(400, message, param=None if field == "__all__" else field).response()
    if isinstance(exc, (RequestDataTooBig, TooManyFieldsSent)):
        return V1Error(413, "The request body is too large.", code="request_too_large").response()
    from django.http import UnreadablePostError
    from django.http.multipartparser import MultiPartParserError

    if isinstance(exc, (MultiPartParserError, UnreadablePostError)):  # e.g. multipart without a boundary
        return V1Error(400, f"We could not read the request body: {exc}", code="invalid_body").response()
    log.exception("unexpected error in /v1")
    return V1Error(
        500, "The hub failed on this request; the admin can find it in the log.", type="server_error"
    ).response()


# ---------------------------------------------------------------------------------------------------------
# The door: method, token, scope
# ---------------------------------------------------------------------------------------------------------


def _enter(request: HttpRequest, scopes: dict[str, str]) -> None:
    from hub.api_auth import NOT_SIGNED_IN, READ_ONLY, authenticate_request

    if request.method not in scopes:
        raise V1Error(
            405, f"{request.method} is not allowed here; use {', '.join(scopes)}.", code="method_not_allowed"
        )
    request.api_token = None
    if "Authorization" in request.headers:
        token = authenticate_request(request)  # sets request.user
        if not token.has_scope(scopes[request.method]):
            raise V1Error(403, READ_ONLY, code="insufficient_scope")
    elif not (request.method == "GET" and getattr(request.user, "is_authenticated", False)):
        # A signed-in browser may read (e.g. open an image URL); writes need a token.
        raise TokenInvalid(NOT_SIGNED_IN)


def door(**scopes: str):
    """Wrap a view: allowed methods with their scope (``GET="read", POST="submit"``), errors in OpenAI's shape."""

    def decorate(view):
        if asyncio.iscoroutinefunction(view):

            @wraps(view)
            async def wrapper(request, *args, **kwargs):
                try:
                    await sync_to_async(_enter)(request, scopes)
                    return await view(request, *args, **kwargs)
                except Exception as exc:  # noqa: BLE001 - every failure answers in OpenAI's shape
                    return await sync_to_async(_translate)(exc)

        else:

            @wraps(view)
            def wrapper(request, *args, **kwargs):
                try:
                    _enter(request, scopes)
                    return view(request, *args, **kwargs)
                except Exception as exc:  # noqa: BLE001
                    return _translate(exc)

        return csrf_exempt(wrapper)  # tokens, not cookies: nothing for CSRF to protect

    return decorate


# ---------------------------------------------------------------------------------------------------------
# Request helpers
# ---------------------------------------------------------------------------------------------------------


def _body(request: HttpRequest) -> tuple[dict[str, Any], dict[str, Any]]:
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


def _check_fields(
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


def _device_for(request: HttpRequest, data: dict[str, Any]):
    """The default device, or the one named (id or name) in a ``device`` field, query or ``X-Hub-Device``."""
    from devices.models import Device
    from devices.selectors import device_default

    ref = data.pop("device", None) or request.headers.get("X-Hub-Device") or request.GET.get("device")
    if ref in (None, ""):
        device = device_default()
        if device is None:
            raise V1Error(400, "The hub has no device yet; an admin adds one under Devices.", param="device")
        return device
    ref = str(ref).strip()
    pk = parse_id(ref)
    device = Device.objects.filter(pk=pk).first() if pk is not None else None
    device = (
        device or Device.objects.filter(name=ref).first() or Device.objects.filter(name__iexact=ref).first()
    )
    if device is None:
        names = ", ".join(Device.objects.order_by("name").values_list("name", flat=True)) or "none"
        raise V1Error(400, f"No device {ref!r}. Devices: {names}.", param="device", code="device_not_found")
    return device


def _model_ids(device, kind: str) -> list[str]:
    """The models the hub can queue for ``kind`` on ``device`` right now: exactly the submit form's choices."""
    from jobs.kinds.table import kinds_for, spec_for

    if kind not in kinds_for(device):
        return []
    form = spec_for(device.kind, kind).form(device=device)
    return [str(choice) for choice, _label in form.fields["model"].choices]


def _pick_model(device, kind: str, data: dict[str, Any]) -> str:
    models = _model_ids(device, kind)
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


def _size(value: Any) -> tuple[int, int]:
    try:
        w, h = str(value).lower().split("x", 1)
        return int(w), int(h)
    except (ValueError, AttributeError):
        raise V1Error(
            400, f"Give the size as WIDTHxHEIGHT (e.g. 832x480), not {value!r}.", param="size"
        ) from None


def _whole(value: Any, param: str) -> int:
    try:
        number = float(value)
    except (TypeError, ValueError):
        number = float("nan")
    # Not finite first: int() of an infinity (e.g. JSON 1e999) raises OverflowError.
    if not math.isfinite(number) or number != int(number):
        raise V1Error(400, f"'{param}' must be a whole number, not {value!r}.", param=param)
    return int(number)


def _reference_file(data: dict[str, Any], files: dict[str, Any]):
    """``input_reference`` as an uploaded file: a multipart file, or ``{"image_url": "data:…;base64,…"}``."""
    if "input_reference" in files:
        return files["input_reference"]
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


def _passthrough(data: dict[str, Any], *names: str) -> dict[str, Any]:
    return {n: data[n] for n in names if data.get(n) not in (None, "")}


def _rate_limit(request: HttpRequest) -> None:
    from hub.ratelimit import rate_key, submit_allowed

    retry_after = submit_allowed(rate_key(request))
    if retry_after is not None:
        raise V1Error(
            429,
            f"Too many submissions; try again in {retry_after} s.",
            type="requests",
            code="rate_limit_exceeded",
            headers={"Retry-After": str(retry_after)},
        )


def _check(request: HttpRequest, *, device, kind: str, data: dict[str, Any], files: dict[str, Any]):
    from jobs.queue.admission import check_request

    return check_request(owner=request.user, device=device, kind=kind, data=data, files=files)


def _queue(request: HttpRequest, *, device, checked) -> Job:
    from jobs.queue.admission import submit_checked

    # A caller's Idempotency-Key (curl users, other clients; the OpenAI SDK sends none): the same key again
    # answers with the job it queued instead of queuing another.
    key = (request.headers.get("Idempotency-Key") or "").strip()[:200]
    extra = {"idempotency_key": key} if key else {}
    return submit_checked(owner=request.user, device=device, checked=checked, **extra)


# ---------------------------------------------------------------------------------------------------------
# Videos
# ---------------------------------------------------------------------------------------------------------

VIDEO_FIELDS = {"model", "prompt", "size", "seconds", "input_reference"} | HUB_FIELDS


def _fps(job_or_device) -> int:
    from devices.capabilities import Capabilities

    device = getattr(job_or_device, "device", job_or_device)
    caps = Capabilities.from_dict(device.capabilities)
    ts = caps.tensorsharp
    return int((ts.fps if ts else None) or 24)


def _video_form_data(
    device, data: dict[str, Any], files: dict[str, Any]
) -> tuple[dict[str, Any], dict[str, Any]]:
    """OpenAI's video fields → the hub's video form fields for this device kind."""
    from devices.capabilities import Capabilities

    model = _pick_model(device, JobKind.VIDEO, data)
    seconds = _whole(data.get("seconds", 4), "seconds")  # OpenAI's default length is 4 s
    form = {
        "model": model,
        "prompt": data.get("prompt", ""),
        **_passthrough(data, "seed", "when", "not_before", "polite", "shared", "lift_limits"),
    }
    upload = {}
    start = _reference_file(data, files)
    if device.kind == "tensorsharp":
        caps = Capabilities.from_dict(device.capabilities)
        block = (caps.tensorsharp.video if caps.tensorsharp else None) or {}
        cap = caps.video_for(model)
        if data.get("size") in (None, ""):
            raise V1Error(400, "Give the size as WIDTHxHEIGHT, multiples of 32 (e.g. 640x384).", param="size")
        width, height = _size(data["size"])
        max_seconds = cap.max_seconds if cap else 7
        if not 1 <= seconds <= max_seconds:
            raise V1Error(400, f"This server renders 1 to {max_seconds} seconds.", param="seconds")
        if start is not None and not block.get("supportsImageConditioning"):
            raise V1Error(
                400, "The model loaded on this server cannot start from an image.", param="input_reference"
            )
        form.update(
            width=width,
            height=height,
            frames=seconds * _fps(device) + 1,  # the form snaps to the model's frame grid
            ts_steps=data.get("steps") or (cap.default_steps if cap else 8),
            video_mode="i2v" if start is not None else "t2v",
        )
        if block.get("supportsAudio"):
            form["generate_audio"] = True
    else:
        form.update(seconds=seconds, **_passthrough(data, "size", "steps"))
    if start is not None:
        upload["start_image"] = start
    return form, upload


def _video_object(job: Job) -> dict[str, Any]:
    p = job.params or {}
    if "size" in p:
        size, seconds = str(p.get("size")), str(p.get("seconds"))
    else:
        size = f"{p.get('width')}x{p.get('height')}"
        seconds = str(max(1, round(int(p.get("frames") or 0) / _fps(job))))
    state = job.state
    if state == JobState.DONE:
        status = "completed"
    elif state in (JobState.FAILED, JobState.CANCELLED):
        status = "failed"
    elif state in ACTIVE_STATES:
        status = "in_progress"
    else:  # waiting for its turn, its window, or its automatic retry after an interruption
        status = "queued"
    error = None
    if state == JobState.FAILED:
        error = {"code": job.error_code or "failed", "message": job.error_human or "The render failed."}
    elif state == JobState.CANCELLED:
        error = {
            "code": "cancelled",
            "message": "Cancelled." + (f" {job.cancel_reason}" if job.cancel_reason else ""),
        }
    final = state in (JobState.DONE, JobState.FAILED, JobState.CANCELLED)
    return {
        "id": f"{VIDEO_PREFIX}{job.pk}",
        "object": "video",
        "model": job.model_id,
        "status": status,
        "progress": 100 if status == "completed" else max(0, min(100, int(job.progress or 0))),
        "seconds": seconds,
        "size": size,
        "created_at": int(job.created.timestamp()),
        "completed_at": int(job.finished_at.timestamp()) if final and job.finished_at else None,
        "expires_at": None,
        "prompt": job.prompt,
        "error": error,
        "remixed_from_video_id": None,
        # hub extras: where it stands in the lane
        "device": job.device.name,
        "estimated_ready_at": int(job.predicted_finish.timestamp())
        if job.predicted_finish and not final
        else None,
    }


def _video_for(request: HttpRequest, video_id: str) -> Job:
    from jobs.core.selectors import jobs_visible_to

    number = video_id[len(VIDEO_PREFIX) :] if video_id.startswith(VIDEO_PREFIX) else ""
    job = None
    pk = parse_id(number)
    if pk is not None:
        job = jobs_visible_to(request.user).filter(pk=pk, kind=JobKind.VIDEO).first()
    if job is None:  # someone else's private video looks exactly like a missing one
        raise _not_found(f"No video with id {video_id!r}.")
    return job


@door(GET="read", POST="submit")
def videos(request: HttpRequest) -> HttpResponse:
    if request.method == "GET":
        return _video_list(request)
    _rate_limit(request)
    data, files = _body(request)
    _check_fields(data, files, VIDEO_FIELDS, objects={"input_reference"})
    device = _device_for(request, data)
    form, upload = _video_form_data(device, data, files)
    checked = _check(request, device=device, kind=JobKind.VIDEO, data=form, files=upload)
    job = _queue(request, device=device, checked=checked)
    job.refresh_from_db()
    return JsonResponse(_video_object(job))


def _video_list(request: HttpRequest) -> JsonResponse:
    from jobs.core.selectors import jobs_visible_to

    order = request.GET.get("order", "desc")
    if order not in ("asc", "desc"):
        raise V1Error(400, "order must be asc or desc.", param="order")
    limit = parse_int_or_none(request.GET.get("limit", "20"), minimum=1, maximum=LIST_LIMIT_MAX)
    if limit is None:
        raise V1Error(400, f"limit must be a whole number from 1 to {LIST_LIMIT_MAX}.", param="limit")
    # Your own videos, as OpenAI lists a project's: shared ones of others are in the gallery, not here.
    qs = jobs_visible_to(request.user).filter(owner=request.user, kind=JobKind.VIDEO)
    qs = qs.order_by("pk" if order == "asc" else "-pk")
    after = request.GET.get("after")
    if after:
        number = after[len(VIDEO_PREFIX) :] if after.startswith(VIDEO_PREFIX) else ""
        after_pk = parse_id(number)
        if after_pk is None:
            raise V1Error(400, f"after must be a video id (video_…), not {after[:40]!r}.", param="after")
        qs = qs.filter(pk__gt=after_pk) if order == "asc" else qs.filter(pk__lt=after_pk)
    rows = list(qs[: limit + 1])
    data = [_video_object(job) for job in rows[:limit]]
    return JsonResponse(
        {
            "object": "list",
            "data": data,
            "first_id": data[0]["id"] if data else None,
            "last_id": data[-1]["id"] if data else None,
            "has_more": len(rows) > limit,
        }
    )


@door(GET="read", DELETE="submit")
def video(request: HttpRequest, video_id: str) -> HttpResponse:
    job = _video_for(request, video_id)
    if request.method == "GET":
        return JsonResponse(_video_object(job))
    from jobs.core.selectors import can_manage
    from jobs.core.transitions import job_note
    from jobs.queue.services import job_cancel

    if not can_manage(request.user, job):
        raise V1Error(403, "You can only delete your own videos.", code="permission_denied")
    if job.state in WAITING_STATES or job.state in ACTIVE_STATES:
        try:
            job_cancel(job=job, by=request.user, reason="Deleted through the API.")
        except ValidationError:  # it finished in the meantime: hide it instead
            job_note(job.pk, "Deleted through the API (hidden).", hidden_at=timezone.now())
    else:
        # Finished: the row stays (fair share, the record) but no list or gallery shows it any more.
        job_note(job.pk, "Deleted through the API (hidden).", hidden_at=timezone.now())
    return JsonResponse({"id": video_id, "object": "video.deleted", "deleted": True})


@door(GET="read")
def video_content(request: HttpRequest, video_id: str) -> HttpResponse:
    from jobs.files.downloads import artifact_path, artifact_response

    job = _video_for(request, video_id)
    variant = request.GET.get("variant", "video")
    if variant not in ("video", "thumbnail", "spritesheet"):
        raise V1Error(400, "variant must be video or thumbnail.", param="variant")
    if variant == "spritesheet":
        raise V1Error(400, "The hub offers the video and a thumbnail, not a spritesheet.", param="variant")
    if job.state != JobState.DONE:
        raise V1Error(
            400,
            f"Video {video_id} is not ready (status {_video_object(job)['status']}); download it once it is completed.",
            code="video_not_ready",
        )
    artifact = job.artifacts.filter(kind=Artifact.Kind.VIDEO).order_by("id").first()
    if artifact is None:
        raise _not_found(f"Video {video_id} has no video file.")
    if variant == "video":
        return artifact_response(request, artifact, inline=False)
    thumb = _thumbnail(artifact_path(artifact))
    response = FileResponse(open(thumb, "rb"), content_type="image/jpeg")
    response["Cache-Control"] = "private, max-age=3600"
    return response


def _thumbnail(video_path: Path) -> Path:
    """A still of the first frame, made once with the bundled ffmpeg and cached beside the video."""
    import imageio_ffmpeg

    thumb = video_path.with_name(video_path.stem + ".thumbnail.jpg")
    if thumb.is_file() and thumb.stat().st_mtime >= video_path.stat().st_mtime:
        return thumb
    tmp = thumb.with_name(f".{thumb.name}.{os.getpid()}.{time.monotonic_ns()}.jpg")
    cmd = [
        imageio_ffmpeg.get_ffmpeg_exe(),
        "-v",
        "error",
        "-y",
        "-i",
        str(video_path),
        "-frames:v",
        "1",
        "-q:v",
        "3",
        str(tmp),
    ]
    try:
        subprocess.run(cmd, check=True, capture_output=True, timeout=30)
        os.replace(tmp, thumb)  # atomic: two callers at once both end with a whole file
    except (subprocess.SubprocessError, OSError) as exc:
        tmp.unlink(missing_ok=True)
        log.warning("thumbnail of %s failed: %s", video_path, exc)
        raise V1Error(500, "The hub could not make a thumbnail of this video.", type="server_error") from None
    return thumb


# ---------------------------------------------------------------------------------------------------------
# Waiting for a job (images, speech)
# ---------------------------------------------------------------------------------------------------------


def _job_row(pk: int) -> Job:
    job = Job.objects.select_related("device").get(pk=pk)
    give_back()  # read every POLL_S for minutes: no connection held between the reads
    return job


async def _tick() -> None:
    await asyncio.sleep(POLL_S)


async def _wait(request: HttpRequest, job: Job) -> Job:
    """Read the Job row until it finishes (never the device); past HUB_V1_WAIT_S, an error naming the job."""
    deadline = time.monotonic() + float(settings.HUB_V1_WAIT_S)
    while True:
        job = await sync_to_async(_job_row)(job.pk)
        if job.state in (JobState.DONE, JobState.FAILED, JobState.CANCELLED):
            break
        if time.monotonic() >= deadline:
            url = request.build_absolute_uri(f"/api/jobs/{job.pk}")
            raise V1Error(
                504,
                f"Job {job.pk} is still {job.get_state_display().lower()} after {settings.HUB_V1_WAIT_S:g} s "
                f"(HUB_V1_WAIT_S); it stays queued. Fetch it later from {url} (and its files from "
                f"{url}/artifacts), or see it in your gallery.",
                type="timeout",
                code="wait_timeout",
                headers={"X-Hub-Job": str(job.pk)},
            )
        await _tick()
    if job.state == JobState.FAILED:
        raise V1Error(
            502,
            f"Job {job.pk} failed: {job.error_human or 'the device refused it.'}",
            type="server_error",
            code=job.error_code or "job_failed",
            headers={"X-Hub-Job": str(job.pk)},
        )
    if job.state == JobState.CANCELLED:
        raise V1Error(
            409,
            f"Job {job.pk} was cancelled. {job.cancel_reason}".strip(),
            code="job_cancelled",
            headers={"X-Hub-Job": str(job.pk)},
        )
    return job


def _twin(request: HttpRequest, device, checked) -> Job | None:
    """The job an SDK retry of this very request already queued (same person, kind, model and parameters).

    The SDK retries a call that timed out on its side (600 s by default) or got a 5xx; without this, each retry
    of a long wait would queue the same image again.
    """
    if parse_int(request.headers.get("x-stainless-retry-count"), 0, minimum=0) < 1:
        return None
    since = timezone.now() - dt.timedelta(seconds=float(settings.HUB_V1_WAIT_S) * 3 + 60)
    candidates = Job.objects.filter(
        owner=request.user,
        device=device,
        kind=checked.kind,
        model_id=checked.model_id,
        created__gte=since,
        hidden_at__isnull=True,
    ).exclude(state__in=(JobState.FAILED, JobState.CANCELLED))
    for job in candidates.order_by("-pk")[:20]:
        params = {k: v for k, v in job.params.items() if k != "files"}
        if params == checked.params:
            return job
    return None


def _submit_for_wait(request: HttpRequest, kind: str, build) -> tuple[Job, dict[str, Any]]:
    device, form, upload, extra = build(request)
    checked = _check(request, device=device, kind=kind, data=form, files=upload)
    job = _twin(request, device, checked)
    if job is None:
        _rate_limit(request)
        job = _queue(request, device=device, checked=checked)
    return job, extra


# ---------------------------------------------------------------------------------------------------------
# Images
# ---------------------------------------------------------------------------------------------------------

IMAGE_FIELDS = {
    "model",
    "prompt",
    "size",
    "n",
    "response_format",
    "output_format",
    "negative_prompt",
} | HUB_FIELDS


def _image_request(request: HttpRequest):
    data, files = _body(request)
    _check_fields(data, files, IMAGE_FIELDS)
    fmt = data.get("response_format") or "b64_json"
    if fmt not in ("b64_json", "url"):
        raise V1Error(400, "response_format must be b64_json or url.", param="response_format")
    if data.get("output_format") not in (None, "", "png"):
        raise V1Error(400, "The device makes PNG images only.", param="output_format")
    device = _device_for(request, data)
    if device.kind != "tiiny":
        raise V1Error(
            400,
            f"{device.name} edits pictures but cannot make one from a prompt; choose a Tiiny (X-Hub-Device).",
            param="model",
        )
    model = _pick_model(device, JobKind.IMAGE, data)
    size = data.get("size") or "1024x1024"
    if size == "auto":
        size = "1024x1024"
    width, height = _size(size)
    n = _whole(data.get("n", 1) if data.get("n") is not None else 1, "n")
    form = {
        "model": model,
        "prompt": data.get("prompt", ""),
        "width": width,
        "height": height,
        "n": n,
        **_passthrough(
            data, "seed", "steps", "negative_prompt", "when", "not_before", "polite", "shared", "lift_limits"
        ),
    }
    return device, form, {}, {"response_format": fmt, "size": f"{width}x{height}"}


def _image_result(request: HttpRequest, job: Job, extra: dict[str, Any]) -> dict[str, Any]:
    items = []
    for artifact in job.artifacts.filter(kind=Artifact.Kind.IMAGE).order_by("id"):
        if extra["response_format"] == "url":
            items.append({"url": request.build_absolute_uri(f"/v1/files/{artifact.pk}/content")})
        else:
            from jobs.files.downloads import artifact_path

            items.append({"b64_json": base64.b64encode(artifact_path(artifact).read_bytes()).decode()})
    return {
        "created": int(job.created.timestamp()),
        "data": items,
        "size": extra["size"],
        "output_format": "png",
    }


@door(POST="submit")
async def image_generations(request: HttpRequest) -> HttpResponse:
    job, extra = await sync_to_async(_submit_for_wait)(request, JobKind.IMAGE, _image_request)
    job = await _wait(request, job)
    body = await sync_to_async(_image_result)(request, job, extra)
    response = JsonResponse(body)
    response["X-Hub-Job"] = str(job.pk)
    return response


@door(GET="read")
def file_content(request: HttpRequest, artifact_id: int) -> HttpResponse:
    """A result file (the ``url`` of an image): to the people who may see its job, by token or session."""
    from jobs.files.downloads import artifact_response

    artifact = (
        Artifact.objects.select_related("job").filter(pk=artifact_id, job__hidden_at__isnull=True).first()
    )
    if artifact is None:
        raise _not_found("No such file.")
    return artifact_response(request, artifact)  # 404 (no existence leak) unless allowed


# ---------------------------------------------------------------------------------------------------------
# Speech
# ---------------------------------------------------------------------------------------------------------

SPEECH_FIELDS = {
    "model",
    "input",
    "voice",
    "response_format",
    "instructions",
    "speed",
    "language",
} | HUB_FIELDS
SPEECH_TYPES = {"wav": "audio/wav", "mp3": "audio/mpeg"}


def _speech_request(request: HttpRequest):
    data, files = _body(request)
    _check_fields(data, files, SPEECH_FIELDS, objects={"voice"})
    fmt = data.get("response_format") or "mp3"  # OpenAI's default
    if fmt not in SPEECH_TYPES:
        raise V1Error(
            400, f"response_format must be one of: {', '.join(SPEECH_TYPES)}.", param="response_format"
        )
    speed = data.get("speed")
    if speed not in (None, "") and str(speed).strip() not in ("1", "1.0", "1.00"):
        raise V1Error(400, "The device speaks at one speed; leave speed at 1.", param="speed")
    voice = data.get("voice")
    if isinstance(voice, dict):
        voice = voice.get("id")
    device = _device_for(request, data)
    model = _pick_model(device, JobKind.SPEECH, data)
    form = {
        "model": model,
        "input": data.get("input", ""),
        "response_format": fmt,
        **({"voice": voice} if voice else {}),
        **({"instruct": data["instructions"]} if data.get("instructions") else {}),
        **_passthrough(data, "language", "when", "not_before", "polite", "shared", "lift_limits"),
    }
    return device, form, {}, {"response_format": fmt}


def _speech_bytes(job: Job) -> tuple[bytes, str]:
    from jobs.files.downloads import artifact_path

    artifact = job.artifacts.filter(kind=Artifact.Kind.AUDIO).order_by("id").first()
    if artifact is None:
        raise V1Error(502, f"Job {job.pk} finished without audio.", type="server_error")
    return artifact_path(artifact).read_bytes(), artifact.mime


@door(POST="submit")
async def audio_speech(request: HttpRequest) -> HttpResponse:
    job, _extra = await sync_to_async(_submit_for_wait)(request, JobKind.SPEECH, _speech_request)
    job = await _wait(request, job)
    audio, mime = await sync_to_async(_speech_bytes)(job)
    response = HttpResponse(audio, content_type=mime)
    response["X-Hub-Job"] = str(job.pk)
    return response


# ---------------------------------------------------------------------------------------------------------
# Models
# ---------------------------------------------------------------------------------------------------------


def _model_objects(device) -> list[dict[str, Any]]:
    from devices.capabilities import Capabilities
    from jobs.kinds.table import kinds_for

    caps = Capabilities.from_dict(device.capabilities)
    created = int((device.capabilities_at or device.created).timestamp())
    out: dict[str, dict[str, Any]] = {}
    for kind in kinds_for(device):
        for model_id in _model_ids(device, kind):
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


@door(GET="read")
def models(request: HttpRequest) -> HttpResponse:
    device = _device_for(request, {})
    return JsonResponse({"object": "list", "data": _model_objects(device)})


@door(GET="read")
def model(request: HttpRequest, model_id: str) -> HttpResponse:
    device = _device_for(request, {})
    found = next((m for m in _model_objects(device) if m["id"] == model_id), None)
    if found is None:
        raise _not_found(
            f"The model {model_id!r} is not one {device.name} can run (GET /v1/models lists them)."
        )
    return JsonResponse(found)


@door(GET="read", POST="read", DELETE="read", PUT="read", PATCH="read")
def unknown(request: HttpRequest, rest: str = "") -> HttpResponse:
    raise _not_found(
        f"No route /v1/{rest}; the hub offers videos, images/generations, audio/speech and models."
    )


# ---------------------------------------------------------------------------------------------------------
# Mounting
# ---------------------------------------------------------------------------------------------------------

urlpatterns = [
    path("videos", videos, name="videos"),
    path("videos/<str:video_id>", video, name="video"),
    path("videos/<str:video_id>/content", video_content, name="video-content"),
    path("images/generations", image_generations, name="image-generations"),
    path("audio/speech", audio_speech, name="audio-speech"),
    path("files/<int:artifact_id>/content", file_content, name="file-content"),
    path("models", models, name="models"),
    path("models/<path:model_id>", model, name="model"),
    re_path(r"^(?P<rest>.*)$", unknown, name="unknown"),
]


class _V1:
    """What ``hub.urls`` mounts at /v1/ through ``_token_door`` (the shape of a NinjaAPI's ``urls``)."""

    @property
    def urls(self) -> tuple[list, str, str]:
        return urlpatterns, "v1", "v1"


v1 = _V1()

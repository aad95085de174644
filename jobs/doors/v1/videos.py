"""``/v1/videos``: a video returns at once (``status: queued``); the SDK polls ``GET /v1/videos/{id}``."""

from __future__ import annotations

import io
import logging
import subprocess
import tempfile
from pathlib import Path, PurePosixPath
from typing import Any

from django.core.exceptions import ValidationError
from django.http import FileResponse, HttpRequest, HttpResponse, JsonResponse

from devices.capabilities import Capabilities
from hub.parsing import parse_id, parse_int_or_none
from jobs.core.selectors import can_manage, jobs_visible_to
from jobs.doors.v1.door import door
from jobs.doors.v1.errors import V1Error, not_found
from jobs.doors.v1.fields import (
    HUB_FIELDS,
    canvas_of,
    check_fields,
    check_on,
    device_for,
    passthrough,
    pick_model,
    preset_build,
    queue,
    rate_limit,
    read_body,
    reference_file,
    size_of,
    take_preset,
    whole,
)
from jobs.files import store
from jobs.files.downloads import artifact_response
from jobs.models import ACTIVE_STATES, CANCELLABLE_STATES, Artifact, Job, JobKind, JobState
from jobs.queue.services import job_cancel
from jobs.queue.trash import trash_move

log = logging.getLogger("jobs.doors.v1")

LIST_LIMIT_MAX = 100


VIDEO_PREFIX = "video_"


VIDEO_FIELDS = {"model", "prompt", "size", "seconds", "input_reference", "start_image"} | HUB_FIELDS


def fps(job_or_device) -> int:
    device = getattr(job_or_device, "device", job_or_device)
    caps = Capabilities.from_dict(device.capabilities)
    ts = caps.tensorsharp
    return int((ts.fps if ts else None) or 24)


def _video_form_data(
    device, data: dict[str, Any], files: dict[str, Any]
) -> tuple[dict[str, Any], dict[str, Any]]:
    """OpenAI's video fields → the hub's video form fields for this device kind."""
    model = pick_model(device, JobKind.VIDEO, data)
    seconds = whole(data.get("seconds", 4), "seconds")  # OpenAI's default length is 4 s
    form = {
        "model": model,
        "prompt": data.get("prompt", ""),
        **passthrough(data, "seed", "when", "not_before", "polite", "shared", "lift_limits"),
    }
    upload = {}
    start = reference_file(data, files)
    if device.kind == "tensorsharp":
        caps = Capabilities.from_dict(device.capabilities)
        block = (caps.tensorsharp.video if caps.tensorsharp else None) or {}
        cap = caps.video_for(model)
        if data.get("size") in (None, ""):
            raise V1Error(400, "Give the size as WIDTHxHEIGHT, multiples of 32 (e.g. 640x384).", param="size")
        width, height = size_of(data["size"])
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
            frames=seconds * fps(device) + 1,  # the form snaps to the model's frame grid
            ts_steps=data.get("steps") or (cap.default_steps if cap else 8),
            video_mode="i2v" if start is not None else "t2v",
        )
        if block.get("supportsAudio"):
            form["generate_audio"] = True
    else:
        form.update(seconds=seconds, **passthrough(data, "size", "steps"))
    if start is not None:
        upload["start_image"] = start
    return form, upload


def _size_and_seconds(job: Job) -> tuple[str, str]:
    """As OpenAI gives them: a Tiiny's size and seconds, or a TensorSharp render's canvas and frames in seconds."""
    p = job.params or {}
    if "size" in p:
        return str(p.get("size")), str(p.get("seconds"))
    return f"{p.get('width')}x{p.get('height')}", str(max(1, round(int(p.get("frames") or 0) / fps(job))))


def _video_status(state: str) -> str:
    if state == JobState.DONE:
        return "completed"
    if state in (JobState.FAILED, JobState.CANCELLED):
        return "failed"
    if state in ACTIVE_STATES:
        return "in_progress"
    return "queued"  # waiting for its turn, its window, or its automatic retry after an interruption


def _video_error(job: Job) -> dict[str, str] | None:
    if job.state == JobState.FAILED:
        return {"code": job.error_code or "failed", "message": job.error_human or "The render failed."}
    if job.state == JobState.CANCELLED:
        why = f" {job.cancel_reason}" if job.cancel_reason else ""
        return {"code": "cancelled", "message": f"Cancelled.{why}"}
    return None


def _video_object(job: Job) -> dict[str, Any]:
    size, seconds = _size_and_seconds(job)
    status = _video_status(job.state)
    final = job.state in (JobState.DONE, JobState.FAILED, JobState.CANCELLED)
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
        "error": _video_error(job),
        "remixed_from_video_id": None,
        # hub extras: where it stands in the lane
        "device": job.device.name,
        "estimated_ready_at": (
            int(job.predicted_finish.timestamp()) if job.predicted_finish and not final else None
        ),
    }


def _video_for(request: HttpRequest, video_id: str) -> Job:
    number = video_id[len(VIDEO_PREFIX) :] if video_id.startswith(VIDEO_PREFIX) else ""
    job = None
    pk = parse_id(number)
    if pk is not None:
        job = jobs_visible_to(request.user).filter(pk=pk, kind=JobKind.VIDEO).first()
    if job is None:  # someone else's private video looks exactly like a missing one
        raise not_found(f"No video with id {video_id!r}.")
    return job


@door(GET="read", POST="submit")
def videos(request: HttpRequest) -> HttpResponse:
    if request.method == "GET":
        return _video_list(request)
    rate_limit(request)
    data, files = read_body(request)
    check_fields(data, files, VIDEO_FIELDS, objects={"input_reference", "start_image"})
    preset = take_preset(request, JobKind.VIDEO, data)
    if size := canvas_of(data):
        data["size"] = size
    device, checked = check_on(
        request,
        device_for(request, data),
        JobKind.VIDEO,
        preset_build(request, JobKind.VIDEO, preset, lambda on: _video_form_data(on, data, files)),
    )
    job = queue(request, device=device, checked=checked)
    job.refresh_from_db()
    return JsonResponse(_video_object(job))


def _video_list(request: HttpRequest) -> JsonResponse:
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
    if not can_manage(request.user, job):
        raise V1Error(403, "You can only delete your own videos.", code="permission_denied")
    if job.state in CANCELLABLE_STATES:
        try:
            job_cancel(job=job, by=request.user, reason="Deleted through the API.")
        except ValidationError:  # it finished in the meantime: to the trash instead
            trash_move(job=job, by=request.user, force=True)
    else:
        # Finished: to the trash (``jobs.queue.trash``): no list or gallery shows it any more, its files kept
        # HUB_TRASH_DAYS days (the Trash page restores it); the jobs still waiting for its result are cancelled,
        # as OpenAI's delete has no way to ask first.
        trash_move(job=job, by=request.user, force=True)
    return JsonResponse({"id": video_id, "object": "video.deleted", "deleted": True})


@door(GET="read")
def video_content(request: HttpRequest, video_id: str) -> HttpResponse:
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
        raise not_found(f"Video {video_id} has no video file.")
    if variant == "video":
        return artifact_response(request, artifact, inline=False)
    response = FileResponse(io.BytesIO(_thumbnail(artifact)), content_type="image/jpeg")
    response["Cache-Control"] = "private, max-age=3600"
    return response


def _thumbnail(artifact: Artifact) -> bytes:
    """A still of the video's first frame, made once with the bundled ffmpeg (from a local copy when the store has
    none) and kept in the store beside the video (``<stem>.thumbnail.jpg``)."""
    import imageio_ffmpeg  # its ffmpeg binary is looked up only when a thumbnail is first asked for

    try:
        video = store.find(str(artifact.file))
        if video is None:
            raise not_found("The video file is gone.")
        path = PurePosixPath(video.name)
        name = str(path.with_name(path.stem + ".thumbnail.jpg"))
        kept = store.find(name)
        if kept is not None and kept.mtime_ns >= video.mtime_ns:
            return store.read_bytes(name)
        with store.local_path(video.name) as local, tempfile.TemporaryDirectory(prefix="hub-thumb-") as work:
            out = Path(work) / "thumb.jpg"
            cmd = [imageio_ffmpeg.get_ffmpeg_exe(), "-v", "error", "-y", "-i", str(local),
                   "-frames:v", "1", "-q:v", "3", str(out)]  # fmt: skip
            subprocess.run(cmd, check=True, capture_output=True, timeout=30)
            data = out.read_bytes()
        store.save_bytes(name, data)  # atomic: two callers at once both leave a whole file
    except store.StoreUnreachable:
        raise V1Error(
            503, "The result store is unreachable just now; try again.", type="server_error"
        ) from None
    except (subprocess.SubprocessError, OSError) as exc:
        log.warning("thumbnail of %s failed: %s", artifact.file, exc)
        raise V1Error(500, "The hub could not make a thumbnail of this video.", type="server_error") from None
    return data

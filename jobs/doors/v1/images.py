"""``/v1/images/generations`` (the call waits for its job) and ``/v1/files/{id}/content`` (an image's ``url``)."""

from __future__ import annotations

import base64
from typing import Any

from asgiref.sync import sync_to_async
from django.http import HttpRequest, HttpResponse, JsonResponse

from jobs.doors.v1.door import door
from jobs.doors.v1.errors import V1Error, not_found
from jobs.doors.v1.fields import (
    HUB_FIELDS,
    canvas_of,
    check_fields,
    device_for,
    passthrough,
    pick_model,
    preset_build,
    read_body,
    size_of,
    take_preset,
    whole,
)
from jobs.doors.v1.waiting import submit_for_wait, wait_for
from jobs.files.downloads import artifact_bytes, artifact_response
from jobs.models import Artifact, Job, JobKind

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
    """The device named (None: the pool), OpenAI's fields as one device's form takes them, and the answer's
    format."""
    data, files = read_body(request)
    check_fields(data, files, IMAGE_FIELDS)
    preset = take_preset(request, JobKind.IMAGE, data)
    fmt = data.get("response_format") or "b64_json"
    if fmt not in ("b64_json", "url"):
        raise V1Error(400, "response_format must be b64_json or url.", param="response_format")
    if data.get("output_format") not in (None, "", "png"):
        raise V1Error(400, "The device makes PNG images only.", param="output_format")
    device = device_for(request, data)
    size = canvas_of(data) or "1024x1024"
    if size == "auto":
        size = "1024x1024"
    width, height = size_of(size)
    n = whole(data.get("n", 1) if data.get("n") is not None else 1, "n")

    def build(on) -> tuple[dict[str, Any], dict[str, Any]]:
        if on.kind != "tiiny":
            raise V1Error(
                400,
                f"{on.name} edits pictures but cannot make one from a prompt; choose a Tiiny (X-Hub-Device).",
                param="model",
            )
        form = {
            "model": pick_model(on, JobKind.IMAGE, data),
            "prompt": data.get("prompt", ""),
            "width": width,
            "height": height,
            "n": n,
            **passthrough(
                data,
                "seed",
                "steps",
                "negative_prompt",
                "when",
                "not_before",
                "polite",
                "shared",
                "lift_limits",
            ),
        }
        return form, {}

    return (
        device,
        preset_build(request, JobKind.IMAGE, preset, build),
        {"response_format": fmt, "size": f"{width}x{height}"},
    )


def _image_result(request: HttpRequest, job: Job, extra: dict[str, Any]) -> dict[str, Any]:
    items = []
    for artifact in job.artifacts.filter(kind=Artifact.Kind.IMAGE).order_by("id"):
        if extra["response_format"] == "url":
            items.append({"url": request.build_absolute_uri(f"/v1/files/{artifact.pk}/content")})
        else:
            items.append({"b64_json": base64.b64encode(artifact_bytes(artifact)).decode()})
    return {
        "created": int(job.created.timestamp()),
        "data": items,
        "size": extra["size"],
        "output_format": "png",
    }


@door(POST="submit")
async def image_generations(request: HttpRequest) -> HttpResponse:
    job, extra = await sync_to_async(submit_for_wait)(request, JobKind.IMAGE, _image_request)
    job = await wait_for(request, job)
    body = await sync_to_async(_image_result)(request, job, extra)
    response = JsonResponse(body)
    response["X-Hub-Job"] = str(job.pk)
    return response


@door(GET="read")
def file_content(request: HttpRequest, artifact_id: int) -> HttpResponse:
    """A result file (the ``url`` of an image): to the people who may see its job, by token or session."""
    artifact = (
        Artifact.objects.select_related("job").filter(pk=artifact_id, job__hidden_at__isnull=True).first()
    )
    if artifact is None:
        raise not_found("No such file.")
    return artifact_response(request, artifact)  # 404 (no existence leak) unless allowed

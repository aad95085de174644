"""``/v1/audio/speech``: the call waits for its job and answers with the audio itself."""

from __future__ import annotations

from typing import Any

from asgiref.sync import sync_to_async
from django.http import HttpRequest, HttpResponse

from jobs.doors.v1.door import door
from jobs.doors.v1.errors import V1Error
from jobs.doors.v1.fields import (
    HUB_FIELDS,
    check_fields,
    device_for,
    passthrough,
    pick_model,
    preset_build,
    read_body,
    take_preset,
)
from jobs.doors.v1.waiting import submit_for_wait, wait_for
from jobs.files.downloads import artifact_bytes
from jobs.models import Artifact, Job, JobKind

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
    data, files = read_body(request)
    check_fields(data, files, SPEECH_FIELDS, objects={"voice"})
    preset = take_preset(request, JobKind.SPEECH, data)
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
    device = device_for(request, data)

    def build(on) -> tuple[dict[str, Any], dict[str, Any]]:
        form = {
            "model": pick_model(on, JobKind.SPEECH, data),
            "input": data.get("input", ""),
            "response_format": fmt,
            **({"voice": voice} if voice else {}),
            **({"instruct": data["instructions"]} if data.get("instructions") else {}),
            **passthrough(data, "language", "when", "not_before", "polite", "shared", "lift_limits"),
        }
        return form, {}

    return device, preset_build(request, JobKind.SPEECH, preset, build), {"response_format": fmt}


def _speech_bytes(job: Job) -> tuple[bytes, str]:
    artifact = job.artifacts.filter(kind=Artifact.Kind.AUDIO).order_by("id").first()
    if artifact is None:
        raise V1Error(502, f"Job {job.pk} finished without audio.", type="server_error")
    return artifact_bytes(artifact), artifact.mime


@door(POST="submit")
async def audio_speech(request: HttpRequest) -> HttpResponse:
    job, _extra = await sync_to_async(submit_for_wait)(request, JobKind.SPEECH, _speech_request)
    job = await wait_for(request, job)
    audio, mime = await sync_to_async(_speech_bytes)(job)
    response = HttpResponse(audio, content_type=mime)
    response["X-Hub-Job"] = str(job.pk)
    return response

"""OpenAI-compatible routes under /v1/: videos, images, speech and models, as the official SDK calls them.

A request becomes a Job in the same single lane as everyone's, through the doors' one intake
(``jobs.doors.intake``) and the one admission (``jobs.queue.admission``): the same form the web page uses checks
it, so the same refusals come back, here in OpenAI's error shape ``{"error": {"message", "type", "param", "code"}}``.

Plain Django views, not ninja: the SDK sends multipart for videos and JSON elsewhere, and every answer (401, 404,
a refused size) must be OpenAI's shape, which ninja's own validation and auth answers are not.

    errors    V1Error and the translation of every failure into OpenAI's shape
    door      the methods a route answers, the token and its scope (``door(GET="read", POST="submit")``)
    fields    the body, its fields, the device and the model; the way to admission and the queue
    waiting   images and speech wait inside the call (``POLL_S``, at most ``HUB_V1_WAIT_S``)
    videos    /v1/videos (returns at once; the SDK polls), images, speech, models: one module per resource
"""

from __future__ import annotations

from django.urls import path, re_path

from jobs.doors.v1 import images, models, speech, videos
from jobs.doors.v1.images import IMAGE_FIELDS
from jobs.doors.v1.speech import SPEECH_FIELDS
from jobs.doors.v1.videos import VIDEO_FIELDS

urlpatterns = [
    path("videos", videos.videos, name="videos"),
    path("videos/<str:video_id>", videos.video, name="video"),
    path("videos/<str:video_id>/content", videos.video_content, name="video-content"),
    path("images/generations", images.image_generations, name="image-generations"),
    path("audio/speech", speech.audio_speech, name="audio-speech"),
    path("files/<int:artifact_id>/content", images.file_content, name="file-content"),
    path("models", models.models, name="models"),
    path("models/<path:model_id>", models.model, name="model"),
    re_path(r"^(?P<rest>.*)$", models.unknown, name="unknown"),
]


class _V1:
    """What ``hub.urls`` mounts at /v1/ through ``_token_door`` (the shape of a NinjaAPI's ``urls``)."""

    @property
    def urls(self) -> tuple[list, str, str]:
        return urlpatterns, "v1", "v1"


v1 = _V1()

__all__ = ["IMAGE_FIELDS", "SPEECH_FIELDS", "VIDEO_FIELDS", "urlpatterns", "v1"]

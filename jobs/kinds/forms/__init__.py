"""Submit forms, one per (device kind, job kind), built from the device's reported capabilities.

Every field the device would reject is refused here with a message a person understands, so nothing reaches
the device that it will turn down (reference: tiiny-device-api.md, field notes §11). The forms only validate
fields; what the hub expects of a valid request (estimate, start and ready times, warnings, refusals) is
``jobs.queue.admission``, the one path every door (page, REST, /v1) goes through. ``jobs.kinds.table`` says which
form serves which pair.

``base``: what every form shares; ``tiiny`` and ``tensorsharp``: each device kind's forms; ``messages``: messages
that name the allowed values; ``uploads``: the checks of an uploaded picture or recording.
"""

from __future__ import annotations

from jobs.kinds.forms.base import ImageForm, JobForm, VideoForm
from jobs.kinds.forms.messages import explain_fields, set_range
from jobs.kinds.forms.tensorsharp import TensorSharpEditForm, TensorSharpVideoForm, snap_frames
from jobs.kinds.forms.tiiny import MeshForm, MusicForm, SpeechForm, TiinyImageForm, TiinyVideoForm
from jobs.kinds.forms.uploads import (
    MAX_AUDIO_BYTES,
    MAX_IMAGE_BYTES,
    clean_image_upload,
    clean_wav_upload,
)

__all__ = [
    "MAX_AUDIO_BYTES",
    "MAX_IMAGE_BYTES",
    "ImageForm",
    "JobForm",
    "MeshForm",
    "MusicForm",
    "SpeechForm",
    "TensorSharpEditForm",
    "TensorSharpVideoForm",
    "TiinyImageForm",
    "TiinyVideoForm",
    "VideoForm",
    "clean_image_upload",
    "clean_wav_upload",
    "explain_fields",
    "set_range",
    "snap_frames",
]

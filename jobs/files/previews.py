"""Live previews: the latest picture a device streamed while it renders, kept on the hub's disk.

The worker that holds a TensorSharp stream writes each preview frame it receives to one file per job
(``results/<owner>/<job>/live/preview``, replaced atomically, so a reader never sees half a picture). The job
page shows it and asks the hub (never the device) for a newer one every 2 s while the job is active; the
file's modification time is its version, so an unchanged preview costs one ``stat`` and a 204.
"""

from __future__ import annotations

import base64
import binascii
import logging
import os
import re
from pathlib import Path

from jobs.models import Job

logger = logging.getLogger("jobs.files.previews")

#: A preview is a small picture; anything bigger than this in a frame is not one worth keeping.
MAX_PREVIEW_BYTES = 8 * 1024 * 1024
_DATA_URL = re.compile(r"^data:(image/(?:png|jpeg|webp));base64,", re.IGNORECASE)
#: Frame fields that may carry a preview: image-edit steps send ``image``; a video step that sends frames
#: is read the same way, under ``image`` or ``preview``.
FRAME_KEYS = ("image", "preview")


def preview_path(job: Job) -> Path:
    from jobs.kinds.runners.base import job_dir

    return job_dir(job) / "live" / "preview"


def streams_previews(job: Job) -> bool:
    """Whether this job's device can send previews while it renders (TensorSharp's SSE streams)."""
    from jobs.kinds.table import spec_for

    try:
        return spec_for(job.device.kind, job.kind).style == "stream"
    except ValueError:
        return False


def preview_from_frame(frame: dict) -> bytes | None:
    """The picture bytes of a stream frame's preview, or None (no preview, not a picture, too big)."""
    for key in FRAME_KEYS:
        value = frame.get(key)
        if not isinstance(value, str):
            continue
        match = _DATA_URL.match(value)
        if not match or len(value) > MAX_PREVIEW_BYTES * 4 // 3 + 100:
            continue
        try:
            data = base64.b64decode(value[match.end() :], validate=False)
        except (binascii.Error, ValueError):
            continue
        if sniff_mime(data):
            return data
    return None


def keep_preview(job: Job, data: bytes) -> None:
    """Replace the job's preview with ``data`` (atomic: readers see the old picture or the new one)."""
    path = preview_path(job)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".preview.{os.getpid()}.part")
    tmp.write_bytes(data)
    os.replace(tmp, path)


def clear_preview(job: Job) -> None:
    try:
        preview_path(job).unlink()
    except FileNotFoundError:
        pass


def preview_version(job: Job) -> str:
    """A token that changes whenever the preview does ("" when there is none)."""
    try:
        st = preview_path(job).stat()
    except OSError:
        return ""
    return f"{st.st_mtime_ns:x}{st.st_size:x}"


def sniff_mime(data: bytes) -> str:
    if data.startswith(b"\x89PNG\r\n\x1a\n"):
        return "image/png"
    if data.startswith(b"\xff\xd8\xff"):
        return "image/jpeg"
    if data[:4] == b"RIFF" and data[8:12] == b"WEBP":
        return "image/webp"
    return ""

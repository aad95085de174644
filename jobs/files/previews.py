"""Live previews: the latest picture a device streamed while it renders, kept on the hub's disk.

The worker that holds a TensorSharp stream writes each preview frame it receives to one file per job
(``jobs.files.store.preview_name``, replaced atomically, so a reader never sees half a picture). The job
page shows it and asks the hub (never the device) for a newer one every 2 s while the job is active; the
file's modification time is its version, so an unchanged preview costs one ``stat`` and a 204.

Whether a job's device streams previews at all is the kinds table's to say (its runner style): the callers look
it up and pass it in (:func:`preview_box`), so this module never reads the table.
"""

from __future__ import annotations

import base64
import binascii
import logging
import re
from collections.abc import Callable
from typing import Any

from jobs.files import store
from jobs.models import Job

logger = logging.getLogger("jobs.files.previews")

#: A preview is a small picture; anything bigger than this in a frame is not one worth keeping.
MAX_PREVIEW_BYTES = 8 * 1024 * 1024
_DATA_URL = re.compile(r"^data:(image/(?:png|jpeg|webp));base64,", re.IGNORECASE)
#: Frame fields that may carry a preview: image-edit steps send ``image``; a video step that sends frames
#: is read the same way, under ``image`` or ``preview``.
FRAME_KEYS = ("image", "preview")


def preview_box(job: Job, *, style_of: Callable[[str, str], str]) -> dict[str, Any]:
    """What the job page's preview box shows: whether the page polls for a preview (the job is not over and its
    device streams previews while it renders: ``style_of(device kind, kind) == "stream"``, the kinds table's
    look-up, passed in by the caller), whether the job is active, and the current preview's version."""
    try:
        streams = style_of(job.device.kind, job.kind) == "stream"
    except ValueError:  # a pair no device kind runs
        streams = False
    show = not job.is_final and streams
    return {"show": show, "active": job.is_active, "version": preview_version(job) if show else ""}


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
    store.save_bytes(store.preview_name(job), data)


def clear_preview(job: Job) -> None:
    store.delete([store.preview_name(job)])


def preview_version(job: Job) -> str:
    """A token that changes whenever the preview does ("" when there is none)."""
    found = store.find(store.preview_name(job))
    return f"{found.mtime_ns:x}{found.size:x}" if found is not None else ""


def sniff_mime(data: bytes) -> str:
    if data.startswith(b"\x89PNG\r\n\x1a\n"):
        return "image/png"
    if data.startswith(b"\xff\xd8\xff"):
        return "image/jpeg"
    if data[:4] == b"RIFF" and data[8:12] == b"WEBP":
        return "image/webp"
    return ""

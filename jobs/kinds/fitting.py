"""Another job's result made into this job's input (``jobs.queue.chains``), as its device takes it.

The result goes through the same checks as an upload in that field (``jobs.kinds.forms.uploads``: bounded, decodes
as PNG/JPEG/WebP or reads as PCM WAV), then is fitted: a picture that starts a video is scaled and centre-cropped
to the video's canvas (a Tiiny's ``size``, a TensorSharp's ``width`` × ``height``) and written as PNG, so the
first frame is the picture, not a stretch of it; any other picture and a recording go as they are.
"""

from __future__ import annotations

import io
from pathlib import PurePosixPath
from typing import Any

from django.core.exceptions import ValidationError
from django.core.files.uploadedfile import SimpleUploadedFile
from PIL import Image

from jobs.files import decoding
from jobs.files.store import read_bytes
from jobs.kinds.forms.uploads import clean_image_upload, clean_wav_upload
from jobs.models import Job, JobKind

#: The fields whose picture is a video frame (fitted to the canvas).
FRAME_FIELDS = ("start_image", "end_image")


class Unfit(Exception):
    """The result can't be this input (the words say why)."""


def canvas_of(job: Job) -> tuple[int, int] | None:
    """A video job's frame size from its parameters (``832x480``, or width and height); None otherwise."""
    if job.kind != JobKind.VIDEO:
        return None
    p = job.params or {}
    try:
        if isinstance(p.get("size"), str) and "x" in p["size"]:
            w, h = (int(v) for v in p["size"].lower().split("x", 1))
            return (w, h)
        if p.get("width") and p.get("height"):
            return (int(p["width"]), int(p["height"]))
    except (TypeError, ValueError):
        return None
    return None


def _cover(data: bytes, canvas: tuple[int, int]) -> bytes:
    """The picture scaled to cover ``canvas`` and centre-cropped to it, as PNG (within the decode budget)."""
    with decoding.decode_slot(), Image.open(io.BytesIO(data)) as im:
        decoding.check_pixels(im.size)
        rgb = im.convert("RGB")
        w, h = rgb.size
        scale = max(canvas[0] / w, canvas[1] / h)
        size = (max(canvas[0], round(w * scale)), max(canvas[1], round(h * scale)))
        big = rgb.resize(size, Image.Resampling.LANCZOS)
        left, top = (size[0] - canvas[0]) // 2, (size[1] - canvas[1]) // 2
        out = io.BytesIO()
        big.crop((left, top, left + canvas[0], top + canvas[1])).save(out, format="PNG")
        return out.getvalue()


def fit_input(job: Job, field: str, stored: str, mime: str) -> Any:
    """The stored result ``stored`` as ``job``'s input ``field``: an upload-like file with its checked type
    (``sniffed_mime``), ready for ``jobs.files.store.save_input``. ``Unfit`` with the reason otherwise; ``OSError``
    when the store can't be read (the caller tries again later)."""
    name = PurePosixPath(stored).name
    data = read_bytes(stored)  # a store failure propagates: not the result's fault
    upload = SimpleUploadedFile(name, data, content_type=mime)
    try:
        if field == "ref_audio":
            return clean_wav_upload(upload, label=f"The recording {name}")
        canvas = canvas_of(job) if field in FRAME_FIELDS else None
        if canvas is not None:
            clean_image_upload(upload, label=f"The picture {name}")  # the upload's checks before any resize
            upload = SimpleUploadedFile(f"{field}.png", _cover(data, canvas), content_type="image/png")
        return clean_image_upload(upload, label=f"The picture {name}")
    except ValidationError as exc:
        raise Unfit(" ".join(exc.messages)) from None
    except decoding.TooManyPixels as big:
        raise Unfit(f"The picture {name} is {big.text}.") from None
    except Exception as exc:  # noqa: BLE001 - Pillow raises many types on bad bytes
        raise Unfit(f"The picture {name} can't be used ({type(exc).__name__}).") from None


__all__ = ["FRAME_FIELDS", "Unfit", "canvas_of", "fit_input"]

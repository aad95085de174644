"""Files that tell how they were made: each stored result carries its job's settings in its format's own metadata.

:func:`result_story` is what a result says about itself (prompt, model, seed, steps, size, device, the job's
address on the hub, its parents): only what the job page shows to whoever can see the result, never the owner's
address, a key or a share token. :func:`tell` writes it into the bytes the store is about to keep
(``jobs.files.store.save_artifact``), each format in its own place (``jobs.files.story_formats``):

- PNG: an iTXt ``parameters`` chunk (one human line, as other image tools write it) and an iTXt ``tiiny-hub``
  chunk (the JSON), before the first IDAT;
- JPEG: a COM segment with the JSON;
- MP4/MOV: ``moov/udta/meta/ilst`` ``desc`` (the human line) and ``©cmt`` (the JSON), written by mutagen; the
  media data is copied byte for byte, never re-encoded (mutagen moves the chunk offsets by what the header grew);
  a fragmented MP4 is kept as it came;
- WAV: a ``LIST``/``INFO`` chunk (``INAM`` the prompt, ``ICMT`` the JSON, ``ISFT`` the hub);
- MP3: ID3v2.3 ``TIT2`` and ``COMM`` (described ``tiiny-hub``) frames, written by mutagen;
- GLB: ``asset.extras["tiiny-hub"]`` in the JSON chunk (the BIN chunk untouched, 4-byte alignment kept);
  OBJ: a comment line.

Writing never costs a result: a file the writer can't read or write is kept as it came, and the failure logged.
:func:`read_story` reads a PNG's settings back (the new-job form fills itself from a dropped file).
"""

from __future__ import annotations

import io
import json
import logging
import os
import re
from pathlib import Path
from typing import Any, BinaryIO

from django.urls import reverse

from hub.links import link_origin
from jobs.core.links import parents_of as chain_parents
from jobs.files import story_formats as formats
from jobs.models import Job

logger = logging.getLogger("jobs.files.story")

#: The key of the hub's JSON in every format (PNG keyword, GLB extras key).
KEY = formats.KEY
#: The job's settings a result tells, in this order: what the job page shows, minus the uploaded inputs' names.
STORY_PARAMS = (
    "prompt",
    "negative_prompt",
    "caption",
    "lyrics",
    "input",
    "voice",
    "instruct",
    "language",
    "seed",
    "steps",
    "size",
    "seconds",
    "fps",
    "cfg",
    "cfg_scale",
    "video_mode",
    "format",
)
#: Results that tell nothing (the gallery's thumbnail is the hub's own picture of a result).
SILENT_KINDS = frozenset({"thumb"})
_NUMBERED_IMAGE = re.compile(r"^image-(\d+)\.png$")


def job_url(job: Job) -> str:
    """The job page's absolute address, by the hub's one rule for its own origin (``hub.links``)."""
    return link_origin() + reverse("jobs-detail", args=[job.pk])


def parents_of(job: Job) -> list[dict[str, Any]]:
    """The jobs whose results this one was made from, each as ``{"job": id, "url": ..., "field": ...,
    "artifact": ...}``: its chain links (``jobs.core.links.parents_of``; a deleted parent keeps its number)."""
    found = []
    for link in chain_parents(job):
        if link.job_id is None:
            continue
        parent: dict[str, Any] = {
            "job": link.job_id,
            "url": link_origin() + reverse("jobs-detail", args=[link.job_id]),
            "field": link.field,
        }
        if link.artifact:
            parent["artifact"] = link.artifact
        found.append(parent)
    return found


def result_story(job: Job, name: str = "") -> dict[str, Any]:
    """What the result ``name`` of ``job`` tells about how it was made (JSON-ready). The n-th image of an image
    job was rendered with the job's seed + n - 1 (``jobs.kinds.runners.tiiny.TiinyImageRunner``), so it says so."""
    params = job.params or {}
    story: dict[str, Any] = {"kind": job.kind, "model": job.model_id}
    for key in STORY_PARAMS:
        if params.get(key) not in (None, ""):
            story[key] = params[key]
    numbered = _NUMBERED_IMAGE.match(name)
    if numbered and isinstance(story.get("seed"), int) and not isinstance(story["seed"], bool):
        story["seed"] += int(numbered.group(1)) - 1
    story["device"] = job.device.name if job.device_id else ""
    story["job"] = job.pk
    story["url"] = job_url(job)
    story["parents"] = parents_of(job)
    return story


def human_line(story: dict[str, Any]) -> str:
    """The story as the one text other image tools write (the prompt, then ``Key: value, ...``)."""
    text = story.get("prompt") or story.get("caption") or story.get("input") or ""
    lines = [str(text)] if text else []
    if story.get("negative_prompt"):
        lines.append(f"Negative prompt: {story['negative_prompt']}")
    pairs = [
        ("Steps", story.get("steps")),
        ("Seed", story.get("seed")),
        ("Size", story.get("size")),
        ("Model", story.get("model")),
        ("Device", story.get("device")),
        ("Job", story.get("url")),
    ]
    pairs += [("Parent", p.get("url")) for p in story.get("parents") or []]
    lines.append(", ".join(f"{k}: {v}" for k, v in pairs if v not in (None, "")))
    return "\n".join(lines)


# -- writing -----------------------------------------------------------------------------------------------------
def tell(
    job: Job, *, kind: str, name: str, data: bytes | None, path: Path | None
) -> tuple[bytes | None, Path | None]:
    """``data`` (or the local file ``path``, rewritten in place) carrying the result's story. Never raises: a
    format without a writer, or a writer that fails, leaves the result as it came (the failure is logged)."""
    if kind in SILENT_KINDS or (data is None and path is None):
        return data, path
    try:
        story = result_story(job, name)
        if data is not None:
            out = io.BytesIO()
            if formats.write(io.BytesIO(data), out, story, human_line(story), name=name):
                return out.getvalue(), path
            return data, path
        _tell_file(Path(path), story, name)  # type: ignore[arg-type]
    except Exception:
        logger.warning(
            "job %s: could not write how %s was made into it; it is stored as it came",
            job.pk,
            name,
            exc_info=True,
        )
    return data, path


def _tell_file(path: Path, story: dict[str, Any], name: str) -> None:
    """Rewrite the local file with its story: a copy beside it, renamed over it once whole."""
    told = path.with_name(
        f".{path.name}.{os.getpid()}.story.part"
    )  # a crash leaves a .part: discard_partials
    try:
        with open(path, "rb") as src, open(told, "w+b") as out:
            wrote = formats.write(src, out, story, human_line(story), name=name)
        if wrote:
            os.replace(told, path)
    finally:
        told.unlink(missing_ok=True)


def settings_of(story: dict[str, Any]) -> dict[str, Any]:
    """A story's job settings (the job's parameters it tells, :data:`STORY_PARAMS`), as a form fills them in."""
    return {key: story[key] for key in STORY_PARAMS if key in story}


# -- reading -----------------------------------------------------------------------------------------------------
def read_story(source: bytes | BinaryIO) -> dict[str, Any] | None:
    """The hub settings a PNG carries (its ``tiiny-hub`` chunk), or None for a file without them (not a PNG, a
    PNG from elsewhere, a chunk that is not a JSON object). A file is read chunk by chunk up to its image data."""
    fh = io.BytesIO(source) if isinstance(source, bytes) else source
    fh.seek(0)
    text = formats.png_text_from(fh).get(KEY)
    if text is None:
        return None
    try:
        story = json.loads(text)
    except ValueError:
        return None
    return story if isinstance(story, dict) else None


__all__ = ["KEY", "human_line", "job_url", "parents_of", "read_story", "result_story", "settings_of", "tell"]

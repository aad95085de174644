"""Many jobs' results in one download: a zip streamed while it is built.

:func:`stream_jobs_zip` is the one door: given the jobs a person may download (the caller checks access: the
gallery's ``jobs_visible_to``, an album's members), it answers a ``StreamingHttpResponse`` whose body is a zip
of their results, each job in a folder of its own::

    0042-a-red-fox-in-the-snow/video.mp4
    0042-a-red-fox-in-the-snow/settings.json
    0043-image-43/image-1.png
    ...

- The folder is the job's number (4 digits at least) and its prompt as a safe slug (ASCII letters, digits and
  ``-``, at most 40 characters): unique, since the number is. A file keeps its result name, made safe the same
  way; two results of one job with the same safe name get ``-2``, ``-3``.
- ``settings.json`` beside them is what the result tells about how it was made (``jobs.files.story``: kind,
  model, prompt, seed, steps, size, device, the job's address, its parents; never the owner, a key or a share
  token), plus the job's state, creation time and the files of the folder.
- Results are stored, not deflated (videos, PNGs and MP3s are compressed already): the zip's size is known
  before its first byte (``Content-Length``, so a browser shows progress) and costs no CPU beyond the CRC.
- The bytes are read through the store (``jobs.files.store.open_range``: a file on the disk, one streamed GET
  on an S3 bucket), ``CHUNK`` at a time, one file open at once: memory stays flat whatever the zip's size.
  Everything from the database (jobs, results, stories) is read before the first byte: Django gives the
  request's connection back before a streamed body is sent.
- Under ASGI the body is an async iterator, each chunk built in a worker thread (Django would otherwise collect
  a sync iterator into one list in memory before sending it).

The thumbnail (the hub's own picture of a result) is left out; a job without results is left out. A file gone
from the store since it was recorded is left out too (``settings.json`` lists it under ``missing``).
"""

from __future__ import annotations

import json
import re
import unicodedata
from collections.abc import AsyncIterator, Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

from asgiref.sync import sync_to_async
from django.conf import settings
from django.core.handlers.asgi import ASGIRequest
from django.db.models import Count, Prefetch, QuerySet, Sum, prefetch_related_objects
from django.http import HttpRequest, HttpResponse, StreamingHttpResponse
from django.utils import timezone
from django.utils.http import content_disposition_header
from zipstream import ZIP_STORED, ZipStream

from jobs.files import store
from jobs.files.story import result_story
from jobs.models import Artifact, Job

#: Bytes read from the store at a time, and roughly what one chunk of the response carries.
CHUNK = 1024 * 1024
#: The most jobs one zip gathers (``HUB_ZIP_MAX_JOBS``): a zip is planned (one story per job) before its first byte.
DEFAULT_MAX_JOBS = 1000
_UNSAFE = re.compile(r"[^A-Za-z0-9._-]+")


class NothingToDownload(ValueError):
    """The jobs asked for have no results to download (or none were asked for); the message says so."""


class TooManyJobs(ValueError):
    """More jobs than one zip gathers (``HUB_ZIP_MAX_JOBS``); the message says how many to leave out."""


def max_jobs() -> int:
    return int(getattr(settings, "HUB_ZIP_MAX_JOBS", DEFAULT_MAX_JOBS))


def safe_part(text: str, *, limit: int = 40, fallback: str = "file") -> str:
    """``text`` as one safe path part: ASCII letters, digits, ``.``, ``_`` and ``-`` (accents dropped, anything
    else one ``-``), no leading dot or dash, at most ``limit`` characters; ``fallback`` when nothing is left."""
    ascii_text = unicodedata.normalize("NFKD", text).encode("ascii", "ignore").decode()
    cleaned = _UNSAFE.sub("-", ascii_text).strip("-._")[:limit].rstrip("-._")
    return cleaned or fallback


def folder_of(job: Job) -> str:
    """A job's folder in the zip: ``0042-a-red-fox`` (its number, then its prompt or its kind as a slug)."""
    words = " ".join((job.prompt or "").split()).lower() or f"{job.kind}-{job.pk}"
    return f"{job.pk:04d}-{safe_part(words, fallback=job.kind or 'job')}"


def _unique(name: str, taken: set[str]) -> str:
    if name not in taken:
        taken.add(name)
        return name
    stem, dot, ext = name.rpartition(".") if "." in name else (name, "", "")
    n = 2
    while f"{stem}-{n}{dot}{ext}" in taken:
        n += 1
    unique = f"{stem}-{n}{dot}{ext}"
    taken.add(unique)
    return unique


@dataclass(frozen=True)
class Entry:
    """One file of the zip: a stored result (``found``) or bytes made here (``data``: a settings.json)."""

    arcname: str
    size: int
    found: store.Stored | None = None
    data: bytes | None = None


@dataclass
class ZipPlan:
    entries: list[Entry] = field(default_factory=list)
    files: int = 0  # results (settings.json not counted)
    bytes: int = 0  # the results' bytes
    jobs: int = 0


def _results() -> Prefetch:
    files = Artifact.objects.exclude(kind=Artifact.Kind.THUMB).order_by("id")
    return Prefetch("artifacts", queryset=files, to_attr="zip_files")


def _with_results(jobs: QuerySet[Job] | Iterable[Job]) -> list[Job]:
    if isinstance(jobs, QuerySet):
        return list(jobs.select_related("device").prefetch_related(_results()))
    listed = list(jobs)
    prefetch_related_objects(listed, _results())
    return listed


def summary(jobs: QuerySet[Job]) -> tuple[int, int]:
    """(results, bytes) a zip of ``jobs`` would hold, from the records (one query; the gallery's button)."""
    found = Artifact.objects.filter(job__in=jobs.order_by().values("pk")).exclude(kind=Artifact.Kind.THUMB)
    totals = found.aggregate(n=Count("id"), size=Sum("bytes"))
    return int(totals["n"] or 0), int(totals["size"] or 0)


def plan_zip(jobs: QuerySet[Job] | Iterable[Job]) -> ZipPlan:
    """What the zip of ``jobs`` (in their order) holds, each file found in the store: all the reading is done here.

    Raises ``TooManyJobs`` past ``HUB_ZIP_MAX_JOBS`` and ``NothingToDownload`` when no job has a result."""
    limit = max_jobs()
    if isinstance(jobs, QuerySet):
        jobs = jobs[: limit + 1]
    listed = _with_results(jobs)
    if len(listed) > limit:
        raise TooManyJobs(
            f"That is more than {limit} jobs; narrow the search or select fewer to download at once."
        )
    plan = ZipPlan()
    for job in listed:
        if job.zip_files:
            _plan_job(plan, job)
    if not plan.files:
        raise NothingToDownload(
            "Nothing to download: select finished jobs with results (none of these has any)."
        )
    return plan


def _plan_job(plan: ZipPlan, job: Job) -> None:
    folder = folder_of(job)
    taken = {"settings.json"}
    names, missing, entries = [], [], []
    for artifact in job.zip_files:
        found = store.find(str(artifact.file))
        if found is None:
            missing.append(artifact.name)
            continue
        name = _unique(safe_part(artifact.name, limit=100), taken)
        names.append(name)
        entries.append(Entry(f"{folder}/{name}", found.size, found=found))
    if not entries:
        return
    story = result_story(job)
    story.update(state=job.state, created=job.created.isoformat(), files=names)
    if missing:
        story["missing"] = missing
    data = (json.dumps(story, indent=2, ensure_ascii=False, default=str) + "\n").encode()
    plan.entries.extend(entries)
    plan.entries.append(Entry(f"{folder}/settings.json", len(data), data=data))
    plan.files += len(entries)
    plan.bytes += sum(e.size for e in entries)
    plan.jobs += 1


def _file_chunks(found: store.Stored) -> Iterator[bytes]:
    """The stored file's bytes, ``CHUNK`` at a time; opened when the zip reaches it, closed when done."""
    handle = store.open_range(found, 0, found.size)
    try:
        remaining = found.size
        while remaining > 0:
            data = handle.read(min(CHUNK, remaining))
            if not data:
                break  # shrank under us: the zip's size check reports it
            remaining -= len(data)
            yield data
    finally:
        handle.close()


def build_zip(plan: ZipPlan) -> ZipStream:
    """The planned zip as a sized ``ZipStream`` (stored, not deflated): iterate it for the bytes, ``len()`` for
    their number."""
    zs = ZipStream(compress_type=ZIP_STORED, sized=True)
    for entry in plan.entries:
        if entry.data is not None:
            zs.add(entry.data, entry.arcname)
        else:
            zs.add(_file_chunks(entry.found), entry.arcname, size=entry.size)  # type: ignore[arg-type]
    return zs


def _coalesced(parts: Iterator[bytes]) -> Iterator[bytes]:
    """The zip's pieces (headers of a few dozen bytes between the files' chunks) gathered up to ``CHUNK``."""
    buffer: list[bytes] = []
    size = 0
    for part in parts:
        buffer.append(part)
        size += len(part)
        if size >= CHUNK:
            yield b"".join(buffer)
            buffer, size = [], 0
    if buffer:
        yield b"".join(buffer)


async def _async_body(parts: Iterator[bytes]) -> AsyncIterator[bytes]:
    step = sync_to_async(lambda: next(parts, None), thread_sensitive=False)
    try:
        while (chunk := await step()) is not None:
            yield chunk
    finally:
        close = getattr(parts, "close", None)
        if close is not None:
            await sync_to_async(close, thread_sensitive=False)()


def zip_filename(label: str = "tiiny-hub") -> str:
    return f"{safe_part(label, limit=60, fallback='tiiny-hub')}-{timezone.localtime():%Y%m%d-%H%M}.zip"


def stream_jobs_zip(
    request: HttpRequest, jobs: QuerySet[Job] | Iterable[Job], *, label: str = "tiiny-hub"
) -> HttpResponse:
    """The results of ``jobs`` as one zip, streamed (see the module's docstring). The caller has checked that the
    person may download every one of ``jobs``; the zip is named ``<label>-<date>-<time>.zip``.

    Raises ``NothingToDownload`` (no job with results) or ``TooManyJobs`` before anything is sent: the caller
    turns them into its own message (a 400 for the API, a note on the page)."""
    zs = build_zip(plan_zip(jobs))
    length = len(zs)
    if request.method == "HEAD":
        response: HttpResponse = HttpResponse(content_type="application/zip")
    else:
        parts = _coalesced(iter(zs))
        body = _async_body(parts) if isinstance(request, ASGIRequest) else parts
        response = StreamingHttpResponse(body, content_type="application/zip")
    response["Content-Length"] = str(length)
    response["Content-Disposition"] = content_disposition_header(True, zip_filename(label))
    response["Cache-Control"] = "private, no-store"
    response["X-Content-Type-Options"] = "nosniff"
    return response


def jobs_zip_summary(jobs: QuerySet[Job]) -> dict[str, Any]:
    """What the "Download all" button says: ``{"files": n, "bytes": b}``."""
    files, size = summary(jobs)
    return {"files": files, "bytes": size}


__all__ = [
    "NothingToDownload",
    "TooManyJobs",
    "build_zip",
    "folder_of",
    "jobs_zip_summary",
    "plan_zip",
    "safe_part",
    "stream_jobs_zip",
    "summary",
]

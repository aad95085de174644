"""Serving result files, only to people allowed to see the job, with byte ranges and revalidation.

``artifact_response(request, artifact)`` authorizes (owner, admins, shared jobs; or a valid share token given
by the caller), then answers like a static file server would:

- ``Accept-Ranges: bytes`` always, and a single ``Range`` (``a-b``, ``a-``, ``-n``, clamped at the end) gets
  a 206 with ``Content-Range``. Browsers need this to seek a video, and Safari on iOS refuses to play an
  MP4 without it. Several ranges get the whole file (RFC 9110 allows ignoring ``Range``); a malformed header
  is ignored (200); a range starting past the end gets 416 with ``Content-Range: bytes */size``.
- A strong ``ETag`` (the artifact's sha256 plus its size) and ``Last-Modified``; ``If-None-Match`` /
  ``If-Modified-Since`` answer 304, ``If-Range`` that no longer matches gets the full 200.
- ``Cache-Control: private, no-cache``: a browser may keep the bytes but must ask every time, so a revoked
  share link or an unshared job stops working at once (the check is cheap: a 304 carries no body).
- Bytes are streamed from the store (``jobs.files.store``) in chunks (an async iterator under ASGI, where Django would otherwise
  collect a sync iterator into one list in memory), never read whole.

Behind nginx or Apache set ``JOBS_SENDFILE`` to ``x-accel`` (``X-Accel-Redirect`` to ``JOBS_SENDFILE_PREFIX`` +
stored name, an ``internal`` location aliasing MEDIA_ROOT) or ``x-sendfile`` (``X-Sendfile`` with the absolute
path): the web server then streams the bytes and handles ``Range`` itself, so the request's ``Range`` is only passed
through. A store with no local files (an S3 bucket) has nothing for the web server to alias: the hub streams.

With an S3 bucket (``HUB_MEDIA_STORAGE=s3://...``) the hub still streams, never redirects to a presigned URL. The
access check runs on every request either way, but a presigned URL already handed out keeps working for its minute
after a share link is revoked or a job unshared, and a player that seeks asks again with a fresh ``Range`` that the
bucket, not the hub, answers. Streamed, the revocation stops the next request at once, the ETag, ``Cache-Control``
and 206/416 answers are the same as from the disk, and the bucket need not be reachable from the people's
browsers (only from the hub). Each range is one ranged GET to the bucket (``jobs.files.store.open_range``), so a
seek fetches only the bytes it shows. A bucket that can't be reached answers 503 (try again), not 500.
"""

from __future__ import annotations

import logging
import re
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from typing import BinaryIO
from urllib.parse import quote

from asgiref.sync import sync_to_async
from django.conf import settings
from django.core.handlers.asgi import ASGIRequest
from django.http import Http404, HttpRequest, HttpResponse, StreamingHttpResponse
from django.utils.cache import get_conditional_response
from django.utils.http import content_disposition_header, http_date, parse_http_date_safe

from jobs.core.selectors import can_view
from jobs.files import store
from jobs.files.store import Stored, StoreUnreachable
from jobs.models import Artifact

logger = logging.getLogger("jobs.files.downloads")

CHUNK = 256 * 1024
CACHE_CONTROL = "private, no-cache"
# One range only; digits bounded so a hostile header can't make us parse a megabyte-long integer.
_RANGE = re.compile(r"^\s*bytes\s*=\s*(\d{0,19})\s*-\s*(\d{0,19})\s*$", re.IGNORECASE)


def artifact_bytes(artifact: Artifact) -> bytes:
    """The whole result, read from the store (small results only: an image or a speech clip for /v1's answers),
    refusing anything outside the results."""
    found = store.find(str(artifact.file))
    if found is None:
        raise Http404("No such file.")
    with store.open_range(found, 0, found.size) as fh:
        return fh.read()


@dataclass(frozen=True)
class ByteRange:
    start: int
    end: int  # inclusive, as in Content-Range

    @property
    def length(self) -> int:
        return self.end - self.start + 1


class Unsatisfiable(Exception):
    """The Range is well formed but no byte of it lies inside the file: 416."""


def parse_range(header: str, size: int) -> ByteRange | None:
    """The one range to send, or None for the whole file (no header, malformed, several ranges, empty file).

    Raises ``Unsatisfiable`` when the range starts at or past the end (or is the suffix ``-0``).
    """
    if not header or size <= 0:
        return None
    match = _RANGE.match(header)
    if not match:
        return None  # malformed or a multi-range set: RFC 9110 lets us ignore Range and send it all
    first, last = match.group(1), match.group(2)
    if first:
        start = int(first)
        end = int(last) if last else size - 1
        if last and end < start:
            return None  # "5-3" is invalid, so the header is ignored
        if start >= size:
            raise Unsatisfiable
        return ByteRange(start, min(end, size - 1))
    if not last:
        return None  # "bytes=-"
    suffix = int(last)
    if suffix == 0:
        raise Unsatisfiable
    return ByteRange(max(size - suffix, 0), size - 1)


def _etag(artifact: Artifact, stat: Stored) -> str:
    # The sha256 is taken when the result is saved and results never change in place; the size guards against
    # a file replaced on disk behind the row's back. Rows without a real digest (blank, or the all-zero
    # placeholder of rows made by hand) fall back to mtime + size.
    tag = artifact.sha256 if artifact.sha256 and artifact.sha256.strip("0") else f"{stat.mtime_ns:x}"
    return f'"{tag[:40]}-{stat.size:x}"'


def _if_range_passes(request: HttpRequest, etag: str, last_modified: int) -> bool:
    """RFC 9110 13.1.5: the range applies only when the validator still matches exactly (strong)."""
    value = request.headers.get("If-Range", "").strip()
    if not value:
        return True
    if value.startswith(('"', "W/")):
        return value == etag  # a weak tag never matches for If-Range
    return parse_http_date_safe(value) == last_modified


class FileChunks:
    """``length`` bytes of a file opened where they start (``store.open_range``), read in chunks; closed by the
    response."""

    def __init__(self, handle: BinaryIO, length: int) -> None:
        self.handle, self.remaining = handle, length

    def _read(self) -> bytes:
        if self.remaining <= 0:
            return b""
        data = self.handle.read(min(CHUNK, self.remaining))
        self.remaining -= len(data)
        if not data:
            self.remaining = 0  # the file shrank under us: stop rather than spin
        return data

    def close(self) -> None:
        self.handle.close()


class SyncChunks(FileChunks):
    def __iter__(self) -> Iterator[bytes]:
        while data := self._read():
            yield data


class AsyncChunks(FileChunks):
    async def __aiter__(self) -> AsyncIterator[bytes]:
        read = sync_to_async(self._read, thread_sensitive=False)
        while data := await read():
            yield data


def _stream(request: HttpRequest, found: Stored, start: int, length: int, *, status: int) -> HttpResponse:
    if request.method == "HEAD":
        response = HttpResponse(status=status)
    else:
        kind = AsyncChunks if isinstance(request, ASGIRequest) else SyncChunks
        response = StreamingHttpResponse(kind(store.open_range(found, start, length), length), status=status)
    response["Content-Length"] = str(length)  # for HEAD too: what the GET would send
    return response


def artifact_response(
    request: HttpRequest,
    artifact: Artifact,
    *,
    share_token: str | None = None,
    inline: bool = True,
    access_checked: bool = False,
) -> HttpResponse:
    """``access_checked``: the caller has checked access its own way (the Trash page's thumbnails, of jobs that
    are hidden from every other page: ``jobs.queue.trash.trashed_job_for``)."""
    job = artifact.job
    # A share link opens nothing while its job is hidden (in the trash, deleted through /v1).
    allowed = (
        access_checked
        or can_view(request.user, job)
        or (bool(share_token) and share_token == job.share_token and job.hidden_at is None)
    )
    if not allowed:
        raise Http404("No such file.")  # no existence leak
    try:
        found = store.find(str(artifact.file))
        if found is None:
            raise Http404("The file is gone.")
        return _answer(request, artifact, found, inline=inline)
    except StoreUnreachable:
        logger.warning("job %s: %s", job.pk, store.UNREACHABLE, exc_info=True)
        return _unreachable()


def _unreachable() -> HttpResponse:
    response = HttpResponse(
        "The result store is unreachable just now; try again in a minute.\n",
        status=503,
        content_type="text/plain; charset=utf-8",
    )
    response["Retry-After"] = "30"
    response["Cache-Control"] = "no-store"
    return response


def _answer(request: HttpRequest, artifact: Artifact, found: Stored, *, inline: bool) -> HttpResponse:
    last_modified, etag = found.mtime_ns // 1_000_000_000, _etag(artifact, found)
    headers = {
        "ETag": etag,
        "Last-Modified": http_date(last_modified),
        "Cache-Control": CACHE_CONTROL,
        "Accept-Ranges": "bytes",
        "X-Content-Type-Options": "nosniff",
    }

    response = get_conditional_response(request, etag=etag, last_modified=last_modified)
    if response is None:
        response = _body(request, artifact, found, etag, last_modified, inline=inline)
    for name, value in headers.items():
        response.headers.setdefault(name, value)
    return response


def _body(
    request: HttpRequest, artifact: Artifact, found: Stored, etag: str, last_modified: int, *, inline: bool
) -> HttpResponse:
    mode = getattr(settings, "JOBS_SENDFILE", "")
    if found.path is not None and mode in ("x-accel", "x-sendfile"):
        response = _handed_to_web_server(mode, found)
    else:
        response = _ranged(request, found, etag, last_modified)
        if response.status_code == 416:
            return response
    response["Content-Type"] = artifact.mime or "application/octet-stream"
    response["Content-Disposition"] = content_disposition_header(not inline, artifact.name)
    return response


def _handed_to_web_server(mode: str, found: Stored) -> HttpResponse:
    """The web server sends the bytes and answers Range itself (it sees the client's request headers)."""
    response = HttpResponse()
    if mode == "x-accel":
        response["X-Accel-Redirect"] = settings.JOBS_SENDFILE_PREFIX.rstrip("/") + "/" + quote(found.name)
    else:
        response["X-Sendfile"] = str(found.path)
    return response


def _ranged(request: HttpRequest, found: Stored, etag: str, last_modified: int) -> HttpResponse:
    """The whole file (200), the one range asked for (206), or 416 for a range outside the file."""
    size = found.size
    wanted: ByteRange | None = None
    if request.method in ("GET", "HEAD") and _if_range_passes(request, etag, last_modified):
        try:
            wanted = parse_range(request.headers.get("Range", ""), size)
        except Unsatisfiable:
            response = HttpResponse(
                f"The requested range is outside the file ({size} bytes).\n",
                status=416,
                content_type="text/plain; charset=utf-8",
            )
            response["Content-Range"] = f"bytes */{size}"
            return response
    if wanted is None:
        return _stream(request, found, 0, size, status=200)
    response = _stream(request, found, wanted.start, wanted.length, status=206)
    response["Content-Range"] = f"bytes {wanted.start}-{wanted.end}/{size}"
    return response

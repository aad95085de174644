"""The one HTTP seam for device protocols: httpx, explicit timeouts, no foreign redirects, typed errors.

Rules enforced here so that both clients get them for free:

* ``follow_redirects=False``. A redirect to our own host is followed; a redirect to another host (the Tiiny
  gateway redirects ``/api/v1/models`` to ``http://p8800.api.tiiny/...``) is *re-issued against our own base
  URL* with the redirect's path, so headers (the API key) are never sent anywhere but the configured device.
* Timeouts are explicit per call type (``Timeouts``); nothing uses httpx's default.
* Every failure becomes a ``devices.errors`` class; the API key is scrubbed from any text that could reach an
  exception or a log line (it is only ever in the Authorization header, but a device could echo it back).
"""

from __future__ import annotations

import functools
import logging
import re
import ssl
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urljoin, urlsplit

import httpx

from devices import errors
from devices.clients import containers
from devices.error_counts import count_device_errors

logger = logging.getLogger("devices.clients")


@dataclass(frozen=True)
class Timeouts:
    """(connect, read) seconds per call type: the read deadline is the wait for the first byte of the answer and
    for each next chunk, never for the whole answer. A device on the household's LAN answers a status in well under
    a second; a deadline is what a silent link (packets stop) costs a worker slot each time it is asked.

    A download has no total deadline either: it goes on while it makes progress, at least ``download_min_rate``
    bytes per second over each ``download_rate_window`` seconds (a 200 MB video at a crawl still finishes; a link
    that keeps a connection open but carries almost nothing is given up and asked again later)."""

    connect: float = 3.0
    probe: float = 5.0  # status, health, info: the poller's calls; short so a dead device is noticed fast
    status: float = 10.0  # a render's status by id (the engine's poll of a video or a 3D task)
    manage: float = 30.0  # models, running, unload_candidate, launch
    create: float = (
        20.0  # a render's create call without files (a video): the device answers with an id at once
    )
    submit: float = 60.0  # a create call that uploads files (3D, TensorSharp)
    download: float = 20.0  # the first byte of a result, and between two chunks
    download_min_rate: float = 8 * 1024.0  # bytes per second, over each window
    download_rate_window: float = 30.0

    def of(self, read: float) -> httpx.Timeout:
        return httpx.Timeout(connect=self.connect, read=read, write=max(read, 30.0), pool=self.connect)


DEFAULT_TIMEOUTS = Timeouts()
MAX_REDIRECTS = 3


def validate_base_url(base_url: str) -> str:
    """Scheme http(s), a host, no credentials, no query or fragment. Returns it without a trailing slash.

    A device URL is a server-side request target (only admins set it); credentials in it would end up in logs.
    """
    parts = urlsplit(base_url.strip())
    if parts.scheme not in ("http", "https"):
        raise ValueError("The URL must start with http:// or https://.")
    if not parts.hostname:
        raise ValueError("The URL must name a host.")
    if parts.username or parts.password or "@" in parts.netloc:
        raise ValueError(
            "The URL must not contain a user name or password; the API key goes in its own field."
        )
    if parts.query or parts.fragment:
        raise ValueError("The URL must not have a query string or fragment.")
    try:
        parts.port  # noqa: B018 - raises ValueError on a bad port
    except ValueError:
        raise ValueError("The URL has an invalid port.") from None
    return base_url.strip().rstrip("/")


def _same_origin(a: httpx.URL, b: httpx.URL) -> bool:
    return (a.scheme, a.host, a.port) == (b.scheme, b.host, b.port)


def error_text(resp: httpx.Response) -> str:
    """The device's own message from any of its error envelopes (see field notes §6)."""
    try:
        body = resp.json()
    except ValueError:
        text = resp.text.strip()
        if not text or text.startswith("<"):  # an HTML error page (nginx): the status line says it all
            return f"HTTP {resp.status_code} {resp.reason_phrase}".strip()
        return text[:500]
    return json_error_text(body)


def json_error_text(body: Any) -> str:
    if isinstance(body, str):
        return body
    if not isinstance(body, dict):
        return str(body)[:500]
    err = body.get("error")
    if isinstance(err, dict):
        msg = err.get("message") or err.get("detail") or ""
        code = err.get("code") or err.get("type")
        return f"{msg}" if not code or str(code) in str(msg) else f"{msg} [{code}]"
    parts = [str(body[k]) for k in ("msg", "message", "detail", "error") if body.get(k)]
    if body.get("error_code"):
        parts.append(f"[{body['error_code']}]")
    return " — ".join(dict.fromkeys(parts))[:500] or str(body)[:500]


@functools.cache
def _tls() -> ssl.SSLContext:
    """httpx's default TLS settings (certifi, or SSL_CERT_FILE / SSL_CERT_DIR), built once per process: building
    them loads the CA bundle (~20 ms), and a client is made per job step, on the path from a render's end to
    the next request. A context is safe to share between clients and threads."""
    return httpx.create_ssl_context()


class HttpDevice:
    """Shared HTTP plumbing. Subclasses map statuses to typed errors in ``_raise_for``."""

    # /metrics counts every typed error (devices.error_counts)
    __init_subclass__ = classmethod(count_device_errors)

    #: Header sent with every request (only to our own base URL).
    def __init__(
        self,
        base_url: str,
        *,
        headers: dict[str, str] | None = None,
        transport: httpx.BaseTransport | None = None,
        timeouts: Timeouts = DEFAULT_TIMEOUTS,
        secret: str = "",
    ) -> None:
        self.base_url = validate_base_url(base_url)
        self.timeouts = timeouts
        #: seconds from each request sent to its answer's head (the poller records them: the link's round trip)
        self.round_trips: list[float] = []
        self._secret = secret
        self._http = httpx.Client(
            base_url=self.base_url + "/",
            headers=headers or {},
            transport=transport,
            follow_redirects=False,
            timeout=timeouts.of(timeouts.manage),
            verify=_tls(),
        )
        self._origin = httpx.URL(self.base_url + "/")

    def __repr__(self) -> str:
        return f"{type(self).__name__}(base_url={self.base_url!r})"

    def close(self) -> None:
        self._http.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    # -- scrubbing ---------------------------------------------------------------------------------------
    def scrub(self, text: str | None) -> str | None:
        if text and self._secret and self._secret in text:
            return text.replace(self._secret, "[redacted]")
        return text

    # -- requests ----------------------------------------------------------------------------------------
    def _url(self, path: str) -> str:
        # Relative to base_url (which may carry a path prefix behind a reverse proxy).
        return path.lstrip("/")

    #: Called before every request sent (``devices.services.client_for`` sets it for the job path: the metric
    #: poller's optional tick gives way to the job's own requests). Must not raise.
    on_request: Callable[[], None] | None = None
    #: The device's link gate (``devices.silence.LinkGate``, set by ``client_for``): ``before()`` may refuse a
    #: request to a device gone silent without sending it; ``answered()`` / ``timed_out()`` after each one.
    link: Any = None

    def request(self, method: str, path: str, *, read: float, **kw: Any) -> httpx.Response:
        """One request with redirects handled by hand; raises typed errors for transport failures only."""
        cap = self._before(read)
        timeout = self.timeouts.of(min(read, cap) if cap else read)
        url: str = self._url(path)
        for _ in range(MAX_REDIRECTS + 1):
            started = time.monotonic()
            try:
                resp = self._http.request(method, url, timeout=timeout, **kw)
            except httpx.HTTPError as exc:
                raise self._transport_error(exc, method, path) from None
            self._answered()
            self.round_trips.append(time.monotonic() - started)
            logger.debug("%s %s -> %s in %.2fs", method, path, resp.status_code, time.monotonic() - started)
            if resp.status_code not in (301, 302, 303, 307, 308) or "location" not in resp.headers:
                return resp
            url = self._redirect_target(resp, path)
        raise errors.BadRequest("The device redirected too many times.", detail=path)

    def _redirect_target(self, resp: httpx.Response, path: str) -> str:
        target = resp.request.url.join(resp.headers["location"])
        if _same_origin(target, self._origin):
            return str(target)
        # A foreign host: keep our host, take only the path. Never send the key to ``target``.
        base_path = self._origin.path.rstrip("/")
        if base_path and not target.path.startswith(base_path + "/"):
            rel = target.path
        else:
            rel = target.path[len(base_path) :] if base_path else target.path
        logger.info(
            "device redirected %s to another host (%s); re-issuing on our own host", path, target.host
        )
        return rel.lstrip("/") + (f"?{target.query.decode()}" if target.query else "")

    @contextmanager
    def stream(self, method: str, path: str, *, read: float, **kw: Any) -> Iterator[httpx.Response]:
        """Streaming request (downloads, SSE). No redirects are followed on streams."""
        cap = self._before(read)
        timeout = self.timeouts.of(min(read, cap) if cap else read)
        try:
            with self._http.stream(method, self._url(path), timeout=timeout, **kw) as resp:
                self._answered()
                if resp.status_code in (301, 302, 303, 307, 308):
                    raise errors.BadRequest(
                        "The device redirected a download; refusing to follow.",
                        detail=self.scrub(resp.headers.get("location")),
                    )
                yield resp
        except httpx.HTTPError as exc:
            raise self._transport_error(exc, method, path) from None

    def _before(self, read: float) -> float | None:
        """Before each request: the link gate (may refuse; a shorter deadline for a try), then ``on_request``."""
        cap = self.link.before(read) if self.link is not None else None
        if self.on_request is not None:
            self.on_request()
        return cap

    def _answered(self) -> None:
        if self.link is not None:
            self.link.answered()

    def _transport_error(self, exc: httpx.HTTPError, method: str, path: str) -> errors.DeviceError:
        where = f"{method} {path}"
        if self.link is not None:
            # Silent: the next calls fail at once until its window ends (devices.silence). A refused or broken
            # connection is no silence: packets came back.
            if isinstance(exc, httpx.TimeoutException):
                self.link.timed_out()
            else:
                self.link.answered()
        if isinstance(exc, (httpx.ConnectError, httpx.ConnectTimeout, httpx.PoolTimeout)):
            return errors.DeviceUnreachable(detail=self.scrub(f"{where}: {type(exc).__name__}: {exc}"))
        if isinstance(exc, httpx.TimeoutException):
            return errors.DeviceTimeout(detail=self.scrub(f"{where}: no answer in time"))
        if isinstance(exc, (httpx.RemoteProtocolError, httpx.ReadError, httpx.WriteError)):
            return errors.Transient(
                "The connection to the device broke.",
                detail=self.scrub(f"{where}: {type(exc).__name__}: {exc}"),
            )
        return errors.Transient(detail=self.scrub(f"{where}: {type(exc).__name__}: {exc}"))

    # -- helpers -----------------------------------------------------------------------------------------
    def json(self, resp: httpx.Response) -> Any:
        try:
            return resp.json()
        except ValueError:
            raise errors.Transient(
                "The device sent an answer the hub cannot read.", detail=self.scrub(resp.text[:200])
            ) from None

    #: A broken result download is tried again this many times in all (``fetch_file``), waiting the next of these
    #: seconds between two (a Wi-Fi link that dropped mid-body); the job's collect step tries again after that.
    download_attempts: int = 4
    download_backoff_s: tuple[float, ...] = (1.0, 3.0, 9.0)
    sleep: Callable[[float], None] = staticmethod(time.sleep)

    def fetch_file(self, path: str, dest: Path, *, refuse: Callable[[httpx.Response], None]) -> int:
        """Download ``path`` to ``dest`` whole, or raise; returns the byte count.

        A body that breaks goes on from where it stopped when the device answers ``Range`` (a 206 whose
        ``Content-Range`` starts at the bytes we hold), and starts again from the first byte when it doesn't (a
        200). At most ``download_attempts`` requests, with a growing wait between two. The file counts only when
        its length is what the device declared (``Content-Length``, or a ``Content-Range`` total) and its
        container is whole for its format (``containers``, by ``dest``'s name); until then it is a ``.part``
        beside ``dest``. ``refuse(resp)`` raises the typed error for an answer that is not the file.
        """
        dest = Path(dest)
        dest.parent.mkdir(parents=True, exist_ok=True)
        tmp = dest.with_name(dest.name + ".part")
        tmp.unlink(missing_ok=True)
        got = _Got()
        try:
            for attempt in range(1, self.download_attempts + 1):
                try:
                    self._fetch_once(path, tmp, got, refuse)
                    break
                except errors.DeviceError as exc:
                    if not _retryable(exc) or attempt == self.download_attempts:
                        raise
                    logger.info(
                        "download %s broke (%s); attempt %d/%d",
                        path,
                        exc.code,
                        attempt,
                        self.download_attempts,
                    )
                    self.sleep(self.download_backoff_s[min(attempt, len(self.download_backoff_s)) - 1])
            if (why := containers.problem(tmp, containers.format_of(dest.name))) is not None:
                raise errors.Transient("The downloaded result is not whole.", detail=why)
        except BaseException:  # a full disk (ENOSPC), a refusal, a cut: no half file is left behind
            tmp.unlink(missing_ok=True)
            raise
        tmp.replace(dest)
        return got.size

    def _fetch_once(self, path: str, tmp: Path, got: _Got, refuse: Callable[[httpx.Response], None]) -> None:
        headers = {
            "Accept-Encoding": "identity"
        }  # the bytes as stored: their length and ranges are the file's
        if got.size:
            headers["Range"] = f"bytes={got.size}-"
        with self.stream("GET", path, read=self.timeouts.download, headers=headers) as resp:
            if resp.status_code not in (200, 206):
                resp.read()
                got.refused(resp)
                refuse(resp)
                raise errors.Transient(
                    f"The device answered HTTP {resp.status_code} for a file.", status=resp.status_code
                )
            got.start(resp)
            pace = _Pace(self.timeouts.download_min_rate, self.timeouts.download_rate_window)
            try:
                with open(tmp, "r+b" if got.size else "wb") as fh:
                    fh.seek(got.size)
                    fh.truncate()
                    for chunk in resp.iter_bytes():  # as they come: a break keeps every byte received
                        fh.write(chunk)
                        got.size += len(chunk)
                        pace.check(len(chunk), path)
            except httpx.HTTPError as exc:
                raise self._transport_error(exc, "GET", path) from None
        if got.total is not None and got.size != got.total:
            raise errors.Transient(
                "The device sent a shorter file than it declared.",
                detail=f"{path}: {got.size} of {got.total} bytes",
            )

    def resolve_own(self, url_or_path: str) -> str:
        """A device-given result URL, resolved against our base URL only; another origin is refused."""
        target = httpx.URL(urljoin(self.base_url + "/", url_or_path))
        if not _same_origin(target, self._origin):
            raise errors.BadRequest(
                "The device pointed to a file on another host; refusing to fetch it.",
                detail=self.scrub(str(url_or_path)),
            )
        return str(target)


def retry_call(
    fn: Callable[[], Any],
    *,
    retry_on: tuple[type[BaseException], ...],
    attempts: int,
    wait_s: float,
    sleep: Callable[[float], None],
) -> Any:
    """Call ``fn``; on one of ``retry_on`` wait and try again, at most ``attempts`` calls in all."""
    for attempt in range(1, attempts + 1):
        try:
            return fn()
        except retry_on as exc:
            if attempt == attempts:
                raise
            logger.info("retrying after %s (attempt %d/%d)", exc.__class__.__name__, attempt, attempts)
            sleep(wait_s)
    raise AssertionError("unreachable")


def _retryable(exc: errors.DeviceError) -> bool:
    """A connection that broke mid-body (or a body short of its length, a range that did not fit): worth asking
    again at once. A refusal is not, nor a device that went silent or can't be reached: waiting out a timeout
    again and again would hold the worker; the job's next collect step asks later."""
    return isinstance(exc, errors.Transient) and exc.status is None


class _Pace:
    """A download's progress deadline: at least ``min_rate`` bytes a second over each ``window`` seconds. A break
    keeps what was received (the next request asks for the rest)."""

    def __init__(self, min_rate: float, window: float, clock: Callable[[], float] = time.monotonic) -> None:
        self.min_rate, self.window, self.clock = min_rate, window, clock
        self.started, self.got = clock(), 0

    def check(self, n: int, path: str) -> None:
        self.got += n
        spent = self.clock() - self.started
        if spent < self.window:
            return
        if self.got < self.min_rate * spent:
            raise errors.DeviceTimeout(
                "The download from the device is too slow.",
                detail=f"{path}: {self.got} bytes in {spent:.0f}s (at least {self.min_rate:.0f} B/s expected)",
            )
        self.started, self.got = self.clock(), 0


_CONTENT_RANGE = re.compile(r"^\s*bytes\s+(\d+)-(\d+)/(\d+|\*)\s*$", re.IGNORECASE)


class _Got:
    """What a download holds so far: ``size`` bytes in the ``.part``, of ``total`` the device declared."""

    def __init__(self) -> None:
        self.size = 0
        self.total: int | None = None

    def _again(self, why: str, detail: str | None) -> errors.Transient:
        """Begin again from the first byte, without a range (the next request gets the whole body)."""
        self.size, self.total = 0, None
        return errors.Transient(why, detail=detail)

    def refused(self, resp: httpx.Response) -> None:
        if resp.status_code == 416 and self.size:  # the range we asked is not there (the file changed?)
            raise self._again("The device refused the range asked.", resp.headers.get("content-range"))

    def start(self, resp: httpx.Response) -> None:
        """Where this answer's body goes: after the bytes held (a 206 for exactly them) or from the first byte."""
        encoded = resp.headers.get("content-encoding", "identity").lower() != "identity"
        if resp.status_code == 206 and self.size and not encoded:
            match = _CONTENT_RANGE.match(resp.headers.get("content-range", ""))
            if match is None or int(match.group(1)) != self.size:
                raise self._again(
                    "The device answered another range than asked.", resp.headers.get("content-range")
                )
            total = None if match.group(3) == "*" else int(match.group(3))
            if self.total is not None and total != self.total:
                raise self._again("The file changed on the device.", resp.headers.get("content-range"))
            length = _declared(resp)
            if total is not None and length is not None and self.size + length != total:
                raise self._again(
                    "The device's range and length disagree.", resp.headers.get("content-range")
                )
            self.total = total
            return
        # A 200: the device ignores ranges (or this is the first try): the whole body comes. A body it encodes
        # (gzip despite "identity") has no length of its own to check: the container check stands for it.
        self.size = 0
        self.total = None if encoded else _declared(resp)


def _declared(resp: httpx.Response) -> int | None:
    value = resp.headers.get("content-length", "")
    return int(value) if value.isdigit() else None

"""The web server's ceiling on request bodies, decided before Django reads any of them.

Django's ASGIHandler reads a request's whole body (into a SpooledTemporaryFile: memory up to
``FILE_UPLOAD_MAX_MEMORY_SIZE``, then a file on disk) before any middleware or view runs, so a limit inside Django
comes after the cost: an anonymous 150 MB POST to the sign-in page was written to a temp file before its 403, and
a plain ``make up`` on the LAN has no proxy in front to cap it. :class:`BodyLimit` wraps the HTTP app (hub.asgi)
and gives each request its ceiling from its route and its caller before it reads anything:

1. a Content-Length up to ``HUB_BODY_MAX_KB`` (every ordinary form and API call) goes through as it is;
2. otherwise the route decides: a POST to one of :data:`UPLOAD_ROUTES` by a person signed in (the session looked up
   in the session store, so a made-up cookie counts for nothing) or with a live token may send
   ``HUB_UPLOAD_MAX_MB``; every other request ``HUB_BODY_MAX_KB``;
3. a Content-Length over the ceiling: 413 at once, nothing read;
4. a chunked body (no Content-Length) is counted as it streams to Django: the piece that would cross the ceiling is
   never passed on, Django is told the client went away (it drops the little it had and answers nothing), and the
   answer is 413.

The 413 says ``Connection: close``: the server reads no more of that body, and the client learns it at once (one
that asked ``Expect: 100-continue``, as curl does for a large body, never sends a declared body that is too large).
It answers in the shape of the door asked: the API's ``{"detail": …}`` under /api/, OpenAI's ``{"error": …}`` under
/v1/, a small page elsewhere.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, MutableMapping
from json import dumps
from typing import Any, NamedTuple

from asgiref.sync import sync_to_async
from django.conf import settings
from django.db import connections
from django.http import parse_cookie
from django.template.loader import render_to_string
from django.urls import Resolver404, get_resolver, get_urlconf

from hub.accounts.sessions import session_user
from hub.accounts.tokens import token_is_live

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
App = Callable[[Scope, Receive, Send], Awaitable[None]]

#: The routes (URL names) whose POST carries files: the only ones where a body may pass ``HUB_BODY_MAX_KB``.
UPLOAD_ROUTES = frozenset(
    {
        "jobs-new",  # the new-job form: a picture, start and end images, a voice to clone
        "jobs-again",  # run again with changes: the same form
        "jobs-admission",  # the summary under that form: htmx posts the whole form, its files included
        "jobs-from-file",  # a picture the hub made, dropped onto that form to fill it in
        "api:job_submit",  # POST /api/jobs: multipart files, or JSON
        "v1:videos",  # POST /v1/videos: input_reference, a multipart file or a base64 data URL
    }
)

KB = 1024
MB = 1024 * KB


class Ceiling(NamedTuple):
    size: int  # bytes
    note: str = ""  # a sentence for the refused person: how they could send more, if they could


def small_ceiling() -> int:
    return settings.HUB_BODY_MAX_KB * KB


def upload_ceiling() -> int:
    return settings.HUB_UPLOAD_MAX_MB * MB


def shown(size: int) -> str:
    """``25 MB``, ``1 MB``, ``512 KB``."""
    return f"{size // MB} MB" if size % MB == 0 else f"{size // KB} KB"


def _headers(scope: Scope) -> dict[str, str]:
    """The request's headers by lower-case name; repeated ones joined (cookies with ``; ``, as Django does)."""
    out: dict[str, str] = {}
    for raw_name, raw_value in scope.get("headers", []):
        name, value = raw_name.decode("latin-1").lower(), raw_value.decode("latin-1")
        out[name] = f"{out[name]}{'; ' if name == 'cookie' else ', '}{value}" if name in out else value
    return out


def declared_length(headers: dict[str, str]) -> int | None:
    """The Content-Length, or None when the body's length is not said (chunked). The server has checked it."""
    try:
        return int(headers["content-length"])
    except (KeyError, ValueError):
        return None


def _route(scope: Scope) -> str | None:
    path = scope["path"]
    root = scope.get("root_path", "")
    if root and path.startswith(root):
        path = path[len(root) :]
    try:
        return get_resolver(get_urlconf()).resolve(path).view_name
    except Resolver404:
        return None


def signed_in(headers: dict[str, str]) -> bool:
    """A live token, or the session of a person who may sign in; as the doors decide, so a request that carries
    ``Authorization`` counts by its token alone (the API never falls back to the session then).

    Runs in a thread of its own; that thread's database connection is given back at the end (a pooled
    PostgreSQL connection would otherwise stay taken by a thread no request ends)."""
    try:
        if "authorization" in headers:
            scheme, _, raw = headers["authorization"].strip().partition(" ")
            return scheme.lower() == "bearer" and token_is_live(raw.strip())
        key = parse_cookie(headers.get("cookie", "")).get(settings.SESSION_COOKIE_NAME)
        return bool(key) and session_user(key) is not None
    finally:
        connections.close_all()


async def ceiling(scope: Scope, headers: dict[str, str]) -> Ceiling:
    """The most this request may send: the session or token is looked up only on an upload route's POST."""
    small = Ceiling(small_ceiling())
    if scope["method"] != "POST" or _route(scope) not in UPLOAD_ROUTES:
        return small
    if await sync_to_async(signed_in, thread_sensitive=False)(headers):
        return Ceiling(upload_ceiling())
    most = shown(upload_ceiling())
    note = f"Uploads of up to {most} are taken from people signed in, or with a valid API token."
    return small._replace(note=note)


def too_large(path: str, limit: Ceiling) -> tuple[str, bytes, list[tuple[bytes, bytes]]]:
    """The 413's content type, body and extra headers, in the shape of the door the path belongs to."""
    detail = f"The request body is too large; the limit is {shown(limit.size)}." + (
        f" {limit.note}" if limit.note else ""
    )
    if path.startswith("/api/"):
        return "application/json", dumps({"detail": detail}).encode(), []
    if path.startswith("/v1/"):
        error = {
            "message": detail,
            "type": "invalid_request_error",
            "param": None,
            "code": "request_too_large",
        }
        # The SDK retries some statuses by itself; the same body would only be refused again.
        return "application/json", dumps({"error": error}).encode(), [(b"x-should-retry", b"false")]
    page = render_to_string("errors/413.html", {"limit": shown(limit.size), "note": limit.note})
    return "text/html; charset=utf-8", page.encode(), []


async def refuse(scope: Scope, send: Send, limit: Ceiling) -> None:
    content_type, body, extra = too_large(scope["path"], limit)
    headers = [
        (b"content-type", content_type.encode()),
        (b"content-length", str(len(body)).encode()),
        (b"connection", b"close"),  # the rest of the body is never read: this connection carries nothing more
        *extra,
    ]
    await send({"type": "http.response.start", "status": 413, "headers": headers})
    await send({"type": "http.response.body", "body": body})


class Meter:
    """The app's ``receive``: passes the body on while it stays within ``limit``; the message that would cross it
    is kept back and the app hears ``http.disconnect`` instead (then and on every later call)."""

    def __init__(self, receive: Receive, limit: int) -> None:
        self._receive = receive
        self.limit = limit
        self.seen = 0
        self.over = False

    async def __call__(self) -> Message:
        if self.over:
            return {"type": "http.disconnect"}
        message = await self._receive()
        if message["type"] == "http.request":
            self.seen += len(message.get("body", b""))
            if self.seen > self.limit:
                self.over = True
                return {"type": "http.disconnect"}
        return message


class BodyLimit:
    """ASGI middleware for HTTP: a body over its route's ceiling is refused before the app reads it (see above)."""

    def __init__(self, app: App) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = _headers(scope)
        declared = declared_length(headers)
        limit = Ceiling(small_ceiling())
        if "transfer-encoding" in headers or (declared is not None and declared > limit.size):
            limit = await ceiling(scope, headers)
        if declared is not None and declared > limit.size:
            await refuse(scope, send, limit)
            return
        await self._counted(scope, receive, send, limit)

    async def _counted(self, scope: Scope, receive: Receive, send: Send, limit: Ceiling) -> None:
        meter = Meter(receive, limit.size)
        started = False

        async def watched(message: Message) -> None:
            nonlocal started
            started = started or message["type"] == "http.response.start"
            await send(message)

        await self.app(scope, meter, watched)
        # Django answers nothing to a client that went away; an app that had already started its answer keeps it
        # (the server then closes the connection: the request's body was never read to its end).
        if meter.over and not started:
            await refuse(scope, send, limit)

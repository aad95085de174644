"""hub.bodylimit in-process: the ASGI messages a server would give, the app behind it real (Django's handler) or
a recorder of what it was given. Over a real server: hub/tests/test_body_limit_server.py."""

from __future__ import annotations

import json

import pytest
from asgiref.sync import sync_to_async
from django.test import Client
from django.urls import reverse

from hub.accounts.tokens import token_create, token_revoke
from hub.asgi import django_asgi_app
from hub.bodylimit import UPLOAD_ROUTES, BodyLimit

pytestmark = pytest.mark.django_db(transaction=True)  # the session lookup runs in a thread of its own

CHUNK = 16 * 1024


@pytest.fixture(autouse=True)
def _small_limits(settings):
    settings.HUB_BODY_MAX_KB = 64
    settings.HUB_UPLOAD_MAX_MB = 1


def _scope(path: str, *, method: str = "POST", length: int | None = None, **headers: str) -> dict:
    raw = [(b"host", b"127.0.0.1")]
    if length is None:
        raw.append((b"transfer-encoding", b"chunked"))
    else:
        raw.append((b"content-length", str(length).encode()))
    raw += [(name.replace("_", "-").encode(), value.encode()) for name, value in headers.items()]
    return {
        "type": "http",
        "asgi": {"version": "3.0"},
        "http_version": "1.1",
        "method": method,
        "scheme": "http",
        "path": path,
        "raw_path": path.encode(),
        "root_path": "",
        "query_string": b"",
        "headers": raw,
        "client": ("127.0.0.1", 50000),
        "server": ("127.0.0.1", 8000),
    }


class Peer:
    """The server's side: a body in chunks of ``CHUNK`` (as many as asked for), and what the app sent back."""

    def __init__(self, total: int) -> None:
        self.left = total
        self.asked = 0
        self.sent: list[dict] = []

    async def receive(self) -> dict:
        self.asked += 1
        piece = min(CHUNK, self.left)
        self.left -= piece
        return {"type": "http.request", "body": b"x" * piece, "more_body": self.left > 0}

    async def send(self, message: dict) -> None:
        self.sent.append(message)

    @property
    def status(self) -> int:
        return self.sent[0]["status"]

    @property
    def headers(self) -> dict[bytes, bytes]:
        return dict(self.sent[0]["headers"])

    @property
    def body(self) -> bytes:
        return b"".join(m.get("body", b"") for m in self.sent[1:])


class Recorder:
    """An app that reads the whole body as Django does, and answers 200 once it has it."""

    def __init__(self) -> None:
        self.got = 0
        self.heard: list[str] = []
        self.called = False

    async def __call__(self, scope, receive, send) -> None:
        self.called = True
        while True:
            message = await receive()
            self.heard.append(message["type"])
            if message["type"] == "http.disconnect":
                return
            self.got += len(message["body"])
            if not message["more_body"]:
                break
        await send({"type": "http.response.start", "status": 200, "headers": []})
        await send({"type": "http.response.body", "body": b"ok"})


def _session_of(user) -> str:
    client = Client()
    client.force_login(user)
    return client.cookies["sessionid"].value


async def test_a_declared_length_over_the_limit_is_refused_before_anything_is_read():
    app, peer = Recorder(), Peer(150 * 1024 * 1024)
    await BodyLimit(app)(_scope("/accounts/login/", length=150 * 1024 * 1024), peer.receive, peer.send)
    assert peer.status == 413 and peer.headers[b"connection"] == b"close"
    assert peer.asked == 0 and not app.called
    assert b"64 KB" in peer.body and peer.headers[b"content-type"].startswith(b"text/html")


async def test_a_chunked_body_stops_at_the_limit_and_the_app_never_sees_past_it():
    app, peer = Recorder(), Peer(100 * 1024 * 1024)
    await BodyLimit(app)(_scope("/accounts/login/"), peer.receive, peer.send)
    assert peer.status == 413 and peer.headers[b"connection"] == b"close"
    assert app.got <= 64 * 1024 and app.heard[-1] == "http.disconnect"
    assert peer.asked == 64 * 1024 // CHUNK + 1  # the piece that crossed the limit was the last one read


async def test_django_itself_spools_no_more_than_the_limit_of_a_chunked_body(monkeypatch):
    """The real handler: the body file Django writes never grows past the limit, and it answers nothing itself."""
    from django.core.handlers import asgi as django_asgi

    written = []
    real = django_asgi.tempfile.SpooledTemporaryFile

    class Watched(real):
        def write(self, data):
            written.append(len(data))
            return super().write(data)

    monkeypatch.setattr(django_asgi.tempfile, "SpooledTemporaryFile", Watched)
    peer = Peer(10 * 1024 * 1024)
    await BodyLimit(django_asgi_app)(_scope("/accounts/login/"), peer.receive, peer.send)
    assert peer.status == 413 and len(peer.sent) == 2  # ours alone: Django answered nothing
    assert 0 < sum(written) <= 64 * 1024


async def test_a_body_within_the_limit_passes_whole():
    app, peer = Recorder(), Peer(60 * 1024)
    await BodyLimit(app)(_scope("/accounts/login/"), peer.receive, peer.send)
    assert peer.status == 200 and app.got == 60 * 1024 and "http.disconnect" not in app.heard


async def test_an_upload_route_takes_the_upload_limit_from_a_signed_in_person(member):
    session = await sync_to_async(_session_of)(member)
    for path in ("/jobs/new/", "/jobs/new/admission/", "/jobs/new/from-file/", "/jobs/7/again/"):
        app, peer = Recorder(), Peer(900 * 1024)
        scope = _scope(path, length=900 * 1024, cookie=f"csrftoken=x; sessionid={session}")
        await BodyLimit(app)(scope, peer.receive, peer.send)
        assert peer.status == 200 and app.got == 900 * 1024, path
    app, peer = Recorder(), Peer(2 * 1024 * 1024)
    await BodyLimit(app)(_scope("/jobs/new/", cookie=f"sessionid={session}"), peer.receive, peer.send)
    assert peer.status == 413 and app.got <= 1024 * 1024 and b"1 MB" in peer.body


async def test_a_made_up_or_ended_session_gets_the_small_limit(member):
    session = await sync_to_async(_session_of)(member)
    await sync_to_async(lambda: member.__class__.objects.filter(pk=member.pk).update(is_active=False))()
    for cookie in ("sessionid=abcdefghijklmnopqrstuvwxyz012345", f"sessionid={session}", "other=1"):
        app, peer = Recorder(), Peer(900 * 1024)
        await BodyLimit(app)(_scope("/jobs/new/", length=900 * 1024, cookie=cookie), peer.receive, peer.send)
        assert peer.status == 413 and not app.called, cookie
        assert b"signed in" in peer.body


async def test_the_lookup_changes_no_session(member, settings):
    """A session signed with a secret since rotated (SECRET_KEY_FALLBACKS) still counts, and keeps its key: Django's
    get_user would give it a new one here, which the browser would never learn (the person signed out)."""
    from django.contrib.sessions.backends.db import SessionStore

    session = await sync_to_async(_session_of)(member)
    settings.SECRET_KEY_FALLBACKS = [settings.SECRET_KEY]
    settings.SECRET_KEY = "a-new-secret-key-" + "x" * 40
    app, peer = Recorder(), Peer(900 * 1024)
    await BodyLimit(app)(
        _scope("/jobs/new/", length=900 * 1024, cookie=f"sessionid={session}"), peer.receive, peer.send
    )
    assert peer.status == 200 and app.got == 900 * 1024
    assert await sync_to_async(SessionStore().exists)(session)


async def test_a_signed_in_person_has_the_small_limit_off_the_upload_routes(member):
    session = await sync_to_async(_session_of)(member)
    for method, path in (("POST", "/accounts/settings/"), ("GET", "/jobs/new/"), ("POST", "/jobs/7/cancel/")):
        app, peer = Recorder(), Peer(900 * 1024)
        scope = _scope(path, method=method, length=900 * 1024, cookie=f"sessionid={session}")
        await BodyLimit(app)(scope, peer.receive, peer.send)
        assert peer.status == 413 and not app.called, path


async def test_the_api_answers_413_in_its_shape_and_a_live_token_lifts_the_limit(member):
    token, raw = await sync_to_async(token_create)(user=member, name="script", scopes=["read", "submit"])
    app, peer = Recorder(), Peer(900 * 1024)
    await BodyLimit(app)(
        _scope("/api/jobs", length=900 * 1024, authorization=f"Bearer {raw}"), peer.receive, peer.send
    )
    assert peer.status == 200 and app.got == 900 * 1024
    await sync_to_async(token_revoke)(token=token, by=member)
    session = await sync_to_async(_session_of)(member)
    for auth in (f"Bearer {raw}", "Bearer thub_" + "a" * 43, "Basic eDp5"):
        # A request with Authorization counts by its token alone, as the API decides: the session does not help.
        app, peer = Recorder(), Peer(900 * 1024)
        scope = _scope("/api/jobs", authorization=auth, cookie=f"sessionid={session}")
        await BodyLimit(app)(scope, peer.receive, peer.send)
        assert peer.status == 413 and peer.headers[b"content-type"] == b"application/json", auth
        detail = json.loads(peer.body)["detail"]
        assert detail.startswith("The request body is too large; the limit is 64 KB.") and "1 MB" in detail


async def test_v1_answers_413_in_openais_shape():
    app, peer = Recorder(), Peer(10 * 1024 * 1024)
    await BodyLimit(app)(_scope("/v1/videos", length=10 * 1024 * 1024), peer.receive, peer.send)
    error = json.loads(peer.body)["error"]
    assert peer.status == 413 and peer.headers[b"x-should-retry"] == b"false"
    assert error["code"] == "request_too_large" and error["type"] == "invalid_request_error"


async def test_an_app_that_already_answered_keeps_its_answer():
    async def early(scope, receive, send):
        await send({"type": "http.response.start", "status": 202, "headers": []})
        while (await receive())["type"] != "http.disconnect":
            pass
        await send({"type": "http.response.body", "body": b""})

    peer = Peer(1024 * 1024)
    await BodyLimit(early)(_scope("/accounts/login/"), peer.receive, peer.send)
    assert [m.get("status") for m in peer.sent] == [202, None]


async def test_websockets_pass_untouched():
    seen = []

    async def app(scope, receive, send):
        seen.append((scope, receive, send))

    async def receive():
        return {}

    async def send(message):
        return None

    scope = {"type": "websocket", "path": "/ws/", "headers": [(b"content-length", b"99999999")]}
    await BodyLimit(app)(scope, receive, send)
    assert seen == [(scope, receive, send)]


def test_every_upload_route_names_a_route_that_exists():
    """The table names routes, not paths: a renamed route would silently lose its upload limit."""
    arguments = {"jobs-again": [1]}
    for name in UPLOAD_ROUTES:
        assert reverse(name, args=arguments.get(name, []))

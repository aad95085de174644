"""The web server refuses a body over its route's limit before reading it (hub.bodylimit), as ``make up`` runs it.

Raw HTTP over a socket, so the test decides what is sent and when: each refused request stops sending before its
body is complete and waits for the answer. The server answering then is the proof it did not read (or spool) the
rest: before the limit existed, Django waited for the whole body, and these requests got no answer at all.
Limits here: 64 KB, and 2 MB for uploads.
"""

from __future__ import annotations

import io
import json
import os
import socket
from urllib.parse import urlsplit

import httpx
import pytest
from PIL import Image

from conftest import PASSWORD
from hub.accounts.tokens import token_create
from hub.testing import sign_in, start_asgi_server
from jobs.tests.ui_fixtures import MESH, device  # noqa: F401 - a fixture

pytestmark = [pytest.mark.integration, pytest.mark.django_db(transaction=True)]

SMALL = 64 * 1024
UPLOAD = 2 * 1024 * 1024
WAIT_S = 10  # far longer than any answer takes; a server still reading never answers at all


@pytest.fixture(scope="module")
def server(django_db_setup, django_db_blocker):
    with django_db_blocker.unblock():
        proc = start_asgi_server(workers=1, HUB_BODY_MAX_KB=str(SMALL // 1024), HUB_UPLOAD_MAX_MB="2")
    yield proc.extra["url"]
    proc.stop()


def _head(url: str, path: str, *, length: int | None, **headers: str) -> bytes:
    lines = [f"POST {path} HTTP/1.1", f"Host: {urlsplit(url).netloc}"]
    lines.append("Transfer-Encoding: chunked" if length is None else f"Content-Length: {length}")
    lines += [f"{name.replace('_', '-')}: {value}" for name, value in headers.items()]
    return ("\r\n".join(lines) + "\r\n\r\n").encode()


def _chunks(total: int, size: int = 16 * 1024) -> bytes:
    """``total`` bytes of chunked body, without the last (empty) chunk: the body is never finished."""
    out = bytearray()
    while total > 0:
        n = min(size, total)
        out += f"{n:x}\r\n".encode() + b"x" * n + b"\r\n"
        total -= n
    return bytes(out)


def _answer(url: str, head: bytes, body: bytes = b"") -> tuple[int, dict[str, str], bytes]:
    """Send ``head`` and ``body``, send nothing more, and read the answer."""
    parts = urlsplit(url)
    with socket.create_connection((parts.hostname, parts.port), timeout=WAIT_S) as sock:
        sock.sendall(head + body)
        got = b""
        while b"\r\n\r\n" not in got:
            piece = sock.recv(65536)
            assert piece, f"the server closed without answering: {got!r}"
            got += piece
        top, _, rest = got.partition(b"\r\n\r\n")
        lines = top.decode("latin-1").split("\r\n")
        headers = {k.lower(): v.strip() for k, _, v in (line.partition(":") for line in lines[1:])}
        while len(rest) < int(headers.get("content-length", 0)):
            piece = sock.recv(65536)
            assert piece, "the answer's body was cut short"
            rest += piece
    return int(lines[0].split()[1]), headers, rest


def test_an_anonymous_sign_in_post_declaring_150_mb_is_refused_at_once(server):
    status, headers, body = _answer(server, _head(server, "/accounts/login/", length=150 * 1024 * 1024))
    assert status == 413 and headers["connection"] == "close"
    assert headers["content-type"].startswith("text/html") and b"64 KB" in body


def test_an_anonymous_chunked_sign_in_post_is_refused_as_it_crosses_the_limit(server):
    status, headers, _ = _answer(
        server, _head(server, "/accounts/login/", length=None), _chunks(SMALL + 32 * 1024)
    )
    assert status == 413 and headers["connection"] == "close"


def test_an_api_submit_over_the_upload_limit_is_a_json_413_both_ways(server, member):
    _, raw = token_create(user=member, name="script", scopes=["read", "submit"])
    auth = {"Authorization": f"Bearer {raw}"}
    for length, body in ((100 * 1024 * 1024, b""), (None, _chunks(UPLOAD + 32 * 1024))):
        status, headers, answer = _answer(server, _head(server, "/api/jobs", length=length, **auth), body)
        assert status == 413 and headers["content-type"] == "application/json", length
        assert json.loads(answer) == {"detail": "The request body is too large; the limit is 2 MB."}


def test_an_api_submit_without_a_valid_token_has_the_small_limit(server):
    for auth in ({}, {"Authorization": "Bearer thub_" + "a" * 43}):
        status, _, answer = _answer(
            server, _head(server, "/api/jobs", length=None, **auth), _chunks(SMALL + 32 * 1024)
        )
        assert status == 413 and "64 KB" in json.loads(answer)["detail"], auth


def test_a_forged_session_cookie_gets_the_small_limit_on_the_new_job_form(server):
    cookie = {"Cookie": "sessionid=" + "z" * 32}
    status, _, body = _answer(server, _head(server, "/jobs/new/", length=SMALL + 1, **cookie))
    assert status == 413 and b"signed in" in body


def _noise_png() -> bytes:
    picture = io.BytesIO()
    Image.frombytes("RGB", (640, 640), os.urandom(640 * 640 * 3)).save(picture, "PNG")  # noise: ~1.2 MB
    assert SMALL < len(picture.getvalue()) < UPLOAD
    return picture.getvalue()


# Neither queues a job: its dispatch would wait in the broker for a later test's worker.
def test_a_signed_in_upload_under_the_limit_is_read_whole(server, member, device):  # noqa: F811 - a fixture
    """The new-job form's summary decodes the picture: the whole body reached the view."""
    client = sign_in(server, member.username, PASSWORD)
    try:
        response = client.post(
            "/jobs/new/admission/",
            data={"device": str(device.pk), "kind": "mesh", "model": MESH, "when": "asap"},
            files={"image": ("object.png", _noise_png(), "image/png")},
            headers={"X-CSRFToken": client.cookies["csrftoken"], "HX-Request": "true"},
        )
    finally:
        client.close()
    assert response.status_code == 200, response.text[:500]
    assert 'id="admission"' in response.text and "≈" in response.text


def test_a_token_upload_under_the_limit_reaches_the_apis_own_checks(server, member, device):  # noqa: F811
    _, raw = token_create(user=member, name="script", scopes=["read", "submit"])
    response = httpx.post(
        f"{server}/api/jobs",
        headers={"Authorization": f"Bearer {raw}"},
        data={"device": str(device.pk), "kind": "mesh", "model": "no/such-model"},
        files={"image": ("object.png", _noise_png(), "image/png")},
        timeout=30,
    )
    assert response.status_code == 422 and "model" in response.json()["errors"], response.text

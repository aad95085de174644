"""pytest plugin (loaded by the root conftest): no device API key and no API token leaves the hub.

Across the whole suite it watches every answer the tests read — Django's test ``Client``/``AsyncClient``
(bodies, streamed files, headers), channels' ``WebsocketCommunicator`` frames, ``websockets`` frames from the
live server, ``httpx`` responses — and every log record (a handler on the root logger), plus what the live
server, worker and beat wrote to their log files during the run.

The secrets are registered where they are born: every API key set through ``Device.api_key``'s setter and
every raw token made by ``hub.accounts.tokens.generate_token`` (which ``token_create`` calls), and every
notification channel's URL, signing secret and push auth secret sealed by ``notify.crypto.seal``. Secrets
shorter than ``MIN_LEN`` are skipped: tests use keys like ``"k"``, which would match everywhere.

The single intended display is exempt: the page that creates a token shows it once (``accounts-tokens-add``).
A leak fails the test during which it happened (at its teardown, naming where it was seen); a leak outside
any test (a session fixture, a server's log file) fails the session at the end.
"""

from __future__ import annotations

import functools
import logging
import os
import re
from pathlib import Path

import pytest

MIN_LEN = 8
_TOKEN_RE = re.compile(rb"thub_[A-Za-z0-9_-]{20,128}")
#: URL names whose answer may show a token: the one-time display after creating it
TOKEN_DISPLAY_VIEWS = {"accounts-tokens-add"}

_tokens: dict[bytes, str] = {}  # raw token -> what it is
_keys: dict[bytes, str] = {}  # device API key -> what it is
findings: list[tuple[str | None, str]] = []  # (test id or None, message)
_installed = False
_log_offsets: dict[Path, int] = {}


# -- registry and scanner ---------------------------------------------------------------------------------
def register_token(raw: str, what: str = "an API token") -> None:
    if raw and len(raw) >= MIN_LEN:
        _tokens[raw.encode()] = what


def register_key(key: str, what: str = "a device API key") -> None:
    if key and len(key) >= MIN_LEN:
        _keys[key.encode()] = what


def _current_test() -> str | None:
    current = os.environ.get("PYTEST_CURRENT_TEST")
    return current.rsplit(" ", 1)[0] if current else None


def leaks_in(data: bytes | str, *, allow_tokens: bool = False) -> list[str]:
    """What registered secrets ``data`` contains (their descriptions, never the secrets themselves)."""
    if isinstance(data, str):
        data = data.encode("utf-8", "replace")
    found = []
    if not allow_tokens and b"thub_" in data:
        found += [_tokens[m] for m in _TOKEN_RE.findall(data) if m in _tokens]
    found += [what for key, what in _keys.items() if key in data]
    return found


def scan(data: bytes | str, where: str, *, allow_tokens: bool = False) -> bool:
    """Record a finding for each secret in ``data``; True when there was one."""
    leaks = leaks_in(data, allow_tokens=allow_tokens)
    for what in leaks:
        findings.append((_current_test(), f"{what} in {_redacted(where)}"))
    return bool(leaks)


def _redacted(text: str) -> str:
    """``text`` (e.g. a path) with every registered secret in it replaced: a report never repeats one."""
    for secret in [*_keys, *_tokens]:
        text = text.replace(secret.decode(), "<secret>")
    return text


def take_findings(test: str | None = None) -> list[str]:
    """Remove and return the findings of ``test`` (of everything with ``None``)."""
    mine = [f for f in findings if test is None or f[0] == test]
    for f in mine:
        findings.remove(f)
    return [message for _, message in mine]


# -- what gets scanned ------------------------------------------------------------------------------------
def _response_bytes(response) -> bytes:
    if getattr(response, "streaming", False):
        if getattr(response, "is_async", False):
            return b""  # an async iterator can't be read twice here; nothing in the hub streams that way
        content = b"".join(response.streaming_content)
        response.streaming_content = [content]  # put back for the test to read
        return content
    return bytes(getattr(response, "content", b"") or b"")


def _scan_response(response, method: str, path: str) -> None:
    try:
        from django.urls import Resolver404, resolve

        try:
            name = resolve(path.split("?", 1)[0]).url_name
        except Resolver404:
            name = None
        headers = "\n".join(f"{k}: {v}" for k, v in response.items()).encode()
        scan(
            headers + b"\n" + _response_bytes(response),
            f"the answer to {method} {path} (status {response.status_code})",
            allow_tokens=name in TOKEN_DISPLAY_VIEWS,
        )
    except Exception:
        logging.getLogger(__name__).debug("could not scan a response", exc_info=True)


class _LogScanner(logging.Handler):
    def emit(self, record: logging.LogRecord) -> None:
        try:
            text = record.getMessage()
        except Exception:  # noqa: BLE001
            text = str(record.msg)
        if record.exc_info and not record.exc_text:
            text += "\n" + logging.Formatter().formatException(record.exc_info)
        elif record.exc_text:
            text += "\n" + record.exc_text
        scan(text, f"a log record of {record.name} ({record.levelname})")


def _install() -> None:
    global _installed
    if _installed:
        return
    _installed = True

    from channels.testing import WebsocketCommunicator
    from django.test import client as test_client

    from devices.models import Device
    from hub.accounts import tokens

    # Registration: where secrets are born.
    original_generate = tokens.generate_token

    @functools.wraps(original_generate)
    def generate_token() -> str:
        raw = original_generate()
        register_token(raw, "an API token")
        return raw

    tokens.generate_token = generate_token

    prop = Device.api_key

    def set_key(self, value):
        register_key(value or "", f"the API key of device {getattr(self, 'name', '?')!r}")
        prop.fset(self, value)

    Device.api_key = property(prop.fget, set_key, prop.fdel, prop.__doc__)

    # A notification channel's secrets: sealed by notify.crypto.seal, shown only masked afterwards.
    from notify import crypto as notify_crypto

    original_seal = notify_crypto.seal

    @functools.wraps(original_seal)
    def seal(data):
        register_key(str(data.get("url") or ""), "a notification channel's URL")
        register_key(str(data.get("secret") or ""), "a webhook's signing secret")
        keys = (data.get("subscription") or {}).get("keys") or {}
        register_key(str(keys.get("auth") or ""), "a push subscription's auth secret")
        return original_seal(data)

    notify_crypto.seal = seal

    # Answers of Django's test clients.
    original_request = test_client.Client.request

    @functools.wraps(original_request)
    def request(self, **environ):
        response = original_request(self, **environ)
        _scan_response(response, environ.get("REQUEST_METHOD", "?"), environ.get("PATH_INFO", "?"))
        return response

    test_client.Client.request = request

    original_arequest = test_client.AsyncClient.request

    @functools.wraps(original_arequest)
    async def arequest(self, **scope):
        response = await original_arequest(self, **scope)
        _scan_response(response, scope.get("method", "?"), scope.get("path", "?"))
        return response

    test_client.AsyncClient.request = arequest

    # Websocket frames: channels' communicator (in process) and the ``websockets`` client (live server).
    original_output = WebsocketCommunicator.receive_output

    async def receive_output(self, timeout=1):
        message = await original_output(self, timeout)
        if isinstance(message, dict):
            data = message.get("text") or message.get("bytes") or b""
            scan(data, f"a websocket frame to {getattr(self, 'scope', {}).get('path', '?')}")
        return message

    WebsocketCommunicator.receive_output = receive_output

    try:
        from websockets.asyncio.connection import Connection
    except ImportError:  # pragma: no cover - an older websockets
        Connection = None
    if Connection is not None:
        original_recv = Connection.recv

        @functools.wraps(original_recv)
        async def recv(self, *args, **kwargs):
            data = await original_recv(self, *args, **kwargs)
            scan(data if isinstance(data, (bytes, str)) else b"", "a websocket frame from the live server")
            return data

        Connection.recv = recv

    # httpx: answers of the live server (and of the emulator to the hub's device clients).
    import httpx

    original_send = httpx.Client.send

    @functools.wraps(original_send)
    def send(self, request, *args, **kwargs):
        response = original_send(self, request, *args, **kwargs)
        if not kwargs.get("stream") and response.is_closed:
            scan(response.content, f"the answer to {request.method} {request.url} (httpx)")
        return response

    httpx.Client.send = send

    # Logs: every record that reaches the root logger.
    logging.getLogger().addHandler(_LogScanner(level=logging.NOTSET))


def _server_logs() -> list[Path]:
    from hub.testing import log_dir

    directory = log_dir()
    return sorted(directory.glob("*.log")) if directory.exists() else []


# -- pytest hooks -----------------------------------------------------------------------------------------
def pytest_sessionstart(session):
    _install()
    for path in _server_logs():
        _log_offsets[path] = path.stat().st_size  # only what this run writes is ours to judge


@pytest.fixture(autouse=True)
def _no_secret_leaks(request):
    yield
    leaks = take_findings(request.node.nodeid)
    if leaks:
        pytest.fail(
            "a secret left the hub:\n  " + "\n  ".join(dict.fromkeys(leaks)) + "\n(hub/tests/leakguard.py)",
            pytrace=False,
        )


def pytest_sessionfinish(session, exitstatus):
    for path in _server_logs():
        try:
            with path.open("rb") as log:
                log.seek(_log_offsets.get(path, 0))
                scan(log.read(), f"the log file {path.name}")
        except OSError:
            continue
    leftover = take_findings()
    if leftover:
        reporter = session.config.pluginmanager.get_plugin("terminalreporter")
        text = "a secret left the hub outside any test:\n  " + "\n  ".join(dict.fromkeys(leftover))
        if reporter:
            reporter.write_line(text, red=True)
        session.exitstatus = pytest.ExitCode.TESTS_FAILED

"""The hub's ASGI handler (hub.handlers): a synchronous page makes one trip into its thread, an async view keeps
Django's async chain, and every middleware still acts on the answer.

Requests go through ``hub.asgi.application`` in-process (Channels' HttpCommunicator: the ASGI messages a server
would send), with a real session in the test database.
"""

from __future__ import annotations

import pytest
from asgiref.sync import SyncToAsync, sync_to_async
from channels.testing import HttpCommunicator
from django.core.handlers.asgi import ASGIHandler
from django.test import Client

from hub.asgi import django_asgi_app
from hub.handlers import HubASGIHandler

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def hops(monkeypatch):
    """How many times code crossed from the event loop into a thread (``sync_to_async`` calls)."""
    calls = []
    real = SyncToAsync.__call__

    async def counted(self, *args, **kwargs):
        calls.append(getattr(self.func, "__qualname__", repr(self.func)))
        return await real(self, *args, **kwargs)

    monkeypatch.setattr(SyncToAsync, "__call__", counted)
    return calls


def _session(user) -> str:
    client = Client()
    client.force_login(user)
    return client.cookies["sessionid"].value


async def _get(app, path: str, session: str = "") -> dict:
    headers = [(b"host", b"127.0.0.1")]
    if session:
        headers.append((b"cookie", f"sessionid={session}".encode()))
    return await HttpCommunicator(app, "GET", path, headers=headers).get_response(timeout=20)


async def test_a_signed_in_page_makes_one_trip_into_its_thread_and_every_middleware_acts(member, hops):
    session = await sync_to_async(_session)(member)
    hops.clear()

    response = await _get(django_asgi_app, "/accounts/settings/", session)
    assert response["status"] == 200
    headers = {k.decode().lower(): v.decode() for k, v in response["headers"]}
    # Sessions and auth (the person's own page), CSP, clickjacking, the hub's no-store for signed-in pages.
    assert member.username.encode() in response["body"]
    assert "content-security-policy" in headers and headers["x-frame-options"] == "DENY"
    assert "no-store" in headers["cache-control"]
    # Besides request_started's receivers (and the response's close, once it is sent): the middleware and the
    # view in one trip.
    trips = [name for name in hops if not name.startswith("Signal.") and name != "close"]
    assert trips == ["BaseHandler.get_response"], hops

    # Django's own handler, same page: a trip per middleware hook (what this handler saves).
    hops.clear()
    stock = await _get(ASGIHandler(), "/accounts/settings/", session)
    assert stock["status"] == 200
    assert len(hops) >= 8, hops


async def test_a_page_that_does_not_exist_is_the_hubs_404(member):
    session = await sync_to_async(_session)(member)
    response = await _get(django_asgi_app, "/no-such-page/", session)
    assert response["status"] == 404


async def test_a_signed_out_visit_is_sent_to_sign_in():
    response = await _get(django_asgi_app, "/accounts/settings/")
    assert response["status"] == 302
    assert dict(response["headers"])[b"Location"].startswith(b"/accounts/login/")


def test_only_async_views_take_djangos_async_chain():
    assert HubASGIHandler._is_async_view("/v1/images/generations")
    assert HubASGIHandler._is_async_view("/v1/audio/speech")
    assert not HubASGIHandler._is_async_view("/")
    assert not HubASGIHandler._is_async_view("/v1/models")
    assert not HubASGIHandler._is_async_view("/no-such-page/")

"""The hub's ASGI handler (hub.handlers): a synchronous page makes one trip into its thread, an async view keeps
Django's async chain, and every middleware still acts on the answer.

Requests go through ``hub.asgi.application`` in-process (Channels' HttpCommunicator: the ASGI messages a server
would send), with a real session in the test database.
"""

from __future__ import annotations

import asyncio
import contextvars
import threading

import pytest
from asgiref.sync import SyncToAsync, sync_to_async
from channels.testing import HttpCommunicator
from django.conf import settings
from django.core.handlers.asgi import ASGIHandler
from django.test import Client

from hub.asgi import django_asgi_app
from hub.handlers import HubASGIHandler, Lanes

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


async def _get(app, path: str, session: str = "", csrf: str = "") -> dict:
    """The answer, once the app is done with the request (its response closed, as a server waits for)."""
    headers = [(b"host", b"127.0.0.1")]
    cookies = "; ".join(
        f"{name}={value}" for name, value in (("sessionid", session), ("csrftoken", csrf)) if value
    )
    if cookies:
        headers.append((b"cookie", cookies.encode()))
    communicator = HttpCommunicator(app, "GET", path, headers=headers)
    response = await communicator.get_response(timeout=20)
    await communicator.wait(timeout=20)
    return response


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
    trips = [name for name in hops if not name.startswith("Signal.") and not name.endswith("close")]
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


# --- lanes: the threads that run requests live as long as the process -------------------------------------------
@pytest.fixture
def started_in():
    """For each request: the thread its request_started ran in, and the database connection that thread holds
    once Django's own receiver has closed what it should (an earlier request's connection, unless kept)."""
    from django.core.signals import request_started
    from django.db import connections

    seen = []

    def note(**_kwargs):
        seen.append((threading.current_thread(), connections["default"].connection))

    request_started.connect(note, dispatch_uid="test-lanes")
    yield seen
    request_started.disconnect(dispatch_uid="test-lanes")


async def test_requests_run_in_the_processes_lanes_and_no_thread_is_started_for_one(member, started_in):
    session = await sync_to_async(_session)(member)
    await _get(django_asgi_app, "/favicon.ico", session)  # the lane's thread starts with its first request
    threads_before = threading.active_count()

    for _ in range(10):
        assert (await _get(django_asgi_app, "/favicon.ico", session))["status"] == 200

    lanes = {thread for thread, _conn in started_in[1:]}
    assert len(lanes) == 1 and next(iter(lanes)).name.startswith("hub-lane-"), lanes
    assert threading.active_count() == threads_before  # Django's handler: two started (and joined) a request
    assert django_asgi_app.lanes.load() == [0] * settings.HUB_WEB_THREADS


def test_a_request_takes_the_lane_with_fewest_requests_in_it():
    lanes = Lanes(3)
    first, second, third = lanes.take(), lanes.take(), lanes.take()
    assert len({first, second, third}) == 3
    fourth = lanes.take()  # more requests than lanes: they share
    assert fourth is first and lanes.load() == [2, 1, 1]
    lanes.give_back(second)
    assert lanes.take() is second
    for lane in (first, second, third, fourth):
        lanes.give_back(lane)
    assert lanes.load() == [0, 0, 0]


@pytest.fixture
def kept_connections():
    """The web server's SQLite setting (CONN_MAX_AGE None: a lane keeps its connection); lanes closed after."""
    from django.db import connections

    db = connections.settings["default"]
    before = db.get("CONN_MAX_AGE", 0)
    db["CONN_MAX_AGE"] = None
    yield
    db["CONN_MAX_AGE"] = before
    for executor in django_asgi_app.lanes._executors:
        executor.submit(connections.close_all).result()


async def test_a_lane_keeps_its_database_connection_from_one_request_to_the_next(
    member, started_in, kept_connections
):
    session = await sync_to_async(_session)(member)
    for _ in range(3):
        assert (await _get(django_asgi_app, "/accounts/settings/", session))["status"] == 200

    (thread, _none), (same_thread, conn), (last_thread, last_conn) = started_in
    assert thread is same_thread is last_thread
    assert conn is not None and last_conn is conn, started_in  # the first request's, still open


async def test_without_a_kept_connection_each_request_closes_its_own(member, started_in):
    session = await sync_to_async(_session)(member)
    for _ in range(2):
        assert (await _get(django_asgi_app, "/accounts/settings/", session))["status"] == 200
    assert [conn for _thread, conn in started_in] == [None, None]  # CONN_MAX_AGE 0: never used twice


# --- the cache's Redis connections: one pool per process ---------------------------------------------------------
def test_every_cache_object_of_a_process_shares_one_redis_pool():
    from django.core.cache import caches

    one, other = caches.create_connection("default"), caches.create_connection("default")
    assert one is not other
    assert one._cache._get_connection_pool(False) is other._cache._get_connection_pool(True)
    one.set("test-shared-pool", "yes", 10)
    assert other.get("test-shared-pool") == "yes"


async def test_pages_read_the_cache_without_a_redis_connection_each(member, monkeypatch):
    import redis

    session = await sync_to_async(_session)(member)
    # The pool's first connection (a kept page reads Redis).
    await _get(django_asgi_app, "/", session, "c" * 32)
    connects = []
    real = redis.Connection._connect  # the socket's connect: the pool calls connect() on every checkout
    monkeypatch.setattr(redis.Connection, "_connect", lambda self: connects.append(1) or real(self))

    for _ in range(5):  # each in a context of its own, as a server's request tasks (nothing of this test's)
        request = asyncio.create_task(
            _get(django_asgi_app, "/", session, "c" * 32), context=contextvars.Context()
        )
        assert (await request)["status"] == 200

    assert connects == []  # Django's own backend: a new pool, so a new connection, every request

"""The first live wire, for real: browser socket <- the web server <- Redis channel layer <- Celery worker."""

from __future__ import annotations

import asyncio

import pytest
import websockets
from django.test import Client

from conftest import PASSWORD
from hub.testing import run_async, sign_in

pytestmark = pytest.mark.django_db


async def _receive_until(ws, needle: str, timeout: float) -> str:
    async def loop():
        while True:
            message = await ws.recv()
            if needle in message:
                return message

    return await asyncio.wait_for(loop(), timeout)


def test_it_refuses_a_socket_without_a_session(transactional_db, live_server_asgi):
    url = live_server_asgi.extra["url"].replace("http", "ws") + "/ws/hub/"

    async def attempt():
        async with websockets.connect(url, origin=live_server_asgi.extra["url"]) as ws:
            await ws.recv()

    # Closing before accept() is a rejection: the handshake answers 403.
    with pytest.raises(websockets.InvalidStatus) as rejected:
        run_async(attempt)
    assert rejected.value.response.status_code == 403


def test_it_refuses_a_socket_from_a_foreign_origin(transactional_db, live_server_asgi, member):
    client = sign_in(live_server_asgi.extra["url"], "mia", PASSWORD)
    url = live_server_asgi.extra["url"].replace("http", "ws") + "/ws/hub/"
    cookie = f"sessionid={client.cookies['sessionid']}"

    async def attempt():
        async with websockets.connect(
            url, origin="http://evil.example", additional_headers={"Cookie": cookie}
        ):
            pass

    with pytest.raises(websockets.InvalidStatus) as rejected:
        run_async(attempt)
    assert rejected.value.response.status_code == 403


@pytest.mark.integration
def test_a_worker_pushes_a_fragment_to_the_page(transactional_db, live_server_asgi, live_worker, admin_user):
    base = live_server_asgi.extra["url"]
    client = sign_in(
        base, "ada", PASSWORD
    )  # the check is an admin's (the card is on admins' dashboards only)
    cookie = f"sessionid={client.cookies['sessionid']}"
    csrf = client.cookies["csrftoken"]

    async def scenario() -> str:
        async with websockets.connect(
            base.replace("http", "ws") + f"/ws/hub/?watch=wire:{admin_user.pk}",  # what the dashboard watches
            origin=base,
            additional_headers={"Cookie": cookie},
        ) as ws:
            response = await asyncio.to_thread(
                client.post, "/live-wire/", headers={"X-CSRFToken": csrf, "HX-Request": "true"}
            )
            assert response.status_code == 202
            return await _receive_until(ws, 'id="live-wire"', timeout=20)

    fragment = run_async(scenario)
    assert 'hx-swap-oob="true"' in fragment
    assert "A worker answered at" in fragment


def test_the_live_wire_says_so_when_the_broker_is_down(admin_client, settings):
    from hub.testing import broker_unreachable

    with broker_unreachable():
        response = admin_client.post("/live-wire/", HTTP_HX_REQUEST="true")
    assert response.status_code == 503
    assert b"reach the background worker's queue (Redis)" in response.content


def test_the_dashboard_opens_the_socket(member_client, member, admin_client, admin_user):
    page = member_client.get("/").content.decode()
    assert 'hx-ext="ws"' in page and f'ws-connect="/ws/hub/?watch=mine:{member.pk}"' in page
    page = admin_client.get("/").content.decode()  # the live-wire check is on admins' dashboards only
    assert f'ws-connect="/ws/hub/?watch=mine:{admin_user.pk},wire:{admin_user.pk}"' in page
    assert Client().get("/").status_code == 302


def test_only_an_admin_may_watch_their_own_live_wire(member, viewer, admin_user):
    from django.core.exceptions import PermissionDenied

    from hub.live import wire_group, wire_topic

    assert wire_topic(admin_user, str(admin_user.pk)) == ([wire_group(admin_user.pk)], [])
    for person in (member, viewer):  # not even their own id: the card is an admin's
        with pytest.raises(PermissionDenied):
            wire_topic(person, str(person.pk))
    with pytest.raises(PermissionDenied):
        wire_topic(admin_user, str(member.pk))

"""The whole poller path with real processes: beat → Redis → Celery worker → emulator → DB → websocket."""

from __future__ import annotations

import json
import time

import httpx
import pytest

from devices.models import Device
from devices.services import device_register
from hub import live

pytestmark = [pytest.mark.integration, pytest.mark.django_db(transaction=True)]


def wait_state(device_id: int, state: str, timeout: float) -> float:
    started = time.monotonic()
    while time.monotonic() - started < timeout:
        if Device.objects.get(pk=device_id).state == state:
            return time.monotonic() - started
        time.sleep(0.1)
    raise AssertionError(f"device did not become {state} within {timeout} s")


def test_it_shows_locked_within_5_seconds_of_a_power_cycle_and_online_after_unlock(
    tiiny, live_worker, live_beat
):
    device = device_register(name="Pocket", kind="tiiny", base_url=tiiny.base_url, api_key=tiiny.api_key)
    live.mark_watched(f"device:{device.pk}")  # what an open detail page does
    wait_state(device.pk, Device.State.ONLINE, 10)
    tiiny.power_cycle()
    assert wait_state(device.pk, Device.State.LOCKED, 5) < 5
    assert "tiiny login" in Device.objects.get(pk=device.pk).state_fix
    tiiny.unlock()
    assert wait_state(device.pk, Device.State.ONLINE, 5) < 5


def test_it_pushes_moving_gauges_to_a_watching_page(
    tiiny, live_worker, live_beat, live_server_asgi, admin_user
):
    """A real browser-like websocket on the real ASGI server receives the gauges over and over."""
    import asyncio

    import websockets
    from django.conf import settings
    from django.contrib.auth import BACKEND_SESSION_KEY, HASH_SESSION_KEY, SESSION_KEY
    from django.contrib.sessions.backends.db import SessionStore

    device = device_register(name="Pocket", kind="tiiny", base_url=tiiny.base_url, api_key=tiiny.api_key)
    session = SessionStore()
    session[SESSION_KEY] = str(admin_user.pk)
    session[BACKEND_SESSION_KEY] = "django.contrib.auth.backends.ModelBackend"
    session[HASH_SESSION_KEY] = admin_user.get_session_auth_hash()
    session.save()
    base = live_server_asgi.extra["url"]
    url = base.replace("http", "ws") + f"/ws/hub/?watch=device:{device.pk}"
    cookie = f"{settings.SESSION_COOKIE_NAME}={session.session_key}"

    async def listen() -> list[str]:
        got: list[str] = []
        async with websockets.connect(url, additional_headers={"Cookie": cookie, "Origin": base}) as ws:
            deadline = time.monotonic() + 10
            while time.monotonic() < deadline and sum(f"device-{device.pk}-gauges" in m for m in got) < 3:
                try:
                    got.append(await asyncio.wait_for(ws.recv(), timeout=deadline - time.monotonic()))
                except TimeoutError:
                    break
        return got

    messages = asyncio.run(listen())
    gauges = [m for m in messages if f'id="device-{device.pk}-gauges"' in m]
    assert len(gauges) >= 3  # the snapshot on connect, then pushes every ~2 s
    assert any("NPU utilisation" in m and "<meter" in m for m in gauges[1:])
    assert tiiny.api_key not in json.dumps(messages)
    assert httpx.get(base + "/healthz", timeout=5).status_code in (200, 503)

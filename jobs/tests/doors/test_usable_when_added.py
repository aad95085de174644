"""A device is usable the moment it is added: ``add_device`` and the Add device page read its capabilities
before they return, and it shows "online" only once they are read. A job sent through REST right after is
accepted (it used to be refused "This device has no model for image right now" until the poller's first read).
Against the emulators over HTTP."""

from __future__ import annotations

import json

import httpx
import pytest
from django.core.management import call_command
from django.test import Client

from devices.clients.tiiny import TiinyClient
from devices.models import Device
from devices.services import device_refresh, device_register
from hub.accounts.tokens import token_create

IMAGE = "Tongyi-MAI/Z-Image-Turbo"

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def _fresh_rate_counters(redis_client):
    for key in redis_client.scan_iter("*ratelimit:submit:*"):
        redis_client.delete(key)


def _rest(user) -> Client:
    _, raw = token_create(user=user, name="script", scopes=["read", "submit"])
    return Client(headers={"Authorization": f"Bearer {raw}"})


def _image_job(client: Client, device: Device):
    body = {
        "device": device.pk,
        "kind": "image",
        "model": IMAGE,
        "prompt": "a lighthouse",
        "width": 512,
        "height": 512,
    }
    return client.post("/api/jobs", json.dumps(body), content_type="application/json")


def test_a_job_sent_right_after_add_device_is_accepted(tiiny, member):
    call_command(
        "add_device",
        "--name",
        "Pocket",
        "--kind",
        "tiiny",
        "--url",
        tiiny.base_url,
        "--api-key",
        tiiny.api_key,
    )
    device = Device.objects.get(name="Pocket")
    assert device.state == Device.State.ONLINE
    assert IMAGE in {m["id"] for m in device.capabilities["models"]}
    response = _image_job(_rest(member), device)
    assert response.status_code == 201, response.content


def test_the_add_device_page_reads_the_capabilities_before_it_answers(tiiny, admin_client, member):
    page = admin_client.post(
        "/devices/add/",
        {
            "name": "Pocket",
            "kind": "tiiny",
            "base_url": tiiny.base_url,
            "api_key": tiiny.api_key,
            "night_start": "23:00",
            "night_end": "07:00",
            "time_zone": "",
        },
    )
    assert page.status_code == 302, page.content.decode()[:2000]
    device = Device.objects.get(name="Pocket")
    assert device.state == Device.State.ONLINE and device.capabilities_at is not None
    assert _image_job(_rest(member), device).status_code == 201


def test_a_tensorsharp_added_is_usable_at_once(tensorsharp):
    call_command("add_device", "--name", "ts-pc", "--kind", "tensorsharp", "--url", tensorsharp.base_url)
    device = Device.objects.get(name="ts-pc")
    assert device.state == Device.State.ONLINE
    assert [m for m in device.capabilities["models"] if m.get("loaded")]


def _half_answering(tiiny_url: str, key: str) -> TiinyClient:
    """The device answers its status, but its model list fails (a 500): the capabilities can't be read."""
    real = httpx.Client()

    def handler(request: httpx.Request) -> httpx.Response:
        if request.url.path.startswith("/api/v1/models"):
            return httpx.Response(500, json={"code": 500, "msg": "Internal Server Error"})
        answer = real.request(
            request.method,
            tiiny_url + request.url.raw_path.decode(),
            headers=request.headers,
            content=request.content,
        )
        return httpx.Response(answer.status_code, headers=answer.headers, content=answer.content)

    return TiinyClient("http://pocket.test", key, transport=httpx.MockTransport(handler))


def test_a_device_is_online_only_once_its_capabilities_are_read(tiiny, db):
    device = device_register(name="Pocket", kind="tiiny", base_url=tiiny.base_url, api_key=tiiny.api_key)
    assert device.state != Device.State.ONLINE
    with _half_answering(tiiny.base_url, tiiny.api_key) as half:
        assert device_refresh(device_id=device.pk, client=half) != Device.State.ONLINE
    device.refresh_from_db()
    assert device.state != Device.State.ONLINE and not device.capabilities

    assert device_refresh(device_id=device.pk) == Device.State.ONLINE
    device.refresh_from_db()
    assert IMAGE in {m["id"] for m in device.capabilities["models"]}

    # Once online, a refresh whose capabilities read fails keeps the last ones: never a gap with none.
    Device.objects.filter(pk=device.pk).update(capabilities_at=None)  # due again
    with _half_answering(tiiny.base_url, tiiny.api_key) as half:
        device_refresh(device_id=device.pk, client=half)
    device.refresh_from_db()
    assert IMAGE in {m["id"] for m in device.capabilities["models"]}

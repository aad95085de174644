"""REST API /api/devices: what the pages show, with real tokens; the address for admins, the key for nobody."""

from __future__ import annotations

import datetime as dt
import json

import pytest
from django.test import Client
from django.utils import timezone

from devices.metrics import Sample, metric_add
from devices.models import Device
from hub.accounts.tokens import token_create
from jobs.tests.ui_fixtures import TTS, VIDEO

pytestmark = pytest.mark.django_db
SECRET_KEY = "tiiny-secret-api-key-4242"
ROLES = ("owner", "other", "viewer", "admin", "anon")


def token_client(user, scopes=("read", "submit")) -> Client:
    _, raw = token_create(user=user, name="script", scopes=list(scopes))
    return Client(headers={"Authorization": f"Bearer {raw}"})


@pytest.fixture
def clients(admin_user, member, other_member, viewer):
    return {
        "owner": token_client(member),
        "other": token_client(other_member),
        "viewer": token_client(viewer, scopes=("read",)),
        "admin": token_client(admin_user),
        "anon": Client(),
    }


@pytest.fixture
def keyed(device):
    device.api_key = SECRET_KEY
    device.base_url = "http://192.168.1.40"
    device.save(update_fields=["api_key_encrypted", "base_url"])
    return device


ROUTES = ["", "/{id}", "/{id}/capabilities", "/{id}/metrics", "/{id}/metrics/history?hours=2"]


@pytest.mark.parametrize("role", ROLES)
@pytest.mark.parametrize("route", ROUTES)
def test_every_device_route_is_for_everyone_signed_in_and_never_shows_the_key(clients, keyed, role, route):
    response = clients[role].get("/api/devices" + route.format(id=keyed.pk))
    if role == "anon":
        assert response.status_code == 401 and response.json()["detail"].startswith("Authentication")
        return
    assert response.status_code == 200, response.content
    text = response.content.decode()
    assert SECRET_KEY not in text and keyed.api_key_encrypted not in text
    if role != "admin":
        assert "192.168.1.40" not in text


def test_the_address_is_shown_to_admins_only(clients, keyed):
    assert clients["admin"].get(f"/api/devices/{keyed.pk}").json()["url"] == "http://192.168.1.40"
    assert clients["owner"].get(f"/api/devices/{keyed.pk}").json()["url"] is None
    (listed,) = clients["owner"].get("/api/devices").json()
    assert listed["url"] is None and listed["name"] == "Pocket" and listed["state"] == "online"
    assert listed["loaded_models"][0]["model_id"] == VIDEO


def test_capabilities_say_what_post_api_jobs_accepts(clients, device):
    caps = clients["owner"].get(f"/api/devices/{device.pk}/capabilities").json()
    assert caps["job_kinds"] == ["video", "mesh", "music", "image", "speech"]
    assert "832x480" in caps["video"][VIDEO]["canvases"] and caps["video"][VIDEO]["max_seconds"] == 7
    assert caps["voices"][TTS]["mode"] == "preset" and "serena" in caps["voices"][TTS]["voices"]
    assert {m["id"] for m in caps["models"]} >= {VIDEO, TTS}


def test_current_metrics(clients, device):
    body = clients["viewer"].get(f"/api/devices/{device.pk}/metrics").json()
    assert body["npu_util"] == 42.0 and body["gauges"]["npu_mem"]["pct"] == 25
    assert body["loaded_models"][0]["share"] == 40.0


def test_metric_history_picks_its_resolution_and_is_bounded(clients, device):
    now = timezone.now()
    metric_add(device_id=device.pk, sample=Sample(50, 20, 10, 30), at=now - dt.timedelta(minutes=1))
    metric_add(device_id=device.pk, sample=Sample(70, 20, 10, 30), at=now - dt.timedelta(minutes=1))
    metric_add(device_id=device.pk, sample=Sample(10, 20, 10, 30), at=now - dt.timedelta(hours=12))
    fine = clients["owner"].get(f"/api/devices/{device.pk}/metrics/history", {"hours": 1}).json()
    assert fine["resolution_s"] == 10 and [p["npu_util"] for p in fine["points"]] == [60.0]
    day = clients["owner"].get(f"/api/devices/{device.pk}/metrics/history", {"hours": 24}).json()
    assert day["resolution_s"] == 300 and len(day["points"]) == 2
    for bad in (0, 721, "x", 10**30):
        response = clients["owner"].get(f"/api/devices/{device.pk}/metrics/history", {"hours": bad})
        assert response.status_code == 422 and "hours" in response.json()["errors"], bad


@pytest.mark.parametrize("bad", ["abc", "9" * 10000, "²", "424242", "-1"])
@pytest.mark.parametrize("route", ROUTES[1:])
def test_bad_device_ids_are_a_404_json(clients, bad, route):
    response = clients["owner"].get("/api/devices" + route.format(id=bad))
    assert response.status_code == 404 and response.json() == {"detail": "No such device."}


def test_a_device_that_was_never_checked_still_answers(clients, db):
    from devices.services import device_register

    fresh = device_register(name="New", kind="tensorsharp", base_url="http://127.0.0.1:9", api_key="")
    assert Device.objects.get(pk=fresh.pk).capabilities == {}
    caps = clients["owner"].get(f"/api/devices/{fresh.pk}/capabilities").json()
    assert caps["job_kinds"] == [] and caps["models"] == []
    assert json.loads(clients["owner"].get(f"/api/devices/{fresh.pk}/metrics").content)["npu_util"] is None

"""The REST API's schema says what it sends, and every path under /api/ answers in the API's JSON shape."""

from __future__ import annotations

import re

import pytest
from django.test import Client

from hub.accounts.tokens import token_create

pytestmark = pytest.mark.django_db


@pytest.fixture
def api(member):
    _, raw = token_create(user=member, name="script", scopes=["read", "submit"])
    return Client(headers={"Authorization": f"Bearer {raw}"})


def schema_of(client: Client, name: str) -> dict:
    return client.get("/api/openapi.json").json()["components"]["schemas"][name]


@pytest.mark.parametrize(
    "schema,route", [("DeviceOut", "/api/devices/{id}"), ("PlanOut", "/api/devices/{id}/plan")]
)
def test_night_times_are_declared_as_they_are_sent(api, device, schema, route):
    """JSON Schema's ``format: time`` is RFC 3339's full-time, with an offset; the hub sends local "07:00:00"."""
    declared = schema_of(api, schema)["properties"]
    sent = api.get(route.format(id=device.pk)).json()
    for field in ("night_start", "night_end"):
        assert "format" not in declared[field], declared[field]
        assert declared[field]["type"] == "string"
        assert re.fullmatch(declared[field]["pattern"], sent[field]), (field, sent[field])


@pytest.mark.parametrize("method", ["get", "post", "delete", "patch"])
@pytest.mark.parametrize("path", ["/api/nope", "/api/jobs/1/nope", "/api/devices/1/plan/x", "/api/"])
def test_an_unknown_path_is_the_apis_json_404(api, method, path):
    response = getattr(api, method)(path)
    assert response.status_code == 404
    assert response["Content-Type"].startswith("application/json")
    assert response.json()["detail"].startswith("No route /api/")


def test_an_unknown_path_answers_json_to_a_browser_session_too(member):
    browser = Client(enforce_csrf_checks=True)
    browser.force_login(member)
    for response in (
        browser.get("/api/nope"),
        browser.post("/api/nope", {"x": "1"}),
        Client().get("/api/nope"),
    ):
        assert response.status_code == 404 and "routes are listed at /api/docs" in response.json()["detail"]


def test_known_routes_still_answer(api, device):
    assert api.get("/api/jobs").status_code == 200
    assert api.get(f"/api/devices/{device.pk}").status_code == 200
    assert api.get("/api/docs").status_code == 200

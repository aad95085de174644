"""Below HUB_MIN_FREE_MB free under the results' folder, every door refuses a new render, says how much is free
and where to delete results, and queues nothing. The free space is the real disk's (``shutil.disk_usage``): the
floor is set above it."""

from __future__ import annotations

import html

import pytest
from django.test import Client

from hub.disk import MB, disk_space
from jobs.models import Job
from jobs.tests.ui_fixtures import VIDEO

pytestmark = pytest.mark.django_db

FIELDS = {"size": "832x480", "seconds": 2, "steps": 4}


@pytest.fixture(autouse=True)
def _no_rate_limit(settings):
    settings.HUB_API_SUBMIT_RATE = "0"


@pytest.fixture
def full_disk(settings):
    """A floor above what is free now: the disk counts as nearly full."""
    settings.HUB_MIN_FREE_MB = disk_space().free // MB + 10_000
    return settings


@pytest.fixture
def bearer(member):
    from hub.accounts.tokens import token_create

    raw = token_create(user=member, name="disk", scopes=["read", "submit"])[1]
    return Client(HTTP_AUTHORIZATION=f"Bearer {raw}")


def _says_why(text: str) -> None:
    assert "disk is nearly full" in text, text
    assert "free" in text and "/usage/" in text and "Delete results" in text, text


def test_every_door_refuses_a_new_render_when_the_disk_is_nearly_full(
    full_disk, member_client, bearer, device
):
    page = member_client.post(
        "/jobs/new/",
        {"device": device.pk, "kind": "video", "model": VIDEO, "prompt": "fox", "when": "asap", **FIELDS},
    )
    assert page.status_code == 400
    _says_why(html.unescape(page.content.decode()))

    rest = bearer.post(
        "/api/jobs",
        {"device": device.pk, "kind": "video", "model": VIDEO, "prompt": "fox", **FIELDS},
        content_type="application/json",
    )
    assert rest.status_code == 422, rest.content
    body = rest.json()
    _says_why(body["detail"] + " ".join(m for ms in body.get("errors", {}).values() for m in ms))

    v1 = bearer.post(
        "/v1/videos",
        {"model": VIDEO, "prompt": "fox", "size": "832x480", "seconds": "2", "steps": 4},
        content_type="application/json",
    )
    assert v1.status_code == 400, v1.content
    _says_why(v1.json()["error"]["message"])
    assert Job.objects.count() == 0


def test_the_message_names_how_much_is_free(full_disk, member, device):
    from jobs.queue.admission import admit

    got = admit(owner=member, device=device, kind="video", model_id=VIDEO, params={"prompt": "fox", **FIELDS})
    free = disk_space().free_text
    assert got.refused and f"{free} free" in got.refused
    assert f"at least {disk_space().minimum_text}" in got.refused


def test_a_floor_of_zero_turns_the_refusal_off(settings, bearer, device):
    settings.HUB_MIN_FREE_MB = 0
    rest = bearer.post(
        "/api/jobs",
        {"device": device.pk, "kind": "video", "model": VIDEO, "prompt": "fox", **FIELDS},
        content_type="application/json",
    )
    assert rest.status_code == 201, rest.content
    assert Job.objects.count() == 1


def test_enough_room_admits_as_before(settings, bearer, device):
    settings.HUB_MIN_FREE_MB = 1
    rest = bearer.post(
        "/api/jobs",
        {"device": device.pk, "kind": "video", "model": VIDEO, "prompt": "fox", **FIELDS},
        content_type="application/json",
    )
    assert rest.status_code == 201, rest.content

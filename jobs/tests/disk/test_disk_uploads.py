"""A request whose files find the disk full while they are saved (no floor set, or files bigger than the room
above it): every door refuses it with one clear message and queues nothing, and no file of it stays behind.

The disk is real: a 1 MB tmpfs mounted as MEDIA_ROOT for the test (skipped where mounting is not allowed)."""

from __future__ import annotations

import html

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.test import Client

from hub.testing import tmpfs
from jobs.models import Job
from jobs.tests.ui_fixtures import MESH, PNG, VIDEO

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def _no_rate_limit(settings):
    settings.HUB_API_SUBMIT_RATE = "0"
    settings.HUB_MIN_FREE_MB = 0  # the floor is off: the save itself finds the disk full


@pytest.fixture
def full_media(settings, tmp_path):
    with tmpfs(tmp_path / "media", "size=1m") as media:
        settings.MEDIA_ROOT = media
        with open(media / "filler.bin", "wb", buffering=0) as fh:
            try:
                while True:
                    fh.write(b"\0" * 4096)
            except OSError:
                pass
        yield media


@pytest.fixture
def bearer(member):
    from hub.accounts.tokens import token_create

    raw = token_create(user=member, name="disk", scopes=["read", "submit"])[1]
    return Client(HTTP_AUTHORIZATION=f"Bearer {raw}")


def _says_why(text: str) -> None:
    assert "The hub's disk is full" in text and "the files could not be saved" in text, text
    assert "/usage/" in text, text


def _png() -> SimpleUploadedFile:
    return SimpleUploadedFile("obj.png", PNG, "image/png")


def test_every_door_refuses_files_the_full_disk_cannot_hold(full_media, member_client, bearer, device):
    page = member_client.post(
        "/jobs/new/",
        {
            "device": device.pk,
            "kind": "mesh",
            "model": MESH,
            "when": "asap",
            "simplify": "on",
            "image": _png(),
        },
    )
    assert page.status_code == 400
    _says_why(html.unescape(page.content.decode()))

    rest = bearer.post(
        "/api/jobs",
        {"device": str(device.pk), "kind": "mesh", "model": MESH, "simplify": "true", "image": _png()},
    )
    assert rest.status_code == 422, rest.content
    _says_why(rest.json()["detail"])

    v1 = bearer.post(
        "/v1/videos",
        {"model": VIDEO, "prompt": "a fox", "size": "832x480", "seconds": "4", "input_reference": _png()},
    )
    assert v1.status_code == 400, v1.content
    _says_why(v1.json()["error"]["message"])

    assert Job.objects.count() == 0
    assert sorted(p.name for p in full_media.rglob("*") if p.is_file()) == ["filler.bin"]

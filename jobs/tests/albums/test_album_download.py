"""An album in one download (issue 37): the page's "Download all as a zip" and ``GET /api/albums/{id}/download``
stream the results the person may see in the album, byte for byte what the single downloads give; a stranger gets
404; an album without results says so."""

from __future__ import annotations

import pytest
from django.test import Client

from jobs.queue import albums as svc
from jobs.tests.albums.conftest import finished
from jobs.tests.albums.test_api_albums import token_client
from jobs.tests.doors.test_zip_downloads import unzip

pytestmark = pytest.mark.django_db


def _client(user) -> Client:
    client = Client()
    client.force_login(user)
    return client


@pytest.fixture
def filled(album, member, other_member, device, media):
    """mia's private result and otto's private result, each added by its owner."""
    mine = finished(member, device, media, prompt="a lighthouse at dusk")
    his = finished(other_member, device, media, prompt="waves rolling")
    svc.album_add_jobs(album=album, by=member, job_ids=[mine.pk])
    svc.album_add_jobs(album=album, by=other_member, job_ids=[his.pk])
    return album, mine, his


def test_a_viewer_downloads_the_album_matching_the_single_downloads(filled, viewer):
    album, mine, his = filled
    client = _client(viewer)
    archive = unzip(client.get(f"/jobs/albums/{album.pk}/download/"))
    names = archive.namelist()
    for job in (mine, his):
        (artifact,) = job.artifacts.exclude(kind="thumb")
        entry = next(n for n in names if n.startswith(f"{job.pk:04d}-") and n.endswith(artifact.name))
        single = client.get(f"/jobs/{job.pk}/files/{artifact.pk}/?download=1")
        assert single.status_code == 200  # the album lets the viewer see another person's private job
        assert archive.read(entry) == b"".join(single.streaming_content)
    assert sum(n.endswith("settings.json") for n in names) == 2


def test_the_api_gives_the_same_zip_and_a_stranger_404(filled, member, stranger):
    album, mine, his = filled
    archive = unzip(token_client(member, scopes=("read",)).get(f"/api/albums/{album.pk}/download"))
    assert {n.split("/")[0].split("-")[0] for n in archive.namelist()} == {f"{mine.pk:04d}", f"{his.pk:04d}"}
    assert token_client(stranger).get(f"/api/albums/{album.pk}/download").status_code == 404
    assert _client(stranger).get(f"/jobs/albums/{album.pk}/download/").status_code == 404


def test_an_album_without_results_says_so(album, member):
    answer = _client(member).get(f"/jobs/albums/{album.pk}/download/", follow=True)
    assert answer.status_code == 200 and answer.redirect_chain[-1][0] == f"/jobs/albums/{album.pk}/"
    assert "Nothing to download" in answer.content.decode()
    api = token_client(member).get(f"/api/albums/{album.pk}/download")
    assert api.status_code == 400 and "Nothing to download" in api.json()["detail"]

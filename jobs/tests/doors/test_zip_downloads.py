"""Everything in one download (issue 37): the gallery's "Download all" and "Download selected", and
``GET /api/jobs/download``: one zip, streamed, each job a folder with its files (byte for byte the single downloads)
and its settings.json; only what the person may see; a clear message when there is nothing to download."""

from __future__ import annotations

import io
import json
import zipfile

import pytest
from django.test import Client

from hub.accounts.tokens import token_create
from jobs.files import zips
from jobs.tests.ui_fixtures import add_artifact, make_job

pytestmark = pytest.mark.django_db

VIDEO = bytes(i * 7 % 251 for i in range(200_000))
SIDECAR = b"RIFF" + bytes(range(256)) * 40


def unzip(response) -> zipfile.ZipFile:
    assert response.status_code == 200, response.content[:300] if not response.streaming else ""
    assert response.streaming and response["Content-Type"] == "application/zip"
    data = b"".join(response.streaming_content)
    assert int(response["Content-Length"]) == len(data)
    archive = zipfile.ZipFile(io.BytesIO(data))
    assert archive.testzip() is None  # every CRC checks
    return archive


def single(client, job, artifact) -> bytes:
    response = client.get(f"/jobs/{job.pk}/files/{artifact.pk}/?download=1")
    assert response.status_code == 200
    return b"".join(response.streaming_content)


@pytest.fixture
def results(member, device, media):
    """Two finished jobs of mia's with results (one with a sidecar and a thumbnail), one still queued."""
    fox = make_job(member, device, state="done", prompt="A red fox in the snow!")
    fox_video = add_artifact(fox, media, data=VIDEO)
    fox_wav = add_artifact(fox, media, kind="sidecar", name="track.wav", mime="audio/wav", data=SIDECAR)
    add_artifact(fox, media, kind="thumb", name="thumb.webp", mime="image/webp", data=b"thumb")
    owl = make_job(member, device, state="done", kind="image", prompt="an owl at dusk")
    owl_png = add_artifact(
        owl, media, kind="image", name="image-1.png", mime="image/png", data=b"\x89PNG owl"
    )
    waiting = make_job(member, device, state="queued", prompt="not yet")
    return {"fox": (fox, [fox_video, fox_wav]), "owl": (owl, [owl_png]), "waiting": waiting}


def test_a_selection_comes_down_as_one_zip_matching_the_single_downloads(member_client, results):
    fox, fox_files = results["fox"]
    owl, owl_files = results["owl"]
    archive = unzip(member_client.get("/jobs/download/", {"ids": [fox.pk, owl.pk], "selection": "1"}))
    fox_dir, owl_dir = f"{fox.pk:04d}-a-red-fox-in-the-snow", f"{owl.pk:04d}-an-owl-at-dusk"
    assert sorted(archive.namelist()) == sorted(
        [
            f"{fox_dir}/video.mp4",
            f"{fox_dir}/track.wav",
            f"{fox_dir}/settings.json",
            f"{owl_dir}/image-1.png",
            f"{owl_dir}/settings.json",
        ]
    )  # the thumbnail is the hub's own picture: left out
    for artifact in fox_files:
        assert archive.read(f"{fox_dir}/{artifact.name}") == single(member_client, fox, artifact)
    assert archive.read(f"{owl_dir}/image-1.png") == single(member_client, owl, owl_files[0])
    assert all(
        i.compress_type == zipfile.ZIP_STORED for i in archive.infolist()
    )  # media: stored, not deflated


def test_each_job_has_its_settings_beside_its_files(member_client, results):
    fox, _ = results["fox"]
    archive = unzip(member_client.get("/jobs/download/", {"ids": fox.pk}))
    story = json.loads(archive.read(f"{fox.pk:04d}-a-red-fox-in-the-snow/settings.json"))
    assert story["job"] == fox.pk and story["kind"] == "video" and story["prompt"] == "A red fox in the snow!"
    assert story["steps"] == 4 and story["size"] == "832x480" and story["device"] == fox.device.name
    assert story["files"] == ["video.mp4", "track.wav"] and story["state"] == "done"
    assert story["url"].endswith(f"/jobs/{fox.pk}/")
    assert "owner" not in story and "share_token" not in json.dumps(story)


def test_download_all_follows_the_gallery_filters(member_client, results):
    fox, _ = results["fox"]
    owl, _ = results["owl"]
    archive = unzip(member_client.get("/jobs/download/", {"kind": "image"}))
    assert [n.split("/")[0] for n in archive.namelist()] == [f"{owl.pk:04d}-an-owl-at-dusk"] * 2
    archive = unzip(member_client.get("/jobs/download/", {"q": "fox"}))
    assert {n.split("/")[0] for n in archive.namelist()} == {f"{fox.pk:04d}-a-red-fox-in-the-snow"}
    everything = unzip(member_client.get("/jobs/download/"))
    assert len(everything.namelist()) == 5  # the queued job has no results: no folder


def test_a_strangers_private_job_in_the_selection_is_left_out(
    other_client, other_member, member, device, media, results
):
    fox, _ = results["fox"]  # mia's, private
    mine = make_job(other_member, device, state="done", prompt="otto's kite")
    add_artifact(mine, media, data=b"kite")
    archive = unzip(other_client.get("/jobs/download/", {"ids": f"{fox.pk},{mine.pk}"}))
    assert all(n.startswith(f"{mine.pk:04d}-otto-s-kite/") for n in archive.namelist())
    # Only the stranger's job: the same answer as for a job that does not exist, nothing of it shown.
    alone = other_client.get("/jobs/download/", {"ids": fox.pk}, follow=True)
    assert alone.status_code == 200 and b"Nothing to download" in alone.content
    assert b"red fox" not in alone.content


def test_a_shared_job_of_someone_else_may_be_downloaded(other_client, member, device, media):
    shared = make_job(member, device, state="done", prompt="for the household", shared=True)
    add_artifact(shared, media, data=b"shared bytes")
    archive = unzip(other_client.get("/jobs/download/", {"ids": shared.pk}))
    assert archive.read(f"{shared.pk:04d}-for-the-household/video.mp4") == b"shared bytes"


def test_an_empty_selection_goes_back_to_the_gallery_with_a_message(member_client, results):
    response = member_client.get("/jobs/download/", {"selection": "1", "kind": "video"})
    assert response.status_code == 302 and response["Location"] == "/jobs/?kind=video"
    page = member_client.get(response["Location"])
    assert "Nothing selected: tick the jobs to download first." in page.content.decode()


def test_a_selection_without_results_says_so(member_client, results):
    response = member_client.get("/jobs/download/", {"ids": results["waiting"].pk}, follow=True)
    assert "Nothing to download" in response.content.decode()


def test_a_malformed_id_is_a_message_not_an_error(member_client, results):
    response = member_client.get("/jobs/download/", {"ids": "12,abc"}, follow=True)
    assert response.status_code == 200 and "is not a job number" in response.content.decode()


def test_too_many_jobs_is_refused_with_a_message(settings, member_client, results):
    settings.HUB_ZIP_MAX_JOBS = 1
    response = member_client.get("/jobs/download/", follow=True)
    assert "more than 1 jobs" in response.content.decode()


def test_names_are_safe_and_unique(member, device, media):
    job = make_job(member, device, state="done", prompt="../../etc/passwd ünïcödé 🦊")
    add_artifact(job, media, name="a b.mp4", data=b"1")
    add_artifact(job, media, name="a?b.mp4", data=b"2")
    plan = zips.plan_zip([job])
    names = [e.arcname for e in plan.entries]
    folder = f"{job.pk:04d}-etc-passwd-unicode"
    assert names == [f"{folder}/a-b.mp4", f"{folder}/a-b-2.mp4", f"{folder}/settings.json"]


def test_a_file_gone_from_the_store_is_left_out_and_listed(member_client, member, device, media):
    job = make_job(member, device, state="done", prompt="half there")
    add_artifact(job, media, data=b"here")
    gone = add_artifact(job, media, name="gone.wav", kind="sidecar", mime="audio/wav", data=b"x")
    (media / str(gone.file)).unlink()
    archive = unzip(member_client.get("/jobs/download/", {"ids": job.pk}))
    story = json.loads(archive.read(f"{job.pk:04d}-half-there/settings.json"))
    assert story["files"] == ["video.mp4"] and story["missing"] == ["gone.wav"]


def test_head_answers_the_size_without_a_body(member_client, results):
    fox, _ = results["fox"]
    head = member_client.head("/jobs/download/", {"ids": fox.pk})
    got = member_client.get("/jobs/download/", {"ids": fox.pk})
    assert head.status_code == 200 and head.content == b""
    assert head["Content-Length"] == got["Content-Length"] and int(head["Content-Length"]) > len(VIDEO)


def test_the_gallery_offers_download_all_with_its_count(member_client, results):
    page = member_client.get("/jobs/", {"kind": "video"}).content.decode()
    assert 'href="/jobs/download/?kind=video"' in page and 'id="gallery-select"' in page
    fox, _ = results["fox"]
    assert f'name="ids" value="{fox.pk}"' in page and 'form="gallery-select"' in page
    summary = member_client.get("/jobs/download/summary/", {"kind": "video"}).content.decode()
    size = len(VIDEO) + len(SIDECAR)
    assert "Download all (2 files, " in summary and f"{size / 1024:.1f}".rstrip("0").rstrip(".") in summary


def test_the_summary_of_nothing_says_so(member_client, results):
    summary = member_client.get("/jobs/download/summary/", {"q": "no such words"}).content.decode()
    assert "Nothing to download here yet." in summary


def test_signed_out_gets_the_sign_in_page(results):
    response = Client().get("/jobs/download/", {"ids": results["fox"][0].pk})
    assert response.status_code == 302 and "next=/jobs/download/" in response["Location"]


# -- REST ---------------------------------------------------------------------------------------------------------
def _api(user, scopes=("read",)) -> Client:
    _, raw = token_create(user=user, name="zip", scopes=list(scopes))
    return Client(headers={"Authorization": f"Bearer {raw}"})


def test_the_api_zips_ids_and_filters(member, results):
    fox, fox_files = results["fox"]
    owl, _ = results["owl"]
    api = _api(member)
    archive = unzip(api.get("/api/jobs/download", {"ids": f"{fox.pk},{owl.pk}"}))
    assert len(archive.namelist()) == 5
    archive = unzip(api.get("/api/jobs/download", {"kind": "video"}))
    assert archive.read(f"{fox.pk:04d}-a-red-fox-in-the-snow/video.mp4") == VIDEO


def test_the_api_refuses_nothing_with_a_400(member, other_member, results):
    api = _api(member)
    empty = api.get("/api/jobs/download", {"ids": ""})
    assert (
        empty.status_code == 400
        and empty.json()["detail"] == "Nothing selected: tick the jobs to download first."
    )
    stranger = _api(other_member).get("/api/jobs/download", {"ids": results["fox"][0].pk})
    assert stranger.status_code == 400 and "Nothing to download" in stranger.json()["detail"]
    bad = api.get("/api/jobs/download", {"since": "yesterday"})
    assert bad.status_code == 400 and "can't be used" in bad.json()["detail"]


def test_the_api_needs_a_token(results):
    assert Client().get("/api/jobs/download", {"ids": results["fox"][0].pk}).status_code == 401

"""Every file of a job on an S3 bucket (a real S3 API: moto's server on loopback, ``s3_store``): saved, read,
served with ranges and validators, shown in the gallery with its thumbnail, downloaded through /v1, an upload kept
and read back; nothing is written under MEDIA_ROOT."""

from __future__ import annotations

import hashlib

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.test import Client
from django.urls import reverse

from jobs.files import store
from jobs.files.thumbnails import thumbnail_for_job
from jobs.models import Artifact
from jobs.queue.services import job_share_link
from jobs.tests.ui_fixtures import PNG, make_job

pytestmark = pytest.mark.django_db

SIZE = 300_000
DATA = bytes(i * 7 % 251 for i in range(SIZE))  # no repeats at small strides, so an offset error shows


def body(response) -> bytes:
    return b"".join(response.streaming_content) if response.streaming else response.content


@pytest.fixture
def bucket(s3_store, media):
    """The bucket as the store; MEDIA_ROOT is a fresh folder that must stay empty."""
    yield s3_store
    assert not [p for p in media.rglob("*") if p.is_file()] if media.exists() else True


@pytest.fixture
def get_bytes_seen(bucket):
    """The Content-Length of every GetObject answer the bucket sent this process (botocore's own event)."""
    seen: list[int] = []

    def after(http_response, **_kw):
        seen.append(int(http_response.headers.get("Content-Length", -1)))

    client = store._s3(store.storage())
    client.meta.events.register("after-call.s3.GetObject", after)
    yield seen
    client.meta.events.unregister("after-call.s3.GetObject", after)


def test_save_read_find_and_delete_go_to_the_bucket(bucket, member, device):
    job = make_job(member, device, state="running")
    name = store.save_bytes(store.result_name(job, "a.bin"), b"first")
    store.save_bytes(name, b"second")  # replaced in place
    assert bucket.get(name) == b"second" and store.read_bytes(name) == b"second"
    found = store.find(name)
    assert found is not None and found.size == 6 and found.path is None and found.mtime_ns > 0
    assert store.find(store.result_name(job, "missing")) is None
    assert store.find("../outside") is None
    with store.local_path(name) as local:
        assert local.read_bytes() == b"second"
    assert not local.exists()  # the temporary copy is gone
    store.delete([name, store.result_name(job, "never-there")])
    assert bucket.keys() == []


def test_a_result_is_checksummed_before_it_leaves_and_recorded(bucket, member, device, tmp_path):
    job = make_job(member, device, state="running")
    download = store.work_path(job, "video.mp4.download")
    assert bucket.bucket not in str(download)
    download.write_bytes(DATA)
    art = store.save_artifact(job, kind="video", name="video.mp4", path=download)
    assert not download.exists()  # moved in: the work copy is gone
    assert art.sha256 == hashlib.sha256(DATA).hexdigest() and art.bytes == SIZE
    assert bucket.get(str(art.file)) == DATA
    again = store.save_artifact(job, kind="video", name="video.mp4", data=b"new")
    assert Artifact.objects.filter(job=job).count() == 1 and bucket.get(str(again.file)) == b"new"


@pytest.fixture
def served(bucket, member, device, member_client):
    job = make_job(member, device, state="done")
    art = store.save_artifact(job, kind="video", name="video.mp4", data=DATA, mime="video/mp4")
    return member_client, f"/jobs/{job.pk}/files/{art.pk}/", art, job


def test_a_range_is_one_ranged_get_of_just_those_bytes(served, get_bytes_seen):
    client, url, art, _job = served
    response = client.get(url, headers={"Range": "bytes=1000-1999"})
    assert response.status_code == 206
    assert response["Content-Range"] == f"bytes 1000-1999/{SIZE}"
    assert body(response) == DATA[1000:2000]
    assert get_bytes_seen == [1000]  # the bucket sent 1000 bytes, not the whole object
    suffix = client.get(url, headers={"Range": "bytes=-10"})
    assert suffix.status_code == 206 and body(suffix) == DATA[-10:]
    whole = client.get(url)
    assert whole.status_code == 200 and body(whole) == DATA and whole["Content-Length"] == str(SIZE)
    assert whole["Accept-Ranges"] == "bytes" and whole["Cache-Control"] == "private, no-cache"
    assert whole["ETag"] == f'"{art.sha256[:40]}-{SIZE:x}"'


def test_past_the_end_is_416_and_a_known_etag_is_304(served):
    client, url, _art, _job = served
    past = client.get(url, headers={"Range": f"bytes={SIZE}-"})
    assert past.status_code == 416 and past["Content-Range"] == f"bytes */{SIZE}"
    etag = client.get(url)["ETag"]
    again = client.get(url, headers={"If-None-Match": etag})
    assert again.status_code == 304 and body(again) == b""
    head = client.head(url)
    assert head.status_code == 200 and head["Content-Length"] == str(SIZE)


def test_a_revoked_share_link_is_404_at_once(served, member):
    _client, _url, art, job = served
    token = job_share_link(job=job, by=member, enable=True).share_token
    url = f"/jobs/shared/{token}/files/{art.pk}/"
    anon = Client()
    assert anon.get(url, headers={"Range": "bytes=0-9"}).status_code == 206
    job_share_link(job=job, by=member, enable=False)
    assert anon.get(url, headers={"Range": "bytes=0-9"}).status_code == 404
    assert anon.get(url).status_code == 404


def test_x_accel_with_a_bucket_streams_instead(served, settings):
    settings.JOBS_SENDFILE = "x-accel"
    client, url, _art, _job = served
    response = client.get(url, headers={"Range": "bytes=0-9"})
    assert "X-Accel-Redirect" not in response and response.status_code == 206 and body(response) == DATA[:10]


def test_the_gallery_shows_the_thumbnail_made_from_the_bucket(bucket, member, device, member_client):
    from devices.emulator import media as emu_media

    job = make_job(member, device, state="done")
    mp4 = emu_media.video_mp4(prompt="x", seconds=1, width=64, height=48, fps=8, audio=False).read_bytes()
    store.save_artifact(job, kind="video", name="video.mp4", data=mp4, mime="video/mp4")
    thumb = thumbnail_for_job(job)
    assert thumb is not None and bucket.get(str(thumb.file))[8:12] == b"WEBP"
    html = member_client.get("/jobs/").content.decode()
    assert f'<img src="/jobs/{job.pk}/files/{thumb.pk}/"' in html
    picture = member_client.get(f"/jobs/{job.pk}/files/{thumb.pk}/")
    assert picture.status_code == 200 and body(picture)[8:12] == b"WEBP"


def test_v1_downloads_the_video_and_its_thumbnail_from_the_bucket(bucket, member, device):
    from devices.emulator import media as emu_media
    from jobs.tests.doors.test_v1 import api

    job = make_job(member, device, state="done")
    mp4 = emu_media.video_mp4(prompt="x", seconds=1, width=64, height=48, fps=8, audio=False).read_bytes()
    art = store.save_artifact(job, kind="video", name="video.mp4", data=mp4, mime="video/mp4")
    me = api(member)
    response = me.get(f"/v1/videos/video_{job.pk}/content", headers={"Range": "bytes=4-7"})
    assert response.status_code == 206 and body(response) == b"ftyp"
    whole = me.get(f"/v1/videos/video_{job.pk}/content")
    assert (
        hashlib.sha256(body(whole)).hexdigest() == art.sha256
    )  # the stored file: the device's, with its story
    thumb = me.get(f"/v1/videos/video_{job.pk}/content", {"variant": "thumbnail"})
    assert thumb.status_code == 200 and body(thumb)[:3] == b"\xff\xd8\xff"
    assert any(k.endswith("video.thumbnail.jpg") for k in bucket.keys())  # kept in the bucket, not on disk


def test_an_uploaded_3d_picture_is_stored_and_read_back(bucket, member, device, member_client):
    job = make_job(member, device, kind="mesh", state="done")
    name = store.save_input(job, "image", SimpleUploadedFile("me.png", PNG, content_type="image/png"))
    job.params = {**job.params, "files": {"image": name}}
    job.save(update_fields=["params"])
    assert bucket.get(name) == PNG
    assert store.input_bytes(job, "image") == (PNG, "image.png", "image/png")
    served = member_client.get(reverse("jobs-input", args=[job.pk, "image"]))
    assert served.status_code == 200 and body(served) == PNG


def test_uploads_kept_between_tries_live_in_the_bucket(bucket, member):
    from jobs.doors import intake

    upload = SimpleUploadedFile("me.png", PNG, content_type="image/png")
    intake.stash_uploads(user=member, token="tok-1", files={"image": upload})
    assert any(k.startswith(f"stash/{member.pk}/") and k.endswith("image.bin") for k in bucket.keys())
    listing = intake.stash_listing(user=member, token="tok-1", names=["image"])
    assert listing == {"image": {"name": "me.png", "kb": max(1, round(len(PNG) / 1024))}}
    kept = intake.stashed_uploads(user=member, token="tok-1", names=["image"])
    assert kept["image"].read() == PNG
    intake.stash_forget(user=member, token="tok-1")
    assert bucket.keys() == []


def test_a_3d_stage_mesh_is_kept_in_the_bucket_for_another_worker(bucket, member, device):
    job = make_job(member, device, kind="mesh", state="running")
    store.work_path(job, "stage-1-shape.glb").write_bytes(b"glTF-stage-1")
    store.keep_work(job, "stage-1-shape.glb")
    store.work_path(job, "stage-1-shape.glb").unlink()  # another machine: no local copy
    assert store.fetch_work(job, "stage-1-shape.glb").read_bytes() == b"glTF-stage-1"
    assert bucket.get(store.result_name(job, "stage-1-shape.glb")) == b"glTF-stage-1"

"""The zip core (``jobs.files.zips``): from an S3 bucket (moto's server) as from the disk, and under ASGI an async
body of chunks, never the whole zip collected in memory."""

from __future__ import annotations

import io
import json
import warnings
import zipfile

import pytest
from django.test import AsyncClient

from jobs.files import store, zips
from jobs.tests.ui_fixtures import add_artifact, make_job

pytestmark = pytest.mark.django_db

DATA = bytes(i * 7 % 251 for i in range(300_000))


def test_a_zip_of_results_on_an_s3_bucket_matches_them_byte_for_byte(
    s3_store, media, member, member_client, device
):
    job = make_job(member, device, state="running", prompt="a fox on a bucket")
    store.save_artifact(job, kind="video", name="video.mp4", data=DATA)
    job.state = "done"
    job.save(update_fields=["state"])
    art = job.artifacts.get()
    single = b"".join(member_client.get(f"/jobs/{job.pk}/files/{art.pk}/").streaming_content)
    response = member_client.get("/jobs/download/", {"ids": job.pk})
    assert response.status_code == 200
    data = b"".join(response.streaming_content)
    assert int(response["Content-Length"]) == len(data)
    archive = zipfile.ZipFile(io.BytesIO(data))
    folder = f"{job.pk:04d}-a-fox-on-a-bucket"
    assert archive.read(f"{folder}/video.mp4") == single == s3_store.get(str(art.file))
    assert json.loads(archive.read(f"{folder}/settings.json"))["files"] == ["video.mp4"]
    assert not [p for p in media.rglob("*") if p.is_file()] if media.exists() else True  # no local copy


def test_the_plan_counts_results_and_the_summary_agrees(member, device, media):
    job = make_job(member, device, state="done")
    add_artifact(job, media, data=DATA)
    add_artifact(job, media, kind="thumb", name="thumb.webp", data=b"t")
    plan = zips.plan_zip(type(job).objects.filter(pk=job.pk))
    assert (plan.files, plan.bytes, plan.jobs) == (1, len(DATA), 1)
    assert zips.summary(type(job).objects.filter(pk=job.pk)) == (1, len(DATA))


def test_nothing_to_zip_is_refused_before_any_byte(member, device, media):
    job = make_job(member, device, state="failed")
    with pytest.raises(zips.NothingToDownload, match="Nothing to download"):
        zips.plan_zip([job])


@pytest.mark.django_db(transaction=True)  # the view runs in asgiref's thread, on its own connection
async def test_under_asgi_the_zip_streams_as_chunks(member, device, media):
    from asgiref.sync import sync_to_async

    big = bytes(range(256)) * (zips.CHUNK * 3 // 256 + 7)  # a bit over three chunks
    job = await sync_to_async(make_job)(member, device, state="done", prompt="big")
    await sync_to_async(add_artifact)(job, media, data=big)
    client = AsyncClient()
    await client.aforce_login(member)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # Django warns when it must list() a sync iterator under ASGI
        response = await client.get("/jobs/download/", {"ids": str(job.pk)})
        parts = [part async for part in response.streaming_content]
    assert response.status_code == 200 and response.is_async
    assert len(parts) >= 4 and max(len(p) for p in parts) <= 2 * zips.CHUNK
    archive = zipfile.ZipFile(io.BytesIO(b"".join(parts)))
    assert archive.read(f"{job.pk:04d}-big/video.mp4") == big

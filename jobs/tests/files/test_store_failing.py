"""A result store (an S3 bucket on moto's server) that goes away: /healthz says so within about a second, a save
raises StoreUnreachable (never a half-written object), a download is a 503, and the job engine waits and tries
again, in its own words, like a full disk."""

from __future__ import annotations

import time

import pytest
from django.test import Client

from hub.celery import BEAT_TICK_KEY, WORKER_HEARTBEAT_KEY
from hub.disk import is_disk_full, is_save_blocked
from hub.media_storage import StoreUnreachable
from hub.tests.s3 import new_bucket, use_store
from jobs.files import store
from jobs.queue.outcomes import STORE_WAIT, disk_recovered, wait_for_disk
from jobs.tests.ui_fixtures import make_job

pytestmark = pytest.mark.django_db


@pytest.fixture
def lost_store(moto_server, settings):
    """A bucket on a moto server of the test's own; ``.server.stop()`` closes its port."""
    bucket = new_bucket(moto_server())
    use_store(settings, bucket.setting)
    return bucket


def _healthz(redis_client):
    redis_client.zadd(WORKER_HEARTBEAT_KEY, {"w@host": time.time()})
    redis_client.set(BEAT_TICK_KEY, time.time())
    try:
        return Client().get("/healthz", REMOTE_ADDR="127.0.0.1")
    finally:
        redis_client.delete(WORKER_HEARTBEAT_KEY, BEAT_TICK_KEY)


def test_healthz_reports_the_local_folder(redis_client, media):
    body = _healthz(redis_client).json()
    assert body["store"]["status"] == "ok" and "the local folder" in body["store"]["detail"]


def test_healthz_reports_a_bucket_that_answers_then_one_that_does_not(lost_store, redis_client):
    first = _healthz(redis_client)
    assert first.status_code == 200, first.json()
    assert first.json()["store"]["status"] == "ok" and lost_store.bucket in first.json()["store"]["detail"]
    lost_store.server.stop()
    started = time.monotonic()
    gone = _healthz(redis_client)
    assert time.monotonic() - started < 5  # a short probe, not botocore's minute of retries
    assert gone.status_code == 503
    assert gone.json()["store"]["status"] == "failing"
    assert gone.json()["store"]["detail"].startswith("the result store is unreachable: s3://")


def test_healthz_says_a_missing_bucket(s3_store, settings, redis_client):
    use_store(
        settings, {**s3_store.setting, "OPTIONS": {**s3_store.setting["OPTIONS"], "bucket_name": "nope-x"}}
    )
    body = _healthz(redis_client).json()
    assert body["store"]["status"] == "failing" and body["store"]["detail"].endswith("no such bucket")


def test_a_save_to_a_store_that_went_away_is_unreachable_and_leaves_nothing(lost_store, member, device):
    job = make_job(member, device, state="collecting")
    store.save_bytes(store.result_name(job, "before.bin"), b"kept")
    lost_store.server.stop()
    download = store.work_path(job, "video.mp4.download")
    download.write_bytes(b"x" * 100_000)
    with pytest.raises(StoreUnreachable) as caught:
        store.save_artifact(job, kind="video", name="video.mp4", path=download)
    assert is_save_blocked(caught.value) and not is_disk_full(caught.value)
    assert "the result store is unreachable" in str(caught.value)
    assert job.artifacts.count() == 0  # no row for a file that isn't there
    assert download.exists()  # the work copy stays until discard_partials (the device keeps the result)
    with pytest.raises(StoreUnreachable):
        store.find(store.result_name(job, "before.bin"))


def test_a_download_from_a_store_that_went_away_is_503(lost_store, member, device, member_client):
    job = make_job(member, device, state="done")
    art = store.save_artifact(job, kind="video", name="video.mp4", data=b"\x00" * 1000, mime="video/mp4")
    lost_store.server.stop()
    response = member_client.get(f"/jobs/{job.pk}/files/{art.pk}/", headers={"Range": "bytes=0-9"})
    assert response.status_code == 503 and response["Retry-After"] == "30"
    assert "unreachable" in response.content.decode()


def test_the_job_waits_for_the_store_in_its_own_words_then_says_it_is_saved(lost_store, member, device):
    job = make_job(member, device, state="collecting")
    download = store.work_path(job, "video.mp4.download")
    download.write_bytes(b"y" * 1000)
    lost_store.server.stop()
    with pytest.raises(StoreUnreachable) as caught:
        store.save_artifact(job, kind="video", name="video.mp4", path=download)
    wait_for_disk(job, caught.value)
    wait_for_disk(job, caught.value)  # a second try that fails: one note, not two
    job.refresh_from_db()
    assert job.state == "collecting" and job.remote_data.get(STORE_WAIT)
    assert job.phase.startswith("Waiting for the result store: the result store is unreachable")
    notes = [e.message for e in job.events.filter(message__startswith="Waiting for the result store")]
    assert len(notes) == 1 and "downloaded again by itself once the store answers" in notes[0]
    assert not download.exists()  # the half-done download is given back: the device keeps the result
    disk_recovered(job)
    job.refresh_from_db()
    assert STORE_WAIT not in job.remote_data
    assert job.events.filter(message="The result store answers again: the result is saved.").exists()

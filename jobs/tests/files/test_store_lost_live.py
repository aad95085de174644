"""A real worker whose result store (an S3 bucket on moto's server) is gone when the render finishes: the job keeps
collecting and says why, the device keeps the render, and once the store is back the job finishes by itself with
the device's bytes, in the bucket, from one render. Nothing is written under the worker's MEDIA_ROOT."""

from __future__ import annotations

import hashlib

import pytest

from hub.testing import start_worker, wait_for
from hub.tests.s3 import new_bucket, use_store
from jobs.queue.outcomes import STORE_WAIT
from jobs.queue.services import job_submit
from jobs.tests.conftest import ENGINE_ENV, wait_job, wait_thumbnail
from jobs.tests.files.media_checks import assert_device_video

pytestmark = pytest.mark.integration

VIDEO = "MiniMaxAI/MiniMax-H3-Turbo"


def test_a_lost_store_keeps_the_job_collecting_then_it_finishes_by_itself(
    engine, tiiny, pocket, member, moto_server, settings, tmp_path
):
    server = moto_server()
    bucket = new_bucket(server)
    use_store(settings, bucket.setting)  # this process reads the same bucket
    engine.stop_all()  # the engine's own worker uses the local disk: this one uses the bucket
    engine.workers["s3"] = start_worker(
        "s3", **ENGINE_ENV, **bucket.env, HUB_DATA_DIR=str(tmp_path / "worker-data")
    )
    server.stop()

    job = job_submit(
        owner=member,
        device=pocket,
        kind="video",
        model_id=VIDEO,
        params={"prompt": "a red fox in the snow", "size": "832x480", "seconds": 2, "steps": 4},
    )

    def waiting() -> bool:
        job.refresh_from_db()
        return bool(job.remote_data.get(STORE_WAIT))

    try:
        wait_for(waiting, timeout=90, what="the job to wait for the result store")
    except TimeoutError:
        raise AssertionError(
            f"job {job.pk} is {job.state} ({job.phase}):\n"
            + "\n".join(f"  {e.seq} {e.state}: {e.message}" for e in job.events.order_by("seq"))
            + engine.logs()
        ) from None
    job.refresh_from_db()
    assert job.state == "collecting"
    assert job.phase.startswith("Waiting for the result store: the result store is unreachable")
    assert job.events.filter(message__startswith="Waiting for the result store").count() == 1
    assert not job.artifacts.exists()
    with tiiny.client() as http:
        served = http.get(f"/v1/videos/{job.remote_id}/content")
    assert served.status_code == 200

    server.start()  # the store is back (same port, same buckets)
    wait_job(job, timeout=60, engine=engine)
    video = job.artifacts.get(name="video.mp4")
    stored = bucket.get(str(video.file))
    assert hashlib.sha256(stored).hexdigest() == video.sha256
    assert_device_video(served.content, stored)  # the device's render, with its story in the header
    assert job.events.filter(message="The result store answers again: the result is saved.").exists()
    assert tiiny.counters()["renders_submitted"] == 1
    wait_thumbnail(job)
    assert any(k.endswith("thumb.webp") for k in bucket.keys())
    results = tmp_path / "worker-data" / "media" / "results"
    assert not [p for p in results.rglob("*") if p.is_file()] if results.exists() else True

"""A video whose result download breaks (the Wi-Fi link drops mid-body) ends done with the whole file, rendered
once. Real Celery workers against the Tiiny emulator over HTTP; the emulator's link fault ``cut_downloads``
drops the connection part-way through the body. The device answers no ``Range`` (the reference names none), so
the hub asks for the file again from its first byte; a whole collect step's tries all cut leave the job
collecting, and the next step downloads it: the render is never asked for again."""

from __future__ import annotations

import hashlib

import pytest

from jobs.files import store
from jobs.queue.services import job_submit
from jobs.tests.conftest import wait_job
from jobs.tests.files.media_checks import assert_device_video

pytestmark = pytest.mark.integration

VIDEO = "MiniMaxAI/MiniMax-H3-Turbo"


def test_a_cut_download_is_fetched_again_and_the_video_is_rendered_once(
    engine, tiiny, pocket, member, settings
):
    from devices.clients.base import HttpDevice

    cuts = HttpDevice.download_attempts + 1  # one collect step's tries all break, and one more of the next
    tiiny.cut_downloads(count=cuts, fraction=0.6)
    job = job_submit(
        owner=member,
        device=pocket,
        kind="video",
        model_id=VIDEO,
        params={"prompt": "a red fox in the snow", "size": "832x480", "seconds": 2, "steps": 4},
    )
    wait_job(job, timeout=120, engine=engine)

    with tiiny.client() as http:
        whole = http.get(f"/v1/videos/{job.remote_id}/content").content
    video = job.artifacts.get(name="video.mp4")
    stored = store.read_bytes(video.file.name)
    assert_device_video(whole, stored)  # the device's whole render, its story written in (jobs.files.story)
    assert video.bytes == len(stored) and video.sha256 == hashlib.sha256(stored).hexdigest()
    counters = tiiny.counters()
    assert counters["renders_submitted"] == 1  # rendered once
    downloads = sum(n for key, n in counters["requests"].items() if key.endswith("/content"))
    assert downloads == cuts + 2  # every cut try, the one that came whole, and this test's own
    assert job.events.filter(state="done").count() == 1
    broke = job.events.filter(message__startswith="Downloading the result broke")
    assert broke.count() == 1 and broke.get().state == "collecting"  # told once, while it stayed collecting

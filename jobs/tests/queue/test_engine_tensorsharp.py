"""The job engine against the TensorSharp emulator (SSE streams), with real workers."""

from __future__ import annotations

import pytest

from jobs.queue.services import job_cancel, job_submit
from jobs.tests.conftest import make_device, wait_job, wait_thumbnail
from jobs.tests.queue.test_engine_tiiny import PNG

pytestmark = pytest.mark.integration


def test_it_renders_a_video_and_keeps_the_wav_sidecar(engine, tensorsharp, ts_device, member):
    model = ts_device.capabilities["tensorsharp"]["loaded"]
    job = job_submit(
        owner=member,
        device=ts_device,
        kind="video",
        model_id=model,
        params={
            "prompt": "waves at dusk",
            "width": 640,
            "height": 384,
            "frames": 22,
            "steps": 8,
            "video_mode": "t2v",
            "cfg": 1.0,
            "generate_audio": True,
        },
    )
    wait_job(job, timeout=60, engine=engine)
    wait_thumbnail(job)
    kinds = {a.name: a.kind for a in job.artifacts.all()}
    assert kinds == {"video.mp4": "video", "audio.wav": "sidecar", "thumb.webp": "thumb"}
    assert tensorsharp.counters()["peak_concurrent_work"] == 1


def test_it_edits_an_image_with_an_upload(engine, member):
    import io

    from django.core.files.uploadedfile import SimpleUploadedFile
    from PIL import Image

    from devices.emulator.testing import run_tensorsharp

    buf = io.BytesIO()
    Image.new("RGB", (64, 48), "teal").save(buf, format="PNG")
    with run_tensorsharp(speed=3000, model="qwen-image-edit") as emu:
        device = make_device(emu, kind="tensorsharp", name="Editor")
        model = device.capabilities["tensorsharp"]["loaded"]
        job = job_submit(
            owner=member,
            device=device,
            kind="image",
            model_id=model,
            params={"prompt": "make it snow", "steps": 4},
            upload_files={"image": SimpleUploadedFile("p.png", buf.getvalue(), "image/png")},
        )
        wait_job(job, timeout=60, engine=engine)
        wait_thumbnail(job)
        assert sorted(a.name for a in job.artifacts.all()) == ["image.png", "thumb.webp"]
        assert any(k.startswith("POST /api/upload") for k in emu.counters()["requests"])


def test_it_cancels_a_stream_by_closing_it(engine, tensorsharp, ts_device, member):
    model = ts_device.capabilities["tensorsharp"]["loaded"]
    tensorsharp.control("POST", "speed", {"speed": 20})
    job = job_submit(
        owner=member,
        device=ts_device,
        kind="video",
        model_id=model,
        params={
            "prompt": "slow clouds",
            "width": 640,
            "height": 384,
            "frames": 22,
            "steps": 20,
            "video_mode": "t2v",
        },
    )

    def progressing() -> bool:
        job.refresh_from_db()
        return job.state == "running" and job.progress > 8

    from hub.testing import wait_for

    wait_for(progressing, timeout=30, what="stream progress")
    job_cancel(job=job, by=member)
    wait_for(
        lambda: tensorsharp.counters().get("renders_cancelled", 0) >= 1, timeout=30, what="the server cancel"
    )
    job.refresh_from_db()
    assert job.state == "cancelled"
    assert PNG  # shared fixture bytes imported for the linter's sake

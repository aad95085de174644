"""Fixtures for the UI's view tests: a device with realistic capabilities and jobs made directly as rows.

View tests don't need the engine: they build ``Job`` rows in the states a page must show. The fixtures
(``device``, ``media``) reach every test through the root conftest's ``pytest_plugins``; the helpers and constants
are imported by name.
"""

from __future__ import annotations

import datetime as dt
from pathlib import Path

import pytest
from django.utils import timezone

from devices.capabilities import Capabilities, ModelCap, VideoCap

VIDEO = "MiniMaxAI/MiniMax-H3-Turbo"
MESH = "tencent/Hunyuan3D-2.1"
TTS = "Qwen/Qwen3-TTS-12Hz-1.7B-CustomVoice"
MUSIC = "RoyalCities/Foundation-1"
IMAGE = "Tongyi-MAI/Z-Image-Turbo"
PNG = (  # a real 1x1 PNG: uploads are decoded, so every checksum must hold
    b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR\x00\x00\x00\x01\x00\x00\x00\x01\x08\x02\x00\x00\x00\x90wS\xde\x00"
    b"\x00\x00\x0cIDATx\x9cc\xf8\xcf\xc0\x00\x00\x03\x01\x01\x00\xc9\xfe\x92\xef\x00\x00\x00\x00IEND\xaeB`\x82"
)


def capabilities() -> dict:
    return Capabilities(
        kind="tiiny",
        models=[
            ModelCap(id=VIDEO, name="MiniMax-H3-Turbo", kind="video", loaded=True, npu_usage=40),
            ModelCap(id=MESH, name="Hunyuan3D-2.1", kind="3d", npu_usage=30),
            ModelCap(id=TTS, name="Qwen3-TTS CustomVoice", kind="tts", npu_usage=5),
            ModelCap(id=MUSIC, name="Foundation-1", kind="music", npu_usage=10),
            ModelCap(id=IMAGE, name="Z-Image-Turbo", kind="image", npu_usage=20),
        ],
        video={
            VIDEO: VideoCap(
                model_id=VIDEO,
                canvases=["1344x768", "768x1344", "832x480", "480x832"],
                step_options=[4, 5, 6, 7, 8],
                default_steps=7,
                fps=24,
            )
        },
        stages_3d=["shape", "simplify", "texture", "export"],
        npu_total=100,
    ).to_dict()


@pytest.fixture
def device(db):
    from devices.models import Device
    from devices.services import device_register

    d = device_register(name="Pocket", kind="tiiny", base_url="http://127.0.0.1:9", api_key="k")
    Device.objects.filter(pk=d.pk).update(
        state=Device.State.ONLINE,
        capabilities=capabilities(),
        npu_util=42.0,
        npu_mem_used_mb=12000,
        npu_mem_total_mb=48000,
        cpu_percent=12.0,
        mem_percent=30.0,
        loaded_models=[{"model_id": VIDEO, "npu_usage": 40, "status": "running"}],
        reading_at=timezone.now(),
    )
    d.refresh_from_db()
    return d


def another_tiiny(
    name: str, caps: dict | None = None, *, loaded: tuple[str, ...] = (), state: str = "online", **fields
):
    """One more Tiiny for the pool's tests: ``device``'s capabilities unless others are given, holding the
    ``loaded`` models (none by default), in ``state``."""
    from devices.models import Device
    from devices.services import device_register

    d = device_register(name=name, kind="tiiny", base_url="http://127.0.0.1:9", api_key="k")
    Device.objects.filter(pk=d.pk).update(
        state=state,
        capabilities=caps if caps is not None else capabilities(),
        loaded_models=[{"model_id": m, "npu_usage": 40, "status": "running"} for m in loaded],
        reading_at=timezone.now(),
        **fields,
    )
    d.refresh_from_db()
    return d


@pytest.fixture
def kitchen(db):
    """A second Tiiny that can do everything ``device`` can, holding no model yet."""
    return another_tiiny("Kitchen Tiiny")


def hold_device(device, job=None, *, minutes: int = 10) -> None:
    """Make the test the device's only worker and poller while it runs.

    A session's background beat (started by any earlier test that asked for ``live_beat``) polls every watched
    or busy device every 2 s and runs ``reconcile`` every 5 s with the session's worker: it would "recover" a
    ``running`` row that no worker holds (interrupted, then queued again), dispatch a queued job to the fake
    address, and push what it changed, racing the test's own pushes (and its "skip unchanged" memory in Redis).
    Holding the device's poll claim and its lease far ahead keeps all of that away (a lease held for no job is
    nobody's to recover: ``jobs.queue.engine.recover`` leaves the job alone; give ``job`` when the test needs the
    lease to be that job's). The job's next poll is due as far ahead: else reconcile revives its poll chain from the
    ticket it holds, and the test's own poll with that ticket finds it taken (CI's PostgreSQL pass saw this).
    """
    from devices.services import device_claim_poll
    from jobs.core.lease import lease_acquire
    from jobs.models import Job

    ahead = timezone.now() + dt.timedelta(minutes=minutes)
    assert device_claim_poll(device_id=device.pk, now=ahead)
    assert lease_acquire(device.pk, job.pk if job is not None else None, now=ahead)
    if job is not None:
        Job.objects.filter(pk=job.pk).update(next_poll_at=ahead)


def make_job(
    owner,
    device,
    *,
    kind: str = "video",
    state: str = "queued",
    prompt: str = "a red fox in the snow",
    shared: bool = False,
    **fields,
):
    from jobs.models import Job, JobEvent

    params = {
        "video": {"prompt": prompt, "size": "832x480", "seconds": 2, "steps": 4},
        "mesh": {"stages": ["shape", "export"], "format": "glb"},
        "music": {"prompt": prompt, "seconds": 4, "steps": 50, "cfg_scale": 7},
        "image": {"prompt": prompt, "size": "512x512", "n": 1, "steps": 8},
        "speech": {"input": prompt, "voice": "serena", "response_format": "wav"},
    }[kind]
    model = {"video": VIDEO, "mesh": MESH, "music": MUSIC, "image": IMAGE, "speech": TTS}[kind]
    now = timezone.now()
    defaults = {
        "estimate_s": 420.0,
        "predicted_start": now + dt.timedelta(minutes=5),
        "predicted_finish": now + dt.timedelta(minutes=12),
    }
    if state in ("preparing", "submitted", "running", "collecting"):
        defaults.update(
            started_at=now - dt.timedelta(minutes=2),
            progress=37.0,
            phase="Rendering step 3 of 4",
            predicted_start=now - dt.timedelta(minutes=2),
            predicted_finish=now + dt.timedelta(minutes=5),
        )
    if state in ("done", "failed", "cancelled"):
        defaults.update(
            started_at=now - dt.timedelta(minutes=9),
            finished_at=now - dt.timedelta(minutes=1),
            progress=100.0 if state == "done" else 40.0,
        )
    defaults.update(fields)
    params = defaults.pop("params", params)
    job = Job.objects.create(
        owner=owner,
        device=device,
        kind=kind,
        model_id=model,
        params=params,
        prompt=prompt if kind != "mesh" else "",
        state=state,
        shared=shared,
        last_seq=1 if state == "queued" else 2,
        **defaults,
    )
    JobEvent.objects.create(job=job, seq=1, state="queued", message="Queued.")
    if state != "queued":
        JobEvent.objects.create(job=job, seq=2, state=state, message=f"Now {state}.")
    return job


def add_artifact(
    job,
    media_root: Path,
    *,
    kind: str = "video",
    name: str = "video.mp4",
    mime: str = "video/mp4",
    data: bytes = b"\x00\x00\x00\x18ftypmp42",
):
    from jobs.models import Artifact

    rel = f"results/{job.owner_id}/{job.pk}/{name}"
    path = Path(media_root) / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)
    return Artifact.objects.create(
        job=job, kind=kind, file=rel, name=name, mime=mime, bytes=len(data), sha256="0" * 64
    )


@pytest.fixture
def media(settings, tmp_path):
    settings.MEDIA_ROOT = tmp_path / "media"
    return settings.MEDIA_ROOT

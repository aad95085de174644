"""The job engine against the Tiiny emulator, over HTTP, with real Celery workers and beat."""

from __future__ import annotations

import time

import pytest

from jobs.core.lease import lease_is_live
from jobs.models import Artifact, Job
from jobs.queue.services import job_submit
from jobs.tests.conftest import wait_job, wait_thumbnail

pytestmark = pytest.mark.integration

VIDEO = "MiniMaxAI/MiniMax-H3-Turbo"
PNG = (
    b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR\x00\x00\x00\x01\x00\x00\x00\x01\x08\x02\x00\x00\x00\x90wS\xde\x00"
    b"\x00\x00\x0cIDATx\x9cc\xf8\x0f\x00\x00\x01\x01\x00\x05\x18\xd8N\x00\x00\x00\x00IEND\xaeB`\x82"
)


def video(member, device, **params):
    p = {"prompt": "a red fox in the snow", "size": "832x480", "seconds": 2, "steps": 4, **params}
    return job_submit(owner=member, device=device, kind="video", model_id=VIDEO, params=p)


def test_it_renders_every_kind_one_after_another(engine, tiiny, pocket, member):
    from django.core.files.uploadedfile import SimpleUploadedFile

    jobs = [
        video(member, pocket),
        job_submit(
            owner=member,
            device=pocket,
            kind="mesh",
            model_id="tencent/Hunyuan3D-2.1",
            params={"stages": ["shape", "simplify", "texture", "export"], "format": "glb", "seed": 3},
            upload_files={"image": SimpleUploadedFile("obj.png", PNG, "image/png")},
        ),
        job_submit(
            owner=member,
            device=pocket,
            kind="music",
            model_id="RoyalCities/Foundation-1",
            params={"prompt": "warm analog bass loop", "seconds": 4, "steps": 50, "cfg_scale": 7},
        ),
        job_submit(
            owner=member,
            device=pocket,
            kind="music",
            model_id="tencent/SongGeneration-v2-large",
            params={
                "caption": "a folk song",
                "lyrics": "la la",
                "generation_type": "mixed",
                "seconds": 20,
                "preview_seconds": 10,
            },
        ),
        job_submit(
            owner=member,
            device=pocket,
            kind="image",
            model_id="Tongyi-MAI/Z-Image-Turbo",
            params={"prompt": "a lighthouse", "size": "512x512", "n": 2, "steps": 8},
        ),
        job_submit(
            owner=member,
            device=pocket,
            kind="speech",
            model_id="Qwen/Qwen3-TTS-12Hz-1.7B-CustomVoice",
            params={"input": "Hello from the hub.", "voice": "serena", "response_format": "wav"},
        ),
    ]
    for job in jobs:
        wait_job(job, timeout=60, engine=engine)
    for job in jobs:
        if job.kind != "mesh":
            wait_thumbnail(job)
    names = {j.kind + ":" + j.model_id: sorted(a.name for a in j.artifacts.all()) for j in jobs}
    # Every result gets its gallery thumbnail once it is done, off the device's lease (jobs.tasks).
    assert names[f"video:{VIDEO}"] == ["thumb.webp", "video.mp4"]
    # The 3D job's source picture (PNG above) is a stub that does not decode: no thumbnail, and done anyway.
    assert names["mesh:tencent/Hunyuan3D-2.1"] == ["model.glb"]
    assert names["image:Tongyi-MAI/Z-Image-Turbo"] == ["image-1.png", "image-2.png", "thumb.webp"]
    assert names["music:tencent/SongGeneration-v2-large"] == ["song.wav", "thumb.webp"]
    assert all("thumb.webp" in n for k, n in names.items() if not k.startswith("mesh:")), names
    for a in Artifact.objects.all():
        assert a.bytes > 0 and len(a.sha256) == 64
        assert a.file.name.startswith(f"results/{member.pk}/{a.job_id}/")
    counters = tiiny.counters()
    assert counters["peak_concurrent_work"] == 1
    assert counters["renders_submitted"] == 1
    assert Job.objects.filter(state="done").count() == 6


def _until(pred, timeout=20.0, what="condition"):
    from hub.testing import wait_for

    wait_for(pred, timeout=timeout, what=what)


def _rendering(job):
    def check() -> bool:
        job.refresh_from_db()
        return job.state == "running" and bool(job.remote_id)

    return check


def test_it_resumes_the_same_render_after_the_worker_is_killed(engine, tiiny, pocket, member):
    tiiny.set_speed(50)  # 2 s @832x480/4 steps = 420 device-seconds: ~8 s here (room for a loaded CI box)
    job = video(member, pocket)
    _until(_rendering(job), what="the render to start")
    remote_id = job.remote_id
    engine.kill_worker("e1")  # SIGKILL: its countdown poll dies with it
    engine.start_worker("e1")
    wait_job(job, timeout=40, engine=engine)
    assert job.remote_id == remote_id
    counters = tiiny.counters()
    assert counters["renders_submitted"] == 1
    assert job.artifacts.exclude(kind="thumb").get().name == "video.mp4"


def test_it_adopts_a_render_created_just_before_a_crash(engine, tiiny, pocket, member):
    """The crash window: the device created the render but the hub died before storing its id."""
    from django.utils import timezone

    from jobs.core import lease

    engine.stop_all()  # nobody runs the job; we play the worker that died
    tiiny.load(VIDEO)
    job = video(member, pocket)
    Job.objects.filter(pk=job.pk).update(
        state="submitted", submit_started_at=timezone.now(), attempts=1, started_at=timezone.now()
    )
    with tiiny.client() as http:
        r = http.post(
            "/v1/videos",
            json={
                "model": VIDEO,
                "prompt": job.params["prompt"],
                "size": "832x480",
                "seconds": "2",
                "steps": 4,
            },
        )
        created = r.json()["id"]
    lease.lease_release(pocket.pk)
    engine.ensure(("e1",))  # reconcile (beat) finds it: submitted, no remote id, no live lease
    wait_job(job, timeout=30, engine=engine)
    assert job.remote_id == created
    assert tiiny.counters()["renders_submitted"] == 1
    assert any("already started" in e.message for e in job.events.all())


def test_it_never_runs_two_jobs_at_once_with_two_workers(engine, tiiny, pocket, member, other_member):
    engine.ensure(("e1", "e2"))
    jobs = [video(member, pocket, prompt=f"scene {i}") for i in range(2)]
    jobs += [video(other_member, pocket, prompt=f"other scene {i}") for i in range(2)]
    for job in jobs:
        wait_job(job, timeout=60, engine=engine)
    counters = tiiny.counters()
    assert counters["peak_concurrent_work"] == 1
    assert counters["renders_submitted"] == 4
    spans = sorted((j.started_at, j.finished_at) for j in jobs)
    assert all(a[1] <= b[0] for a, b in zip(spans, spans[1:], strict=False))  # never overlapping


def test_it_waits_while_locked_then_resubmits_the_vanished_render_once(engine, tiiny, pocket, member):
    from devices.models import Device

    tiiny.set_speed(100)
    job = video(member, pocket)
    _until(_rendering(job), what="the render to start")
    first = job.remote_id
    tiiny.power_cycle()  # locked (502) and the render is gone
    _until(lambda: Device.objects.get(pk=pocket.pk).state == "locked", what="the device to show locked")
    # The device poller may see the lock before the job's own poll does: wait for the job to notice.
    _until(
        lambda: any("Waiting for the device" in e.message for e in job.events.all()),
        what="the job to notice the lock",
    )
    job.refresh_from_db()
    assert job.state == "running"  # it waits
    tiiny.set_speed(3000)
    tiiny.unlock()
    wait_job(job, timeout=40, engine=engine)
    assert job.remote_id != first
    assert job.requeues == 1
    states = list(job.events.values_list("state", flat=True))
    assert "interrupted" in states
    assert tiiny.counters()["renders_submitted"] == 2  # the lost render and exactly one resubmission


def test_it_waits_for_unlock_before_starting(engine, tiiny, pocket, member):
    from devices.models import Device

    tiiny.power_cycle()
    job = video(member, pocket)

    # Whichever notices first: the job's own attempt (an event) or the metric poller (the device shows locked,
    # and then dispatch doesn't even try). Either way the job waits and the device says why.
    def noticed() -> bool:
        device_locked = Device.objects.filter(pk=pocket.pk, state="locked").exists()
        return device_locked or any("locked" in e.message.lower() for e in job.events.all())

    _until(noticed, what="the lock to be noticed")
    time.sleep(1.0)  # a few dispatch/reconcile rounds while locked
    job.refresh_from_db()
    assert job.state in ("queued", "scheduled", "preparing")
    assert Device.objects.get(pk=pocket.pk).state_fix  # the fix is shown next to the state
    tiiny.unlock()
    wait_job(job, timeout=40, engine=engine)


def test_it_fails_a_generation_timeout_and_leaves_the_device_usable(engine, tiiny, pocket, member):
    from jobs.models import RenderStat

    # ~77 device-minutes: the device cuts it at 60. Admission refuses what it predicts over 55 minutes, so this
    # one gets in the way a real one would: the shape's history (another device, older firmware) said 40.
    RenderStat.objects.create(
        device=pocket, kind="video", model_id=VIDEO, shape="1344x768:7s:8st", samples=3, mean_s=40 * 60
    )
    long = video(member, pocket, size="1344x768", seconds=7, steps=8)
    wait_job(long, states=("failed",), timeout=40, engine=engine)
    assert long.error_code == "generation_timeout"
    assert "one-hour limit" in long.error_human
    assert "GENERATION_TIMEOUT" in long.error_detail or "time limit" in long.error_detail
    nxt = video(member, pocket)
    wait_job(nxt, timeout=40, engine=engine)
    counters = tiiny.counters()["requests"]
    assert (
        counters.get("POST /api/v1/models/{model_id:path}/stop", 0)
        + sum(v for k, v in counters.items() if k.endswith("/stop"))
        >= 1
    )


def test_it_retries_the_first_request_after_a_load(engine, tiiny, pocket, member):
    job = job_submit(
        owner=member,
        device=pocket,
        kind="image",
        model_id="Tongyi-MAI/Z-Image-Turbo",
        params={"prompt": "a cat", "size": "512x512", "n": 1, "steps": 8},
    )
    wait_job(job, timeout=40, engine=engine)
    requests = tiiny.counters()["requests"]
    assert sum(v for k, v in requests.items() if "images/generations" in k) >= 2  # xh2a / 502 once, then ok


def test_it_fails_with_the_devices_own_message_on_a_rejection(engine, tiiny, pocket, member):
    job = video(member, pocket, steps=3)  # the form would refuse it; the device does too
    wait_job(job, states=("failed",), timeout=30, engine=engine)
    assert "steps must be one of" in job.error_detail
    speech = job_submit(
        owner=member,
        device=pocket,
        kind="speech",
        model_id="OpenMOSS/MOSS-TTS-Nano-100M",
        params={"input": "Hello there.", "voice": "alloy"},
    )
    wait_job(speech, states=("failed",), timeout=30, engine=engine)
    assert "upstream TTS model failed" in speech.error_detail


def test_it_backs_off_while_unreachable_and_keeps_the_job(engine, member):
    from devices.emulator.testing import run_tiiny
    from devices.models import Device
    from jobs.tests.conftest import make_device

    with run_tiiny(speed=3000) as emu:
        device = make_device(emu, name="Far away")
        emu.stop()
        job = video(member, device)
        _until(lambda: Device.objects.get(pk=device.pk).state == "unreachable", what="unreachable")
        job.refresh_from_db()
        assert job.state in ("queued", "preparing")
        emu.restart()
        wait_job(job, timeout=40, engine=engine)


def test_it_cancels_a_queued_job_at_once(engine, tiiny, pocket, member, admin_user):
    from jobs.queue.services import job_cancel, queue_pause

    queue_pause(device=pocket, by=admin_user)
    job = video(member, pocket)
    job = job_cancel(job=job, by=member)
    assert job.state == "cancelled"
    assert tiiny.counters()["renders_submitted"] == 0


def test_it_cancels_a_running_video_and_stops_the_model(engine, tiiny, pocket, member, admin_user):
    from jobs.queue.services import job_cancel

    tiiny.set_speed(50)
    job = video(member, pocket)
    _until(_rendering(job), what="the render to start")
    job_cancel(job=job, by=admin_user, reason="wrong prompt")
    job.refresh_from_db()
    assert job.state == "cancelled" and job.cancel_reason == "wrong prompt"
    _until(lambda: any("Stopped on the device" in e.message for e in job.events.all()), what="the stop")
    requests = tiiny.counters()["requests"]
    assert any(k.startswith("DELETE /v1/videos") for k in requests)
    assert any(k.endswith("/stop") for k in requests)
    # 600, not 3000: the gateway's one-hour cut-off must stay longer (6 s) than the stop, the relaunch and the
    # render take on a loaded machine, or the next video "times out" while it waits on the device.
    tiiny.set_speed(600)
    nxt = video(member, pocket)
    wait_job(nxt, timeout=40, engine=engine)


def test_it_cancels_a_blocking_song_while_it_runs(engine, tiiny, pocket, member):
    from jobs.queue.services import job_cancel

    tiiny.set_speed(60)
    job = job_submit(
        owner=member,
        device=pocket,
        kind="music",
        model_id="tencent/SongGeneration-v2-large",
        params={"caption": "slow ballad", "generation_type": "bgm", "seconds": 120, "preview_seconds": 5},
    )

    def running() -> bool:
        job.refresh_from_db()
        return job.state == "running"

    _until(running, what="the song to start")
    job_cancel(job=job, by=member)
    tiiny.set_speed(3000)
    _until(
        lambda: not lease_is_live(pocket.pk, job.pk),
        timeout=30,
        what="the device to be free",
    )
    job.refresh_from_db()
    assert job.state == "cancelled"
    assert not job.artifacts.exists()


def test_it_mesh_stages_never_include_background(engine, tiiny, pocket, member):
    from django.core.files.uploadedfile import SimpleUploadedFile

    job = job_submit(
        owner=member,
        device=pocket,
        kind="mesh",
        model_id="tencent/Hunyuan3D-2.1",
        params={"stages": ["shape", "export"], "format": "glb"},
        upload_files={"image": SimpleUploadedFile("obj.png", PNG, "image/png")},
    )
    wait_job(job, timeout=40, engine=engine)
    requests = tiiny.counters()
    assert requests["tasks_submitted"] == 2

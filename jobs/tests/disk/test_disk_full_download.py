"""A finished render whose download finds the hub's disk full: nothing is lost.

The disk is real: a 4 MB tmpfs mounted over MEDIA_ROOT for the test (the tests run as root in a sandbox), filled
until the emulator's video no longer fits. Real Celery workers and beat run the job against the Tiiny emulator over
HTTP. The job waits (collecting, its page and story say why), the device keeps the render, the household channel
is told, and once the filler is deleted the job finishes by itself with the device's bytes: one render, never two.
"""

from __future__ import annotations

import hashlib
import shutil
from pathlib import Path

import pytest

from hub.testing import tmpfs, wait_for
from jobs.models import Job
from jobs.queue.services import job_submit
from jobs.tests.conftest import wait_job
from jobs.tests.files.media_checks import assert_device_video

pytestmark = pytest.mark.integration

VIDEO = "MiniMaxAI/MiniMax-H3-Turbo"
SLACK = 16 * 1024  # what the filler leaves free: far less than the emulator's video (50-150 KB)


@pytest.fixture
def small_media(settings):
    """MEDIA_ROOT on a 4 MB tmpfs of its own (unmounted afterwards: the folder's own files come back)."""
    with tmpfs(Path(settings.MEDIA_ROOT), "size=4m") as media:
        yield media


def _fill(media: Path, leave: int) -> Path:
    """A file that takes all but ``leave`` bytes of the disk (all of it when ``leave`` is 0)."""
    filler = media / "filler.bin"
    with open(filler, "wb", buffering=0) as fh:
        fh.write(b"\0" * max(0, shutil.disk_usage(media).free - leave))
        try:
            while not leave:
                fh.write(b"\0" * 4096)
        except OSError:
            pass  # full
    return filler


def _waiting_for_disk(job):
    def check() -> bool:
        job.refresh_from_db()
        return bool(job.remote_data.get("waiting_for_disk"))

    return check


def test_a_full_disk_keeps_the_job_waiting_then_it_finishes_by_itself(
    small_media, engine, tiiny, pocket, member, admin_client, settings
):
    from notify.models import Delivery
    from notify.services import channel_create

    settings.HUB_MIN_FREE_MB = 0  # this test's disk is 4 MB: admission would refuse it otherwise
    house = channel_create(owner=None, kind="email", name="Box", address="box@example.org")
    assert house.on_disk_full  # on by default for household channels
    media = small_media
    filler = _fill(media, SLACK)

    job = job_submit(
        owner=member,
        device=pocket,
        kind="video",
        model_id=VIDEO,
        params={"prompt": "a red fox in the snow", "size": "832x480", "seconds": 2, "steps": 4},
    )
    try:
        wait_for(_waiting_for_disk(job), timeout=60, what="the job to wait for disk space")
    except TimeoutError:
        raise AssertionError(
            f"job {job.pk} is {job.state} ({job.phase}):\n"
            + "\n".join(f"  {e.seq} {e.state}: {e.message}" for e in job.events.order_by("seq"))
            + engine.logs()
        ) from None

    # It waits, collecting: not failed, and it says why on its page and in its story.
    job.refresh_from_db()
    assert job.state == "collecting", job.state
    assert (
        job.phase.startswith("Waiting for disk space:") and "the device still holds the result" in job.phase
    )
    notes = [e.message for e in job.events.filter(message__startswith="Waiting for disk space")]
    assert len(notes) == 1 and "Usage page" in notes[0]
    page = admin_client.get(f"/jobs/{job.pk}/").content.decode()
    assert "Waiting for disk space" in page and "The device still holds it" in page

    # Nothing half-written is left on the full disk.
    folder = media / "results" / str(member.pk) / str(job.pk)
    assert not [p.name for p in folder.glob("*") if p.name.endswith((".part", ".download"))]

    # The device keeps the finished render.
    with tiiny.client() as http:
        assert http.get(f"/v1/videos/{job.remote_id}").json()["status"] == "completed"
        served = http.get(f"/v1/videos/{job.remote_id}/content")
    assert served.status_code == 200 and len(served.content) > SLACK

    # The household heard of it, once.
    wait_for(
        lambda: Delivery.objects.filter(event="disk.full").exists(), timeout=10, what="the disk-full notice"
    )
    assert Delivery.objects.filter(event="disk.full", channel=house).count() == 1

    # The row is the truth: a worker killed while the job waits comes back to the same wait (beat's reconcile
    # revives the poll chain). Several tries later (every 0.5 s here) it still waits, quietly: one note, one notice.
    engine.kill_worker("e1")
    engine.start_worker("e1")
    job.refresh_from_db()
    wait_for(
        lambda: (
            Job.objects.filter(pk=job.pk).values_list("poll_ticket", flat=True).get() > job.poll_ticket + 4
        ),
        timeout=20,
        what="a few more tries",
    )
    job.refresh_from_db()
    assert job.state == "collecting"
    assert job.events.filter(message__startswith="Waiting for disk space").count() == 1
    assert Delivery.objects.filter(event="disk.full").count() == 1

    # Space is freed: the job finishes by itself, with the device's bytes, from the one render.
    filler.unlink()
    wait_job(job, timeout=30, engine=engine)
    video = job.artifacts.get(name="video.mp4")
    stored = (media / video.file.name).read_bytes()
    assert hashlib.sha256(stored).hexdigest() == video.sha256
    assert_device_video(served.content, stored)  # the device's render, with its story in the header
    assert job.events.filter(message__startswith="There is room again").exists()
    assert "waiting_for_disk" not in job.remote_data
    assert tiiny.counters()["renders_submitted"] == 1


def test_a_blocking_result_that_finds_the_disk_full_renders_again_once_there_is_room(
    small_media, engine, tiiny, pocket, member, settings
):
    """An image comes back in the call's answer: the device keeps nothing to download again. The job waits in the
    queue (not failed), the household is told once, and it renders again once there is room."""
    from notify.models import Delivery
    from notify.services import channel_create

    settings.HUB_MIN_FREE_MB = 0
    channel_create(owner=None, kind="email", name="Box", address="box@example.org")
    filler = _fill(small_media, 0)
    job = job_submit(
        owner=member,
        device=pocket,
        kind="image",
        model_id="Tongyi-MAI/Z-Image-Turbo",
        params={"prompt": "a lighthouse", "size": "512x512", "n": 1, "steps": 8},
    )
    wait_for(
        lambda: job.events.filter(message__startswith="Waiting for disk space").count() >= 2,
        timeout=60,
        what="two tries that found the disk full",
    )
    job.refresh_from_db()
    assert job.state in ("queued", "preparing", "running"), job.state
    assert not job.artifacts.exists()
    assert (
        "renders again once there is room"
        in job.events.filter(message__startswith="Waiting for disk").first().message
    )
    assert Delivery.objects.filter(event="disk.full").count() == 1  # told once, however many tries

    filler.unlink()
    wait_job(job, timeout=60, engine=engine)
    image = job.artifacts.get(name="image-1.png")
    assert image.bytes > 0
    assert hashlib.sha256((small_media / image.file.name).read_bytes()).hexdigest() == image.sha256
    assert job.events.filter(message__startswith="There is room again").exists()
    assert Job.objects.get(pk=job.pk).state == "done"


def test_a_3d_stage_whose_mesh_finds_the_disk_full_waits_and_goes_on(
    small_media, engine, tiiny, pocket, member, settings
):
    """A 3D job keeps each stage's mesh for the next one: the first download that finds the disk full leaves the
    job waiting between stages (the device keeps the stage's result), and it goes on once there is room."""
    from django.core.files.uploadedfile import SimpleUploadedFile

    settings.HUB_MIN_FREE_MB = 0
    png = (
        b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR\x00\x00\x00\x01\x00\x00\x00\x01\x08\x02\x00\x00\x00\x90wS\xde\x00"
        b"\x00\x00\x0cIDATx\x9cc\xf8\x0f\x00\x00\x01\x01\x00\x05\x18\xd8N\x00\x00\x00\x00IEND\xaeB`\x82"
    )
    filler = _fill(small_media, 8 * 1024)  # room for the upload (one 4 KB page), not for a 10 KB mesh
    job = job_submit(
        owner=member,
        device=pocket,
        kind="mesh",
        model_id="tencent/Hunyuan3D-2.1",
        params={"stages": ["shape", "simplify"], "format": "glb", "seed": 3},
        upload_files={"image": SimpleUploadedFile("obj.png", png, "image/png")},
    )
    wait_for(_waiting_for_disk(job), timeout=60, what="the 3D job to wait for disk space")
    job.refresh_from_db()
    assert job.state in ("submitted", "running"), job.state
    assert job.phase.startswith("Waiting for disk space")
    first_stage = job.remote_id

    filler.unlink()
    wait_job(job, timeout=60, engine=engine)
    assert job.artifacts.get(name="model.glb").bytes > 0
    assert job.remote_data["tasks"]["shape"] == first_stage  # the same stage render, downloaded again
    assert tiiny.counters()["tasks_submitted"] == 2  # one per stage, none twice

"""The gallery in Chromium: every done job's card shows its thumbnail, decoded, with no console error.

The thumbnails are made by the collect hook from real media (an H.264 MP4 and a PCM WAV), in the folder
the live ASGI server reads results from (``settings.MEDIA_ROOT`` is shared with it through ``HUB_DATA_DIR``).
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from django.conf import settings

from conftest import save_screenshot
from devices.emulator.media import video_mp4, wav_bytes
from jobs.files.store import save_artifact
from jobs.files.thumbnails import thumbnail_for_job
from jobs.tests.ui_fixtures import device, hold_device, make_job  # noqa: F401 - device is a fixture

pytestmark = [pytest.mark.browser, pytest.mark.integration, pytest.mark.django_db(transaction=True)]

LOADED = """(ids) => ids.every((id) => {
  const img = document.querySelector('#' + id + ' .job-card-media img');
  return img && img.complete && img.naturalWidth > 0;
})"""


@pytest.fixture
def two_done_jobs(member, device):  # noqa: F811 - the device fixture from ui_fixtures
    video = make_job(member, device, state="done", prompt="a kite over the dunes at sunset")
    mp4 = video_mp4(prompt=video.prompt, seconds=2, width=320, height=192, fps=12)
    save_artifact(video, kind="video", name="video.mp4", data=mp4.read_bytes(), mime="video/mp4")
    song = make_job(member, device, kind="music", state="done", prompt="warm analog bass loop")
    save_artifact(song, kind="audio", name="loop.wav", data=wav_bytes(seconds=2), mime="audio/wav")
    jobs = [video, song]
    for job in jobs:
        thumbnail_for_job(job)  # what the done job's task does
    assert all(j.artifacts.filter(kind="thumb").exists() for j in jobs)
    yield jobs
    for j in jobs:
        shutil.rmtree(Path(settings.MEDIA_ROOT) / "results" / str(member.pk) / str(j.pk), ignore_errors=True)


def test_the_gallery_shows_two_loaded_thumbnails_and_no_console_errors(signed_in_page, member, two_done_jobs):
    page = signed_in_page(member)
    problems: list[str] = []
    page.on(
        "console", lambda m: problems.append(f"console {m.type}: {m.text}") if m.type == "error" else None
    )
    page.on("pageerror", lambda e: problems.append(f"page error: {e}"))
    failed: list[str] = []
    page.on("response", lambda r: failed.append(f"{r.status} {r.url}") if r.status >= 400 else None)
    page.goto("/jobs/")
    cards = [f"job-{j.pk}-card" for j in two_done_jobs]
    page.wait_for_function(LOADED, arg=cards, timeout=15000)
    sizes = page.evaluate(
        """(ids) => ids.map((id) => {
          const img = document.querySelector('#' + id + ' .job-card-media img');
          return [img.naturalWidth, img.naturalHeight, img.getAttribute('width'), img.getAttribute('height'),
                  img.alt, img.loading];
        })""",
        cards,
    )
    assert sizes == [
        [480, 300, "480", "300", "a kite over the dunes at sunset", "lazy"],
        [480, 300, "480", "300", "warm analog bass loop", "lazy"],
    ]
    page.wait_for_timeout(300)  # late console messages (e.g. the live socket) still count
    save_screenshot(page, "gallery-thumbnails")
    assert problems == [] and failed == []


PREVIEW = """([id, width]) => {
  const img = document.getElementById(id);
  if (!img || !img.complete || !img.naturalWidth) return null;
  return width === null || img.naturalWidth === width ? [img.naturalWidth, img.getAttribute('src')] : null;
}"""


def test_the_job_page_follows_the_live_preview(signed_in_page, member, device):  # noqa: F811
    """The worker's preview file on disk is what the page shows, refreshed by polling the hub every 2 s.

    The test holds the device (``hold_device``): in the full suite an earlier test has started the session's
    beat, whose reconcile found this ``running`` row held by no worker and "recovered" it (interrupted, then
    queued again) within 5 s; the page then stopped polling for previews, and the second one never showed.
    """
    import io

    from PIL import Image

    from devices.models import Device
    from jobs.files.previews import keep_preview

    def png(width: int) -> bytes:
        buf = io.BytesIO()
        Image.new("RGB", (width, 40), "teal").save(buf, format="PNG")
        return buf.getvalue()

    Device.objects.filter(pk=device.pk).update(kind="tensorsharp")
    device.refresh_from_db()
    job = make_job(member, device, kind="image", state="running", prompt="make it snow")
    hold_device(device, job)
    keep_preview(job, png(64))
    page = signed_in_page(member)
    problems: list[str] = []
    page.on(
        "console", lambda m: problems.append(f"console {m.type}: {m.text}") if m.type == "error" else None
    )
    page.on("pageerror", lambda e: problems.append(f"page error: {e}"))
    try:
        page.goto(f"/jobs/{job.pk}/")
        img = f"job-{job.pk}-preview-img"
        width, first = page.wait_for_function(PREVIEW, arg=[img, None], timeout=30000).json_value()
        assert width == 64
        keep_preview(job, png(96))  # the next step's preview
        _, second = page.wait_for_function(PREVIEW, arg=[img, 96], timeout=30000).json_value()
        assert second != first  # a new cache-busting version
        save_screenshot(page, "job-live-preview")
        assert problems == []
        job.refresh_from_db()
        assert job.state == "running"  # nothing in the background touched it
    finally:
        shutil.rmtree(
            Path(settings.MEDIA_ROOT) / "results" / str(member.pk) / str(job.pk), ignore_errors=True
        )

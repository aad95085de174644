"""Seeking a result video in Chromium: the file view must answer byte ranges, or the scrub bar does nothing.

The MP4 is a real one from the emulator's media generator (H.264 + AAC, +faststart), 4 s long, placed where
the live ASGI server reads results (``settings.MEDIA_ROOT`` is shared with it through ``HUB_DATA_DIR``).
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from django.conf import settings

from conftest import save_screenshot
from devices.emulator.media import video_mp4
from jobs.tests.ui_fixtures import add_artifact, device, make_job  # noqa: F401 - device is a fixture

pytestmark = [pytest.mark.browser, pytest.mark.integration, pytest.mark.django_db(transaction=True)]

SEEK = """async (id) => {
  const v = document.getElementById(id);
  if (v.readyState < 1) await new Promise((ok) => v.addEventListener('loadedmetadata', ok, {once: true}));
  const seeked = new Promise((ok) => v.addEventListener('seeked', ok, {once: true}));
  v.currentTime = 1.2;
  await seeked;
  const ends = Array.from({length: v.seekable.length}, (_, i) => v.seekable.end(i));
  return {current: v.currentTime, duration: v.duration, seekable: ends};
}"""

RANGED_FETCH = """async (url) => {
  const r = await fetch(url, {headers: {Range: 'bytes=100-199'}});
  const body = await r.arrayBuffer();
  return {status: r.status, range: r.headers.get('Content-Range'), accept: r.headers.get('Accept-Ranges'),
          length: body.byteLength};
}"""


@pytest.fixture
def real_mp4_job(member, device):  # noqa: F811 - the device fixture from ui_fixtures
    job = make_job(member, device, state="done", prompt="a kite over the dunes at sunset")
    source = video_mp4(prompt=job.prompt, seconds=4, width=320, height=192, fps=24)
    art = add_artifact(job, Path(settings.MEDIA_ROOT), data=source.read_bytes())
    yield job, art
    shutil.rmtree(Path(settings.MEDIA_ROOT) / "results" / str(member.pk) / str(job.pk), ignore_errors=True)


def test_a_result_video_seeks_to_where_it_is_asked(signed_in_page, member, real_mp4_job):
    job, art = real_mp4_job
    page = signed_in_page(member)
    page.goto(f"/jobs/{job.pk}/")
    page.wait_for_function("() => document.body.dataset.live === 'open'", timeout=15000)
    state = page.evaluate(SEEK, f"job-{job.pk}-video")
    assert abs(state["current"] - 1.2) < 0.1, state
    assert state["duration"] >= 3.5, state
    assert state["seekable"] and max(state["seekable"]) >= 2.0, (
        state
    )  # the whole file, not the buffered start
    url = f"/jobs/{job.pk}/files/{art.pk}/"
    ranged = page.evaluate(RANGED_FETCH, url)
    assert ranged == {
        "status": 206,
        "range": f"bytes 100-199/{art.bytes}",
        "accept": "bytes",
        "length": 100,
    }
    save_screenshot(page, "job-video-seeked")

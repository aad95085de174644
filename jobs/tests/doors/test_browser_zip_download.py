"""Downloading a selection in Chromium, keyboard only: tick two gallery cards with the space bar, press "Download
selected", and the browser saves one zip whose files are the results byte for byte; with nothing ticked the gallery
says so. "Download all" shows its count once the page is up. Against the live hub (ASGI), whose MEDIA_ROOT is shared
with this test through ``HUB_DATA_DIR``."""

from __future__ import annotations

import io
import shutil
import zipfile
from pathlib import Path

import pytest
from django.conf import settings

from jobs.tests.doors.test_browser_jobs import off_loop
from jobs.tests.ui_fixtures import add_artifact, device, make_job  # noqa: F401 - device is a fixture

pytestmark = [pytest.mark.browser, pytest.mark.integration, pytest.mark.django_db(transaction=True)]

FOX = bytes(i * 13 % 251 for i in range(150_000))
OWL = b"\x89PNG\r\n\x1a\n" + bytes(range(256)) * 20


@pytest.fixture
def three_results(member, device):  # noqa: F811 - the device fixture from ui_fixtures
    media = Path(settings.MEDIA_ROOT)

    def make():
        fox = make_job(member, device, state="done", prompt="a fox in the snow")
        add_artifact(fox, media, data=FOX)
        owl = make_job(member, device, state="done", kind="image", prompt="an owl at dusk")
        add_artifact(owl, media, kind="image", name="image-1.png", mime="image/png", data=OWL)
        left = make_job(member, device, state="done", prompt="not this one")
        add_artifact(left, media, data=b"left out")
        return fox, owl, left

    jobs = off_loop(make)
    yield jobs
    for job in jobs:
        shutil.rmtree(media / "results" / str(member.pk) / str(job.pk), ignore_errors=True)


def test_a_selection_downloads_as_one_zip_from_the_keyboard(signed_in_page, member, three_results):
    fox, owl, left = three_results
    page = signed_in_page(member)
    problems: list[str] = []
    page.on("pageerror", lambda exc: problems.append(str(exc)))
    page.goto("/jobs/")
    page.wait_for_selector("#download-all:has-text('3 files')")  # counted after the page came up

    for job in (fox, owl):
        page.focus(f"#select-{job.pk}")
        page.keyboard.press("Space")
        assert page.is_checked(f"#select-{job.pk}")
    assert not page.is_checked(f"#select-{left.pk}")
    page.focus("#download-selected")
    with page.expect_download() as info:
        page.keyboard.press("Enter")
    download = info.value
    assert download.suggested_filename.startswith(
        "tiiny-hub-selection-"
    ) and download.suggested_filename.endswith(".zip")
    archive = zipfile.ZipFile(io.BytesIO(Path(download.path()).read_bytes()))
    assert archive.read(f"{fox.pk:04d}-a-fox-in-the-snow/video.mp4") == FOX
    assert archive.read(f"{owl.pk:04d}-an-owl-at-dusk/image-1.png") == OWL
    assert not any(name.startswith(f"{left.pk:04d}-") for name in archive.namelist())
    assert problems == [], problems


def test_nothing_ticked_says_so_on_the_gallery(signed_in_page, member, three_results):
    page = signed_in_page(member)
    page.goto("/jobs/")
    page.focus("#download-selected")
    with page.expect_navigation():
        page.keyboard.press("Enter")
    assert "Nothing selected: tick the jobs to download first." in page.inner_text(".messages")

"""Delete and restore in Chromium: the job page's "Move to the trash…", its confirmation, the Trash page's card
(thumbnail, days left) and "Restore"; the restored file downloads byte for byte as before. Against the live hub."""

from __future__ import annotations

import hashlib
import shutil
from pathlib import Path

import pytest
from django.conf import settings

from conftest import save_screenshot
from jobs.tests.doors.test_browser_jobs import off_loop
from jobs.tests.ui_fixtures import PNG, add_artifact, make_job

pytestmark = [pytest.mark.browser, pytest.mark.integration, pytest.mark.django_db(transaction=True)]

DATA = bytes(i * 11 % 251 for i in range(120_000))


def _job_with_files(member, device, media):
    job = make_job(member, device, state="done", prompt="a heron at dawn")
    video = add_artifact(job, media, data=DATA)
    add_artifact(job, media, kind="thumb", name="thumb.png", mime="image/png", data=PNG)
    return job, video


def test_delete_then_restore_gives_the_result_back_byte_for_byte(signed_in_page, member, device):
    # The live hub is another process: its files are under the session's MEDIA_ROOT, not a test's own folder.
    job, video = off_loop(_job_with_files, member, device, settings.MEDIA_ROOT)
    try:
        _delete_and_restore(signed_in_page, member, job, video)
    finally:  # job ids repeat from test to test: leave no file for the next one's job of the same id
        shutil.rmtree(
            Path(settings.MEDIA_ROOT) / "results" / str(member.pk) / str(job.pk), ignore_errors=True
        )


def _delete_and_restore(signed_in_page, member, job, video) -> None:
    page = signed_in_page(member)
    problems: list[str] = []
    page.on("pageerror", lambda exc: problems.append(str(exc)))
    file_url = f"/jobs/{job.pk}/files/{video.pk}/"
    before = hashlib.sha256(page.request.get(file_url).body()).hexdigest()

    page.goto(f"/jobs/{job.pk}/")
    page.click("#job-delete")
    page.wait_for_selector("#results-delete-confirm")
    page.click("#results-delete-confirm")
    page.wait_for_url("**/jobs/")
    assert "a heron at dawn" not in page.content()
    assert page.request.get(file_url).status == 404  # hidden while in the trash

    page.goto("/jobs/trash/")
    card = page.locator(f"#trash-{job.pk}")
    card.wait_for()
    assert "30 days left" in card.inner_text()
    thumb = card.locator("img").get_attribute("src")
    assert (
        page.request.get(thumb).body() == PNG
    )  # the trash's own thumbnail route (its job is hidden elsewhere)
    save_screenshot(page, "trash")
    page.click(f"#trash-{job.pk}-restore")
    page.wait_for_selector("#trash-empty")

    after = hashlib.sha256(page.request.get(file_url).body()).hexdigest()
    assert after == before == hashlib.sha256(DATA).hexdigest()
    page.goto("/jobs/")
    assert "a heron at dawn" in page.content()
    assert problems == []

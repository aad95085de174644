"""The Usage page in Chromium on a phone: the chart and its numbers fit the screen, and results are deleted
through the confirmation page with the keyboard."""

from __future__ import annotations

import datetime as dt
import shutil
from pathlib import Path

import pytest
from django.conf import settings
from django.utils import timezone

from conftest import save_screenshot
from jobs.tests.ui_fixtures import add_artifact, make_job

pytestmark = [pytest.mark.browser, pytest.mark.integration, pytest.mark.django_db(transaction=True)]


def test_a_member_reads_the_chart_and_deletes_a_result_on_a_phone(signed_in_page, member, admin_user, device):
    from jobs.models import DeviceUse
    from jobs.quotas import services as quotas

    quotas.quota_set(by=admin_user, device_minutes_per_day=60, storage_mb=500)
    now = timezone.now()
    for days_ago, minutes in ((0, 12), (1, 30), (3, 7)):
        end = quotas.day_start(now) - dt.timedelta(days=days_ago) + dt.timedelta(hours=1, minutes=minutes)
        end = min(end, now)
        DeviceUse.objects.create(
            owner=member,
            device=device,
            started=end - dt.timedelta(minutes=minutes),
            ended=end,
            seconds=minutes * 60,
        )
    job = make_job(member, device, state="done", prompt="a fox on a phone")
    artifact = add_artifact(job, settings.MEDIA_ROOT, data=b"v" * 200_000)
    path = Path(settings.MEDIA_ROOT) / artifact.file.name

    try:
        _read_and_delete(signed_in_page, member, job, artifact, path)
    finally:  # job ids repeat from test to test: leave no file for the next one's job of the same id
        shutil.rmtree(
            Path(settings.MEDIA_ROOT) / "results" / str(member.pk) / str(job.pk), ignore_errors=True
        )


def _read_and_delete(signed_in_page, member, job, artifact, path) -> None:
    from jobs.models import Artifact

    page = signed_in_page(member, width=390, height=844)
    errors: list[str] = []
    page.on("console", lambda msg: errors.append(msg.text) if msg.type == "error" else None)
    page.on("pageerror", lambda exc: errors.append(str(exc)))
    page.goto("/usage/")
    page.wait_for_selector("#my-minutes svg")
    assert page.evaluate("document.documentElement.scrollWidth <= window.innerWidth")
    assert page.locator("#my-minutes rect").count() == 14
    page.click("#my-minutes summary")
    assert page.is_visible("#my-minutes-table")
    save_screenshot(page, "usage-phone")

    page.click(f"#result-{job.pk} >> text=Delete results…")
    page.wait_for_selector("#results-delete-confirm")
    assert Artifact.objects.filter(pk=artifact.pk).exists()  # only asked so far
    page.focus("#results-delete-confirm")
    page.keyboard.press("Enter")
    page.wait_for_url("**/usage/")
    page.wait_for_selector("#results-empty")
    # In the trash: the file is kept (a restore gives it back) and still counts, as the page says
    assert Artifact.objects.filter(pk=artifact.pk).exists() and path.exists()
    assert "in the trash" in page.inner_text("#my-trash")
    page.click("#my-trash a")
    page.wait_for_selector(f"#trash-{job.pk}")
    page.click(f"#trash-{job.pk}-purge")
    page.focus("#trash-purge-confirm")
    page.keyboard.press("Enter")
    page.wait_for_selector("#trash-empty")
    assert not Artifact.objects.filter(pk=artifact.pk).exists() and not path.exists()
    assert errors == []

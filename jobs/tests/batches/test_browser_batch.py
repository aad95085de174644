"""In Chromium: a batch of three prompts from the new-job form, counted in the summary and found as one group."""

from __future__ import annotations

import pytest

from conftest import save_screenshot
from jobs.tests.doors.test_browser_forms import ENABLED, IDLE, watch_console

pytestmark = [pytest.mark.browser, pytest.mark.integration, pytest.mark.django_db(transaction=True)]


def test_a_three_prompt_batch_from_the_form_is_one_group(signed_in_page, member, pocket):
    page = signed_in_page(member)
    problems = watch_console(page)
    page.goto(f"/jobs/new/?device={pocket.pk}&kind=video")
    page.wait_for_selector("#id_prompt", timeout=10000)
    page.check("input[name=batch_mode][value=lines]")
    page.fill("#id_prompt", "a red kite\na blue kite\na green kite")
    page.wait_for_selector("#admission-batch", timeout=15000)
    assert "3 jobs" in page.inner_text("#admission-batch")
    page.wait_for_function(ENABLED, timeout=10000)
    page.wait_for_function(IDLE, timeout=10000)
    page.click("#job-submit")
    page.wait_for_url("**/jobs/?batch=*", timeout=15000)
    group = page.inner_text(".batch-group")
    assert group.startswith("Batch of 3:"), group
    assert "Queued a batch of 3 jobs" in page.inner_text("body")
    assert page.locator(".batch-tag").count() == 3
    save_screenshot(page, "batch-group")
    page.wait_for_timeout(300)  # late console messages still count
    assert problems == [], problems

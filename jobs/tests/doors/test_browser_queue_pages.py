"""The queue page's list of the plan in Chromium: the pushed plan is the dashboard's glance (the first entries),
so the queue page takes it out of sight and asks for its own page again (``templates/jobs/queue.html``)."""

from __future__ import annotations

import pytest

from jobs.live.fragments import PLAN_SHOWN
from jobs.tests.doors.test_browser_jobs import LIVE, off_loop
from jobs.tests.live.test_browser_live import COUNT_HTMX_ERRORS
from jobs.tests.ui_fixtures import hold_device, make_job

pytestmark = [pytest.mark.browser, pytest.mark.integration, pytest.mark.django_db(transaction=True)]


def test_the_queue_pages_list_follows_a_pushed_plan_beyond_the_glance(signed_in_page, member, pocket):
    from jobs.queue.services import job_cancel

    hold_device(pocket)  # nothing starts: the test's cancel is the only change
    jobs = [make_job(member, pocket, prompt=f"heron number {i}") for i in range(PLAN_SHOWN + 2)]
    page = signed_in_page(member)
    page.add_init_script(COUNT_HTMX_ERRORS)
    page.goto("/jobs/queue/")
    page.wait_for_function(LIVE, timeout=15000)
    items = f"#device-{pocket.pk}-queue-page .plan-item"
    assert page.locator(items).count() == PLAN_SHOWN + 2
    # Off Playwright's loop, as a view runs it: in the test thread the after-commit push is refused, and the
    # page heard of the cancel only if a later push (the worker's replan) came within the wait.
    off_loop(job_cancel, job=jobs[0], by=member, reason="not tonight")
    page.wait_for_function(
        f"() => document.querySelectorAll('{items}').length === {PLAN_SHOWN + 1}", timeout=20000
    )
    assert page.locator(items).first.inner_text().count("heron number 1") == 1  # the next one, first now
    assert "more waiting" not in page.locator(f"#device-{pocket.pk}-queue-page").inner_text()
    assert not page.locator(f"#device-{pocket.pk}-queue").is_visible()  # the glance landed out of sight
    assert page.evaluate("window.__oob") == 0 and page.evaluate("window.__htmxErrors") == []

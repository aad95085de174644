"""Pushed times in Chromium show in the person's own zone, while the hub (and so every push) is in UTC.

A person in Asia/Tokyo, in a browser whose own clock is in America/Sao_Paulo (neither the hub's zone nor
theirs: the page's zone is the person's, <body data-tz>), watches pages while the worker side pushes fragments
rendered once for everyone in UTC. static/js/localtime.js must turn each pushed <time> into Tokyo time, in the
very text a page load in Tokyo shows.
"""

from __future__ import annotations

import datetime as dt
from zoneinfo import ZoneInfo

import pytest
from django.template import Context, Template
from django.utils import timezone

from conftest import PASSWORD, save_screenshot
from hub.accounts.services import user_update_settings
from jobs.tests.doors.test_browser_jobs import LIVE, off_loop
from jobs.tests.ui_fixtures import hold_device, make_job

pytestmark = [pytest.mark.browser, pytest.mark.integration, pytest.mark.django_db(transaction=True)]

TOKYO = ZoneInfo("Asia/Tokyo")
#: Every format the templates give ``|when`` (grep 'when:' templates/).
FORMATS = ["H:i", "H:i:s", "D H:i", "D j M, H:i", "j M, H:i", "D j M, H:i:s", "j M Y", "D j M Y, H:i"]


@pytest.fixture
def tokyo_page(browser, live_server_asgi, member):
    user_update_settings(user=member, display_name="", email="", time_zone="Asia/Tokyo")
    context = browser.new_context(
        viewport={"width": 1280, "height": 900},
        base_url=live_server_asgi.extra["url"],
        timezone_id="America/Sao_Paulo",
    )
    page = context.new_page()
    errors: list[str] = []
    page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
    page.on("pageerror", lambda e: errors.append(str(e)))
    page.goto("/accounts/login/")
    assert page.evaluate("() => document.body.dataset.tz") == "UTC"  # signed out: the hub's zone
    page.fill("#id_username", member.username)
    page.fill("#id_password", PASSWORD)
    page.click("button[type=submit]")
    page.wait_for_url("**/")
    yield page
    context.close()
    assert not errors, errors


def _server(at: dt.datetime, fmt: str, zone) -> str:
    with timezone.override(zone):
        return Template("{% load hub_time %}{{ at|when:fmt }}").render(Context({"at": at, "fmt": fmt}))


def test_a_pushed_event_time_shows_in_tokyo_time(tokyo_page, member, device):
    from jobs.core.transitions import job_note
    from jobs.models import JobEvent

    job = make_job(member, device, state="running", prompt="a crane over the bay")
    hold_device(device)
    page = tokyo_page
    page.goto(f"/jobs/{job.pk}/")
    assert page.evaluate("() => document.body.dataset.tz") == "Asia/Tokyo"
    page.wait_for_function(LIVE, timeout=15000)
    off_loop(job_note, job.pk, "The crane takes off.")
    item = page.locator(f"#job-{job.pk}-events li", has_text="The crane takes off.")
    item.wait_for(timeout=15000)
    at = JobEvent.objects.get(job=job, message="The crane takes off.").at
    shown = item.locator("time")
    assert shown.get_attribute("datetime") == at.astimezone(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    assert shown.inner_text() == at.astimezone(TOKYO).strftime("%H:%M:%S")  # not UTC's, 9 hours behind
    assert shown.get_attribute("data-tz") == "Asia/Tokyo"
    # and a reload (the server's own rendering in Tokyo) reads the same
    page.reload()
    again = page.locator(f"#job-{job.pk}-events li", has_text="The crane takes off.").locator("time")
    assert again.inner_text() == at.astimezone(TOKYO).strftime("%H:%M:%S")


def test_a_pushed_job_row_shows_its_tokyo_date_the_day_after_the_hub_s(tokyo_page, member, device):
    from jobs.core.transitions import job_note
    from jobs.models import Job

    job = make_job(member, device, state="running", prompt="a late-night render")
    created = dt.datetime(2026, 11, 29, 22, 30, tzinfo=dt.UTC)  # Sunday night in UTC, Monday morning in Tokyo
    Job.objects.filter(pk=job.pk).update(created=created, progress=10)
    hold_device(device)
    page = tokyo_page
    page.goto("/")
    page.wait_for_function(LIVE, timeout=15000)
    meta = page.locator(f"#job-{job.pk}-row .job-row-meta time")
    assert meta.inner_text() == "Mon 30 Nov, 07:30"  # the page load, rendered in Tokyo
    off_loop(job_note, job.pk, "Halfway.", progress=55)
    page.locator(f"#job-{job.pk}-row .state-pill", has_text="55%").wait_for(timeout=15000)  # the push landed
    assert meta.get_attribute("datetime") == "2026-11-29T22:30Z"
    assert meta.inner_text() == "Mon 30 Nov, 07:30"  # the push said "Sun 29 Nov, 22:30" (UTC)
    save_screenshot(page, "localtime-tokyo-dashboard")


def test_the_browser_writes_every_format_as_the_server_does_in_any_zone(tokyo_page):
    """localtime.js against Django's own formatting, for every format the templates use, at instants around
    midnight, a year's end and DST changes, in zones with half-hour, 45-minute and DST offsets."""
    instants = [
        dt.datetime(2026, 12, 31, 23, 59, 59, tzinfo=dt.UTC),
        dt.datetime(2026, 3, 8, 6, 59, 30, tzinfo=dt.UTC),  # New York: just before the spring change
        dt.datetime(2026, 3, 8, 7, 0, 0, tzinfo=dt.UTC),
        dt.datetime(2026, 11, 1, 5, 30, 0, tzinfo=dt.UTC),  # New York: the repeated hour
        dt.datetime(2026, 11, 1, 6, 30, 0, tzinfo=dt.UTC),
        dt.datetime(2026, 4, 4, 15, 0, 5, tzinfo=dt.UTC),  # Lord Howe: half an hour back
        dt.datetime(2026, 5, 9, 0, 0, 0, tzinfo=dt.UTC),
        dt.datetime(2026, 9, 13, 14, 45, 0, tzinfo=dt.UTC),
    ]
    zones = [
        "Asia/Tokyo",
        "America/New_York",
        "Australia/Lord_Howe",
        "Asia/Kathmandu",
        "Pacific/Kiritimati",
        "UTC",
    ]
    pushed = "".join(_server(at, fmt, dt.UTC) for at in instants for fmt in FORMATS)  # as a push carries them
    page = tokyo_page
    for zone in zones:
        shown = page.evaluate(
            """([zone, html]) => {
                document.body.setAttribute('data-tz', zone);
                const box = document.createElement('div');
                box.innerHTML = html;
                document.getElementById('main').appendChild(box);
                document.dispatchEvent(new Event('htmx:wsAfterMessage'));
                const out = Array.from(box.querySelectorAll('time')).map((t) => t.textContent);
                box.remove();
                return out;
            }""",
            [zone, pushed],
        )
        expected = [_text(at, fmt, zone) for at in instants for fmt in FORMATS]
        assert shown == expected, zone


def _text(at: dt.datetime, fmt: str, zone: str) -> str:
    from django.utils.dateformat import format as django_format

    return django_format(at.astimezone(ZoneInfo(zone)), fmt)

"""A read-only link with a password, in Chromium: the owner sets it on the job page (htmx, the box redrawn with the
link's facts), a signed-out browser is asked for it (a real CSRF-checked form), a wrong one is refused, the right
one shows the result and its file, and the owner's box counts the open."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from django.conf import settings

from jobs.models import Job
from jobs.tests.doors.test_browser_jobs import off_loop
from jobs.tests.ui_fixtures import add_artifact, device, make_job  # noqa: F401 - device is a fixture

pytestmark = [pytest.mark.browser, pytest.mark.integration, pytest.mark.django_db(transaction=True)]


@pytest.fixture
def fox(member, device):  # noqa: F811 - the device fixture from ui_fixtures
    def make():
        job = make_job(member, device, state="done", prompt="a fox for the neighbours")
        add_artifact(job, Path(settings.MEDIA_ROOT), data=b"fox bytes")
        return job

    job = off_loop(make)
    yield job
    shutil.rmtree(Path(settings.MEDIA_ROOT) / "results" / str(member.pk) / str(job.pk), ignore_errors=True)


def test_a_password_on_the_link_is_asked_for_then_opens_it(signed_in_page, browser, member, fox):
    page = signed_in_page(member)
    page.goto(f"/jobs/{fox.pk}/")
    page.click("#share-create")
    page.wait_for_selector("#share-facts")
    assert "no password" in page.inner_text("#share-facts")
    page.click(".share-options summary")
    page.fill("#share-password", "open sesame")
    page.select_option("#share-expires", "7")
    page.click("#share-options-save")
    page.wait_for_function(
        "() => document.getElementById('share-facts')?.innerText.includes('needs a password')"
    )
    assert "expires" in page.inner_text("#share-facts")
    link = page.input_value("#share-url")
    job = off_loop(lambda: Job.objects.get(pk=fox.pk))
    assert job.share_password and "open sesame" not in job.share_password

    stranger = browser.new_context()  # signed out, a browser of its own
    try:
        visit = stranger.new_page()
        visit.goto(link)
        assert "This link needs a password" in visit.inner_text("h1")
        assert "a fox for the neighbours" not in visit.content()
        visit.fill("#link-password", "a guess")
        visit.click("#share-password-form button[type=submit]")
        visit.wait_for_selector("#share-password-error")
        assert "not the password" in visit.inner_text("#share-password-error")
        visit.fill("#link-password", "open sesame")
        visit.click("#share-password-form button[type=submit]")
        visit.wait_for_selector("text=a fox for the neighbours")
        art = off_loop(lambda: job.artifacts.get())
        fetched = visit.evaluate(
            "async (url) => { const r = await fetch(url); return [r.status, await r.text()]; }",
            f"{link}files/{art.pk}/",
        )
        assert fetched == [200, "fox bytes"]
    finally:
        stranger.close()

    page.reload()
    assert "Opened 1 time" in page.inner_text("#share-facts")

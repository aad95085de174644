"""Three people share an album in Chromium: mia makes it and invites otto (contributor) and vic (viewer); otto adds
his private result from its page; vic, whose album page was open, is told live ("New results were added by otto.
Show them": the notice comes over the page's websocket, the results themselves through the page's own access check)
and sees it marked "New since your last visit", its thumbnail and its page open to him; sam, a stranger, gets 404
for the album and the result. On a phone's width too."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from django.conf import settings

from conftest import save_screenshot
from jobs.tests.albums.conftest import finished
from jobs.tests.doors.test_browser_jobs import off_loop

pytestmark = [pytest.mark.browser, pytest.mark.integration, pytest.mark.django_db(transaction=True)]

NO_SIDE_SCROLL = "() => document.documentElement.scrollWidth <= window.innerWidth"
THUMB_LOADED = "(sel) => { const img = document.querySelector(sel); return img && img.complete; }"


@pytest.fixture
def sunset(other_member, device):
    job = off_loop(finished, other_member, device, Path(settings.MEDIA_ROOT), prompt="otto's private sunset")
    yield job
    shutil.rmtree(
        Path(settings.MEDIA_ROOT) / "results" / str(other_member.pk) / str(job.pk), ignore_errors=True
    )


def test_three_people_share_an_album(signed_in_page, member, other_member, viewer, stranger, sunset):
    problems: list[str] = []
    mia = signed_in_page(member)
    mia.on("pageerror", lambda exc: problems.append(str(exc)))
    mia.goto("/jobs/albums/")
    mia.wait_for_selector("#albums-mine-empty")
    mia.fill("#album-name", "Summer")
    mia.click("#album-create")
    mia.wait_for_selector("#album-empty")
    album_url = mia.url
    for username, role in (("otto", "contributor"), ("vic", "viewer")):
        mia.fill("#invite-user", username)
        mia.select_option("#invite-role", role)
        mia.click("#album-invite-submit")
        mia.wait_for_selector(f"#album-member-{username}")

    vic = signed_in_page(viewer, width=390, height=844)  # a phone
    vic.on("pageerror", lambda exc: problems.append(str(exc)))
    vic.goto(album_url)
    vic.wait_for_selector("#album-empty")
    vic.evaluate("() => { window.__marker = 'same-page'; }")

    otto = signed_in_page(other_member)
    otto.on("pageerror", lambda exc: problems.append(str(exc)))
    otto.goto(f"/jobs/{sunset.pk}/")
    otto.click("#job-album-add")
    otto.select_option("#add-album", label="Summer (mia's)")
    otto.click("#album-add-submit")
    otto.wait_for_url(f"**/jobs/{sunset.pk}/")
    assert "Added to the album" in otto.content()

    vic.wait_for_selector("#album-news-show", timeout=15000)  # live, over the page's websocket
    assert "by otto" in vic.text_content(".album-news")
    assert vic.evaluate("() => window.__marker") == "same-page"
    vic.click("#album-news-show")
    card = f"#job-{sunset.pk}-card"
    vic.wait_for_selector(card)
    assert vic.is_visible(f"#album-item-{sunset.pk} .album-new-mark")
    vic.wait_for_function(THUMB_LOADED, arg=f"{card} img")
    assert (
        vic.evaluate(f"() => document.querySelector('{card} img').naturalWidth") > 0
    )  # its file reaches vic
    assert vic.evaluate(NO_SIDE_SCROLL)
    save_screenshot(vic, "album-phone")
    vic.click(f"{card} .job-card-title")
    vic.wait_for_url(f"**/jobs/{sunset.pk}/")
    assert "otto's private sunset" in vic.content()

    sam = signed_in_page(stranger)
    assert sam.goto(album_url).status == 404
    assert sam.goto(f"/jobs/{sunset.pk}/").status == 404
    thumb = sunset.artifacts.get(kind="thumb")
    assert sam.goto(f"/jobs/{sunset.pk}/files/{thumb.pk}/").status == 404
    assert problems == []

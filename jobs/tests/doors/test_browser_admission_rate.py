"""In Chromium: a summary asked for too often (HUB_PREVIEW_RATE) shows that it is paused, and the page asks again by
itself once it may (hub.js), with nothing typed lost.

Its own web server, with the limit on (the test run turns it off). The person's counters are filled from here for
the next minute, so every summary is refused until the test empties them: what the page shows does not hang on
when a second starts.
"""

from __future__ import annotations

import math
import time

import pytest
from django.core.cache import cache

from conftest import PASSWORD
from hub.testing import sign_in_page, start_asgi_server
from jobs.tests.ui_fixtures import device  # noqa: F401 - a fixture

pytestmark = [pytest.mark.browser, pytest.mark.integration, pytest.mark.django_db(transaction=True)]

PAUSED = "() => document.getElementById('admission').innerText.includes('Summary paused')"
SUMMED = "() => document.getElementById('admission').innerText.includes('≈')"


@pytest.fixture(scope="module")
def limited_server(django_db_setup, django_db_blocker):
    with django_db_blocker.unblock():
        proc = start_asgi_server(workers=1, HUB_PREVIEW_RATE="1/s")
    yield proc.extra["url"]
    proc.stop()


def _fill_counters(user_pk: int, seconds: int = 60) -> list[str]:
    """The person's 1-second windows from now on, each already at the limit (hub.ratelimit's keys)."""
    now = math.floor(time.time())
    keys = [f"ratelimit:preview:user:{user_pk}:1:{window}" for window in range(now - 1, now + seconds)]
    cache.set_many(dict.fromkeys(keys, 99), timeout=seconds + 5)
    return keys


def test_a_paused_summary_says_so_and_comes_back_by_itself(browser, limited_server, member, device):  # noqa: F811
    context = browser.new_context(base_url=limited_server)
    try:
        page = context.new_page()
        sign_in_page(page, member.username, PASSWORD)
        keys = _fill_counters(member.pk)
        page.goto(f"/jobs/new/?device={device.pk}&kind=video")
        page.fill("#id_prompt", "a heron at dawn")
        page.wait_for_function(PAUSED, timeout=15000)
        assert "comes back in 1 s" in page.inner_text("#admission")
        cache.delete_many(keys)
        page.wait_for_function(SUMMED, timeout=15000)  # asked again, unprompted
        assert page.input_value("#id_prompt") == "a heron at dawn"
    finally:
        context.close()

"""Pages kept for the browser that asked (hub.pagecache): served again only to that browser, only while nothing
changed and for a few seconds; every change through the web or the engine draws them again."""

from __future__ import annotations

import re
import time

import pytest
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext

from hub import pagecache
from jobs.tests.ui_fixtures import make_job

pytestmark = pytest.mark.django_db

PAGES = ["/", "/jobs/queue/", "/jobs/"]


@pytest.fixture(autouse=True)
def _kept(settings):
    settings.HUB_PAGE_CACHE_S = 60.0  # the tests decide when time passes
    pagecache.forget_all()
    pagecache.changed()
    yield
    pagecache.forget_all()


def _get(client: Client, path: str) -> tuple[str, int]:
    """The page and how many queries drawing it took."""
    with CaptureQueriesContext(connection) as ctx:
        resp = client.get(path)
    assert resp.status_code == 200
    return resp.content.decode(), len(ctx.captured_queries)


def _signed_in(user) -> Client:
    client = Client()
    client.force_login(user)
    client.get(
        "/accounts/settings/"
    )  # any page: the browser now holds its CSRF cookie, as after its first page
    return client


@pytest.mark.parametrize("path", PAGES)
def test_the_same_browser_gets_the_same_page_without_it_being_drawn_again(path, member, device):
    client = _signed_in(member)
    first, drawn = _get(client, path)
    again, served = _get(client, path)
    assert again == first
    assert served < drawn
    assert served <= 2  # the session and the person; nothing of the page itself


@pytest.mark.parametrize("path", PAGES)
def test_a_page_is_never_served_to_another_person_or_another_browser(path, member, other_member, device):
    make_job(member, device, prompt="my secret lantern")  # private: its prompt is the member's alone
    mine = _signed_in(member)
    theirs = _signed_in(other_member)
    second_browser = _signed_in(member)
    page, _ = _get(mine, path)
    _get(mine, path)  # kept now
    other_page, drawn = _get(theirs, path)
    assert f'data-user="{other_member.pk}"' in other_page and f'data-user="{member.pk}"' not in other_page
    assert "my secret lantern" not in other_page
    assert drawn > 2
    _page, drawn = _get(second_browser, path)
    assert drawn > 2  # the same person in another browser: drawn for it (its own CSRF cookie)


def test_any_change_through_the_web_draws_every_kept_page_again(member, other_member, device):
    client = _signed_in(member)
    assert "a quiet violin" not in _get(client, "/")[0]
    make_job(member, device, prompt="a quiet violin")  # written behind the hub's back: no change is known
    assert "a quiet violin" not in _get(client, "/")[0]  # so the kept page is what the browser gets
    job = make_job(other_member, device, state="done", prompt="a bright city")
    resp = _signed_in(other_member).post(f"/jobs/{job.pk}/bookmark/")  # someone else's POST, anything at all
    assert resp.status_code in (200, 204, 302)
    page, drawn = _get(client, "/")
    assert "a quiet violin" in page and drawn > 2


def test_the_engines_changes_draw_the_pages_again(member, device, django_capture_on_commit_callbacks):
    from jobs.core.transitions import job_transition

    job = make_job(member, device, state="queued", prompt="a copper kettle")
    client = _signed_in(member)
    page, _ = _get(client, f"/jobs/?person={member.username}")
    assert "state-queued" in page and "state-done" not in page
    _get(client, f"/jobs/?person={member.username}")  # kept now
    with django_capture_on_commit_callbacks(execute=True):
        job_transition(job.pk, from_states=["queued"], to="done", message="done", finished_at=job.created)
    page, drawn = _get(client, f"/jobs/?person={member.username}")
    assert "state-done" in page and "state-queued" not in page and drawn > 2


def test_a_device_changing_state_draws_the_pages_again(member, device, django_capture_on_commit_callbacks):
    from devices.services import device_set_state

    client = _signed_in(member)
    _get(client, "/jobs/queue/")
    _page, served = _get(client, "/jobs/queue/")
    assert served <= 2
    with django_capture_on_commit_callbacks(execute=True):
        assert device_set_state(device_id=device.pk, state="offline", message="unreachable")
    _page, drawn = _get(client, "/jobs/queue/")
    assert drawn > 2


def test_a_page_is_kept_only_a_few_seconds(settings, member, device):
    settings.HUB_PAGE_CACHE_S = 0.2
    client = _signed_in(member)
    _get(client, "/")
    assert _get(client, "/")[1] <= 2
    time.sleep(0.25)
    assert _get(client, "/")[1] > 2


def test_with_no_time_to_keep_nothing_is_kept(settings, member, device):
    settings.HUB_PAGE_CACHE_S = 0
    client = _signed_in(member)
    _get(client, "/")
    assert _get(client, "/")[1] > 2


def test_a_message_is_shown_once_and_never_kept(member, device):
    job = make_job(member, device, state="queued", prompt="a paper boat")
    client = _signed_in(member)
    _get(client, "/")
    _get(client, "/")  # kept
    resp = client.post(f"/jobs/{job.pk}/cancel/", {"next": "/"})
    assert resp.status_code == 302 and resp["Location"] == "/"
    page, _ = _get(client, "/")
    assert "Cancelled." in page
    page, _ = _get(client, "/")
    assert "Cancelled." not in page  # once only
    page2, served = _get(client, "/")
    assert page2 == page and served <= 2  # kept again, without it


def test_htmx_requests_are_always_drawn(member, device):
    client = _signed_in(member)
    for _ in range(2):
        with CaptureQueriesContext(connection) as ctx:
            resp = client.get("/jobs/", headers={"HX-Request": "true"})
        assert resp.status_code == 200 and len(ctx.captured_queries) > 2


def test_without_redis_pages_are_drawn_and_nothing_is_kept(monkeypatch, member, device):
    client = _signed_in(member)
    _get(client, "/jobs/")

    def down(*_a, **_kw):
        raise ConnectionError("redis down")

    monkeypatch.setattr(pagecache.cache, "get", down)
    monkeypatch.setattr(pagecache.cache, "set", down)
    assert _get(client, "/jobs/")[1] > 2
    assert _get(client, "/jobs/")[1] > 2


def test_a_kept_pages_forms_are_accepted(member, device):
    job = make_job(member, device, state="queued", prompt="a glass harp")
    client = Client(enforce_csrf_checks=True)
    client.force_login(member)
    client.get("/jobs/queue/")
    _get(client, "/jobs/queue/")
    page, served = _get(client, "/jobs/queue/")
    assert served <= 2
    token = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', page).group(1)
    resp = client.post(f"/jobs/{job.pk}/cancel/", {"csrfmiddlewaretoken": token})
    assert resp.status_code == 302
    job.refresh_from_db()
    assert job.state == "cancelled"

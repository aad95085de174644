"""``{% kept %}`` (hub.templatetags.hub_kept): a partial drawn once per value, then reused with the page's CSRF
token; the gallery's cards are drawn this way (jobs.doors.filters.GalleryCard)."""

from __future__ import annotations

import dataclasses
import re

import pytest
from django.template.loader import get_template
from django.test import Client
from django.utils import timezone

from hub.templatetags import hub_kept
from jobs.doors.filters import GalleryCard
from jobs.models import Bookmark
from jobs.tests.ui_fixtures import make_job

pytestmark = pytest.mark.django_db
CARD = "jobs/_fragments.html#job-card"
TOKENS = re.compile(r'name="csrfmiddlewaretoken" value="([^"]*)"')


def card(**fields) -> GalleryCard:
    base = {
        "pk": 7,
        "state": "done",
        "state_label": "Done",
        "kind": "video",
        "kind_label": "Video",
        "is_final": True,
        "owner_id": 3,
        "owner": "mia",
        "created": timezone.now().replace(second=0, microsecond=0),
        "shared": True,
        "title": "a lighthouse <at> dusk",
    }
    return GalleryCard(**(base | fields))


def test_it_draws_what_the_partial_draws_with_the_pages_token():
    c = card()
    plain = get_template(CARD).render({"c": c, "csrf_token": "tok3n"})
    assert hub_kept.draw_kept(CARD, c, "tok3n") == plain
    assert TOKENS.findall(plain) == ["tok3n"] and "a lighthouse &lt;at&gt; dusk" in plain


def test_each_value_is_drawn_once_and_a_change_draws_it_again():
    hub_kept._drawn.cache_clear()
    c = card()
    first = hub_kept.draw_kept(CARD, c, "a")
    assert hub_kept.draw_kept(CARD, dataclasses.replace(c), "b") == first.replace('value="a"', 'value="b"')
    assert hub_kept._drawn.cache_info().misses == 1
    marked = hub_kept.draw_kept(CARD, dataclasses.replace(c, bookmarked=True), "a")
    assert "Bookmarked" in marked and "Bookmarked" not in first
    assert hub_kept._drawn.cache_info().misses == 2


def test_the_time_zone_is_part_of_the_key():
    c = card(created=timezone.now().replace(hour=12, minute=0, second=0, microsecond=0))
    with timezone.override("UTC"):
        utc = hub_kept.draw_kept(CARD, c, "t")
    with timezone.override("Asia/Tokyo"):
        tokyo = hub_kept.draw_kept(CARD, c, "t")
    assert "12:00" in utc and "21:00" in tokyo


def test_no_stand_in_is_left_and_a_prompt_cannot_carry_the_token():
    c = card(title="csrf csrfmiddlewaretoken value")
    html = hub_kept.draw_kept(CARD, c, "secret")
    assert hub_kept.CSRF_STAND_IN not in html and TOKENS.findall(html) == ["secret"]
    assert "csrf csrfmiddlewaretoken value" in html
    # No token (a push, drawn without a request): no token field, as Django's tag draws none.
    assert hub_kept.draw_kept(CARD, c, "") == get_template(CARD).render({"c": c})
    assert TOKENS.findall(get_template(CARD).render({"c": c})) == []


def test_each_person_gets_their_own_token_and_it_works(member, other_member, device):
    job = make_job(member, device, state="done", prompt="a shared fox", shared=True)
    tokens = []
    for person in (member, other_member):
        client = Client(enforce_csrf_checks=True)
        client.force_login(person)
        html = client.get("/jobs/").content.decode()
        assert f'id="job-{job.pk}-card"' in html
        page_tokens = set(TOKENS.findall(html))
        assert len(page_tokens) == 1  # the cards carry the page's token, not one drawn for someone else
        token = page_tokens.pop()
        tokens.append(token)
        response = client.post(f"/jobs/{job.pk}/bookmark/", {"csrfmiddlewaretoken": token})
        assert response.status_code == 302  # accepted: the token is this session's
        assert Bookmark.objects.filter(user=person, job=job).exists()
    assert tokens[0] != tokens[1]


def test_a_plan_entry_drawn_for_one_person_is_never_shown_to_another(member, other_member, device):
    from jobs.queue.eta import store_plan

    hub_kept._drawn.cache_clear()
    private = make_job(member, device, prompt="my secret birthday song", kind="music")
    store_plan(device.pk)
    pages = {}
    for person in (member, other_member, member, other_member):  # each drawn, then reused, in turn
        client = Client()
        client.force_login(person)
        for url in ("/", "/jobs/queue/"):
            html = client.get(url).content.decode()
            assert f'id="plan-{private.pk}"' in html or f'id="page-plan-{private.pk}"' in html
            pages.setdefault(person.username, []).append(html)
    assert all("my secret birthday song" in html for html in pages[member.username])
    assert not any("my secret birthday song" in html for html in pages[other_member.username])
    assert all(f"Music by {member}" in html for html in pages[other_member.username])
    assert hub_kept._drawn.cache_info().hits  # the second round was drawn from what was kept


def test_the_admins_controls_carry_each_admins_own_token_and_page(admin_user, device, member):
    from jobs.live.fragments import QUEUE_PAGE_SIZE
    from jobs.queue.eta import store_plan

    jobs = [make_job(member, device, kind="image", prompt=f"picture {i}") for i in range(QUEUE_PAGE_SIZE + 2)]
    store_plan(device.pk)
    client = Client(enforce_csrf_checks=True)
    client.force_login(admin_user)
    for page in (1, 2, 1):  # drawn, then the same rows again from what was kept
        html = client.get(f"/jobs/queue/?device={device.pk}&page={page}").content.decode()
        tokens = set(TOKENS.findall(html))
        assert len(tokens) == 1
        assert ('name="page" value="2"' in html) == (page == 2)  # each row's forms send their page back
    token = tokens.pop()
    last = jobs[-1]
    assert client.post(f"/jobs/{jobs[0].pk}/run-next/", {"csrfmiddlewaretoken": token}).status_code in (
        200,
        302,
    )
    html = client.get(f"/jobs/queue/?device={device.pk}&page=2").content.decode()
    assert f'id="qa-job-{last.pk}"' in html

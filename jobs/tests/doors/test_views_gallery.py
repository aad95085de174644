from __future__ import annotations

import datetime as dt
import re

import pytest
from django.test import Client
from django.utils import timezone

from jobs.models import Job
from jobs.tests.ui_fixtures import PNG, add_artifact, make_job

pytestmark = pytest.mark.django_db


def test_it_needs_a_sign_in():
    assert Client().get("/jobs/").status_code == 302


def test_it_shows_the_empty_state(member_client):
    assert "No jobs yet — queue your first render." in member_client.get("/jobs/").content.decode()


def test_it_shows_mine_and_shared_but_not_others_private(member_client, member, other_member, device):
    mine = make_job(member, device, prompt="my fox")
    shared = make_job(other_member, device, prompt="their shared owl", shared=True)
    private = make_job(other_member, device, prompt="their private cat")
    html = member_client.get("/jobs/").content.decode()
    assert f'id="job-{mine.pk}-card"' in html and f'id="job-{shared.pk}-card"' in html
    assert f'id="job-{private.pk}-card"' not in html and "private cat" not in html


def test_admins_see_everything(admin_client, member, device):
    job = make_job(member, device, prompt="private fox")
    assert f'id="job-{job.pk}-card"' in admin_client.get("/jobs/").content.decode()


def test_it_shows_thumbnails(member_client, member, device, media):
    video = make_job(member, device, state="done")
    add_artifact(video, media)  # a result without a thumbnail: the placeholder, never a <video> per card
    image = make_job(member, device, kind="image", state="done")
    thumb = add_artifact(image, media, kind="thumb", name="thumb.webp", mime="image/webp", data=PNG)
    html = member_client.get("/jobs/").content.decode()
    assert "<video" not in html and f'<img src="/jobs/{image.pk}/files/{thumb.pk}/"' in html


def test_it_filters_and_searches(member_client, member, device):
    fox = make_job(member, device, prompt="a red fox", state="done")
    owl = make_job(member, device, prompt="an owl at night", kind="image", state="failed")
    html = member_client.get("/jobs/?q=FOX").content.decode()
    assert f"job-{fox.pk}-card" in html and f"job-{owl.pk}-card" not in html
    html = member_client.get("/jobs/?kind=image").content.decode()
    assert f"job-{owl.pk}-card" in html and f"job-{fox.pk}-card" not in html
    html = member_client.get("/jobs/?state=failed").content.decode()
    assert f"job-{owl.pk}-card" in html and f"job-{fox.pk}-card" not in html
    html = member_client.get(f"/jobs/?person=mia&device={device.pk}").content.decode()
    assert f"job-{owl.pk}-card" in html and f"job-{fox.pk}-card" in html
    assert "Nothing matches these filters." in member_client.get("/jobs/?q=zebra").content.decode()


def test_it_filters_by_date_and_explains_a_bad_range(member_client, member, device):
    old = make_job(member, device, prompt="old one")
    Job.objects.filter(pk=old.pk).update(created=timezone.now() - dt.timedelta(days=10))
    new = make_job(member, device, prompt="new one")
    since = (timezone.localdate() - dt.timedelta(days=1)).isoformat()
    html = member_client.get(f"/jobs/?since={since}").content.decode()
    assert f"job-{new.pk}-card" in html and f"job-{old.pk}-card" not in html
    html = member_client.get("/jobs/?since=2026-05-02&until=2026-05-01").content.decode()
    assert "“To” is before “From”." in html


def test_it_filters_bookmarks(member_client, member, device):
    a = make_job(member, device, prompt="keep me")
    b = make_job(member, device, prompt="not me")
    member_client.post(f"/jobs/{a.pk}/bookmark/")
    html = member_client.get("/jobs/?bookmarked=on").content.decode()
    assert f"job-{a.pk}-card" in html and f"job-{b.pk}-card" not in html


def test_it_pages_by_cursor_without_repeats(member_client, member, device):
    jobs = [make_job(member, device, prompt=f"fox {i}") for i in range(30)]
    first = member_client.get("/jobs/")
    html = first.content.decode()
    assert html.count('<li class="job-card') == 24 and "Show older" in html
    cursor = first.context["page"].next_url
    more = member_client.get(f"/jobs/{cursor}", HTTP_HX_REQUEST="true").content.decode()
    assert (
        more.count('<li class="job-card') == 6
        and 'id="gallery-next"' in more
        and "That's everything." in more
    )
    seen = {j.pk for j in jobs if f'id="job-{j.pk}-card"' in html + more}
    assert len(seen) == 30


def test_it_ignores_a_mangled_cursor(member_client, member, device):
    make_job(member, device)
    assert member_client.get("/jobs/?cursor=%%%bad").status_code == 200


def test_it_answers_htmx_with_the_results_only(member_client, member, device):
    make_job(member, device)
    html = member_client.get("/jobs/?q=fox", HTTP_HX_REQUEST="true").content.decode()
    assert html.lstrip().startswith('<section id="gallery-results"') and "<html" not in html


def test_it_keeps_its_query_budget(
    member_client, member, other_member, device, media, django_assert_max_num_queries
):
    for i in range(20):
        job = make_job(member if i % 2 else other_member, device, state="done", shared=True, prompt=f"n{i}")
        add_artifact(job, media, name=f"v{i}.mp4")
    with django_assert_max_num_queries(8):  # flat in the number of cards
        assert member_client.get("/jobs/").status_code == 200


# -- search: every word, any order ----------------------------------------------------------------------------
def test_search_finds_every_word_in_any_order(member_client, member, device):
    kite = make_job(member, device, prompt="Sunset over a KITE festival")
    sunset = make_job(member, device, prompt="a sunset over the sea")
    kiteless = make_job(member, device, prompt="a kite in the rain")
    for q in ("kite sunset", "  SUNSET   kite ", "kite\tsun", "sunset kite kite"):
        html = member_client.get("/jobs/", {"q": q}).content.decode()
        assert f"job-{kite.pk}-card" in html, q
        assert f"job-{sunset.pk}-card" not in html and f"job-{kiteless.pk}-card" not in html, q
    html = member_client.get("/jobs/", {"q": "sunset"}).content.decode()
    assert f"job-{kite.pk}-card" in html and f"job-{sunset.pk}-card" in html
    assert f"job-{kiteless.pk}-card" not in html


def test_search_of_only_spaces_shows_everything(member_client, member, device):
    a = make_job(member, device, prompt="one fox")
    b = make_job(member, device, prompt="two owls")
    html = member_client.get("/jobs/", {"q": "   "}).content.decode()
    assert f"job-{a.pk}-card" in html and f"job-{b.pk}-card" in html


def test_search_words_are_literal_and_bounded(member_client, member, device):
    from jobs.doors.filters import MAX_SEARCH_WORDS, search_words

    percent = make_job(member, device, prompt="100% cotton kite")
    other = make_job(member, device, prompt="1000 cotton kites")
    html = member_client.get("/jobs/", {"q": "kite 100%"}).content.decode()
    assert f"job-{percent.pk}-card" in html and f"job-{other.pk}-card" not in html  # % is not a wildcard
    assert search_words(" a  B a b c ") == ["a", "B", "c"]
    assert len(search_words(" ".join(f"w{i}" for i in range(50)))) == MAX_SEARCH_WORDS


def test_a_many_word_search_is_one_query_for_the_cards(
    member_client, member, device, media, django_assert_max_num_queries
):
    for i in range(10):
        job = make_job(member, device, state="done", prompt=f"kite sunset beach dunes number {i}")
        add_artifact(job, media, name=f"v{i}.mp4")
    with django_assert_max_num_queries(8):  # the same budget as without a search
        html = member_client.get("/jobs/", {"q": "number dunes beach sunset kite " * 4}).content.decode()
    assert len(re.findall(r'id="job-\d+-card"', html)) == 10


@pytest.mark.parametrize(
    "data", [{}, {"kind": "video", "state": "done", "person": "mia", "device": "1"}, {"kind": "<b>"}]
)
def test_the_filters_selects_are_the_html_djangos_select_draws(member, device, data):
    """The gallery's selects are ``LongSelect`` (no template per option): the page is the same as with Django's
    (but the blank lines between its options)."""
    from django import forms

    from jobs.doors.filters import GalleryFilterForm

    form = GalleryFilterForm(data, user=member)
    selects = [name for name, field in form.fields.items() if isinstance(field.widget, forms.Select)]
    assert selects == ["kind", "state", "person", "device"]
    for name in selects:
        ours = str(form[name])
        plain = form[name].as_widget(widget=forms.Select(choices=form.fields[name].choices))
        assert re.sub(r"\s+", " ", ours) == re.sub(r"\s+", " ", plain) and "<option" in ours

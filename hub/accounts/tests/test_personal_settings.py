"""Personal settings: display name, email and time zone; the zone is used for that person's times on every page."""

from __future__ import annotations

import datetime as dt
import re

import pytest
from django.core.exceptions import ValidationError
from django.http import HttpResponse
from django.test import RequestFactory
from django.utils import timezone

from hub.accounts.middleware import TimeZoneMiddleware
from hub.accounts.services import user_update_settings
from jobs.models import Job
from jobs.tests.ui_fixtures import make_job

pytestmark = pytest.mark.django_db


def _text(response) -> str:
    """The page as read: times are <time> elements (hub.templatetags.hub_time), their text is what shows."""
    return re.sub(r"<[^>]+>", "", response.content.decode())


def _save(client, **data):
    return client.post("/accounts/settings/", {"display_name": "", "email": "", "time_zone": "", **data})


def test_the_page_shows_the_form_with_every_zone_and_the_notifications_link(member_client, settings):
    settings.TIME_ZONE = "UTC"
    response = member_client.get("/accounts/settings/")
    html = response.content.decode()
    assert response.status_code == 200
    assert '<select name="time_zone"' in html and '<option value="Europe/Berlin">' in html
    assert "The hub&#x27;s time zone (UTC)" in html and 'href="/notify/"' in html
    assert 'id="menu-settings"' in html  # the header's link, here marked as the current page
    assert 'aria-current="page">Settings' in html


def test_it_saves_and_the_display_name_is_how_the_hub_names_them(member_client, member):
    response = _save(member_client, display_name="  Mia M. ", email="MIA@Example.COM", time_zone="Asia/Tokyo")
    assert response.status_code == 302 and response["Location"] == "/accounts/settings/"
    member.refresh_from_db()
    assert (member.display_name, member.email, member.time_zone) == (
        "Mia M.",
        "MIA@example.com",
        "Asia/Tokyo",
    )
    assert str(member) == "Mia M."
    page = member_client.get("/accounts/settings/").content.decode()
    assert '<span class="person">Mia M. ' in page and "Saved." in page
    assert 'value="Asia/Tokyo" selected' in page and 'id="settings-zone">Asia/Tokyo<' in page
    _save(member_client)  # everything empty again: the username, and the hub's zone
    member.refresh_from_db()
    assert str(member) == "mia" and member.time_zone == ""


@pytest.mark.parametrize(
    "data, message",
    [
        ({"time_zone": "Mars/Olympus_Mons"}, "Pick a time zone from the list"),
        ({"time_zone": "../../etc/passwd"}, "Pick a time zone from the list"),
        ({"email": "not-an-address"}, "doesn&#x27;t look like an email"),
        ({"display_name": "x" * 151}, "under 150"),
    ],
)
def test_bad_settings_are_a_400_with_the_message(member_client, member, data, message):
    response = _save(member_client, **data)
    assert response.status_code == 400 and message in response.content.decode()
    member.refresh_from_db()
    assert member.time_zone == "" and member.email == ""


def test_the_service_checks_the_zone_too(member):
    with pytest.raises(ValidationError, match="not a time zone"):
        user_update_settings(user=member, display_name="", email="", time_zone="Nowhere/Land")


def test_a_job_page_shows_the_time_in_each_person_s_own_zone(member, member_client, device, settings):
    settings.TIME_ZONE = "UTC"
    job = make_job(member, device, state="done")
    Job.objects.filter(pk=job.pk).update(created=dt.datetime(2026, 11, 29, 22, 30, tzinfo=dt.UTC))
    assert "queued Sun 29 Nov, 22:30" in _text(member_client.get(f"/jobs/{job.pk}/"))
    _save(member_client, time_zone="Asia/Tokyo")  # UTC+9: already the next morning
    assert "queued Mon 30 Nov, 07:30" in _text(member_client.get(f"/jobs/{job.pk}/"))
    _save(member_client, time_zone="America/Los_Angeles")  # UTC-8
    page = member_client.get(f"/jobs/{job.pk}/")
    assert "queued Sun 29 Nov, 14:30" in _text(page)
    # the element names the instant in UTC and the zone its text is in (localtime.js reads both)
    html = page.content.decode()
    assert '<time datetime="2026-11-29T22:30Z" data-fmt="D j M, H:i" data-tz="America/Los_Angeles">' in html
    assert 'data-tz="America/Los_Angeles"' in html.split("<body", 1)[1].split(">", 1)[0]


def test_the_zone_is_theirs_alone(member, admin_user, admin_client, member_client, device, settings):
    settings.TIME_ZONE = "Europe/Berlin"  # the hub's default (HUB_TIME_ZONE): UTC+1 in November
    user_update_settings(user=member, display_name="", email="", time_zone="Asia/Tokyo")
    job = make_job(member, device, state="done", shared=True)
    Job.objects.filter(pk=job.pk).update(created=dt.datetime(2026, 11, 29, 22, 30, tzinfo=dt.UTC))
    assert "queued Mon 30 Nov, 07:30" in _text(member_client.get(f"/jobs/{job.pk}/"))
    assert "queued Sun 29 Nov, 23:30" in _text(admin_client.get(f"/jobs/{job.pk}/"))


class _Person:
    is_authenticated = True

    def __init__(self, zone: str) -> None:
        self.time_zone = zone


def test_the_middleware_never_lets_a_zone_reach_the_next_request(settings):
    settings.TIME_ZONE = "UTC"
    seen = []

    def view(request):
        seen.append(timezone.get_current_timezone_name())
        return HttpResponse()

    middleware = TimeZoneMiddleware(view)
    for zone in ("Asia/Tokyo", "Gone/Retired", ""):
        request = RequestFactory().get("/")
        request.user = _Person(zone)
        middleware(request)
        assert timezone.get_current_timezone_name() == "UTC"  # deactivated after the response
    # a zone that tzdata no longer knows falls back to the hub's, like no choice at all
    assert seen == ["Asia/Tokyo", "UTC", "UTC"]


def test_the_new_job_form_names_the_zone_its_times_are_read_in(member, member_client, device, settings):
    settings.TIME_ZONE = "UTC"
    user_update_settings(user=member, display_name="", email="", time_zone="Asia/Tokyo")
    html = member_client.get("/jobs/new/").content.decode()
    assert 'id="not-before-help"' in html and "(UTC)" not in html
    assert "In your time zone (Asia/Tokyo;" in html and "hub's time zone" not in html


def test_nobody_may_take_someone_else_s_name(member_client, member, admin_user, other_member):
    user_update_settings(user=other_member, display_name="Otto O.", email="", time_zone="")
    for name in ("ada", "ADA", "otto o."):
        response = _save(member_client, display_name=name)
        assert response.status_code == 400 and "someone else" in response.content.decode()
    member.refresh_from_db()
    assert member.display_name == ""
    assert _save(member_client, display_name="mia").status_code == 302  # one's own username is fine


def test_one_name_rule_for_adding_someone_inviting_and_settings(
    admin_client, member_client, admin_user, other_member
):
    """A display name is taken for usernames too, through every door (hub.accounts.services.name_taken)."""
    from django.test import Client

    from hub.accounts.invitations import invitation_create
    from hub.accounts.models import User

    user_update_settings(user=other_member, display_name="Nia", email="", time_zone="")
    added = admin_client.post("/accounts/people/add/", {"username": "NIA", "role": "member"})
    assert added.status_code == 400 and "already someone else" in added.content.decode()
    _, raw = invitation_create(role="member", created_by=admin_user)
    good = "plum-kettle-harbour-42"
    joined = Client(REMOTE_ADDR="10.13.0.1").post(
        f"/accounts/invite/{raw}/", {"username": "nia", "password1": good, "password2": good}
    )
    assert joined.status_code == 400 and "taken" in joined.content.decode()
    assert _save(member_client, display_name="nIA").status_code == 400
    assert not User.objects.filter(username__iexact="nia").exists()
    # Once the name is free again, the same request adds her.
    user_update_settings(user=other_member, display_name="", email="", time_zone="")
    assert (
        admin_client.post("/accounts/people/add/", {"username": "nia", "role": "member"}).status_code == 200
    )
    assert User.objects.filter(username="nia").exists()

"""The People page's invitations (create, shown once, list, revoke) and the signed-out accept page."""

from __future__ import annotations

import datetime as dt
import itertools

import pytest
from django.test import Client
from django.utils import timezone

from hub.accounts import views_invite
from hub.accounts.invitations import invitation_create
from hub.accounts.models import Invitation, User

pytestmark = pytest.mark.django_db
GOOD = "plum-kettle-harbour-42"
_addresses = itertools.count(1)


def stranger() -> Client:
    """A signed-out browser with an address of its own (the accept page's throttle counts per address)."""
    return Client(REMOTE_ADDR=f"10.12.{next(_addresses)}.1")


def test_the_people_page_creates_a_link_shown_once(admin_client):
    response = admin_client.post(
        "/accounts/people/invitations/new/", {"role": "viewer", "expires_days": "3", "note": "Oma's tablet"}
    )
    assert response.status_code == 201
    link = response.context["invite_link"]
    html = response.content.decode()
    assert link in html and 'data-copy="#invite-link"' in html and "shown this once" in html
    assert "no-store" in response["Cache-Control"]
    invitation = Invitation.objects.get()
    assert invitation.role == "viewer" and invitation.note == "Oma's tablet"
    assert link.startswith("http://testserver/accounts/invite/")
    again = admin_client.get("/accounts/people/").content.decode()
    assert link not in again  # shown once: the list has only the prefix
    assert f'id="invitation-{invitation.pk}"' in again and "Oma&#x27;s tablet" in again


def test_a_host_listed_without_its_port_makes_no_invitation_and_says_what_to_set(settings, admin_user):
    settings.HUB_PUBLIC_URL = ""
    settings.ALLOWED_HOSTS = ["hub.lan"]  # Django lets "hub.lan:6666" in: it ignores ports
    browser = Client(HTTP_HOST="hub.lan:6666")
    browser.force_login(admin_user)
    response = browser.post("/accounts/people/invitations/new/", {"role": "member"})
    html = response.content.decode()
    assert response.status_code == 400 and "HUB_PUBLIC_URL" in html and "“hub.lan:6666”" in html
    assert "/accounts/invite/" not in html and not Invitation.objects.exists()


@pytest.mark.parametrize(
    "data, message",
    [
        ({"role": "owner"}, "Select a valid choice"),
        ({"role": "member", "expires_days": "0"}, "At least 1 day"),
        ({"role": "member", "expires_days": "365"}, "At most 90 days"),
        ({"role": "member", "expires_days": "soon"}, "whole number"),
        ({"role": "member", "note": "x" * 101}, "under 100"),
    ],
)
def test_a_bad_invitation_form_is_a_400_with_the_message(admin_client, data, message):
    response = admin_client.post("/accounts/people/invitations/new/", data)
    assert response.status_code == 400 and message in response.content.decode()
    assert not Invitation.objects.exists()


def test_revoking_lists_it_no_more_and_the_link_says_withdrawn(admin_client, admin_user):
    invitation, raw = invitation_create(role="member", created_by=admin_user)
    page = admin_client.get("/accounts/people/").content.decode()
    assert "data-confirm=" in page.split(f'id="invitation-{invitation.pk}"')[1].split("</li>")[0]
    response = admin_client.post(f"/accounts/people/invitations/{invitation.pk}/revoke/")
    assert response.status_code == 302
    after = admin_client.get("/accounts/people/").content.decode()
    assert "Invitation revoked" in after and f'id="invitation-{invitation.pk}"' not in after
    assert 'id="invitation-empty"' in after
    opened = stranger().get(f"/accounts/invite/{raw}/")
    assert opened.status_code == 410 and b"withdrawn" in opened.content
    assert b'name="password1"' not in opened.content


def test_non_admins_can_neither_invite_nor_revoke(member_client, admin_user):
    invitation, _ = invitation_create(role="member", created_by=admin_user)
    assert member_client.post("/accounts/people/invitations/new/", {"role": "admin"}).status_code == 403
    assert member_client.post(f"/accounts/people/invitations/{invitation.pk}/revoke/").status_code == 403
    invitation.refresh_from_db()
    assert invitation.is_pending and Invitation.objects.count() == 1


# --- the accept page --------------------------------------------------------------------------------------
def test_accepting_signs_the_new_person_in_and_the_link_is_spent(admin_user):
    _, raw = invitation_create(role="member", created_by=admin_user)
    browser = stranger()
    form = browser.get(f"/accounts/invite/{raw}/")
    html = form.content.decode()
    assert form.status_code == 200
    assert all(f'name="{name}"' in html for name in ("username", "password1", "password2"))
    response = browser.post(
        f"/accounts/invite/{raw}/", {"username": "nora", "password1": GOOD, "password2": GOOD}
    )
    assert response.status_code == 302 and response["Location"] == "/"
    dashboard = browser.get("/")
    assert dashboard.status_code == 200 and dashboard.wsgi_request.user.username == "nora"
    assert User.objects.get(username="nora").role == "member"
    spent = stranger().get(f"/accounts/invite/{raw}/")
    assert spent.status_code == 410 and b"already used" in spent.content
    assert b'name="password1"' not in spent.content and b"<form" not in spent.content.split(b"<main")[1]
    again = stranger().post(
        f"/accounts/invite/{raw}/", {"username": "nora2", "password1": GOOD, "password2": GOOD}
    )
    assert again.status_code == 410 and not User.objects.filter(username="nora2").exists()


@pytest.mark.parametrize(
    "data, message",
    [
        ({"username": "nora", "password1": GOOD, "password2": GOOD + "x"}, "didn’t match"),
        ({"username": "nora", "password1": "password123", "password2": "password123"}, "too common"),
        ({"username": "nora", "password1": "short", "password2": "short"}, "too short"),
        ({"username": "nora", "password1": "x" * 129, "password2": "x" * 129}, "too long"),
        ({"username": "bad name!", "password1": GOOD, "password2": GOOD}, "valid username"),
        ({"username": "mia", "password1": GOOD, "password2": GOOD}, "already exists"),
        ({}, "This field is required"),
    ],
)
def test_a_bad_sign_up_is_a_400_with_django_s_messages(admin_user, member, data, message):
    invitation, raw = invitation_create(role="member", created_by=admin_user)
    response = stranger().post(f"/accounts/invite/{raw}/", data)
    assert response.status_code == 400
    assert message in response.content.decode().replace("&#x27;", "’").replace("'", "’")
    invitation.refresh_from_db()
    assert invitation.is_pending and User.objects.count() == 2


def test_an_expired_link_says_so_and_shows_no_form(admin_user):
    invitation, raw = invitation_create(role="member", created_by=admin_user)
    Invitation.objects.filter(pk=invitation.pk).update(expires_at=timezone.now() - dt.timedelta(minutes=1))
    response = stranger().get(f"/accounts/invite/{raw}/")
    assert response.status_code == 410 and b"expired" in response.content
    assert b'name="password1"' not in response.content


@pytest.mark.parametrize("token", ["x" * 43, "short", "%E2%80%8B" * 30, "a" * 2000, "..%2F..%2Fadmin"])
def test_an_unknown_link_is_a_clear_404(token):
    response = stranger().get(f"/accounts/invite/{token}/")
    assert response.status_code == 404 and b"doesn" in response.content
    assert stranger().post(f"/accounts/invite/{token}/", {"username": "z"}).status_code == 404


def test_someone_signed_in_is_told_the_link_is_for_someone_new(admin_user, member_client):
    _, raw = invitation_create(role="admin", created_by=admin_user)
    response = member_client.get(f"/accounts/invite/{raw}/")
    assert response.status_code == 200 and b"invitation-signed-in" in response.content
    assert b'name="password1"' not in response.content
    member_client.post(f"/accounts/invite/{raw}/", {"username": "x1", "password1": GOOD, "password2": GOOD})
    assert not User.objects.filter(username="x1").exists()


def test_too_many_tries_from_one_address_are_refused_for_a_while(admin_user, monkeypatch):
    monkeypatch.setattr(views_invite, "ACCEPT_TRIES_PER_HOUR", 2)
    invitation, raw = invitation_create(role="member", created_by=admin_user)
    browser = stranger()
    bad = {"username": "nora", "password1": GOOD, "password2": "nope"}
    assert [browser.post(f"/accounts/invite/{raw}/", bad).status_code for _ in range(2)] == [400, 400]
    refused = browser.post(f"/accounts/invite/{raw}/", {**bad, "password2": GOOD})
    assert refused.status_code == 429 and b"Too many tries" in refused.content
    assert not User.objects.filter(username="nora").exists()
    fresh = stranger().post(f"/accounts/invite/{raw}/", {**bad, "password2": GOOD})  # another address
    assert fresh.status_code == 302

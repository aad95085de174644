"""An admin's one-time password (People page) and the middleware that makes the person change it."""

from __future__ import annotations

import pytest
from django.core.exceptions import PermissionDenied
from django.test import Client

from conftest import PASSWORD
from hub.accounts.models import User
from hub.accounts.services import user_set_active, user_set_one_time_password
from hub.accounts.tokens import token_create

pytestmark = pytest.mark.django_db
NEW = "my-own-choice-2026"


def _sign_in(username: str, password: str) -> Client:
    client = Client()
    response = client.post("/accounts/login/", {"username": username, "password": password})
    assert response.status_code == 302, response.content[:300]
    return client


def test_the_people_page_shows_the_password_once_and_the_old_one_stops(admin_client, member):
    response = admin_client.post(f"/accounts/people/{member.pk}/password/")
    assert response.status_code == 200 and "no-store" in response["Cache-Control"]
    password = response.context["one_time_password"]
    assert password in response.content.decode() and "shown this once" in response.content.decode()
    member.refresh_from_db()
    assert member.check_password(password) and not member.check_password(PASSWORD)
    assert member.must_change_password
    page = admin_client.get("/accounts/people/").content.decode()
    assert password not in page and "must choose a password" in page


def test_the_button_asks_first_and_is_not_offered_for_yourself(admin_client, admin_user, member):
    html = admin_client.get("/accounts/people/").content.decode()
    row = html.split(f'id="person-{member.pk}"')[1].split("</li>")[0]
    assert f"/accounts/people/{member.pk}/password/" in row and "Give mia a one-time password?" in row
    mine = html.split(f'id="person-{admin_user.pk}"')[1].split("</li>")[0]
    assert "/password/" not in mine


def test_it_refuses_yourself_the_deactivated_and_non_admins(admin_client, admin_user, member, other_member):
    response = admin_client.post(f"/accounts/people/{admin_user.pk}/password/", follow=True)
    assert "password page" in response.content.decode()
    user_set_active(user=other_member, active=False)
    response = admin_client.post(f"/accounts/people/{other_member.pk}/password/", follow=True)
    assert "deactivated" in response.content.decode()
    with pytest.raises(PermissionDenied):
        user_set_one_time_password(user=other_member, by=member)
    admin_user.refresh_from_db()
    other_member.refresh_from_db()
    assert admin_user.check_password(PASSWORD) and other_member.check_password(PASSWORD)
    assert not (admin_user.must_change_password or other_member.must_change_password)


def test_their_open_sessions_end(admin_user, member):
    browser = _sign_in("mia", PASSWORD)
    assert browser.get("/").status_code == 200
    user_set_one_time_password(user=member, by=admin_user)
    response = browser.get("/")
    assert response.status_code == 302 and response["Location"].startswith("/accounts/login/")


def test_every_page_leads_to_the_password_page_until_it_is_changed(admin_user, member):
    password = user_set_one_time_password(user=member, by=admin_user)
    browser = _sign_in("mia", password)
    for path in ("/", "/jobs/queue/", "/accounts/tokens/", "/accounts/settings/", "/devices/"):
        response = browser.get(path)
        assert response.status_code == 302 and response["Location"] == "/accounts/password/", path
    assert browser.post("/accounts/tokens/new/", {"name": "x", "scopes": "read"}).status_code == 302
    assert not member.api_tokens.exists()  # the POST never reached the view
    htmx = browser.get("/jobs/queue/", HTTP_HX_REQUEST="true")
    assert htmx["HX-Redirect"] == "/accounts/password/"
    api = browser.get("/api/jobs")
    assert api.status_code == 403 and "password" in api.json()["detail"]
    page = browser.get("/accounts/password/")
    assert page.status_code == 200 and b'id="must-change"' in page.content
    assert browser.get("/static/js/hub.js").status_code == 200

    bad = browser.post(
        "/accounts/password/",
        {"old_password": password, "new_password1": "short", "new_password2": "short"},
    )
    assert bad.status_code == 400
    done = browser.post(
        "/accounts/password/", {"old_password": password, "new_password1": NEW, "new_password2": NEW}
    )
    assert done.status_code == 302
    member.refresh_from_db()
    assert not member.must_change_password and member.check_password(NEW)
    assert browser.get("/").status_code == 200  # still signed in, and free to go on
    assert browser.get("/accounts/password/").content.count(b'id="must-change"') == 0


def test_signing_out_still_works(admin_user, member):
    password = user_set_one_time_password(user=member, by=admin_user)
    browser = _sign_in("mia", password)
    response = browser.post("/accounts/logout/")
    assert response.status_code == 302 and response["Location"] == "/accounts/login/"
    assert "_auth_user_id" not in browser.session


def test_api_tokens_keep_working(admin_user, member):
    _, raw = token_create(user=member, name="script", scopes=["read"])
    user_set_one_time_password(user=member, by=admin_user)
    response = Client().get("/api/jobs", HTTP_AUTHORIZATION=f"Bearer {raw}")
    assert response.status_code == 200
    assert User.objects.get(pk=member.pk).must_change_password

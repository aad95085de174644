from __future__ import annotations

import pytest
from django.test import Client

from conftest import PASSWORD

pytestmark = pytest.mark.django_db


def test_it_sends_strangers_to_the_login_page():
    response = Client().get("/")
    assert response.status_code == 302
    assert response["Location"].startswith("/accounts/login/?next=/")


def test_it_shows_the_login_page():
    response = Client().get("/accounts/login/")
    assert response.status_code == 200
    assert b'name="username"' in response.content and b"Sign in" in response.content


def test_it_signs_in_and_out(member):
    client = Client()
    response = client.post("/accounts/login/", {"username": "mia", "password": PASSWORD})
    assert response.status_code == 302 and response["Location"] == "/"
    page = client.get("/")
    assert page.status_code == 200 and b"mia" in page.content
    out = client.post("/accounts/logout/")
    assert out.status_code == 302
    assert client.get("/").status_code == 302


def test_it_says_clearly_when_the_login_is_wrong(member):
    response = Client().post("/accounts/login/", {"username": "mia", "password": "nope"})
    assert response.status_code == 400  # the form again, and a status that says nothing was done
    assert b"didn&#x27;t match" in response.content or b"didn't match" in response.content


def test_it_changes_a_password(member_client, member):
    page = member_client.get("/accounts/password/")
    assert page.status_code == 200
    response = member_client.post(
        "/accounts/password/",
        {
            "old_password": PASSWORD,
            "new_password1": "a-new-long-pass-9",
            "new_password2": "a-new-long-pass-9",
        },
    )
    assert response.status_code == 302
    member.refresh_from_db()
    assert member.check_password("a-new-long-pass-9")


def test_it_shows_the_admin_link_only_to_admins(admin_client, member_client, viewer_client):
    assert b'href="/admin/"' in admin_client.get("/").content
    assert b'href="/admin/"' not in member_client.get("/").content
    assert b'href="/admin/"' not in viewer_client.get("/").content


def test_it_answers_404_with_a_friendly_page(member_client):
    response = member_client.get("/no/such/page/")
    assert response.status_code == 404
    assert b"Nothing here" in response.content

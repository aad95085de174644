from __future__ import annotations

import pytest
from django.test import Client

from hub.accounts.models import User

pytestmark = pytest.mark.django_db


def test_only_admins_see_people(member_client, viewer_client, admin_client):
    assert member_client.get("/accounts/people/").status_code == 403
    assert viewer_client.get("/accounts/people/").status_code == 403
    assert Client().get("/accounts/people/").status_code == 302
    html = admin_client.get("/accounts/people/").content.decode()
    assert "Add someone" in html and 'for="id_username"' in html and 'href="/accounts/people/"' in html


def test_it_adds_someone_with_a_generated_password_shown_once(admin_client):
    response = admin_client.post("/accounts/people/add/", {"username": "nia", "role": "viewer"})
    html = response.content.decode()
    user = User.objects.get(username="nia")
    assert user.role == "viewer" and "shown once" in html
    password = response.context["added"].generated_password
    assert password in html and user.check_password(password)
    assert password not in admin_client.get("/accounts/people/").content.decode()


def test_it_keeps_the_form_when_the_input_is_bad(admin_client, member):
    response = admin_client.post("/accounts/people/add/", {"username": "mia", "role": "admin"})
    assert response.status_code == 400 and "already here" in response.content.decode()
    member.refresh_from_db()
    assert member.role == "member"
    response = admin_client.post("/accounts/people/add/", {"username": "bad name!", "role": "member"})
    assert response.status_code == 400 and 'value="bad name!"' in response.content.decode()


def test_it_changes_a_role(admin_client, member):
    admin_client.post(f"/accounts/people/{member.pk}/role/", {"role": "viewer"})
    member.refresh_from_db()
    assert member.role == "viewer"


def test_it_refuses_changing_your_own_role(admin_client, admin_user):
    response = admin_client.post(f"/accounts/people/{admin_user.pk}/role/", {"role": "viewer"}, follow=True)
    admin_user.refresh_from_db()
    assert admin_user.role == "admin" and "own role" in response.content.decode()


def test_it_deactivates_after_asking_and_brings_back(admin_client, member):
    assert "data-confirm=" in admin_client.get("/accounts/people/").content.decode()
    admin_client.post(f"/accounts/people/{member.pk}/active/", {"active": "0"})
    member.refresh_from_db()
    assert not member.is_active
    admin_client.post(f"/accounts/people/{member.pk}/active/", {"active": "1"})
    member.refresh_from_db()
    assert member.is_active


def test_it_refuses_to_deactivate_yourself(admin_client, admin_user):
    admin_client.post(f"/accounts/people/{admin_user.pk}/active/", {"active": "0"})
    admin_user.refresh_from_db()
    assert admin_user.is_active


@pytest.mark.parametrize("url", ["add/", "{pk}/role/", "{pk}/active/"])
def test_members_cannot_change_people(member_client, other_member, url):
    response = member_client.post(
        "/accounts/people/" + url.format(pk=other_member.pk),
        {"username": "x", "role": "admin", "active": "0"},
    )
    assert response.status_code == 403
    other_member.refresh_from_db()
    assert other_member.is_active and other_member.role == "member"

"""Invitation services and selectors (hub.accounts.invitations) and ``manage.py invite``."""

from __future__ import annotations

import datetime as dt
import io

import pytest
from django.core.exceptions import PermissionDenied, ValidationError
from django.core.management import CommandError, call_command
from django.test import Client, RequestFactory
from django.utils import timezone

from hub.accounts.invitations import (
    InvitationUnusable,
    hash_token,
    invitation_accept,
    invitation_create,
    invitation_find,
    invitation_revoke,
    invitation_url,
    invitations_pending,
)
from hub.accounts.models import Invitation, User
from hub.links import NoLinkOrigin

pytestmark = pytest.mark.django_db
GOOD = "plum-kettle-harbour-42"


def test_it_stores_only_a_hash_and_expires_in_seven_days_by_default(admin_user):
    before = timezone.now()
    invitation, raw = invitation_create(role="member", created_by=admin_user)
    row = Invitation.objects.filter(pk=invitation.pk).values().get()
    assert raw not in " ".join(str(v) for v in row.values())
    assert row["token_hash"] == hash_token(raw) and row["prefix"] == raw[:8]
    week = dt.timedelta(days=7)
    assert before + week <= invitation.expires_at <= timezone.now() + week
    assert invitation.is_pending and invitation.created_by == admin_user


def test_it_refuses_bad_roles_lengths_and_non_admins(admin_user, member):
    with pytest.raises(ValidationError, match="Unknown role"):
        invitation_create(role="owner", created_by=admin_user)
    for days in (0, 91, -3):
        with pytest.raises(ValidationError, match="1 to 90 days"):
            invitation_create(role="member", created_by=admin_user, expires_days=days)
    with pytest.raises(PermissionDenied):
        invitation_create(role="member", created_by=member)
    assert not Invitation.objects.exists()


def test_accepting_makes_the_person_with_the_role_and_spends_the_link(admin_user):
    invitation, raw = invitation_create(role="admin", created_by=admin_user, expires_days=2)
    user = invitation_accept(raw=raw, username="nora", password=GOOD)
    assert user.role == "admin" and user.is_staff and user.check_password(GOOD)
    invitation.refresh_from_db()
    assert invitation.status == "used" and invitation.used_by == user and invitation.used_at
    with pytest.raises(InvitationUnusable) as spent:
        invitation_accept(raw=raw, username="nora2", password=GOOD)
    assert spent.value.status == "used"
    assert not User.objects.filter(username="nora2").exists()


def test_a_taken_username_keeps_the_link_and_the_other_person_untouched(admin_user, member):
    User.objects.filter(pk=admin_user.pk).update(display_name="Mum")
    invitation, raw = invitation_create(role="admin", created_by=admin_user)
    for name in ("mia", "MIA", "mum"):  # someone's display name is taken too
        with pytest.raises(ValidationError, match="taken"):
            invitation_accept(raw=raw, username=name, password=GOOD)
    member.refresh_from_db()
    assert member.role == "member" and not member.check_password(GOOD)
    invitation.refresh_from_db()
    assert invitation.is_pending


def test_expired_revoked_and_unknown_links_make_nobody(admin_user):
    expired, raw_expired = invitation_create(role="member", created_by=admin_user)
    Invitation.objects.filter(pk=expired.pk).update(expires_at=timezone.now() - dt.timedelta(seconds=1))
    revoked, raw_revoked = invitation_create(role="member", created_by=admin_user)
    invitation_revoke(invitation=revoked, by=admin_user)
    for raw, status in (
        (raw_expired, "expired"),
        (raw_revoked, "revoked"),
        ("x" * 43, "unknown"),
        ("", "unknown"),
        ("../../etc", "unknown"),
    ):
        with pytest.raises(InvitationUnusable) as exc:
            invitation_accept(raw=raw, username=f"p{status}", password=GOOD)
        assert exc.value.status == status
    assert User.objects.count() == 1  # the admin


def test_only_admins_revoke_and_a_used_link_stays_used(admin_user, member):
    invitation, raw = invitation_create(role="viewer", created_by=admin_user)
    with pytest.raises(PermissionDenied):
        invitation_revoke(invitation=invitation, by=member)
    invitation_accept(raw=raw, username="vera", password=GOOD)
    invitation_revoke(invitation=invitation, by=admin_user)
    invitation.refresh_from_db()
    assert invitation.status == "used" and invitation.revoked_at is None


def test_pending_lists_only_usable_links_soonest_first(admin_user):
    later, _ = invitation_create(role="member", created_by=admin_user, expires_days=9)
    sooner, _ = invitation_create(role="viewer", created_by=admin_user, expires_days=1)
    used, raw = invitation_create(role="member", created_by=admin_user)
    invitation_accept(raw=raw, username="ulla", password=GOOD)
    revoked, _ = invitation_create(role="member", created_by=admin_user)
    invitation_revoke(invitation=revoked, by=admin_user)
    expired, _ = invitation_create(role="member", created_by=admin_user)
    Invitation.objects.filter(pk=expired.pk).update(expires_at=timezone.now())
    assert list(invitations_pending()) == [sooner, later]


def test_find_never_asks_the_database_for_a_malformed_secret(django_assert_num_queries):
    with django_assert_num_queries(0):
        assert invitation_find("not a token!") is None
        assert invitation_find("x" * 5000) is None


def test_links_use_hub_public_url_and_never_a_host_that_is_not_listed_with_its_port(settings, admin_user):
    _, raw = invitation_create(role="member", created_by=admin_user)
    request = RequestFactory().get("/", HTTP_HOST="10.0.0.5:6666")  # the hub serves on 8000 (HUB_PORT)
    settings.HUB_PUBLIC_URL = "https://hub.example.lan"
    assert invitation_url(raw, request=request) == f"https://hub.example.lan/accounts/invite/{raw}/"
    settings.HUB_PUBLIC_URL = ""
    settings.ALLOWED_HOSTS = ["10.0.0.5"]  # Django lets the request in; the port makes it another address
    with pytest.raises(NoLinkOrigin):
        invitation_url(raw, request=request)
    # Listed with its port: whoever runs the hub says so.
    settings.ALLOWED_HOSTS = ["10.0.0.5", "10.0.0.5:6666"]
    assert invitation_url(raw, request=request) == f"http://10.0.0.5:6666/accounts/invite/{raw}/"
    settings.HUB_HOST, settings.HUB_PORT, settings.HUB_HTTPS = "192.168.1.20", 8000, False
    assert invitation_url(raw) == f"http://192.168.1.20:8000/accounts/invite/{raw}/"  # the command line


# --- manage.py invite ---------------------------------------------------------------------------------------
def _invite(*args: str) -> tuple[str, str]:
    out, err = io.StringIO(), io.StringIO()
    call_command("invite", *args, stdout=out, stderr=err)
    return out.getvalue(), err.getvalue()


def test_the_command_prints_a_working_link_on_its_last_line(settings):
    settings.HUB_PUBLIC_URL = "http://192.168.1.20:8000"
    out, err = _invite("--role", "viewer", "--expires-days", "3")
    link = out.strip().splitlines()[-1]
    assert link.startswith("http://192.168.1.20:8000/accounts/invite/") and err == ""
    invitation = Invitation.objects.get()
    assert invitation.role == "viewer" and invitation.created_by is None
    assert dt.timedelta(days=2, hours=23) < invitation.expires_at - timezone.now() <= dt.timedelta(days=3)
    raw = link.rstrip("/").rsplit("/", 1)[1]
    assert invitation_find(raw) == invitation
    page = Client().get(link.removeprefix(settings.HUB_PUBLIC_URL))
    assert page.status_code == 200 and b'name="password1"' in page.content


def test_the_command_says_when_hub_public_url_is_unset(settings):
    settings.HUB_PUBLIC_URL = ""
    settings.HUB_HOST, settings.HUB_PORT = "127.0.0.1", 8000
    out, err = _invite()
    assert out.strip().splitlines()[-1].startswith("http://127.0.0.1:8000/accounts/invite/")
    assert "HUB_PUBLIC_URL" in err
    assert Invitation.objects.get().role == "member"  # the default role


def test_the_command_refuses_bad_input_without_a_traceback():
    with pytest.raises(CommandError, match="1 to 90 days"):
        _invite("--expires-days", "0")
    with pytest.raises(CommandError):
        _invite("--role", "owner")
    assert not Invitation.objects.exists()


@pytest.mark.django_db(transaction=True)
def test_two_browsers_racing_on_one_link_make_one_person(admin_user):
    """Each accept runs in its own thread and database connection, released together: the compare-and-set
    that spends the link lets exactly one through, and the loser's new person is rolled back with it."""
    import threading

    from django.db import connection

    _, raw = invitation_create(role="member", created_by=admin_user)
    start = threading.Barrier(2)
    outcomes: dict[str, object] = {}

    def accept(name: str) -> None:
        try:
            start.wait(timeout=10)
            outcomes[name] = invitation_accept(raw=raw, username=name, password=GOOD).username
        except InvitationUnusable as exc:
            outcomes[name] = exc.status
        finally:
            connection.close()

    threads = [threading.Thread(target=accept, args=(name,)) for name in ("racer1", "racer2")]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    assert sorted(map(str, outcomes.values())) in (["racer1", "used"], ["racer2", "used"]), outcomes
    assert User.objects.filter(username__startswith="racer").count() == 1
    assert Invitation.objects.get().used_by.username.startswith("racer")


def test_the_admin_site_lists_invitations_read_only_and_revokes(admin_client, admin_user):
    invitation, raw = invitation_create(role="member", created_by=admin_user, note="for Oma")
    listing = admin_client.get("/admin/accounts/invitation/")
    assert (
        listing.status_code == 200 and b"for Oma" in listing.content and raw.encode() not in listing.content
    )
    assert (
        invitation.token_hash.encode()
        not in admin_client.get(f"/admin/accounts/invitation/{invitation.pk}/change/").content
    )
    assert admin_client.get("/admin/accounts/invitation/add/").status_code == 403
    admin_client.post(
        "/admin/accounts/invitation/", {"action": "revoke", "_selected_action": [invitation.pk]}
    )
    invitation.refresh_from_db()
    assert invitation.status == "revoked"

"""API tokens: the services and selectors, the "API tokens" page, the create_token command, the rate limiter."""

from __future__ import annotations

import hashlib
from datetime import timedelta
from io import StringIO

import pytest
from django.core.exceptions import PermissionDenied, ValidationError
from django.core.management import CommandError, call_command
from django.urls import reverse
from django.utils import timezone

from hub.accounts.models import ApiToken
from hub.accounts.services import user_create_or_update, user_set_active
from hub.accounts.tokens import (
    TokenInvalid,
    token_authenticate,
    token_create,
    token_revoke,
    tokens_visible_to,
)
from hub.env import SettingError, env_rate, parse_rate
from hub.ratelimit import RateLimited, check_submit, submit_allowed

pytestmark = pytest.mark.django_db
PAGE = "/accounts/tokens/"


@pytest.fixture(autouse=True)
def _fresh_rate_counters(redis_client):
    for key in redis_client.scan_iter("*ratelimit:submit:*"):
        redis_client.delete(key)


# --- services ----------------------------------------------------------------------------------------------
def test_create_returns_the_raw_token_once_and_stores_only_its_hash(member):
    token, raw = token_create(user=member, name="laptop", scopes=["read"])
    assert raw.startswith("thub_") and len(raw) >= 5 + 43
    token.refresh_from_db()
    assert token.key_hash == hashlib.sha256(raw.encode()).hexdigest()
    assert token.prefix == raw[5:13]
    stored = [str(v) for v in ApiToken.objects.filter(pk=token.pk).values_list().get()]
    assert not any(raw in v or raw[5:] in v for v in stored)


def test_two_tokens_never_share_a_secret(member):
    raws = {token_create(user=member, name=f"t{i}", scopes=["read"])[1] for i in range(20)}
    assert len(raws) == 20


def test_submit_implies_read_and_scopes_are_stored_in_a_stable_order(member):
    token, _ = token_create(user=member, name="rw", scopes=["submit"])
    assert token.scopes == "read,submit"
    assert token.has_scope("read") and token.has_scope("submit") and not token.has_scope("admin")


def test_a_viewer_may_only_get_read_tokens(viewer):
    with pytest.raises(ValidationError, match="Viewers may only create read tokens"):
        token_create(user=viewer, name="x", scopes=["read", "submit"])
    token, _ = token_create(user=viewer, name="x", scopes=["read"])
    assert token.scope_list == ["read"]


@pytest.mark.parametrize(
    ("name", "scopes", "needle"),
    [
        ("", ["read"], "name"),
        ("   ", ["read"], "name"),
        ("x", [], "at least one"),
        ("x", ["admin"], "Unknown scope"),
    ],
)
def test_create_refuses_bad_input_with_a_clear_message(member, name, scopes, needle):
    with pytest.raises(ValidationError, match=needle):
        token_create(user=member, name=name, scopes=scopes)


def test_authenticate_finds_the_token_and_its_person(member):
    token, raw = token_create(user=member, name="laptop", scopes=["read"])
    found = token_authenticate(raw, ip="192.168.1.20")
    assert found.pk == token.pk and found.user == member and found.revoked_at is None


@pytest.mark.parametrize(
    "raw", ["", "thub_", "thub_short", "Bearer thub_abc", "sk-" + "a" * 40, "thub_" + "é" * 43]
)
def test_malformed_tokens_are_refused_before_any_lookup(raw, django_assert_num_queries):
    with django_assert_num_queries(0), pytest.raises(TokenInvalid):
        token_authenticate(raw)


def test_a_revoked_or_unknown_token_is_refused(member):
    token, raw = token_create(user=member, name="old", scopes=["read"])
    token_revoke(token=token, by=member)
    with pytest.raises(TokenInvalid, match="revoked"):
        token_authenticate(raw)
    with pytest.raises(TokenInvalid, match="Unknown"):
        token_authenticate(raw[:-1] + ("A" if raw[-1] != "A" else "B"))


def test_deactivated_person_tokens_stop_and_come_back_with_them(member, admin_user):
    token, raw = token_create(user=member, name="cron", scopes=["read"])
    user_set_active(user=member, active=False)
    with pytest.raises(TokenInvalid, match="deactivated"):
        token_authenticate(raw)
    token.refresh_from_db()
    assert token.revoked_at is None  # nothing was revoked: the owner's state alone stops it
    user_set_active(user=member, active=True)
    assert token_authenticate(raw).pk == token.pk


def test_last_used_is_written_at_most_once_a_minute(member, django_assert_num_queries):
    token, raw = token_create(user=member, name="busy", scopes=["read"])
    with django_assert_num_queries(2):  # lookup + the one UPDATE
        token_authenticate(raw, ip="10.0.0.5")
    token.refresh_from_db()
    first = token.last_used_at
    assert first is not None and token.last_used_ip == "10.0.0.5"
    with django_assert_num_queries(1):  # lookup only: fresh enough, no write
        token_authenticate(raw, ip="10.0.0.6")
    token.refresh_from_db()
    assert (token.last_used_at, token.last_used_ip) == (first, "10.0.0.5")
    ApiToken.objects.filter(pk=token.pk).update(last_used_at=timezone.now() - timedelta(minutes=2))
    token_authenticate(raw, ip="not-an-ip")
    token.refresh_from_db()
    assert token.last_used_at > first and token.last_used_ip is None


def test_only_the_owner_or_an_admin_may_revoke(member, other_member, admin_user):
    token, _ = token_create(user=member, name="mine", scopes=["read"])
    with pytest.raises(PermissionDenied):
        token_revoke(token=token, by=other_member)
    token.refresh_from_db()
    assert token.revoked_at is None
    token_revoke(token=token, by=admin_user)
    token.refresh_from_db()
    first = token.revoked_at
    assert first is not None
    token_revoke(token=token, by=member)  # again: harmless, keeps the first moment
    token.refresh_from_db()
    assert token.revoked_at == first


def test_people_see_their_own_tokens_and_admins_see_everyones(member, other_member, admin_user):
    mine, _ = token_create(user=member, name="mine", scopes=["read"])
    theirs, _ = token_create(user=other_member, name="theirs", scopes=["read"])
    gone, _ = token_create(user=member, name="gone", scopes=["read"])
    token_revoke(token=gone, by=member)
    assert list(tokens_visible_to(member)) == [mine]
    assert set(tokens_visible_to(admin_user)) == {mine, theirs}
    assert gone in tokens_visible_to(member, include_revoked=True)


# --- the page ----------------------------------------------------------------------------------------------
def test_the_page_is_in_the_nav_for_everyone_signed_in(viewer_client):
    response = viewer_client.get(reverse("dashboard"))
    assert f'href="{PAGE}"' in response.content.decode()
    page = viewer_client.get(PAGE)
    assert page.status_code == 200
    assert "Viewers may create read tokens only." in page.content.decode()


def test_signed_out_people_are_sent_to_sign_in(client):
    response = client.get(PAGE)
    assert response.status_code == 302 and "/accounts/login/" in response["Location"]


def test_creating_shows_the_token_once_and_never_again(member_client, member):
    response = member_client.post(
        reverse("accounts-tokens-add"), {"name": "laptop", "scopes": ["read", "submit"]}
    )
    assert response.status_code == 201
    assert "no-store" in response["Cache-Control"]
    raw = response.context["raw_token"]
    html = response.content.decode()
    assert raw in html and "shown this once" in html
    token = ApiToken.objects.get(user=member)
    assert token.name == "laptop" and token.scopes == "read,submit"
    again = member_client.get(PAGE).content.decode()
    assert raw not in again and raw[5:] not in again
    assert f"thub_{token.prefix}…" in again and "laptop" in again and "never used" in again
    assert token_authenticate(raw).pk == token.pk


def test_the_list_shows_when_and_where_a_token_was_last_used(member_client, member):
    _, raw = token_create(user=member, name="nas", scopes=["read"])
    token_authenticate(raw, ip="192.168.1.44")
    html = member_client.get(PAGE).content.decode()
    assert "last used" in html and "from 192.168.1.44" in html


@pytest.mark.parametrize(
    ("data", "needle"),
    [
        ({"name": "", "scopes": ["read"]}, "Give the token a name."),
        ({"name": "x"}, "Choose at least one scope"),
        ({"name": "x", "scopes": ["root"]}, "Choose read and/or submit."),
        ({"name": "x" * 101, "scopes": ["read"]}, "under 100 characters"),
    ],
)
def test_bad_input_gets_a_400_with_the_form_and_a_message(member_client, data, needle):
    response = member_client.post(reverse("accounts-tokens-add"), data)
    assert response.status_code == 400
    assert needle in response.content.decode()
    assert not ApiToken.objects.exists()


def test_a_viewer_asking_for_submit_gets_a_400_with_the_reason(viewer_client):
    response = viewer_client.post(reverse("accounts-tokens-add"), {"name": "x", "scopes": ["read", "submit"]})
    assert response.status_code == 400
    assert "Viewers may only create read tokens" in response.content.decode()
    assert not ApiToken.objects.exists()


def test_revoking_from_the_page(member_client, member):
    token, raw = token_create(user=member, name="old", scopes=["read"])
    html = member_client.get(PAGE).content.decode()
    assert 'data-confirm="Revoke' in html
    response = member_client.post(reverse("accounts-tokens-revoke", args=[token.pk]), follow=True)
    assert response.redirect_chain[-1][0] == PAGE
    assert "no longer works" in response.content.decode()
    with pytest.raises(TokenInvalid):
        token_authenticate(raw)
    assert "token-empty" in response.content.decode()


def test_revoke_is_post_only(member_client, member):
    token, _ = token_create(user=member, name="old", scopes=["read"])
    assert member_client.get(reverse("accounts-tokens-revoke", args=[token.pk])).status_code == 405
    token.refresh_from_db()
    assert token.revoked_at is None


def test_another_member_can_neither_see_nor_revoke_my_token(member, other_client):
    token, _ = token_create(user=member, name="secret-script", scopes=["read"])
    assert "secret-script" not in other_client.get(PAGE).content.decode()
    response = other_client.post(reverse("accounts-tokens-revoke", args=[token.pk]))
    assert response.status_code == 404
    token.refresh_from_db()
    assert token.revoked_at is None


def test_an_admin_sees_everyones_tokens_with_owners_and_can_revoke_any(admin_client, member, other_member):
    mine, _ = token_create(user=member, name="mia-script", scopes=["read"])
    token_create(user=other_member, name="otto-script", scopes=["read"])
    html = admin_client.get(PAGE).content.decode()
    assert "Everyone's tokens" in html
    assert "mia-script" in html and "of mia" in html and "otto-script" in html and "of otto" in html
    response = admin_client.post(reverse("accounts-tokens-revoke", args=[mine.pk]))
    assert response.status_code == 302
    mine.refresh_from_db()
    assert mine.revoked_at is not None


# --- the command -------------------------------------------------------------------------------------------
def test_create_token_prints_the_token_alone_on_the_last_line(member):
    out = StringIO()
    call_command("create_token", "mia", "--name", "backup box", "--scope", "read,submit", stdout=out)
    last = out.getvalue().rstrip("\n").splitlines()[-1]
    token = token_authenticate(last)
    assert token.user == member and token.name == "backup box" and token.scopes == "read,submit"


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (["nobody"], "no such person"),
        (["mia", "--scope", "read,admin"], "Unknown scope"),
        (["vic", "--scope", "submit"], "Viewers"),
    ],
)
def test_create_token_refuses_with_one_line(member, viewer, args, needle):
    with pytest.raises(CommandError, match=needle) as err:
        call_command("create_token", *args, stdout=StringIO())
    assert "\n" not in str(err.value)
    assert not ApiToken.objects.exists()


# --- rate limit --------------------------------------------------------------------------------------------
def test_the_third_submission_in_a_minute_waits_when_the_limit_is_two(settings, monkeypatch):
    settings.HUB_API_SUBMIT_RATE = "2/m"
    # 20.5 s into a minute, held still so a real minute boundary can't fall between the calls.
    now = 60 * 29_000_000 + 20.5
    monkeypatch.setattr("hub.ratelimit._clock", lambda: now)
    assert submit_allowed("token:a") is None
    assert submit_allowed("token:a") is None
    assert submit_allowed("token:a") == 40  # ceil(39.5): the seconds until the next minute
    assert submit_allowed("token:a") == 40  # still refused (and counted) until then
    assert submit_allowed("token:b") is None  # counters are per key
    now += 40
    assert submit_allowed("token:a") is None  # a new minute, a fresh allowance


def test_zero_turns_the_limit_off(settings):
    settings.HUB_API_SUBMIT_RATE = "0"
    assert all(submit_allowed("token:a") is None for _ in range(50))


def test_check_submit_keys_on_the_token_or_else_the_person(settings, member):
    settings.HUB_API_SUBMIT_RATE = "1/h"
    token, _ = token_create(user=member, name="rw", scopes=["submit"])
    by_token = type("Req", (), {"api_token": token, "user": member})()
    by_session = type("Req", (), {"api_token": None, "user": member})()
    check_submit(by_token)
    check_submit(by_session)  # a different counter
    with pytest.raises(RateLimited) as err:
        check_submit(by_token)
    assert err.value.status_code == 429 and 0 < err.value.retry_after <= 3600


@pytest.mark.parametrize(
    ("text", "parsed"),
    [("30/m", (30, 60)), ("5/s", (5, 1)), ("200/H", (200, 3600)), ("0", None), ("0/m", None)],
)
def test_rates_parse(text, parsed):
    assert parse_rate(text) == parsed


@pytest.mark.parametrize("text", ["30", "30/d", "fast", "-1/m", "3.5/m"])
def test_a_bad_rate_stops_start_up_with_one_line(monkeypatch, text):
    monkeypatch.setenv("HUB_API_SUBMIT_RATE", text)
    with pytest.raises(SettingError, match="HUB_API_SUBMIT_RATE=.* is not a rate") as err:
        env_rate("HUB_API_SUBMIT_RATE", "30/m")
    assert "\n" not in str(err.value)


def test_the_default_rate_is_thirty_a_minute(monkeypatch):
    monkeypatch.delenv("HUB_API_SUBMIT_RATE", raising=False)
    assert env_rate("HUB_API_SUBMIT_RATE", "30/m") == "30/m"


def test_demoting_a_member_keeps_the_token_scope_but_not_the_right_to_submit(db):
    # Demoting a member does not widen a token: services check the role, the token only narrows it.
    result = user_create_or_update(username="kim", role="member", password="x" * 12)
    token, _ = token_create(user=result.user, name="rw", scopes=["submit"])
    user_create_or_update(username="kim", role="viewer")
    token.refresh_from_db()
    assert token.has_scope("submit") and not token.user.can_submit

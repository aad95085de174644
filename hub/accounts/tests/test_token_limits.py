"""Tokens with limits, on the command line and the Tokens page: an expiry (``--expires-in``, a duration or a date on
the page) and devices (``--device``, repeatable; ticked on the page). The doors' side is in
``jobs/tests/doors/test_token_limits.py``."""

from __future__ import annotations

import datetime as dt
import html
from io import StringIO

import pytest
from django.core.management import CommandError, call_command
from django.urls import reverse
from django.utils import timezone

from hub.accounts.models import ApiToken
from hub.accounts.tokens import TokenInvalid, parse_expires_in, token_authenticate, token_create
from jobs.tests.ui_fixtures import another_tiiny

pytestmark = pytest.mark.django_db
PAGE = reverse("accounts-tokens")


@pytest.fixture
def pocket(db):
    return another_tiiny("Pocket")


@pytest.fixture
def studio(db):
    return another_tiiny("Studio")


@pytest.mark.parametrize(
    ("text", "seconds"),
    [("30s", 30), ("45m", 2700), ("12h", 43200), ("7d", 604800), ("2w", 1209600), (" 3D ", 259200)],
)
def test_durations_are_read(text, seconds):
    assert parse_expires_in(text) == dt.timedelta(seconds=seconds)


@pytest.mark.parametrize("bad", ["", "7", "d", "7y", "-3d", "0h", "1.5h", "seven days", "99999w"])
def test_create_token_refuses_a_bad_expires_in_with_a_clear_message(member, bad):
    with pytest.raises(CommandError, match="--expires-in: ") as err:
        call_command("create_token", "mia", "--expires-in", bad, stdout=StringIO())
    assert "\n" not in str(err.value)
    assert not ApiToken.objects.exists()


def test_create_token_with_an_expiry_and_devices(member, pocket, studio):
    out = StringIO()
    before = timezone.now()
    call_command(
        "create_token", "mia", "--scope", "read,submit", "--expires-in", "12h",
        "--device", "pocket", "--device", "Studio", stdout=out,
    )  # fmt: skip
    token = token_authenticate(out.getvalue().rstrip("\n").splitlines()[-1])
    assert before + dt.timedelta(hours=12) <= token.expires_at <= timezone.now() + dt.timedelta(hours=12)
    assert sorted(token.device_ids) == sorted([pocket.pk, studio.pk])
    assert "only on Pocket, Studio" in out.getvalue()


def test_create_token_names_an_unknown_device(member, pocket):
    with pytest.raises(CommandError, match="No device is called “Attic”; the devices are: Pocket."):
        call_command("create_token", "mia", "--device", "Attic", stdout=StringIO())
    assert not ApiToken.objects.exists()


def test_a_token_stops_at_its_expiry(member):
    token, raw = token_create(
        user=member, name="t", scopes=["read"], expires_at=timezone.now() + dt.timedelta(seconds=30)
    )
    assert token_authenticate(raw) == token
    ApiToken.objects.filter(pk=token.pk).update(expires_at=timezone.now() - dt.timedelta(seconds=1))
    with pytest.raises(TokenInvalid, match="This token expired at .* UTC; create a new one"):
        token_authenticate(raw)


def test_an_expiry_in_the_past_is_refused(member_client):
    response = member_client.post(
        PAGE + "new/", {"name": "x", "scopes": ["read"], "expires": "date", "expires_on": "2001-01-01"}
    )
    assert response.status_code == 400
    assert "The expiry is in the past" in html.unescape(response.content.decode())
    assert not ApiToken.objects.exists()


def test_the_page_makes_a_token_that_expires_in_a_week_on_one_device(member_client, member, pocket, studio):
    page = html.unescape(member_client.get(PAGE).content.decode())
    assert 'name="devices" value="Pocket"' in page and 'name="devices" value="Studio"' in page
    response = member_client.post(
        PAGE + "new/",
        {"name": "pocket box", "scopes": ["read", "submit"], "expires": "7d", "devices": ["Pocket"]},
    )
    assert response.status_code == 201
    token = ApiToken.objects.get()
    assert token.device_ids == [pocket.pk]
    assert dt.timedelta(days=6, hours=23) < token.expires_at - timezone.now() <= dt.timedelta(days=7)
    text = html.unescape(response.content.decode())
    assert "only on Pocket" in text and "expires" in text


def test_the_page_makes_a_token_that_expires_at_the_end_of_a_date(member_client, member):
    day = (timezone.localdate() + dt.timedelta(days=3)).isoformat()
    response = member_client.post(
        PAGE + "new/", {"name": "d", "scopes": ["read"], "expires": "date", "expires_on": day}
    )
    assert response.status_code == 201
    token = ApiToken.objects.get()
    assert timezone.localtime(token.expires_at).date().isoformat() > day  # works through that whole day
    missing = member_client.post(PAGE + "new/", {"name": "e", "scopes": ["read"], "expires": "date"})
    assert missing.status_code == 400 and "Choose the date it expires on." in html.unescape(
        missing.content.decode()
    )


def test_the_page_refuses_a_device_not_in_the_list(member_client, pocket):
    response = member_client.post(PAGE + "new/", {"name": "x", "scopes": ["read"], "devices": ["Attic"]})
    assert response.status_code == 400 and not ApiToken.objects.exists()


def test_the_list_says_a_token_expired(member_client, member):
    token, _ = token_create(user=member, name="gone", scopes=["read"])
    ApiToken.objects.filter(pk=token.pk).update(expires_at=timezone.now() - dt.timedelta(days=1))
    page = member_client.get(PAGE).content.decode()
    assert 'class="tag tag-warn">expired<' in page


def test_expired_tokens_do_not_count_against_the_live_limit(member, monkeypatch):
    from hub.accounts import tokens

    monkeypatch.setattr(tokens, "MAX_LIVE_TOKENS_PER_PERSON", 1)
    old, _ = token_create(user=member, name="old", scopes=["read"])
    ApiToken.objects.filter(pk=old.pk).update(expires_at=timezone.now() - dt.timedelta(seconds=1))
    token_create(user=member, name="new", scopes=["read"])  # no refusal


def test_admins_have_a_section_with_everyone_elses_tokens(
    admin_client, admin_user, member_client, member, pocket
):
    token_create(user=admin_user, name="ada-own", scopes=["read"])
    theirs, _ = token_create(user=member, name="mia-pocket", scopes=["read"], devices=["Pocket"])
    page = html.unescape(admin_client.get(PAGE).content.decode())
    own, others = page.split('id="others-tokens"')
    assert "ada-own" in own and "mia-pocket" not in own
    assert "mia-pocket" in others and "of mia" in others and "only on Pocket" in others
    assert f'action="/accounts/tokens/{theirs.pk}/revoke/"' in others
    assert 'id="others-tokens"' not in member_client.get(PAGE).content.decode()

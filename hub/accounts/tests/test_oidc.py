"""Single sign-on through OpenID Connect, against a real provider on loopback (django-oauth-toolkit, started by
the ``provider`` fixture; hub/accounts/tests/oidc_provider.py). The hub runs in the Django test client; its OIDC
code talks to the provider over HTTP. A browser's side at the provider is an httpx client signed in there."""

from __future__ import annotations

import logging
from urllib.parse import urlsplit

import pytest
from django.test import Client

from hub.accounts import oidc
from hub.accounts.models import User
from hub.accounts.sessions import session_user
from hub.accounts.tests.oidc_provider import CLIENT_ID, CLIENT_SECRET, provider_sign_in, start_provider

pytestmark = pytest.mark.integration

CALLBACK = "http://testserver/oidc/callback/"


@pytest.fixture(scope="module")
def provider(tmp_path_factory):
    proc = start_provider(tmp_path_factory.mktemp("oidc-provider"), [CALLBACK])
    yield proc
    proc.stop()


@pytest.fixture
def sso(provider, settings):
    oidc.forget_discovery()
    settings.HUB_OIDC_ISSUER = provider.extra["issuer"]
    settings.HUB_OIDC_CLIENT_ID = CLIENT_ID
    settings.HUB_OIDC_CLIENT_SECRET = CLIENT_SECRET
    settings.HUB_OIDC_NAME = "Test Provider"
    settings.HUB_OIDC_ROLE_MAP = "hub-admins=admin,family=member"
    settings.HUB_OIDC_DEFAULT_ROLE = ""
    settings.HUB_OIDC_CREATE_USERS = True
    yield settings
    oidc.forget_discovery()


def _round_trip(provider, username: str, hub: Client | None = None):
    """A person presses "Sign in with …", signs in at the provider, and comes back: the hub's last answer."""
    hub = hub or Client()
    start = hub.get("/oidc/authenticate/")
    assert start.status_code == 302, start.content[:300]
    authorize = start["Location"]
    assert authorize.startswith(provider.extra["issuer"]), authorize
    at_provider = provider_sign_in(provider, username)
    back = at_provider.get(authorize)
    assert back.status_code == 302, back.text[:500]
    callback = back.headers["Location"]
    assert callback.startswith(CALLBACK), callback
    parts = urlsplit(callback)
    return hub, hub.get(f"{parts.path}?{parts.query}"), callback


def _messages(response) -> str:
    return response.client.get("/accounts/login/", follow=True).content.decode()


def test_a_person_signs_in_through_the_provider_and_is_created_with_the_mapped_role(db, provider, sso):
    hub, answer, _ = _round_trip(provider, "alice")
    assert answer.status_code == 302 and answer["Location"] == "/"
    alice = User.objects.get(username="alice")
    assert alice.role == User.Role.ADMIN and alice.is_admin and not alice.has_usable_password()
    assert hub.get("/").status_code == 200
    assert int(hub.session["_auth_user_id"]) == alice.pk
    assert hub.session["_auth_user_backend"] == "hub.accounts.oidc.HubOIDCBackend"
    # The code outside requests (sockets, the body ceiling) reads the session as the person's too.
    assert session_user(hub.session.session_key) == alice


def test_a_known_person_is_matched_by_username_and_their_role_follows_the_claim(db, provider, sso):
    bob = User.objects.create_user("bob", password="local-pass-123", role=User.Role.VIEWER)
    hub, answer, _ = _round_trip(provider, "bob")
    assert answer.status_code == 302
    bob.refresh_from_db()
    assert bob.role == User.Role.MEMBER and bob.has_usable_password()  # the local password stays theirs
    assert int(hub.session["_auth_user_id"]) == bob.pk


def test_a_claim_that_maps_no_role_makes_nobody_unless_a_default_role_is_set(db, provider, sso):
    hub, answer, _ = _round_trip(provider, "carol")
    assert answer["Location"] == "/accounts/login/"
    assert "This hub has no account carol" in _messages(answer)
    assert not User.objects.filter(username="carol").exists()

    sso.HUB_OIDC_DEFAULT_ROLE = "viewer"
    hub, answer, _ = _round_trip(provider, "carol")
    assert answer["Location"] == "/" and User.objects.get(username="carol").role == User.Role.VIEWER


def test_with_creating_off_only_people_the_hub_knows_sign_in(db, provider, sso):
    sso.HUB_OIDC_CREATE_USERS = False
    hub, answer, _ = _round_trip(provider, "alice")
    assert answer["Location"] == "/accounts/login/" and not User.objects.filter(username="alice").exists()
    assert "_auth_user_id" not in hub.session


def test_a_deactivated_person_is_refused_whatever_the_provider_says(db, provider, sso):
    User.objects.create_user("bob", password="x-pass-12345", role=User.Role.MEMBER, is_active=False)
    hub, answer, _ = _round_trip(provider, "bob")
    assert answer["Location"] == "/accounts/login/"
    assert "deactivated" in _messages(answer) and "_auth_user_id" not in hub.session


def test_a_callback_is_good_once_and_only_in_the_browser_that_started_it(db, provider, sso):
    hub, answer, callback = _round_trip(provider, "bob")
    assert answer.status_code == 302 and answer["Location"] == "/"
    parts = urlsplit(callback)
    # Replayed in the same browser: its state was used up.
    replayed = hub.get(f"{parts.path}?{parts.query}")
    assert replayed["Location"] == "/accounts/login/" and "already used" in _messages(replayed)
    # Another browser (an attacker's link, CSRF on the callback): a state it never sent.
    stranger = Client()
    refused = stranger.get(f"{parts.path}?{parts.query}")
    assert refused.status_code == 302 and refused["Location"] == "/accounts/login/"
    assert "_auth_user_id" not in stranger.session
    assert "not started from this browser" in _messages(refused)
    stranger.get("/oidc/authenticate/")  # a state of its own now, but not this one
    refused = stranger.get(f"{parts.path}?{parts.query}")
    assert refused["Location"] == "/accounts/login/" and "_auth_user_id" not in stranger.session


def test_the_provider_saying_no_signs_nobody_in(db, provider, sso):
    hub = Client()
    start = hub.get("/oidc/authenticate/")
    state = dict(p.split("=", 1) for p in urlsplit(start["Location"]).query.split("&"))["state"]
    answer = hub.get(f"/oidc/callback/?error=access_denied&state={state}")
    assert answer["Location"] == "/accounts/login/" and "did not sign you in" in _messages(answer)


def test_a_provider_out_of_reach_is_a_message_on_the_sign_in_page(db, sso):
    from hub.redis_server import free_port

    sso.HUB_OIDC_ISSUER = f"http://127.0.0.1:{free_port()}/o"
    hub = Client()
    answer = hub.get("/oidc/authenticate/")
    assert answer.status_code == 302 and answer["Location"] == "/accounts/login/"
    assert "Test Provider can&#x27;t be reached" in _messages(answer)


def test_the_client_secret_never_reaches_a_log_even_when_the_token_call_fails(db, provider, sso, caplog):
    sso.HUB_OIDC_CLIENT_SECRET = "wrong-secret-that-must-not-be-logged"
    with caplog.at_level(logging.DEBUG):
        hub, answer, _ = _round_trip(provider, "alice")
    assert answer["Location"] == "/accounts/login/" and "_auth_user_id" not in hub.session
    assert "could not be checked" in _messages(answer)
    assert "wrong-secret" not in caplog.text and "wrong-secret" not in _messages(answer)
    assert not User.objects.filter(username="alice").exists()


def test_the_sign_in_page_offers_the_provider_and_hides_passwords_when_local_sign_in_is_off(
    db, provider, sso, member
):
    page = Client().get("/accounts/login/?next=/jobs/").content.decode()
    assert 'id="signin-oidc"' in page and "Sign in with Test Provider" in page and "next=/jobs/" in page
    assert 'id="id_password"' in page

    sso.HUB_LOCAL_SIGNIN = False
    page = Client().get("/accounts/login/").content.decode()
    assert 'id="signin-oidc"' in page and 'id="id_password"' not in page
    refused = Client().post("/accounts/login/", {"username": member.username, "password": "pw-member-123"})
    assert refused.status_code == 403 and b"Passwords are turned off" in refused.content
    # The provider still signs people in.
    hub, answer, _ = _round_trip(provider, "bob")
    assert answer["Location"] == "/"


def test_next_survives_the_round_trip(db, provider, sso):
    hub = Client()
    start = hub.get("/oidc/authenticate/?next=/jobs/")
    at_provider = provider_sign_in(provider, "bob")
    callback = urlsplit(at_provider.get(start["Location"]).headers["Location"])
    assert hub.get(f"{callback.path}?{callback.query}")["Location"] == "/jobs/"


def test_hub_groups_follow_the_providers_claim_when_asked_and_the_audit_keeps_the_sign_in(db, provider, sso):
    """With HUB_OIDC_GROUPS_CLAIM, bob (in the provider's "family") lands in the hub's "Family" group and out of
    "kids", which the claim does not name; the sign-in and the change are in the audit log."""
    from hub.accounts.models import AuditEntry, UserGroup

    sso.HUB_OIDC_GROUPS_CLAIM = "groups"
    family, kids = UserGroup.objects.create(name="Family"), UserGroup.objects.create(name="kids")
    bob = User.objects.create_user("bob", password="local-pass-123", role=User.Role.MEMBER)
    kids.members.add(bob)
    _round_trip(provider, "bob")
    assert set(bob.usage_groups.values_list("name", flat=True)) == {family.name}
    actions = set(AuditEntry.objects.filter(target=bob).values_list("action", flat=True))
    assert {"signin-sso", "group-member-added"} <= actions

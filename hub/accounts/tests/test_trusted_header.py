"""Sign-in by a trusted proxy's header (HUB_TRUSTED_HEADER): honoured from HUB_TRUSTED_PROXIES alone, judged by
the connection's own address; unknown names get no session unless HUB_TRUSTED_HEADER_CREATE says a role."""

from __future__ import annotations

import pytest
from django.test import Client

from hub.accounts.models import User
from hub.accounts.sessions import session_user

PROXY = "10.0.0.5"


@pytest.fixture
def header_mode(settings):
    settings.HUB_TRUSTED_HEADER = "Remote-User"
    settings.HUB_TRUSTED_PROXIES = ["10.0.0.0/24", "::1"]
    settings.HUB_TRUSTED_HEADER_CREATE = ""
    return settings


def _get(path="/", *, peer=PROXY, user=None, client=None, **headers):
    client = client or Client()
    if user is not None:
        headers["HTTP_REMOTE_USER"] = user
    return client, client.get(path, REMOTE_ADDR=peer, **headers)


def test_the_proxy_signs_a_known_person_in(db, header_mode, member):
    client, answer = _get(user=member.username)
    assert answer.status_code == 200
    assert int(client.session["_auth_user_id"]) == member.pk
    assert client.session["_auth_user_backend"] == "hub.accounts.trusted_header.TrustedHeaderBackend"
    assert session_user(client.session.session_key) == member  # sockets and the body ceiling read it alike
    _, again = _get(client=client, user=member.username)  # the session carries on (no new sign-in each time)
    assert again.status_code == 200


def test_the_header_from_anyone_else_is_ignored(db, header_mode, admin_user):
    for peer in ("192.168.1.20", "10.0.1.5", "127.0.0.1"):
        client, answer = _get(peer=peer, user=admin_user.username)
        assert answer.status_code == 302 and answer["Location"].startswith("/accounts/login/")
        assert "_auth_user_id" not in client.session
    # Nor does a forwarded address make an outsider a proxy: the peer is what counts.
    client, answer = _get(peer="192.168.1.20", user=admin_user.username, HTTP_X_FORWARDED_FOR=PROXY)
    assert answer.status_code == 302 and "_auth_user_id" not in client.session


def test_an_unknown_name_gets_no_session_unless_a_role_to_create_it_with_is_named(db, header_mode):
    client, answer = _get(user="newcomer")
    assert answer.status_code == 302 and "_auth_user_id" not in client.session
    assert not User.objects.filter(username="newcomer").exists()

    header_mode.HUB_TRUSTED_HEADER_CREATE = "viewer"
    client, answer = _get(user="newcomer")
    assert answer.status_code == 200
    newcomer = User.objects.get(username="newcomer")
    assert newcomer.role == User.Role.VIEWER and not newcomer.has_usable_password()


def test_a_deactivated_person_gets_no_session(db, header_mode, member):
    member.is_active = False
    member.save(update_fields=["is_active"])
    client, answer = _get(user=member.username)
    assert answer.status_code == 302 and "_auth_user_id" not in client.session


def test_another_name_from_the_proxy_ends_the_session_and_starts_theirs(
    db, header_mode, member, other_member
):
    client, _ = _get(user=member.username)
    _, answer = _get(client=client, user=other_member.username)
    assert answer.status_code == 200 and int(client.session["_auth_user_id"]) == other_member.pk


def test_unknown_names_do_not_lock_the_proxys_address_out(db, header_mode, member, settings):
    settings.HUB_SIGNIN_ADDRESS_FAILURES = 2
    for n in range(5):
        _get(user=f"nobody{n}")
    client, answer = _get(user=member.username)
    assert answer.status_code == 200


def test_off_the_header_means_nothing(db, settings, member):
    settings.HUB_TRUSTED_HEADER = ""
    settings.HUB_TRUSTED_PROXIES = [PROXY]
    client, answer = _get(user=member.username)
    assert answer.status_code == 302 and "_auth_user_id" not in client.session


def test_an_api_token_request_is_not_signed_in_by_the_header(db, header_mode, member):
    client, answer = _get("/api/jobs", user=member.username, HTTP_AUTHORIZATION="Bearer thub_not-a-token")
    assert answer.status_code == 401 and "_auth_user_id" not in client.session


@pytest.mark.integration
@pytest.mark.django_db(transaction=True)
def test_through_the_real_web_server_the_peer_counts_not_the_forwarded_address(django_db_blocker, member):
    """uvicorn believes X-Forwarded-For from the trusted proxy (the client address becomes the person's), and the
    header is still judged by the connection's own address (hub.peer)."""
    import httpx

    from hub.testing import start_asgi_server

    with django_db_blocker.unblock():
        proc = start_asgi_server(workers=1, HUB_TRUSTED_HEADER="Remote-User", HUB_TRUSTED_PROXIES="127.0.0.1")
    try:
        url = proc.extra["url"]
        headers = {"Remote-User": member.username, "X-Forwarded-For": "192.168.1.7"}
        answer = httpx.get(f"{url}/", headers=headers, timeout=30)
        assert answer.status_code == 200, answer.text[:300]
        assert "sessionid" in answer.cookies
        # From another address (127.0.0.2, not a trusted proxy), claiming to be forwarded by the trusted one.
        spoofer = httpx.Client(transport=httpx.HTTPTransport(local_address="127.0.0.2"), timeout=30)
        spoofed = spoofer.get(
            f"{url}/", headers={"Remote-User": member.username, "X-Forwarded-For": "127.0.0.1"}
        )
        assert spoofed.status_code == 302 and spoofed.headers["Location"].startswith("/accounts/login/")
    finally:
        proc.stop()

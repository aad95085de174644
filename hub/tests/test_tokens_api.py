"""Token auth as the API doors use it (``hub.api_auth``): a tiny ninja API mounted only for these tests, called
through the whole Django stack (middleware included) with a real client."""

from __future__ import annotations

import pytest
from django.contrib.auth.decorators import login_not_required
from django.test import Client
from django.urls import path
from ninja import NinjaAPI

from hub.accounts.services import user_set_active
from hub.accounts.tokens import token_create, token_revoke
from hub.api_auth import API_AUTH, READ_ONLY, require_scope
from hub.ratelimit import check_submit

api = NinjaAPI(urls_namespace="test-token-api", docs_url=None)


@api.get("/whoami", auth=API_AUTH)
def whoami(request):
    token = request.api_token
    return {"user": request.user.username, "token": token.name if token else None}


@api.get("/whoami-async", auth=API_AUTH)
async def whoami_async(request):
    # The /v1 routes may be async: ninja runs the (sync) auth in a thread, and the user is already loaded.
    return {"user": request.user.username, "token": request.api_token.name if request.api_token else None}


@api.post("/submit", auth=API_AUTH)
def submit(request):
    require_scope(request, "submit")
    check_submit(request)
    return {"ok": True, "user": request.user.username}


def _door(ninja_api):
    patterns, app_name, namespace = ninja_api.urls
    for pattern in patterns:
        login_not_required(pattern.callback)
    return patterns, app_name, namespace


urlpatterns = [path("t/", _door(api))]
pytestmark = [pytest.mark.urls(__name__), pytest.mark.django_db]


@pytest.fixture(autouse=True)
def _fresh_rate_counters(redis_client):
    # Rolled-back tests reuse token ids, so one test's counter would leak into the next.
    for key in redis_client.scan_iter("*ratelimit:submit:*"):
        redis_client.delete(key)


def _bearer(raw: str) -> dict:
    return {"HTTP_AUTHORIZATION": f"Bearer {raw}"}


def test_a_good_token_is_the_person_behind_it(member):
    _, raw = token_create(user=member, name="laptop", scopes=["read"])
    response = Client().get("/t/whoami", **_bearer(raw))
    assert response.status_code == 200
    assert response.json() == {"user": "mia", "token": "laptop"}


@pytest.mark.parametrize(
    ("header", "needle"),
    [
        ("Bearer thub_" + "x" * 43, "Unknown token"),
        ("Bearer not-a-hub-token", "Malformed"),
        ("Bearer ", "must be 'Bearer <token>'"),
        ("Basic bWlhOnB3", "must be 'Bearer <token>'"),
    ],
)
def test_a_bad_token_answers_401_json_with_a_reason(member, header, needle):
    response = Client().get("/t/whoami", HTTP_AUTHORIZATION=header)
    assert response.status_code == 401
    assert response["Content-Type"].startswith("application/json")
    assert needle in response.json()["detail"]


def test_no_credentials_at_all_answer_401_with_how_to_authenticate(db):
    response = Client().post("/t/submit")
    assert response.status_code == 401
    assert "Authorization: Bearer" in response.json()["detail"]


def test_a_revoked_token_stops_working(member):
    token, raw = token_create(user=member, name="old", scopes=["read"])
    token_revoke(token=token, by=member)
    response = Client().get("/t/whoami", **_bearer(raw))
    assert response.status_code == 401
    assert "revoked" in response.json()["detail"]


def test_deactivating_a_person_stops_their_tokens_at_once(member, admin_user):
    _, raw = token_create(user=member, name="cron", scopes=["read", "submit"])
    assert Client().get("/t/whoami", **_bearer(raw)).status_code == 200
    user_set_active(user=member, active=False)
    response = Client().get("/t/whoami", **_bearer(raw))
    assert response.status_code == 401
    assert "deactivated" in response.json()["detail"]


def test_a_bad_token_never_falls_back_to_the_session(member_client):
    response = member_client.get("/t/whoami", HTTP_AUTHORIZATION="Bearer thub_" + "y" * 43)
    assert response.status_code == 401


def test_a_read_token_may_not_submit(member):
    _, raw = token_create(user=member, name="ro", scopes=["read"])
    response = Client().post("/t/submit", **_bearer(raw))
    assert response.status_code == 403
    assert response.json() == {"detail": READ_ONLY}


def test_a_submit_token_submits_without_csrf(member):
    _, raw = token_create(user=member, name="rw", scopes=["submit"])
    response = Client(enforce_csrf_checks=True).post("/t/submit", **_bearer(raw))
    assert response.status_code == 200
    assert response.json()["user"] == "mia"


def test_the_session_works_and_its_csrf_is_checked(member):
    client = Client(enforce_csrf_checks=True)
    client.force_login(member)
    assert client.get("/t/whoami").json() == {"user": "mia", "token": None}
    refused = client.post("/t/submit")
    assert refused.status_code == 403
    assert "CSRF" in refused.json()["detail"]
    client.get("/t/whoami")  # no CSRF cookie yet without a page; set one the way a page would
    from django.middleware.csrf import _get_new_csrf_string, _mask_cipher_secret

    secret = _get_new_csrf_string()
    client.cookies["csrftoken"] = secret
    ok = client.post("/t/submit", HTTP_X_CSRFTOKEN=_mask_cipher_secret(secret))
    assert ok.status_code == 200


def test_over_the_submit_rate_answers_429(member, settings, monkeypatch):
    settings.HUB_API_SUBMIT_RATE = "2/m"
    monkeypatch.setattr("hub.ratelimit._clock", lambda: 60 * 29_000_000 + 1.0)  # no minute boundary mid-test
    _, raw = token_create(user=member, name="busy", scopes=["submit"])
    client = Client()
    assert [client.post("/t/submit", **_bearer(raw)).status_code for _ in range(2)] == [200, 200]
    third = client.post("/t/submit", **_bearer(raw))
    assert third.status_code == 429
    assert "try again in" in third.json()["detail"]


def test_token_auth_works_for_async_routes(member):
    _, raw = token_create(user=member, name="async", scopes=["read"])
    assert Client().get("/t/whoami-async", **_bearer(raw)).json() == {"user": "mia", "token": "async"}
    refused = Client().get("/t/whoami-async", HTTP_AUTHORIZATION="Bearer thub_" + "z" * 43)
    assert refused.status_code == 401


def test_authenticate_request_is_reusable_outside_ninja(member, rf):
    from hub.accounts.tokens import TokenInvalid
    from hub.api_auth import authenticate_request

    token, raw = token_create(user=member, name="v1", scopes=["read"])
    request = rf.get("/v1/models", HTTP_AUTHORIZATION=f"Bearer {raw}", REMOTE_ADDR="10.1.2.3")
    assert authenticate_request(request) == token
    assert request.user == member and request.api_token == token
    token.refresh_from_db()
    assert token.last_used_ip == "10.1.2.3"
    with pytest.raises(TokenInvalid, match="Authorization: Bearer"):
        authenticate_request(rf.get("/v1/models"))

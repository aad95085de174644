"""Tokens with limits at the doors: an expired token is a 401 that says so (REST and /v1, through the real openai
SDK), and a token bound to devices queues only there, pinned or for "any device", at every door.

Home and Office as in ``test_any_device``: both can render the video asked here. No worker runs.
"""

from __future__ import annotations

import datetime as dt

import httpx
import openai
import pytest
from django.test import Client
from django.utils import timezone

from hub.accounts.models import ApiToken
from hub.accounts.tokens import token_create
from jobs.models import Job
from jobs.queue import enqueue, membership
from jobs.tests.doors.test_any_device import _through_django, rest_body, v1_video
from jobs.tests.ui_fixtures import VIDEO, another_tiiny, capabilities

pytestmark = [pytest.mark.django_db, pytest.mark.filterwarnings("ignore::DeprecationWarning")]


@pytest.fixture(autouse=True)
def _quiet(settings, monkeypatch):
    settings.HUB_API_SUBMIT_RATE = "0"
    monkeypatch.setattr(enqueue, "send", lambda *a, **kw: None)  # no broker: the pool's work is not sent


@pytest.fixture
def home(db):
    return another_tiiny("Home", capabilities(), loaded=(VIDEO,))


@pytest.fixture
def office(db, home):
    return another_tiiny("Office", capabilities())


@pytest.fixture
def both(home, office):
    return sorted([home.pk, office.pk])


def _client(raw: str) -> Client:
    return Client(HTTP_AUTHORIZATION=f"Bearer {raw}")


def _sdk(raw: str) -> openai.OpenAI:
    return openai.OpenAI(
        base_url="http://testserver/v1",
        api_key=raw,
        max_retries=0,
        http_client=httpx.Client(transport=httpx.MockTransport(_through_django)),
    )


def _expired(user) -> str:
    token, raw = token_create(user=user, name="old", scopes=["read", "submit"])
    ApiToken.objects.filter(pk=token.pk).update(expires_at=timezone.now() - dt.timedelta(seconds=1))
    return raw


# -- expiry -----------------------------------------------------------------------------------------------------------


def test_an_expired_token_is_a_401_that_says_it_expired_on_rest(member):
    raw = _expired(member)
    response = _client(raw).get("/api/jobs")
    assert response.status_code == 401
    assert "This token expired at" in response.json()["detail"]
    posted = _client(raw).post("/api/jobs", rest_body(), content_type="application/json")
    assert posted.status_code == 401 and "expired" in posted.json()["detail"]
    assert not Job.objects.exists()


def test_an_expired_token_is_a_401_that_says_it_expired_through_the_openai_sdk(member, both):
    raw = _expired(member)
    with _sdk(raw) as sdk, pytest.raises(openai.AuthenticationError) as refused:
        sdk.videos.create(model=VIDEO, prompt="a fox", size="832x480", seconds="4")
    assert refused.value.status_code == 401
    assert "This token expired at" in refused.value.message
    assert not Job.objects.exists()


def test_a_token_works_until_its_expiry(member, both):
    token, raw = token_create(
        user=member, name="soon", scopes=["read", "submit"], expires_at=timezone.now() + dt.timedelta(hours=1)
    )
    assert _client(raw).get("/api/jobs").status_code == 200
    ApiToken.objects.filter(pk=token.pk).update(expires_at=timezone.now() - dt.timedelta(seconds=1))
    assert _client(raw).get("/api/jobs").status_code == 401


# -- binding to devices -------------------------------------------------------------------------------------------------


@pytest.fixture
def bound(member, home, office):
    """A submit token that may only use Office."""
    return token_create(user=member, name="office box", scopes=["read", "submit"], devices=["office"])[1]


def test_a_bound_token_pinned_elsewhere_is_refused_naming_its_device_on_rest_and_v1(bound, home, office):
    rest = _client(bound).post("/api/jobs", rest_body(device=home.pk), content_type="application/json")
    assert rest.status_code == 422, rest.content
    assert rest.json()["errors"].get("device") == ["This token may only use Office."], rest.json()
    v1 = v1_video(_client(bound), headers={"X-Hub-Device": "Home"})
    assert v1.status_code in (400, 403), v1.content
    assert "This token may only use Office." in v1.json()["error"]["message"]
    with _sdk(bound) as sdk, pytest.raises(openai.APIStatusError) as refused:
        sdk.videos.create(
            model=VIDEO, prompt="a fox", size="832x480", seconds="4", extra_headers={"X-Hub-Device": "Home"}
        )
    assert "This token may only use Office." in refused.value.message
    assert not Job.objects.exists()


def test_a_bound_token_pinned_to_its_device_queues_there(bound, office):
    rest = _client(bound).post("/api/jobs", rest_body(device=office.pk), content_type="application/json")
    assert rest.status_code == 201, rest.content
    job = Job.objects.get()
    assert (job.pinned, job.device_id, job.devices_allowed) == (True, office.pk, [office.pk])


def test_any_device_for_a_bound_token_means_any_of_its_devices_at_every_door(bound, member, home, office):
    rest = _client(bound).post("/api/jobs", rest_body(device="any"), content_type="application/json")
    v1 = v1_video(_client(bound))
    with _sdk(bound) as sdk:
        sdk_job = sdk.videos.create(model=VIDEO, prompt="a fox", size="832x480", seconds="4")
    assert (rest.status_code, v1.status_code) == (201, 200), (rest.content, v1.content)
    jobs = list(Job.objects.order_by("pk"))
    assert len(jobs) == 3 and sdk_job.id
    # Home could do it too, but the token may only use Office: the pool is Office alone.
    assert [(j.device_id, j.pool, j.devices_allowed) for j in jobs] == [
        (office.pk, [office.pk], [office.pk])
    ] * 3
    # The same person's unbound token and session still use the whole pool.
    free = token_create(user=member, name="free", scopes=["read", "submit"])[1]
    assert _client(free).post("/api/jobs", rest_body(), content_type="application/json").status_code == 201
    assert sorted(Job.objects.order_by("-pk").first().pool) == sorted([home.pk, office.pk])


def test_a_token_whose_devices_are_gone_is_refused_and_never_falls_back_to_the_rest(member, home, office):
    raw = token_create(user=member, name="office box", scopes=["read", "submit"], devices=["Office"])[1]
    office.delete()  # Home could render it: the token still may not use it
    rest = _client(raw).post("/api/jobs", rest_body(), content_type="application/json")
    assert rest.status_code == 422, rest.content
    assert rest.json()["errors"]["device"] == ["This token's devices are gone; create a new token."]
    assert not Job.objects.exists()


def test_a_bound_pool_job_never_takes_in_a_device_outside_its_token(bound, home, office):
    rest = _client(bound).post("/api/jobs", rest_body(), content_type="application/json")
    job = Job.objects.get(pk=rest.json()["id"])
    assert membership.takes(office, job) is True
    assert membership.takes(home, job) is False  # Home can render it, but is not the token's
    membership.refit(home.pk)
    job.refresh_from_db()
    assert job.pool == [office.pk]

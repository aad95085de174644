"""Forms, REST and /v1 are three doors to one admission path: each refuses the same request with the same words."""

from __future__ import annotations

import html

import pytest
from django.test import Client

from jobs.models import Job
from jobs.tests.ui_fixtures import VIDEO

pytestmark = pytest.mark.django_db

CASES = [
    # (fields, the field it is about, words every door must use)
    ({"size": "640x640", "seconds": 2, "steps": 4}, "size", "This model only renders 1344x768"),
    ({"size": "832x480", "seconds": 8, "steps": 4}, "seconds", "The device renders 1 to 7 seconds"),
    ({"size": "1344x768", "seconds": 7, "steps": 8}, None, "the hub refuses anything over 55 minutes"),
]


@pytest.fixture(autouse=True)
def _no_rate_limit(settings):
    settings.HUB_API_SUBMIT_RATE = "0"


@pytest.fixture
def bearer(member):
    from hub.accounts.tokens import token_create

    raw = token_create(user=member, name="doors", scopes=["read", "submit"])[1]
    return Client(HTTP_AUTHORIZATION=f"Bearer {raw}")


@pytest.mark.parametrize(("fields", "field", "words"), CASES)
def test_every_door_refuses_with_the_same_words(member_client, bearer, device, fields, field, words):
    page = member_client.post(
        "/jobs/new/",
        {"device": device.pk, "kind": "video", "model": VIDEO, "prompt": "fox", "when": "asap", **fields},
    )
    assert page.status_code == 400 and words in html.unescape(page.content.decode())

    rest = bearer.post(
        "/api/jobs",
        {"device": device.pk, "kind": "video", "model": VIDEO, "prompt": "fox", **fields},
        content_type="application/json",
    )
    assert rest.status_code == 422, rest.content
    assert words in rest.json()["detail"] or any(
        words in m for ms in rest.json()["errors"].values() for m in ms
    )

    v1 = bearer.post(
        "/v1/videos",
        {
            "model": VIDEO,
            "prompt": "fox",
            "size": fields["size"],
            "seconds": str(fields["seconds"]),
            "steps": fields["steps"],
        },
        content_type="application/json",
    )
    assert v1.status_code == 400, v1.content
    error = v1.json()["error"]
    assert words in error["message"]
    if field:
        assert error["param"] == field
    assert Job.objects.count() == 0


def test_a_script_may_name_the_model_without_its_publisher(bearer, device):
    """``MiniMax/MiniMax-H3-Turbo`` or ``MiniMax-H3-Turbo`` finds the device's one H3 model through /v1 and REST."""
    v1 = bearer.post(
        "/v1/videos",
        {"model": "MiniMax/MiniMax-H3-Turbo", "prompt": "fox", "size": "832x480", "seconds": "4"},
        content_type="application/json",
    )
    assert v1.status_code == 200, v1.content
    assert v1.json()["model"] == VIDEO
    rest = bearer.post(
        "/api/jobs",
        {
            "device": device.pk,
            "kind": "video",
            "model": "MiniMax-H3-Turbo",
            "prompt": "fox",
            "size": "832x480",
            "seconds": 2,
            "steps": 4,
        },
        content_type="application/json",
    )
    assert rest.status_code == 201, rest.content
    assert Job.objects.filter(model_id=VIDEO).count() == 2


def test_rest_honours_an_idempotency_key(bearer, device):
    body = {
        "device": device.pk,
        "kind": "video",
        "model": VIDEO,
        "prompt": "fox",
        "size": "832x480",
        "seconds": 2,
    }
    first = bearer.post("/api/jobs", body, content_type="application/json", HTTP_IDEMPOTENCY_KEY="night-1")
    again = bearer.post("/api/jobs", body, content_type="application/json", HTTP_IDEMPOTENCY_KEY="night-1")
    assert first.status_code == 201 and again.status_code == 200
    assert first.json()["id"] == again.json()["id"] and Job.objects.count() == 1


# -- one admission per submission: door → intake → admission → services, in one pass ---------------------------


@pytest.fixture
def admit_calls(monkeypatch):
    """Every call of ``admit``, wherever it is made from (admission's own and the name services holds)."""
    from jobs.queue import admission, services

    calls: list[dict] = []
    real = admission.admit

    def counted(**kw):
        calls.append(kw)
        return real(**kw)

    monkeypatch.setattr(admission, "admit", counted)
    monkeypatch.setattr(services, "admit", counted)
    return calls


SHORT = {"prompt": "fox", "size": "832x480", "seconds": 2, "steps": 4}


def test_each_door_admits_a_submission_once(member_client, bearer, device, admit_calls):
    page = member_client.post(
        "/jobs/new/",
        {"device": device.pk, "kind": "video", "model": VIDEO, "when": "asap", "polite": "on", **SHORT},
    )
    assert page.status_code == 302 and len(admit_calls) == 1

    rest = bearer.post(
        "/api/jobs",
        {"device": device.pk, "kind": "video", "model": VIDEO, **SHORT},
        content_type="application/json",
    )
    assert rest.status_code == 201, rest.content
    assert len(admit_calls) == 2

    v1 = bearer.post(
        "/v1/videos",
        {"model": VIDEO, "prompt": "fox", "size": "832x480", "seconds": "2", "steps": 4},
        content_type="application/json",
    )
    assert v1.status_code == 200, v1.content
    assert len(admit_calls) == 3
    assert Job.objects.count() == 3
    assert {c["kind"] for c in admit_calls} == {"video"}


def test_run_again_admits_once_through_the_page_and_rest(member_client, bearer, device, member, admit_calls):
    from jobs.doors.intake import submit_request

    job, _ = submit_request(owner=member, device=device, kind="video", data={"model": VIDEO, **SHORT})
    assert len(admit_calls) == 1

    page = member_client.post(
        f"/jobs/{job.pk}/again/", {"model": VIDEO, "when": "asap", "polite": "on", **SHORT, "seconds": 3}
    )
    assert page.status_code == 302, page.content
    assert len(admit_calls) == 2

    rest = bearer.post(f"/api/jobs/{job.pk}/again", {"seconds": 4}, content_type="application/json")
    assert rest.status_code == 201, rest.content
    assert len(admit_calls) == 3
    assert sorted(Job.objects.values_list("params__seconds", flat=True)) == [2, 3, 4]


def test_a_refusal_is_admissions_and_queues_nothing_in_one_call(member_client, device, admit_calls):
    page = member_client.post(
        "/jobs/new/",
        {"device": device.pk, "kind": "video", "model": VIDEO, "when": "asap", **SHORT, "size": "1344x768",
         "seconds": 7, "steps": 8},
    )  # fmt: skip
    assert page.status_code == 400 and "55 minutes" in page.content.decode()
    assert len(admit_calls) == 1 and not Job.objects.exists()

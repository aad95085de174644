"""REST API for the queue: admins pause, resume, move and run next through the pages' services; everyone reads the
pool's plan and their own usage. Real tokens through the whole Django stack; jobs are rows (``ui_fixtures``)."""

from __future__ import annotations

import datetime as dt
import json

import pytest
from django.test import Client
from django.utils import timezone

from devices.models import Device
from hub.accounts.tokens import token_create
from jobs.models import Job
from jobs.quotas.services import device_use_record, quota_set
from jobs.tests.ui_fixtures import make_job

pytestmark = pytest.mark.django_db


def token_client(user, scopes=("read", "submit")) -> Client:
    _, raw = token_create(user=user, name="script", scopes=list(scopes))
    return Client(headers={"Authorization": f"Bearer {raw}"})


@pytest.fixture
def admin_api(admin_user):
    return token_client(admin_user)


@pytest.fixture
def member_api(member):
    return token_client(member)


def post(client: Client, url: str, body=None):
    return client.post(url, json.dumps(body or {}), content_type="application/json")


def order(client: Client, device) -> list[int]:
    return [row["id"] for row in client.get(f"/api/devices/{device.pk}/plan").json()["jobs"]]


def three_waiting(member, device) -> list[Job]:
    now = timezone.now()
    jobs = [make_job(member, device, prompt=f"job {i}") for i in range(3)]
    for i, job in enumerate(jobs):  # oldest first: the plan's order before anyone moves anything
        Job.objects.filter(pk=job.pk).update(created=now - dt.timedelta(minutes=10 - i))
    return jobs


def test_an_admin_pauses_and_resumes_a_lane_and_the_answer_is_the_plan(admin_api, member_api, member, device):
    make_job(member, device)
    paused = post(admin_api, f"/api/devices/{device.pk}/pause")
    assert paused.status_code == 200 and paused.json()["paused"] is True
    assert paused.json()["jobs"][0]["waiting_because"] == "The queue is paused by an admin."
    assert Device.objects.get(pk=device.pk).queue_paused
    assert member_api.get(f"/api/devices/{device.pk}/plan").json()["paused"] is True
    again = post(admin_api, f"/api/devices/{device.pk}/pause")  # idempotent
    assert again.status_code == 200 and again.json()["paused"] is True

    resumed = post(admin_api, f"/api/devices/{device.pk}/resume")
    assert resumed.status_code == 200 and resumed.json()["paused"] is False
    assert not Device.objects.get(pk=device.pk).queue_paused


def test_members_and_read_tokens_may_not_control_the_queue(member_api, admin_user, viewer, member, device):
    job = make_job(member, device)
    for url, body in [
        (f"/api/devices/{device.pk}/pause", None),
        (f"/api/jobs/{job.pk}/run-next", None),
        (f"/api/jobs/{job.pk}/move", {"direction": "up"}),
    ]:
        refused = post(member_api, url, body)
        assert refused.status_code == 403 and refused.json()["detail"] == "Only admins can change the queue."
    read_only = token_client(admin_user, scopes=("read",))
    assert post(read_only, f"/api/devices/{device.pk}/pause").status_code == 403
    assert not Device.objects.get(pk=device.pk).queue_paused


def test_move_and_run_next_reorder_the_plan_as_the_queue_page_does(admin_api, member, device):
    a, b, c = three_waiting(member, device)
    assert order(admin_api, device) == [a.pk, b.pk, c.pk]
    moved = post(admin_api, f"/api/jobs/{c.pk}/move", {"direction": "up"})
    assert moved.status_code == 200 and [r["id"] for r in moved.json()["jobs"]] == [a.pk, c.pk, b.pk]
    assert post(admin_api, f"/api/jobs/{a.pk}/move", {"direction": "down"}).status_code == 200
    assert order(admin_api, device) == [c.pk, a.pk, b.pk]
    first = post(admin_api, f"/api/jobs/{b.pk}/run-next")
    assert first.status_code == 200 and first.json()["jobs"][0]["id"] == b.pk
    story = [e.message for e in Job.objects.get(pk=b.pk).events.all()]
    assert any("Moved to the front by" in m for m in story)


@pytest.mark.parametrize("body", [{}, {"direction": "sideways"}, {"direction": 1}])
def test_a_move_needs_up_or_down(admin_api, member, device, body):
    job = make_job(member, device)
    refused = post(admin_api, f"/api/jobs/{job.pk}/move", body)
    assert refused.status_code == 422 and "direction" in refused.json()["errors"]


def test_a_job_that_no_longer_waits_cannot_be_moved(admin_api, member, device):
    done = make_job(member, device, state="done")
    for url, body in [
        (f"/api/jobs/{done.pk}/run-next", None),
        (f"/api/jobs/{done.pk}/move", {"direction": "up"}),
    ]:
        refused = post(admin_api, url, body)
        assert refused.status_code == 422 and refused.json()["detail"] == "Only waiting jobs can be moved."


@pytest.mark.parametrize("bad", ["abc", "9" * 10000, "424242"])
def test_bad_ids_are_a_404_json(admin_api, bad):
    assert post(admin_api, f"/api/devices/{bad}/pause").json() == {"detail": "No such device."}
    assert post(admin_api, f"/api/jobs/{bad}/run-next").json() == {"detail": "No such job."}


def test_the_pool_plan_lists_every_device_default_first(member_api, member, device):
    other = Device.objects.create(name="Attic PC", kind="tensorsharp", base_url="http://127.0.0.1:9")
    make_job(member, device)
    plan = member_api.get("/api/plan").json()
    assert [p["device"] for p in plan["devices"]] == [device.pk, other.pk]
    assert plan["devices"][0]["jobs"] and plan["devices"][1]["jobs"] == []
    assert plan["clear_at"] == plan["devices"][0]["clear_at"]


@pytest.mark.usefixtures("midday")  # 12 minutes "today", at any hour
def test_usage_is_ones_own_limits_and_device_minutes(member_api, member, other_member, device):
    quota_set(by=None, user=member, device_minutes_per_day=60)
    now = timezone.now()
    job = make_job(member, device, state="done")
    device_use_record(job_id=job.pk, owner_id=member.pk, device_id=device.pk,
                      started=now - dt.timedelta(minutes=12), ended=now)  # fmt: skip
    theirs = make_job(other_member, device, state="done")
    device_use_record(job_id=theirs.pk, owner_id=other_member.pk, device_id=device.pk,
                      started=now - dt.timedelta(minutes=30), ended=now)  # fmt: skip
    make_job(member, device)

    usage = member_api.get("/api/usage").json()
    assert usage["limits"]["device_minutes_per_day"] == {"value": 60, "own": True}
    assert usage["limits"]["max_queued"]["value"] is None
    assert 11.9 <= usage["device_minutes_today"] <= 12.1  # mine, not otto's 30
    assert usage["queued"] == 1 and usage["booked_minutes"] > 0
    assert "of 60 device minutes" in usage["summary"]
    assert len(usage["days"]) == 14 and usage["days"][-1]["device_minutes"] >= 11.9


def test_usage_needs_a_token(client):
    assert client.get("/api/usage").status_code == 401

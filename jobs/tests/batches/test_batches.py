"""Batches (``jobs.queue.batches``, ``jobs.doors.batch``, ``jobs.doors.api_batch``): several jobs from one submit,
admitted together (all or nothing, the quotas counting the whole batch), shown and cancelled as one group.

No worker runs: the jobs are rows; dispatch is not sent (``enqueue.send`` is stubbed)."""

from __future__ import annotations

import json
import random

import pytest
from django.test import Client
from hypothesis import given
from hypothesis import strategies as st

from hub.accounts.tokens import token_create
from jobs.doors.batch import batch_seeds, matrix_prompts, members_of, prompt_lines
from jobs.models import Job
from jobs.queue import enqueue, eta
from jobs.queue.admission import RequestInvalid
from jobs.queue.batches import MAX_BATCH, batch_counts
from jobs.quotas import services as quotas
from jobs.tests.ui_fixtures import VIDEO

FIELDS = {"model": VIDEO, "size": "832x480", "seconds": 2, "steps": 4}


# -- expansion (pure) ------------------------------------------------------------------------------------------
def test_a_prompt_per_line_skips_empty_lines():
    assert prompt_lines("a red car\n\n  a blue car  \r\n") == ["a red car", "a blue car"]


def test_a_matrix_makes_every_combination_first_part_slowest():
    assert matrix_prompts("a {red|blue} car at {dawn|night}") == [
        "a red car at dawn",
        "a red car at night",
        "a blue car at dawn",
        "a blue car at night",
    ]
    assert matrix_prompts("no parts") == ["no parts"]


def test_a_matrix_past_the_cap_is_refused_naming_the_size():
    with pytest.raises(RequestInvalid) as caught:
        matrix_prompts("{a|b|c|d|e|f|g|h} {1|2|3|4|5|6|7|8}")
    assert caught.value.errors["prompt"][0].startswith(f"A batch holds at most {MAX_BATCH} jobs")


def test_seeds_count_up_from_the_forms_seed_or_are_random():
    assert batch_seeds(7, 4) == [7, 8, 9, 10]
    assert batch_seeds(2**31 - 1, 2) == [2**31 - 1, 0]
    drawn = batch_seeds("", 4, rng=random.Random(1))
    assert len(set(drawn)) == 4


@given(st.lists(st.lists(st.text("abc", min_size=1, max_size=3), min_size=1, max_size=3), max_size=3))
def test_a_matrix_has_the_product_of_its_parts_and_each_option_appears(groups):
    text = " ".join("{" + "|".join(options) + "}" for options in groups) + " end"
    size = 1
    for options in groups:
        size *= len(options)
    prompts = matrix_prompts(text)
    assert len(prompts) == size
    for options in groups:
        for option in options:
            assert any(option in p for p in prompts)


def test_members_of_the_page_form():
    data = {"prompt": "one\ntwo\nthree", "seed": "5", "model": VIDEO}
    assert [m["prompt"] for m in members_of(data, "lines")] == ["one", "two", "three"]
    assert [m["seed"] for m in members_of(data, "seeds", "3")] == ["5", "6", "7"]
    assert len(members_of(data, "")) == 1
    with pytest.raises(RequestInvalid) as caught:
        members_of(data, "seeds", "51")
    assert "batch_count" in caught.value.errors
    with pytest.raises(RequestInvalid) as caught:
        members_of({"prompt": "\n \n"}, "lines")
    assert "prompt" in caught.value.errors


# -- REST ------------------------------------------------------------------------------------------------------
pytestmark_db = pytest.mark.django_db


@pytest.fixture(autouse=True)
def _quiet(request, settings, monkeypatch):
    settings.HUB_API_SUBMIT_RATE = "0"
    monkeypatch.setattr(enqueue, "send", lambda *a, **kw: None)


def bearer(user, scopes=("read", "submit")) -> Client:
    raw = token_create(user=user, name="script", scopes=list(scopes))[1]
    return Client(HTTP_AUTHORIZATION=f"Bearer {raw}")


def body(device, prompt, **over):
    return {"device": device.pk, "kind": "video", "prompt": prompt, **FIELDS, **over}


def post(client, jobs, headers=None):
    return client.post(
        "/api/jobs/batch", json.dumps({"jobs": jobs}), content_type="application/json", headers=headers or {}
    )


@pytest.mark.django_db
def test_a_batch_is_queued_with_one_id_and_answers_201(member, device):
    response = post(bearer(member), [body(device, p) for p in ("a", "b", "c")])
    assert response.status_code == 201, response.content
    out = response.json()
    assert [j["prompt"] for j in out["jobs"]] == ["a", "b", "c"]
    assert {j["batch"] for j in out["jobs"]} == {out["batch"]}
    assert Job.objects.filter(batch=out["batch"]).count() == 3
    assert out["summary"] == "batch of 3: 3 queued"
    assert out["estimate_ready_at"] is not None
    got = bearer(member).get(f"/api/jobs/{out['jobs'][0]['id']}").json()
    assert got["batch"] == out["batch"]


@pytest.mark.django_db
def test_a_refused_member_is_named_by_index_and_field_and_nothing_is_queued(member, device):
    jobs = [body(device, "a"), body(device, "b", size="1x1"), body(device, "c"), {"kind": "nope"}]
    response = post(bearer(member), jobs)
    assert response.status_code == 422, response.content
    errors = response.json()["errors"]
    assert set(errors) == {"jobs[1].size", "jobs[3].kind"}
    assert response.json()["detail"].startswith("jobs[1].size:")
    assert not Job.objects.exists()


@pytest.mark.django_db
def test_the_cap_and_the_shape_are_checked_before_anything(member, device):
    response = post(bearer(member), [body(device, "a")] * (MAX_BATCH + 1))
    assert response.status_code == 422
    assert "at most 50" in response.json()["errors"]["jobs"][0]
    response = bearer(member).post(
        "/api/jobs/batch", json.dumps({"jobs": [1]}), content_type="application/json"
    )
    assert response.json()["errors"] == {"jobs[0]": ["Each job is a JSON object."]}
    assert not Job.objects.exists()


@pytest.mark.django_db
def test_the_same_idempotency_key_queues_one_batch(member, device):
    client = bearer(member)
    first = post(client, [body(device, "a"), body(device, "b")], headers={"Idempotency-Key": "k1"})
    again = post(client, [body(device, "a"), body(device, "b")], headers={"Idempotency-Key": "k1"})
    assert (first.status_code, again.status_code) == (201, 200)
    assert again.json()["batch"] == first.json()["batch"]
    assert Job.objects.count() == 2


@pytest.mark.django_db
def test_quotas_count_the_whole_batch(admin_user, member, device):
    """Each member alone fits the daily limit; the batch of three does not: refused at its third job, none queued."""
    params = {"prompt": "fox", "size": "832x480", "seconds": 2, "steps": 4}
    est = eta.estimate(device_id=device.pk, device_kind="tiiny", kind="video", model_id=VIDEO, params=params)
    quotas.quota_set(by=admin_user, user=member, device_minutes_per_day=max(1, int(est * 2.5 / 60 + 0.5)))
    assert est * 2 <= quotas.limits_for(member).device_minutes_per_day * 60 < est * 3
    response = post(bearer(member), [body(device, "fox")] * 3)
    assert response.status_code == 422, response.content
    errors = response.json()["errors"]
    assert list(errors) == ["jobs[2]"]
    assert "Daily device time" in errors["jobs[2]"][0]
    assert not Job.objects.exists()
    assert post(bearer(member), [body(device, "fox")] * 2).status_code == 201


@pytest.mark.django_db
def test_the_queue_limit_counts_the_whole_batch(admin_user, member, device):
    quotas.quota_set(by=admin_user, user=member, max_queued=2)
    response = post(bearer(member), [body(device, "fox")] * 3)
    assert list(response.json()["errors"]) == ["jobs[2]"]
    assert not Job.objects.exists()


@pytest.mark.django_db
def test_a_viewer_cannot_submit_a_batch(viewer_client, device):
    response = post(viewer_client, [body(device, "a")])
    assert response.status_code == 403
    assert not Job.objects.exists()


@pytest.mark.django_db
def test_a_pool_batch_spreads_over_two_free_devices(member, device, kitchen):
    jobs = [{"kind": "video", "prompt": f"p{i}", **FIELDS} for i in range(6)]
    response = post(bearer(member), jobs)
    assert response.status_code == 201, response.content
    lanes = [j["device"] for j in response.json()["jobs"]]
    assert all(not j["pinned"] for j in response.json()["jobs"])
    assert lanes.count(device.pk) >= 2 and lanes.count(kitchen.pk) >= 2, lanes


@pytest.mark.django_db
def test_cancel_the_batch_as_one_owner_and_admin_only(member, other_member, viewer_client, device):
    made = post(bearer(member), [body(device, p, shared=True) for p in ("a", "b", "c")]).json()
    url = f"/api/batches/{made['batch']}/cancel"
    assert bearer(other_member).post(url).status_code == 403  # sees the shared jobs, may not cancel them
    assert viewer_client.post(url).status_code == 403
    assert not Job.objects.filter(state="cancelled").exists()
    response = bearer(member).post(
        url, json.dumps({"reason": "changed my mind"}), content_type="application/json"
    )
    assert response.status_code == 200, response.content
    assert {j["state"] for j in response.json()["jobs"]} == {"cancelled"}
    assert response.json()["summary"] == "batch of 3: 3 cancelled"


@pytest.mark.django_db
def test_a_private_batch_is_404_to_another_member(member, other_member, admin_user, device):
    made = post(bearer(member), [body(device, "a"), body(device, "b")]).json()
    assert bearer(other_member).get(f"/api/batches/{made['batch']}").status_code == 404
    assert bearer(other_member).post(f"/api/batches/{made['batch']}/cancel").status_code == 404
    assert bearer(admin_user).post(f"/api/batches/{made['batch']}/cancel").status_code == 200
    assert batch_counts([made["batch"]])[made["batch"]].text == "batch of 2: 2 cancelled"

"""The vault's nightly memory summaries: ``/kb/memory/schedule`` and ``/kb/memory/model``."""

from __future__ import annotations

import httpx

from .tiiny_helpers import CHAT, VIDEO


def test_it_requires_a_bearer_key_and_answers_502_when_locked(tiiny):
    for path in ("/kb/memory/schedule", "/kb/memory/model"):
        assert httpx.get(tiiny.base_url + path).status_code == 401
        assert httpx.put(tiiny.base_url + path, json={}).status_code == 401
    tiiny.power_cycle()
    resp = httpx.get(tiiny.base_url + "/kb/memory/model", headers=tiiny.headers)
    assert resp.status_code == 502


def test_it_reports_the_default_nightly_window_and_worker_state(tiiny):
    with tiiny.client() as c:
        body = c.get("/kb/memory/schedule").json()
    assert body == {
        "nightly_start_hour": 23,
        "nightly_end_hour": 5,
        "enabled": True,
        "worker": {"state": "idle"},
    }


def test_it_reports_the_summary_model_and_the_running_chat_models(tiiny):
    with tiiny.client() as c:
        assert c.get("/kb/memory/model").json() == {
            "model_id": CHAT,
            "automatic_summary_enabled": True,
            "running_models": [],
        }
        tiiny.load(CHAT)
        tiiny.load(VIDEO)
        assert c.get("/kb/memory/model").json()["running_models"] == [CHAT]  # chat models only


def test_it_stores_a_new_window_and_refuses_bad_hours(tiiny):
    with tiiny.client() as c:
        body = c.put("/kb/memory/schedule", json={"nightly_start_hour": 1, "nightly_end_hour": 4}).json()
        assert (body["nightly_start_hour"], body["nightly_end_hour"]) == (1, 4)
        assert c.get("/kb/memory/schedule").json()["nightly_start_hour"] == 1
        assert c.put("/kb/memory/schedule", json={"nightly_end_hour": 24}).status_code == 422
        assert c.put("/kb/memory/schedule", json={"enabled": "yes"}).status_code == 422
    tiiny.power_cycle()  # a setting, not runtime state: it survives
    tiiny.unlock()
    with tiiny.client() as c:
        assert c.get("/kb/memory/schedule").json()["nightly_start_hour"] == 1


def test_it_switches_the_summary_model_off_and_refuses_a_non_chat_model(tiiny):
    with tiiny.client() as c:
        assert c.put("/kb/memory/model", json={"model_id": ""}).json()["model_id"] == ""
        assert c.get("/kb/memory/model").json()["model_id"] == ""
        assert c.put("/kb/memory/model", json={"model_id": VIDEO}).status_code == 400
        assert c.put("/kb/memory/model", json={"model_id": CHAT}).json()["model_id"] == CHAT
    assert tiiny.counters()["requests"]["PUT /kb/memory/model"] == 3

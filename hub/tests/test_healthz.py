from __future__ import annotations

import time

import pytest
from django.test import Client

from hub.celery import BEAT_TICK_KEY, WORKER_HEARTBEAT_KEY

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def _clean_health_keys(redis_client):
    redis_client.delete(WORKER_HEARTBEAT_KEY, BEAT_TICK_KEY)
    yield
    redis_client.delete(WORKER_HEARTBEAT_KEY, BEAT_TICK_KEY)


def test_it_needs_no_login_and_reports_each_part(redis_client):
    redis_client.zadd(WORKER_HEARTBEAT_KEY, {"w@host": time.time() - 2})
    redis_client.set(BEAT_TICK_KEY, time.time() - 1)
    response = Client().get("/healthz")
    assert response.status_code == 200
    body = response.json()
    assert body["status"] == "ok"
    assert {k: body[k]["status"] for k in ("database", "redis", "worker", "beat")} == dict.fromkeys(
        ("database", "redis", "worker", "beat"), "ok"
    )


def test_it_is_503_with_the_reason_when_no_worker_runs(redis_client):
    redis_client.set(BEAT_TICK_KEY, time.time())
    response = Client().get("/healthz")
    assert response.status_code == 503
    assert response.json()["worker"] == {
        "status": "failing",
        "detail": "no worker has ever reported a heartbeat",
    }


def test_it_flags_a_stale_beat(redis_client):
    redis_client.zadd(WORKER_HEARTBEAT_KEY, {"w@host": time.time()})
    redis_client.set(BEAT_TICK_KEY, time.time() - 120)
    body = Client().get("/healthz").json()
    assert body["beat"]["status"] == "failing" and "last tick 120 s ago" in body["beat"]["detail"]


def test_it_is_503_and_pages_show_a_banner_when_redis_is_down(settings, member_client):
    from hub.redis_server import free_port

    settings.REDIS_URL = f"redis://127.0.0.1:{free_port()}/0"
    response = Client().get("/healthz")
    assert response.status_code == 503
    body = response.json()
    assert body["redis"]["status"] == "failing"
    assert body["database"]["status"] == "ok"
    page = member_client.get("/")
    assert page.status_code == 200
    assert b'id="banner-redis"' in page.content


@pytest.mark.integration
def test_it_is_200_with_a_real_worker_and_beat(transactional_db, live_worker, live_beat):
    from hub.testing import wait_for

    wait_for(lambda: Client().get("/healthz").status_code == 200, timeout=30, what="healthz 200")
    body = Client().get("/healthz").json()
    assert body["worker"]["status"] == "ok" and body["beat"]["status"] == "ok"

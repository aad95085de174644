from __future__ import annotations

import os
import time

import pytest
from django.test import Client

from hub.celery import BEAT_TICK_KEY, WORKER_HEARTBEAT_KEY
from hub.health import redis_url_warning

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


# --- who sees the details ---------------------------------------------------------------------------------
OUTSIDE = "192.0.2.44"  # TEST-NET-1: not loopback, not on the default allow-list


def _healthy(redis_client):
    redis_client.zadd(WORKER_HEARTBEAT_KEY, {"w@host": time.time()})
    redis_client.set(BEAT_TICK_KEY, time.time())


def test_an_anonymous_caller_from_outside_learns_only_ok(redis_client):
    _healthy(redis_client)
    response = Client(REMOTE_ADDR=OUTSIDE).get("/healthz")
    assert response.status_code == 200 and response.json() == {"status": "ok"}


def test_an_anonymous_caller_from_outside_learns_only_failing_without_the_reason(redis_client):
    redis_client.set(BEAT_TICK_KEY, time.time())  # no worker
    response = Client(REMOTE_ADDR=OUTSIDE).get("/healthz")
    assert response.status_code == 503 and response.json() == {"status": "failing"}
    assert b"heartbeat" not in response.content


def test_members_see_no_details_and_admins_do_from_anywhere(redis_client, member, admin_user):
    _healthy(redis_client)
    as_member = Client(REMOTE_ADDR=OUTSIDE)
    as_member.force_login(member)
    assert as_member.get("/healthz").json() == {"status": "ok"}
    as_admin = Client(REMOTE_ADDR=OUTSIDE)
    as_admin.force_login(admin_user)
    body = as_admin.get("/healthz").json()
    assert body["status"] == "ok" and body["worker"]["status"] == "ok" and "detail" in body["database"]


def test_a_proxied_request_from_loopback_does_not_pass_by_address(redis_client):
    _healthy(redis_client)
    response = Client(HTTP_X_FORWARDED_FOR="203.0.113.9").get("/healthz")  # REMOTE_ADDR is 127.0.0.1
    assert response.json() == {"status": "ok"}


def test_the_allow_list_takes_networks_and_none(redis_client, settings):
    _healthy(redis_client)
    settings.HUB_HEALTH_ALLOW = ["192.0.2.0/24"]
    assert "worker" in Client(REMOTE_ADDR=OUTSIDE).get("/healthz").json()
    assert Client(REMOTE_ADDR="198.51.100.1").get("/healthz").json() == {"status": "ok"}
    settings.HUB_HEALTH_ALLOW = []
    assert Client().get("/healthz").json() == {"status": "ok"}  # not even loopback


def test_a_bad_allow_list_stops_start_up_with_one_line():
    import subprocess
    import sys

    from django.conf import settings as dj

    env = {"PATH": "/usr/bin:/bin", "HUB_SECRET_KEY": "x", "HUB_HEALTH_ALLOW": "127.0.0.1,not-a-net"}
    proc = subprocess.run(
        [sys.executable, "-c", "import hub.settings"],
        cwd=dj.BASE_DIR,
        env=env,
        capture_output=True,
        text=True,
    )
    assert proc.returncode != 0 and "HUB_HEALTH_ALLOW: 'not-a-net' is not an IP address" in proc.stderr


@pytest.mark.parametrize(
    ("url", "warned"),
    [
        ("redis://redis.lan:6379/0", True),
        ("redis://192.168.1.5:6379/0", True),
        ("rediss://hub@[2001:db8::5]:6379/0", True),
        ("redis://:pw@redis.lan:6379/0", False),
        ("redis://127.0.0.1:6390/0", False),
        ("redis://localhost:6379/0", False),
        ("redis://[::1]:6379/0", False),
        ("unix:///run/redis.sock?db=0", False),
    ],
)
def test_a_redis_on_another_machine_without_a_password_is_warned_of(url, warned):
    warning = redis_url_warning(url)
    assert bool(warning) is warned, (url, warning)
    assert "Warning: no password" in warning or not warned


def test_the_status_page_warns_of_a_redis_url_without_a_password(settings, admin_client):
    settings.REDIS_URL = "redis://redis.invalid:6379/0"
    page = admin_client.get("/health/").content.decode()
    assert "Warning: no password for the Redis at redis.invalid" in page
    settings.REDIS_URL = os.environ["REDIS_URL"]  # the suite's own, on loopback with its password
    assert "Warning: no password" not in admin_client.get("/health/").content.decode()

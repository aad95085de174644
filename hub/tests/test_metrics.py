"""GET /metrics: real values from the database and Redis, and who may read them."""

from __future__ import annotations

import datetime as dt
import math
import subprocess
import sys
import time

import pytest
from django.test import Client
from django.utils import timezone
from prometheus_client.parser import text_string_to_metric_families

from devices.error_counts import DEVICE_ERRORS_KEY, note_device_error
from devices.models import Device
from hub import metrics as hub_metrics
from hub.celery import WORKER_HEARTBEAT_KEY
from jobs.models import Job, JobKind, JobState

pytestmark = pytest.mark.django_db

REDIS_KEYS = (
    DEVICE_ERRORS_KEY,
    hub_metrics.WS_COUNTS_KEY,
    hub_metrics.WS_SEEN_KEY,
    WORKER_HEARTBEAT_KEY,
)


@pytest.fixture(autouse=True)
def _clean_metric_keys(redis_client):
    redis_client.delete(*REDIS_KEYS)
    yield
    redis_client.delete(*REDIS_KEYS)


def scrape(client: Client | None = None, **extra) -> dict[tuple[str, frozenset], float]:
    response = (client or Client()).get("/metrics", **extra)
    assert response.status_code == 200, response.content[:300]
    assert response["Content-Type"].startswith("text/plain; version=")
    return {
        (sample.name, frozenset(sample.labels.items())): sample.value
        for family in text_string_to_metric_families(response.content.decode())
        for sample in family.samples
    }


def value(samples, name: str, **labels) -> float:
    return samples[(name, frozenset(labels.items()))]


def make_job(owner, device, **fields) -> Job:
    fields.setdefault("kind", "video")
    return Job.objects.create(owner=owner, device=device, model_id="m", params={}, **fields)


@pytest.fixture
def two_devices(db):
    pocket = Device.objects.create(name="Pocket", base_url="http://127.0.0.1:9", state=Device.State.ONLINE)
    desk = Device.objects.create(
        name="Desk PC", kind="tensorsharp", base_url="http://127.0.0.1:8", state="locked"
    )
    return pocket, desk


# --- what it reports ------------------------------------------------------------------------------------
def test_it_counts_jobs_by_state_and_kind_with_zeros_for_the_rest(member, two_devices):
    pocket, desk = two_devices
    make_job(member, pocket, state="queued")
    make_job(member, pocket, state="queued")
    make_job(member, desk, state="running", kind="image")
    make_job(member, desk, state="done", kind="speech")
    samples = scrape()
    assert value(samples, "tiiny_hub_jobs", state="queued", kind="video") == 2
    assert value(samples, "tiiny_hub_jobs", state="running", kind="image") == 1
    assert value(samples, "tiiny_hub_jobs", state="done", kind="speech") == 1
    assert value(samples, "tiiny_hub_jobs", state="failed", kind="mesh") == 0
    assert sum(v for (n, _), v in samples.items() if n == "tiiny_hub_jobs") == 4
    assert len([n for (n, _) in samples if n == "tiiny_hub_jobs"]) == len(JobState) * len(
        JobKind
    )  # every pair


def test_it_reports_queue_depth_and_drain_time_from_the_stored_plan(member, two_devices):
    pocket, desk = two_devices
    now = timezone.now()
    make_job(member, pocket, state="running", predicted_finish=now + dt.timedelta(seconds=300))
    make_job(member, pocket, state="queued", predicted_finish=now + dt.timedelta(seconds=1200))
    make_job(member, pocket, state="scheduled", predicted_finish=now + dt.timedelta(seconds=3000))
    make_job(member, pocket, state="done", predicted_finish=now + dt.timedelta(days=1))  # not in the queue
    # The plan has not reached this one yet: its estimate counts on top.
    make_job(member, desk, state="queued", estimate_s=90.0)
    samples = scrape()
    assert value(samples, "tiiny_hub_queue_depth", device="Pocket") == 2
    assert value(samples, "tiiny_hub_queue_drain_seconds", device="Pocket") == pytest.approx(3000, abs=5)
    assert value(samples, "tiiny_hub_queue_depth", device="Desk PC") == 1
    assert value(samples, "tiiny_hub_queue_drain_seconds", device="Desk PC") == pytest.approx(90)


def test_an_empty_or_overdue_queue_drains_in_zero_seconds(member, two_devices):
    pocket, _ = two_devices
    make_job(member, pocket, state="running", predicted_finish=timezone.now() - dt.timedelta(minutes=5))
    samples = scrape()
    assert value(samples, "tiiny_hub_queue_drain_seconds", device="Pocket") == 0
    assert value(samples, "tiiny_hub_queue_drain_seconds", device="Desk PC") == 0
    assert value(samples, "tiiny_hub_queue_depth", device="Desk PC") == 0


def test_it_marks_each_devices_current_state(two_devices):
    samples = scrape()
    assert value(samples, "tiiny_hub_device_state", device="Pocket", state="online") == 1
    assert value(samples, "tiiny_hub_device_state", device="Pocket", state="locked") == 0
    assert value(samples, "tiiny_hub_device_state", device="Desk PC", state="locked") == 1
    assert sum(v for (n, labels), v in samples.items() if n == "tiiny_hub_device_state") == 2


def test_it_builds_the_render_histogram_from_recently_finished_jobs(member, two_devices):
    pocket, desk = two_devices
    recent = timezone.now() - dt.timedelta(days=1)
    for seconds in (4.0, 400.0, 700.0):
        make_job(member, pocket, state="done", device_seconds=seconds, finished_at=recent)
    make_job(member, desk, state="done", kind="speech", device_seconds=2.5, finished_at=recent)
    make_job(
        member, pocket, state="done", device_seconds=50.0, finished_at=timezone.now() - dt.timedelta(days=40)
    )
    make_job(member, pocket, state="failed", device_seconds=30.0, finished_at=recent)
    samples = scrape()
    assert value(samples, "tiiny_hub_render_seconds_count", kind="video") == 3
    assert value(samples, "tiiny_hub_render_seconds_sum", kind="video") == pytest.approx(1104.0)
    assert value(samples, "tiiny_hub_render_seconds_bucket", kind="video", le="5.0") == 1
    assert value(samples, "tiiny_hub_render_seconds_bucket", kind="video", le="300.0") == 1
    assert value(samples, "tiiny_hub_render_seconds_bucket", kind="video", le="600.0") == 2
    assert value(samples, "tiiny_hub_render_seconds_bucket", kind="video", le="900.0") == 3
    assert value(samples, "tiiny_hub_render_seconds_bucket", kind="video", le="+Inf") == 3
    assert value(samples, "tiiny_hub_render_seconds_count", kind="speech") == 1
    assert value(samples, "tiiny_hub_render_seconds_count", kind="mesh") == 0


def test_the_render_window_is_a_setting(member, two_devices, settings):
    pocket, _ = two_devices
    make_job(
        member, pocket, state="done", device_seconds=50.0, finished_at=timezone.now() - dt.timedelta(days=40)
    )
    assert value(scrape(), "tiiny_hub_render_seconds_count", kind="video") == 0
    settings.HUB_METRICS_RENDER_DAYS = 60
    assert value(scrape(), "tiiny_hub_render_seconds_count", kind="video") == 1


def test_one_scrape_is_a_handful_of_queries(member, two_devices, django_assert_max_num_queries):
    pocket, desk = two_devices
    for device in (pocket, desk):
        for state in ("queued", "running", "done", "failed"):
            make_job(member, device, state=state, device_seconds=10, finished_at=timezone.now())
    for i in range(5):
        Device.objects.create(name=f"Extra {i}", base_url=f"http://127.0.0.1:{100 + i}")
    # jobs, queues, devices, device time (and once a day the days before it), render times, the last backups
    with django_assert_max_num_queries(7):
        Client().get("/metrics")


def test_the_render_query_uses_the_device_finished_index(member, two_devices):
    from django.db import connection

    from hub.testing import sqlite_query_plan

    if connection.vendor != "sqlite":
        pytest.skip("the plan text checked here is SQLite's; PostgreSQL picks its own plan on real data")
    device_ids = [d.pk for d in two_devices]
    # A year of finished work and one recent job, with statistics: the shape of a real hub (bench: 100k jobs).
    old = timezone.now() - dt.timedelta(days=400)
    states = ["done"] * 8 + ["failed", "cancelled", "queued", "interrupted"]
    Job.objects.bulk_create(
        Job(
            owner=member,
            device=two_devices[i % 2],
            kind="video",
            model_id="m",
            params={},
            state=states[i % len(states)],
            device_seconds=60,
            finished_at=old + dt.timedelta(minutes=i),
        )  # fmt: skip
        for i in range(3000)
    )
    make_job(member, two_devices[0], state="done", device_seconds=60, finished_at=timezone.now())
    # With statistics SQLite weighs the other (device, state) index too.
    _family, plan = sqlite_query_plan(lambda: hub_metrics._render_family(device_ids))
    assert "jobs_device_fair_idx" in plan, plan


def test_it_reports_the_newest_worker_heartbeat_age(redis_client, db):
    assert value(scrape(), "tiiny_hub_worker_heartbeat_age_seconds") == math.inf
    redis_client.zadd(WORKER_HEARTBEAT_KEY, {"old@host": time.time() - 100, "w@host": time.time() - 7})
    assert value(scrape(), "tiiny_hub_worker_heartbeat_age_seconds") == pytest.approx(7, abs=2)


def test_it_still_answers_from_the_database_when_redis_is_down(settings, member, two_devices):
    from hub.redis_server import free_port

    make_job(member, two_devices[0], state="queued")
    settings.REDIS_URL = f"redis://127.0.0.1:{free_port()}/0"
    samples = scrape()
    assert value(samples, "tiiny_hub_redis_up") == 0
    assert value(samples, "tiiny_hub_jobs", state="queued", kind="video") == 1
    assert not any(n == "tiiny_hub_websocket_connections" for n, _ in samples)


def test_it_includes_the_web_process_own_metrics(db):
    samples = scrape()
    assert any(name.startswith("process_") for name, _ in samples)
    assert not any(name.startswith("python_gc") for name, _ in samples)  # not the global default registry


# --- device request errors, counted by the clients through Redis -----------------------------------------
def test_it_counts_device_errors_by_device_and_kind_from_the_real_client(db, tiiny):
    from devices.services import device_register
    from devices.tasks import poll_device

    pocket = device_register(name="Pocket", kind="tiiny", base_url=tiiny.base_url, api_key=tiiny.api_key)
    assert poll_device(pocket.pk) == Device.State.ONLINE
    tiiny.power_cycle()
    assert poll_device(pocket.pk) == Device.State.LOCKED
    assert poll_device(pocket.pk) == Device.State.LOCKED
    samples = scrape()
    locked = value(samples, "tiiny_hub_device_request_errors_total", device="Pocket", kind="DeviceLocked")
    assert locked >= 2
    assert not any(
        n == "tiiny_hub_device_request_errors_total" and dict(labels)["kind"] != "DeviceLocked"
        for n, labels in samples
    )


def test_errors_from_a_url_no_device_has_are_grouped_as_unregistered(db):
    from devices.clients import TiinyClient
    from devices.errors import DeviceUnreachable
    from hub.redis_server import free_port

    with TiinyClient(f"http://127.0.0.1:{free_port()}", "k") as client, pytest.raises(DeviceUnreachable):
        client.sys_status()
    samples = scrape()
    assert (
        value(
            samples, "tiiny_hub_device_request_errors_total", device="unregistered", kind="DeviceUnreachable"
        )
        == 1
    )


def test_an_error_seen_twice_is_counted_once(db, redis_client):
    from devices.errors import DeviceBusy

    exc = DeviceBusy()
    note_device_error("http://x", exc)
    note_device_error("http://x", exc)
    assert redis_client.hgetall(DEVICE_ERRORS_KEY) == {b"http://x\tDeviceBusy": b"1"}


# --- open websockets ------------------------------------------------------------------------------------
@pytest.mark.django_db(transaction=True)
def test_it_counts_open_websockets_and_forgets_closed_and_refused_ones(member):
    from channels.testing import WebsocketCommunicator
    from django.contrib.auth.models import AnonymousUser

    from hub.consumers import HubConsumer
    from hub.testing import run_async

    def gauge() -> float:
        return value(scrape(), "tiiny_hub_websocket_connections")

    async def scenario() -> list[float]:
        from asgiref.sync import sync_to_async

        seen = []
        sockets = []
        for _ in range(2):
            communicator = WebsocketCommunicator(HubConsumer.as_asgi(), "/ws/hub/")
            communicator.scope["user"] = member
            assert (await communicator.connect())[0]
            sockets.append(communicator)
        refused = WebsocketCommunicator(HubConsumer.as_asgi(), "/ws/hub/")
        refused.scope["user"] = AnonymousUser()
        assert not (await refused.connect())[0]
        seen.append(await sync_to_async(gauge)())
        await sockets[0].disconnect()
        seen.append(await sync_to_async(gauge)())
        await sockets[1].disconnect()
        seen.append(await sync_to_async(gauge)())
        return seen

    assert run_async(scenario) == [2, 1, 0]


def test_a_process_that_died_with_open_sockets_drops_out_of_the_sum(redis_client, db):
    now = time.time()
    redis_client.hset(hub_metrics.WS_COUNTS_KEY, mapping={"alive:1": 3, "dead:2": 5})
    redis_client.zadd(
        hub_metrics.WS_SEEN_KEY, {"alive:1": now - 10, "dead:2": now - hub_metrics.WS_STALE_S - 1}
    )
    assert value(scrape(), "tiiny_hub_websocket_connections") == 3
    assert redis_client.hkeys(hub_metrics.WS_COUNTS_KEY) == [b"alive:1"]  # tidied up
    assert redis_client.zrange(hub_metrics.WS_SEEN_KEY, 0, -1) == [b"alive:1"]


# --- who may read ---------------------------------------------------------------------------------------
def test_loopback_may_read_without_signing_in(db):
    assert Client().get("/metrics").status_code == 200
    assert Client().get("/metrics", REMOTE_ADDR="::1").status_code == 200
    assert Client().get("/metrics", REMOTE_ADDR="::ffff:127.0.0.1").status_code == 200


def test_another_address_gets_a_short_403_and_never_the_sign_in_page(db):
    response = Client().get("/metrics", REMOTE_ADDR="192.168.1.50")
    assert response.status_code == 403
    assert response["Content-Type"].startswith("text/plain")
    assert b"HUB_METRICS_ALLOW" in response.content and b"tiiny_hub" not in response.content


def test_the_allow_list_takes_networks(db, settings):
    settings.HUB_METRICS_ALLOW = ["10.0.0.0/8"]
    assert Client().get("/metrics", REMOTE_ADDR="10.1.2.3").status_code == 200
    assert Client().get("/metrics", REMOTE_ADDR="127.0.0.1").status_code == 403


def test_a_forwarded_request_does_not_pass_on_the_proxys_loopback_address(db):
    # A reverse proxy on this machine connects from 127.0.0.1 on behalf of anyone.
    response = Client().get("/metrics", REMOTE_ADDR="127.0.0.1", HTTP_X_FORWARDED_FOR="203.0.113.9")
    assert response.status_code == 403


def test_an_admin_token_may_read_from_anywhere_and_a_member_token_may_not(admin_user, member):
    from hub.accounts.tokens import token_create

    _, admin_raw = token_create(user=admin_user, name="prometheus", scopes=["read"])
    _, member_raw = token_create(user=member, name="curious", scopes=["read"])
    outside = {"REMOTE_ADDR": "192.168.1.50"}
    samples = scrape(**outside, HTTP_AUTHORIZATION=f"Bearer {admin_raw}")
    assert ("tiiny_hub_redis_up", frozenset()) in samples
    member_response = Client().get("/metrics", **outside, HTTP_AUTHORIZATION=f"Bearer {member_raw}")
    assert member_response.status_code == 403
    bogus = Client().get("/metrics", **outside, HTTP_AUTHORIZATION="Bearer thub_" + "x" * 43)
    assert bogus.status_code == 403


def test_a_revoked_admin_token_may_not_read(admin_user):
    from hub.accounts.tokens import token_create, token_revoke

    token, raw = token_create(user=admin_user, name="old", scopes=["read"])
    token_revoke(token=token, by=admin_user)
    response = Client().get("/metrics", REMOTE_ADDR="192.168.1.50", HTTP_AUTHORIZATION=f"Bearer {raw}")
    assert response.status_code == 403


def test_a_signed_in_admin_may_look_in_the_browser_and_a_member_may_not(admin_client, member_client):
    assert admin_client.get("/metrics", REMOTE_ADDR="192.168.1.50").status_code == 200
    assert member_client.get("/metrics", REMOTE_ADDR="192.168.1.50").status_code == 403


def test_a_bad_allow_list_stops_start_up_with_one_line(tmp_path):
    env = {"PATH": "/usr/bin:/bin", "HUB_SECRET_KEY": "k", "HUB_DATA_DIR": str(tmp_path),
           "HUB_METRICS_ALLOW": "127.0.0.1,localhost"}  # fmt: skip
    result = subprocess.run(
        [sys.executable, "manage.py", "check"], env=env, capture_output=True, text=True, timeout=60
    )
    assert result.returncode != 0
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and "HUB_METRICS_ALLOW: 'localhost' is not an IP address or network" in lines[0]

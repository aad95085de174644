"""Free space under the data folder on /healthz, the admins' health page and /metrics (``hub.disk``).

The numbers are the real disk's (``shutil.disk_usage`` of MEDIA_ROOT's disk); a floor above them makes it low."""

from __future__ import annotations

import shutil
import time

import pytest
from django.test import Client
from prometheus_client.parser import text_string_to_metric_families

from hub.celery import BEAT_TICK_KEY, WORKER_HEARTBEAT_KEY
from hub.disk import MB, disk_space

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def _healthy_processes(redis_client):
    """Worker and beat report in, so the disk is the only part that may fail."""
    redis_client.zadd(WORKER_HEARTBEAT_KEY, {"w@host": time.time()})
    redis_client.set(BEAT_TICK_KEY, time.time())
    yield
    redis_client.delete(WORKER_HEARTBEAT_KEY, BEAT_TICK_KEY)


def test_healthz_details_show_the_free_space_and_the_floor(settings):
    settings.HUB_MIN_FREE_MB = 1
    body = Client().get("/healthz").json()
    got = body["disk"]
    assert got["status"] == "ok" and body["status"] == "ok"
    real = shutil.disk_usage(settings.MEDIA_ROOT if settings.MEDIA_ROOT.exists() else settings.DATA_DIR)
    assert abs(got["free_bytes"] - real.free) < 64 * MB and got["total_bytes"] == real.total
    assert got["min_free_bytes"] == MB and got["path"] == str(settings.MEDIA_ROOT)
    assert "free of" in got["detail"] and "new renders are refused below 1 MB" in got["detail"]


def test_healthz_fails_below_the_floor(settings):
    settings.HUB_MIN_FREE_MB = disk_space().free // MB + 10_000
    response = Client().get("/healthz")
    assert response.status_code == 503
    disk = response.json()["disk"]
    assert disk["status"] == "failing" and "Usage page" in disk["detail"]


def test_a_floor_of_zero_never_fails(settings):
    settings.HUB_MIN_FREE_MB = 0
    disk = Client().get("/healthz").json()["disk"]
    assert disk["status"] == "ok" and "no floor" in disk["detail"]


def test_strangers_learn_only_ok_or_failing(settings):
    settings.HUB_HEALTH_ALLOW = ["10.9.9.9/32"]
    body = Client().get("/healthz").json()
    assert "disk" not in body


def test_the_health_page_shows_the_disk(settings, admin_client):
    settings.HUB_MIN_FREE_MB = disk_space().free // MB + 10_000
    page = admin_client.get("/health/").content.decode()
    row = page.split('<tr id="health-disk">', 1)[1].split("</tr>", 1)[0]  # the parts table's row
    assert "Free disk space" in row and "failing" in row
    block = page.split('id="health-disk-space"', 1)[1].split("</section>", 1)[0]
    assert disk_space().free_text in block and str(settings.MEDIA_ROOT) in block
    assert "The disk is nearly full: new renders are refused" in block and 'href="/usage/"' in block


def test_metrics_export_the_free_bytes(settings, admin_client):
    settings.HUB_MIN_FREE_MB = 500
    text = admin_client.get("/metrics").content.decode()
    samples = {s.name: s.value for f in text_string_to_metric_families(text) for s in f.samples}
    assert abs(samples["tiiny_hub_disk_free_bytes"] - disk_space().free) < 64 * MB
    assert samples["tiiny_hub_disk_total_bytes"] == disk_space().total
    assert samples["tiiny_hub_disk_min_free_bytes"] == 500 * MB

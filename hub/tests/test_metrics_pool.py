"""GET /metrics per device (queue, busy, usable, device time) and for the pool (jobs for any device, usable devices,
jobs no device of theirs may start). Two devices; jobs for any device are placed by the pool planner."""

from __future__ import annotations

import datetime as dt

import pytest
from django.utils import timezone

from devices.models import Device
from hub import metrics as hub_metrics
from hub.tests.test_metrics import scrape, value
from jobs.models import Job
from jobs.queue.pool import rebalance
from jobs.quotas.services import device_use_record
from jobs.tests.ui_fixtures import make_job

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def _no_kept_sums():
    """The sums of the days before today are kept in Redis for the day, across tests: each test sums its own."""
    from django.core.cache import cache

    key = hub_metrics.SPANS_KEY.format(hub_metrics._cutoff(timezone.now()))
    cache.delete(key)
    yield
    cache.delete(key)


def any_jobs(owner, device, kitchen, n: int) -> list[Job]:
    jobs = [make_job(owner, device, pinned=False, pool=[device.pk, kitchen.pk]) for _ in range(n)]
    rebalance()
    return list(Job.objects.filter(pk__in=[j.pk for j in jobs]))


def test_each_lane_and_the_pool_are_counted(member, device, kitchen):
    jobs = any_jobs(member, device, kitchen, 5)
    make_job(member, kitchen, prompt="pinned to the kitchen")
    make_job(member, device, state="running")
    samples = scrape()
    lanes = {d.name: sum(1 for j in jobs if j.device_id == d.pk) for d in (device, kitchen)}
    assert lanes["Pocket"] and lanes["Kitchen Tiiny"]  # the pool spread them
    assert value(samples, "tiiny_hub_queue_depth", device="Pocket") == lanes["Pocket"]
    assert value(samples, "tiiny_hub_queue_depth", device="Kitchen Tiiny") == lanes["Kitchen Tiiny"] + 1
    assert value(samples, "tiiny_hub_queue_depth_any", device="Kitchen Tiiny") == lanes["Kitchen Tiiny"]
    assert value(samples, "tiiny_hub_device_busy", device="Pocket") == 1
    assert value(samples, "tiiny_hub_device_busy", device="Kitchen Tiiny") == 0
    assert value(samples, "tiiny_hub_device_usable", device="Pocket") == 1
    assert value(samples, "tiiny_hub_pool_waiting_jobs") == 5
    assert value(samples, "tiiny_hub_pool_devices_usable") == 2
    assert value(samples, "tiiny_hub_pool_stranded_jobs") == 0


def test_a_device_away_or_paused_is_not_usable_and_strands_only_what_nowhere_else_may_run(
    member, device, kitchen
):
    any_jobs(member, device, kitchen, 4)
    Device.objects.filter(pk=kitchen.pk).update(state=Device.State.UNREACHABLE)
    rebalance()  # its jobs for any device move to Pocket at once
    samples = scrape()
    assert value(samples, "tiiny_hub_device_usable", device="Kitchen Tiiny") == 0
    assert value(samples, "tiiny_hub_pool_devices_usable") == 1
    assert value(samples, "tiiny_hub_queue_depth_any", device="Pocket") == 4
    assert value(samples, "tiiny_hub_pool_stranded_jobs") == 0

    Device.objects.filter(pk=device.pk).update(queue_paused=True)
    rebalance()  # nowhere to go: they wait where they are
    samples = scrape()
    assert value(samples, "tiiny_hub_pool_devices_usable") == 0
    assert value(samples, "tiiny_hub_device_usable", device="Pocket") == 0
    assert value(samples, "tiiny_hub_pool_stranded_jobs") == 4


def test_device_seconds_count_each_devices_measured_time_and_the_running_span(member, device, kitchen):
    jobs = any_jobs(member, device, kitchen, 2)
    assert sorted(j.device_id for j in jobs) == [device.pk, kitchen.pk]  # one in each lane
    now = timezone.now()
    for job, minutes in zip(sorted(jobs, key=lambda j: j.device_id), (10, 25), strict=True):
        device_use_record(job_id=job.pk, owner_id=member.pk, device_id=job.device_id,
                          started=now - dt.timedelta(minutes=minutes), ended=now)  # fmt: skip
    first = scrape()
    assert value(first, "tiiny_hub_device_seconds_total", device="Pocket") == pytest.approx(600, abs=1)
    assert value(first, "tiiny_hub_device_seconds_total", device="Kitchen Tiiny") == pytest.approx(
        1500, abs=1
    )

    make_job(member, kitchen, state="running")  # started two minutes ago: counted so far
    later = scrape()
    running = value(later, "tiiny_hub_device_seconds_total", device="Kitchen Tiiny") - 1500
    assert 120 <= running < 180
    assert value(later, "tiiny_hub_device_seconds_total", device="Pocket") == pytest.approx(600, abs=1)


def test_the_days_before_are_summed_once_and_the_day_on_each_scrape(
    member, device, kitchen, django_assert_max_num_queries
):
    job = make_job(member, device, state="done")
    now = timezone.now()
    old = now - dt.timedelta(days=3)
    device_use_record(job_id=job.pk, owner_id=member.pk, device_id=device.pk,
                      started=old - dt.timedelta(minutes=5), ended=old)  # fmt: skip
    assert value(scrape(), "tiiny_hub_device_seconds_total", device="Pocket") == pytest.approx(300, abs=1)
    device_use_record(job_id=job.pk, owner_id=member.pk, device_id=device.pk,
                      started=now - dt.timedelta(minutes=1), ended=now)  # fmt: skip
    with django_assert_max_num_queries(6):  # the days before come from Redis now
        samples = scrape()
    assert value(samples, "tiiny_hub_device_seconds_total", device="Pocket") == pytest.approx(360, abs=1)


def test_the_days_spans_are_found_on_the_ended_index(member, device, kitchen):
    from django.db import connection

    from hub.testing import sqlite_query_plan
    from jobs.models import DeviceUse

    if connection.vendor != "sqlite":
        pytest.skip("the plan text checked here is SQLite's; PostgreSQL picks its own plan on real data")
    job = make_job(member, device, state="done")
    old = timezone.now() - dt.timedelta(days=400)
    DeviceUse.objects.bulk_create(
        DeviceUse(owner=member, job=job, device=(device, kitchen)[i % 2], started=old, ended=old, seconds=60)
        for i in range(3000)
    )
    names = {device.pk: device.name, kitchen.pk: kitchen.name}
    hub_metrics._device_seconds_family(names, {})  # the days before: summed once, kept
    # With statistics SQLite weighs the device index for a GROUP BY.
    family, plan = sqlite_query_plan(lambda: hub_metrics._device_seconds_family(names, {}))
    assert "jobs_deviceuse_ended_idx" in plan, plan
    assert sorted(s.value for s in family.samples) == [1500 * 60, 1500 * 60]

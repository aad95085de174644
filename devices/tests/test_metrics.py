from __future__ import annotations

import datetime as dt

import pytest

from devices.metrics import Sample, chart_series, metric_add, metrics_prune
from devices.models import Device, DeviceMetric

pytestmark = pytest.mark.django_db
T0 = dt.datetime(2026, 11, 1, 12, 0, 0, tzinfo=dt.UTC)


@pytest.fixture
def device():
    return Device.objects.create(name="d", kind="tiiny", base_url="http://x")


def test_it_downsamples_readings_into_10_second_and_5_minute_buckets(device):
    for i in range(30):  # one reading every 2 s for a minute
        metric_add(
            device_id=device.pk,
            sample=Sample(npu_util=i, npu_mem=50, cpu=10, mem=None),
            at=T0 + dt.timedelta(seconds=2 * i),
        )
    ten = DeviceMetric.objects.filter(device=device, resolution=10)
    five = DeviceMetric.objects.filter(device=device, resolution=300)
    assert ten.count() == 6 and all(m.samples == 5 for m in ten)
    assert five.count() == 1 and five.get().samples == 30
    series = chart_series(device_id=device.pk, range_name="hour", now=T0 + dt.timedelta(minutes=1))
    assert series["npu_util"][0] == 2.0  # mean of 0..4
    assert series["mem"][0] == 0.0
    assert len(series["t"]) == 6
    day = chart_series(device_id=device.pk, range_name="day", now=T0 + dt.timedelta(minutes=1))
    assert day["npu_util"] == [14.5] and day["resolution"] == 300


def test_it_prunes_points_past_their_retention(device):
    for age in (dt.timedelta(hours=1), dt.timedelta(hours=25), dt.timedelta(days=29), dt.timedelta(days=31)):
        metric_add(device_id=device.pk, sample=Sample(1, 1, 1, 1), at=T0 - age)
    deleted = metrics_prune(now=T0)
    left = sorted((m.resolution, T0 - m.bucket) for m in DeviceMetric.objects.all())
    assert deleted == 4  # 10 s points older than 24 h (3) and the 5 min point older than 30 days (1)
    assert [r for r, _ in left] == [10, 300, 300, 300]
    assert all(age < dt.timedelta(days=30) for _, age in left)


def test_it_keeps_a_month_small_and_the_chart_query_to_one_query(device, django_assert_num_queries):
    start = T0 - dt.timedelta(days=30)
    rows = []
    for i in range(30 * 288):  # a month of 5 minute points
        rows.append(
            DeviceMetric(
                device=device,
                resolution=300,
                bucket=start + dt.timedelta(minutes=5 * i),
                samples=150,
                npu_util_sum=150 * 40,
                npu_mem_sum=0,
                cpu_sum=0,
                mem_sum=0,
            )
        )
    for i in range(24 * 360):  # a day of 10 second points
        rows.append(
            DeviceMetric(
                device=device,
                resolution=10,
                bucket=T0 - dt.timedelta(seconds=10 * i),
                samples=5,
                npu_util_sum=5 * 40,
                npu_mem_sum=0,
                cpu_sum=0,
                mem_sum=0,
            )
        )
    DeviceMetric.objects.bulk_create(rows, batch_size=2000)
    assert metrics_prune(now=T0) <= 1
    assert DeviceMetric.objects.count() <= 30 * 288 + 24 * 360 + 1
    with django_assert_num_queries(1):
        hour = chart_series(device_id=device.pk, range_name="hour", now=T0)
    assert len(hour["t"]) == 361 and hour["npu_util"][0] == 40.0

"""Metric history: downsampled buckets, the chart query and pruning.

Two resolutions are kept per device: 10-second points for 24 hours and 5-minute points for 30 days, i.e. at
most 8,640 + 8,640 rows per device however long the hub runs. Each reading is added to both buckets with an
UPDATE of F() sums, so concurrent writers never lose a sample and no read-modify-write race exists.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass

from django.db import IntegrityError, transaction
from django.db.models import F
from django.utils import timezone

from devices.models import DeviceMetric

RES_10S = DeviceMetric.Resolution.TEN_SECONDS
RES_5M = DeviceMetric.Resolution.FIVE_MINUTES
KEEP = {RES_10S: dt.timedelta(hours=24), RES_5M: dt.timedelta(days=30)}
RANGES = {  # chart range -> (resolution, span)
    "hour": (RES_10S, dt.timedelta(hours=1)),
    "day": (RES_5M, dt.timedelta(days=1)),
    "week": (RES_5M, dt.timedelta(days=7)),
    "month": (RES_5M, dt.timedelta(days=30)),
}
SERIES = ("npu_util", "npu_mem", "cpu", "mem")


@dataclass(frozen=True)
class Sample:
    """Percentages; ``None`` counts as 0 (the device reports no NPU utilisation while nothing is loaded)."""

    npu_util: float | None
    npu_mem: float | None
    cpu: float | None
    mem: float | None


def bucket_start(at: dt.datetime, resolution: int) -> dt.datetime:
    epoch = int(at.timestamp())
    return dt.datetime.fromtimestamp(epoch - epoch % resolution, tz=dt.UTC)


def metric_add(*, device_id: int, sample: Sample, at: dt.datetime) -> None:
    values = {name: float(getattr(sample, name) or 0.0) for name in SERIES}
    for resolution in (RES_10S, RES_5M):
        bucket = bucket_start(at, resolution)
        qs = DeviceMetric.objects.filter(device_id=device_id, resolution=resolution, bucket=bucket)
        increments = {f"{n}_sum": F(f"{n}_sum") + v for n, v in values.items()}
        if qs.update(samples=F("samples") + 1, **increments):
            continue
        try:
            with transaction.atomic():
                DeviceMetric.objects.create(
                    device_id=device_id,
                    resolution=resolution,
                    bucket=bucket,
                    samples=1,
                    **{f"{n}_sum": v for n, v in values.items()},
                )
        except IntegrityError:  # another writer created the bucket between our UPDATE and INSERT
            qs.update(samples=F("samples") + 1, **increments)


def chart_series(*, device_id: int, range_name: str = "hour", now: dt.datetime | None = None) -> dict:
    """uPlot-ready columns: ``{"t": [unix s], "npu_util": [...], "npu_mem": [...], "cpu": [...], "mem": [...]}``."""
    resolution, span = RANGES.get(range_name, RANGES["hour"])
    since = (now or timezone.now()) - span
    rows = (
        DeviceMetric.objects.filter(device_id=device_id, resolution=resolution, bucket__gte=since)
        .order_by("bucket")
        .values_list("bucket", "samples", *(f"{n}_sum" for n in SERIES))
    )
    out: dict[str, list] = {"t": [], **{n: [] for n in SERIES}}
    for bucket, samples, *sums in rows:
        out["t"].append(int(bucket.timestamp()))
        for name, total in zip(SERIES, sums, strict=True):
            out[name].append(round(total / samples, 1) if samples else None)
    out["resolution"] = int(resolution)
    return out


def metrics_prune(*, now: dt.datetime | None = None) -> int:
    """Delete points past their resolution's retention. Returns the number of rows deleted."""
    now = now or timezone.now()
    deleted = 0
    for resolution, keep in KEEP.items():
        deleted += DeviceMetric.objects.filter(resolution=resolution, bucket__lt=now - keep).delete()[0]
    return deleted

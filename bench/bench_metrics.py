"""Chart query over a month of history: rows kept per device and the time of each chart range.

    HUB_SECRET_KEY=x .venv/bin/python bench/bench_metrics.py
Uses a throw-away SQLite database in a temp dir (the real one is never touched).
"""

from __future__ import annotations

import datetime as dt
import os
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
os.environ.setdefault("HUB_SECRET_KEY", "bench-only")
os.environ["DATABASE_URL"] = f"sqlite:///{tempfile.mkdtemp()}/bench.sqlite3"
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "hub.settings")

import django

django.setup()
from django.core.management import call_command  # noqa: E402

from devices.metrics import Sample, chart_series, metric_add, metrics_prune  # noqa: E402
from devices.models import Device, DeviceMetric  # noqa: E402

call_command("migrate", verbosity=0)
device = Device.objects.create(name="bench", kind="tiiny", base_url="http://x")
now = dt.datetime.now(dt.UTC)
rows = [
    DeviceMetric(
        device=device,
        resolution=300,
        bucket=now - dt.timedelta(minutes=5 * i),
        samples=150,
        npu_util_sum=6000,
        npu_mem_sum=6000,
        cpu_sum=1500,
        mem_sum=3000,
    )
    for i in range(31 * 288)
]
rows += [
    DeviceMetric(
        device=device,
        resolution=10,
        bucket=now - dt.timedelta(seconds=10 * i),
        samples=5,
        npu_util_sum=200,
        npu_mem_sum=200,
        cpu_sum=50,
        mem_sum=100,
    )
    for i in range(25 * 360)
]
DeviceMetric.objects.bulk_create(rows, batch_size=2000)
pruned = metrics_prune(now=now)
rows = DeviceMetric.objects.count()
started = time.perf_counter()
for i in range(500):
    metric_add(device_id=device.pk, sample=Sample(50, 40, 10, 20), at=now + dt.timedelta(seconds=2 * i))
record_ms = (time.perf_counter() - started) / 500 * 1000
lines = [
    "## Metric history (bench_metrics.py)\n",
    "A month of 2-second readings for one device, downsampled to 10 s points (24 h) and 5 min points (30 days),",
    "on SQLite. Targets: a month stays under 20,000 rows per device; a month's chart query under 200 ms.\n",
    "| measure | value |",
    "|---|---|",
    f"| rows kept for a month | {rows} (pruned {pruned}) |",
    f"| record one reading | {record_ms:.2f} ms |",
]
for name in ("hour", "day", "week", "month"):
    started = time.perf_counter()
    for _ in range(20):
        data = chart_series(device_id=device.pk, range_name=name, now=now)
    took = (time.perf_counter() - started) / 20 * 1000
    lines.append(f"| chart, last {name} | {len(data['t'])} points in {took:.1f} ms |")
print("\n".join(lines))

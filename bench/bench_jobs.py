"""The queue, dashboard and history at 100,000 jobs: the indexes keep every hot query flat.

Builds a throw-away SQLite database with 100k jobs (5 people, 2 devices, about two years of finished work,
300 waiting), then times the scheduler's reads (what dispatch does before each job), the plan, a dashboard and
a gallery page through the real views, and a prompt search. Targets: each under 100 ms.
"""

from __future__ import annotations

import datetime as dt
import os
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
TMP = tempfile.mkdtemp(prefix="bench-jobs-")
os.environ.setdefault("HUB_SECRET_KEY", "bench-only")
os.environ["HUB_DATA_DIR"] = TMP
os.environ["DATABASE_URL"] = f"sqlite:///{TMP}/bench.sqlite3"
os.environ["HUB_INSECURE_FAST_HASHER"] = "1"
os.environ["HUB_ALLOWED_HOSTS"] = "testserver"
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "hub.settings")
# Views render without Redis (the banner probe fails fast); point it at a closed port explicitly.
os.environ["REDIS_URL"] = "redis://127.0.0.1:1/0"

import django  # noqa: E402

django.setup()
from django.core.management import call_command  # noqa: E402
from django.db import connection  # noqa: E402
from django.test import Client  # noqa: E402
from django.test.utils import CaptureQueriesContext  # noqa: E402
from django.utils import timezone  # noqa: E402

from devices.models import Device  # noqa: E402
from hub.accounts.services import user_create_or_update  # noqa: E402
from jobs.models import Job, JobKind, JobState  # noqa: E402

TOTAL = int(os.environ.get("BENCH_JOBS", "100000"))
WAITING = 300
TARGET_MS = 100.0


def build() -> tuple[list, list]:
    call_command("migrate", verbosity=0)
    people = [
        user_create_or_update(username=f"p{i}", role="member", password="bench-pass-1").user for i in range(5)
    ]
    devices = [Device.objects.create(name=f"d{i}", kind="tiiny", base_url=f"http://10.0.0.{i}", state="online")
               for i in range(2)]  # fmt: skip
    rng = random.Random(7)
    now = timezone.now()
    words = "fox snow river neon city cat robot forest ocean dawn lantern violin".split()
    batch = []
    for i in range(TOTAL):
        waiting = i >= TOTAL - WAITING
        created = now - dt.timedelta(minutes=(TOTAL - i) * 10)  # ~2 years of history, ~1,000 jobs a week
        batch.append(Job(
            owner=people[i % 5], device=devices[i % 2], kind=rng.choice(JobKind.values), model_id="m",
            prompt=" ".join(rng.choices(words, k=6)), params={"prompt": "x"},
            state=JobState.QUEUED if waiting else rng.choice([JobState.DONE] * 8 + [JobState.FAILED, JobState.CANCELLED]),
            finished_at=None if waiting else created + dt.timedelta(minutes=7),
            device_seconds=0 if waiting else 420.0, shared=i % 7 == 0, estimate_s=420.0,
        ))  # fmt: skip
        if len(batch) == 5000:
            Job.objects.bulk_create(batch)
            batch = []
    Job.objects.bulk_create(batch)
    Job.objects.filter(pk__in=Job.objects.order_by("-pk").values("pk")[:WAITING]).update(
        created=timezone.now()
    )
    return people, devices


def timed(fn, repeat: int = 20) -> tuple[float, int]:
    first = fn()  # warm
    assert getattr(first, "status_code", 200) == 200, first
    samples = []
    with CaptureQueriesContext(connection) as ctx:
        fn()
    queries = len(ctx.captured_queries)
    for _ in range(repeat):
        started = time.perf_counter()
        fn()
        samples.append((time.perf_counter() - started) * 1000)
    return statistics.median(samples), queries


def main() -> None:
    from jobs.eta import plan
    from jobs.models import WAITING_STATES
    from jobs.scheduler import next_job, snapshot_for

    started = time.perf_counter()
    people, devices = build()
    built_s = time.perf_counter() - started
    device = devices[0]
    client = Client()
    client.force_login(people[0])

    def dispatch_reads():
        snap = snapshot_for(device.pk)
        next_job(snap, list(Job.objects.filter(device_id=device.pk, state__in=WAITING_STATES)))

    rows = [
        ("dispatch: snapshot + fair share (7 days) + pick", *timed(dispatch_reads)),
        ("plan: predicted start/finish for the whole queue", *timed(lambda: plan(device.pk), repeat=5)),
        ("dashboard page (GET /)", *timed(lambda: client.get("/"))),
        ("gallery first page (GET /jobs/)", *timed(lambda: client.get("/jobs/"))),
        ("gallery, search 'fox river'", *timed(lambda: client.get("/jobs/?q=fox+river"))),
        ("queue page (GET /jobs/queue/)", *timed(lambda: client.get("/jobs/queue/"))),
    ]
    table = "\n".join(
        f"| {name} | {ms:.1f} ms | {q} | {'ok' if ms < TARGET_MS else 'SLOW'} |" for name, ms, q in rows
    )
    print(
        "## Jobs at 100k rows (bench_jobs.py)\n\n"
        f"{Job.objects.count():,} jobs (5 people, 2 devices, {WAITING} waiting), SQLite, median of 20 runs "
        f"(plan: 5). Built in {built_s:.0f} s. Target: each under {TARGET_MS:.0f} ms.\n\n"
        "| what | median | queries | verdict |\n|---|---|---|---|\n" + table
    )


if __name__ == "__main__":
    main()

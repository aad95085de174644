"""The queue, dashboard and history at 100,000 jobs: the indexes keep every hot query flat.

Builds a throw-away SQLite database with 100k jobs (5 people, 2 devices, about two years of finished work,
300 waiting), then times the scheduler's reads (what dispatch does before each job), the plan, a dashboard and
a gallery page through the real views, and a prompt search. Targets: each under 100 ms.

``BENCH_JOBS_DB=postgresql`` runs the same on PostgreSQL instead: ``BENCH_PG_URL`` (default
``postgres://postgres@127.0.0.1:5432/bench_jobs``) names the server and a prefix; the run's own database,
``bench_jobs_<pid>`` (as bench_pages.py: two runs at once never collide), is created, ANALYZEd after the load (as
autovacuum would have long before a hub reached 100k jobs) and dropped at the end, even when the run fails.
"""

from __future__ import annotations

import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
TMP = tempfile.mkdtemp(prefix="bench-jobs-")
os.environ.setdefault("HUB_SECRET_KEY", "bench-only")
os.environ["HUB_DATA_DIR"] = TMP
BACKEND = os.environ.get("BENCH_JOBS_DB", "sqlite")
from bench_pages import _pg_admin, _pg_name, pg_run_url  # noqa: E402 - stdlib only at import

PG_URL = pg_run_url(os.environ.get("BENCH_PG_URL", "postgres://postgres@127.0.0.1:5432/bench_jobs"))
os.environ["DATABASE_URL"] = PG_URL if BACKEND == "postgresql" else f"sqlite:///{TMP}/bench.sqlite3"
os.environ["HUB_INSECURE_FAST_HASHER"] = "1"
os.environ["HUB_ALLOWED_HOSTS"] = "testserver"
os.environ["HUB_PAGE_CACHE_S"] = (
    "0"  # these rows are what drawing a page costs: never a kept copy (hub.pagecache)
)
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "hub.settings")
# Views render without Redis (the banner probe fails fast); point it at a closed port explicitly.
os.environ["REDIS_URL"] = "redis://127.0.0.1:1/0"

import django  # noqa: E402

django.setup()
from django.core.management import call_command  # noqa: E402
from django.db import connection  # noqa: E402
from django.test import Client  # noqa: E402
from django.test.utils import CaptureQueriesContext  # noqa: E402
from jobs_100k import WAITING  # noqa: E402

from jobs.models import Job  # noqa: E402

TOTAL = int(os.environ.get("BENCH_JOBS", "100000"))
TARGET_MS = 100.0


def build() -> tuple[list, list]:
    from jobs_100k import build as build_household

    if BACKEND == "postgresql":
        name = _pg_name(PG_URL)
        _pg_admin(PG_URL, f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)', f'CREATE DATABASE "{name}"')
    call_command("migrate", verbosity=0)
    out = build_household(TOTAL)
    if BACKEND == "postgresql":
        with connection.cursor() as cur:
            cur.execute("ANALYZE")
    return out


def timed(fn, repeat: int = 20) -> tuple[float, float, int]:
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
    return statistics.median(samples), sorted(samples)[-(-len(samples) * 95 // 100) - 1], queries


def main() -> None:
    try:
        measure()
    finally:
        if BACKEND == "postgresql":
            connection.close()
            _pg_admin(PG_URL, f'DROP DATABASE IF EXISTS "{_pg_name(PG_URL)}" WITH (FORCE)')


def measure() -> None:
    from jobs.core.scheduler import next_job, snapshot_for
    from jobs.models import waiting_on
    from jobs.queue.eta import plan

    started = time.perf_counter()
    people, devices = build()
    built_s = time.perf_counter() - started
    device = devices[0]
    client = Client()
    client.force_login(people[0])

    def dispatch_reads():
        snap = snapshot_for(device.pk)
        next_job(snap, waiting_on(device.pk))  # the engine's own read

    rows = [
        ("dispatch: snapshot + fair share (7 days) + pick", *timed(dispatch_reads)),
        ("plan: predicted start/finish for the whole queue", *timed(lambda: plan(device.pk), repeat=5)),
        ("dashboard page (GET /)", *timed(lambda: client.get("/"))),
        ("gallery first page (GET /jobs/)", *timed(lambda: client.get("/jobs/"))),
        ("gallery, search 'fox river'", *timed(lambda: client.get("/jobs/?q=fox+river"))),
        ("gallery, search a word no prompt holds ('zebra')", *timed(lambda: client.get("/jobs/?q=zebra"))),
        (
            "API list, search 'fox river' (GET /api/jobs?q=)",
            *timed(lambda: client.get("/api/jobs?q=fox+river")),
        ),
        ("queue page (GET /jobs/queue/)", *timed(lambda: client.get("/jobs/queue/"))),
        ("usage page (GET /usage/)", *timed(lambda: client.get("/usage/"))),
    ]
    count = Job.objects.count()
    table = "\n".join(
        f"| {name} | {ms:.1f} ms | {p95:.1f} ms | {q} | {'ok' if p95 <= TARGET_MS else 'SLOW'} |"
        for name, ms, p95, q in rows
    )
    print(
        "## Jobs at 100k rows (bench_jobs.py)\n\n"
        f"{count:,} jobs (5 people, 2 devices, {WAITING} waiting, each device's plan stored as the hub "
        f"keeps it), {'PostgreSQL' if BACKEND == 'postgresql' else 'SQLite'}, one client in-process (Django's test client: no server, no network), 20 runs each "
        f"(plan: 5). Built in {built_s:.0f} s; load average {os.getloadavg()[0]:.2f} (shared 2-core box). Target: "
        f"each ≤ {TARGET_MS:.0f} ms (p95). Under 20 concurrent clients through the web server: bench_pages.py.\n\n"
        "| what | median | p95 | queries | verdict |\n|---|---|---|---|---|\n" + table
    )


if __name__ == "__main__":
    main()

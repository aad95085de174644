"""The queue, dashboard, history, albums and trash at 100,000 jobs: the indexes keep every hot query flat.

Builds a throw-away SQLite database with 100k jobs (5 people, 2 devices, about two years of finished work,
300 waiting), 1,000 albums (200 a person, 10-200 results each, some with viewers and contributors) and a share of
the results in the trash (one person deleted a lot), then times the scheduler's reads (what dispatch does before
each job), the plan, a dashboard, a gallery page, a prompt search, the Albums page, a big album (its pages and
one kind), the Trash page and ``GET /api/albums`` through the real views. Targets: each under 100 ms (issue 37
item 6 for the gallery, album and trash pages).

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
SETUP = (0, 0, 0, 0)  # (trashed, albums, album items, album members), set by build()


ALBUMS_EACH = 200  # 5 people: 1,000 albums
#: The share of each person's finished results in the trash; p1 deleted a lot (the Trash page's heavy case).
TRASHED = {1: 0.20}
TRASHED_ELSE = 0.03


def trash_some(people: list) -> int:
    """Move a share of the finished results to the trash as ``jobs.queue.trash.trash_move`` leaves them
    (``trashed_at`` within the last ``HUB_TRASH_DAYS``, ``hidden_at`` with it, ``trashed_by`` the owner)."""
    import datetime as dt
    import random

    from django.utils import timezone

    from jobs.models import FINAL_STATES

    rng = random.Random(11)
    now = timezone.now()
    moved = []
    for i, person in enumerate(people):
        share = TRASHED.get(i, TRASHED_ELSE)
        for pk in Job.objects.filter(owner=person, state__in=FINAL_STATES).values_list("pk", flat=True):
            if rng.random() < share:
                when = now - dt.timedelta(seconds=rng.randint(0, 29 * 86400))
                moved.append(Job(pk=pk, trashed_at=when, hidden_at=when, trashed_by_id=person.pk))
    Job.objects.bulk_update(moved, ["trashed_at", "hidden_at", "trashed_by"], batch_size=2000)
    return len(moved)


def build_albums(people: list) -> tuple[int, int, int]:
    """1,000 albums as ``jobs.queue.albums`` leaves them, built in bulk: each person's ``ALBUMS_EACH`` albums hold
    10-200 of the finished results they see (their own, put there by them; household-shared ones), a third have a
    contributor (who added some of their own) and a third a viewer. p0's first album is the big one (200).
    Returns (albums, items, members)."""
    import datetime as dt
    import random

    from django.utils import timezone

    from jobs.models import Album, AlbumItem, AlbumMember, JobState

    rng = random.Random(13)
    now = timezone.now()
    visible = Job.objects.filter(state=JobState.DONE, hidden_at__isnull=True)
    shared = list(visible.filter(shared=True).values_list("pk", "owner_id"))
    own = {p.pk: list(visible.filter(owner=p).values_list("pk", flat=True)) for p in people}
    albums = Album.objects.bulk_create(
        [Album(owner=p, name=f"{p.username} album {n}") for p in people for n in range(ALBUMS_EACH)]
    )
    members, items = [], []
    added_at = AlbumItem._meta.get_field("added_at")
    for n, album in enumerate(albums):
        others = [p for p in people if p.pk != album.owner_id]
        size = 200 if n == 0 else rng.randint(10, 200)
        helper = rng.choice(others) if n == 0 or rng.random() < 1 / 3 else None
        if helper is not None:
            members.append(AlbumMember(album=album, user=helper, role=AlbumMember.Role.CONTRIBUTOR))
        if rng.random() < 1 / 3:
            viewer = rng.choice([p for p in others if p is not helper])
            members.append(AlbumMember(album=album, user=viewer, role=AlbumMember.Role.VIEWER))
        theirs = rng.sample(own[helper.pk], size // 5) if helper else []
        others_shared = [pk for pk, owner in rng.sample(shared, size // 4) if owner != album.owner_id]
        mine = rng.sample(own[album.owner_id], size - len(theirs) - len(others_shared))
        start = now - dt.timedelta(days=rng.randint(1, 700))
        picked = list(
            dict(
                [(pk, helper.pk) for pk in theirs] + [(pk, album.owner_id) for pk in mine + others_shared]
            ).items()
        )  # a job once (a helper's shared result may be drawn twice)
        rng.shuffle(picked)
        for k, (pk, by) in enumerate(picked):
            items.append(
                AlbumItem(
                    album=album, job_id=pk, added_by_id=by, added_at=start + dt.timedelta(minutes=k * 3)
                )
            )
    AlbumMember.objects.bulk_create(members)
    added_at.auto_now_add = False  # keep the spread-out times above (the model stamps "now" otherwise)
    try:
        AlbumItem.objects.bulk_create(items, batch_size=5000)
    finally:
        added_at.auto_now_add = True
    return len(albums), len(items), len(members)


def build() -> tuple[list, list]:
    from jobs_100k import build as build_household

    if BACKEND == "postgresql":
        name = _pg_name(PG_URL)
        _pg_admin(PG_URL, f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)', f'CREATE DATABASE "{name}"')
    call_command("migrate", verbosity=0)
    out = build_household(TOTAL)
    global SETUP
    SETUP = (trash_some(out[0]), *build_albums(out[0]))
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
    deleter = Client()  # p1, who has the most in the trash
    deleter.force_login(people[1])
    from jobs.models import Album, AlbumMember

    big = Album.objects.filter(owner=people[0]).order_by("pk").first()
    member = (
        Client()
    )  # its contributor, who sees it through the membership (another access path than its owner)
    member.force_login(AlbumMember.objects.filter(album=big).select_related("user").first().user)
    trashed_p1 = Job.objects.filter(owner=people[1], trashed_at__isnull=False).count()
    later = max(1, trashed_p1 // 24 // 2)

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
        ("gallery first page, the person with the most in the trash", *timed(lambda: deleter.get("/jobs/"))),
        ("Albums page (GET /jobs/albums/)", *timed(lambda: client.get("/jobs/albums/"))),
        (
            f"a 200-result album (GET /jobs/albums/{big.pk}/)",
            *timed(lambda: client.get(f"/jobs/albums/{big.pk}/")),
        ),
        ("the album's second page (?page=2)", *timed(lambda: client.get(f"/jobs/albums/{big.pk}/?page=2"))),
        ("the album, oldest first", *timed(lambda: client.get(f"/jobs/albums/{big.pk}/?sort=oldest"))),
        (
            "the album, one kind (?kind=video)",
            *timed(lambda: client.get(f"/jobs/albums/{big.pk}/?kind=video")),
        ),
        ("the album, as its contributor", *timed(lambda: member.get(f"/jobs/albums/{big.pk}/"))),
        ("Albums page, as that contributor", *timed(lambda: member.get("/jobs/albums/"))),
        (f"Trash page (GET /jobs/trash/), {trashed_p1:,} in it", *timed(lambda: deleter.get("/jobs/trash/"))),
        (f"Trash, a later page (?page={later})", *timed(lambda: deleter.get(f"/jobs/trash/?page={later}"))),
        ("API album list (GET /api/albums)", *timed(lambda: client.get("/api/albums"))),
    ]
    count = Job.objects.count()
    table = "\n".join(
        f"| {name} | {ms:.1f} ms | {p95:.1f} ms | {q} | {'ok' if p95 <= TARGET_MS else 'SLOW'} |"
        for name, ms, p95, q in rows
    )
    print(
        "## Jobs at 100k rows (bench_jobs.py)\n\n"
        f"{count:,} jobs (5 people, 2 devices, {WAITING} waiting, each device's plan stored as the hub "
        f"keeps it; {SETUP[0]:,} results in the trash, p1's {trashed_p1:,} of them; {SETUP[1]:,} albums holding "
        f"{SETUP[2]:,} results, {SETUP[3]:,} album members), {'PostgreSQL' if BACKEND == 'postgresql' else 'SQLite'}, one client in-process (Django's test client: no server, no network), 20 runs each "
        f"(plan: 5). Built in {built_s:.0f} s; load average {os.getloadavg()[0]:.2f} (shared 2-core box). Target: "
        f"each ≤ {TARGET_MS:.0f} ms (p95). Under 20 concurrent clients through the web server: bench_pages.py.\n\n"
        "| what | median | p95 | queries | verdict |\n|---|---|---|---|---|\n" + table
    )


if __name__ == "__main__":
    main()

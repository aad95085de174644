"""Dashboard, queue and history pages at 100,000 jobs with 20 signed-in clients, on SQLite and PostgreSQL.

Each database gets the same household (``jobs_100k``: 5 people, 2 devices, ~2 years of work, 300 waiting, the
plan stored as the hub keeps it), a private Redis and the hub's own web server (``hub.webserver``:
HUB_WEB_WORKERS uvicorn workers, as ``make up`` runs it). 20 clients, each a thread with its own signed-in session
(4 per person) and its own keep-alive connection, then ask for the pages over HTTP; a time is from sending the request to the last byte of the answer.

Three loads per database, each run twice, against a server of its own: as ``make up`` runs it (a page drawn for a
browser is shown to that browser again while nothing changed, for up to HUB_PAGE_CACHE_S; ``hub.pagecache``), and
with every page drawn for every request (HUB_PAGE_CACHE_S=0: what drawing costs at 100k jobs):
- one client alone (what one page costs the server);
- 20 people browsing: each client opens one of the three pages at random, reads it for 1-5 s (uniform, seeded),
  and opens another (the ``20 concurrent signed-in clients`` of issue 13, with a person's pace);
- 20 clients back to back: each asks again the moment its answer arrives, for BENCH_BURST_S (15 s) a page
  (saturation: 20 requests always in flight at one server). Their first asks, all 20 at once, are shown apart
  too: with pages kept, those are the ones drawn (the clients last saw the page while browsing, over 5 s ago).

PostgreSQL: ``postgres://postgres@127.0.0.1:5432/bench_pages`` (BENCH_PG_URL) names the server and a prefix: each
run creates a database of its own, ``bench_pages_<pid>``, and drops it at the end (two runs at once never share
one or drop the other's; only a killed run leaves its database behind). Its tables are ANALYZEd after the load
(autovacuum would have done it long before a hub reached 100k jobs). SQLite gets no ANALYZE (the hub never runs
one). Target: p95 <= 100 ms for every page.
"""

from __future__ import annotations

import json
import os
import random
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

BASE = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(BASE))
sys.path.insert(0, str(BASE / "bench"))

TOTAL = int(os.environ.get("BENCH_JOBS", "100000"))
CLIENTS = int(os.environ.get("BENCH_CLIENTS", "20"))
BROWSE_S = float(os.environ.get("BENCH_BROWSE_S", "45"))
BURST_S = float(os.environ.get("BENCH_BURST_S", "15"))  # how long 20 clients ask back to back, per page
ALONE = int(os.environ.get("BENCH_ALONE", "20"))
THINK_S = (1.0, 5.0)
TARGET_MS = 100.0
PG_URL = os.environ.get("BENCH_PG_URL", "postgres://postgres@127.0.0.1:5432/bench_pages")
FLOOR_PATH = ("the hub's lightest signed-in answer (GET /favicon.ico)", "/favicon.ico", None)
FLOOR_BODY = b"<p>" + b"x" * 26_000 + b"</p>"  # about a dashboard's size
# The server as ``make up`` runs it (a page drawn for a browser is shown to it again while nothing changed, for up
# to HUB_PAGE_CACHE_S, hub.pagecache), then with every page drawn for every request: what drawing costs.
MODES = [("kept", {}), ("drawn", {"HUB_PAGE_CACHE_S": "0"})]
MODE_NAMES = {"kept": "as `make up` runs it", "drawn": "every page drawn (HUB_PAGE_CACHE_S=0)"}
PAGES = [
    ("dashboard (GET /)", "/", "Queue plan"),
    ("queue (GET /jobs/queue/)", "/jobs/queue/", "Queue plan"),
    ("history / gallery (GET /jobs/)", "/jobs/", "gallery"),
]


# -- one database, in a child process (Django is set up once per process) ----------------------------------------
def run_backend(backend: str) -> dict:
    from hub.redis_server import start_private_redis

    tmp = Path(tempfile.mkdtemp(prefix=f"bench-pages-{backend}-"))
    redis = start_private_redis(run_dir=tmp / "run")
    url = pg_run_url(PG_URL) if backend == "postgresql" else f"sqlite:///{tmp / 'hub.sqlite3'}"
    os.environ.update(
        REDIS_URL=redis.url,
        HUB_DATA_DIR=str(tmp),
        DATABASE_URL=url,
        HUB_SECRET_KEY="bench",
        HUB_INSECURE_FAST_HASHER="1",
        DJANGO_SETTINGS_MODULE="hub.settings",
    )
    if backend == "postgresql":
        _pg_admin(
            url,
            f'DROP DATABASE IF EXISTS "{_pg_name(url)}" WITH (FORCE)',
            f'CREATE DATABASE "{_pg_name(url)}"',
        )
    web = None
    try:
        import django

        django.setup()
        from django.core.management import call_command
        from django.db import connection
        from django.test import Client
        from jobs_100k import build

        from hub.testing import start_asgi_server

        call_command("migrate", verbosity=0)
        started = time.perf_counter()
        people, _devices = build(TOTAL)
        if backend == "postgresql":
            with connection.cursor() as cur:
                cur.execute("ANALYZE")
        built_s = time.perf_counter() - started
        cookies = []
        for i in range(CLIENTS):
            client = Client()
            client.force_login(people[i % len(people)])
            cookies.append(client.cookies["sessionid"].value)
        connection.close()
        result = {}
        for mode, env in MODES:
            web = start_asgi_server(**env)
            result[mode] = measure(web.extra["url"], cookies)
            web.stop()
            web = None
        result.update(backend=backend, built_s=built_s, jobs=TOTAL, server=_server_version(backend))
        return result
    finally:
        if web is not None:
            web.stop()
        redis.stop()
        if backend == "postgresql":
            from django.db import connections

            connections.close_all()
            _pg_admin(url, f'DROP DATABASE IF EXISTS "{_pg_name(url)}" WITH (FORCE)')


def pg_run_url(url: str) -> str:
    """``url`` with its database name made this process's own: ``.../bench_pages`` -> ``.../bench_pages_4242``."""
    base, name = url.rsplit("/", 1)
    return f"{base}/{name}_{os.getpid()}"


def _pg_name(url: str) -> str:
    return url.rsplit("/", 1)[1]


def _pg_admin(url: str, *statements: str) -> None:
    import psycopg

    with psycopg.connect(url.rsplit("/", 1)[0] + "/postgres", autocommit=True) as conn:
        for sql in statements:
            conn.execute(sql)


def _server_version(backend: str) -> str:
    from django.db import connection

    if backend == "postgresql":
        with connection.cursor() as cur:
            cur.execute("SHOW server_version")
            return "PostgreSQL " + cur.fetchone()[0].split()[0]
    import sqlite3

    return "SQLite " + sqlite3.sqlite_version


def _get(client, path: str, expect: str | None) -> float:
    """One request; its time from sending to the last byte, in ms (a wrong answer stops the bench)."""
    started = time.perf_counter()
    resp = client.get(path)
    ms = (time.perf_counter() - started) * 1000
    if resp.status_code != 200 or (expect is not None and expect not in resp.text):
        raise RuntimeError(f"GET {path}: {resp.status_code} {resp.text[:300]!r}")
    return ms


def back_to_back(clients: list, path: str, expect: str | None) -> dict:
    """Every client asks ``path`` for BURST_S, each time the moment its answer arrives; its first ask apart."""
    times: list[float] = []
    first: list[float] = []
    errors: list[BaseException] = []
    stop_at = time.monotonic() + BURST_S

    def hammer(i: int) -> None:
        try:
            first.append(_get(clients[i], path, expect))
            while time.monotonic() < stop_at:
                times.append(_get(clients[i], path, expect))
        except BaseException as exc:  # noqa: BLE001 - reported after the run
            errors.append(exc)

    started = time.perf_counter()
    _threads(hammer)
    if errors:
        raise RuntimeError(f"{len(errors)} client errors, first: {errors[0]!r}")
    everything = first + times
    return {"ms": everything, "first": first, "rps": len(everything) / (time.perf_counter() - started)}


def measure(base: str, cookies: list[str]) -> dict:
    import httpx

    clients = [
        httpx.Client(base_url=base, cookies={"sessionid": c}, timeout=60, follow_redirects=False)
        for c in cookies
    ]
    for client in clients:  # warm: every session and connection once on every page
        for _name, path, expect in PAGES:
            _get(client, path, expect)
    out: dict = {"alone": {}, "browse": {}, "burst": {}, "load": {}}

    out["load"]["alone"] = os.getloadavg()[0]
    for name, path, expect in PAGES:
        out["alone"][name] = [_get(clients[0], path, expect) for _ in range(ALONE)]

    out["load"]["browse"] = os.getloadavg()[0]
    samples: dict[str, list[float]] = {name: [] for name, _p, _e in PAGES}
    errors: list[BaseException] = []
    stop_at = time.monotonic() + BROWSE_S

    def person(i: int) -> None:
        rng = random.Random(i)
        time.sleep(rng.uniform(0, THINK_S[1]))  # people don't all arrive in the same instant
        try:
            while time.monotonic() < stop_at:
                name, path, expect = rng.choice(PAGES)
                samples[name].append(_get(clients[i], path, expect))
                time.sleep(rng.uniform(*THINK_S))
        except BaseException as exc:  # noqa: BLE001 - reported after the run
            errors.append(exc)

    _threads(person)
    if errors:
        raise RuntimeError(f"{len(errors)} client errors, first: {errors[0]!r}")
    out["browse"] = samples
    out["load"]["browse_end"] = os.getloadavg()[0]

    for name, path, expect in PAGES:
        out["burst"][name] = back_to_back(clients, path, expect)
    out["load"]["burst_end"] = os.getloadavg()[0]
    name, path, expect = FLOOR_PATH
    out["floor"] = {
        "alone": [_get(clients[0], path, expect) for _ in range(ALONE)],
        "burst": back_to_back(clients, path, expect),
    }
    for client in clients:
        client.close()
    return out


# -- the floor: a bare ASGI app served as the hub is ---------------------------------------------------------------
async def floor_app(scope, receive, send) -> None:
    """Answers every request with FLOOR_BODY and does nothing else."""
    if scope["type"] != "http":
        return
    await send(
        {
            "type": "http.response.start",
            "status": 200,
            "headers": [(b"content-type", b"text/html; charset=utf-8")],
        }
    )
    await send({"type": "http.response.body", "body": FLOOR_BODY})


def serve_floor(port: int) -> None:
    """``floor_app`` under ``hub.webserver``'s socket, uvicorn settings and worker count."""
    from uvicorn.supervisors import Multiprocess

    from hub import webserver

    settings = webserver.config("127.0.0.1", port, webserver.workers())
    settings.app = "bench_pages:floor_app"
    Multiprocess(settings, sockets=[webserver.listening_socket("127.0.0.1", port)]).run()


def measure_floor() -> dict:
    import httpx

    from hub.redis_server import free_port

    port = free_port()
    server = subprocess.Popen(
        [sys.executable, __file__, "--floor-server", str(port)],
        cwd=BASE,
        start_new_session=True,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,  # uvicorn's line per request
    )
    try:
        base = f"http://127.0.0.1:{port}"

        def up() -> bool:
            try:
                return httpx.get(base, timeout=1).status_code == 200
            except httpx.HTTPError:
                return False

        deadline = time.monotonic() + 30
        while not up():
            if time.monotonic() > deadline or server.poll() is not None:
                raise RuntimeError("the floor server did not answer within 30 s")
            time.sleep(0.1)
        clients = [httpx.Client(base_url=base, timeout=60) for _ in range(CLIENTS)]
        for client in clients:
            _get(client, "/", None)
        out = {
            "alone": [_get(clients[0], "/", None) for _ in range(ALONE)],
            "burst": back_to_back(clients, "/", None),
        }
        for client in clients:
            client.close()
        return out
    finally:
        os.killpg(server.pid, 15)
        server.wait(timeout=30)


def _threads(target) -> None:
    threads = [threading.Thread(target=target, args=(i,)) for i in range(CLIENTS)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()


# -- the report ---------------------------------------------------------------------------------------------------
def p95(values: list[float]) -> float:
    ordered = sorted(values)
    return ordered[max(0, -(-len(ordered) * 95 // 100) - 1)]  # nearest rank


def verdict(ms: float) -> str:
    return "ok" if ms <= TARGET_MS else "**MISSED**"


def _b2b(burst: dict) -> str:
    return (
        f"{statistics.median(burst['ms']):.0f} / {p95(burst['ms']):.1f} ms, {burst['rps']:.1f} "
        f"(n {len(burst['ms'])}; first asks p95 {p95(burst['first']):.0f} ms)"
    )


def report(results: list[dict], floor: dict | None) -> str:
    from hub import webserver

    lines = [
        "## Pages at 100k jobs, 20 signed-in clients (bench_pages.py)\n",
        f"{TOTAL:,} jobs (5 people, 2 devices, 300 waiting with their plan stored), the hub's own web server "
        f"({webserver.workers()} uvicorn workers, as `make up` runs it) and a private Redis; {CLIENTS} clients, "
        "each its own signed-in session and keep-alive connection; "
        "times from request to last byte. *Alone*: one client, "
        f"{ALONE} requests a page. *20 browsing*: each client opens a random page of the three, reads it "
        f"{THINK_S[0]:g}-{THINK_S[1]:g} s, opens another ({BROWSE_S:g} s). *20 back to back*: each asks again as "
        f"soon as its answer arrives, for {BURST_S:g} s a page (20 requests always in flight); every ask counts, "
        "the first ones too, and those first asks (20 at once, each client's first after browsing) are shown "
        f"apart. Target: p95 ≤ {TARGET_MS:.0f} ms.\n",
        "Each database is measured twice, with a server of its own each time: *as `make up` runs it*, where a "
        "page drawn for a browser is shown to that browser again while nothing changed, for up to "
        "`HUB_PAGE_CACHE_S` (5 s; `hub.pagecache`), and with *every page drawn* for every request "
        "(`HUB_PAGE_CACHE_S=0`): what drawing the page costs at 100k jobs.\n",
        "| database | server | page | alone p50 / p95 | 20 browsing: n, p50 / p95 | verdict "
        "| 20 back to back: p50 / p95, req/s | verdict |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for r in results:
        for mode, _env in MODES:
            m = r[mode]
            for name, _path, _expect in PAGES:
                alone, browse, burst = m["alone"][name], m["browse"][name], m["burst"][name]
                lines.append(
                    f"| {r['server']} | {MODE_NAMES[mode]} | {name} | "
                    f"{statistics.median(alone):.0f} / {p95(alone):.0f} ms | "
                    f"{len(browse)}, {statistics.median(browse):.0f} / {p95(browse):.0f} ms | "
                    f"{verdict(p95(browse))} | {_b2b(burst)} | {verdict(p95(burst['ms']))} |"
                )
    loads = "; ".join(
        f"{r['server']}, {MODE_NAMES[mode]}: {r[mode]['load']['alone']:.2f} alone, "
        f"{r[mode]['load']['browse']:.2f}-{r[mode]['load']['browse_end']:.2f} browsing, "
        f"{r[mode]['load']['burst_end']:.2f} after back to back"
        for r in results
        for mode, _env in MODES
    )
    loads += "; built in " + ", ".join(f"{r['built_s']:.0f} s ({r['server']})" for r in results)
    lines.append(f"\n1-minute load average on this shared 2-core box: {loads}.")
    lines += [
        "\n**The floor: what this box allows 20 clients back to back, whatever the page.** The same client "
        "threads, the same load, the same server settings and workers:\n",
        "| server | answer | alone p50 / p95 | 20 back to back: p50 / p95, req/s |",
        "|---|---|---|---|",
    ]
    if floor is not None:
        lines.append(
            f"| bare ASGI app, no Django | {len(FLOOR_BODY) // 1000} KB of HTML | "
            f"{statistics.median(floor['alone']):.1f} / {p95(floor['alone']):.1f} ms | {_b2b(floor['burst'])} |"
        )
    for r in results:
        f = r["kept"]["floor"]
        lines.append(
            f"| the hub on {r['server']} | {FLOOR_PATH[0]} | {statistics.median(f['alone']):.1f} / "
            f"{p95(f['alone']):.1f} ms | {_b2b(f['burst'])} |"
        )
    return "\n".join(lines)


def main() -> None:
    if len(sys.argv) == 3 and sys.argv[1] == "--backend":
        print(json.dumps(run_backend(sys.argv[2])))
        return
    if len(sys.argv) == 3 and sys.argv[1] == "--floor-server":
        serve_floor(int(sys.argv[2]))
        return
    results, skipped = [], []
    backends = os.environ.get("BENCH_BACKENDS", "sqlite,postgresql").split(",")
    for backend in backends:
        if backend == "postgresql" and (why := _pg_unreachable()):
            skipped.append(f"PostgreSQL not measured: {PG_URL.rsplit('/', 1)[0]} does not answer ({why}).")
            continue
        child = subprocess.run(
            [sys.executable, __file__, "--backend", backend], capture_output=True, text=True, cwd=BASE
        )
        if child.returncode != 0:
            raise SystemExit(f"{backend}: exit {child.returncode}\n{child.stderr[-3000:]}")
        results.append(json.loads(child.stdout.strip().splitlines()[-1]))
    floor = measure_floor() if os.environ.get("BENCH_FLOOR", "1") == "1" else None
    print(report(results, floor) + "".join(f"\n\n**{line}**" for line in skipped))


def _pg_unreachable() -> str:
    try:
        _pg_admin(PG_URL, "SELECT 1")
    except Exception as exc:  # noqa: BLE001 - any failure to connect: say it, measure SQLite alone
        return str(exc).splitlines()[0][:120]
    return ""


if __name__ == "__main__":
    main()

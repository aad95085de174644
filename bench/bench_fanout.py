"""Fan-out: one push reaches N open dashboards through Redis + the web server, for N = 100 then 200 (issue 13).

Starts its own private Redis, a throw-away SQLite database and the hub's web server as ``make up`` runs it
(hub.webserver: a parent and HUB_WEB_WORKERS workers, the sockets spread over them); signs one person in and
opens N websockets with that session; pushes fragments with hub.live.push (as a worker would) and measures how
long each takes to reach every socket. Also reports the web server's RSS (all its processes) with N sockets
open. Target: p95 < 250 ms (the same bound at 200 as at 100).
"""

from __future__ import annotations

import asyncio
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

SOCKET_COUNTS = [int(n) for n in os.environ.get("BENCH_SOCKETS", "100,200").split(",")]
TARGET_MS = 250
PUSHES = int(os.environ.get("BENCH_PUSHES", "20"))
BASE = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(BASE))


def main() -> None:
    from hub import webserver
    from hub.redis_server import free_port, start_private_redis

    tmp = Path(tempfile.mkdtemp(prefix="bench-fanout-"))
    redis = start_private_redis(run_dir=tmp / "run")
    env = dict(
        os.environ,
        REDIS_URL=redis.url,
        HUB_DATA_DIR=str(tmp),
        HUB_SECRET_KEY="bench",
        HUB_INSECURE_FAST_HASHER="1",
        DJANGO_SETTINGS_MODULE="hub.settings",
    )
    os.environ.update(env)
    manage = [sys.executable, "manage.py"]
    subprocess.run([*manage, "migrate", "-v", "0"], cwd=BASE, env=env, check=True)
    subprocess.run(
        [*manage, "create_user", "bench", "--role", "member", "--password", "bench-pass-1"],
        cwd=BASE,
        env=env,
        check=True,
        capture_output=True,
    )
    port = free_port()
    web = subprocess.Popen(
        webserver.command("127.0.0.1", port),
        cwd=BASE,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        result = asyncio.run(run(f"http://127.0.0.1:{port}", web.pid))
    finally:
        web.terminate()
        web.wait(10)
        redis.stop()
    print(result)


async def run(base: str, web_pid: int) -> str:
    import django
    import httpx
    import websockets

    django.setup()
    from hub import live, webserver
    from hub.testing import process_tree

    async with httpx.AsyncClient(base_url=base, timeout=10) as client:
        for _ in range(100):
            try:
                page = await client.get("/accounts/login/")
                break
            except httpx.HTTPError:
                await asyncio.sleep(0.1)
        token = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', page.text).group(1)
        await client.post(
            "/accounts/login/",
            data={"username": "bench", "password": "bench-pass-1", "csrfmiddlewaretoken": token},
            headers={"Referer": base},
        )
        cookie = f"sessionid={client.cookies['sessionid']}"
    ws_url = base.replace("http", "ws") + "/ws/hub/"
    sockets: list = []
    rows = []
    for count in sorted(SOCKET_COUNTS):  # one server: open more sockets for each next row
        while len(sockets) < count:
            sockets.append(
                await websockets.connect(ws_url, origin=base, additional_headers={"Cookie": cookie})
            )
        await asyncio.sleep(1)  # let the connects settle (group joins) before the first push
        rss_mb = sum(_rss_kb(pid) for pid in process_tree(web_pid)) / 1024
        latencies = await _pushes(live, sockets)
        p50 = statistics.median(latencies)
        p95 = sorted(latencies)[max(0, -(-len(latencies) * 95 // 100) - 1)]
        rows.append((count, p50, p95, rss_mb, os.getloadavg()[0]))
    for ws in sockets:
        await ws.close()
    table = "\n".join(
        f"| {n} | {p50:.0f} ms | {p95:.0f} ms | {'meets' if p95 < TARGET_MS else '**MISSES**'} | {rss:.0f} MB | {load:.2f} |"
        for n, p50, p95, rss, load in rows
    )
    return (
        "## Live fan-out (bench_fanout.py)\n\n"
        f"One `hub.live.push` to the `everyone` group, delivered through the Redis channel layer and the web server "
        f"({webserver.workers()} worker processes) to every open websocket of signed-in pages, {PUSHES} pushes per row; a push counts when the last socket "
        "has it.\n\n"
        "| open websockets | all have it, p50 | p95 | target p95 < 250 ms | web RSS (all processes) | load avg (1 min) |\n"
        "|---|---|---|---|---|---|\n" + table + "\n\n"
        "Viewers add no device requests: the device is polled once by the hub whatever the number of sockets."
    )


def _rss_kb(pid: int) -> int:
    try:
        return int(Path(f"/proc/{pid}/status").read_text().split("VmRSS:")[1].split()[0])
    except (OSError, IndexError):
        return 0


async def _pushes(live, sockets) -> list[float]:
    latencies = []
    for i in range(PUSHES):
        marker = f"bench-{i}-{time.perf_counter_ns()}"
        started = time.perf_counter()
        await asyncio.to_thread(live.push, live.EVERYONE, f'<p id="bench" hx-swap-oob="true">{marker}</p>')

        async def until(ws, marker=marker):
            while marker not in await ws.recv():
                pass

        await asyncio.wait_for(asyncio.gather(*(until(ws) for ws in sockets)), 30)
        latencies.append((time.perf_counter() - started) * 1000)
    return latencies


if __name__ == "__main__":
    main()

"""Fan-out: one push reaches N open dashboards through Redis + daphne. Target: p95 < 250 ms at 100 sockets.

Starts its own private Redis, a throw-away SQLite database and a daphne server; signs one person in and opens
N websockets with that session; pushes fragments with hub.live.push (as a worker would) and measures how long
each takes to reach every socket. Also reports daphne's RSS with N sockets open.
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

SOCKETS = int(os.environ.get("BENCH_SOCKETS", "100"))
PUSHES = int(os.environ.get("BENCH_PUSHES", "20"))
BASE = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(BASE))


def main() -> None:
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
        [sys.executable, "-m", "daphne", "-b", "127.0.0.1", "-p", str(port), "hub.asgi:application"],
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
    from hub import live

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
    sockets = [
        await websockets.connect(ws_url, origin=base, additional_headers={"Cookie": cookie})
        for _ in range(SOCKETS)
    ]
    rss_mb = int(Path(f"/proc/{web_pid}/status").read_text().split("VmRSS:")[1].split()[0]) / 1024
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
    for ws in sockets:
        await ws.close()
    p50 = statistics.median(latencies)
    p95 = sorted(latencies)[max(0, int(len(latencies) * 0.95) - 1)]
    verdict = "meets" if p95 < 250 else "MISSES"
    return (
        "## Live fan-out (bench_fanout.py)\n\n"
        f"One `hub.live.push` to the `everyone` group, delivered through the Redis channel layer and daphne to "
        f"**{SOCKETS} open websockets** of signed-in pages, {PUSHES} pushes.\n\n"
        f"| metric | value |\n|---|---|\n| all {SOCKETS} sockets have it, p50 | {p50:.0f} ms |\n"
        f"| all {SOCKETS} sockets have it, p95 | {p95:.0f} ms |\n| daphne RSS with {SOCKETS} sockets | {rss_mb:.0f} MB |\n\n"
        f"Target: p95 < 250 ms at 100 sockets — {verdict} it. Viewers add no device requests: the device is polled "
        "once by the hub whatever the number of sockets."
    )


if __name__ == "__main__":
    main()

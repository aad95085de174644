"""Result downloads and a gallery page from the local disk beside an S3 bucket (issue 26 item 7).

A throw-away hub (``_hub.private_hub``: SQLite, a private Redis) with one person, a device, two finished videos
(1 MB and 20 MB, saved through ``jobs.files.store`` as a render's result is) and 24 finished jobs with thumbnails.
Each request goes through Django's test client in this process (the hub's full request path: middleware,
authorization, ``jobs.files.downloads``; not the web server's sockets), its streamed body read to the end; RUNS
(50) of each, p50/p95. The same rows run twice: with the local disk (FileSystemStorage on MEDIA_ROOT) and with an
S3 bucket on moto's server (``moto.server.ThreadedMotoServer`` on loopback, in this process: it measures the hub's
side of the S3 API, one ranged GET per request, not a real object store's network).
"""

from __future__ import annotations

import os
import statistics
import sys
import time
from pathlib import Path

BASE = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(BASE))
sys.path.insert(0, str(BASE / "bench"))

RUNS = int(os.environ.get("BENCH_STORE_RUNS", "50"))
MB = 1024 * 1024
RANGE = 256 * 1024  # a player's seek: 256 KB from the middle


def _pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def _time(fn) -> tuple[float, float]:
    fn()  # warm (connections, first imports)
    took = []
    for _ in range(RUNS):
        start = time.perf_counter()
        fn()
        took.append((time.perf_counter() - start) * 1000)
    return statistics.median(took), _pct(took, 0.95)


def _household():
    from devices.services import device_register
    from hub.accounts.services import user_create_or_update
    from jobs.tests.ui_fixtures import make_job

    person = user_create_or_update(username="bench", role="member", password="bench-password-1").user
    device = device_register(name="Pocket", kind="tiiny", base_url="http://127.0.0.1:9", api_key="k")
    return person, device, make_job


def _fill(person, device, make_job) -> dict[str, str]:
    """The two videos and the gallery's jobs in the current store; their URLs."""
    from jobs.files import store

    urls = {}
    for size in (1, 20):
        job = make_job(person, device, state="done")
        art = store.save_artifact(
            job, kind="video", name="video.mp4", data=os.urandom(size * MB), mime="video/mp4"
        )
        urls[f"{size} MB"] = f"/jobs/{job.pk}/files/{art.pk}/"
    for _ in range(24):
        job = make_job(person, device, state="done")
        store.save_artifact(job, kind="thumb", name="thumb.webp", data=os.urandom(20_000), mime="image/webp")
    return urls


def _rows(client, urls: dict[str, str]) -> dict[str, tuple[float, float]]:
    def get(url: str, size: int, **headers) -> None:
        response = client.get(url, headers=headers)
        got = sum(len(c) for c in response.streaming_content) if response.streaming else len(response.content)
        if response.status_code not in (200, 206) or (size and got != size):
            raise SystemExit(f"{url}: {response.status_code}, {got} bytes")

    rows = {}
    for label, url in urls.items():
        size = int(label.split()[0]) * MB
        rows[f"result download, {label}, whole (200)"] = _time(lambda u=url, s=size: get(u, s))
        middle = size // 2
        rows[f"result download, {label}, Range 256 KB (206)"] = _time(
            lambda u=url, m=middle: get(u, RANGE, Range=f"bytes={m}-{m + RANGE - 1}")
        )
    rows["gallery page (GET /jobs/, 26 cards)"] = _time(lambda: get("/jobs/", 0))
    return rows


def main() -> None:
    started = time.monotonic()
    from _hub import private_hub

    with private_hub("store", HUB_ALLOWED_HOSTS="testserver,127.0.0.1"):
        from django.test import Client, override_settings

        from hub.tests.s3 import MotoServer, new_bucket

        person, device, make_job = _household()
        client = Client()
        client.force_login(person)
        local = _rows(client, _fill(person, device, make_job))
        server = MotoServer()
        try:
            bucket = new_bucket(server)
            with override_settings(STORAGES={"default": bucket.setting, "staticfiles": _static()}):
                remote = _rows(client, _fill(person, device, make_job))
        finally:
            server.stop()
    print("## Result store: downloads and the gallery, local disk and S3 (bench_store.py)\n")
    print(
        f"Through Django's test client in one process (the hub's whole request path, not the web server's sockets), "
        f"each body read to the end, {RUNS} runs a row. S3 is moto's server on loopback in the same process: it "
        "shows what the hub's side costs (one HEAD and one ranged GET per download), not a real object store's "
        "network. The gallery reads no file (its thumbnails are the browser's own requests).\n"
    )
    print("| what | local disk p50 | p95 | S3 (moto) p50 | p95 |")
    print("|---|---|---|---|---|")
    for what, (p50, p95) in local.items():
        r50, r95 = remote[what]
        print(f"| {what} | {p50:.1f} ms | {p95:.1f} ms | {r50:.1f} ms | {r95:.1f} ms |")
    print(f"\n_(ran in {time.monotonic() - started:.1f} s)_")


def _static() -> dict:
    from django.conf import settings

    return settings.STORAGES["staticfiles"]


if __name__ == "__main__":
    main()

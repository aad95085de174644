"""Benchmark: how many GET /api/v1/sys/status the Tiiny emulator answers per second while a render runs.

Not a test. Starts the emulator (speed 60), loads the video model, starts a 1344x768 5 s render (32
device-minutes, ~32 s real), then hammers /api/v1/sys/status over loopback with one keep-alive httpx
client for --seconds (default 5). Target: >= 200 req/s.

    .venv/bin/python bench/bench_emulator.py [--seconds 5] [--clients 1] [--write]

--write appends the section to bench/RESULTS.md (``make bench`` collects every benchmark's output itself).
"""

from __future__ import annotations

import argparse
import datetime as dt
import platform
import sys
import threading
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from devices.emulator.catalog import VIDEO_MODEL_ID  # noqa: E402
from devices.emulator.testing import RunningEmulator, run_tiiny  # noqa: E402

TARGET_RPS = 200


def _hammer(emu: RunningEmulator, seconds: float, counts: list[int], errors: list[int]) -> None:
    ok = bad = 0
    with emu.client(timeout=5) as c:
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            if c.get("/api/v1/sys/status").status_code == 200:
                ok += 1
            else:
                bad += 1
    counts.append(ok)
    errors.append(bad)


def run(seconds: float, clients: int) -> dict:
    with run_tiiny(speed=60, quirks="all") as emu:
        emu.load(VIDEO_MODEL_ID)
        with emu.client() as c:
            job = c.post(
                "/v1/videos",
                json={
                    "model": VIDEO_MODEL_ID,
                    "prompt": "benchmark",
                    "size": "1344x768",
                    "seconds": "5",
                    "steps": 4,
                },
            ).json()
            while c.get(f"/v1/videos/{job['id']}").json()["status"] != "in_progress":
                time.sleep(0.01)
        counts: list[int] = []
        errors: list[int] = []
        threads = [
            threading.Thread(target=_hammer, args=(emu, seconds, counts, errors)) for _ in range(clients)
        ]
        started = time.monotonic()
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        elapsed = time.monotonic() - started
        with emu.client() as c:
            status = c.get(f"/v1/videos/{job['id']}").json()["status"]
            npu = c.get("/api/v1/sys/status").json()["npus"][0]["utilization_percent"]
    return {
        "rps": sum(counts) / elapsed,
        "requests": sum(counts),
        "errors": sum(errors),
        "elapsed": elapsed,
        "clients": clients,
        "render_status": status,
        "npu_util": npu,
    }


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--seconds", type=float, default=5.0)
    parser.add_argument("--clients", type=int, default=1)
    parser.add_argument("--write", action="store_true", help="append the result to bench/RESULTS.md")
    args = parser.parse_args()
    r = run(args.seconds, args.clients)
    verdict = "PASS" if r["rps"] >= TARGET_RPS and r["errors"] == 0 else "FAIL"
    line = (
        f"| {dt.date.today().isoformat()} | Tiiny emulator GET /api/v1/sys/status during a render "
        f"({r['render_status']}, NPU {r['npu_util']:.0f}%) | {r['clients']} client(s), {r['elapsed']:.1f} s | "
        f"**{r['rps']:.0f} req/s** ({r['requests']} ok, {r['errors']} errors) | target >= {TARGET_RPS}: {verdict} | "
        f"{platform.python_implementation()} {platform.python_version()} on {platform.machine()} |"
    )
    section = (
        "## Tiiny emulator status throughput (bench_emulator.py)\n\n"
        "| date | what | load | result | target | runtime |\n|---|---|---|---|---|---|\n" + line
    )
    print(section)
    if args.write:  # standalone use; `make bench` collects stdout into bench/RESULTS.md itself
        results = REPO / "bench" / "RESULTS.md"
        if not results.exists():
            results.write_text("# Benchmark results\n\n")
        with results.open("a") as fh:
            fh.write("\n" + section + "\n")
    sys.exit(0 if verdict == "PASS" else 1)


if __name__ == "__main__":
    main()

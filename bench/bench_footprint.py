"""Idle footprint of the hub: memory and CPU of web + worker + beat, started as ``make up`` starts them, in each
profile (hub/profile.py: ``BENCH_PROFILES=small,standard`` by default, side by side).

``scripts/up.py`` runs each under ``scripts/keepalive.py``, with the commands of ``hub.profile.Profile.commands``.
Standard: web = uvicorn (a parent, its multiprocessing resource tracker and HUB_WEB_WORKERS workers), worker =
``celery worker --concurrency=2`` (prefork: a parent and 2 children), beat = ``celery beat``. Small: one web
process, ``python -m hub.profile worker --concurrency=1`` (a parent and 1 child, beat a thread of the parent);
plus a private Redis. Here they run against a throw-away SQLite database and a private Redis, with one emulated
Tiiny registered (so beat does its usual idle device reads; the emulator itself is not counted) and nobody
signed in. After they settle, each process tree is sampled from /proc once a second for 30 s: RSS (resident,
shared pages counted in every process), PSS (shared pages split between the processes that share them: the
honest sum) and CPU (utime + stime over the window). No target is stated in issue 13; the numbers are reported.
"""

from __future__ import annotations

import os
import statistics
import sys
import time
from pathlib import Path

BASE = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(BASE))
SETTLE_S = float(os.environ.get("BENCH_SETTLE_S", "20"))
WINDOW_S = float(os.environ.get("BENCH_WINDOW_S", "30"))
TICK = os.sysconf("SC_CLK_TCK")


def cpu_ticks(pid: int) -> int:
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0
    return int(fields[11]) + int(fields[12])  # utime, stime


def memory_kb(pid: int) -> tuple[int, int]:
    """(RSS, PSS) in kB."""
    try:
        rollup = Path(f"/proc/{pid}/smaps_rollup").read_text()
    except OSError:
        return 0, 0
    values = {}
    for line in rollup.splitlines()[1:]:
        name, _, rest = line.partition(":")
        if rest.strip().endswith("kB"):
            values[name] = int(rest.split()[0])
    return values.get("Rss", 0), values.get("Pss", 0)


def main() -> None:
    from bench._hub import private_hub
    from hub import profile

    names = os.environ.get("BENCH_PROFILES", "small,standard").split(",")
    results = {}
    with private_hub("footprint") as (tmp, redis):
        for name in names:
            chosen = profile.choose(name.strip())
            results[chosen.name] = (chosen, *run(tmp, redis, chosen))
    report(results)


def run(tmp: Path, redis, chosen) -> tuple[dict, dict]:
    from django.db import connection

    from devices.emulator.testing import run_tiiny
    from hub.redis_server import free_port
    from hub.testing import Proc, child_env, process_tree, wait_for
    from jobs.tests.conftest import make_device

    py, keep = sys.executable, str(BASE / "scripts" / "keepalive.py")
    port = free_port()
    # exactly scripts/up.py's commands (keepalive + the process)
    commands = chosen.commands(host="127.0.0.1", port=port, data_dir=tmp, python=py, wrap=[py, keep])
    from devices.models import Device

    with run_tiiny(speed=1, quirks="none") as emulator:
        Device.objects.all().delete()  # the previous profile's emulator is gone
        make_device(emulator, name=f"Pocket ({chosen.name})")
        connection.close()
        procs = {
            name: Proc(name, args, child_env(), tmp / "logs" / f"{name}.log").start()
            for name, args in commands.items()
        }
        try:
            import httpx

            def web_up() -> bool:
                try:
                    return httpx.get(f"http://127.0.0.1:{port}/accounts/login/", timeout=1).status_code == 200
                except httpx.HTTPError:
                    return False

            wait_for(web_up, timeout=60, what="web", proc=procs["web"])
            wait_for(lambda: "ready." in procs["worker"].log_tail(300), timeout=60, what="worker")
            beat = procs.get("beat", procs["worker"])
            wait_for(lambda: "beat: Starting" in beat.log_tail(300), timeout=60, what="beat")
            time.sleep(SETTLE_S)
            roots = {name: p.process.pid for name, p in procs.items()}
            roots["redis (make up runs it too)"] = redis.pid
            start_cpu = {
                name: {pid: cpu_ticks(pid) for pid in process_tree(root)} for name, root in roots.items()
            }
            rss: dict[str, list[int]] = {name: [] for name in roots}
            pss: dict[str, list[int]] = {name: [] for name in roots}
            counts: dict[str, int] = {}
            load = [os.getloadavg()[0]]
            started = time.monotonic()
            while time.monotonic() - started < WINDOW_S:
                for name, root in roots.items():
                    pids = process_tree(root)
                    counts[name] = len(pids)
                    mem = [memory_kb(pid) for pid in pids]
                    rss[name].append(sum(m[0] for m in mem))
                    pss[name].append(sum(m[1] for m in mem))
                time.sleep(1)
            elapsed = time.monotonic() - started
            load.append(os.getloadavg()[0])
            stats = {}
            for name, root in roots.items():
                now_cpu = {pid: cpu_ticks(pid) for pid in process_tree(root)}
                # Processes that lived through the window: their ticks since the start; newcomers: all of theirs.
                ticks = sum(now_cpu[pid] - start_cpu[name].get(pid, 0) for pid in now_cpu)
                stats[name] = {
                    "processes": counts[name],
                    "rss_mb": statistics.mean(rss[name]) / 1024,
                    "rss_max_mb": max(rss[name]) / 1024,
                    "pss_mb": statistics.mean(pss[name]) / 1024,
                    "cpu_pct": ticks / TICK / elapsed * 100,
                }
            keepalive = {name: memory_kb(p.process.pid) for name, p in procs.items()}
        finally:
            for p in procs.values():
                p.stop()
            connection.close()
    return stats, {
        "load": load,
        "keepalive": keepalive,
        "keepalive_pss_mb": sum(v[1] for v in keepalive.values()) / 1024,
    }


def report(results: dict) -> None:
    print("## Idle footprint (bench_footprint.py)\n")
    print(
        "web + worker + beat started as `make up` starts them in each profile (hub/profile.py; each process under "
        "`scripts/keepalive.py`), one emulated Tiiny registered, nobody signed in; sampled from /proc every "
        f"second for {WINDOW_S:.0f} s after {SETTLE_S:.0f} s to settle. RSS counts shared pages in every process; "
        "PSS splits them (the honest sum). Target (issue 24 item 9): the small profile's web + worker + beat at "
        "most 300 MB PSS.\n"
    )
    print("| profile | process tree | processes | RSS (mean / max) | PSS | CPU |")
    print("|---|---|---|---|---|---|")
    notes = []
    for name, (chosen, stats, extra) in results.items():
        for proc, s in stats.items():
            print(
                f"| {name} | {proc} | {s['processes']} | {s['rss_mb']:.0f} / {s['rss_max_mb']:.0f} MB | "
                f"{s['pss_mb']:.0f} MB | {s['cpu_pct']:.1f} % |"
            )
        hub = [n for n in stats if not n.startswith("redis")]
        total = {k: sum(stats[n][k] for n in hub) for k in ("rss_mb", "pss_mb", "cpu_pct", "processes")}
        verdict = "" if name != "small" else (" ok" if total["pss_mb"] <= 300 else " OVER 300 MB")
        print(
            f"| **{name}** | **web + worker + beat** | {total['processes']:.0f} | {total['rss_mb']:.0f} MB | "
            f"**{total['pss_mb']:.0f} MB**{verdict} | **{total['cpu_pct']:.1f} %** |"
        )
        notes.append(
            f"{name}: {chosen.describe().split(': ', 1)[1]}; its {len(extra['keepalive'])} keepalive wrappers "
            f"account for {extra['keepalive_pss_mb']:.0f} MB of the PSS; 1-minute load average "
            f"{extra['load'][0]:.2f} at the start, {extra['load'][1]:.2f} at the end"
        )
    print("\nCPU is of one core, on the shared 2-core box. " + ". ".join(notes) + ".")


if __name__ == "__main__":
    main()

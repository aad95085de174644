"""The pool, measured (issue 25): 60 mixed jobs from 3 people, all for "any device", on 2 and then 3 emulated Tiinys;
the makespan against the pool's lower bound, and the same jobs pinned round-robin (the way a household picks a
device for each job today) beside it.

Real processes throughout, as bench_night: a private Redis, a Celery worker (prefork, one process per device and
one more: a blocking render holds a process) and beat on the production poll rhythm, a throw-away SQLite database,
the time-scaled Tiiny emulators over HTTP with the night's quirks (the 10 s readiness window after a load included).

Time scale. The emulators run ``BENCH_POOL_SPEED`` device-seconds per wall second; every duration below is wall
seconds at that speed. The hub's device-time settings are scaled with it, as bench_night scales the readiness
window: ``JOBS_LOAD_GRACE_S``, and the load guess for a model the hub never saw load (``jobs.queue.eta.LOAD_SECONDS``,
30 device-seconds, a constant: the worker runs through this script's ``--celery`` entry, which sets it to 30 / speed
before the pool forks). The render history and each device's load times are learned first (one job of each shape
on each device, before the runs), so the planner's estimates are in the same wall seconds as the work. The hub's
own overheads (claims, polls, downloads) do not shrink with the speed: here they weigh ``speed`` times more against
the device's work than on a real device.

Two lower bounds of a run. The issue's: the total device time (``Job.device_seconds``, claim to release, every
load and readiness window the run made included) ÷ devices, or the longest job, or for pinned jobs the busiest
device's own time; loads have their own target. A stricter one charges every load beyond one per model to the
planner: each job's work is its measured ``Job.device_seconds`` minus the model load it made
(``load_s``, which the engine notes, plus the readiness window, 10 device-seconds) if it made one; loads count as
work only where unavoidable: one load per model (the devices start empty) for a pool run, one per model per
device for pinned jobs, each at the mean measured cost of that model's loads in the run. Bound = max(total work /
devices, the longest job with its model's load, and for pinned jobs each device's own work with its loads).
"""

from __future__ import annotations

import argparse
import contextlib
import os
import statistics
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

BASE = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(BASE))

from bench import bench_night as bn  # noqa: E402 - after the path: run as a script

SPEED = float(os.environ.get("BENCH_POOL_SPEED", "60"))
JOBS = int(os.environ.get("BENCH_POOL_JOBS", "60"))
QUICK_JOBS = 24
CHAOS_JOBS = int(os.environ.get("BENCH_POOL_CHAOS_JOBS", "36"))  # the chaos night's (faults slow it down)
TARGET = 1.02  # issue 25: makespan ≤ 1.02 × the pool's lower bound, for 2 and 3 devices
IDLE_TARGET_S = 1.0  # issue 25: idle capable device while a job it could run waits, median
LOAD_GUESS_S = 30.0  # jobs.queue.eta.LOAD_SECONDS: the planner's guess for a model load, device seconds
PEOPLE = ("ana", "ben", "cai")


def window_s(speed: float = SPEED) -> float:
    """The device's readiness window after a load, in wall seconds at ``speed``."""
    return bn.WINDOW_S / speed


def hub_env(speed: float = SPEED, **extra: str) -> dict[str, str]:
    """The production rhythm (bench_night's), its device-time settings at ``speed``."""
    return {
        **bn.HUB_ENV,
        "JOBS_LOAD_GRACE_S": f"{window_s(speed):.4f}",
        "BENCH_POOL_LOAD_S": f"{LOAD_GUESS_S / speed:.4f}",
        **extra,
    }


def scale_load_guess() -> None:
    """The planner's load guess at the emulator's speed (``BENCH_POOL_LOAD_S``, wall seconds), in this process."""
    from jobs.queue import eta, pool

    value = os.environ.get("BENCH_POOL_LOAD_S")
    if value:
        eta.LOAD_SECONDS = pool.LOAD_SECONDS = float(value)


def celery_main(argv: list[str]) -> None:
    """``bench_pool.py --celery worker …``: the Celery worker with the load guess scaled (before the pool forks)."""
    import django

    django.setup()
    scale_load_guess()
    from hub.celery import app

    app.worker_main(argv)


# -- the jobs --------------------------------------------------------------------------------------------------


def plan(n: int) -> list[tuple[int, str, str, dict]]:
    """``n`` jobs of bench_night's mix (its 30-job night again and again, prompts made distinct), in arrival
    order: three people, the models interleaved."""
    night = bn.night()
    out = []
    for i in range(n):
        person, kind, model, params = night[i % len(night)]
        params = dict(params)
        if "prompt" in params:
            params["prompt"] = f"{params['prompt']} r{i // len(night)}"
        out.append((person, kind, model, params))
    return out


def shapes() -> list[tuple[int, str, str, dict]]:
    """One job of each shape of the night (the warm-up)."""
    seen, out = set(), []
    for row in bn.night():
        key = (row[1], row[2], row[3].get("seconds"))
        if key not in seen:
            seen.add(key)
            out.append(row)
    return out


def submit(owner, kind: str, model: str, params: dict, *, device, pool=()):
    from django.core.files.uploadedfile import SimpleUploadedFile

    from jobs.queue.services import job_submit

    files = {"image": SimpleUploadedFile("obj.png", bn.PNG, "image/png")} if kind == "mesh" else None
    return job_submit(
        owner=owner,
        device=device,
        pool=pool,
        kind=kind,
        model_id=model,
        params=params,
        polite=False,
        upload_files=files,
    )


def wait_final(ids: list[int], timeout: float) -> bool:
    from jobs.models import FINAL_STATES, Job

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if not Job.objects.filter(pk__in=ids).exclude(state__in=FINAL_STATES).exists():
            return True
        time.sleep(0.2)
    return False


def make_people(tag: str):
    from hub.accounts.models import User

    return [User.objects.create_user(f"{tag}-{p}", password="bench-pass-1", role="member") for p in PEOPLE]


def fresh(emulators, devices, speed: float = SPEED) -> None:
    """Every device empty (no model loaded, counters at 0), and the hub told so by one reading of each."""
    from devices.services import device_refresh

    for emu in emulators:
        emu.reset(quirks=bn.NIGHT_QUIRKS, speed=speed)
        emu.reset_counters()
    for device in devices:
        device_refresh(device_id=device.pk)


def warm_up(emulators, devices) -> float:
    """One job of each shape pinned to each device, at once: every device learns each shape's render time."""
    started = time.monotonic()
    fresh(emulators, devices)
    owner = make_people("warm")[0]
    ids = [submit(owner, k, m, p, device=d).pk for d in devices for _person, k, m, p in shapes()]
    if not wait_final(ids, timeout=300):
        raise SystemExit("the warm-up did not finish in 300 s")
    return time.monotonic() - started


def start_worker(env: dict[str, str], *, concurrency: int, name: str = "pool"):
    """The worker through ``--celery`` (the load guess scaled), ready once its log says so."""
    from hub.testing import Proc, child_env, log_dir

    args = [sys.executable, str(Path(__file__).resolve()), "--celery", "worker", "--loglevel=INFO"]
    args += [f"--hostname={name}@%h", f"--concurrency={concurrency}", "--pool=prefork"]
    args += ["--without-gossip", "--without-mingle"]
    proc = Proc(f"worker-{name}", args, child_env(**env), log_dir() / f"worker-{name}.log", ready="ready.")
    return proc.start_and_wait(timeout=90)


# -- one run ---------------------------------------------------------------------------------------------------


@dataclass
class Run:
    n: int
    mode: str  # pool | pinned
    t0: float
    submit_s: float
    finished: bool
    jobs: list = field(default_factory=list)  # Job rows of the run
    spans: dict[int, list[tuple[float, float, int]]] = field(
        default_factory=dict
    )  # device -> (start, end, job)
    launches: dict[int, int] = field(default_factory=dict)
    peaks: dict[int, int] = field(default_factory=dict)
    names: dict[int, str] = field(default_factory=dict)


def run_night(emulators, devices, mode: str, jobs: int) -> Run:
    """``jobs`` jobs submitted at once, for any device of ``devices`` (pool) or pinned round-robin; until all end."""
    from jobs.models import DeviceUse, Job

    fresh(emulators, devices)
    people = make_people(f"{mode}{len(devices)}")
    ids = []
    t0 = time.time()
    for i, (person, kind, model, params) in enumerate(plan(jobs)):
        if mode == "pool":
            job = submit(people[person], kind, model, params, device=devices[0], pool=devices)
        else:
            job = submit(people[person], kind, model, params, device=devices[i % len(devices)])
        ids.append(job.pk)
    submit_s = time.time() - t0
    expected = jobs * 190 / SPEED / len(devices)  # ~190 device-seconds a job in this mix
    finished = wait_final(ids, timeout=4 * expected + 120)
    run = Run(n=len(devices), mode=mode, t0=t0, submit_s=submit_s, finished=finished)
    run.jobs = list(Job.objects.filter(pk__in=ids).select_related("owner").order_by("pk"))
    for use in DeviceUse.objects.filter(job_id__in=ids).order_by("started"):
        span = (use.started.timestamp(), use.ended.timestamp(), use.job_id)
        run.spans.setdefault(use.device_id, []).append(span)
    for emu, device in zip(emulators, devices, strict=True):
        counters = emu.counters()
        run.launches[device.pk] = int(counters["launches"])
        run.peaks[device.pk] = int(counters["peak_concurrent_work"])
        run.names[device.pk] = device.name
    return run


# -- what a run shows ------------------------------------------------------------------------------------------


def load_costs(runs: list[Run]) -> dict[str, float]:
    """Each model's mean measured load cost (the engine's ``load_s`` plus the readiness window), over ``runs``."""
    costs: dict[str, list[float]] = {}
    for run in runs:
        for job in run.jobs:
            load = (job.remote_data or {}).get("load_s") if isinstance(job.remote_data, dict) else None
            if load is not None:
                costs.setdefault(job.model_id, []).append(float(load) + window_s())
    return {model: statistics.fmean(values) for model, values in costs.items()}


def work_of(job) -> float:
    """The job's device-seconds without the model load it made (and the window after it)."""
    load = (job.remote_data or {}).get("load_s") if isinstance(job.remote_data, dict) else None
    cost = float(load) + window_s() if load is not None else 0.0
    return max(0.0, float(job.device_seconds) - cost)


def bound(run: Run, costs: dict[str, float]) -> dict:
    """The run's lower bound and its parts (see the module's doc)."""
    work = sum(work_of(j) for j in run.jobs)
    models = sorted({j.model_id for j in run.jobs})
    if run.mode == "pool":
        loads = sum(costs[m] for m in models)
        chains = 0.0
    else:
        must = {(j.device_id, j.model_id) for j in run.jobs}
        loads = sum(costs[m] for _d, m in must)
        chains = max(
            sum(work_of(j) for j in run.jobs if j.device_id == d) + sum(costs[m] for dd, m in must if dd == d)
            for d in {j.device_id for j in run.jobs}
        )
    longest = max(run.jobs, key=lambda j: work_of(j) + costs[j.model_id])
    longest_s = work_of(longest) + costs[longest.model_id]
    share = (work + loads) / run.n
    device_time = sum(float(j.device_seconds) for j in run.jobs)  # every load as made, its window included
    return {
        "device_time": device_time,
        "busy_bound": max(device_time / run.n, longest_s, _busiest_own(run)),
        "work": work,
        "loads": loads,
        "models": len(models),
        "share": share,
        "longest": longest_s,
        "longest_kind": f"{longest.kind} {longest.params.get('seconds', '')}".strip(),
        "chains": chains,
        "bound": max(share, longest_s, chains),
    }


def _busiest_own(run: Run) -> float:
    """For pinned jobs: the busiest device's own device time (its jobs could run nowhere else); 0 for a pool run."""
    if run.mode == "pool":
        return 0.0
    return max(
        sum(float(j.device_seconds) for j in run.jobs if j.device_id == d)
        for d in {j.device_id for j in run.jobs}
    )


def makespan(run: Run) -> float:
    return max(j.finished_at.timestamp() for j in run.jobs if j.finished_at) - run.t0


def idle_gaps(run: Run) -> list[float]:
    """Each stretch a device of the run sat idle while a job it could run waited (wall seconds): from the first
    submit to its first claim, and between its jobs; a pool job may run on every device of the run, a pinned one
    only on its own."""
    gaps = []
    for device, spans in run.spans.items():
        mine = [j for j in run.jobs if run.mode == "pool" or j.device_id == device]
        last_claim = max(j.started_at.timestamp() for j in mine)  # after it, nothing of its waits
        edge = run.t0
        for start, end, _job in spans:
            gap_end = min(start, last_claim)
            if gap_end > edge:
                gaps.append(gap_end - edge)
            edge = max(edge, end)
    return gaps


def busy_shares(run: Run) -> dict[int, float]:
    span = makespan(run)
    return {d: sum(e - s for s, e, _j in spans) / span for d, spans in run.spans.items()}


def distinct_models(run: Run, device: int) -> int:
    return len({j.model_id for j in run.jobs if j.device_id == device})


# -- report ----------------------------------------------------------------------------------------------------


def report(runs: dict[tuple[int, str], Run], costs: dict[str, float], info: dict) -> None:
    print("## The pool: any device vs pinned round-robin (bench_pool.py)\n")
    print(
        f"{info['jobs']} jobs of bench_night's mix (videos 2 s and 7 s, images, loops, speech, 3D shape+export; "
        f"5 models) from 3 people, submitted at once, on {info['devices']} emulated Tiinys at speed {SPEED:g} "
        f"(a 2 s video renders in {420 / SPEED:.0f} s) with the night's quirks. *pool*: every job for any device "
        f"(`job_submit(…, pool=[…])`); *pinned*: job i on device i mod n (a household's choice today). A real "
        f"worker (prefork, {info['concurrency']} processes) and beat on the production poll rhythm; each device "
        f"learned each shape's render time first (warm-up, {info['warm']:.0f} s). All times are wall seconds at "
        f"this speed; the planner's load guess and the load grace are scaled to it. Load average before: "
        f"{info['load']:.2f} (a 2-core box shared with other work).\n"
    )
    print(
        "| devices | jobs go to | makespan (s) | total device time ÷ devices (s) | ÷ it | pool's lower bound, "
        "one load per model (s) | ÷ it | model loads per device (distinct models) | busy share per device | idle "
        "while a job it could run waits: median / max / sum (s) |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|")
    for n in info["devices"]:
        pool_bound = bound(runs[(n, "pool")], costs)["bound"]
        for mode in ("pool", "pinned"):
            busy_bound = bound(runs[(n, mode)], costs)["busy_bound"]
            run = runs[(n, mode)]
            m = makespan(run)
            loads = ", ".join(f"{run.launches[d]} ({distinct_models(run, d)})" for d in sorted(run.launches))
            busy = ", ".join(f"{share:.0%}" for _d, share in sorted(busy_shares(run).items()))
            gaps = idle_gaps(run)
            print(
                f"| {n} | {'any device (pool)' if mode == 'pool' else 'pinned round-robin'} | {m:.1f} | "
                f"{busy_bound:.1f} | {m / busy_bound:.3f} | {pool_bound:.1f} | {m / pool_bound:.3f} | {loads} | "
                f"{busy} | "
                f"{bn.pct(gaps, 0.5):.2f} / {max(gaps, default=0):.2f} / {sum(gaps):.1f} |"
            )
    print()
    print(
        "Two bounds. The issue's: the devices' total device time (Σ `Job.device_seconds`, claim to release: every "
        "model load as the run made it, its readiness window included) ÷ devices, or the longest job, or for "
        "pinned jobs the busiest device's own time, whichever is larger; it measures how well the devices were "
        "kept busy and evened out, and the loads are judged apart (their own target below). A stricter one, "
        "which also charges every load beyond one per model to the planner, computed as follows "
        "(wall seconds at this speed):\n"
    )
    for n in info["devices"]:
        for mode in ("pool", "pinned"):
            b = bound(runs[(n, mode)], costs)
            parts = (
                f"Σ work {b['work']:.1f} + unavoidable loads {b['loads']:.1f} "
                f"({'one per model: ' + str(b['models']) if mode == 'pool' else 'one per model per device'}) "
                f"= {b['work'] + b['loads']:.1f}, ÷ {n} = {b['share']:.1f}; longest job with its load "
                f"{b['longest']:.1f} ({b['longest_kind']})"
            )
            if mode == "pinned":
                parts += f"; busiest device's own work and loads {b['chains']:.1f}"
            print(f"- {n} devices, {mode}: {parts}; bound {b['bound']:.1f} s.")
    print(
        "\nWork = Σ over jobs of `device_seconds` (claim to release, as the hub measures it) minus the job's own "
        f"model load (`load_s` + the {bn.WINDOW_S:g} s readiness window = {window_s():.3f} s) where it made one. "
        "Mean load cost per model, measured over every run: "
        + ", ".join(f"{m.split('/')[-1]} {c:.2f} s" for m, c in sorted(costs.items()))
        + ".\n"
    )
    verdicts(runs, costs, info)


def verdicts(runs: dict[tuple[int, str], Run], costs: dict[str, float], info: dict) -> None:
    lines = []
    for n in info["devices"]:
        pool, pinned = runs[(n, "pool")], runs[(n, "pinned")]
        bounds = bound(pool, costs)
        b = bounds["bound"]
        ratio = makespan(pool) / bounds["busy_bound"]
        strict = makespan(pool) / b
        gain = 1 - makespan(pool) / makespan(pinned)
        lines.append(
            f"- {n} devices: makespan ≤ {TARGET} × the pool's lower bound (total device time ÷ devices) — "
            f"{bn.verdict(ratio <= TARGET)} ({ratio:.3f}); against the stricter bound (one load per model): "
            f"{bn.verdict(strict <= TARGET)} ({strict:.3f}). The pool {'beats' if gain > 0 else 'loses to'} pinned "
            f"round-robin by {abs(gain):.1%} of its makespan ({makespan(pinned):.1f} → {makespan(pool):.1f} s; "
            f"loads {sum(pinned.launches.values())} → {sum(pool.launches.values())})."
        )
        if strict > TARGET:
            lines.append(f"  {why_missed(pool, b)}")
        gaps = idle_gaps(pool)
        med = bn.pct(gaps, 0.5)
        lines.append(
            f"- {n} devices: idle capable device while a job it could run waits ≤ {IDLE_TARGET_S:g} s median — "
            f"{bn.verdict(med <= IDLE_TARGET_S)} ({med:.2f} s over {len(gaps)} gaps)."
        )
        over = [
            f"{pool.names[d]} {pool.launches[d]} loads for {distinct_models(pool, d)} models"
            for d in sorted(pool.launches)
            if pool.launches[d] > distinct_models(pool, d) + 2
        ]
        lines.append(
            f"- {n} devices: loads ≤ distinct models per device + 2 — {bn.verdict(not over)}"
            + (f" ({'; '.join(over)})." if over else ".")
        )
        peaks = [p for r in (pool, pinned) for p in r.peaks.values()]
        if max(peaks) > 1 or not (pool.finished and pinned.finished):
            lines.append(
                f"- {n} devices: **a run went wrong**: peak device concurrency {max(peaks)}; "
                f"finished pool {pool.finished}, pinned {pinned.finished}."
            )
    bad = [j for r in runs.values() for j in r.jobs if j.state != "done"]
    print("Targets (issue 25):\n")
    print("\n".join(lines))
    print(
        f"\nEvery job done: {bn.verdict(not bad)}"
        + (f" ({[(j.pk, j.state, j.error_human[:60]) for j in bad[:5]]})" if bad else "")
        + f". Submitting {info['jobs']} jobs took {statistics.fmean(r.submit_s for r in runs.values()):.1f} s "
        f"(inside the makespan). Whole bench {info['took']:.0f} s; load average after {os.getloadavg()[0]:.2f}.\n"
    )


def why_missed(run: Run, b: float) -> str:
    """Where the makespan above the bound went, exactly: the last device to finish was idle (while work waited)
    for part of it, did more than the devices' mean for part, and the mean itself is above the bound by the loads
    beyond one per model (and the lease releases after each job), shared over the devices."""
    total = makespan(run)
    busy = {d: sum(e - s for s, e, _j in spans) for d, spans in run.spans.items()}
    last = max(run.spans, key=lambda d: max(e for _s, e, _j in run.spans[d]))
    mean = sum(busy.values()) / run.n
    idle = total - busy[last]
    # A real device: the same hand-over seconds against work SPEED times longer (loads and work scale alike).
    real = 1 + (total - b - idle) / b + idle / (SPEED * b)
    return (
        f"Why: {total - b:.1f} s above the bound = {run.names[last]} (the last to finish) idle while work waited "
        f"{idle:.1f} s (hand-overs and its first claim: the hub's own seconds, which do not shrink "
        f"with the emulator's speed) + its work above the devices' mean {busy[last] - mean:.1f} s (the jobs left "
        f"at the end) + the mean's excess over the bound {mean - b:.1f} s (loads beyond one per model, "
        f"{sum(run.launches.values()) - len({j.model_id for j in run.jobs})} here, shared over the devices). "
        f"On a real device, where the work is {SPEED:g} times longer and the hand-overs as long, that would be "
        f"about {real:.3f} × the bound (an estimate, not measured)."
    )


# -- main ------------------------------------------------------------------------------------------------------


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help=f"{QUICK_JOBS} jobs a run instead of {JOBS}")
    parser.add_argument("--part", choices=("all", "makespan", "chaos"), default="all")
    args = parser.parse_args()
    jobs = QUICK_JOBS if args.quick else JOBS
    from bench import _pool_chaos as chaos
    from bench._hub import private_hub

    started = time.monotonic()
    with private_hub("pool") as (tmp, _redis):
        scale_load_guess()  # this process submits: admission's plan guesses loads too
        from devices.emulator.testing import run_tiiny
        from hub.testing import start_beat
        from jobs.tests.conftest import make_device

        load = os.getloadavg()[0]
        env = hub_env()
        runs, night = {}, None
        with contextlib.ExitStack() as stack:
            emulators = [  # a data folder each: one comes back from a restart as a device reboots (chaos)
                stack.enter_context(
                    run_tiiny(speed=SPEED, quirks=bn.NIGHT_QUIRKS, data_dir=tmp / f"tiiny-{i}")
                )
                for i in range(3)
            ]
            devices = [make_device(e, name=f"Tiiny {i + 1}") for i, e in enumerate(emulators)]
            concurrency = len(devices) + 1
            worker = start_worker(env, concurrency=concurrency)
            beat = start_beat(**env)
            try:
                time.sleep(2)  # beat's first ticks
                warm = warm_up(emulators, devices)
                for n in (2, 3) if args.part != "chaos" else ():
                    for mode in ("pool", "pinned"):
                        print(f"bench_pool: {n} devices, {mode} …", file=sys.stderr, flush=True)
                        runs[(n, mode)] = run_night(emulators[:n], devices[:n], mode, jobs)
            finally:
                worker.stop()
                beat.stop()
            if args.part != "makespan":
                print("bench_pool: the chaos night …", file=sys.stderr, flush=True)
                night = chaos.night(emulators, devices, jobs=min(jobs, CHAOS_JOBS), concurrency=concurrency)
        info = {
            "jobs": jobs,
            "devices": (2, 3),
            "concurrency": concurrency,
            "warm": warm,
            "load": load,
            "took": time.monotonic() - started,
        }
        if runs:
            report(runs, load_costs(list(runs.values())), info)
            if os.environ.get("BENCH_POOL_DUMP"):  # each run's device timelines, for a closer look
                dump(runs, Path(os.environ["BENCH_POOL_DUMP"]))
        if night is not None:
            chaos.report(night)


def dump(runs: dict[tuple[int, str], Run], path: Path) -> None:
    import json

    out = {}
    for (n, mode), run in runs.items():
        order = {j.pk: i for i, j in enumerate(run.jobs)}
        by = {j.pk: j for j in run.jobs}
        out[f"{n}-{mode}"] = {
            run.names[d]: [
                (
                    round(s - run.t0, 2),
                    round(e - run.t0, 2),
                    order[j],
                    by[j].kind,
                    by[j].params.get("seconds"),
                    by[j].owner.username,
                    round(work_of(by[j]), 2),
                )
                for s, e, j in spans
            ]
            for d, spans in run.spans.items()
        }
    path.write_text(json.dumps(out, indent=1))


if __name__ == "__main__":
    if sys.argv[1:2] == ["--celery"]:
        celery_main(sys.argv[2:])
    else:
        main()

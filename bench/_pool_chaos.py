"""The pool's chaos night (the second part of ``bench_pool.py``; not a ``bench_*.py``: ``make bench`` runs it there).

The night's jobs, all for any of 3 emulated Tiinys, while the Celery worker is SIGKILLed and started again several
times (once while a device is locked), and, one after another, each on a device rendering a job never re-queued:
one device is unplugged (its emulator process killed) for longer than ``JOBS_DEVICE_LOST_S`` and then comes back on
the same port (its data folder kept, as a device that reboots: the render in flight is gone); one is power-cycled
(everything in flight vanishes; locked until unlocked a few seconds later); one is locked mid-render for
less than ``JOBS_DEVICE_LOST_S`` (a locked device renders on). The worker runs with ``JOBS_DEVICE_LOST_S`` = 5 s, a
3 s lease and reconcile every second (as ``make chaos``'s engine settings).

Checked afterwards, from the hub's records and the devices' own counters and lists: every job done; no render sent
twice while it lived (each device's ``renders_submitted`` and ``tasks_submitted``, summed over its restarts, equal
the render ids the hub's events know; no job has more renders than 1 + its interruptions; and no render was given
up for a device that had not been away ``JOBS_DEVICE_LOST_S``); one job at a time per device (a sampler reads the
active jobs every 0.1 s, the hub's device-time spans never overlap on a device, the emulators' peak concurrent work
is 1); no job on two devices at once (a job's spans never overlap); the lost render moved on; the device that came
back took work again; and the render on the briefly locked device kept its claim and finished there.
"""

from __future__ import annotations

import threading
import time
from collections import Counter
from dataclasses import dataclass, field

from bench import bench_night as bn
from bench import bench_pool as bp

LOST_S = 5.0  # JOBS_DEVICE_LOST_S in the worker
# How long the unplugged device stays away (wall seconds): past JOBS_DEVICE_LOST_S with room for a request of the
# render's own to find it still away (its poll chain may be dead a few seconds with a killed worker).
AWAY_S = LOST_S + 15.0
LOCKED_S = 3.0  # how long the power-cycled device stays locked
WORKER_KILLS = (
    0.08,
    0.3,
    0.55,
)  # when the worker is SIGKILLed: shares of the night's expected length; and once
KILL_AFTER_LOCK_S = 2.5  # this long after the lock below: the worker is down while the device comes back
WORKER_DOWN_S = 2.0  # before it is started again (its start then takes a few seconds more)
LOCK_S = (
    LOST_S - 2.0
)  # how long the locked device stays locked: shorter than JOBS_DEVICE_LOST_S (it renders on)
UNPLUG_AT, CYCLE_AT, LOCK_AT = (
    0.12,
    0.4,
    0.5,
)  # the device faults (at the earliest), as shares of the expected length
ENV = {"JOBS_DEVICE_LOST_S": f"{LOST_S:g}", "JOBS_LEASE_TTL_S": "3", "JOBS_RECONCILE_S": "1"}
KEPT = ("renders_submitted", "tasks_submitted", "launches", "inferences")


@dataclass
class Night:
    jobs: int
    expected: float
    t0: float = 0.0
    ids: list[int] = field(default_factory=list)
    faults: list[tuple[float, str]] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    lost: tuple[int, float, float] | None = None  # the unplugged device, when it went away and came back
    cycled: tuple[int, float] | None = None  # the power-cycled device, when
    locked: tuple[int, float, float, int | None] | None = (
        None  # the locked device, when, until, the job it rendered
    )
    submit_s: float = 0.0
    finished: bool = False
    makespan: float = 0.0
    tally: dict[int, Counter] = field(default_factory=dict)  # device -> its counters, summed over restarts
    peaks: dict[int, int] = field(default_factory=dict)
    sampled: dict[int, int] = field(default_factory=dict)  # device -> most jobs seen active on it at once
    sampled_bad: list[str] = field(default_factory=list)
    names: dict[int, str] = field(default_factory=dict)
    videos: dict[str, tuple[int, str]] = field(
        default_factory=dict
    )  # render id -> (device, its status there)


class Driver:
    """The faults (two threads: the worker's, the devices') and the sampler (a third), each with its own database
    connection."""

    def __init__(self, night: Night, emulators, devices, worker) -> None:
        self.night, self.emulators, self.devices, self.worker = night, emulators, devices, worker
        self.stop = threading.Event()
        self.lock_started = threading.Event()

    def now(self) -> float:
        return time.time() - self.night.t0

    def note(self, what: str) -> None:
        self.night.faults.append((self.now(), what))

    def bank(self, i: int) -> None:
        counters = self.emulators[i].counters()
        pk = self.devices[i].pk
        self.night.tally.setdefault(pk, Counter()).update({k: int(counters[k]) for k in KEPT})
        self.night.peaks[pk] = max(self.night.peaks.get(pk, 0), int(counters["peak_concurrent_work"]))

    def threads(self) -> list[threading.Thread]:
        return [
            threading.Thread(target=self._guard, args=(fn,), name=fn.__name__, daemon=True)
            for fn in (self.sample, self.worker_faults, self.device_faults)
        ]

    def _guard(self, fn) -> None:
        from django.db import connection

        try:
            fn()
        except Exception as exc:  # noqa: BLE001 - reported with the night
            self.night.errors.append(f"{fn.__name__}: {exc!r}")
        finally:
            connection.close()

    def sample(self) -> None:
        from jobs.models import ACTIVE_STATES, Job

        while not self.stop.wait(0.1):
            rows = list(Job.objects.filter(state__in=ACTIVE_STATES).values_list("device_id", "pk"))
            for device, k in Counter(d for d, _pk in rows).items():
                self.night.sampled[device] = max(self.night.sampled.get(device, 0), k)
                if k > 1:
                    jobs = sorted(pk for d, pk in rows if d == device)
                    self.night.sampled_bad.append(f"+{self.now():.1f} s: {self.night.names[device]} {jobs}")

    def worker_faults(self) -> None:
        for share in WORKER_KILLS:
            if self.stop.wait(max(0.0, share * self.night.expected - self.now())):
                return
            self.kill_worker()
        if self.lock_started.wait(timeout=4 * self.night.expected) and not self.stop.wait(KILL_AFTER_LOCK_S):
            self.kill_worker()

    def kill_worker(self) -> None:
        self.worker.kill()
        self.note("worker SIGKILLed")
        time.sleep(WORKER_DOWN_S)  # it comes back whatever happens meanwhile
        self.worker.start_and_wait(timeout=90)
        self.note("worker started again")

    def rendering(self, among: list[int], *, below: float | None = None, within: float = 15.0):
        """Wait (up to ``within``) until one of the devices ``among`` (indexes) renders a job never re-queued
        (faults hit fresh jobs: a job interrupted twice fails by design): (its index, the job's id), or (the first
        index, None). ``below``: a video under that % done by the device's own list (the hub's state may lag it),
        else any render the hub has there."""
        from jobs.models import Job

        deadline = time.monotonic() + within
        while time.monotonic() < deadline:
            for i in among:
                rows = Job.objects.filter(pk__in=self.night.ids, device_id=self.devices[i].pk, requeues=0)
                if below is None:
                    rows = rows.filter(state="running").exclude(remote_id="")
                else:
                    with self.emulators[i].client(timeout=5) as http:
                        listed = http.get("/v1/videos").json()["data"]
                    early = [
                        r["id"]
                        for r in listed
                        if r["status"] == "in_progress" and float(r["progress"] or 0) < below
                    ]
                    rows = rows.filter(remote_id__in=early)
                job = rows.values_list("pk", flat=True).first()
                if job is not None:
                    return i, job
            if self.stop.wait(0.05):
                break
        return among[0], None

    def device_faults(self) -> None:
        """One after another, each on a device rendering a fresh job then: unplugged past ``JOBS_DEVICE_LOST_S``,
        power-cycled, locked for less than it."""
        expected, everyone = self.night.expected, list(range(len(self.devices)))
        if self.stop.wait(max(0.0, UNPLUG_AT * expected - self.now())):
            return
        i, job = self.rendering(everyone)
        emu, device = self.emulators[i], self.devices[i]
        self.bank(i)
        emu.process.kill()
        emu.process.wait(timeout=5)
        away = self.now()
        self.note(f"{device.name} unplugged ({f'job {job} rendering' if job else 'no render running'})")
        time.sleep(AWAY_S)  # it comes back whatever happens meanwhile
        old_log = emu.stderr_path
        emu.restart()
        if old_log is not None:
            old_log.unlink(missing_ok=True)
        self.night.lost = (device.pk, away, self.now())
        self.note(f"{device.name} back on its port, after {self.now() - away:.1f} s")
        if self.stop.wait(max(0.0, CYCLE_AT * expected - self.now())):
            return
        unplugged = i
        i, job = self.rendering([k for k in everyone if k != unplugged])
        emu, device = self.emulators[i], self.devices[i]
        emu.power_cycle()
        self.night.cycled = (device.pk, self.now())
        self.note(
            f"{device.name} power-cycled ({f'job {job} rendering' if job else 'no render running'}); locked"
        )
        time.sleep(LOCKED_S)
        emu.unlock()
        self.note(f"{device.name} unlocked")
        if self.stop.wait(max(0.0, LOCK_AT * expected - self.now())):
            return
        # A video not past 60 % (7-12 s renders: 3 s and more left, about the lock's length); up to 30 s for one:
        # late in the night the long renders have mostly started (the longest pool job goes first).
        i, job = self.rendering([k for k in everyone if k != i], below=60, within=30.0)
        emu, device = self.emulators[i], self.devices[i]
        emu.lock()
        locked = self.now()
        self.lock_started.set()
        self.note(
            f"{device.name} locked ({f'job {job} rendering' if job else 'no render starting'}; it renders on)"
        )
        time.sleep(LOCK_S)
        emu.unlock()
        self.night.locked = (device.pk, locked, self.now(), job)
        self.note(f"{device.name} unlocked")


def night(emulators, devices, *, jobs: int, concurrency: int) -> Night:
    """The chaos night on ``devices`` (their render history learned already), with a worker and beat of its own."""
    from hub.testing import start_beat

    env = bp.hub_env(**ENV)
    bp.fresh(emulators, devices)
    n = Night(jobs=jobs, expected=jobs * 190 / bp.SPEED / len(devices))
    n.names = {d.pk: d.name for d in devices}
    people = bp.make_people("chaos")
    worker = bp.start_worker(env, concurrency=concurrency, name="pool-chaos")
    beat = start_beat(**env)
    driver = Driver(n, emulators, devices, worker)
    threads = driver.threads()
    try:
        time.sleep(2)
        n.t0 = time.time()
        for t in threads:  # the faults' times count from the first submit
            t.start()
        for person, kind, model, params in bp.plan(jobs):
            n.ids.append(bp.submit(people[person], kind, model, params, device=devices[0], pool=devices).pk)
        n.submit_s = time.time() - n.t0
        n.finished = bp.wait_final(n.ids, timeout=4 * n.expected + 120)
    finally:
        driver.stop.set()
        for t in threads:
            if t.is_alive() or t.ident is not None:
                t.join(timeout=AWAY_S + 120)
        worker.stop()  # the world stands still before the counters are read
        beat.stop()
    for i, (emu, device) in enumerate(zip(emulators, devices, strict=True)):
        driver.bank(i)
        with emu.client(timeout=10) as http:  # the device's own list: what became of each render
            for row in http.get("/v1/videos").json()["data"]:
                n.videos[row["id"]] = (device.pk, row["status"])
    from jobs.models import Job

    ends = [j.finished_at.timestamp() for j in Job.objects.filter(pk__in=n.ids) if j.finished_at]
    n.makespan = max(ends, default=n.t0) - n.t0
    return n


# -- the checks --------------------------------------------------------------------------------------------------


def _overlaps(spans: list[tuple[float, float, int]]) -> list[tuple[int, int]]:
    spans = sorted(spans)
    return [(a[2], b[2]) for a, b in zip(spans, spans[1:], strict=False) if b[0] < a[1] - 1e-3]


def checks(n: Night) -> list[tuple[str, bool, str]]:
    from jobs.models import DeviceUse, Job, JobEvent

    jobs = {j.pk: j for j in Job.objects.filter(pk__in=n.ids)}
    renders: dict[int, dict[str, None]] = {}  # job -> its render ids, in order
    interrupted: Counter = Counter()
    given_up: list[tuple[int, int, float, str]] = []  # (job, device, when, render id): "lost with its device"
    for ev in JobEvent.objects.filter(job_id__in=n.ids).order_by("job_id", "seq"):
        data = ev.data or {}
        if data.get("remote_id"):
            renders.setdefault(ev.job_id, {})[str(data["remote_id"])] = None
        if ev.state == "interrupted":
            interrupted[ev.job_id] += 1
            if data.get("lost_device"):
                given_up.append(
                    (ev.job_id, data["lost_device"], ev.at.timestamp() - n.t0, data.get("remote_id"))
                )
    out = []
    states = Counter(j.state for j in jobs.values())
    bad = [f"#{j.pk} {j.kind} {j.state}: {j.error_human[:80]}" for j in jobs.values() if j.state != "done"]
    out.append(
        ("every job done", n.finished and not bad, f"{dict(states)}" + (f"; {bad[:4]}" if bad else ""))
    )
    out.append(sent_once(n, jobs, renders, interrupted, given_up))
    spans: dict[int, list] = {}
    per_job: dict[int, list] = {}
    for use in DeviceUse.objects.filter(job_id__in=n.ids):
        span = (use.started.timestamp(), use.ended.timestamp(), use.job_id)
        spans.setdefault(use.device_id, []).append(span)
        per_job.setdefault(use.job_id, []).append((*span[:2], use.device_id))
    device_overlaps = {n.names[d]: _overlaps(s) for d, s in spans.items() if _overlaps(s)}
    worst = max(n.sampled.values(), default=0)
    out.append(
        (
            "one job at a time per device",
            worst <= 1 and not device_overlaps and max(n.peaks.values(), default=0) <= 1,
            f"most active at once (sampled every 0.1 s): {worst}; the hub's device-time spans overlap: "
            f"{device_overlaps or 'never'}; the emulators' peak concurrent work: "
            + ", ".join(f"{n.names[d]} {p}" for d, p in sorted(n.peaks.items()))
            + (f"; seen: {n.sampled_bad[:3]}" if n.sampled_bad else ""),
        )
    )
    moved = {pk: sorted(s) for pk, s in per_job.items() if len({d for _a, _b, d in s}) > 1}
    doubled = [pk for pk, s in moved.items() if _overlaps([(a, b, d) for a, b, d in s])]
    out.append(
        (
            "no job on two devices at once",
            not doubled,
            f"{len(moved)} jobs ran on two devices one after the other, their spans never overlapping"
            + (f"; overlapping: {doubled}" if doubled else ""),
        )
    )
    lost_jobs = {pk: at for pk, device, at, _rid in given_up if n.lost and device == n.lost[0]}
    out.append(lost_render(n, jobs, lost_jobs, per_job))
    out.append(came_back(n, spans))
    out.append(kept_claim(n, jobs, renders, interrupted))
    return out


def legit(n: Night, device: int, at: float) -> bool:
    """A render given up for its device at ``at`` (seconds after t0): only the unplugged device's, once it had been
    away for ``JOBS_DEVICE_LOST_S`` and before the hub could have seen it back (its fast poll and a reconcile)."""
    if n.lost is None or device != n.lost[0]:
        return False
    _d, away, back = n.lost
    return away + LOST_S <= at <= back + 3.0


def sent_once(
    n: Night, jobs: dict, renders: dict, interrupted: Counter, given_up: list
) -> tuple[str, bool, str]:
    """The devices' own counts against the render ids the hub knows; no job with more renders than 1 + its
    interruptions; and no render given up for a device that was not away ``JOBS_DEVICE_LOST_S`` (it may live)."""
    videos = [pk for pk, j in jobs.items() if j.kind == "video"]
    meshes = [pk for pk, j in jobs.items() if j.kind == "mesh"]
    known_v = sum(len(renders.get(pk, ())) for pk in videos)
    known_t = sum(len(renders.get(pk, ())) for pk in meshes)
    sent_v = sum(c["renders_submitted"] for c in n.tally.values())
    sent_t = sum(c["tasks_submitted"] for c in n.tally.values())
    twice = [pk for pk in videos if len(renders.get(pk, ())) > 1 + interrupted[pk]]
    wrong = [
        f"job {pk} given up at +{at:.1f} s for {n.names[device]}"
        + (f", whose render then {n.videos[rid][1]} there" if rid in n.videos else "")
        for pk, device, at, rid in given_up
        if not legit(n, device, at)
    ]
    wasted = [  # given up rightly (its device away long enough), yet the device finished it: the rule's price
        f"job {pk}'s render {n.videos[rid][1]} on {n.names[device]}"
        for pk, device, at, rid in given_up
        if legit(n, device, at) and rid in n.videos and n.videos[rid][1] == "completed"
    ]
    detail = (
        f"video renders: the devices started {sent_v}, the hub knows {known_v}; 3D tasks: {sent_t} and {known_t}; "
        f"{sum(max(0, len(renders.get(pk, ())) - 1) for pk in videos)} videos sent again, "
        f"{sum(interrupted.values())} interruptions ({len(given_up)} for a device away)"
    )
    detail += f"; more renders than 1 + interruptions: {twice}" if twice else ""
    detail += (
        f"; **given up while its device was not away `JOBS_DEVICE_LOST_S`**: {'; '.join(wrong)}"
        if wrong
        else ""
    )
    detail += (
        f"; given up after the device had been away `JOBS_DEVICE_LOST_S` yet finished there (as the rule "
        f"accepts): {'; '.join(wasted)}"
        if wasted
        else ""
    )
    return (
        "no render sent twice while it lived",
        sent_v == known_v and sent_t == known_t and not twice and not wrong,
        detail,
    )


def kept_claim(n: Night, jobs: dict, renders: dict, interrupted: Counter) -> tuple[str, bool, str]:
    """The render on the device locked for less than ``JOBS_DEVICE_LOST_S``: it lived, so it must have been kept."""
    label = "a render on a device away < JOBS_DEVICE_LOST_S is kept"
    if n.locked is None or n.locked[3] is None:
        return (label, False, "no render was running on the locked device")
    device, _at, _until, pk = n.locked
    job = jobs[pk]
    sent = list(renders.get(pk, {}))
    ok = job.state == "done" and len(sent) == 1 and not interrupted[pk] and job.device_id == device
    return (
        label,
        ok,
        f"job {pk} ({job.kind}) on {n.names[device]}: {job.state} on {n.names[job.device_id]}, "
        f"{len(sent)} render(s) sent, interrupted {interrupted[pk]} time(s)",
    )


def lost_render(n: Night, jobs: dict, lost_jobs: dict[int, float], per_job: dict) -> tuple[str, bool, str]:
    """The render in flight on the unplugged device was given up (``sent_once`` judges when) and its job, back in
    the pool, ran again wherever it would finish first (the device itself, if it was back and free first) and
    ended done."""
    if n.lost is None:
        return ("the lost render moved on", False, "the device was never unplugged")
    device, away, _back = n.lost
    if not lost_jobs:
        return ("the lost render moved on", False, "no job was interrupted for the unplugged device")
    parts, ok = [], True
    for pk, at in sorted(lost_jobs.items()):
        later = [(a - n.t0, d) for a, _b, d in sorted(per_job.get(pk, ())) if a - n.t0 > at]
        where = f"started again on {n.names[later[0][1]]} at +{later[0][0]:.1f} s" if later else "never again"
        ok = ok and jobs[pk].state == "done" and bool(later)
        back = "" if not later or later[0][1] != device else f" (back since +{n.lost[2]:.1f} s)"
        parts.append(
            f"job {pk} interrupted {at - away:.1f} s after the device went away, {where}{back}, {jobs[pk].state}"
        )
    return ("the lost render moved on", ok, "; ".join(parts))


def came_back(n: Night, spans: dict) -> tuple[str, bool, str]:
    if n.lost is None:
        return ("the device that came back takes work again", False, "it never went away")
    device, _away, back = n.lost
    after = sorted(a - n.t0 for a, _b, _j in spans.get(device, ()) if a - n.t0 >= back)
    detail = (
        f"{len(after)} jobs started on {n.names[device]} after it came back, the first {after[0] - back:.1f} s "
        f"after"
        if after
        else f"no job started on {n.names[device]} after it came back at +{back:.1f} s"
    )
    return ("the device that came back takes work again", bool(after), detail)


def worker_downtimes(n: Night) -> list[float]:
    kills = [t for t, what in n.faults if what == "worker SIGKILLed"]
    starts = [t for t, what in n.faults if what == "worker started again"]
    return [b - a for a, b in zip(kills, starts, strict=False)]


def report(n: Night) -> None:
    down = worker_downtimes(n)
    print("## The pool's chaos night (bench_pool.py)\n")
    print(
        f"{n.jobs} jobs of the same mix, all for any of 3 emulated Tiinys (speed {bp.SPEED:g}, each device's render "
        f"history learned), submitted at once, while: the Celery worker is SIGKILLed {len(down)} times and started "
        f"again (down {min(down, default=0):.1f}-{max(down, default=0):.1f} s: {WORKER_DOWN_S:g} s, then its start), "
        f"once {KILL_AFTER_LOCK_S:g} s into the lock below; one device is unplugged mid-render for {AWAY_S:g} s (its "
        f"emulator process killed, then started again on the same port with its data folder: the render in flight "
        f"is gone, as after a reboot); then one is power-cycled mid-render (everything in flight vanishes; locked "
        f"{LOCKED_S:g} s); then one is locked mid-render (a video not past 60 %) for {LOCK_S:g} s, less than "
        f"`JOBS_DEVICE_LOST_S` (a locked device renders on: the hub must keep the claim). Worker: "
        f"`JOBS_DEVICE_LOST_S={LOST_S:g}`, a 3 s lease, reconcile every second. Submitting took {n.submit_s:.1f} s; "
        f"makespan under faults {n.makespan:.1f} s (its work alone, about {n.expected:.0f} s a device).\n"
    )
    print(
        "Faults (seconds after the first submit): " + "; ".join(f"+{t:.1f} {w}" for t, w in n.faults) + ".\n"
    )
    print("| check | result | what was seen |")
    print("|---|---|---|")
    rows = checks(n)
    for label, ok, detail in rows:
        print(f"| {label} | {bn.verdict(ok)} | {detail} |")
    if n.errors:
        print(f"\n**The driver met errors:** {n.errors}")
    failed = [label for label, ok, _d in rows if not ok]
    print(
        f"\nAll checks: {bn.verdict(not failed and not n.errors)}"
        + (f" (missed: {failed})" if failed else "")
        + ".\n"
    )

#!/usr/bin/env python
"""`make chaos`: an emulated night at high speed while the hub's processes and the device misbehave.

Real parts only: a private Redis, a throw-away SQLite database, the web server (all its processes), two Celery workers and
beat as OS processes, the Tiiny emulator and two TensorSharp emulators over loopback HTTP. Three people queue a
mixed night (video, 3D, music, image, speech on the Tiiny; video and an image edit on TensorSharp) through the
REST API with their own tokens, and through ``jobs.queue.admission`` (the page's path) for uploads.

Meanwhile, from a seeded RNG (printed, so a failing night can be replayed with ``--seed``):

* process faults: SIGKILL the web server, a worker, beat or Redis at random moments; each comes back on the
  same port / hostname after a short random pause (Redis comes back empty: no persistence, as configured);
* device faults, one after another: a power cycle mid-render (the device stays locked until it is unlocked a
  while later), a plain lock for a while, the device unreachable for a while (its process killed and started
  again on the same port with ``--data-dir``, so finished renders survive and in-flight ones are lost, as on a
  real reboot), in ``--long`` also a frozen device (SIGSTOP: connections hang), and a video long enough to hit
  the device's one-hour GENERATION_TIMEOUT.

Then it checks, and prints on one screen (exit status 1 on any violation):

* lost: every submission the hub accepted is a job, exactly one per submission, and reaches a final state;
* duplicates: the device's own counters (renders_submitted, tasks_submitted) equal the renders the hub knows
  from its job events, no device id belongs to two jobs, and no job got a new render without losing one;
* stuck: every job is done, failed with a reason, or cancelled within ``--bound`` seconds after the last fault
  ended (every process back, the device unlocked and reachable);
* peak device concurrency 1 (emulator counters; model loads count as work);
* every done job's files download through the web server with the owner's token, matching the Artifact's sha256.

``--long`` is a bigger night with more faults (a few minutes) and writes its summary into bench/RESULTS.md.
The short night is what ``jobs/tests/queue/test_chaos.py`` runs in ``make test``, through ``run_chaos``.
"""

from __future__ import annotations

import argparse
import atexit
import contextlib
import hashlib
import heapq
import inspect
import io
import json
import os
import random
import re
import signal
import sys
import tempfile
import threading
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

BASE = Path(__file__).resolve().parent.parent
if str(BASE) not in sys.path:
    sys.path.insert(0, str(BASE))

RESULTS = BASE / "bench" / "RESULTS.md"
HEADING = "## Chaos: lose nothing under faults (make chaos)"

VIDEO = "MiniMaxAI/MiniMax-H3-Turbo"
MESH = "tencent/Hunyuan3D-2.1"
LOOP = "RoyalCities/Foundation-1"
SONG = "tencent/SongGeneration-v2-large"
IMAGE = "Tongyi-MAI/Z-Image-Turbo"
TTS = "Qwen/Qwen3-TTS-12Hz-1.7B-CustomVoice"
PEOPLE = ("ana", "ben", "cai")
WORDS = "fox snow river neon city cat robot forest ocean dawn lantern violin harbour owl comet".split()


# -- the night's shape ------------------------------------------------------------------------------------------


@dataclass
class Options:
    seed: int
    long: bool = False
    tiiny_jobs: int = 30  # the night: 30 mixed jobs from 3 people on the Tiiny, a few on TensorSharp
    ts_jobs: int = 2
    # Device seconds per real second: a 7-minute render takes 0.5 s. Much faster and the emulator's own work
    # (encoding the MP4 in real time on a busy machine) stretches renders past the device's one-hour limit.
    speed: float = 900.0
    submit_window_s: float = 10.0  # submissions spread over this long (a burst at bedtime, then stragglers)
    process_faults: int = 6  # SIGKILLs of web / worker / beat / Redis (each at least once)
    pause_s: tuple[float, float] = (0.5, 2.5)  # how long a killed process stays down
    device_hold_s: tuple[float, float] = (1.5, 3.0)  # how long the device stays locked / unreachable
    freeze: bool = False  # also SIGSTOP the device for a while (less than an hour of its time)
    bound_s: float = 45.0  # every job final within this long after the last fault ended
    write_results: bool = False
    # Chains (issue 35): videos that start from one of the night's pictures, queued while it still waits; the
    # faults hit around the moment a picture's result is stored and its video released.
    chains: int = 3

    @classmethod
    def make(cls, *, seed: int | None = None, long: bool = False) -> Options:
        seed = seed if seed is not None else random.SystemRandom().randrange(1, 10**6)
        if not long:
            return cls(seed=seed)
        return cls(
            seed=seed,
            long=True,
            tiiny_jobs=40,
            ts_jobs=6,
            speed=600.0,
            submit_window_s=60.0,
            process_faults=18,
            pause_s=(0.5, 4.0),
            device_hold_s=(4.0, 10.0),
            freeze=True,
            bound_s=150.0,
            write_results=True,
            chains=6,
        )


@dataclass
class Submission:
    n: int
    tag: str
    owner: str
    device: str  # "tiiny" | "ts-video" | "ts-edit"
    kind: str
    data: dict[str, Any]
    files: dict[str, bytes] = field(default_factory=dict)
    at: float = 0.0  # seconds after the night starts
    via: str = "rest"  # "rest" | "service"
    job_id: int | None = None
    tries: int = 0
    problems: list[str] = field(default_factory=list)
    hold: bool = False  # sent only once the device-hour stall waits for a render (the last fault)
    parent: Submission | None = None  # a chain's child: its start image is this submission's result

    @property
    def label(self) -> str:
        return f"#{self.n} {self.kind}@{self.device} by {self.owner}"


def _png(width: int = 1, height: int = 1, colour: str = "teal") -> bytes:
    from PIL import Image

    buf = io.BytesIO()
    Image.new("RGB", (width, height), colour).save(buf, format="PNG")
    return buf.getvalue()


def plan_night(opts: Options, rng: random.Random) -> list[Submission]:
    """A mixed night: videos (2 s and 7 s) most often, then images, speech, music loops and songs, some 3D."""

    def text() -> str:
        return " ".join(rng.sample(WORDS, 3))

    if opts.long:
        menu = [
            ("video", 8),
            ("video7", 3),
            ("image", 5),
            ("speech", 5),
            ("loop", 3),
            ("song", 2),
            ("mesh", 3),
        ]
    else:  # the short night in make test: every kind, heavier on the quick ones (the box's CPU is the limit:
        # the emulator encodes each video's MP4 in real time whatever its speed)
        menu = [
            ("video", 6),
            ("video7", 1),
            ("image", 8),
            ("speech", 10),
            ("loop", 3),
            ("song", 1),
            ("mesh", 1),
        ]
    names = [n for n, w in menu for _ in range(w)]
    subs: list[Submission] = []
    for i in range(opts.tiiny_jobs):
        what = names[i % len(names)] if i < len(names) else rng.choice(names)
        n = len(subs) + 1
        tag = f"c{opts.seed}-{n}"
        owner = PEOPLE[i % 3]
        if what in ("video", "video7"):
            data = {"model": VIDEO, "prompt": f"{text()} [{tag}]", "size": "832x480", "steps": 4}
            data["seconds"] = 7 if what == "video7" else 2
            sub = Submission(n, tag, owner, "tiiny", "video", data)
        elif what == "image":
            data = {"model": IMAGE, "prompt": f"{text()} [{tag}]", "width": 512, "height": 512}
            data.update(n=rng.choice((1, 2)), steps=8)
            sub = Submission(n, tag, owner, "tiiny", "image", data)
        elif what == "speech":
            data = {"model": TTS, "input": f"Good night, {text()}. [{tag}]", "voice": "serena"}
            data["response_format"] = "wav"
            sub = Submission(n, tag, owner, "tiiny", "speech", data)
        elif what == "loop":
            data = {"model": LOOP, "prompt": f"warm {text()} loop [{tag}]", "seconds": 4}
            sub = Submission(n, tag, owner, "tiiny", "music", data)
        elif what == "song":
            data = {"model": SONG, "caption": f"a folk song about {text()} [{tag}]", "lyrics": "la la"}
            data.update(generation_type="mixed", seconds=20)
            sub = Submission(n, tag, owner, "tiiny", "music", data)
        else:  # 3D: an upload, so through the page's path (jobs.queue.admission), keyed by its tag
            data = {"model": MESH, "simplify": True, "texture": True, "seed": rng.randrange(1, 2**30)}
            sub = Submission(n, tag, owner, "tiiny", "mesh", data, files={"image": _png()}, via="service")
        subs.append(sub)
    for i in range(opts.ts_jobs):
        n = len(subs) + 1
        tag = f"c{opts.seed}-{n}"
        owner = PEOPLE[(i + 1) % 3]
        if i % 2 == 0:
            data = {"prompt": f"{text()} [{tag}]", "width": 640, "height": 384, "frames": 22, "ts_steps": 8}
            data["video_mode"] = "t2v"
            subs.append(Submission(n, tag, owner, "ts-video", "video", data))
        else:
            data = {"prompt": f"make it {text()} [{tag}]", "steps": 4}
            files = {"image": _png(64, 48)}
            subs.append(Submission(n, tag, owner, "ts-edit", "image", data, files=files, via="service"))
    # A third of the rest through the page's path too (both doors must lose nothing).
    for sub in subs:
        if sub.via == "rest" and rng.random() < 0.33:
            sub.via = "service"
    # Bedtime: 40 % queued at once, the rest spread over the window.
    rng.shuffle(subs)
    burst = int(len(subs) * 0.4)
    for k, sub in enumerate(subs):
        sub.at = 0.0 if k < burst else rng.uniform(0.5, opts.submit_window_s)
    # A long video last, so a render is still under way when the device stalls for an hour (the last fault).
    last = next(s for s in subs if s.kind == "video" and s.device == "tiiny" and s.data.get("seconds") == 7)
    last.at, last.hold = opts.submit_window_s, True
    subs += _chained(opts, rng, subs, text)
    subs.sort(key=lambda s: (s.at, s.n))
    return subs


def _chained(opts: Options, rng: random.Random, subs: list[Submission], text: Any) -> list[Submission]:
    """A video of each of the first ``opts.chains`` Tiiny pictures, queued a moment after its picture (through
    either door): it waits for the picture's result and starts from it."""
    images = [s for s in subs if s.kind == "image" and s.device == "tiiny"][: opts.chains]
    out = []
    for k, parent in enumerate(images):
        n = len(subs) + len(out) + 1
        tag = f"c{opts.seed}-{n}"
        data = {"model": VIDEO, "prompt": f"{text()}, animated [{tag}]", "size": "832x480", "seconds": 2}
        data["steps"] = 4
        child = Submission(n, tag, parent.owner, "tiiny", "video", data, parent=parent)
        child.at = min(parent.at + rng.uniform(0.1, 1.0), opts.submit_window_s)
        child.via = "service" if k % 2 else "rest"
        out.append(child)
    return out


# -- processes ---------------------------------------------------------------------------------------------------


class RedisHandle:
    """The private Redis the hub talks to: SIGKILL it and start a fresh one on the same port."""

    def __init__(self, url: str, run_dir: Path) -> None:
        self.url = url
        self.port = int(re.search(r":(\d+)(/|$)", url.split("@")[-1]).group(1))
        self.run_dir = run_dir

    def pid(self) -> int:
        import redis

        return int(redis.Redis.from_url(self.url, socket_timeout=2).info("server")["process_id"])

    def alive(self) -> bool:
        from hub.redis_server import port_open

        return port_open(self.port)

    def kill(self) -> None:
        from hub.redis_server import port_open

        try:
            os.kill(self.pid(), signal.SIGKILL)
        except Exception as exc:  # noqa: BLE001 - it may already be gone
            print(f"chaos: could not kill Redis: {exc}", flush=True)
        deadline = time.monotonic() + 5
        while port_open(self.port) and time.monotonic() < deadline:
            time.sleep(0.02)

    def start(self) -> None:
        from hub.redis_server import start_private_redis, stop_pid

        # A killed server leaves its pidfile; the new one must not be mistaken for it.
        (self.run_dir / f"redis-{self.port}.pid").unlink(missing_ok=True)
        # The same password: the hub's processes keep the URL they were started with.
        password = urlsplit(self.url).password
        fresh = start_private_redis(run_dir=self.run_dir, port=self.port, password=password)
        atexit.register(stop_pid, fresh.pid)  # whoever started the first one only knows that one's pid


@dataclass
class Service:
    """A hub process the driver may kill: the web server, a worker, beat (hub.testing.Proc) or Redis."""

    name: str
    proc: Any = None  # hub.testing.Proc
    redis: RedisHandle | None = None
    ready_mark: str = ""
    down: bool = False
    marks_before: int = 0  # ready marks in the log before the latest start

    def kill(self) -> None:
        self.down = True
        if self.redis is not None:
            self.redis.kill()
        else:
            self.proc.kill()

    def start(self) -> None:
        if self.redis is not None:
            self.redis.start()
        else:
            if self.ready_mark:
                self.marks_before = self.proc.log_tail(100000).count(self.ready_mark)
            self.proc.start()
        self.down = False

    def ready(self) -> bool:
        if self.down:
            return False
        if self.redis is not None:
            return self.redis.alive()
        if not self.proc.alive():
            return False
        if self.ready_mark:
            return self.proc.log_tail(100000).count(self.ready_mark) > self.marks_before
        import httpx

        try:
            return httpx.get(f"{self.proc.extra['url']}/accounts/login/", timeout=1).status_code == 200
        except httpx.HTTPError:
            return False


# -- the device ---------------------------------------------------------------------------------------------------


class DeviceTally:
    """The emulators' counters summed over restarts (a restarted emulator starts counting from zero)."""

    def __init__(self) -> None:
        self.totals: dict[str, Counter] = {}
        self.peaks: dict[str, int] = {}

    def bank(self, name: str, emu: Any) -> None:
        c = emu.counters()
        keep = ("renders_submitted", "renders_completed", "tasks_submitted", "launches", "inferences")
        self.totals.setdefault(name, Counter()).update({k: int(c.get(k, 0)) for k in keep})
        self.peaks[name] = max(self.peaks.get(name, 0), int(c.get("peak_concurrent_work", 0)))

    def final(self, emus: dict[str, Any]) -> dict[str, dict[str, int]]:
        out = {}
        for name, emu in emus.items():
            self.bank(name, emu)
            out[name] = {**self.totals[name], "peak": self.peaks[name]}
        return out


def _cut_off(emu: Any) -> set[str]:
    """Prompts of the renders the device cut off at its one-hour limit (GENERATION_TIMEOUT)."""
    try:
        with emu.client(timeout=5.0) as http:
            rows = http.get("/v1/videos").json().get("data", [])
    except Exception:  # noqa: BLE001 - locked, restarting: none seen
        return set()
    return {
        str(r.get("prompt") or "") for r in rows if "GENERATION_TIMEOUT" in json.dumps(r.get("error") or "")
    }


def _rendering_on_device(emu: Any, *, before: float = 100.0) -> bool:
    """A video render is in progress on the Tiiny right now (the device's own list), under ``before`` %.

    ``in_progress`` also covers the emulator encoding the MP4 once the render's device time is over (seconds
    of real time on a busy machine); a stall meant to outlast the render must land before that."""
    try:
        with emu.client(timeout=2.0) as http:
            rows = http.get("/v1/videos").json().get("data", [])
    except Exception:  # noqa: BLE001 - locked, restarting: not now
        return False
    return any(r.get("status") == "in_progress" and float(r.get("progress") or 0) < before for r in rows)


# -- the driver ---------------------------------------------------------------------------------------------------


@dataclass
class Fault:
    at: float
    what: str
    took: float = 0.0


@dataclass
class Summary:
    seed: int
    mode: str
    jobs: int = 0
    states: dict[str, int] = field(default_factory=dict)
    failed_reasons: dict[str, int] = field(default_factory=dict)
    lost: list[str] = field(default_factory=list)
    duplicate_jobs: list[str] = field(default_factory=list)
    duplicates: list[str] = field(default_factory=list)
    stuck: list[str] = field(default_factory=list)
    peaks: dict[str, int] = field(default_factory=dict)
    downloads_ok: int = 0
    downloads_bad: list[str] = field(default_factory=list)
    faults: list[Fault] = field(default_factory=list)
    counters: dict[str, dict[str, int]] = field(default_factory=dict)
    known_renders: dict[str, int] = field(default_factory=dict)
    resubmitted: int = 0
    idle_gap_s: float = 0.0  # longest time the Tiiny sat idle with work waiting, outside faults
    idle_gap_at: float = 0.0
    idle_gap_why: str = ""  # what the hub believed meanwhile (sampled)
    generation_timeout: str = ""
    submit_problems: list[str] = field(default_factory=list)
    bound_s: float = 0.0
    settled_s: float | None = None
    night_s: float = 0.0
    violations: list[str] = field(default_factory=list)
    chains: dict[str, int] = field(default_factory=dict)  # each chain's video: what became of it

    @property
    def ok(self) -> bool:
        return not self.violations

    def as_dict(self) -> dict[str, Any]:
        from dataclasses import asdict

        return asdict(self)


class Night:
    def __init__(self, opts: Options, *, redis: RedisHandle, workdir: Path) -> None:
        self.opts = opts
        self.rng = random.Random(opts.seed)
        self.redis = redis
        self.workdir = workdir
        self.t0 = 0.0
        self.faults: list[Fault] = []
        self.last_fault_end = 0.0
        self.lock = threading.Lock()
        self.stop = threading.Event()
        self.errors: list[str] = []
        self.services: dict[str, Service] = {}
        self.tally = DeviceTally()
        self.emus: dict[str, Any] = {}
        self.hour_ready = threading.Event()

    # -- helpers
    def now(self) -> float:
        return time.monotonic() - self.t0

    def note(self, what: str, took: float = 0.0) -> None:
        with self.lock:
            self.faults.append(Fault(round(self.now(), 1), what, round(took, 1)))
            self.last_fault_end = max(self.last_fault_end, time.monotonic())
        print(f"chaos: {self.now():6.1f}s  {what}" + (f" ({took:.1f} s)" if took else ""), flush=True)

    def log(self, msg: str) -> None:
        print(f"chaos: {self.now():6.1f}s  {msg}", flush=True)

    # -- set-up
    def start_services(self) -> None:
        from hub.testing import log_dir, start_asgi_server, start_beat, start_worker
        from jobs.tests.conftest import ENGINE_ENV

        # Results and inputs under this night's own folder: parallel test runs share ./var/media, and job and
        # owner ids restart in every fresh database, so their files would land on each other's paths.
        env = {**ENGINE_ENV, "HUB_DATA_DIR": str(self.workdir)}
        for name in ("w1", "w2"):  # readiness is read from the log: a previous night's must not count
            (log_dir() / f"worker-chaos-{name}.log").unlink(missing_ok=True)
        web = start_asgi_server(**env)
        self.base_url = web.extra["url"]
        self.services["web"] = Service("web", proc=web)
        for name in ("w1", "w2"):
            self.services[name] = Service(name, proc=start_worker(f"chaos-{name}", concurrency=2, **env))
            self.services[name].ready_mark = "ready."
        self.services["beat"] = Service("beat", proc=start_beat(**env), ready_mark="beat: Starting")
        self.services["redis"] = Service("redis", redis=self.redis)

    def stop_services(self) -> None:
        for name in ("web", "w1", "w2", "beat"):
            svc = self.services.get(name)
            if svc is not None:
                svc.proc.stop()

    def people(self) -> None:
        from hub.accounts.models import User
        from hub.accounts.tokens import token_create

        self.users = {}
        self.tokens = {}
        for name in PEOPLE:
            password = "chaos-night-pass-1"  # noqa: S105 - a throw-away database
            user = User.objects.create_user(name, password=password, role="member")
            self.users[name] = user
            self.tokens[name] = token_create(user=user, name="chaos", scopes=["read", "submit"])[1]

    # -- process faults (their own thread: kills and restarts only, no database)
    def process_chaos(self, until: float) -> None:
        rng = random.Random(self.opts.seed * 7 + 1)
        names = ["web", "w1", "w2", "beat", "redis"]
        kills = names[:]  # each at least once, then at random
        while len(kills) < self.opts.process_faults:
            kills.append(rng.choice(names))
        rng.shuffle(kills)
        times = sorted(rng.uniform(1.0, until) for _ in kills)
        events: list[tuple[float, int, str, str]] = [
            (t, i, "kill", n) for i, (t, n) in enumerate(zip(times, kills, strict=True))
        ]
        heapq.heapify(events)
        seq = len(events)
        down_since: dict[str, float] = {}
        while events and not self.stop.is_set():
            at, _i, action, name = heapq.heappop(events)
            delay = at - self.now()
            if delay > 0 and self.stop.wait(delay):
                break
            svc = self.services[name]
            try:
                if action == "kill":
                    if svc.down:
                        continue
                    svc.kill()
                    down_since[name] = time.monotonic()
                    self.note(f"SIGKILL {name}")
                    seq += 1
                    heapq.heappush(events, (self.now() + rng.uniform(*self.opts.pause_s), seq, "start", name))
                else:
                    svc.start()
                    self.note(f"restart {name}", time.monotonic() - down_since.pop(name))
            except Exception as exc:  # noqa: BLE001 - report, keep the night going
                self.errors.append(f"{action} {name}: {exc}")
                self.log(f"{action} {name} failed: {exc}")
        for name, svc in self.services.items():  # the night is over: everything comes back
            if svc.down:
                svc.start()
                self.note(f"restart {name}", time.monotonic() - down_since.pop(name, time.monotonic()))

    # -- device faults (their own thread, one after another)
    def device_chaos(self, until: float) -> None:
        rng = random.Random(self.opts.seed * 7 + 2)
        emu = self.emus["tiiny"]
        faults = ["power_cycle", "lock", "unreachable", "hour"] + (["freeze"] if self.opts.freeze else [])
        rng.shuffle(faults)
        if self.opts.long:
            faults += rng.sample(faults, 2)
        # The hour-long stall needs a video rendering; the scheduler may run other models first, so it goes last.
        faults = [f for f in faults if f != "hour"] + ["hour"]
        slot = until / len(faults)
        for k, fault in enumerate(faults):
            start = k * slot + rng.uniform(0.5, max(0.6, slot * 0.4))
            if self.stop.wait(max(0.0, start - self.now())):
                return
            hold = rng.uniform(*self.opts.device_hold_s)
            try:
                if fault == "power_cycle":
                    waited = time.monotonic()
                    while not _rendering_on_device(emu) and time.monotonic() - waited < 15:
                        if self.stop.wait(0.05):
                            return
                    mid = "mid-render" if _rendering_on_device(emu) else "no render running"
                    emu.power_cycle()
                    self.note(f"device power cycle ({mid}); locked")
                    self.stop.wait(hold)
                    emu.unlock()
                    self.note("device unlocked", hold)
                elif fault == "lock":
                    emu.lock()
                    self.note("device locked")
                    self.stop.wait(hold)
                    emu.unlock()
                    self.note("device unlocked", hold)
                elif fault == "unreachable":
                    self.tally.bank("tiiny", emu)
                    emu.process.kill()
                    emu.process.wait(timeout=5)
                    self.note("device unreachable (process killed)")
                    self.stop.wait(hold)
                    old_log = emu.stderr_path
                    emu.restart()
                    if old_log is not None:
                        old_log.unlink(missing_ok=True)
                    self.note("device back (same port, --data-dir)", hold)
                elif fault == "hour":
                    self.hour_stall(emu)
                elif fault == "freeze":
                    os.kill(emu.process.pid, signal.SIGSTOP)
                    self.note("device frozen (SIGSTOP: requests hang)")
                    self.stop.wait(hold)
                    os.kill(emu.process.pid, signal.SIGCONT)
                    self.note("device thawed", hold)
            except Exception as exc:  # noqa: BLE001
                self.errors.append(f"device fault {fault}: {exc}")
                self.log(f"device fault {fault} failed: {exc}")

    def hour_stall(self, emu: Any) -> None:
        """The device stops answering mid-render for an hour of its own time (SIGSTOP; its clock runs on).

        Requests hang meanwhile. A render that ended within the hour in device time still completes (the
        emulator's rule since b0ec7d2); one that did not would fail with GENERATION_TIMEOUT, and the check
        then wants that job failed for that reason."""
        self.hour_ready.set()  # the held-back long video goes now
        waited = time.monotonic()
        while not _rendering_on_device(emu, before=80):
            if time.monotonic() - waited > 30 or self.stop.wait(0.02):
                self.log("no render under way for the device-hour stall within 30 s; stalling anyway")
                break
        os.kill(emu.process.pid, signal.SIGSTOP)
        stall = 3700 / self.opts.speed + 0.5  # a little over one device-hour
        self.note("device stalled for an hour of device time (SIGSTOP)")
        time.sleep(stall)
        os.kill(emu.process.pid, signal.SIGCONT)
        self.note("device running again", stall)

    # -- what the hub believed, sampled (its own thread and database connection): explains idle gaps
    def sample(self, device_id: int) -> None:
        from django.db import connection
        from django.utils import timezone

        from devices.models import Device
        from jobs.models import ACTIVE_STATES, WAITING_STATES, DeviceLease, Job

        self.samples: list[tuple[float, str]] = []
        try:
            while not self.sampling_done.wait(0.5):
                try:
                    now = timezone.now()
                    state = Device.objects.filter(pk=device_id).values_list("state", flat=True).first()
                    lease = DeviceLease.objects.filter(pk=device_id).first()
                    held = (
                        f"lease job {lease.job_id}"
                        if lease and lease.expires_at and lease.expires_at >= now
                        else "lease free"
                    )
                    jobs = Job.objects.filter(device_id=device_id)
                    active = jobs.filter(state__in=ACTIVE_STATES).count()
                    waiting = jobs.filter(state__in=WAITING_STATES)
                    later = waiting.filter(retry_after__gt=now).count()
                    self.samples.append(
                        (
                            self.now(),
                            f"device {state}, {held}, {active} active, {waiting.count()} waiting "
                            f"({later} on backoff)",
                        )
                    )
                except Exception as exc:  # noqa: BLE001 - a locked SQLite moment: skip the sample
                    self.samples.append((self.now(), f"sample failed: {type(exc).__name__}"))
        finally:
            connection.close()

    def belief(self, start: float, length: float) -> str:
        seen = Counter(text for t, text in getattr(self, "samples", []) if start <= t <= start + length)
        return "; ".join(f"{text} x{n}" for text, n in seen.most_common(2))

    # -- submissions (main thread: it owns the database connection)
    def submit(self, sub: Submission, devices: dict[str, Any]) -> None:
        sub.tries += 1
        device = devices[sub.device]
        if device.kind == "tensorsharp":
            sub.data.setdefault("model", device.capabilities["tensorsharp"]["loaded"])
        if sub.via == "rest":
            self._submit_rest(sub, devices[sub.device])
        else:
            self._submit_service(sub, devices[sub.device])

    def _submit_service(self, sub: Submission, device: Any) -> None:
        from django.core.files.uploadedfile import SimpleUploadedFile

        from jobs.doors.intake import check_request
        from jobs.queue.admission import RequestInvalid
        from jobs.queue.services import submit_checked

        files = {k: SimpleUploadedFile(f"{k}.png", v, "image/png") for k, v in sub.files.items()}
        user = self.users[sub.owner]
        data = {**sub.data, "polite": False}
        if isinstance(data.get("start_image"), dict):  # a chain's child: the picture's result, not an upload
            from jobs.core.links import ResultRef

            files["start_image"] = ResultRef(int(data.pop("start_image")["from_job"]))
        # The page's own retry guard, where this checkout has it (an idempotency key per submission).
        keyed = "idempotency_key" in inspect.signature(submit_checked).parameters
        for attempt in range(4):  # a person who sees an error page tries again, after looking at the queue
            if attempt and (found := self._find(sub)):
                sub.job_id = found
                return
            try:
                checked = check_request(owner=user, device=device, kind=sub.kind, data=data, files=files)
                extra = {"idempotency_key": sub.tag} if keyed else {}
                sub.job_id = submit_checked(owner=user, device=device, checked=checked, **extra).pk
                return
            except RequestInvalid as exc:
                sub.problems.append(f"refused: {exc}")
                return
            except Exception as exc:  # noqa: BLE001 - the page would show a 500: was it queued anyway?
                found = self._find(sub)
                where = f"queued as job {found}" if found else "not queued"
                sub.problems.append(f"submit raised {type(exc).__name__}: {str(exc)[:120]} ({where})")
                if found:
                    sub.job_id = found
                    return
                time.sleep(0.5)
                for f in files.values():
                    if hasattr(f, "seek"):
                        f.seek(0)

    def _find(self, sub: Submission) -> int | None:
        """The job a submission queued, if any: by the tag in its prompt (3D has none: by its seed)."""
        from jobs.models import Job

        mine = Job.objects.filter(owner=self.users[sub.owner], kind=sub.kind)
        if sub.kind == "mesh":
            row = mine.filter(params__seed=sub.data["seed"]).first()
        else:
            row = mine.filter(prompt__contains=f"[{sub.tag}]").first()
        return row.pk if row else None

    def _submit_rest(self, sub: Submission, device: Any) -> None:
        """A patient script: retries while the web server is down, with an Idempotency-Key; after an answer it
        could not read it also looks for its job (by the tag in the prompt) before sending again."""
        import httpx

        headers = {"Authorization": f"Bearer {self.tokens[sub.owner]}"}
        body = {"device": device.pk, "kind": sub.kind, **sub.data, "polite": False}
        uncertain = False
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            try:
                with httpx.Client(base_url=self.base_url, headers=headers, timeout=20) as http:
                    if uncertain:
                        found = http.get("/api/jobs", params={"q": sub.tag, "limit": 5})
                        if found.status_code == 200:
                            items = [j for j in found.json()["items"] if sub.tag in (j.get("prompt") or "")]
                            if items:
                                sub.job_id = int(items[0]["id"])
                                return
                            uncertain = False
                        else:
                            raise httpx.TransportError(f"lookup answered {found.status_code}")
                    # The hub's own retry guard: the same key again answers 200 with the job it queued.
                    r = http.post("/api/jobs", json=body, headers={"Idempotency-Key": sub.tag})
                if r.status_code in (200, 201):
                    sub.job_id = int(r.json()["id"])
                    return
                if r.status_code == 429:
                    time.sleep(float(r.headers.get("Retry-After") or 1))
                    continue
                if r.status_code >= 500:
                    sub.problems.append(f"POST /api/jobs answered {r.status_code}")
                    uncertain = True
                    time.sleep(0.3)
                    continue
                sub.problems.append(f"refused {r.status_code}: {r.text[:200]}")
                return
            except httpx.HTTPError as exc:
                # Sent, no answer: it may have been queued. Connection refused: it was not.
                uncertain = uncertain or not isinstance(exc, httpx.ConnectError)
                time.sleep(0.3)
        sub.problems.append("gave up submitting after 120 s")

    # -- the whole night
    def run(self) -> Summary:
        from devices.emulator.testing import run_tensorsharp, run_tiiny
        from jobs.tests.conftest import make_device

        opts = self.opts
        print(
            f"chaos: seed {opts.seed} ({'long' if opts.long else 'short'} night: {opts.tiiny_jobs} Tiiny + "
            f"{opts.ts_jobs} TensorSharp jobs {opts.process_faults} process kills, "
            f"speed {opts.speed:g}); replay with --seed {opts.seed}",
            flush=True,
        )
        subs = plan_night(opts, self.rng)
        with contextlib.ExitStack() as stack:
            tiiny = stack.enter_context(run_tiiny(speed=opts.speed, data_dir=self.workdir / "tiiny"))
            tsv = stack.enter_context(run_tensorsharp(speed=opts.speed, model="minimax-h3"))
            tse = stack.enter_context(run_tensorsharp(speed=opts.speed, model="qwen-image-edit"))
            self.emus = {"tiiny": tiiny, "ts-video": tsv, "ts-edit": tse}
            devices = {
                "tiiny": make_device(tiiny, name="Pocket"),
                "ts-video": make_device(tsv, kind="tensorsharp", name="TS video"),
                "ts-edit": make_device(tse, kind="tensorsharp", name="TS editor"),
            }
            self.people()
            self.start_services()
            stack.callback(self.stop_services)
            time.sleep(1.0)  # beat's first ticks
            self.t0 = time.monotonic()
            self.t0_wall = time.time()
            chaos_until = opts.submit_window_s + 2.0
            self.sampling_done = threading.Event()
            sampler = threading.Thread(target=self.sample, args=(devices["tiiny"].pk,), name="chaos-sample")
            sampler.start()
            stack.callback(sampler.join, 5)
            stack.callback(self.sampling_done.set)
            threads = [
                threading.Thread(target=self.process_chaos, args=(chaos_until,), name="chaos-proc"),
                threading.Thread(target=self.device_chaos, args=(chaos_until,), name="chaos-device"),
            ]
            for t in threads:
                t.start()
            try:
                for sub in subs:
                    delay = sub.at - self.now()
                    if delay > 0:
                        time.sleep(delay)
                    if sub.hold:
                        self.hour_ready.wait(timeout=120)
                        self.log(f"submitting {sub.label} ({sub.data.get('seconds')} s video) for the stall")
                    if sub.parent is not None:
                        if sub.parent.job_id is None:
                            sub.problems.append("its picture was never queued: not sent")
                            continue
                        sub.data["start_image"] = {"from_job": sub.parent.job_id}
                    self.submit(sub, devices)
            except BaseException:
                self.stop.set()  # the submitting stopped early (a test's timeout, an error): so do the faults
                raise
            finally:
                for t in threads:
                    t.join(timeout=120 + opts.bound_s)
                self.stop.set()
            summary = self.settle(subs, devices)
        return summary

    def _healed(self) -> None:
        """Wait for every process to be back and ready; that moment (or the last fault) starts the bound."""
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            if all(s.ready() for s in self.services.values()):
                break
            time.sleep(0.1)
        else:
            self.errors.append(
                f"not back after 60 s: {[n for n, s in self.services.items() if not s.ready()]}"
            )
        self.last_fault_end = max(self.last_fault_end, time.monotonic())

    def settle(self, subs: list[Submission], devices: dict[str, Any]) -> Summary:
        from jobs.models import FINAL_STATES, Job

        self._healed()
        healed_at = self.last_fault_end
        if self.errors:
            self.log(f"driver problems: {self.errors}")
        self.log("every process back and the device well: waiting for the queue to drain")
        ids = [s.job_id for s in subs if s.job_id]
        deadline = healed_at + self.opts.bound_s
        settled = None
        while time.monotonic() < deadline:
            open_jobs = Job.objects.filter(pk__in=ids).exclude(state__in=FINAL_STATES)
            if not set(open_jobs.values_list("pk", flat=True)) - _waits_for_failed(ids):
                settled = time.monotonic() - healed_at
                break
            time.sleep(0.25)
        # Freeze the world before counting: no worker may send anything while the counters and events are read.
        for name in ("w1", "w2", "beat"):
            self.services[name].proc.stop()
        summary = Summary(seed=self.opts.seed, mode="long" if self.opts.long else "short")
        summary.bound_s = self.opts.bound_s
        summary.settled_s = round(settled, 1) if settled is not None else None
        summary.night_s = round(self.now(), 1)
        summary.faults = list(self.faults)
        self.check(summary, subs, devices)
        return summary

    # -- the verdict
    def check(self, summary: Summary, subs: list[Submission], devices: dict[str, Any]) -> None:
        from jobs.models import FINAL_STATES, Job, JobEvent

        v = summary.violations
        for problem in self.errors:
            v.append(f"driver: {problem}")
        # Lost: every accepted submission is exactly one job, and it exists.
        jobs = {j.pk: j for j in Job.objects.filter(pk__in=[s.job_id for s in subs if s.job_id])}
        for sub in subs:
            summary.submit_problems += [f"{sub.label}: {p}" for p in sub.problems]
            if sub.job_id is None:
                summary.lost.append(f"{sub.label}: never queued ({'; '.join(sub.problems) or 'no answer'})")
            elif sub.job_id not in jobs:
                summary.lost.append(f"{sub.label}: job {sub.job_id} vanished")
            if sub.kind == "mesh":
                copies = Job.objects.filter(kind="mesh", params__seed=sub.data["seed"]).count()
            else:
                copies = Job.objects.filter(prompt__contains=f"[{sub.tag}]").count()
            if copies > 1:
                summary.duplicate_jobs.append(f"{sub.label}: {copies} jobs for one submission")
        summary.jobs = len(jobs)
        summary.states = dict(Counter(j.state for j in jobs.values()))
        patient = _waits_for_failed(
            list(jobs)
        )  # a chain's child waits for its failed picture's retry: by design
        self.chain_verdict(summary, subs, jobs)
        for j in jobs.values():
            if j.state not in FINAL_STATES and j.pk not in patient:
                summary.stuck.append(f"job {j.pk} {j.kind} is {j.state} ({j.phase})")
            elif j.state == "failed":
                summary.failed_reasons[j.error_code or "?"] = (
                    summary.failed_reasons.get(j.error_code or "?", 0) + 1
                )
                if not (j.error_human or "").strip():
                    summary.stuck.append(f"job {j.pk} failed without a reason")
        kept = self.workdir / "tiiny" / "tiiny-videos.json"  # what the device kept over its restarts
        rows = json.loads(kept.read_text()) if kept.exists() else []
        cut_prompts = _cut_off(self.emus["tiiny"]) | {
            r["prompt"] for r in rows if "GENERATION_TIMEOUT" in json.dumps(r.get("error") or "")
        }
        cut = [j for j in jobs.values() if j.kind == "video" and j.prompt in cut_prompts]
        for j in cut:
            summary.generation_timeout = f"job {j.pk} {j.state} ({j.error_code or '-'})"
            if j.is_final and not (j.state == "failed" and j.error_code == "generation_timeout"):
                v.append(
                    f"job {j.pk}, cut off by the device, ended {j.state} ({j.error_code}), not on GENERATION_TIMEOUT"
                )
        # Duplicates: the device's counters against the renders the hub knows from its own events.
        counters = self.tally.final(self.emus)
        summary.counters = counters
        summary.peaks = {name: c["peak"] for name, c in counters.items()}
        owner_of: dict[str, int] = {}
        per_job: dict[int, set[str]] = {}
        for ev in JobEvent.objects.filter(job_id__in=list(jobs)).order_by("job_id", "seq"):
            rid = (ev.data or {}).get("remote_id")
            if rid:
                per_job.setdefault(ev.job_id, set()).add(str(rid))
                if owner_of.setdefault(str(rid), ev.job_id) != ev.job_id:
                    summary.duplicates.append(
                        f"device id {rid} belongs to jobs {owner_of[str(rid)]} and {ev.job_id}"
                    )
        tiiny = devices["tiiny"].pk
        videos = [j for j in jobs.values() if j.device_id == tiiny and j.kind == "video"]
        meshes = [j for j in jobs.values() if j.device_id == tiiny and j.kind == "mesh"]
        known_v = sum(len(per_job.get(j.pk, ())) for j in videos)
        known_t = sum(len(per_job.get(j.pk, ())) for j in meshes)
        summary.known_renders = {"tiiny videos": known_v, "tiiny 3D tasks": known_t}
        if counters["tiiny"]["renders_submitted"] != known_v:
            summary.duplicates.append(
                f"the Tiiny started {counters['tiiny']['renders_submitted']} video renders; the hub knows {known_v}"
            )
        if counters["tiiny"]["tasks_submitted"] != known_t:
            summary.duplicates.append(
                f"the Tiiny started {counters['tiiny']['tasks_submitted']} 3D tasks; the hub knows {known_t}"
            )
        interrupted = Counter(
            JobEvent.objects.filter(job_id__in=list(jobs), state="interrupted").values_list(
                "job_id", flat=True
            )
        )
        for j in videos:
            renders = len(per_job.get(j.pk, ()))
            if renders > 1 + interrupted[j.pk]:
                summary.duplicates.append(
                    f"job {j.pk} had {renders} renders but lost only {interrupted[j.pk]} (a render re-sent while one lived)"
                )
            summary.resubmitted += max(0, renders - 1)
        for name in ("ts-video", "ts-edit"):
            dev = devices[name].pk
            runs = JobEvent.objects.filter(job__device_id=dev, job_id__in=list(jobs), state="running").count()
            if counters[name]["renders_submitted"] > runs:
                summary.duplicates.append(
                    f"{name} started {counters[name]['renders_submitted']} renders for {runs} runs of the hub's jobs"
                )
        for name, peak in summary.peaks.items():
            if peak > 1:
                v.append(f"{name}: peak device concurrency {peak}")
        self.sampling_done.set()
        summary.idle_gap_s, summary.idle_gap_at = self.idle_gap(tiiny, list(jobs))
        summary.idle_gap_why = self.belief(summary.idle_gap_at, summary.idle_gap_s)
        # Every done job's files, through the web server with the owner's token, against the Artifact row.
        self.downloads(summary, [j for j in jobs.values() if j.state == "done"])
        if summary.lost:
            v.append(f"{len(summary.lost)} job(s) lost")
        if summary.duplicate_jobs:
            v.append(f"{len(summary.duplicate_jobs)} submission(s) queued twice")
        if summary.duplicates:
            v.append(f"{len(summary.duplicates)} duplicate device submission(s)")
        if summary.stuck:
            v.append(f"{len(summary.stuck)} job(s) stuck {self.opts.bound_s:.0f} s after the last fault")
        if summary.downloads_bad:
            v.append(f"{len(summary.downloads_bad)} result file(s) not downloadable or not matching")
        server_errors = [p for p in summary.submit_problems if "answered 5" in p or "raised" in p]
        if server_errors:
            v.append(f"{len(server_errors)} submission(s) met a server error (a 500 is a bug)")
        if len(jobs) < 30 and self.opts.tiiny_jobs >= 30:
            v.append(f"only {len(jobs)} jobs were queued")

    def chain_verdict(self, summary: Summary, subs: list[Submission], jobs: dict[int, Any]) -> None:
        """Each chain's video: released exactly once when its picture is done (one "Ready" event, its input
        there), waiting when its picture failed, cancelled when its picture was; never released twice."""
        from jobs.models import JobLink

        for sub in subs:
            child = jobs.get(sub.job_id) if sub.parent is not None else None
            parent = jobs.get(sub.parent.job_id) if child is not None and sub.parent.job_id else None
            if child is None or parent is None:
                continue
            ready = child.events.filter(message__startswith="Ready").count()
            link = JobLink.objects.filter(child_id=child.pk).first()
            if parent.state == "done":
                fine = ready == 1 and link is not None and link.released_at is not None
                outcome = "released once" if fine else f"released {ready} times"
            elif parent.state in ("failed", "interrupted"):
                fine = ready == 0 and child.state == "held"
                outcome = "waits for its failed picture" if fine else f"{child.state} with a failed picture"
            else:
                fine = ready == 0 and child.state == "cancelled"
                outcome = f"{child.state} with a {parent.state} picture"
            summary.chains[outcome] = summary.chains.get(outcome, 0) + 1
            if not fine:
                summary.violations.append(
                    f"chain: job {child.pk} {outcome} (picture job {parent.pk} {parent.state})"
                )

    def idle_gap(self, device_id: int, job_ids: list[int]) -> tuple[float, float]:
        """The longest stretch, outside fault windows (each plus a grace for leases and reconcile to act),
        in which the device had jobs waiting and none active: time the hub itself lost."""
        from jobs.models import ACTIVE_STATES, WAITING_STATES, JobEvent

        grace = 6.0
        windows = [(f.at - f.took, f.at + grace) for f in self.faults if f.took]
        windows += [(f.at, f.at + grace) for f in self.faults if f.what.startswith("SIGKILL")]
        events = JobEvent.objects.filter(job_id__in=job_ids, job__device_id=device_id).order_by("at", "id")
        state: dict[int, str] = {}
        best, best_at, gap_start = 0.0, 0.0, None
        for ev in events.values_list("job_id", "state", "at"):
            t = ev[2].timestamp() - self.t0_wall
            state[ev[0]] = ev[1]
            idle = any(v in WAITING_STATES for v in state.values()) and not any(
                v in ACTIVE_STATES for v in state.values()
            )
            if idle and gap_start is None:
                gap_start = t
            elif not idle and gap_start is not None:
                # Only the part of the gap no fault explains.
                points = sorted({gap_start, t, *(x for w in windows for x in w if gap_start < x < t)})
                for a, b in zip(points, points[1:], strict=False):
                    mid = (a + b) / 2
                    if not any(w0 <= mid <= w1 for w0, w1 in windows) and b - a > best:
                        best, best_at = b - a, a
                gap_start = None
        return round(best, 1), round(best_at, 1)

    def downloads(self, summary: Summary, done: list[Any]) -> None:
        import httpx

        from jobs.models import Artifact

        rows = {a.pk: a for a in Artifact.objects.filter(job_id__in=[j.pk for j in done])}
        for job in done:
            headers = {"Authorization": f"Bearer {self.tokens[job.owner.username]}"}
            with httpx.Client(base_url=self.base_url, headers=headers, timeout=30) as http:
                r = http.get(f"/api/jobs/{job.pk}")
                if r.status_code != 200:
                    summary.downloads_bad.append(f"job {job.pk}: GET /api/jobs answered {r.status_code}")
                    continue
                listed = r.json()["artifacts"]
                mine = {a.pk for a in rows.values() if a.job_id == job.pk}
                if not listed or {a["id"] for a in listed} != mine:
                    summary.downloads_bad.append(
                        f"job {job.pk}: files listed {len(listed)}, rows {len(mine)}"
                    )
                for art in listed:
                    got = http.get(art["download_url"])
                    row = rows.get(art["id"])
                    digest = hashlib.sha256(got.content).hexdigest()
                    if (
                        got.status_code != 200
                        or row is None
                        or digest != row.sha256
                        or len(got.content) != row.bytes
                    ):
                        summary.downloads_bad.append(
                            f"job {job.pk} {art['name']}: {got.status_code}, sha256 "
                            f"{'matches' if row is not None and digest == row.sha256 else 'differs'}"
                        )
                    else:
                        summary.downloads_ok += 1


# -- reporting --------------------------------------------------------------------------------------------------


def _waits_for_failed(job_ids: list[int]) -> set[int]:
    """The held jobs among ``job_ids`` whose awaited picture failed: they wait for its retry, by design."""
    from jobs.models import JobLink

    return set(
        JobLink.objects.filter(
            child_id__in=job_ids,
            child__state="held",
            released_at__isnull=True,
            parent__state__in=("failed", "interrupted"),
        ).values_list("child_id", flat=True)
    )


def _mark(ok: bool) -> str:
    return "ok  " if ok else "FAIL"


def render(summary: Summary) -> str:
    s = summary
    kills = Counter(f.what.split()[1] for f in s.faults if f.what.startswith("SIGKILL"))
    ends = ("unlocked", "back", "running again", "thawed")
    device = [f.what.split(" (")[0] for f in s.faults if f.what.startswith("device")]
    device = [d.removeprefix("device ") for d in device if not d.endswith(ends)]
    device = ["stalled for a device-hour" if "stalled" in d else d for d in device]
    tiiny = s.counters.get("tiiny", {})
    settled = f"{s.settled_s:.1f} s" if s.settled_s is not None else f"not within {s.bound_s:.0f} s"
    lines = [
        f"chaos night (seed {s.seed}, {s.mode}): {s.jobs} jobs in {s.night_s:.0f} s — "
        + ("ALL CHECKS PASS" if s.ok else f"{len(s.violations)} VIOLATION(S)"),
        f"  faults: SIGKILL {', '.join(f'{k} x{n}' for k, n in sorted(kills.items()))}; "
        f"device: {'; '.join(device)}",
        f"  states: {', '.join(f'{k} {n}' for k, n in sorted(s.states.items()))}"
        + (
            f"; failed because {', '.join(f'{k} x{n}' for k, n in s.failed_reasons.items())}"
            if s.failed_reasons
            else ""
        ),
        f"  [{_mark(not s.lost and not s.duplicate_jobs)}] lost: {len(s.lost)} (each submission is exactly one job; "
        f"duplicate jobs {len(s.duplicate_jobs)})",
        f"  [{_mark(not s.duplicates)}] duplicate device submissions: {len(s.duplicates)} (Tiiny video renders "
        f"{tiiny.get('renders_submitted', 0)} = hub-known {s.known_renders.get('tiiny videos', 0)}, of which "
        f"{s.resubmitted} re-sent after a lost render; 3D tasks {tiiny.get('tasks_submitted', 0)} = "
        f"{s.known_renders.get('tiiny 3D tasks', 0)})",
        f"  [{_mark(not s.stuck)}] stuck: {len(s.stuck)} (all final {settled} after the last fault; "
        f"bound {s.bound_s:.0f} s)",
        f"  [{_mark(all(p <= 1 for p in s.peaks.values()))}] peak device concurrency: "
        + ", ".join(f"{k} {v}" for k, v in s.peaks.items()),
        f"  [{_mark(not s.downloads_bad)}] downloads: {s.downloads_ok} files through the web server, sha256 "
        f"matches the Artifact row; {len(s.downloads_bad)} bad",
        f"  [{_mark(not any(v.startswith('chain:') for v in s.violations))}] chains (a video of a picture, "
        "queued while the picture waited): "
        + (", ".join(f"{outcome} {n}" for outcome, n in sorted(s.chains.items())) or "none"),
        f"  cut off by the device after an hour: {s.generation_timeout or 'none (each render ended in its hour)'}; "
        "longest idle Tiiny with work "
        f"waiting, outside faults: {s.idle_gap_s:.1f} s (at {s.idle_gap_at:.0f} s)",
        *([f"    meanwhile the hub saw: {s.idle_gap_why}"] if s.idle_gap_why and s.idle_gap_s >= 5 else []),
    ]
    details = s.lost + s.duplicate_jobs + s.duplicates + s.stuck + s.downloads_bad + s.submit_problems
    for extra in details[:8]:
        lines.append(f"    - {extra}")
    if len(details) > 8:
        lines.append(f"    … {len(details) - 8} more")
    for problem in s.violations:
        lines.append(f"  VIOLATION: {problem}")
    return "\n".join(lines)


def write_results(summary: Summary) -> None:
    """Put the summary under its own heading in bench/RESULTS.md, replacing an earlier chaos section."""
    s = summary
    body = (
        f"{HEADING}\n\n"
        f"Written by `make chaos` on {time.strftime('%Y-%m-%d %H:%M %Z')} (seed {s.seed}; replay with "
        f"`.venv/bin/python scripts/chaos.py --long --seed {s.seed}`). {s.jobs} jobs from 3 people on the Tiiny "
        "and TensorSharp emulators while the web server, both workers, beat and Redis were SIGKILLed and "
        "restarted, and the device was power-cycled mid-render, locked, unreachable and frozen.\n\n"
        "| check | result |\n|---|---|\n"
        f"| lost jobs | {len(s.lost) + len(s.duplicate_jobs)} |\n"
        f"| duplicate device submissions | {len(s.duplicates)} |\n"
        f"| stuck jobs ({s.bound_s:.0f} s after the last fault) | {len(s.stuck)} |\n"
        f"| peak device concurrency | {max(s.peaks.values(), default=0)} |\n"
        f"| results downloadable with matching sha256 | {s.downloads_ok} ok, {len(s.downloads_bad)} bad |\n\n"
        "```\n" + render(s) + "\n```\n"
    )
    text = RESULTS.read_text() if RESULTS.exists() else "# Benchmark results\n"
    start = text.find(HEADING)
    if start >= 0:
        nxt = text.find("\n## ", start + len(HEADING))
        text = text[:start] + body + (text[nxt + 1 :] if nxt >= 0 else "")
    else:
        text = text.rstrip("\n") + "\n\n" + body
    RESULTS.write_text(text)


# -- entry points -----------------------------------------------------------------------------------------------


def run_chaos(opts: Options, *, redis_url: str, run_dir: Path, workdir: Path) -> Summary:
    """The night against an already configured Django (the database migrated, ``redis_url`` its Redis)."""
    from django.test import override_settings

    with override_settings(MEDIA_ROOT=str(workdir / "media")):  # the same folder the night's processes use
        summary = Night(opts, redis=RedisHandle(redis_url, run_dir), workdir=workdir).run()
    print(render(summary), flush=True)
    return summary


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--long", action="store_true", help="a bigger night with more faults (a few minutes)")
    parser.add_argument("--seed", type=int, help="replay a night")
    parser.add_argument("--json", action="store_true", help="also print the summary as JSON")
    args = parser.parse_args(argv)
    opts = Options.make(seed=args.seed, long=args.long)

    from hub.redis_server import start_private_redis

    tmp = Path(tempfile.mkdtemp(prefix="chaos-"))
    redis = start_private_redis(run_dir=tmp / "run")
    os.environ.update(
        REDIS_URL=redis.url,
        HUB_DATA_DIR=str(tmp),
        DATABASE_URL=f"sqlite:///{tmp / 'hub.sqlite3'}",
        HUB_SECRET_KEY=os.environ.get("HUB_SECRET_KEY") or "chaos-only-secret-key-not-for-production",
        HUB_INSECURE_FAST_HASHER="1",
        DJANGO_SETTINGS_MODULE="hub.settings",
    )
    os.environ.pop("DJANGO_ALLOW_ASYNC_UNSAFE", None)
    import django

    django.setup()
    from django.core.management import call_command

    from hub.redis_server import stop_pid

    call_command("migrate", verbosity=0)
    try:
        summary = run_chaos(opts, redis_url=redis.url, run_dir=tmp / "run", workdir=tmp)
    finally:
        with contextlib.suppress(Exception):
            stop_pid(RedisHandle(redis.url, tmp / "run").pid())
        redis.stop()
    if args.json:
        print(json.dumps(summary.as_dict(), default=str))
    if opts.write_results:
        write_results(summary)
        print(f"chaos: wrote the summary into {RESULTS.relative_to(BASE)}")
    return 0 if summary.ok else 1


if __name__ == "__main__":
    sys.exit(main())

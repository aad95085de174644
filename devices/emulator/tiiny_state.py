"""Device state of the emulated Tiiny Pocket: clock, loaded models, jobs, counters.

Everything that changes over time is in `DeviceState`, owned by the app; nothing is module-global. Time is
"device time": real time multiplied by `speed`, so a 32-minute render takes 3.2 s at speed 600.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import random
import time
import uuid
from collections import Counter
from collections.abc import AsyncIterator, Callable, Coroutine
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from devices.emulator import catalog
from devices.emulator.catalog import ModelSpec
from devices.emulator.quirks import ALL_QUIRKS

BAD_GATEWAY_GRACE_S = 10.0  # device seconds after a load during which the runtime is not yet reachable
DOOMED_LOAD_S = 10.0  # how long a launch that will never start shows as loading before it vanishes
SLOW_VIDEO_STOP_S = 90.0  # API doc: "no answer within 60 s"
NPU_BLACKOUT_S = 180.0  # "/api/v1/npu/status showed no NPU readings for a few minutes"
NPU_TOTAL_MB = 49024  # LQ50-48GB dNPU (field notes §4.2)
NPU_BASE_MB = 532  # lowest reading seen with nothing loaded


class Clock:
    """Device time in seconds since boot; `speed` device seconds pass per real second."""

    def __init__(self, speed: float) -> None:
        self._speed = float(speed)
        self._real0 = time.monotonic()
        self._dev0 = 0.0

    @property
    def speed(self) -> float:
        return self._speed

    def now(self) -> float:
        return self._dev0 + (time.monotonic() - self._real0) * self._speed

    def set_speed(self, speed: float) -> None:
        if speed <= 0:
            raise ValueError("speed must be > 0")
        self._dev0, self._real0 = self.now(), time.monotonic()  # re-anchor so device time stays continuous
        self._speed = float(speed)

    async def sleep_until(self, deadline: float) -> None:
        # Short real-time slices so a speed change mid-sleep takes effect promptly.
        while (remaining := deadline - self.now()) > 0:
            await asyncio.sleep(min(remaining / self._speed, 0.1))

    async def sleep(self, device_seconds: float) -> None:
        await self.sleep_until(self.now() + device_seconds)


@dataclass
class Counters:
    requests: Counter = field(default_factory=Counter)
    renders_submitted: int = 0
    renders_completed: int = 0
    tasks_submitted: int = 0
    launches: int = 0
    inferences: int = 0
    current_work: int = 0
    peak_concurrent_work: int = 0

    def as_dict(self) -> dict[str, Any]:
        return {
            "requests": dict(self.requests),
            "renders_submitted": self.renders_submitted,
            "renders_completed": self.renders_completed,
            "tasks_submitted": self.tasks_submitted,
            "launches": self.launches,
            "inferences": self.inferences,
            "current_work": self.current_work,
            "peak_concurrent_work": self.peak_concurrent_work,
        }


def _hex(n: int) -> str:
    return uuid.uuid4().hex[:n]


@dataclass
class Instance:
    """A model container: pending while it loads, then running."""

    spec: ModelSpec
    status: str = "pending"
    instance_id: str = field(default_factory=lambda: uuid.uuid4().hex)
    startup_session_id: str = field(default_factory=lambda: uuid.uuid4().hex)
    container_id: str = field(default_factory=lambda: _hex(12))
    port: int = field(default_factory=lambda: random.randint(9080, 9199))
    created_at: float = field(default_factory=time.time)
    running_since: float = 0.0  # device time
    last_inference_time: float = 0.0  # epoch seconds
    use_time: float = 0.0
    doomed: bool = False  # accepted, but the runtime never comes up: it will silently vanish
    fresh: bool = False  # armed for xh2a_after_load
    bad_gateway_until: float = 0.0  # device time
    active_request_count: int = 0


@dataclass
class VideoJob:
    id: str
    model: str
    prompt: str
    width: int
    height: int
    seconds: float
    steps: int
    seed: int
    created_at: int
    created_dev: float
    status: str = "queued"
    started_dev: float | None = None
    duration: float = 0.0
    completed_at: int | None = None
    error: dict | None = None
    path: Path | None = None
    rendering: bool = False  # the NPU is busy with it (can outlive a failed/deleted status)
    task: asyncio.Task | None = None

    @property
    def size(self) -> str:
        return f"{self.width}x{self.height}"

    def fail(self, code: str, message: str) -> None:
        if self.status in ("queued", "in_progress"):
            self.status, self.error = "failed", {"code": code, "message": message}
            self.completed_at = int(time.time())


@dataclass
class Task3D:
    id: str
    stage: str
    params: dict
    inputs: dict[str, int]  # file field -> size in bytes
    created_at: int
    status: str = "queued"
    started_dev: float | None = None
    duration: float = 0.0
    finished_at: int | None = None
    error: dict | None = None
    artifacts: dict[str, tuple[bytes, str]] = field(default_factory=dict)  # name -> (data, media type)
    task: asyncio.Task | None = None

    def finish(self, status: str, error: dict | None = None) -> None:
        if self.status in ("queued", "running"):
            self.status, self.error, self.finished_at = status, error, int(time.time())


@dataclass
class MusicSession:
    id: str
    model: str
    prompt: str
    config: dict
    seconds_total: float
    sample_rate: int
    channels: int
    seed: int
    created_at: int
    stage: str = "preview"  # preview | full
    duration: float = 0.0


@dataclass
class Options:
    """How the emulator was started (restored by /__emulator__/reset)."""

    api_keys: tuple[str, ...] = ("test-key",)
    host: str = "127.0.0.1"
    port: int = 8800
    speed: float = 60.0
    quirks: frozenset[str] = frozenset(ALL_QUIRKS)
    locked: bool = False
    discovery_port: int | None = 39218  # None = disabled, 0 = ephemeral
    udp_port: int | None = 39217
    data_dir: Path | None = None
    device_name: str = "Tiiny Emulator"
    serial_number: str = "TNYE26110100000001Q"


class DeviceState:
    """The whole mutable device. Work (renders, 3D stages, blocking inferences, loads) is tracked per
    "epoch" so a power cycle or reset can drop everything in flight without stale finalizers touching
    the fresh state."""

    def __init__(self, options: Options) -> None:
        self.options = options
        self.clock = Clock(options.speed)
        self.discovery_port: int | None = None  # actual bound ports, filled in by discovery
        self.udp_port: int | None = None
        self._init_vault()
        self._init_runtime(quirks=set(options.quirks), locked=options.locked)

    # ----- lifecycle ------------------------------------------------------------------------------------
    def _init_runtime(self, *, quirks: set[str], locked: bool) -> None:
        self.epoch = getattr(self, "epoch", 0) + 1
        self.quirks: set[str] = quirks
        self.locked = locked
        self.counters = Counters()
        self.instances: dict[str, Instance] = {}
        self.videos: dict[str, VideoJob] = {}
        self.tasks3d: dict[str, Task3D] = {}
        self.sessions: dict[str, MusicSession] = {}
        self.images: dict[str, bytes] = {}
        self.detached: list[VideoJob] = []  # deleted jobs whose render goes on (delete_does_not_stop)
        self.cleanup_failed: set[str] = set()
        self.npu_blackout_until = -1.0
        self.active_compute = 0
        self._slot = asyncio.Lock()
        self._tasks: set[asyncio.Task] = set()
        self._load_finished_videos()

    def _init_vault(self) -> None:
        # Vault settings are TiinyOS settings, not runtime: they survive a power cycle (reset restores them).
        self.memory_schedule: dict[str, Any] = {
            "nightly_start_hour": 23,
            "nightly_end_hour": 5,
            "enabled": True,
        }
        self.memory_model: dict[str, Any] = {
            "model_id": catalog.CHAT_MODEL_ID,
            "automatic_summary_enabled": True,
        }

    # ----- --data-dir: finished video jobs survive a restart or power cycle -------------------------------
    def _videos_file(self) -> Path | None:
        return self.options.data_dir / "tiiny-videos.json" if self.options.data_dir else None

    def _load_finished_videos(self) -> None:
        path = self._videos_file()
        if path is None or not path.exists():
            return
        for rec in json.loads(path.read_text()):
            job = VideoJob(**{**rec, "path": Path(rec["path"]) if rec.get("path") else None})
            if job.path is None or job.path.exists():
                self.videos[job.id] = job

    def save_finished_videos(self) -> None:
        path = self._videos_file()
        if path is None:
            return
        keep = (
            "id",
            "model",
            "prompt",
            "width",
            "height",
            "seconds",
            "steps",
            "seed",
            "created_at",
            "status",
            "completed_at",
            "error",
        )
        records = [
            {**{k: getattr(j, k) for k in keep}, "created_dev": 0.0, "path": str(j.path) if j.path else None}
            for j in self.videos.values()
            if j.status in ("completed", "failed")
        ]
        tmp = path.with_suffix(".tmp")
        tmp.write_text(json.dumps(records))
        tmp.replace(path)

    def _cancel_all(self) -> None:
        for task in list(self._tasks):
            task.cancel()
        self._tasks.clear()

    def power_cycle(self) -> None:
        """Everything in flight vanishes, all models unload; locked again if that quirk is on."""
        self._cancel_all()
        quirks, counters = self.quirks, self.counters
        self._init_runtime(quirks=quirks, locked="locked_after_power_cycle" in quirks)
        counters.current_work = 0
        self.counters = counters  # power cycles happen inside a test; keep its request history

    def reset(
        self, *, quirks: set[str] | None = None, speed: float | None = None, locked: bool = False
    ) -> None:
        self._cancel_all()
        self.clock.set_speed(speed or self.options.speed)
        self._init_vault()
        self._init_runtime(quirks=set(ALL_QUIRKS) if quirks is None else quirks, locked=locked)

    def q(self, name: str) -> bool:
        return name in self.quirks

    def is_locked(self) -> bool:
        return self.locked and self.q("locked_after_power_cycle")

    def spawn(self, coro: Coroutine[Any, Any, Any]) -> asyncio.Task:
        """Run `coro` as a background task that a power cycle or reset cancels."""
        task = asyncio.get_running_loop().create_task(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        return task

    # ----- work accounting --------------------------------------------------------------------------------
    @contextlib.asynccontextmanager
    async def work(self) -> AsyncIterator[None]:
        """One device work item (render, 3D stage, blocking inference, model load) from start to end."""
        epoch, c = self.epoch, self.counters
        c.current_work += 1
        c.peak_concurrent_work = max(c.peak_concurrent_work, c.current_work)
        try:
            yield
        finally:
            if epoch == self.epoch:
                self.counters.current_work -= 1

    @contextlib.asynccontextmanager
    async def compute(self) -> AsyncIterator[None]:
        """Hold the NPU. With one_at_a_time the device runs one inference at a time; others wait here."""
        epoch, lock = self.epoch, self._slot
        serialize = self.q("one_at_a_time")
        if serialize:
            await lock.acquire()
        self.active_compute += 1
        try:
            yield
        finally:
            if epoch == self.epoch:
                self.active_compute -= 1
            if serialize:
                lock.release()

    async def run_blocking(self, instance: Instance, device_seconds: float) -> bool:
        """Hold a request for an inference of `device_seconds`; False if a power cycle aborted it."""
        self.counters.inferences += 1

        async def job() -> None:
            async with self.work(), self.compute():
                instance.active_request_count += 1
                try:
                    await self.clock.sleep(device_seconds)
                finally:
                    instance.active_request_count -= 1
                    instance.last_inference_time = time.time()
                    instance.use_time += device_seconds

        task = self.spawn(job())
        await asyncio.wait({task})
        return not task.cancelled()

    async def in_thread(self, fn: Callable[..., Any], /, **kw: Any) -> Any:
        """Blocking media work (ffmpeg, Pillow) off the event loop."""
        return await asyncio.to_thread(lambda: fn(**kw))

    # ----- models -------------------------------------------------------------------------------------------
    def used_units(self, *, exclude: str | None = None) -> int:
        return sum(i.spec.npu_usage for mid, i in self.instances.items() if mid != exclude)

    def available_units(self) -> int:
        return max(0, 100 - self.used_units())

    def running(self, model_id: str) -> Instance | None:
        inst = self.instances.get(model_id)
        return inst if inst is not None and inst.status == "running" else None

    def unload_candidate(self, spec: ModelSpec) -> dict[str, Any]:
        """The device's fit test. It compares against the free units only; with fake_fit the launch itself
        needs a margin the test does not know about (the doc's "55% needed, 56% free" case)."""
        available = self.available_units()
        body: dict[str, Any] = {
            "unload_required": False,
            "message": "",
            "target_model": {"model_id": spec.model_id, "npu_usage": spec.npu_usage},
            "candidate": None,
            "model_id": [],
            "npu_required": spec.npu_usage,
            "npu_available": available,
        }
        if spec.model_id in self.instances or spec.npu_usage <= available:
            return body
        # Least recently used first until enough would be free.
        victims, freed = [], 0
        for inst in sorted(self.instances.values(), key=lambda i: (i.last_inference_time, i.created_at)):
            victims.append(inst)
            freed += inst.spec.npu_usage
            if spec.npu_usage <= available + freed:
                break
        names = ", ".join(v.spec.model_id for v in victims)
        body.update(
            unload_required=True,
            message=f"Not enough NPU RAM available. Would you like to unload [{names}] to make room for the model?",
            candidate={"model_id": victims[0].spec.model_id, "instance_id": victims[0].instance_id},
            model_id=[v.spec.model_id for v in victims],
        )
        return body

    def launch(self, spec: ModelSpec) -> tuple[int, dict[str, Any]]:
        mid = spec.model_id
        if mid in self.cleanup_failed:
            self.cleanup_failed.discard(mid)
            if self.q("slow_stop_cleanup_failed"):
                return 409, {
                    "code": 409,
                    "msg": "cleanup_failed",
                    "detail": "physical_stop_failed: runtime cleanup failed and must be retried",
                }
        existing = self.instances.get(mid)
        if existing is not None and existing.status == "running":
            return 200, {"message": f"{mid} already running", "progress": 100}
        if existing is not None:
            return 200, {"message": f"start loading {mid}", "progress": 0}
        available = self.available_units()
        margin = 2 if self.q("fake_fit") else 0
        if spec.npu_usage > available and not self.q("fake_fit"):
            return 400, {
                "code": 400,
                "msg": "Error starting model.",
                "detail": f"{mid} needs {spec.npu_usage} NPU units, only {available} free",
            }
        inst = Instance(spec=spec, doomed=spec.npu_usage > available - margin and spec.npu_usage > 0)
        self.instances[mid] = inst
        self.counters.launches += 1
        self.spawn(self._load(inst))
        return 200, {"message": f"start loading {mid}", "progress": 0}

    async def _load(self, inst: Instance) -> None:
        async with self.work():
            if inst.doomed:
                # Accepted and shown as loading, then silently rolled back (field notes §5.4).
                await self.clock.sleep(min(inst.spec.load_time, DOOMED_LOAD_S))
                if self.instances.get(inst.spec.model_id) is inst:
                    del self.instances[inst.spec.model_id]
                return
            await self.clock.sleep(inst.spec.load_time)
            self.mark_running(inst, arm_quirks=True)

    def mark_running(self, inst: Instance, *, arm_quirks: bool) -> None:
        inst.status = "running"
        inst.running_since = self.clock.now()
        inst.fresh = arm_quirks
        inst.bad_gateway_until = inst.running_since + BAD_GATEWAY_GRACE_S if arm_quirks else 0.0

    def load_now(self, spec: ModelSpec, *, arm_quirks: bool = False) -> Instance:
        """Control-API shortcut: the model is running at once (unloads nothing, ignores the budget)."""
        inst = self.instances.get(spec.model_id) or Instance(spec=spec)
        self.instances[spec.model_id] = inst
        self.mark_running(inst, arm_quirks=arm_quirks)
        return inst

    def _drop_model(self, model_id: str) -> str | None:
        """Remove a model's container and kill its in-flight work; returns the container id."""
        inst = self.instances.pop(model_id, None)
        if inst is None:
            return None
        for job in self.videos_rendering(model_id):
            job.fail("MODEL_UNLOADED", "the video model was stopped while rendering")
            if job.task is not None:
                job.task.cancel()
        if inst.spec.kind == "3d":
            for task in self.tasks3d.values():
                task.finish("failed", {"code": "MODEL_UNLOADED", "message": "the 3D model was stopped"})
                if task.task is not None:
                    task.task.cancel()
        return inst.container_id

    def videos_rendering(self, model_id: str) -> list[VideoJob]:
        return [j for j in self._all_video_jobs() if j.model == model_id and j.task and not j.task.done()]

    def _all_video_jobs(self) -> list[VideoJob]:
        jobs = list(self.videos.values())
        return jobs + [j for j in self.detached if j.task and not j.task.done()]

    def detach_video(self, job: VideoJob) -> None:
        self.detached = [j for j in self.detached if j.task and not j.task.done()] + [job]

    async def stop(self, spec: ModelSpec) -> tuple[int, dict[str, Any]]:
        inst = self.instances.get(spec.model_id)
        if inst is None:
            return 400, {
                "code": 400,
                "msg": "Error stopping model.",
                "detail": f"{spec.model_id} is not running",
            }
        if spec.kind == "video" and self.q("slow_stop_cleanup_failed"):
            epoch = self.epoch
            await self.clock.sleep(SLOW_VIDEO_STOP_S)
            if epoch != self.epoch:
                return 502, {"code": 502, "msg": "Bad Gateway", "detail": "device restarted"}
            removed = [c for mid in list(self.instances) if (c := self._drop_model(mid))]
            self.cleanup_failed.add(spec.model_id)
            self.npu_blackout_until = self.clock.now() + NPU_BLACKOUT_S
            return 200, {"removed_container_ids": removed}
        container = self._drop_model(spec.model_id)
        return 200, {"removed_container_ids": [container] if container else []}

    def unload_all(self) -> list[str]:
        return [c for mid in list(self.instances) if (c := self._drop_model(mid))]

    # ----- telemetry ----------------------------------------------------------------------------------------
    def npu_busy(self) -> bool:
        return self.active_compute > 0

    def npu_util(self) -> float:
        if self.npu_busy():
            return round(random.uniform(97.0, 99.7), 2)
        if self.instances:
            return round(random.uniform(0.2, 3.0), 2)
        return 0.0

    def npu_mem_used_mb(self) -> int:
        units = self.used_units()
        return NPU_BASE_MB + int(units * (NPU_TOTAL_MB - NPU_BASE_MB) / 100 * random.uniform(0.97, 1.0))

    def npu_blackout(self) -> bool:
        return self.clock.now() < self.npu_blackout_until

    # ----- misc ---------------------------------------------------------------------------------------------
    def refresh_video(self, job: VideoJob) -> VideoJob:
        """Apply the gateway's one-hour cut-off (generation_timeout); the render itself goes on."""
        limit = job.created_dev + catalog.VIDEO_GATEWAY_LIMIT_S
        # A render that ended (in device time) before the limit is done, even while the emulator still writes
        # its MP4 in real time: on a loaded machine at high speed, that writing can outlast the whole hour.
        finished_in_time = (
            job.started_dev is not None and job.duration > 0 and job.started_dev + job.duration < limit
        )
        if (
            self.q("generation_timeout")
            and job.status in ("queued", "in_progress")
            and self.clock.now() >= limit
            and not finished_in_time
        ):
            job.fail("GENERATION_TIMEOUT", "video generation exceeded the gateway time limit")
        return job

    def video_progress(self, job: VideoJob) -> int:
        if job.status == "completed":
            return 100
        if job.started_dev is None or job.duration <= 0:
            return 0
        return max(0, min(99, int((self.clock.now() - job.started_dev) / job.duration * 100)))

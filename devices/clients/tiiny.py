"""Tiiny Pocket client: the only code that speaks the Tiiny protocol (reference: tiiny-device-api.md).

Tolerates both the reference's shapes and the older ones from the field notes (``/api/v1/models/npu/status``
vs ``/api/v1/npu/status``; ``running`` as strings vs ``instances``; mixed error envelopes).

In layers: ``TiinyHttp`` (``tiiny_http``: typed errors, JSON calls, downloads) under ``TiinyRenders``
(``tiiny_renders``: video, 3D, images, speech, music) under ``TiinyClient`` here (system, NPU, models, loading,
capabilities, vault). What the device answers is read by pure functions (``tiiny_answers``, ``tiiny_errors``),
and what to unload before a load is decided by one (``eviction.plan_eviction``).

Time: the client never sleeps on its own clock for long; every wait goes through ``self.sleep`` and the
intervals (``poll_interval``, ``load_grace_s``) are constructor arguments, so tests against a sped-up
emulator use short real sleeps.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any
from urllib.parse import quote

import httpx
from django.conf import settings

from devices import errors
from devices.capabilities import (
    Capabilities,
    ModelCap,
    VaultCap,
    VideoCap,
    reference_video_cap,
    stages_from_3d_caps,
    vault_cap,
    video_cap_from_info,
)
from devices.clients.base import DEFAULT_TIMEOUTS, Timeouts, retry_call
from devices.clients.eviction import (
    DeviceHolds,
    FitAnswer,
    WantedModel,
    needs_fit_answer,
    plan_eviction,
)
from devices.clients.tiiny_answers import (
    Reading,
    RunningModels,
    model_cap,
    model_rows,
    model_units,
    npu_from_hardware,
    npu_units,
    reading_from,
    replaced,
    running_from,
    unload_candidate_from,
    versions_from,
)
from devices.clients.tiiny_renders import TiinyRenders

logger = logging.getLogger("devices.clients.tiiny")

#: While a model loads, read ``running`` when this share of the time left to its expected end has passed
LOAD_NEAR_SHARE = 0.4
#: ... and, past that end or with no expectation, this often (the end of a load is noticed within it)
LOAD_LATE_S = 0.5
#: Errors that mean "no answer for this model now" when reading what a loaded model offers
_NO_ANSWER = (errors.BadRequest, errors.ModelNotLoaded, errors.Transient, errors.NotFound)

__all__ = ["LOAD_LATE_S", "LoadResult", "Reading", "RunningModels", "TiinyClient", "mid"]


def mid(model_id: str) -> str:
    """URL-encode a model id for a path segment (ids contain ``/``)."""
    return quote(model_id, safe="")


@dataclass
class LoadResult:
    already_loaded: bool
    evicted: list[str] = field(default_factory=list)
    launch_attempts: int = 0
    waited_s: float = 0.0
    #: ``clock.monotonic()`` at the estimated moment the model became ready (midway between the last read that
    #: saw it pending and the first that saw it running); None when it was already running.
    ready_at: float | None = None
    #: the device's running list as last read (after the load): the hub reconciles its own list with it
    state: RunningModels | None = None


@dataclass
class _LoadWatch:
    """One ``ensure_loaded`` call watching a load: the model, how it was asked for, and the times so far."""

    model_id: str
    sleep: Callable[[float], None]
    polite: bool
    hub: set[str]
    launch_attempts: int
    started: float
    launched: float = 0.0
    last_pending: float = 0.0
    slept: float = 0.0
    relaunched: bool = False

    def pause(self, seconds: float) -> None:
        self.sleep(seconds)
        self.slept += seconds


class TiinyClient(TiinyRenders):
    """The Tiiny Pocket: its system and NPU state, its models (loading them right), what it can do, its vault;
    the renders come from ``TiinyRenders``."""

    def __init__(
        self,
        base_url: str,
        api_key: str,
        *,
        transport: httpx.BaseTransport | None = None,
        clock: Any = time,
        sleep: Callable[[float], None] | None = None,
        timeouts: Timeouts = DEFAULT_TIMEOUTS,
        poll_interval: float = 3.0,
        load_grace_s: float = 10.0,
        load_poll_max_s: float = 20.0,
    ) -> None:
        super().__init__(
            base_url,
            headers={"Authorization": f"Bearer {api_key}"} if api_key else {},
            transport=transport,
            timeouts=timeouts,
            secret=api_key,
        )
        self.clock = clock
        self.sleep = sleep or clock.sleep
        #: real seconds between two polls of ``running`` near the expected end of a load (the shortest wait)
        self.poll_interval = poll_interval
        #: ... and at most this far from it (``_load_wait``)
        self.load_poll_max_s = max(poll_interval, load_poll_max_s)
        #: model id -> seconds a load is expected to take (the hub's learned times, else the device's load_time);
        #: or None until a load first needs them (``expect_load_seconds``)
        self._load_seconds: dict[str, float] | None = {}
        self._load_seconds_from: Callable[[], dict[str, float]] | None = None
        #: called with (model id, seconds from launch to running) after a load this client launched
        self.on_loaded: Callable[[str, float], None] | None = None
        #: real seconds of the readiness window after a load: ``ensure_loaded(settle=True)`` waits it out, the
        #: job runner's first request (``TiinyRunner.first_use``) retries within it
        self.load_grace_s = load_grace_s

    @property
    def load_seconds(self) -> dict[str, float]:
        """Read once, when a load first needs them: a client is made per job step and most never load."""
        if self._load_seconds is None:
            self._load_seconds = dict(self._load_seconds_from()) if self._load_seconds_from else {}
        return self._load_seconds

    @load_seconds.setter
    def load_seconds(self, value: dict[str, float]) -> None:
        self._load_seconds = dict(value)

    def expect_load_seconds(self, source: Callable[[], dict[str, float]]) -> None:
        """Read the expected load times from ``source`` when a load first needs them (not now)."""
        self._load_seconds, self._load_seconds_from = None, source

    @classmethod
    def for_device(cls, device: Any, **kw: Any) -> TiinyClient:
        # How often to look at `running` while a model loads, and the wait after it (xh2a / 502 window).
        kw.setdefault("poll_interval", settings.JOBS_DEVICE_POLL_S)
        kw.setdefault("load_grace_s", settings.JOBS_LOAD_GRACE_S)
        kw.setdefault("load_poll_max_s", settings.JOBS_POLL_MAX_S)
        return cls(device.base_url, device.api_key or "", **kw)

    # -- system ------------------------------------------------------------------------------------------
    def sys_status(self) -> dict:
        return self._get_json("/api/v1/sys/status", read=self.timeouts.probe, what="sys")

    def device_info(self) -> dict:
        return self._get_json("/api/v1/sys/device_info", read=self.timeouts.probe, what="sys")

    def npu_status(self) -> dict:
        """``{"total","used","available","models":[{"model_id","npu_usage","status"}], "util"}``.

        ``/api/v1/models/npu/status`` is the one proxied on port 80 (field notes §4.1); the hardware view
        ``/api/v1/npu/status`` (reference) is the fallback.
        """
        try:
            raw = self._get_json("/api/v1/models/npu/status", read=self.timeouts.probe)
        except (errors.BadRequest, errors.NotFound):
            raw = None
        if isinstance(raw, dict) and ("npu_total" in raw or "total" in raw):
            return npu_units(raw)
        return npu_from_hardware(self._get_json("/api/v1/npu/status", read=self.timeouts.probe))

    def reading(self, *, full: bool = True) -> Reading:
        """One metrics sample from ``sys/status`` (CPU, memory, NPU utilisation/memory). ``full`` adds the NPU
        unit view (units and the per-model list): a second request, so the poller asks for it only when the
        loaded models may have changed."""
        status = self.sys_status()
        return reading_from(status, self.npu_status() if full else {}, full=full)

    def with_units(self, reading: Reading) -> Reading:
        """Complete a status-only reading with the NPU unit view (one more request)."""
        npu = self.npu_status()
        reading.npu_units_used, reading.npu_units_total = npu.get("used"), npu.get("total")
        reading.models, reading.full = npu.get("models") or [], True
        if reading.npu_util is None:
            reading.npu_util = npu.get("util")
        return reading

    # -- models ------------------------------------------------------------------------------------------
    def models(self) -> list[dict]:
        """Installed models, each with at least ``id``, ``status``, ``type``, ``npu_usage``.

        Always the trailing-slash path: without it the gateway redirects to another host.
        """
        return model_rows(self._get_json("/api/v1/models/", params={"including_downloading": "false"}))

    def running(self) -> RunningModels:
        return running_from(self._get_json("/api/v1/models/running", read=self.timeouts.probe))

    def unload_candidate(self, model_id: str) -> dict:
        """``{"unload_required": bool, "unload": [ids], "npu_required": int|None, "npu_available": int|None}``
        plus the raw answer under ``raw``."""
        return unload_candidate_from(self._get_json(f"/api/v1/models/{mid(model_id)}/unload_candidate"))

    def launch(self, model_id: str) -> dict:
        return self._post_json(f"/api/v1/models/{mid(model_id)}/launch", {"model_id": model_id})

    def stop(self, model_id: str, *, timeout: float = 180) -> dict:
        """Unload one model. Stopping a model mid-render is slow (reference: over 60 s), hence the timeout."""
        try:
            return self._post_json(f"/api/v1/models/{mid(model_id)}/stop", read=timeout)
        except errors.ModelNotLoaded:
            return {"already_stopped": True}

    def unload_all(self) -> dict:
        return self._post_json("/api/v1/models/unload_all", read=180)

    # -- loading done right ------------------------------------------------------------------------------
    def ensure_loaded(
        self,
        model_id: str,
        *,
        polite: bool = False,
        foreign_models_ok: bool = True,
        hub_models: Iterable[str] = (),
        hub_instances: Mapping[str, dict[str, str]] | None = None,
        deadline_s: float = 600,
        sleep: Callable[[float], None] | None = None,
        settle: bool = True,
        launch_attempts: int = 3,
    ) -> LoadResult:
        """Make ``model_id`` running, evicting what must go. Steps:

        1. Already in ``running`` → done. In ``pending`` → just wait for it.
        2-4. Make room (``_make_room``; the rules are ``eviction.plan_eviction``'s): ask ``unload_candidate``;
           when the device says unload, exactly the models it names go; more only when the NPU would still be
           left nearly full (the "fake fit"); ``foreign_models_ok=False`` evicts every other running model
           (exclusive use); ``polite=True`` raises ``PoliteRefusal`` before touching anything if a model to
           evict is not in ``hub_models`` (someone else loaded it), or runs as another instance than the one
           the hub noted in ``hub_instances`` (it was loaded again since: a restart, someone else).
        5. Launch; a 409 ``cleanup_failed`` is retried (the device says so).
        6. Read ``running`` until the model is there or ``deadline_s`` passes (``_wait_running``): sparse far
           from the load's expected end, every ``poll_interval`` near it (``_load_wait``; the reference's launch
           stream is only seen in the vendor app, frame shape unknown, so it is not used). If the model drops
           out of ``pending`` without becoming running (a silently rolled-back load), unload everything and
           launch once more (``_relaunch``).
        7. ``settle``: wait out the documented readiness window (``load_grace_s``, "xh2a … wait ~10 s") counted
           from the moment the model became ready, not from when it was noticed. Without ``settle`` the caller
           sends at once and retries within the window (``LoadResult.ready_at`` says when it started).
        """
        sleep = sleep or self.sleep
        state = self.running()
        if model_id in state.running:
            return LoadResult(already_loaded=True, state=state)
        result = LoadResult(already_loaded=False)
        noted = hub_instances or {}
        hub = {m for m in hub_models if not replaced(noted.get(m), state.instances.get(m))}
        watch = _LoadWatch(model_id, sleep, polite, hub, launch_attempts, started=self.clock.monotonic())
        if model_id not in state.pending:
            result.evicted = self._make_room(
                model_id, state, polite=polite, hub=watch.hub, foreign_models_ok=foreign_models_ok
            )
            result.launch_attempts = self._launch_with_retry(model_id, launch_attempts, sleep)
        watch.launched = watch.last_pending = self.clock.monotonic()
        result.state = self._wait_running(watch, result, deadline_s)
        result.waited_s = max(watch.slept, self.clock.monotonic() - watch.started)
        if settle and self.load_grace_s:
            left = self.load_grace_s - (self.clock.monotonic() - result.ready_at)
            if left > 0:
                sleep(left)
        return result

    def _wait_running(self, watch: _LoadWatch, result: LoadResult, deadline_s: float) -> RunningModels:
        """Step 6 of ``ensure_loaded``: read ``running`` until the model is in it; returns that read."""
        if result.launch_attempts:
            # A load is never over the moment it was launched: the first read waits a poll (one request less).
            watch.pause(self.poll_interval)
        while True:
            state = self.running()
            seen = self.clock.monotonic()
            if watch.model_id in state.running:
                self._note_ready(watch, result, seen)
                return state
            watch.last_pending = seen
            if watch.model_id not in state.pending and result.launch_attempts and watch.slept > 0:
                self._relaunch(watch, result, state)
            waited = max(watch.slept, self.clock.monotonic() - watch.started)
            if waited >= deadline_s:
                raise errors.LoadTimeout(detail=f"{watch.model_id} not running after {waited:.0f}s")
            watch.pause(self._load_wait(watch.model_id, max(0.0, self.clock.monotonic() - watch.launched)))

    def _note_ready(self, watch: _LoadWatch, result: LoadResult, seen: float) -> None:
        """The model was first seen running at ``seen``: it became ready midway since the last read."""
        result.ready_at = (watch.last_pending + seen) / 2
        if result.launch_attempts and self.on_loaded is not None:
            self.on_loaded(watch.model_id, max(0.0, result.ready_at - watch.launched))

    def _relaunch(self, watch: _LoadWatch, result: LoadResult, state: RunningModels) -> None:
        """The load left ``pending`` without running: rolled back silently, the fit answer was wrong. Clear the
        NPU and launch once more; a second rollback is an error."""
        if watch.relaunched:
            raise errors.Transient("The device dropped the model load twice.", detail=watch.model_id)
        watch.relaunched = True
        logger.info("load of %s vanished; unloading everything and relaunching", watch.model_id)
        others = [m for m in state.running if m != watch.model_id]
        if watch.polite and (foreign := [m for m in others if m not in watch.hub]):
            raise errors.PoliteRefusal(blocking=foreign, detail=watch.model_id)
        self.unload_all()
        result.evicted += [m for m in others if m not in result.evicted]
        result.launch_attempts += self._launch_with_retry(watch.model_id, watch.launch_attempts, watch.sleep)
        watch.launched = self.clock.monotonic()

    def _load_wait(self, model_id: str, elapsed: float) -> float:
        """The wait before the next read of ``running``, ``elapsed`` seconds after the launch: the render rule
        (``jobs.queue.engine``) for a load. Never longer than half the time the load has taken so far (an end far
        earlier than expected is seen within 1.5 times its time), ``LOAD_NEAR_SHARE`` of the time left to the
        expected end (every ``poll_interval`` near it), at most ``load_poll_max_s``. Past the expected end, or
        with no expectation, every ``LOAD_LATE_S``: the end is then still noticed within it."""
        expected = self.load_seconds.get(model_id)
        wait = 0.5 * elapsed
        if expected and expected > elapsed:
            wait = min(wait, LOAD_NEAR_SHARE * (expected - elapsed))
        else:
            wait = min(wait, LOAD_LATE_S)
        return max(self.poll_interval, min(wait, self.load_poll_max_s))

    def _make_room(
        self, model_id: str, state: RunningModels, *, polite: bool, hub: set[str], foreign_models_ok: bool
    ) -> list[str]:
        """Unload what ``plan_eviction`` says must go before launching ``model_id``: one ``stop`` per model, or
        ``unload_all`` when every other model goes anyway. Returns the evicted ids."""
        holds = DeviceHolds(tuple(state.running), tuple(state.pending), hub_loaded=frozenset(hub))
        wanted = WantedModel(model_id, polite=polite, exclusive=not foreign_models_ok)
        costs = dict(state.usage)
        if needs_fit_answer(holds, wanted):
            fit, costs = self._fit_answer(model_id, holds.others(model_id), costs)
            holds = replace(holds, fit=fit)
        plan = plan_eviction(holds, wanted, costs)
        if plan.blocking:
            raise errors.PoliteRefusal(blocking=list(plan.blocking), detail=f"{model_id} needs room")
        if plan.unload_all:
            self.unload_all()  # everything goes anyway: one fast call instead of a (slow) stop per model
        else:
            for m in plan.evict:
                self.stop(m)
        return list(plan.evict)

    def _fit_answer(
        self, model_id: str, others: list[str], costs: dict[str, int]
    ) -> tuple[FitAnswer, dict[str, int]]:
        """Ask ``unload_candidate`` whether ``model_id`` fits; what it leaves out (free units, the model's own
        units, the units of a loaded model the running list gave none for) comes from the NPU view and the
        model list. Returns the answer and the units each loaded model would free."""
        cand = self.unload_candidate(model_id)
        needed, available = cand["npu_required"], cand["npu_available"]
        if needed is None or available is None or any(m not in costs for m in others):
            npu = self.npu_status()
            available = npu["available"] if available is None else available
            costs = {**{m["model_id"]: m["npu_usage"] or 0 for m in npu["models"]}, **costs}
            if needed is None:
                needed = model_units(self.models(), model_id)
        return FitAnswer(cand["unload_required"], tuple(cand["unload"]), needed, available), costs

    def _launch_with_retry(self, model_id: str, attempts: int, sleep: Callable[[float], None]) -> int:
        n = 0

        def once() -> dict:
            nonlocal n
            n += 1
            return self.launch(model_id)

        retry_call(
            once, retry_on=(errors.CleanupFailed,), attempts=attempts, wait_s=self.poll_interval, sleep=sleep
        )
        return n

    # -- capabilities ------------------------------------------------------------------------------------
    def capabilities(self, previous: Capabilities | None = None) -> Capabilities:
        """Installed and running models with NPU cost, video options per video model, voices, 3D stages."""
        rows = self.models()
        state = self.running()
        npu = self.npu_status()
        costs = {m["model_id"]: m["npu_usage"] for m in npu["models"]}
        caps = Capabilities(kind="tiiny", npu_total=npu["total"], npu_available=npu["available"])
        caps.models = [model_cap(r, state.running, costs) for r in rows]
        for m in caps.models_of_kind("video"):
            caps.video[m.id] = self._video_cap(m, previous)
        caps.stages_3d = self._stages_3d(caps, previous)
        caps.versions = self._versions()
        caps.vault = self._vault(previous)
        return caps

    def _video_cap(self, m: ModelCap, previous: Capabilities | None) -> VideoCap:
        if m.loaded:
            try:
                return video_cap_from_info(m.id, self.video_info(m.id))
            except _NO_ANSWER:
                pass
        if previous and (old := previous.video_for(m.id)):
            old.source = "previous"
            return old
        return reference_video_cap(m.id) or VideoCap(m.id, [], [], 0, 24, source="unknown")

    def _stages_3d(self, caps: Capabilities, previous: Capabilities | None) -> list[str]:
        """Asked of a loaded 3D model, else the last snapshot's, else the defaults; none without a 3D model."""
        models_3d = caps.models_of_kind("3d")
        if any(m.loaded for m in models_3d):
            try:
                return stages_from_3d_caps(self.capabilities_3d())
            except _NO_ANSWER:
                return stages_from_3d_caps(None)
        if models_3d:
            return previous.stages_3d if previous and previous.stages_3d else stages_from_3d_caps(None)
        return []

    def _versions(self) -> dict[str, str]:
        try:
            return versions_from(self.device_info())
        except (errors.BadRequest, errors.NotFound, errors.Transient):
            return {}

    def _vault(self, previous: Capabilities | None) -> VaultCap:
        try:
            return vault_cap(self.memory_schedule(), self.memory_model())
        except errors.Transient:
            return previous.vault if previous is not None else VaultCap()

    # -- knowledge base / vault --------------------------------------------------------------------------
    def memory_schedule(self) -> dict:
        """The nightly summary window (``nightly_start_hour``, ``nightly_end_hour``, ``enabled``, ``worker``)."""
        return self._vault_json("/kb/memory/schedule")

    def memory_model(self) -> dict:
        """``{"model_id", "automatic_summary_enabled", "running_models"}``; an empty model_id = summaries off."""
        return self._vault_json("/kb/memory/model")

    def _vault_json(self, path: str) -> dict:
        # Older firmware has no vault: a 404 (BadRequest or NotFound, by its body) means "nothing to know".
        try:
            raw = self._get_json(path, read=self.timeouts.probe)
        except (errors.BadRequest, errors.NotFound):
            return {}
        return raw if isinstance(raw, dict) else {}

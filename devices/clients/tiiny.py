"""Tiiny Pocket client: the only code that speaks the Tiiny protocol (reference: tiiny-device-api.md).

Tolerates both the reference's shapes and the older ones from the field notes (``/api/v1/models/npu/status``
vs ``/api/v1/npu/status``; ``running`` as strings vs ``instances``; mixed error envelopes).

Time: the client never sleeps on its own clock for long; every wait goes through ``self.sleep`` and the
intervals (``poll_interval``, ``load_grace_s``) are constructor arguments, so tests against a sped-up
emulator use short real sleeps.
"""

from __future__ import annotations

import base64
import logging
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar
from urllib.parse import quote

import httpx
from django.conf import settings

from devices import errors
from devices.capabilities import (
    NPU_MARGIN,
    Capabilities,
    ModelCap,
    VideoCap,
    model_kind,
    reference_video_cap,
    stages_from_3d_caps,
    vault_cap,
    video_cap_from_info,
)
from devices.clients.base import (
    DEFAULT_TIMEOUTS,
    HttpDevice,
    Timeouts,
    error_text,
    json_error_text,
    retry_call,
)

logger = logging.getLogger("devices.clients.tiiny")
T = TypeVar("T")

BUSY_CODE = 150004
#: While a model loads, read ``running`` when this share of the time left to its expected end has passed
LOAD_NEAR_SHARE = 0.4
#: ... and, past that end or with no expectation, this often (the end of a load is noticed within it)
LOAD_LATE_S = 0.5


def mid(model_id: str) -> str:
    """URL-encode a model id for a path segment (ids contain ``/``)."""
    return quote(model_id, safe="")


@dataclass
class RunningModels:
    running: list[str] = field(default_factory=list)
    pending: list[str] = field(default_factory=list)
    ports: dict[str, int] = field(default_factory=dict)
    usage: dict[str, int] = field(default_factory=dict)  # NPU units per model, when the device says

    def loaded_rows(self) -> list[dict[str, Any]]:
        """The same rows the NPU unit view gives (``Device.loaded_models``), from this one read."""
        rows = [{"model_id": m, "npu_usage": self.usage.get(m), "status": "running"} for m in self.running]
        return rows + [
            {"model_id": m, "npu_usage": self.usage.get(m), "status": "loading"} for m in self.pending
        ]


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
class Reading:
    """One metrics sample, normalised from ``sys/status`` + NPU status."""

    npu_util: float | None = None
    npu_mem_used_mb: float | None = None
    npu_mem_total_mb: float | None = None
    npu_units_used: int | None = None
    npu_units_total: int | None = None
    cpu_percent: float | None = None
    mem_percent: float | None = None
    models: list[dict[str, Any]] = field(default_factory=list)
    #: False for a status-only sample (one request): the NPU units and ``models`` were not read
    full: bool = True


def _ids(items: Iterable[Any]) -> list[str]:
    out = []
    for it in items or []:
        if isinstance(it, str):
            out.append(it)
        elif isinstance(it, dict):
            v = it.get("model_id") or it.get("id") or it.get("name")
            if v:
                out.append(str(v))
    return out


def _num(v: Any) -> float | None:
    try:
        return None if v is None else float(v)
    except (TypeError, ValueError):
        return None


class TiinyClient(HttpDevice):
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
        #: real seconds to wait after a load before the first use, and between first-use retries
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

    # -- error mapping -----------------------------------------------------------------------------------
    def _raise_for(self, resp: httpx.Response, *, what: str, id_call: bool = False) -> None:
        """Map a non-2xx (or a 200 busy envelope) to a typed error."""
        status = resp.status_code
        if 200 <= status < 300:
            if resp.headers.get("content-type", "").startswith("application/json"):
                body = resp.json() if resp.content else None
                if isinstance(body, dict) and body.get("code") == BUSY_CODE:
                    raise errors.DeviceBusy(detail=self.scrub(json_error_text(body)), status=status)
            return
        detail = self.scrub(error_text(resp)) or None
        low = (detail or "").lower()
        if status in (401, 403):
            raise errors.AuthFailed(detail=detail, status=status)
        if status == 502:
            raise self._classify_502(what, detail)
        if (
            "no suitable model" in low
            or "is not loaded" in low
            or "model_not_found" in low
            or "not running" in low
        ):
            raise errors.ModelNotLoaded(detail=detail, status=status)
        if "xh2a" in low:
            raise errors.Transient("The model's backend was not ready yet.", detail=detail, status=status)
        if status == 409 and ("cleanup" in low or "physical_stop" in low):
            raise errors.CleanupFailed(detail=detail, status=status)
        if status == 409:
            raise errors.DeviceBusy(detail=detail, status=status)
        if status == 429:
            raise errors.DeviceBusy(detail=detail, status=status)
        if status == 404 and (id_call or "not_found" in low or "session not found" in low):
            raise errors.NotFound(detail=detail, status=status)
        if status in (400, 404, 405, 413, 415, 422):
            raise errors.BadRequest(detail=detail, status=status)
        if status == 500 and any(
            s in low for s in ("unsupported", "invalid_request", "not supported", "upstream tts model failed")
        ):
            # The model refused what was asked (e.g. a voice it doesn't have): retrying won't help.
            raise errors.BadRequest(detail=detail, status=status)
        raise errors.Transient(detail=detail, status=status)

    def _classify_502(self, what: str, detail: str | None) -> errors.DeviceError:
        """502 everywhere = locked; 502 from one model while the system answers = early after a load."""
        if what.startswith("sys"):
            return errors.DeviceLocked(detail=detail, status=502)
        try:
            probe = self.request("GET", "/api/v1/sys/status", read=self.timeouts.probe)
        except errors.DeviceError:
            return errors.DeviceLocked(detail=detail, status=502)
        if probe.status_code == 502:
            return errors.DeviceLocked(detail=detail, status=502)
        return errors.Transient(
            "The model answered 502 (it may still be starting).", detail=detail, status=502
        )

    def _call(
        self,
        method: str,
        path: str,
        *,
        read: float | None = None,
        what: str = "",
        id_call: bool = False,
        **kw: Any,
    ) -> httpx.Response:
        resp = self.request(method, path, read=read or self.timeouts.manage, **kw)
        self._raise_for(resp, what=what or path, id_call=id_call)
        return resp

    def _get_json(self, path: str, *, read: float | None = None, what: str = "", **kw: Any) -> Any:
        return self.json(self._call("GET", path, read=read, what=what, **kw))

    def _post_json(
        self, path: str, body: Any = None, *, read: float | None = None, what: str = "", **kw: Any
    ) -> Any:
        resp = self._call("POST", path, json=body if body is not None else {}, read=read, what=what, **kw)
        return self.json(resp) if resp.content else {}

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
            return self._npu_units(raw)
        hw = self._get_json("/api/v1/npu/status", read=self.timeouts.probe)
        return self._npu_from_hardware(hw)

    @staticmethod
    def _npu_from_hardware(hw: dict) -> dict:
        dev = (hw.get("devices") or [{}])[0] if isinstance(hw, dict) else {}
        if isinstance(hw, dict) and "npu_total" in hw:  # the reference's unit view on this path
            return TiinyClient._npu_units(hw)
        mem_used, mem_total = _num(dev.get("mem_used_mb")), _num(dev.get("mem_total_mb"))
        used = round(100 * mem_used / mem_total) if mem_used is not None and mem_total else 0
        models = []
        for occ in (hw.get("occupants") or []) if isinstance(hw, dict) else []:
            for m in occ.get("activate_model") or []:
                models.append({"model_id": m, "npu_usage": None, "status": "running"})
        return {
            "total": 100,
            "used": used,
            "available": 100 - used,
            "models": models,
            "util": _num(dev.get("util_percent")),
            "mem_used_mb": mem_used,
            "mem_total_mb": mem_total,
        }

    @staticmethod
    def _npu_units(raw: dict) -> dict:
        """The unit-budget view (``npu_total/npu_used/npu_available``, or the same without the prefix)."""
        total = int(_num(raw.get("npu_total", raw.get("total"))) or 100)
        used = int(_num(raw.get("npu_used", raw.get("used"))) or 0)
        avail = _num(raw.get("npu_available", raw.get("available")))
        models = [
            {
                "model_id": m.get("model_id") or m.get("id"),
                "npu_usage": int(_num(m.get("npu_usage")) or 0),
                "status": m.get("status", "running"),
            }
            for m in raw.get("models") or []
        ]
        return {
            "total": total,
            "used": used,
            "available": int(avail) if avail is not None else total - used,
            "models": models,
            "util": _num(raw.get("util_percent")),
        }

    def reading(self, *, full: bool = True) -> Reading:
        """One metrics sample from ``sys/status`` (CPU, memory, NPU utilisation/memory). ``full`` adds the NPU
        unit view (units and the per-model list): a second request, so the poller asks for it only when the
        loaded models may have changed."""
        status = self.sys_status()
        npu = self.npu_status() if full else {}
        npus = status.get("npus") or [{}]
        n0 = npus[0] if npus else {}
        mem = status.get("memory") or {}
        cpu = status.get("cpu") or {}
        return Reading(
            npu_util=_num(n0.get("utilization_percent", n0.get("util_percent"))) if n0 else npu.get("util"),
            npu_mem_used_mb=_num(n0.get("memory_used_mb", npu.get("mem_used_mb"))),
            npu_mem_total_mb=_num(n0.get("memory_total_mb", npu.get("mem_total_mb"))),
            npu_units_used=npu.get("used"),
            npu_units_total=npu.get("total"),
            cpu_percent=_num(cpu.get("total_percent") if isinstance(cpu, dict) else cpu),
            mem_percent=_num(mem.get("usage_percent") if isinstance(mem, dict) else mem),
            models=npu.get("models") or [],
            full=full,
        )

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
        raw = self._get_json("/api/v1/models/", params={"including_downloading": "false"})
        rows = raw.get("data") or raw.get("models") or [] if isinstance(raw, dict) else raw
        out = []
        for r in rows or []:
            r = dict(r)
            r["id"] = str(r.get("model_id") or r.get("id") or r.get("fullname") or r.get("name"))
            out.append(r)
        return out

    def running(self) -> RunningModels:
        raw = self._get_json("/api/v1/models/running", read=self.timeouts.probe)
        if isinstance(raw, list):
            return RunningModels(running=_ids(raw))
        inst = raw.get("instances") if isinstance(raw.get("instances"), dict) else {}
        running = (
            _ids(raw.get("running") or []) or _ids(inst.get("running") or []) or _ids(raw.get("data") or [])
        )
        pending = _ids(raw.get("pending") or []) or _ids(inst.get("pending") or [])
        ports: dict[str, int] = {}
        usage: dict[str, int] = {}
        rows = (inst.get("running") or []) + (inst.get("pending") or [])
        rows += [r for r in (raw.get("running") or []) + (raw.get("pending") or []) if isinstance(r, dict)]
        for row in rows:
            key = row.get("model_id") or row.get("id")
            if not key:
                continue
            if row.get("port"):
                ports[str(key)] = int(row["port"])
            if (units := _num(row.get("npu_usage"))) is not None:
                usage[str(key)] = int(units)
        # A "running" entry whose status says loading is still pending.
        return RunningModels(
            running=list(dict.fromkeys(running)),
            pending=list(dict.fromkeys(pending)),
            ports=ports,
            usage=usage,
        )

    def unload_candidate(self, model_id: str) -> dict:
        """``{"unload_required": bool, "unload": [ids], "npu_required": int|None, "npu_available": int|None}``
        plus the raw answer under ``raw``."""
        raw = self._get_json(f"/api/v1/models/{mid(model_id)}/unload_candidate")
        ids: list[str] = []
        cand = raw.get("candidate") or raw.get("candidates")
        if isinstance(cand, dict):
            ids += _ids([cand])
        elif isinstance(cand, list):
            ids += _ids(cand)
        if isinstance(raw.get("model_id"), list):
            ids += _ids(raw["model_id"])
        target = raw.get("target_model") or {}
        required = _num(raw.get("npu_required", target.get("npu_usage")))
        available = _num(raw.get("npu_available"))
        return {
            "unload_required": bool(raw.get("unload_required")),
            "unload": list(dict.fromkeys(ids)),
            "npu_required": int(required) if required is not None else None,
            "npu_available": int(available) if available is not None else None,
            "raw": raw,
        }

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
        deadline_s: float = 600,
        sleep: Callable[[float], None] | None = None,
        settle: bool = True,
        launch_attempts: int = 3,
    ) -> LoadResult:
        """Make ``model_id`` running, evicting what must go. Steps:

        1. Already in ``running`` → done. In ``pending`` → just wait for it.
        2. Ask ``unload_candidate``. When the device says unload, exactly the models it names go.
        3. Only when the NPU would still be left nearly full after that (available + freed − needed <
           NPU_MARGIN) are more models evicted, largest first, until the margin holds: on a nearly full NPU the
           device answers "fits" and then never starts the load (reference quirks, "fake fit").
           ``foreign_models_ok=False`` evicts every other running model regardless (exclusive use).
        4. ``polite=True``: if a model to evict is not in ``hub_models`` (someone else loaded it), raise
           ``PoliteRefusal`` before touching anything.
        5. Launch; a 409 ``cleanup_failed`` is retried (the device says so).
        6. Read ``running`` until the model is there or ``deadline_s`` passes: sparse far from the load's
           expected end, every ``poll_interval`` near it (``_load_wait``; the reference's launch stream is only
           seen in the vendor app, frame shape unknown, so it is not used). If the model drops out of
           ``pending`` without becoming running (a silently rolled-back load), unload everything and launch once
           more.
        7. ``settle``: wait out the documented readiness window (``load_grace_s``, "xh2a … wait ~10 s") counted
           from the moment the model became ready, not from when it was noticed. Without ``settle`` the caller
           sends at once and retries within the window (``LoadResult.ready_at`` says when it started).
        """
        sleep = sleep or self.sleep
        hub = set(hub_models)
        state = self.running()
        if model_id in state.running:
            return LoadResult(already_loaded=True, state=state)
        result = LoadResult(already_loaded=False)
        started = self.clock.monotonic()
        if model_id not in state.pending:
            result.evicted = self._make_room(
                model_id, state, polite=polite, hub=hub, foreign_models_ok=foreign_models_ok
            )
            result.launch_attempts = self._launch_with_retry(model_id, launch_attempts, sleep)
        relaunched = False
        slept = 0.0
        launched = last_pending = self.clock.monotonic()
        if result.launch_attempts:
            # A load is never over the moment it was launched: the first read waits a poll (one request less).
            sleep(self.poll_interval)
            slept += self.poll_interval
        while True:
            state = self.running()
            seen = self.clock.monotonic()
            if model_id in state.running:
                result.ready_at = (last_pending + seen) / 2
                if result.launch_attempts and self.on_loaded is not None:
                    self.on_loaded(model_id, max(0.0, result.ready_at - launched))
                break
            last_pending = seen
            if model_id not in state.pending and result.launch_attempts and slept > 0:
                if relaunched:
                    raise errors.Transient("The device dropped the model load twice.", detail=model_id)
                # Rolled back silently: the fit answer was wrong. Clear the NPU and try once more.
                relaunched = True
                logger.info("load of %s vanished; unloading everything and relaunching", model_id)
                others = [m for m in state.running if m != model_id]
                if polite and any(m not in hub for m in others):
                    raise errors.PoliteRefusal(blocking=[m for m in others if m not in hub], detail=model_id)
                self.unload_all()
                result.evicted += [m for m in others if m not in result.evicted]
                result.launch_attempts += self._launch_with_retry(model_id, launch_attempts, sleep)
                launched = self.clock.monotonic()
            waited = max(slept, self.clock.monotonic() - started)
            if waited >= deadline_s:
                raise errors.LoadTimeout(detail=f"{model_id} not running after {waited:.0f}s")
            wait = self._load_wait(model_id, max(0.0, self.clock.monotonic() - launched))
            sleep(wait)
            slept += wait
        result.waited_s = max(slept, self.clock.monotonic() - started)
        result.state = state
        if settle and self.load_grace_s:
            left = self.load_grace_s - (self.clock.monotonic() - result.ready_at)
            if left > 0:
                sleep(left)
        return result

    def _load_wait(self, model_id: str, elapsed: float) -> float:
        """The wait before the next read of ``running``, ``elapsed`` seconds after the launch: the render rule
        (``jobs.engine``) for a load. Never longer than half the time the load has taken so far (an end far
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
        """What to unload before launching ``model_id``, unloaded here: one ``stop`` per model, and ``unload_all``
        only when every running model goes anyway (never for models the device did not name, unless the
        margin needs them). Returns the evicted ids."""
        others = [m for m in state.running + state.pending if m != model_id]
        if not others:
            # Nothing else is loaded or loading: nothing can be unloaded, whatever the fit test would answer (an
            # empty NPU is no "fake fit"), so it is not asked.
            return []
        if not foreign_models_ok:
            evict = others
        else:
            cand = self.unload_candidate(model_id)
            evict = [m for m in cand["unload"] if m != model_id] if cand["unload_required"] else []
            if cand["unload_required"] and not evict:
                evict = others  # the device said "unload" without naming whom
            needed, available = cand["npu_required"], cand["npu_available"]
            costs = dict(state.usage)
            if needed is None or available is None or any(m not in costs for m in others):
                npu = self.npu_status()
                available = npu["available"] if available is None else available
                costs = {**{m["model_id"]: m["npu_usage"] or 0 for m in npu["models"]}, **costs}
                if needed is None:
                    row = next((m for m in self.models() if m["id"] == model_id), {})
                    needed = int(_num(row.get("npu_usage")) or 0)
            # The fake-fit margin, only when the NPU would still be nearly full once the named models are gone.
            freed = available + sum(costs.get(m, 0) for m in evict)
            for m in sorted((m for m in others if m not in evict), key=lambda x: -costs.get(x, 0)):
                if freed - needed >= NPU_MARGIN:
                    break
                evict.append(m)
                freed += costs.get(m, 0)
        evict = [m for m in dict.fromkeys(evict) if m != model_id]
        if polite and (foreign := [m for m in evict if m not in hub]):
            raise errors.PoliteRefusal(blocking=foreign, detail=f"{model_id} needs room")
        if evict and set(others) <= set(evict):
            self.unload_all()  # everything goes anyway: one fast call instead of a (slow) stop per model
        else:
            for m in evict:
                self.stop(m)
        return evict

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

    def with_load_grace(self, fn: Callable[[], T], *, attempts: int = 4, wait_s: float | None = None) -> T:
        """Run the first inference after a load; retry ``xh2a backend fail`` / early 502 (``Transient``)."""
        return retry_call(
            fn,
            retry_on=(errors.Transient,),
            attempts=attempts,
            wait_s=self.load_grace_s if wait_s is None else wait_s,
            sleep=self.sleep,
        )

    # -- capabilities ------------------------------------------------------------------------------------
    def capabilities(self, previous: Capabilities | None = None) -> Capabilities:
        """Installed and running models with NPU cost, video options per video model, voices, 3D stages."""
        rows = self.models()
        state = self.running()
        npu = self.npu_status()
        costs = {m["model_id"]: m["npu_usage"] for m in npu["models"]}
        caps = Capabilities(kind="tiiny", npu_total=npu["total"], npu_available=npu["available"])
        for r in rows:
            usage = _num(r.get("npu_usage"))
            loaded = r["id"] in state.running or r.get("status") == "running"
            caps.models.append(
                ModelCap(
                    id=r["id"],
                    name=str(r.get("display_name") or r.get("name") or r["id"]).strip(),
                    kind=model_kind(r),
                    type=str(r.get("type") or ""),
                    npu_usage=int(usage) if usage is not None else costs.get(r["id"]),
                    loaded=loaded,
                    status="running" if loaded else str(r.get("status") or ""),
                    load_s=_num(r.get("load_time")),
                )
            )
        for m in caps.models_of_kind("video"):
            caps.video[m.id] = self._video_cap(m, previous)
        if any(m.loaded for m in caps.models_of_kind("3d")):
            try:
                caps.stages_3d = stages_from_3d_caps(self.capabilities_3d())
            except (errors.BadRequest, errors.ModelNotLoaded, errors.Transient, errors.NotFound):
                caps.stages_3d = stages_from_3d_caps(None)
        elif caps.models_of_kind("3d"):
            caps.stages_3d = (
                previous.stages_3d if previous and previous.stages_3d else stages_from_3d_caps(None)
            )
        try:
            info = self.device_info()
            caps.versions = {
                k: str(info[k])
                for k in ("tiiny_os", "version", "device_name", "device_model_name")
                if info.get(k)
            }
        except (errors.BadRequest, errors.NotFound, errors.Transient):
            pass
        try:
            caps.vault = vault_cap(self.memory_schedule(), self.memory_model())
        except errors.Transient:
            if previous is not None:
                caps.vault = previous.vault
        return caps

    def _video_cap(self, m: ModelCap, previous: Capabilities | None) -> VideoCap:
        if m.loaded:
            try:
                return video_cap_from_info(m.id, self.video_info(m.id))
            except (errors.BadRequest, errors.ModelNotLoaded, errors.Transient, errors.NotFound):
                pass
        if previous and (old := previous.video_for(m.id)):
            old.source = "previous"
            return old
        return reference_video_cap(m.id) or VideoCap(m.id, [], [], 0, 24, source="unknown")

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

    # -- video (poll style) ------------------------------------------------------------------------------
    def video_info(self, model_id: str) -> dict:
        return self._get_json("/v1/video/info", params={"model": model_id})

    def video_create(
        self,
        *,
        model: str,
        prompt: str,
        size: str,
        seconds: int | str,
        steps: int | None = None,
        seed: int | None = None,
        image: str | None = None,
    ) -> dict:
        """Submit a render; ``image`` is a start frame as a data URI. Returns ``{"id", "status", ...}``."""
        body: dict[str, Any] = {"model": model, "prompt": prompt, "size": size, "seconds": str(seconds)}
        if steps is not None:
            body["steps"] = steps
        if seed is not None:
            body["seed"] = seed
        if image:
            body["image"] = image
        return self._post_json("/v1/videos", body, read=self.timeouts.submit)

    def video_list(self) -> list[dict]:
        """The device's video jobs (the job engine looks here for a render it lost track of in a crash)."""
        raw = self._get_json("/v1/videos")
        return raw.get("data", []) if isinstance(raw, dict) else list(raw or [])

    def video_get(self, video_id: str) -> dict:
        return self._get_json(f"/v1/videos/{quote(video_id, safe='')}", id_call=True)

    def video_delete(self, video_id: str) -> dict:
        """Deletes the job record. On the device this does not stop a running render; stop the model for that."""
        resp = self._call("DELETE", f"/v1/videos/{quote(video_id, safe='')}", id_call=True)
        return self.json(resp) if resp.content else {}

    def video_download(self, video_id: str, dest: Path) -> int:
        return self._download(f"/v1/videos/{quote(video_id, safe='')}/content", dest)

    @staticmethod
    def video_failure(video: dict) -> errors.DeviceError:
        """The typed error for a ``failed`` video (``GENERATION_TIMEOUT`` → ``GenerationTimeout``)."""
        err = video.get("error") or {}
        code = str(err.get("code") or "") if isinstance(err, dict) else ""
        msg = (err.get("message") if isinstance(err, dict) else str(err)) or "The render failed."
        if code.upper() == "GENERATION_TIMEOUT":
            return errors.GenerationTimeout(detail=msg)
        if "bucket" in msg.lower() or "canvas" in msg.lower():
            return errors.BadRequest(detail=msg)
        return errors.BadRequest("The device reported the render as failed.", detail=msg)

    # -- 3D (poll style) ---------------------------------------------------------------------------------
    def capabilities_3d(self) -> dict:
        return self._get_json("/v1/3d/capabilities")

    def task3d_create(self, *, stage: str, params: dict, files: dict[str, tuple[str, bytes, str]]) -> dict:
        import json as _json

        if stage == "background":
            raise errors.BadRequest("The background stage is broken on the device.", detail=stage)
        data = {"stage": stage, "params": _json.dumps(params)}
        resp = self._call("POST", "/v1/3d/tasks", data=data, files=files or None, read=self.timeouts.submit)
        return self.json(resp)

    def task3d_list(self) -> list[dict]:
        """The device's 3D stage tasks (for crash recovery, like ``video_list``)."""
        raw = self._get_json("/v1/3d/tasks")
        return raw.get("tasks", raw.get("data", [])) if isinstance(raw, dict) else list(raw or [])

    def task3d_get(self, task_id: str) -> dict:
        return self._get_json(f"/v1/3d/tasks/{quote(task_id, safe='')}", id_call=True)

    def task3d_cancel(self, task_id: str) -> dict:
        return self._post_json(f"/v1/3d/tasks/{quote(task_id, safe='')}/cancel", id_call=True)

    def task3d_download(self, task_id_or_url: str, dest: Path) -> int:
        """A task's result: an artifact URL/path given by the device, or the task id (``/artifacts``)."""
        if "/" in task_id_or_url:
            return self._download(self.resolve_own(task_id_or_url), dest)
        return self._download(f"/v1/3d/tasks/{quote(task_id_or_url, safe='')}/artifacts", dest)

    # -- blocking ----------------------------------------------------------------------------------------
    def image_generate(
        self,
        *,
        model: str,
        prompt: str,
        size: str,
        seed: int | None = None,
        steps: int | None = None,
        negative_prompt: str | None = None,
        guidance_scale: float | None = None,
        image: str | None = None,
        timeout: float,
    ) -> bytes:
        """One PNG (the device makes one image per request). ``image`` = a data URI for an edit."""
        body: dict[str, Any] = {
            "model": model,
            "prompt": prompt,
            "size": size,
            "n": 1,
            "response_format": "b64_json",
        }
        for k, v in (
            ("seed", seed),
            ("steps", steps),
            ("negative_prompt", negative_prompt),
            ("guidance_scale", guidance_scale),
            ("image", image),
        ):
            if v is not None:
                body[k] = v
        out = self._post_json("/v1/images/generations", body, read=timeout)
        row = (out.get("data") or [{}])[0]
        if row.get("b64_json"):
            return base64.b64decode(row["b64_json"])
        if row.get("url"):
            return self._fetch_bytes(self.resolve_own(row["url"]), read=timeout)
        raise errors.Transient("The device returned no image.", detail=self.scrub(str(out)[:200]))

    def speech(
        self,
        *,
        model: str,
        input: str,
        voice: str | None = None,
        instruct: str | None = None,
        ref_audio: str | None = None,
        ref_text: str | None = None,
        language: str | None = None,
        response_format: str = "wav",
        timeout: float,
    ) -> bytes:
        body: dict[str, Any] = {"model": model, "input": input, "response_format": response_format}
        for k, v in (
            ("voice", voice),
            ("instruct", instruct),
            ("ref_audio", ref_audio),
            ("ref_text", ref_text),
            ("language", language),
        ):
            if v is not None:
                body[k] = v
        resp = self._call("POST", "/v1/audio/speech", json=body, read=timeout)
        return self._audio_bytes(resp)

    def music_wav(
        self,
        *,
        model: str,
        prompt: str,
        seconds: float,
        steps: int,
        cfg_scale: float,
        seed: int | None,
        timeout: float,
    ) -> bytes:
        """Foundation-1 loop: ``/v1/music/generate/wav`` with ``{model, prompt, config}``."""
        config: dict[str, Any] = {"seconds_total": seconds, "steps": steps, "cfg_scale": cfg_scale}
        if seed is not None:
            config["seed"] = seed
        resp = self._call(
            "POST",
            "/v1/music/generate/wav",
            json={"model": model, "prompt": prompt, "config": config},
            read=timeout,
        )
        return self._audio_bytes(resp)

    def song_preview(
        self,
        *,
        model: str,
        caption: str,
        lyrics: str,
        generation_type: str,
        seconds_total: float,
        preview_seconds: float,
        timeout: float,
    ) -> dict:
        """SongGeneration step 1. Everything goes inside ``config`` (top-level extras are refused)."""
        config = {
            "caption": caption,
            "generation_type": generation_type,
            "seconds_total": seconds_total,
            "preview_seconds": preview_seconds,
        }
        if lyrics:
            config["lyrics"] = lyrics
        return self._music_json("/v1/music/generate/preview", {"model": model, "config": config}, timeout)

    def song_resume(self, *, model: str, session_id: str, config: dict, timeout: float) -> dict:
        return self._music_json(
            "/v1/music/generate/resume", {"model": model, "session_id": session_id, "config": config}, timeout
        )

    def song_download(self, session_id: str, fmt: str = "mp3") -> bytes:
        return self._fetch_bytes(
            f"/v1/music/sessions/{quote(session_id, safe='')}/download",
            read=self.timeouts.download,
            params={"format": fmt},
            id_call=True,
        )

    def music_info(self) -> dict:
        return self._get_json("/v1/music/info")

    # -- internals ---------------------------------------------------------------------------------------
    def _music_json(self, path: str, body: dict, timeout: float) -> dict:
        out = self._post_json(path, body, read=timeout, id_call=True)
        if isinstance(out, dict) and out.get("success") is False:
            code = str(out.get("error_code") or "")
            cls = errors.NotFound if code == "SESSION_NOT_FOUND" else errors.BadRequest
            raise cls(detail=self.scrub(json_error_text(out)))
        return out

    def _audio_bytes(self, resp: httpx.Response) -> bytes:
        ctype = resp.headers.get("content-type", "")
        if ctype.startswith("application/json"):
            out = self.json(resp)
            if out.get("success") is False:
                raise errors.BadRequest(detail=self.scrub(json_error_text(out)))
            data = out.get("audio_data") or out.get("audio")
            if not data:
                raise errors.Transient("The device returned no audio.", detail=self.scrub(str(out)[:200]))
            return base64.b64decode(data)
        return resp.content

    def _fetch_bytes(self, path: str, *, read: float, id_call: bool = False, **kw: Any) -> bytes:
        return self._call("GET", path, read=read, id_call=id_call, **kw).content

    def _download(self, path: str, dest: Path) -> int:
        with self.stream("GET", path, read=self.timeouts.download) as resp:
            if resp.status_code >= 300:
                resp.read()
                self._raise_for(resp, what=path, id_call=True)
            return self.save_stream(resp, dest)

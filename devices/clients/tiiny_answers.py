"""The Tiiny's answers read into the hub's shapes: running models, NPU units, fit answers, model rows, metrics.

Pure (no I/O): ``TiinyClient`` asks, these read. Each tolerates both the reference's shapes and the older ones
from the field notes (``running`` as strings vs ``instances``; the unit view vs the hardware view of the NPU).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from devices.capabilities import ModelCap, model_kind


@dataclass
class RunningModels:
    running: list[str] = field(default_factory=list)
    pending: list[str] = field(default_factory=list)
    ports: dict[str, int] = field(default_factory=dict)
    usage: dict[str, int] = field(default_factory=dict)  # NPU units per model, when the device says
    #: What tells one running instance of a model from the next (its port, launch time, instance id, as far as
    #: the device says them): a model the hub loaded that runs as another instance was loaded again since (a
    #: restart, someone else), and is no longer the hub's (``replaced``).
    instances: dict[str, dict[str, str]] = field(default_factory=dict)

    def loaded_rows(self) -> list[dict[str, Any]]:
        """The same rows the NPU unit view gives (``Device.loaded_models``), from this one read."""
        rows = [{"model_id": m, "npu_usage": self.usage.get(m), "status": "running"} for m in self.running]
        return rows + [
            {"model_id": m, "npu_usage": self.usage.get(m), "status": "loading"} for m in self.pending
        ]


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


def ids_in(items: Iterable[Any]) -> list[str]:
    """Model ids from a list of ids or of rows (``model_id``, ``id`` or ``name``)."""
    out = []
    for it in items or []:
        if isinstance(it, str):
            out.append(it)
        elif isinstance(it, dict):
            v = it.get("model_id") or it.get("id") or it.get("name")
            if v:
                out.append(str(v))
    return out


def num(v: Any) -> float | None:
    """A number from whatever the device sent (None for nothing or garbage)."""
    try:
        return None if v is None else float(v)
    except (TypeError, ValueError):
        return None


# -- models --------------------------------------------------------------------------------------------------
def running_from(raw: Any) -> RunningModels:
    """``/api/v1/models/running``: a list of ids, ``{"running", "pending"}`` (ids or rows), ``{"instances":
    {"running", "pending"}}`` (rows with ports and NPU units) or ``{"data"}``."""
    if isinstance(raw, list):
        return RunningModels(running=ids_in(raw))
    inst = raw.get("instances") if isinstance(raw.get("instances"), dict) else {}
    running = _first_ids(raw.get("running"), inst.get("running"), raw.get("data"))
    pending = _first_ids(raw.get("pending"), inst.get("pending"))
    rows = _rows(raw, inst)
    ports, usage = _ports_and_units(rows)
    return RunningModels(
        running=list(dict.fromkeys(running)),
        pending=list(dict.fromkeys(pending)),
        ports=ports,
        usage=usage,
        instances=_instances(rows, set(running)),
    )


INSTANCE_KEYS = ("port", "created_at", "instance_id")


def _instances(rows: list[dict[str, Any]], running: set[str]) -> dict[str, dict[str, str]]:
    """Each running model's instance marks (the first row that names the model and any of them)."""
    out: dict[str, dict[str, str]] = {}
    for row in rows:
        key = str(row.get("model_id") or row.get("id") or "")
        marks = {k: str(row[k]) for k in INSTANCE_KEYS if row.get(k) not in (None, "")}
        if key in running and marks and key not in out:
            out[key] = marks
    return out


def replaced(before: dict[str, str] | None, now: dict[str, str] | None) -> bool:
    """True when the instance the hub noted (``before``) is not the one running (``now``): a mark both name
    differs. Nothing to compare (an old note, a device that names no marks) is not a replacement."""
    if not before or not now:
        return False
    return any(k in before and k in now and before[k] != now[k] for k in INSTANCE_KEYS)


def _first_ids(*lists: Any) -> list[str]:
    """The ids of the first of these lists that names any."""
    for items in lists:
        if ids := ids_in(items or []):
            return ids
    return []


def _rows(raw: dict[str, Any], inst: dict[str, Any]) -> list[dict[str, Any]]:
    """The entries of both shapes that are rows (they may carry a port and NPU units), the instances' first."""
    rows = (inst.get("running") or []) + (inst.get("pending") or [])
    return rows + [r for r in (raw.get("running") or []) + (raw.get("pending") or []) if isinstance(r, dict)]


def _ports_and_units(rows: list[dict[str, Any]]) -> tuple[dict[str, int], dict[str, int]]:
    """Port and NPU units per model id, from the rows that say them."""
    ports: dict[str, int] = {}
    usage: dict[str, int] = {}
    for row in rows:
        key = row.get("model_id") or row.get("id")
        if not key:
            continue
        if row.get("port"):
            ports[str(key)] = int(row["port"])
        if (units := num(row.get("npu_usage"))) is not None:
            usage[str(key)] = int(units)
    return ports, usage


def unload_candidate_from(raw: dict[str, Any]) -> dict[str, Any]:
    """``{"unload_required": bool, "unload": [ids], "npu_required": int|None, "npu_available": int|None}``
    plus the raw answer under ``raw``."""
    ids: list[str] = []
    cand = raw.get("candidate") or raw.get("candidates")
    if isinstance(cand, dict):
        ids += ids_in([cand])
    elif isinstance(cand, list):
        ids += ids_in(cand)
    if isinstance(raw.get("model_id"), list):
        ids += ids_in(raw["model_id"])
    target = raw.get("target_model") or {}
    required = num(raw.get("npu_required", target.get("npu_usage")))
    available = num(raw.get("npu_available"))
    return {
        "unload_required": bool(raw.get("unload_required")),
        "unload": list(dict.fromkeys(ids)),
        "npu_required": int(required) if required is not None else None,
        "npu_available": int(available) if available is not None else None,
        "raw": raw,
    }


def model_rows(raw: Any) -> list[dict[str, Any]]:
    """The installed models (``/api/v1/models/``), each given an ``id``."""
    rows = raw.get("data") or raw.get("models") or [] if isinstance(raw, dict) else raw
    out = []
    for r in rows or []:
        r = dict(r)
        r["id"] = str(r.get("model_id") or r.get("id") or r.get("fullname") or r.get("name"))
        out.append(r)
    return out


def model_units(rows: list[dict[str, Any]], model_id: str) -> int:
    """The NPU units a model takes, as the installed-models list says (0 when it doesn't)."""
    row = next((m for m in rows if m["id"] == model_id), {})
    return int(num(row.get("npu_usage")) or 0)


def model_cap(row: dict[str, Any], running: list[str], costs: dict[str, Any]) -> ModelCap:
    """One installed model for ``Capabilities``; its NPU cost from the NPU view (``costs``) when the row has none."""
    usage = num(row.get("npu_usage"))
    loaded = row["id"] in running or row.get("status") == "running"
    return ModelCap(
        id=row["id"],
        name=str(row.get("display_name") or row.get("name") or row["id"]).strip(),
        kind=model_kind(row),
        type=str(row.get("type") or ""),
        npu_usage=int(usage) if usage is not None else costs.get(row["id"]),
        loaded=loaded,
        status="running" if loaded else str(row.get("status") or ""),
        load_s=num(row.get("load_time")),
    )


def versions_from(info: dict[str, Any]) -> dict[str, str]:
    """The firmware and device names ``/api/v1/sys/device_info`` gives."""
    return {
        k: str(info[k]) for k in ("tiiny_os", "version", "device_name", "device_model_name") if info.get(k)
    }


# -- NPU and metrics -----------------------------------------------------------------------------------------
def npu_units(raw: dict) -> dict:
    """The unit-budget view (``npu_total/npu_used/npu_available``, or the same without the prefix)."""
    total = int(num(raw.get("npu_total", raw.get("total"))) or 100)
    used = int(num(raw.get("npu_used", raw.get("used"))) or 0)
    avail = num(raw.get("npu_available", raw.get("available")))
    models = [
        {
            "model_id": m.get("model_id") or m.get("id"),
            "npu_usage": int(num(m.get("npu_usage")) or 0),
            "status": m.get("status", "running"),
        }
        for m in raw.get("models") or []
    ]
    return {
        "total": total,
        "used": used,
        "available": int(avail) if avail is not None else total - used,
        "models": models,
        "util": num(raw.get("util_percent")),
    }


def npu_from_hardware(hw: dict) -> dict:
    """The hardware view (``/api/v1/npu/status``: memory per NPU, occupants) as units: used = memory share."""
    dev = (hw.get("devices") or [{}])[0] if isinstance(hw, dict) else {}
    if isinstance(hw, dict) and "npu_total" in hw:  # the reference's unit view on this path
        return npu_units(hw)
    mem_used, mem_total = num(dev.get("mem_used_mb")), num(dev.get("mem_total_mb"))
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
        "util": num(dev.get("util_percent")),
        "mem_used_mb": mem_used,
        "mem_total_mb": mem_total,
    }


def reading_from(status: dict, npu: dict, *, full: bool) -> Reading:
    """One metrics sample from ``sys/status`` and (``full``) the NPU unit view (``{}`` when not read)."""
    npus = status.get("npus") or [{}]
    n0 = npus[0] if npus else {}
    mem = status.get("memory") or {}
    cpu = status.get("cpu") or {}
    return Reading(
        npu_util=num(n0.get("utilization_percent", n0.get("util_percent"))) if n0 else npu.get("util"),
        npu_mem_used_mb=num(n0.get("memory_used_mb", npu.get("mem_used_mb"))),
        npu_mem_total_mb=num(n0.get("memory_total_mb", npu.get("mem_total_mb"))),
        npu_units_used=npu.get("used"),
        npu_units_total=npu.get("total"),
        cpu_percent=num(cpu.get("total_percent") if isinstance(cpu, dict) else cpu),
        mem_percent=num(mem.get("usage_percent") if isinstance(mem, dict) else mem),
        models=npu.get("models") or [],
        full=full,
    )

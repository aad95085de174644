"""Reads for pages, pushes and the job engine (no device I/O: pages show what the poller stored)."""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from django.core.exceptions import PermissionDenied, ValidationError
from django.db.models import QuerySet
from django.shortcuts import get_object_or_404

from devices.capabilities import Capabilities
from devices.models import Device


def device_list_for(user: Any) -> QuerySet[Device]:
    """Every signed-in person sees every device (state, models, metrics); URLs and edits are for admins.

    The default device first (it is where a new job goes), then by name.
    """
    return Device.objects.defer("api_key_encrypted", "capabilities").order_by("-is_default", "name")


def devices_named_for(user: Any, names: list[str]) -> dict[str, int]:
    """Name -> id of the devices ``user`` may use with these names (any case); ValidationError naming the first
    unknown one (a token bound to devices: ``hub.accounts.tokens``)."""
    usable = {d.name.casefold(): d for d in device_list_for(user).only("pk", "name")}
    found: dict[str, int] = {}
    for name in names:
        device = usable.get(name.strip().casefold())
        if device is None:
            known = ", ".join(sorted(d.name for d in usable.values())) or "none yet"
            raise ValidationError(f"No device is called “{name.strip()}”; the devices are: {known}.")
        found[device.name] = device.pk
    return found


def device_names_for(user: Any) -> list[str]:
    """The names of the devices ``user`` may use, in the order the pages list them."""
    return list(device_list_for(user).values_list("name", flat=True))


def device_names(ids: Iterable[int]) -> dict[int, str]:
    """Id -> name of the devices among ``ids`` that exist."""
    return dict(Device.objects.filter(pk__in=list(ids)).values_list("pk", "name"))


def device_get_for(user: Any, device_id: int | str) -> Device:
    if not getattr(user, "is_authenticated", False):
        raise PermissionDenied
    return get_object_or_404(Device, pk=device_id)


def device_default() -> Device | None:
    return Device.objects.filter(is_default=True).first() or Device.objects.order_by("pk").first()


def device_capabilities(device: Device) -> Capabilities:
    return Capabilities.from_dict(device.capabilities)


#: Weight files a TensorSharp server names its models by (``/api/models`` lists file names).
_WEIGHT_FILE = re.compile(r"\.(gguf|safetensors|bin|ckpt|pt|pth|onnx)$", re.IGNORECASE)
#: A quantisation suffix such as -Q4_K_M, .Q8_0, -F16, -BF16, -IQ3_XS.
_QUANT = re.compile(r"[-_.]((?:I?Q\d[\w]*)|(?:B?F(?:16|32))|(?:FP8))$", re.IGNORECASE)


def model_label(model_id: str) -> str:
    """A model's readable name: a Tiiny model's name after its publisher ("MiniMaxAI/MiniMax-H3-Turbo" ->
    "MiniMax-H3-Turbo"); a TensorSharp weight file without extension and with its quantisation apart
    ("minimax_h3_fl2va_pruned-Q4_K.gguf" -> "Minimax h3 fl2va pruned (Q4_K)", "h3.gguf" -> "H3").
    The full id stays in the pages' ``title`` attribute.
    """
    name = str(model_id or "").replace("\\", "/").rsplit("/", 1)[-1]
    if not _WEIGHT_FILE.search(name):
        return name or str(model_id or "")
    stem = _WEIGHT_FILE.sub("", name)
    quant = _QUANT.search(stem)
    if quant and quant.start() > 0:
        stem, level = stem[: quant.start()], quant.group(1)
    else:
        level = ""
    words = " ".join(stem.replace("_", " ").split()) or name
    if words.islower():  # "h3" -> "H3"; a name that has its own capitals keeps them
        words = words[0].upper() + words[1:]
    return f"{words} ({level})" if level else words


@dataclass(frozen=True)
class ModelRow:
    """One line of the device page's capability table."""

    model_id: str
    name: str
    kind: str
    npu_usage: int | None
    loaded: str  # "yes", "loading" or "" (not loaded), from the latest reading


def device_model_rows(device: Device, caps: Capabilities | None = None) -> list[ModelRow]:
    """The installed models with "Loaded" from the latest reading (``Device.loaded_models``, what the device says
    runs now), not from the capability snapshot, which is only re-read when the loaded set changes."""
    caps = caps if caps is not None else device_capabilities(device)
    now = {
        str(r.get("model_id") or ""): str(r.get("status") or "running") for r in device.loaded_models or []
    }
    rows = []
    for m in caps.models:
        status = now.get(m.id)
        loaded = "" if status is None else ("yes" if status == "running" else status)
        rows.append(ModelRow(m.id, model_label(m.id), m.kind, m.npu_usage, loaded))
    return rows


@dataclass(frozen=True)
class LoadedModel:
    model_id: str
    name: str
    npu_usage: int | None
    share: float | None  # percent of the NPU budget
    status: str
    by_hub: bool


def device_loaded_models(device: Device) -> list[LoadedModel]:
    total = device.npu_units_total or 100
    out = []
    for row in device.loaded_models or []:
        mid = str(row.get("model_id") or "")
        if not mid:
            continue
        usage = row.get("npu_usage")
        out.append(
            LoadedModel(
                mid,
                model_label(mid),
                usage,
                round(100 * usage / total, 1) if usage is not None else None,
                str(row.get("status") or "running"),
                mid in (device.hub_loaded_models or []),
            )
        )
    return out


def gauge(value: float | None, total: float | None = 100.0) -> dict[str, Any]:
    """A meter's numbers: ``{"value", "max", "pct"}`` or ``{"value": None}`` when unknown."""
    if value is None or not total:
        return {"value": None, "max": total or 100, "pct": None}
    return {"value": round(value, 1), "max": round(total, 1), "pct": round(100 * value / total)}


def device_gauges(device: Device) -> dict[str, dict[str, Any]]:
    return {
        "npu_util": gauge(device.npu_util),
        "npu_mem": gauge(device.npu_mem_used_mb, device.npu_mem_total_mb),
        "cpu": gauge(device.cpu_percent),
        "mem": gauge(device.mem_percent),
    }

"""Reads for pages, pushes and the job engine (no device I/O: pages show what the poller stored)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from django.db.models import QuerySet
from django.shortcuts import get_object_or_404

from devices.capabilities import Capabilities
from devices.models import Device


def device_list_for(user: Any) -> QuerySet[Device]:
    """Every signed-in person sees every device (state, models, metrics); URLs and edits are for admins."""
    return Device.objects.defer("api_key_encrypted", "capabilities").order_by("name")


def device_get_for(user: Any, device_id: int | str) -> Device:
    if not getattr(user, "is_authenticated", False):
        from django.core.exceptions import PermissionDenied

        raise PermissionDenied
    return get_object_or_404(Device, pk=device_id)


def device_default() -> Device | None:
    return Device.objects.filter(is_default=True).first() or Device.objects.order_by("pk").first()


def device_capabilities(device: Device) -> Capabilities:
    return Capabilities.from_dict(device.capabilities)


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
                mid.rsplit("/", 1)[-1],
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

"""REST routes for devices (``/api/devices``): list, get, capabilities, current metrics, metric history.

What the pages show, from what the poller stored (no device I/O from a request). Everyone signed in sees
every device; the device's address is for admins only, and its API key is never part of any answer.
"""

from __future__ import annotations

import datetime as dt
from typing import Any

from django.http import Http404, HttpRequest
from django.urls import reverse
from django.utils import timezone
from ninja import Query, Router

from devices import hooks
from devices.capabilities import voices_for_model
from devices.metrics import RES_5M, RES_10S
from devices.models import Device, DeviceMetric
from devices.schemas import CapabilitiesOut, DeviceOut, MetricHistoryOut, MetricsOut
from devices.selectors import device_capabilities, device_gauges, device_list_for, device_loaded_models
from hub.accounts.groups import allowance_for
from hub.api_auth import require_scope
from hub.api_errors import ERRORS
from hub.parsing import parse_id

router = Router(tags=["devices"])

MAX_HISTORY_HOURS = 30 * 24  # what the 5-minute points keep
FINE_UP_TO_HOURS = 6  # 10-second points up to this span (at most 2,160), 5-minute points beyond


def _device(request: HttpRequest, device_id: str) -> Device:
    pk = parse_id(device_id)
    device = Device.objects.filter(pk=pk).first() if pk is not None else None
    if device is None:
        raise Http404("No such device.")
    return device


def _loaded(device: Device) -> list[dict[str, Any]]:
    return [m.__dict__ for m in device_loaded_models(device)]


def device_out(request: HttpRequest, device: Device) -> dict[str, Any]:
    return {
        "id": device.pk,
        "name": device.name,
        "kind": device.kind,
        "usable": allowance_for(request.user).device_ok(device.pk),
        "kind_label": device.get_kind_display(),
        "state": device.state,
        "state_label": device.get_state_display(),
        "state_message": device.state_message,
        "state_fix": device.state_fix,
        "state_changed_at": device.state_changed_at,
        "last_seen": device.last_seen,
        "versions": device.versions or {},
        "is_default": device.is_default,
        "queue_paused": device.queue_paused,
        "night_start": device.night_start,
        "night_end": device.night_end,
        "time_zone": device.time_zone,
        "loaded_models": _loaded(device),
        # Only admins may add or change device addresses, so only they see them (as on the pages).
        "url": device.base_url if getattr(request.user, "is_admin", False) else None,
        "api_url": request.build_absolute_uri(reverse("api:device_get", args=[device.pk])),
    }


@router.get("", url_name="device_list", response={200: list[DeviceOut], **ERRORS}, summary="List devices")
def device_list(request: HttpRequest):
    require_scope(request, "read")
    return [device_out(request, d) for d in device_list_for(request.user)]


@router.get(
    "/{device_id}", url_name="device_get", response={200: DeviceOut, **ERRORS}, summary="Get a device"
)
def device_get(request: HttpRequest, device_id: str):
    require_scope(request, "read")
    return device_out(request, _device(request, device_id))


@router.get(
    "/{device_id}/capabilities",
    url_name="device_capabilities",
    response={200: CapabilitiesOut, **ERRORS},
    summary="What a device can do",
)
def device_caps(request: HttpRequest, device_id: str):
    """Its models, video options (canvases, steps, max seconds), 3D stages, voices per speech model, and the
    job kinds `POST /api/jobs` accepts for it now (as the device last reported them). A person in a group that
    limits what they use sees only the models and kinds they may use here (none on a device the group doesn't
    allow: `usable` is false)."""
    require_scope(request, "read")
    device = _device(request, device_id)
    caps = device_capabilities(device)
    data = caps.to_dict()
    allowance = allowance_for(request.user)
    usable = allowance.device_ok(device.pk)
    return {
        "kind": caps.kind,
        "usable": usable,
        # the jobs app knows which kinds a device runs; the person's groups which they may use
        "job_kinds": [k for k in hooks.job_kinds(device) if usable and allowance.kind_ok(k)],
        "models": [m for m in data["models"] if usable and allowance.model_ok(str(m.get("id", "")))],
        "video": {m: v for m, v in data["video"].items() if usable and allowance.model_ok(m)},
        "stages_3d": data["stages_3d"],
        "voices": {
            m.id: voices_for_model(m.id).__dict__
            for m in caps.tts_models()
            if usable and allowance.model_ok(m.id)
        },
        "npu_total": caps.npu_total,
        "npu_available": caps.npu_available,
        "tensorsharp": data["tensorsharp"],
        "captured_at": device.capabilities_at,
    }


@router.get(
    "/{device_id}/metrics",
    url_name="device_metrics",
    response={200: MetricsOut, **ERRORS},
    summary="A device's latest reading",
)
def device_metrics(request: HttpRequest, device_id: str):
    require_scope(request, "read")
    device = _device(request, device_id)
    return {
        "reading_at": device.reading_at,
        "npu_util": device.npu_util,
        "npu_mem_used_mb": device.npu_mem_used_mb,
        "npu_mem_total_mb": device.npu_mem_total_mb,
        "npu_units_used": device.npu_units_used,
        "npu_units_total": device.npu_units_total,
        "cpu_percent": device.cpu_percent,
        "mem_percent": device.mem_percent,
        "gauges": device_gauges(device),
        "loaded_models": _loaded(device),
    }


@router.get(
    "/{device_id}/metrics/history",
    url_name="device_metric_history",
    response={200: MetricHistoryOut, **ERRORS},
    summary="A device's metric history",
)
def device_metric_history(
    request: HttpRequest,
    device_id: str,
    hours: int = Query(1, ge=1, le=MAX_HISTORY_HOURS, description="1 to 720 (30 days)."),
):
    """Averages per bucket (percent): 10-second buckets up to 6 hours back, 5-minute buckets beyond."""
    require_scope(request, "read")
    device = _device(request, device_id)
    resolution = RES_10S if hours <= FINE_UP_TO_HOURS else RES_5M
    since = timezone.now() - dt.timedelta(hours=hours)
    rows = (
        DeviceMetric.objects.filter(device_id=device.pk, resolution=resolution, bucket__gte=since)
        .order_by("bucket")
        .values_list("bucket", "samples", "npu_util_sum", "npu_mem_sum", "cpu_sum", "mem_sum")
    )

    def avg(total: float, samples: int) -> float | None:
        return round(total / samples, 1) if samples else None

    points = [
        {"t": b, "npu_util": avg(u, n), "npu_mem": avg(m, n), "cpu": avg(c, n), "mem": avg(r, n)}
        for b, n, u, m, c, r in rows
    ]
    return {"hours": hours, "resolution_s": int(resolution), "points": points}

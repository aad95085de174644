"""Device fragments for the live wire: the card (state, loaded models) and the gauges.

Rendered from the named partials of ``devices/_fragments.html`` — the same partials the pages use — with
``oob=True`` so htmx swaps them in by id. The card goes to ``everyone`` (list and dashboard) and the device's
group; the gauges only to the device's group (its detail page). Fragments never include the URL or the key.
"""

from __future__ import annotations

from typing import Any

from django.core.exceptions import PermissionDenied
from django.template.loader import render_to_string

from devices.models import Device
from devices.selectors import device_gauges, device_loaded_models
from hub import live

FRAGMENTS = "devices/_fragments.html"


def fragment_context(device: Device, **extra: Any) -> dict[str, Any]:
    return {
        "device": device,
        "loaded": device_loaded_models(device),
        "gauges": device_gauges(device),
        **extra,
    }


def render_card(device: Device, *, oob: bool = False) -> str:
    return render_to_string(f"{FRAGMENTS}#device-card", fragment_context(device, oob=oob))


def render_gauges(device: Device, *, oob: bool = False) -> str:
    return render_to_string(f"{FRAGMENTS}#device-gauges", fragment_context(device, oob=oob))


def device_push(device_id: int) -> None:
    device = Device.objects.filter(pk=device_id).first()
    if device is None:
        return
    card = render_card(device, oob=True)
    live.push_many([live.EVERYONE, live.device_group(device_id)], card)
    live.push(live.device_group(device_id), render_gauges(device, oob=True))


def device_topic(user: Any, object_id: str) -> tuple[list[str], list[str]]:
    """``watch=device:<id>``: anyone signed in may watch a device (no URL or key is ever pushed)."""
    if not getattr(user, "is_authenticated", False):
        raise PermissionDenied
    device = Device.objects.get(pk=int(object_id))  # DoesNotExist is handled by the consumer
    return [live.device_group(device.pk)], [render_card(device, oob=True), render_gauges(device, oob=True)]

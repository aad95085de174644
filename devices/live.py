"""Device fragments for the live wire: the card (state, loaded models) and the gauges.

Rendered from the named partials of ``devices/_fragments.html`` — the same partials the pages use — with
``oob=True`` so htmx swaps them in by id. The card goes to ``everyone`` (list and dashboard) and the device's
group; the gauges only to the device's group (its detail page). Fragments never include the key, and the URL
only in the admins' version of the card (the address beside a state message), which goes to ``admins`` only.
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


def render_card(device: Device, *, oob: bool = False, admin: bool = False) -> str:
    """The card; ``admin`` adds the admins-only detail (``Device.state_detail``) when there is one."""
    return render_to_string(f"{FRAGMENTS}#device-card", fragment_context(device, oob=oob, admin_view=admin))


def render_gauges(device: Device, *, oob: bool = False) -> str:
    return render_to_string(f"{FRAGMENTS}#device-gauges", fragment_context(device, oob=oob))


def device_push(device_id: int) -> None:
    device = Device.objects.filter(pk=device_id).first()
    if device is None:
        return
    card = render_card(device, oob=True)
    if device.state_detail:
        # Admins get their own card (with the address); the public one must not overwrite it on their pages.
        live.push_many([live.EVERYONE, live.device_group(device_id)], card, exclude=[live.ADMINS])
        live.push(live.ADMINS, render_card(device, oob=True, admin=True), audience=[live.ADMINS])
    else:
        live.push_many([live.EVERYONE, live.device_group(device_id)], card)
    live.push(live.device_group(device_id), render_gauges(device, oob=True))


def device_topic(user: Any, object_id: str) -> tuple[list[str], list[str]]:
    """``watch=device:<id>``: anyone signed in may watch a device (the address only for admins)."""
    if not getattr(user, "is_authenticated", False):
        raise PermissionDenied
    device = Device.objects.get(pk=int(object_id))  # DoesNotExist is handled by the consumer
    card = render_card(device, oob=True, admin=getattr(user, "is_admin", False))
    return [live.device_group(device.pk)], [card, render_gauges(device, oob=True)]

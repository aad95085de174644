"""Device fragments for the live wire: the card (state, loaded models) and the gauges.

Rendered from the named partials of ``devices/_fragments.html`` — the same partials the pages use — with
``oob=True`` so htmx swaps them in by id. Two topics (``hub.live``): ``device:<id>`` is the card and the gauges
(dashboard, device page), ``card:<id>`` the card alone (device list). Fragments never include the key, and
the URL only in the admins' version of the card (the address beside a state message): that version has
``admins`` as its audience, and the public one excludes admins so it never overwrites theirs.
Unchanged fragments are not sent again, and the gauges at most about once a second (``hub.live.push``).
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


def render_gauges(device: Device, *, oob: bool = False, admin: bool = False) -> str:
    """The gauges; ``admin`` adds the admins-only NPU budget units when the device reports them."""
    return render_to_string(f"{FRAGMENTS}#device-gauges", fragment_context(device, oob=oob, admin_view=admin))


def device_push(device_id: int) -> None:
    """The card (both topics) and the gauges (``device:<id>``), for the topics someone watches."""
    device = Device.objects.filter(pk=device_id).first()
    if device is None:
        return
    watching = live.watched([f"device:{device_id}", f"card:{device_id}"])
    groups = [live.topic_group(t) for t in sorted(watching)]
    if not groups:
        return
    card = render_card(device, oob=True)
    for group in groups:
        if device.state_detail:
            # Admins get their own card (with the address); the public one must not overwrite it on their pages.
            live.push(group, card, exclude=[live.ADMINS], variant=True)
            live.push(group, render_card(device, oob=True, admin=True), audience=[live.ADMINS], variant=True)
        else:
            live.push(group, card)
    if f"device:{device_id}" in watching:
        group, every = live.device_group(device_id), live.TICK_EVERY_S
        gauges = render_gauges(device, oob=True)
        if device.npu_units_used is not None:  # admins' gauges carry the budget units: a version of their own
            live.push(group, gauges, exclude=[live.ADMINS], variant=True, every=every)
            admin_gauges = render_gauges(device, oob=True, admin=True)
            live.push(group, admin_gauges, audience=[live.ADMINS], variant=True, every=every)
        else:
            live.push(group, gauges, every=every)


def device_topic(user: Any, object_id: str) -> tuple[list[str], list[str]]:
    """``watch=device:<id>``: anyone signed in may watch a device (the address only for admins)."""
    if not getattr(user, "is_authenticated", False):
        raise PermissionDenied
    device = Device.objects.get(pk=int(object_id))  # DoesNotExist is handled by the consumer
    admin = getattr(user, "is_admin", False)
    card = render_card(device, oob=True, admin=admin)
    return [live.device_group(device.pk)], [card, render_gauges(device, oob=True, admin=admin)]


def card_topic(user: Any, object_id: str) -> tuple[list[str], list[str]]:
    """``watch=card:<id>``: the card alone (the device list shows no gauges)."""
    if not getattr(user, "is_authenticated", False):
        raise PermissionDenied
    device = Device.objects.get(pk=int(object_id))
    return [live.card_group(device.pk)], [
        render_card(device, oob=True, admin=getattr(user, "is_admin", False))
    ]

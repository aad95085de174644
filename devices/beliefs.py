"""What the hub believes it loaded on a device (``Device.hub_loaded_models`` and the instance of each,
``hub_loaded_instances``): polite mode evicts only these. Kept true to every read of the device
(``devices.services.device_note_running``, full readings here); a restart ends them (``device_set_state`` on a
lock, another instance in the running list); and what it can do (``Device.capabilities``), replaced whole."""

from __future__ import annotations

from typing import Any

from django.db import transaction
from django.utils import timezone

from devices import hooks
from devices.capabilities import Capabilities, offered
from devices.clients.tiiny import Reading
from devices.models import Device
from hub import pagecache


def device_note_loaded(*, device_id: int, model_id: str) -> None:
    """The hub launched ``model_id`` (polite mode may evict it later)."""
    with transaction.atomic():
        device = Device.objects.select_for_update().get(pk=device_id)
        if model_id not in device.hub_loaded_models:
            device.hub_loaded_models = [*device.hub_loaded_models, model_id]
            device.save(update_fields=["hub_loaded_models", "updated"])


def device_note_unloaded(*, device_id: int, model_ids: list[str]) -> None:
    with transaction.atomic():
        device = Device.objects.select_for_update().get(pk=device_id)
        device.hub_loaded_models = [m for m in device.hub_loaded_models if m not in model_ids]
        device.hub_loaded_instances = _marks_of(device, device.hub_loaded_models)
        device.save(update_fields=["hub_loaded_models", "hub_loaded_instances", "updated"])


def _marks_of(device: Device, models: list[str]) -> dict[str, Any]:
    return {m: v for m, v in (device.hub_loaded_instances or {}).items() if m in models}


def reconcile_from_reading(*, device_id: int, reading: Reading) -> None:
    """Every full reading names what runs: a model the hub loaded that is gone is no longer the hub's."""
    present = {m.get("model_id") for m in reading.models}
    with transaction.atomic():
        device = (
            Device.objects.select_for_update()
            .only("pk", "hub_loaded_models", "hub_loaded_instances")
            .get(pk=device_id)
        )
        mine = [m for m in device.hub_loaded_models if m in present]
        if mine != device.hub_loaded_models:
            Device.objects.filter(pk=device_id).update(
                hub_loaded_models=mine, hub_loaded_instances=_marks_of(device, mine)
            )


def device_save_capabilities(*, device_id: int, caps: Capabilities) -> None:
    """Store what the device reports it can do; where that changed, the apps above hear of it after commit (the
    pool: a device that gained or lost a model joins or leaves the pools of the jobs waiting for "any device")."""
    new = caps.to_dict()
    old = Device.objects.filter(pk=device_id).values_list("capabilities", flat=True).first()
    Device.objects.filter(pk=device_id).update(
        capabilities=new, capabilities_at=timezone.now(), versions=caps.versions
    )
    transaction.on_commit(pagecache.changed)  # e.g. the queue page's vault window (hub.pagecache)
    if offered(old) != offered(new):
        for hook in hooks.device_capabilities_hooks():
            transaction.on_commit(lambda hook=hook: hook(device_id=device_id), robust=True)

"""What a model load costs on each device: the hub learns it from the loads it launches (an EWMA per device and
model, kept in the cache), else goes by the ``load_time`` the device lists. The job engine's client reports each
load (``devices.services.client_for``) and the client expects its next loads to take about as long; the engine
reports how long a job's first request then waited for the model to take requests. The planners count both where
a load is due (``device_load_costs``: ``jobs.queue.pool``, ``jobs.queue.eta.plan``)."""

from __future__ import annotations

from django.core.cache import cache

from devices.models import Device

#: Weight of the newest load in a model's learned load time (an EWMA, like the render history's)
LOAD_EWMA_ALPHA = 0.3


def _load_key(device_id: int, model_id: str) -> str:
    return f"devices:load-s:{device_id}:{model_id}"


def _fold(key: str, seconds: float) -> None:
    """Fold ``seconds`` into the learned time under ``key`` (an EWMA; the first one replaces nothing)."""
    try:
        old = cache.get(key)
        new = seconds if old is None else LOAD_EWMA_ALPHA * seconds + (1 - LOAD_EWMA_ALPHA) * float(old)
        cache.set(key, new, timeout=30 * 24 * 3600)
    except Exception:  # noqa: BLE001 - a hint only: the next load then goes by the device's load_time
        pass


def device_note_load_seconds(device_id: int, model_id: str, seconds: float) -> None:
    """A load the hub launched took ``seconds`` (launch to running): fold it into the model's learned time."""
    _fold(_load_key(device_id, model_id), seconds)


def _ready_key(device_id: int) -> str:
    return f"devices:ready-wait-s:{device_id}"


def device_note_ready_wait(device_id: int, seconds: float) -> None:
    """After a load the hub launched, the job's first request waited ``seconds`` for the model to take requests
    (a Tiiny's readiness window: "xh2a … wait ~10 s"): fold it into the device's learned wait."""
    _fold(_ready_key(device_id), seconds)


def _expected(device: Device, *, with_wait: bool) -> tuple[dict[str, float], float]:
    """Model id -> expected load seconds (what the hub learned, else the ``load_time`` the device lists), and the
    learned wait after a load (``with_wait``; else 0): one read of the cache."""
    expected = {
        m["id"]: float(m["load_s"])
        for m in (device.capabilities or {}).get("models", [])
        if isinstance(m, dict) and m.get("id") and m.get("load_s")
    }
    keys = [_load_key(device.pk, m) for m in expected] + (
        [_ready_key(device.pk)] if with_wait and expected else []
    )
    try:
        learned = cache.get_many(keys) if keys else {}
    except Exception:  # noqa: BLE001
        learned = {}
    wait = float(learned.pop(_ready_key(device.pk), None) or 0.0)
    prefix = _load_key(device.pk, "")
    expected.update({k[len(prefix) :]: float(v) for k, v in learned.items()})
    return expected, wait


def device_load_seconds(device: Device) -> dict[str, float]:
    """Model id -> expected load seconds: what the hub learned, else the ``load_time`` the device lists."""
    return _expected(device, with_wait=False)[0]


def device_load_costs(device: Device) -> dict[str, float]:
    """Model id -> what a job waits for that model's load before its render starts: the load (``device_load_seconds``)
    and the wait after it until the model takes requests (learned, ``device_note_ready_wait``). The planners count
    this where a load is due; a model missing here is counted at their guess."""
    loads, wait = _expected(device, with_wait=True)
    return {model: seconds + wait for model, seconds in loads.items()}

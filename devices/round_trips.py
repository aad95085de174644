"""The link's measured round trip: the poller's requests, from each sent to its answer's head, the last ones kept in
Redis and their 95th percentile stored on the Device row (``link_p95_ms``), which the pages read (never the device).
"""

from __future__ import annotations

from django.core.cache import cache

from devices.models import Device

#: How many of the poller's last round trips the link's p95 is taken over (at 2 s a poll: the last minute or so).
ROUND_TRIPS_KEPT = 40


def _round_trips_key(device_id: int) -> str:
    return f"devices:round-trips:{device_id}"


def device_note_round_trips(*, device_id: int, seconds: list[float]) -> int | None:
    """Add the poller's round trips to the device's last ones (in Redis; the poller holds the device's claim, so
    no two write at once) and store their 95th percentile on the row when it moved. Returns it (ms)."""
    if not seconds:
        return None
    try:
        kept = cache.get(_round_trips_key(device_id)) or []
        kept = [*kept, *(round(s * 1000) for s in seconds)][-ROUND_TRIPS_KEPT:]
        cache.set(_round_trips_key(device_id), kept, timeout=3600)
    except Exception:  # noqa: BLE001 - no Redis: this poll's own
        kept = [round(s * 1000) for s in seconds]
    p95 = p95_of(kept)
    Device.objects.filter(pk=device_id).exclude(link_p95_ms=p95).update(link_p95_ms=p95)
    return p95


def p95_of(values: list[int]) -> int:
    """The nearest-rank 95th percentile."""
    ordered = sorted(values)
    return ordered[max(0, -(-95 * len(ordered) // 100) - 1)]

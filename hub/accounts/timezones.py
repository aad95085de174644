"""The time zones a person may choose: the IANA names Python's zoneinfo knows on this machine."""

from __future__ import annotations

from functools import lru_cache
from zoneinfo import ZoneInfo, available_timezones


@lru_cache(maxsize=1)
def time_zone_names() -> frozenset[str]:
    # available_timezones() walks the tz database on disk: once per process is enough.
    return frozenset(available_timezones())


def is_time_zone(name: str) -> bool:
    return name in time_zone_names()


@lru_cache(maxsize=1)
def time_zone_choices() -> tuple[tuple[str, str], ...]:
    """For a <select>: the hub's default first, then every zone by name."""
    return (
        ("", "The hub's time zone"),
        *((name, name.replace("_", " ")) for name in sorted(time_zone_names())),
    )


@lru_cache(maxsize=512)
def zone(name: str) -> ZoneInfo | None:
    """The ZoneInfo for a stored name, or None when the name is empty or no longer known (a tzdata update
    can retire one): such a person simply sees the hub's own zone."""
    if not name or not is_time_zone(name):
        return None
    return ZoneInfo(name)

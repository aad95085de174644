"""Device time per device: how a person's (or the household's) measured device time splits over the pool.

The same measure as the limits (``jobs.quotas.services``): a ``DeviceUse`` row per span a job held a device, plus
the running span of a job that holds one now, cut to the household's day, week (from Monday) and its last days
(the Usage page's chart). Limits and fair share count the total over every device; this only shows where it was
spent. Selector: ``device_times`` (the Usage page, ``GET /api/usage``).
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass, field
from typing import Any

from django.utils import timezone

from devices.models import Device
from jobs.models import ACTIVE_STATES, DeviceUse, Job
from jobs.quotas.services import day_start, week_start


@dataclass
class DeviceTime:
    """Device seconds on one device (``device_id`` None: every device together)."""

    device_id: int | None
    name: str
    today_s: float = 0.0
    week_s: float = 0.0
    recent_s: float = 0.0  # the last ``DeviceTimes.days`` household days, today included


@dataclass
class DeviceTimes:
    days: int
    rows: list[DeviceTime] = field(default_factory=list)  # every device, by name
    total: DeviceTime = field(default_factory=lambda: DeviceTime(None, "All devices"))

    @property
    def any(self) -> bool:
        return self.total.recent_s > 0 or self.total.week_s > 0


def _first_day(now: dt.datetime, days: int) -> dt.datetime:
    """The start of the first of the last ``days`` household days (as the Usage page's chart counts them)."""
    first = day_start(now)
    for _ in range(days - 1):
        first = day_start(first - dt.timedelta(hours=12))
    return first


def _overlap(start: dt.datetime, end: dt.datetime, a: dt.datetime, b: dt.datetime) -> float:
    return max(0.0, (min(end, b) - max(start, a)).total_seconds())


def device_times(*, user: Any | None, days: int = 14, now: dt.datetime | None = None) -> DeviceTimes:
    """``user``'s device time per device (``user=None``: the household's, for admins) today, this week and over
    the last ``days`` days; three reads whatever the number of devices."""
    now = now or timezone.now()
    today, week, recent = day_start(now), week_start(now), _first_day(now, days)
    since = min(week, recent)
    out = DeviceTimes(days=days)
    rows = {
        pk: DeviceTime(pk, name) for pk, name in Device.objects.order_by("name").values_list("pk", "name")
    }
    out.rows = list(rows.values())
    spans = DeviceUse.objects.filter(ended__gt=since)
    # The running jobs (one a device) by state alone, the person picked here, as ``jobs.quotas.services._spans``.
    running = Job.objects.filter(state__in=ACTIVE_STATES, started_at__isnull=False).order_by()
    owner = None if user is None else getattr(user, "pk", user)
    if owner is not None:
        spans = spans.filter(owner_id=owner)
    found = list(spans.values_list("device_id", "started", "ended"))
    found += [
        (device, started, now)
        for device, who, started in running.values_list("device_id", "owner_id", "started_at")
        if started < now and (owner is None or who == owner)
    ]
    for device, start, end in found:
        row = rows.get(device)
        if row is None:  # (a device removed since: its spans went with it)
            continue
        for each in (row, out.total):
            each.today_s += _overlap(start, end, today, now)
            each.week_s += _overlap(start, end, week, now)
            each.recent_s += _overlap(start, end, recent, now)
    return out

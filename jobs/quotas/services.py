"""Quotas and fair use: per-person limits, what a person has used, and the check at submit time.

Limits (``jobs.models.HouseholdQuota`` for everyone, ``PersonQuota`` per person; NULL = the household default,
``UNLIMITED`` = no limit for that person):

- device minutes per day and per week: the household's calendar day and week (Monday 00:00) in
  ``HUB_TIME_ZONE``, so the windows are the same for everyone;
- jobs in the queue at once (waiting or running);
- storage for results, in MB (the bytes of the person's ``Artifact`` rows).

Device time is what the hub measured: a ``DeviceUse`` row per span a job held the device (the model load it
needed, the render, the download), written by the engine when the lease is released, plus the running span of a
job that holds the device now. A span that crosses midnight counts on each day for its part.

The check (``quota_check``) is part of admission (``jobs.queue.admission.admit``), so the page, REST and /v1 refuse
with the same words. Device time *booked* by the person's jobs still waiting or running (their estimates, less
what a running one has used) counts against today's and this week's limit with the new job's estimate: queuing
ten long renders at once can't slip past a daily limit. Admins are held to the limits too, unless they lift them
for one job (``lift=True``); the lift is written in that job's story.

Services: ``quota_set`` (admins), ``device_use_record`` (the engine), ``results_delete`` (owners and admins).
Selectors: ``limits_for``, ``usage_for``, ``usage_days``, ``usage_people``, ``results_of``.
"""

from __future__ import annotations

import datetime as dt
import logging
import math
from dataclasses import dataclass, field
from typing import Any
from zoneinfo import ZoneInfo

from django.conf import settings
from django.core.exceptions import PermissionDenied, ValidationError
from django.db import transaction
from django.db.models import Count, Q, Sum
from django.utils import timezone

from hub.accounts import audit
from hub.accounts.models import UserGroup
from jobs.models import (
    ACTIVE_STATES,
    PENDING_STATES,
    QUOTA_FIELDS,
    UNLIMITED,
    Artifact,
    DeviceUse,
    HouseholdQuota,
    Job,
    PersonQuota,
)
from jobs.quotas.results import can_delete_results, results_delete  # (re-exported: the Usage page's)

logger = logging.getLogger("jobs.quotas.services")

LABELS = {
    "device_minutes_per_day": "Daily device time",
    "device_minutes_per_week": "Weekly device time",
    "max_queued": "Jobs in the queue",
    "storage_mb": "Storage for results",
}
UNITS = {
    "device_minutes_per_day": "minutes",
    "device_minutes_per_week": "minutes",
    "max_queued": "jobs",
    "storage_mb": "MB",
}
MB = 1024 * 1024
LIFT_ADMINS_ONLY = "Only an admin can lift a limit for one job."
ADMIN_HINT = (
    " As an admin you may lift it for this job (“Lift my limits for this job”; lift_limits in the API)."
)
#: What a person types for "the household default" and for "no limit" (the People page, ``manage.py quota``).
DEFAULT_WORDS = ("", "default")
NONE_WORDS = ("none", "unlimited", "no limit")


# -- windows -------------------------------------------------------------------------------------------------
def household_zone() -> ZoneInfo:
    return ZoneInfo(settings.TIME_ZONE)


def day_start(now: dt.datetime) -> dt.datetime:
    local = now.astimezone(household_zone())
    return local.replace(hour=0, minute=0, second=0, microsecond=0)


def week_start(now: dt.datetime) -> dt.datetime:
    start = day_start(now)
    return start - dt.timedelta(days=start.weekday())


def _next_day(start: dt.datetime) -> dt.datetime:
    """The next local midnight (a DST day has 23 or 25 hours: add a calendar day, then re-localise)."""
    day = start.date() + dt.timedelta(days=1)
    return dt.datetime.combine(day, dt.time(), tzinfo=household_zone())


def _next_week(start: dt.datetime) -> dt.datetime:
    day = start.date() + dt.timedelta(days=7)
    return dt.datetime.combine(day, dt.time(), tzinfo=household_zone())


def _overlap(start: dt.datetime, end: dt.datetime, a: dt.datetime, b: dt.datetime) -> float:
    return max(0.0, (min(end, b) - max(start, a)).total_seconds())


# -- limits --------------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Limits:
    """A person's limits in force (None = no limit), and which of them are their own overrides."""

    device_minutes_per_day: int | None = None
    device_minutes_per_week: int | None = None
    max_queued: int | None = None
    storage_mb: int | None = None
    overridden: frozenset[str] = frozenset()

    def get(self, name: str) -> int | None:
        return getattr(self, name)

    @property
    def any(self) -> bool:
        return any(self.get(n) is not None for n in QUOTA_FIELDS)


def household_limits() -> Limits:
    row = HouseholdQuota.objects.filter(pk=1).first()
    if row is None:
        return Limits()
    return Limits(**{name: getattr(row, name) for name in QUOTA_FIELDS})


def _resolve(defaults: Limits, person: PersonQuota | None) -> Limits:
    values: dict[str, Any] = {}
    overridden = set()
    for name in QUOTA_FIELDS:
        own = getattr(person, name) if person is not None else None
        if own is None:
            values[name] = defaults.get(name)
        else:
            overridden.add(name)
            values[name] = None if own == UNLIMITED else own
    return Limits(**values, overridden=frozenset(overridden))


def limits_for(user: Any) -> Limits:
    """The person's limits in force: their own (else the household's), made stricter by their groups'
    per-person defaults (``stricter``)."""
    uid = getattr(user, "pk", user)
    person = PersonQuota.objects.filter(user_id=uid).first()
    return stricter(_resolve(household_limits(), person), groups_of(uid))


def groups_of(user_id: int | None) -> list[UserGroup]:
    """The groups the person is in (``hub.accounts.groups``), by name."""
    return list(UserGroup.objects.filter(members=user_id).order_by("name")) if user_id else []


def stricter(limits: Limits, groups: list[UserGroup]) -> Limits:
    """The stricter wins: each limit is the smallest of the person's (or the household's) and every group's
    per-person default (a group's NULL limits nothing; "no limit" of a person's own never lifts a group's)."""
    if not groups:
        return limits
    values: dict[str, Any] = {}
    for name in QUOTA_FIELDS:
        found = [v for v in (limits.get(name), *(getattr(g, name) for g in groups)) if v is not None]
        values[name] = min(found) if found else None
    return Limits(**values, overridden=limits.overridden)


def overrides_of(user: Any) -> dict[str, int | None]:
    """The person's own values as stored: None = household default, ``UNLIMITED`` = no limit."""
    person = PersonQuota.objects.filter(user_id=getattr(user, "pk", user)).first()
    return _own_values(person)


def _own_values(person: PersonQuota | None) -> dict[str, int | None]:
    return {name: (getattr(person, name) if person else None) for name in QUOTA_FIELDS}


def limits_of_many(user_ids: list[int]) -> dict[int, tuple[Limits, dict[str, int | None]]]:
    """Each person's (limits in force, own overrides as stored), in two queries whatever their number."""
    defaults = household_limits()
    rows = {row.user_id: row for row in PersonQuota.objects.filter(user_id__in=user_ids)}
    groups: dict[int, list[UserGroup]] = {uid: [] for uid in user_ids}
    for group in UserGroup.objects.filter(members__in=user_ids).prefetch_related("members").distinct():
        for member in group.members.all():
            if member.pk in groups:
                groups[member.pk].append(group)
    return {
        uid: (stricter(_resolve(defaults, rows.get(uid)), groups[uid]), _own_values(rows.get(uid)))
        for uid in user_ids
    }


def parse_limit(raw: Any, *, person: bool) -> int | None:
    """What a person typed for one limit: a whole number; "default" or empty (a person's override: the household
    default; the household's own value: no limit); "none"/"unlimited" (no limit). ``ValidationError`` otherwise."""
    text = str(raw if raw is not None else "").strip().lower()
    if text in DEFAULT_WORDS:
        return None
    if text in NONE_WORDS:
        return UNLIMITED if person else None
    if not text.isascii() or not text.isdigit() or len(text) > 9:
        raise ValidationError(
            f"Give a whole number of 0 or more, “default” or “none” (not {str(raw)[:20]!r})."
            if person
            else f"Give a whole number of 0 or more, or leave it empty for no limit (not {str(raw)[:20]!r})."
        )
    return int(text)


def describe(value: int | None, unit: str) -> str:
    return "no limit" if value is None else f"{value} {unit}"


# -- usage ---------------------------------------------------------------------------------------------------
@dataclass
class Usage:
    now: dt.datetime
    day_start: dt.datetime
    week_start: dt.datetime
    day_s: float = 0.0  # device seconds measured today (running spans included)
    week_s: float = 0.0
    booked_s: float = 0.0  # device seconds still to come for the jobs waiting or running (estimates)
    queued: int = 0  # jobs waiting or running
    storage_bytes: int = 0  # the trash's files included: they are still on the disk
    trash_bytes: int = 0  # of which in the trash (``jobs.queue.trash``)
    next_end: dt.datetime | None = None  # the first predicted end among the queued jobs

    @property
    def storage_mb(self) -> float:
        return self.storage_bytes / MB

    @property
    def trash_mb(self) -> float:
        return self.trash_bytes / MB


def _spans(
    *, owner_ids: list[int] | None, since: dt.datetime, now: dt.datetime
) -> list[tuple[int, Any, Any]]:
    """(owner id, start, end) of every device span ending after ``since``, the running ones (up to now) too."""
    rows = DeviceUse.objects.filter(ended__gt=since)
    if owner_ids is not None:
        rows = rows.filter(owner_id__in=owner_ids)
    out = [(o, s, e) for o, s, e in rows.values_list("owner_id", "started", "ended")]
    # The running jobs (one a device) by state alone, the person picked here: with the owner in the query SQLite
    # walked the person's whole history on the owner's index (20 ms at 100k jobs, twice a usage page).
    running = Job.objects.filter(state__in=ACTIVE_STATES, started_at__isnull=False).order_by()
    wanted = None if owner_ids is None else set(owner_ids)
    out += [
        (o, s, now)
        for o, s in running.values_list("owner_id", "started_at")
        if s < now and (wanted is None or o in wanted)
    ]
    return out


def storage_bytes(user: Any) -> int:
    uid = getattr(user, "pk", user)
    return _stored_bytes([uid]).get(uid, 0)


def _stored_bytes(user_ids: list[int], *, trash_only: bool = False) -> dict[int, int]:
    """{person: bytes of their results on disk, the trash's included} (people with none are left out);
    ``trash_only``: the bytes of those in the trash alone."""
    files = Artifact.objects.filter(job__owner_id__in=user_ids)
    if trash_only:
        files = files.filter(job__trashed_at__isnull=False)
    rows = files.values("job__owner_id").annotate(b=Sum("bytes")).values_list("job__owner_id", "b")
    return {owner: total or 0 for owner, total in rows}


def usage_for(user: Any, *, now: dt.datetime | None = None) -> Usage:
    uid = getattr(user, "pk", user)
    return usage_of_many([uid], now=now)[uid]


def usage_of_many(user_ids: list[int], *, now: dt.datetime | None = None) -> dict[int, Usage]:
    """Each person's usage, in four queries whatever their number (the People page's quota section)."""
    now = now or timezone.now()
    usages = {uid: Usage(now=now, day_start=day_start(now), week_start=week_start(now)) for uid in user_ids}
    if not usages:
        return usages
    since = next(iter(usages.values())).week_start
    for owner, start, end in _spans(owner_ids=list(usages), since=since, now=now):
        usage = usages[owner]
        usage.day_s += _overlap(start, end, usage.day_start, now)
        usage.week_s += _overlap(start, end, usage.week_start, now)
    queued = Job.objects.filter(owner_id__in=list(usages), state__in=(*PENDING_STATES, *ACTIVE_STATES))
    for owner, state, estimate, started, finish in queued.values_list(
        "owner_id", "state", "estimate_s", "started_at", "predicted_finish"
    ):
        usage = usages[owner]
        usage.queued += 1
        left = float(estimate or 0.0)
        if state in ACTIVE_STATES and started:
            left = max(0.0, left - (now - started).total_seconds())
        usage.booked_s += left
        if finish and finish > now and (usage.next_end is None or finish < usage.next_end):
            usage.next_end = finish
    for owner, total in _stored_bytes(list(usages)).items():
        usages[owner].storage_bytes = total
    for owner, total in _stored_bytes(list(usages), trash_only=True).items():
        usages[owner].trash_bytes = total
    return usages


# -- the check -----------------------------------------------------------------------------------------------
@dataclass
class Verdict:
    refused: str | None = None
    lifted: list[str] = field(
        default_factory=list
    )  # the refusals a lift set aside (the job's story keeps them)
    line: str = ""  # "Today 12 of 60 device minutes" for the submit form


def _minutes(seconds: float) -> int:
    return int(math.floor(seconds / 60 + 0.5))


def _at(moment: dt.datetime, now: dt.datetime, *, prep: bool = True) -> str:
    """ "at 00:00" within a day, "on Monday 7 Dec at 00:00" further off (in the reader's time zone)."""
    local = timezone.localtime(moment)
    if (moment - now) <= dt.timedelta(hours=24):
        return f"{'at ' if prep else ''}{local:%H:%M}"
    return f"{'on ' if prep else ''}{local:%A} {local.day} {local:%b} at {local:%H:%M}"


def _time_refusal(
    name: str,
    *,
    limit: int,
    used_s: float,
    booked_s: float,
    new_s: float,
    frees: dt.datetime,
    now: dt.datetime,
    group: str = "",
) -> str | None:
    """``group``: a group's shared limit (its members' time together), named in the words."""
    if used_s + booked_s + new_s <= limit * 60:
        return None
    total, booked, new = _minutes(used_s + booked_s), _minutes(booked_s), max(1, math.ceil(new_s / 60))
    window = "today" if name == "device_minutes_per_day" else "this week"
    whose = "its members' jobs" if group else "your jobs"
    label = f"Group “{group}”, shared {LABELS[name].lower()}" if group else LABELS[name]
    head = f"{label}: {total} of {limit} minutes used {window}"
    if booked:
        head += f" ({_minutes(used_s)} run, {booked} booked by {whose} in the queue)"
    head += f"; this job needs about {new} more"
    if new_s > limit * 60:
        return (
            f"{head}, more than the whole limit. Choose a shorter or smaller render, or ask an admin to lift "
            "the limit for this job."
        )
    if booked_s + new_s > limit * 60:
        return (
            f"{head}. It frees up once {whose} in the queue have run, from {_at(frees, now, prep=False)}; "
            "cancel one to make room now."
        )
    return f"{head}; frees up {_at(frees, now)}."


def quota_check(
    *, owner: Any, estimate_s: float, lift: bool = False, now: dt.datetime | None = None
) -> Verdict:
    """Would queuing a job of ``estimate_s`` device seconds for ``owner`` break one of their limits?

    The first limit it breaks is the refusal (naming the limit, the usage and when it frees up); with ``lift``
    (admins only; admission refuses it from anyone else) every broken limit is set aside and listed in ``lifted``.
    """
    now = now or timezone.now()
    limits = limits_for(owner)
    shared = [g for g in groups_of(getattr(owner, "pk", None)) if _shares(g)]
    if not limits.any and not shared:
        return Verdict()
    usage = usage_for(owner, now=now)
    broken = _time_limits_broken(limits, usage, estimate_s=estimate_s, now=now) + _count_limits_broken(
        limits, usage
    )
    broken += [why for group in shared for why in _shared_broken(group, estimate_s=estimate_s, now=now)]
    verdict = Verdict(line=usage_line(limits, usage))
    if broken and lift:
        verdict.lifted = broken
    elif broken:
        verdict.refused = broken[0] + (ADMIN_HINT if getattr(owner, "is_admin", False) else "")
    return verdict


def _time_limits_broken(limits: Limits, usage: Usage, *, estimate_s: float, now: dt.datetime) -> list[str]:
    """The refusals of the daily and weekly device-time limits the new job would break."""
    broken: list[str] = []
    if (limit := limits.device_minutes_per_day) is not None:
        frees = _next_day(usage.day_start)
        if why := _time_refusal(
            "device_minutes_per_day", limit=limit, used_s=usage.day_s, booked_s=usage.booked_s,
            new_s=estimate_s, frees=frees, now=now,
        ):  # fmt: skip
            broken.append(why)
    if (limit := limits.device_minutes_per_week) is not None:
        frees = _next_week(usage.week_start)
        if why := _time_refusal(
            "device_minutes_per_week", limit=limit, used_s=usage.week_s, booked_s=usage.booked_s,
            new_s=estimate_s, frees=frees, now=now,
        ):  # fmt: skip
            broken.append(why)
    return broken


def _shares(group: UserGroup) -> bool:
    return group.shared_minutes_per_day is not None or group.shared_minutes_per_week is not None


def group_usage(group: UserGroup, *, now: dt.datetime | None = None) -> Usage:
    """The group's members' device time together (``usage_of_many`` summed: what its shared limit counts)."""
    now = now or timezone.now()
    total = Usage(now=now, day_start=day_start(now), week_start=week_start(now))
    members = list(group.members.values_list("pk", flat=True))
    for usage in usage_of_many(members, now=now).values():
        total.day_s += usage.day_s
        total.week_s += usage.week_s
        total.booked_s += usage.booked_s
        total.queued += usage.queued
    return total


def _shared_broken(group: UserGroup, *, estimate_s: float, now: dt.datetime) -> list[str]:
    """The refusals of a group's shared daily and weekly limits (its members together) the new job would break."""
    usage = group_usage(group, now=now)
    broken: list[str] = []
    windows = (
        ("device_minutes_per_day", group.shared_minutes_per_day, _next_day(usage.day_start), usage.day_s),
        (
            "device_minutes_per_week",
            group.shared_minutes_per_week,
            _next_week(usage.week_start),
            usage.week_s,
        ),
    )
    for name, limit, frees, used in windows:
        if limit is not None and (
            why := _time_refusal(
                name,
                limit=limit,
                used_s=used,
                booked_s=usage.booked_s,
                new_s=estimate_s,
                frees=frees,
                now=now,
                group=group.name,
            )  # fmt: skip
        ):
            broken.append(why)
    return broken


def _count_limits_broken(limits: Limits, usage: Usage) -> list[str]:
    """The refusals of the queue and storage limits one more job would break."""
    broken: list[str] = []
    if (limit := limits.max_queued) is not None and usage.queued + 1 > limit:
        when = f" (about {timezone.localtime(usage.next_end):%H:%M})" if usage.next_end else ""
        broken.append(
            f"{LABELS['max_queued']}: {usage.queued} of {limit} (waiting or running); "
            f"frees up when one of them ends{when}."
        )
    if (limit := limits.storage_mb) is not None and usage.storage_bytes >= limit * MB:
        broken.append(
            f"{LABELS['storage_mb']}: {usage.storage_mb:.0f} of {limit} MB used"
            + (f" ({usage.trash_mb:.0f} MB of it in the trash)" if usage.trash_bytes else "")
            + "; frees up when you delete results you no longer need (the Usage page lists them, largest first) "
            "and empty the trash (the trash counts until it is emptied)."
        )
    return broken


def usage_line(limits: Limits, usage: Usage) -> str:
    """ "Today 12 of 60 device minutes (+7 booked) · this week 80 of 300 · 2 of 5 jobs in the queue …" (only the
    limits that exist; "" when there are none)."""
    parts = []
    booked = _minutes(usage.booked_s)
    tail = f" (+{booked} booked)" if booked else ""
    if (limit := limits.device_minutes_per_day) is not None:
        parts.append(f"Today {_minutes(usage.day_s)} of {limit} device minutes{tail}")
        tail = ""
    if (limit := limits.device_minutes_per_week) is not None:
        parts.append(f"this week {_minutes(usage.week_s)} of {limit} device minutes{tail}")
    if (limit := limits.max_queued) is not None:
        parts.append(f"{usage.queued} of {limit} jobs in the queue")
    if (limit := limits.storage_mb) is not None:
        trash = f" ({usage.trash_mb:.0f} MB in the trash)" if usage.trash_bytes else ""
        parts.append(f"{usage.storage_mb:.0f} of {limit} MB of results{trash}")
    line = " · ".join(parts)
    return line[:1].upper() + line[1:]


def lift_message(by: Any, lifted: list[str]) -> str:
    return f"Limit lifted for this job by {getattr(by, 'username', by)}: " + " ".join(lifted)


# -- services ------------------------------------------------------------------------------------------------
def quota_set(*, by: Any | None, user: Any | None = None, **values: int | None) -> Limits:
    """Set the household defaults (``user=None``) or one person's overrides; only the names given change.

    Values: a whole number ≥ 0; None (household: no limit; person: back to the household default); for a
    person, ``UNLIMITED`` (no limit for them). Returns the limits now in force for ``user`` (or the defaults).
    """
    if by is not None and not getattr(by, "is_admin", False):  # None: the command line (``manage.py quota``)
        raise PermissionDenied("Only admins can set limits.")
    _check_limit_values(values, person=user is not None)
    _store_limits(user, values)
    audit.record(audit.Action.QUOTA_CHANGED, actor=by, target=user,
                 target_name=None if user is not None else "the household", data=values)  # fmt: skip
    who = getattr(by, "username", "the command line")
    logger.info("limits of %s set by %s: %s", getattr(user, "username", "the household"), who, values)
    return household_limits() if user is None else limits_for(user)


def _check_limit_values(values: dict[str, int | None], *, person: bool) -> None:
    """Refuse unknown limit names and values that are not whole numbers ≥ 0 (or ``UNLIMITED`` for a person)."""
    unknown = set(values) - set(QUOTA_FIELDS)
    if unknown:
        raise ValidationError(f"Unknown limit(s): {', '.join(sorted(unknown))}.")
    low = UNLIMITED if person else 0
    for name, value in values.items():
        if value is not None and (not isinstance(value, int) or isinstance(value, bool) or value < low):
            raise ValidationError({name: f"{LABELS[name]}: give a whole number of 0 or more."})


def _store_limits(user: Any | None, values: dict[str, int | None]) -> None:
    """Write the values on the household's row (``user=None``) or the person's; a person's row with nothing of
    their own left is removed, so they follow the household."""
    with transaction.atomic():
        if user is None:
            row, _ = HouseholdQuota.objects.select_for_update().get_or_create(pk=1)
        else:
            row, _ = PersonQuota.objects.select_for_update().get_or_create(user_id=user.pk)
        for name, value in values.items():
            setattr(row, name, value)
        row.save()
        if user is not None and all(getattr(row, n) is None for n in QUOTA_FIELDS):
            row.delete()


def device_use_record(
    *, job_id: int, owner_id: int, device_id: int, started: dt.datetime | None, ended: dt.datetime
) -> DeviceUse | None:
    """The engine's one call when a job gives the device back: the span it held it (None if it never did)."""
    if started is None or ended <= started:
        return None
    return DeviceUse.objects.create(
        owner_id=owner_id,
        job_id=job_id,
        device_id=device_id,
        started=started,
        ended=ended,
        seconds=(ended - started).total_seconds(),
    )


# -- selectors for the Usage page ------------------------------------------------------------------------------
@dataclass
class Day:
    date: dt.date
    device_s: float = 0.0
    stored_bytes: int = 0  # results made that day that are still kept

    @property
    def device_min(self) -> float:
        return self.device_s / 60

    @property
    def stored_mb(self) -> float:
        return self.stored_bytes / MB


def usage_days(*, user: Any | None, days: int = 14, now: dt.datetime | None = None) -> list[Day]:
    """The last ``days`` household days, oldest first: device seconds (split at midnight) and the bytes of results
    made that day and still kept. ``user=None``: everyone together (admins)."""
    now = now or timezone.now()
    first = day_start(now)
    for _ in range(days - 1):
        first = day_start(first - dt.timedelta(hours=12))
    out: list[Day] = []
    start = first
    while start <= now:
        out.append(Day(date=start.date()))
        start = _next_day(start)
    bounds = [dt.datetime.combine(d.date, dt.time(), tzinfo=household_zone()) for d in out]
    bounds.append(_next_day(bounds[-1]))
    owners = None if user is None else [getattr(user, "pk", user)]
    for _owner, s, e in _spans(owner_ids=owners, since=first, now=now):
        for i, day in enumerate(out):
            day.device_s += _overlap(s, e, bounds[i], bounds[i + 1])
    artifacts = Artifact.objects.filter(created__gte=first)
    if owners is not None:
        artifacts = artifacts.filter(job__owner_id__in=owners)
    index = {d.date: d for d in out}
    zone = household_zone()
    for created, size in artifacts.values_list("created", "bytes"):
        day = index.get(created.astimezone(zone).date())
        if day is not None:
            day.stored_bytes += size
    return out


@dataclass
class PersonUsage:
    user: Any
    device_s: float = 0.0
    jobs: int = 0
    storage_bytes: int = 0
    limits: Limits | None = None

    @property
    def storage_mb(self) -> float:
        return self.storage_bytes / MB


def usage_people(*, days: int = 7, now: dt.datetime | None = None) -> list[PersonUsage]:
    """Everyone's device time over the last ``days`` days, jobs run and storage kept, most device time first."""
    from django.contrib.auth import get_user_model

    now = now or timezone.now()
    since = now - dt.timedelta(days=days)
    rows = {u.pk: PersonUsage(user=u) for u in get_user_model().objects.order_by("username")}
    for owner, s, e in _spans(owner_ids=None, since=since, now=now):
        if owner in rows:
            rows[owner].device_s += _overlap(s, e, since, now)
    jobs = (
        Job.objects.filter(Q(finished_at__gte=since) | Q(state__in=ACTIVE_STATES))
        .values("owner_id")
        .annotate(n=Count("pk"))
    )
    for row in jobs:
        if row["owner_id"] in rows:
            rows[row["owner_id"]].jobs = row["n"]
    stored = Artifact.objects.values("job__owner_id").annotate(b=Sum("bytes"))
    for row in stored:
        if row["job__owner_id"] in rows:
            rows[row["job__owner_id"]].storage_bytes = row["b"] or 0
    defaults = household_limits()
    overrides = {p.user_id: p for p in PersonQuota.objects.all()}
    for pk, row in rows.items():
        row.limits = _resolve(defaults, overrides.get(pk))
    return sorted(rows.values(), key=lambda r: (-r.device_s, -r.storage_bytes, r.user.username))


def results_of(*, user: Any | None, limit: int = 50) -> list[Job]:
    """Finished jobs that keep result files, largest first, each with ``result_bytes`` and ``result_files``:
    ``user``'s own, or everyone's (``user=None``, admins)."""
    # From the files' side: only jobs that keep files are read. Grouping every job of the person by all its
    # columns to find them took 166 ms at 100k jobs (20k of one person's) for an empty list.
    files = Artifact.objects.exclude(job__state__in=ACTIVE_STATES).filter(job__trashed_at__isnull=True)
    if user is not None:
        files = files.filter(job__owner_id=getattr(user, "pk", user))
    sizes = list(
        files.values("job_id")
        .annotate(b=Sum("bytes"), n=Count("pk"))
        .order_by("-b", "-job_id")
        .values_list("job_id", "b", "n")[:limit]
    )
    jobs = Job.objects.select_related("owner").in_bulk([job_id for job_id, _b, _n in sizes])
    out = []
    for job_id, size, count in sizes:
        if (job := jobs.get(job_id)) is not None:  # (deleted in between: left out)
            job.result_bytes, job.result_files = size or 0, count
            out.append(job)
    return out


__all__ = [
    "LABELS",
    "LIFT_ADMINS_ONLY",
    "Limits",
    "Usage",
    "Verdict",
    "device_use_record",
    "group_usage",
    "groups_of",
    "household_limits",
    "limits_for",
    "parse_limit",
    "quota_check",
    "quota_set",
    "can_delete_results",
    "results_delete",
    "results_of",
    "stricter",
    "usage_days",
    "usage_for",
    "usage_people",
]

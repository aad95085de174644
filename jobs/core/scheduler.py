"""Which job a device runs next: pure functions over rows plus a snapshot with an injectable clock.

Policy (architecture.md "Scheduling policy"), in order:
1. A paused queue or a locked/unreachable/unauthorised device starts nothing.
2. Windows: ``asap``; ``tonight`` = the device's night window in its own time zone; ``not_before``. A job in
   backoff (``retry_after``: unreachable device, polite wait) is not eligible until then.
3. Polite mode by day: a job that would have to evict a model the hub did not load (someone's chat) waits,
   unless its owner unticked "polite". In the vault's nightly summary window, a job that would have to evict
   the loaded summary model waits too, unless the device's ``may_evict_summary_model`` setting allows it.
4. Base order: admin priority (run next / reorder), then fair share (the owner's device-seconds on every device
   of the hub over the last 7 days, least first), then FIFO.
5. Model affinity: among the first K+1 eligible jobs, prefer one whose model is already loaded; it jumps at most
   K places, and a job that has been jumped K times is never jumped again (no starvation).
6. Length, in the pool: among those, the longest job for any device goes first, under the same bound: the short
   ones then come at the end, where the pool evens its devices out with them.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any
from zoneinfo import ZoneInfo

from django.db.models import Sum
from django.utils import timezone

from devices.capabilities import NPU_MARGIN
from devices.models import Device
from jobs.models import Job

K_MAX_JUMP = 3
FAIR_WINDOW = dt.timedelta(days=7)
BLOCKING_DEVICE_STATES = Device.QUEUE_BLOCKING_STATES


@dataclass(frozen=True)
class DeviceSnapshot:
    device_id: int
    now: dt.datetime
    state: str = "online"
    paused: bool = False
    night_start: dt.time = dt.time(23, 0)
    night_end: dt.time = dt.time(7, 0)
    time_zone: str = "UTC"
    loaded: frozenset[str] = frozenset()
    foreign_loaded: frozenset[str] = frozenset()  # running models the hub did not load
    npu_free: int | None = None
    npu_cost: dict[str, int] = field(default_factory=dict)
    npu_total: int | None = None
    usage: dict[int, float] = field(default_factory=dict)  # owner id -> device-seconds in FAIR_WINDOW
    # The vault's nightly memory summaries (device capabilities) and whether renders may unload their model.
    summary_start: dt.time | None = None
    summary_end: dt.time | None = None
    summary_model: str | None = None
    may_evict_summary: bool = False


# -- device and windows --------------------------------------------------------------------------------------


def blocked_reason(snap: DeviceSnapshot) -> str:
    """Why nothing may start on the device now ("" when something may)."""
    if snap.paused:
        return "The queue is paused by an admin."
    if snap.state in BLOCKING_DEVICE_STATES:
        return {
            "locked": "The device is locked after a restart.",
            "unreachable": "The device cannot be reached.",
            "auth_failed": "The device rejects the hub's API key.",
        }[snap.state]
    return ""


def in_night(now: dt.datetime, start: dt.time, end: dt.time, tz: str) -> bool:
    local = now.astimezone(ZoneInfo(tz)).time()
    if start <= end:
        return start <= local < end
    return local >= start or local < end  # crosses midnight (23:00-07:00)


def next_night_start(now: dt.datetime, start: dt.time, end: dt.time, tz: str) -> dt.datetime:
    """``now`` if the window is open, else the next time it opens (aware, in UTC-compatible form)."""
    if in_night(now, start, end, tz):
        return now
    zone = ZoneInfo(tz)
    local = now.astimezone(zone)
    candidate = local.replace(hour=start.hour, minute=start.minute, second=0, microsecond=0)
    if candidate <= local:
        candidate += dt.timedelta(days=1)
    return candidate.astimezone(dt.UTC)


def opens_at(job: Any, snap: DeviceSnapshot) -> dt.datetime:
    """The earliest time ``job`` may start by its window and backoff alone."""
    t = snap.now
    if job.when == "tonight":
        t = next_night_start(snap.now, snap.night_start, snap.night_end, snap.time_zone)
    elif job.when == "not_before" and job.not_before and job.not_before > t:
        t = job.not_before
    if job.retry_after and job.retry_after > t:
        t = job.retry_after
    # A job waiting for another's result (``jobs.core.links.held_on``): released at its parent's predicted finish.
    release = getattr(job, "release_at", None)
    if release is not None and release > t:
        t = release
    return t


def window_open(job: Any, snap: DeviceSnapshot) -> bool:
    return opens_at(job, snap) <= snap.now


def polite_blocked(job: Any, snap: DeviceSnapshot) -> bool:
    """By day, a polite job that would have to evict someone else's model waits for the night (or the owner)."""
    if not job.polite or job.model_id in snap.loaded or not snap.foreign_loaded:
        return False
    if in_night(snap.now, snap.night_start, snap.night_end, snap.time_zone):
        return False
    cost = snap.npu_cost.get(job.model_id)
    if cost is None or snap.npu_free is None:
        return False  # unknown: let the runner find out (ensure_loaded(polite=True) refuses, then backoff)
    return snap.npu_free - cost < NPU_MARGIN


def summary_blocked(job: Any, snap: DeviceSnapshot) -> bool:
    """In the summary window, a job that would have to evict the loaded summary model waits (device setting).

    Mirrors ``polite_blocked``, but the device's setting decides, not the job's owner.
    """
    if snap.may_evict_summary or snap.summary_model not in snap.loaded or job.model_id in snap.loaded:
        return False
    if snap.summary_start is None or snap.summary_end is None:
        return False
    if not in_night(snap.now, snap.summary_start, snap.summary_end, snap.time_zone):
        return False
    cost = snap.npu_cost.get(job.model_id)
    if cost is None or snap.npu_free is None:
        return False  # unknown, as in polite_blocked: don't hold the queue on a guess
    return snap.npu_free - cost < NPU_MARGIN


def eligible(job: Any, snap: DeviceSnapshot) -> bool:
    return window_open(job, snap) and not polite_blocked(job, snap) and not summary_blocked(job, snap)


def earliest_start(job: Any, snap: DeviceSnapshot) -> dt.datetime:
    """When ``job`` may start at the soonest: its window and backoff, and, for a polite job that would evict
    someone's model by day, the night window (so the plan and the submit form say what will really happen)."""
    t = opens_at(job, snap)
    if t <= snap.now and polite_blocked(job, snap):
        t = next_night_start(snap.now, snap.night_start, snap.night_end, snap.time_zone)
    return t


def held_after(snap: DeviceSnapshot, loaded: tuple[str, ...], model_id: str) -> tuple[str, ...]:
    """What the device holds after it ran a job of ``model_id``, holding ``loaded`` before (the one used last at
    the end). A device keeps several models while its NPU has room for them (a Tiiny: the least recently used goes
    first when a launch needs room, and the hub keeps ``NPU_MARGIN`` units to spare, ``devices.clients.eviction``);
    a model whose NPU units the device never listed is taken to need all of it, as is every model of a device that
    does not say its NPU's size (TensorSharp). The plans count a model load wherever this does not hold the model."""
    if model_id in loaded:
        return (*(m for m in loaded if m != model_id), model_id)
    total, costs = snap.npu_total, snap.npu_cost
    if total is None or model_id not in costs:
        return (model_id,)
    keep = list(loaded)
    while keep and sum(costs.get(m, 0) for m in keep) + costs[model_id] + NPU_MARGIN > total:
        keep.pop(0)
    return (*keep, model_id)


# -- order ---------------------------------------------------------------------------------------------------


def base_key(job: Any, snap: DeviceSnapshot) -> tuple:
    return (-job.priority, snap.usage.get(job.owner_id, 0.0), job.created, job.pk)


def base_order(jobs: Iterable[Any], snap: DeviceSnapshot) -> list[Any]:
    return sorted(jobs, key=lambda j: base_key(j, snap))


def pick(
    candidates: Sequence[Any], loaded: Iterable[str], k: int = K_MAX_JUMP
) -> tuple[Any | None, list[Any]]:
    """From eligible jobs in base order: the next one and the jobs it jumps over (at most ``k``).

    A job may jump only jobs that have been jumped fewer than ``k`` times. Among the jobs it may reach, one whose
    model is loaded goes first (no load). Among those, in a lane of the pool, the longest pool job goes first: the
    short ones then end the night, when the pool evens its devices out with them (``jobs.queue.balance``); a
    pinned job never jumps for its length.
    """
    if not candidates:
        return None, []
    loaded = set(loaded)
    reach = [candidates[0]]
    for job in candidates[1 : k + 1]:
        if any(j.bypassed >= k for j in reach):
            break
        reach.append(job)
    held = [j for j in reach if j.model_id in loaded]
    if not held:
        return candidates[0], []
    chosen = held[0]
    if _pooled(chosen):  # the first of the longest: held[0] itself unless a pool job after it is longer
        chosen = max((j for j in held if _pooled(j)), key=_length)
    i = next(i for i, j in enumerate(candidates) if j is chosen)
    return chosen, list(candidates[:i])


def _pooled(job: Any) -> bool:
    return not getattr(job, "pinned", True)


def _length(job: Any) -> float:
    return float(getattr(job, "estimate_s", None) or 0.0)


def next_job(snap: DeviceSnapshot, jobs: Iterable[Any], k: int = K_MAX_JUMP) -> tuple[Any | None, list[Any]]:
    """The job to start now (or None) and the jobs it jumps. ``jobs`` = the device's waiting jobs."""
    if blocked_reason(snap):
        return None, []
    candidates = [j for j in base_order(jobs, snap) if eligible(j, snap)]
    return pick(candidates, snap.loaded, k)


def order_with_reasons(
    snap: DeviceSnapshot, jobs: Iterable[Any], k: int = K_MAX_JUMP
) -> list[tuple[Any, str]]:
    """The waiting queue in run order, each job with why it sits where it does ("" for plain arrival order).

    Simulates repeated picks: after each pick the device holds that job's model too (``held_after``). Jobs that
    can't start yet (window, backoff, a polite wait for the night) follow in the order they may start (ties in base
    order).
    """
    rest = base_order(jobs, snap)
    ready = [j for j in rest if earliest_start(j, snap) <= snap.now]
    later = sorted(
        (j for j in rest if earliest_start(j, snap) > snap.now),
        key=lambda j: (earliest_start(j, snap), *base_key(j, snap)),
    )
    out: list[tuple[Any, str]] = []
    loaded = tuple(sorted(snap.loaded))
    bypassed = {j.pk: j.bypassed for j in ready}
    while ready:
        # pick() reads the first k+1 candidates only: wrapping the whole rest on every round made the plan
        # quadratic in the queue's length (150 waiting jobs: 11,000 wrappers per plan).
        view = [_Bypass(j, bypassed[j.pk]) for j in ready[: k + 1]]
        head_held = view[0].model_id in loaded
        chosen, jumped = pick(view, loaded, k)
        job = chosen.job
        for j in jumped:
            bypassed[j.job.pk] += 1
        ready.remove(job)
        out.append((job, _jump_reason(jumped, head_held)))
        loaded = held_after(snap, loaded, job.model_id)
    out += [(job, _later_reason(job, snap)) for job in later]
    paused = "paused by an admin" if snap.paused else ""
    most_after = _most_used_after(out, snap)
    return [
        (job, paused or why or _ready_reason(job, i, out, snap, most_after))
        for i, (job, why) in enumerate(out)
    ]


def _jump_reason(jumped: list[Any], head_held: bool) -> str:
    if not jumped:
        return ""
    if head_held:  # the job it went ahead of needed no load either: it went first for its length
        return "runs first: a long render early, so that short ones end the night"
    return "runs first: its model is already loaded"


def _later_reason(job: Any, snap: DeviceSnapshot) -> str:
    if (release := getattr(job, "release_at", None)) is not None and release > snap.now:
        waits = ", ".join(f"job {pk}" for pk in getattr(job, "parent_ids", None) or ())
        return f"waits for the result of {waits}" if waits else "waits for another job's result"
    if job.retry_after and job.retry_after > snap.now:
        return "waits to try again (the device was busy or away)"
    if job.when == "tonight":
        return "waits for the night window"
    if job.when == "not_before" and job.not_before and job.not_before > snap.now:
        return "waits for its start time"
    return "waits for the night window: by day it would unload a model someone else is using"


def _ready_reason(
    job: Any,
    index: int,
    order: Sequence[tuple[Any, str]],
    snap: DeviceSnapshot,
    most_after: Sequence[float] | None = None,
) -> str:
    """Why a ready job is where the base order put it: an admin's move, or fair share against an older job."""
    if summary_blocked(job, snap):
        return "waits for the device's nightly upkeep to end: renders may not interrupt it"
    if job.priority > 0:
        return "moved up by an admin"
    mine = snap.usage.get(job.owner_id, 0.0)
    # Nobody after it has used more: no fair-share reason, without the scan (quadratic in the queue's length).
    if mine >= (most_after[index] if most_after is not None else float("inf")):
        return ""
    for other, _why in order[index + 1 :]:
        if other.priority == job.priority and other.created < job.created and other.owner_id != job.owner_id:
            theirs = snap.usage.get(other.owner_id, 0.0)
            if mine < theirs:
                return f"fair share: {_owner_name(other)} has used more this week"
    return ""


def _most_used_after(order: Sequence[tuple[Any, str]], snap: DeviceSnapshot) -> list[float]:
    """For each place in ``order``, the most device time any owner of a later job has used (-inf: none later)."""
    out, most = [0.0] * len(order), float("-inf")
    for i in range(len(order) - 1, -1, -1):
        out[i] = most
        most = max(most, snap.usage.get(order[i][0].owner_id, 0.0))
    return out


def _owner_name(job: Any) -> str:
    owner = getattr(job, "owner", None)
    return str(owner) if owner is not None else "someone"


@dataclass
class _Bypass:
    job: Any
    bypassed: int

    @property
    def model_id(self) -> str:
        return self.job.model_id

    @property
    def pinned(self) -> bool:
        return getattr(self.job, "pinned", True)

    @property
    def estimate_s(self) -> float | None:
        return getattr(self.job, "estimate_s", None)


# -- snapshot from the database --------------------------------------------------------------------------------


def snapshot_for(
    device_id: int,
    *,
    now: dt.datetime | None = None,
    device: Device | None = None,
    usage: dict[int, float] | None = None,
) -> DeviceSnapshot:
    """The device's scheduling facts now; ``device``: its row as the caller just read it (saves reading it again);
    ``usage``: ``fair_usage(now)`` when the caller has it (the pool planner reads it once for every device)."""
    now = now or timezone.now()
    if device is None or device.pk != device_id:
        device = Device.objects.get(pk=device_id)
    loaded = _loaded_models(device)
    vault = (device.capabilities or {}).get("vault") or {}
    return DeviceSnapshot(
        device_id=device_id,
        now=now,
        state=device.state,
        paused=device.queue_paused,
        night_start=device.night_start,
        night_end=device.night_end,
        time_zone=device.time_zone or "UTC",
        loaded=frozenset(loaded),
        foreign_loaded=frozenset(loaded - set(device.hub_loaded_models or [])),
        npu_free=_npu_free(device),
        npu_cost=_npu_costs(device),
        npu_total=device.npu_units_total,
        usage=fair_usage(now) if usage is None else usage,
        summary_start=_hour(vault.get("summary_start_hour")),
        summary_end=_hour(vault.get("summary_end_hour")),
        summary_model=vault.get("summary_model"),
        may_evict_summary=device.may_evict_summary_model,
    )


def _loaded_models(device: Device) -> set[str]:
    """The models running on the device, by its last reading."""
    return {str(m.get("model_id")) for m in device.loaded_models or [] if m.get("model_id")}


def _npu_costs(device: Device) -> dict[str, int]:
    """Each model's NPU units, as the device's capabilities state them."""
    models = (device.capabilities or {}).get("models", [])
    return {m["id"]: int(m["npu_usage"]) for m in models if m.get("npu_usage") is not None}


def _npu_free(device: Device) -> int | None:
    if device.npu_units_total is None or device.npu_units_used is None:
        return None
    return device.npu_units_total - device.npu_units_used


def fair_usage(now: dt.datetime) -> dict[int, float]:
    """Owner id -> device-seconds of their jobs that finished within ``FAIR_WINDOW``, on every device: fair
    share is the household's, whichever device of the pool did the work."""
    usage = (
        Job.objects.filter(finished_at__gte=now - FAIR_WINDOW)
        .values_list("owner_id")
        .annotate(s=Sum("device_seconds"))
        .values_list("owner_id", "s")
    )
    return {owner_id: float(seconds or 0) for owner_id, seconds in usage}


def _hour(hour: int | None) -> dt.time | None:
    return dt.time(hour) if hour is not None else None

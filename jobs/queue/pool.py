"""The pool: jobs that may run on any capable device ("any device": ``Job.pinned`` off), and the lane each waits in.

A pool job waits in one device's lane at a time (``Job.device``): the lane where it should finish first. The
device's own scheduler orders its lane as ever (``jobs.core.scheduler``), its dispatch claims from it
(``jobs.queue.dispatch``), and its plan times it (``jobs.queue.eta``). ``rebalance`` puts each waiting pool job in
its lane again whenever that may have changed: a job is queued or ends, a device frees, goes away or comes back,
and on every reconcile round (the safety net).

How a lane is chosen: the waiting jobs of the pool's devices are taken in the scheduler's base order (an admin's
priority, fair share over the whole household, arrival; jobs that can't start yet after those that can); a pinned
job fills its own device's lane, and each pool job goes to the device of its pool, usable now, where it would
finish first: after the work already in that lane (its running job, the jobs placed before), plus a model load
where the device would have to load the job's model (the load time the hub learned there, else the one the device
lists, with the wait after a load the hub learned there: ``devices.loads.device_load_costs``; else ``LOAD_SECONDS``). So a free device takes the next job at once, unless a busy
device holding the model finishes it sooner than the free one could load it (one load instead of two), and no job
waits behind others on one device while another could finish it sooner. A second pass (``jobs.queue.balance``)
then moves or swaps jobs near the ends of the lanes while that ends the night sooner: the first pass sees only
the jobs before each one, and could leave the last long render on one device while the others sit idle. Both passes
are greedy or local, so a plan made afresh can end the night later than the lanes it would replace: those lanes, as
they stand and evened out the same way, are kept where they end the night sooner and leave no device that is free
now without the work the fresh plan gives it (``_keeps``).

A job's pool is the devices that can do exactly its request; it follows the devices as they are added or gain or
lose a model (``jobs.queue.membership``).

A device that is away (locked, unreachable), paused, or refuses the hub's key is not usable: its pool jobs move to
the others at once, and come back by the same rule once it is usable again. Its pinned jobs stay and wait, saying
why. A render in flight on a device that went away keeps its claim while the device may still finish it; after
``JOBS_DEVICE_LOST_S`` a pool job's render counts as lost (``lost_renders``): the job is interrupted and re-queued
once, as after any interruption, and this rule sends it to another device.
"""

from __future__ import annotations

import datetime as dt
import logging
from dataclasses import dataclass, field
from typing import Any

from django.conf import settings
from django.utils import timezone

from devices.loads import device_load_costs
from devices.models import Device
from jobs.core.changes import replan
from jobs.core.links import held_on
from jobs.core.scheduler import (
    DeviceSnapshot,
    base_key,
    blocked_reason,
    earliest_start,
    fair_usage,
    held_after,
    snapshot_for,
)
from jobs.kinds.table import style_of
from jobs.models import ACTIVE_STATES, PENDING_STATES, WAITING_STATES, Job, LostRender
from jobs.queue import enqueue
from jobs.queue.balance import Slot, ends_of, even_out
from jobs.queue.eta import LOAD_SECONDS, Estimator, remaining_seconds
from jobs.queue.membership import pool_of, refit

logger = logging.getLogger("jobs.queue.pool")

#: Two lanes whose finishes for a job are this close (seconds) are as good: the job stays where it waits.
SAME_FINISH = 0.05


@dataclass
class Lane:
    """One device as the pool planner sees it: whether it may start work, when it is free, what it holds."""

    device: Device
    snap: DeviceSnapshot
    free_at: float  # a timestamp
    loaded: tuple[str, ...] = ()  # the models it holds, the one used last at the end
    load_s: dict[str, float] = field(default_factory=dict)  # model -> its load cost here (devices.loads)

    def load_seconds(self, model_id: str) -> float:
        """What loading ``model_id`` costs this device (``LOAD_SECONDS`` for one it never said or showed)."""
        return self.load_s.get(model_id, LOAD_SECONDS)

    @property
    def usable(self) -> bool:
        return not blocked_reason(self.snap)


def _lanes(device_ids: set[int], now: dt.datetime) -> dict[int, Lane]:
    usage = fair_usage(now)
    lanes = {}
    for device in Device.objects.filter(pk__in=device_ids):
        snap = snapshot_for(device.pk, now=now, device=device, usage=usage)
        lanes[device.pk] = Lane(
            device=device,
            snap=snap,
            free_at=now.timestamp(),
            loaded=tuple(sorted(snap.loaded)),
            load_s=device_load_costs(device),
        )
    for job in Job.objects.filter(device_id__in=device_ids, state__in=ACTIVE_STATES).order_by("started_at"):
        lane = lanes[job.device_id]
        left = max(remaining_seconds(job, now=now), 0.0)
        lane.free_at = max(lane.free_at, now.timestamp() + left)
        lane.loaded = held_after(lane.snap, lane.loaded, job.model_id)
    return lanes


class _Estimates:
    """Render seconds of a request on a device (that device's history of the shape), each worked out once per
    plan; a job's own lane keeps the estimate it has."""

    def __init__(self, device_ids: set[int]) -> None:
        self._estimate = Estimator(device_ids)
        self._seen: dict[tuple[int, int], float] = {}

    def __call__(self, job: Any, lane: Lane) -> float:
        key = (job.pk, lane.device.pk)
        seconds = self._seen.get(key)
        if seconds is None:
            if (job.pinned or lane.device.pk == job.device_id) and job.estimate_s:
                seconds = float(job.estimate_s)
            else:
                seconds = self._estimate(
                    device_id=lane.device.pk,
                    device_kind=lane.device.kind,
                    kind=job.kind,
                    model_id=job.model_id,
                    params=job.params,
                )
            self._seen[key] = seconds
        return seconds


class _Stepper:
    """A lane after it ran a job, in timestamps: it starts when the lane frees and its window opens, and takes its
    render here plus a model load where the lane would not hold its model (``held_after``). Both passes step
    through the lanes with it: the first (``_first_pass``) and ``jobs.queue.balance``'s."""

    def __init__(self, lanes: dict[int, Lane], seconds_on: _Estimates) -> None:
        self.lanes, self.seconds_on = lanes, seconds_on
        self._opens: dict[tuple[int, int], float] = {}
        self._holding: dict[tuple[int, tuple[str, ...], str], tuple[str, ...]] = {}

    def __call__(
        self, pk: int, job: Any, free: float, loaded: tuple[str, ...]
    ) -> tuple[float, tuple[str, ...]]:
        lane = self.lanes[pk]
        opens = self._opens.get((pk, job.pk))
        if opens is None:
            opens = self._opens[(pk, job.pk)] = earliest_start(job, lane.snap).timestamp()
        load = 0.0 if job.model_id in loaded else lane.load_seconds(job.model_id)
        after = self._holding.get((pk, loaded, job.model_id))
        if after is None:
            after = self._holding[(pk, loaded, job.model_id)] = held_after(lane.snap, loaded, job.model_id)
        return max(free, opens) + self.seconds_on(job, lane) + load, after


def _take(job: Any, lane: Lane, step: _Stepper) -> None:
    """The job joins the lane: the device is busy until its predicted finish, holding its model."""
    lane.free_at, lane.loaded = step(lane.device.pk, job, lane.free_at, lane.loaded)


def candidates(job: Any, lanes: dict[int, Lane]) -> list[Lane]:
    """The usable lanes a waiting job may go to: its own device's for a pinned job, else its pool's."""
    ids = [job.device_id] if job.pinned else pool_of(job)
    return [lanes[pk] for pk in ids if pk in lanes and lanes[pk].usable]


def best_lane(job: Any, lanes: dict[int, Lane], step: _Stepper) -> Lane | None:
    """Where the pool job would finish first (its current lane on a tie: no move for nothing); None when no
    device of its pool may start work now."""
    choices = candidates(job, lanes)
    if not choices:
        return None
    finish = {lane.device.pk: step(lane.device.pk, job, lane.free_at, lane.loaded)[0] for lane in choices}
    first = min(choices, key=lambda lane: (finish[lane.device.pk], lane.device.pk))
    if job.device_id in finish and finish[job.device_id] - finish[first.device.pk] <= SAME_FINISH:
        return lanes[job.device_id]
    return first


def _in_order(jobs: list[Job], lanes: dict[int, Lane], now: dt.datetime) -> list[Job]:
    """The scheduler's base order over the pool, jobs that may start now first, the others by when they may."""
    any_snap = next(iter(lanes.values())).snap

    def opens(job: Job) -> dt.datetime:
        times = [earliest_start(job, lane.snap) for lane in candidates(job, lanes)]
        return min(times) if times else now

    ready = sorted((j for j in jobs if opens(j) <= now), key=lambda j: base_key(j, any_snap))
    later = sorted((j for j in jobs if opens(j) > now), key=lambda j: (opens(j), *base_key(j, any_snap)))
    return ready + later


@dataclass(frozen=True)
class Move:
    """A waiting pool job's new lane, and its render's estimate there (that device's own history of the shape)."""

    old: int
    new: int
    estimate_s: float


def assign(now: dt.datetime | None = None) -> dict[int, Move]:
    """Where each waiting pool job should wait now: ``{job: Move}`` for the jobs that should move (nothing is
    written)."""
    now = now or timezone.now()
    pool_jobs = list(
        Job.objects.filter(state__in=WAITING_STATES, pinned=False).select_related("owner").order_by()
    )
    # Children waiting for a result: placed like any job that may start at its parent's predicted finish.
    pool_jobs += held_on(None, now=now, pinned=False)
    if not pool_jobs:
        return {}
    device_ids = {pk for job in pool_jobs for pk in (job.pool or [])} | {job.device_id for job in pool_jobs}
    lanes = _lanes(device_ids, now)
    if not lanes:
        return {}
    pinned = list(Job.objects.filter(state__in=WAITING_STATES, pinned=True, device_id__in=lanes).order_by())
    pinned += held_on(set(lanes), now=now, pinned=True)
    seconds_on = _Estimates(set(lanes))
    step = _Stepper(lanes, seconds_on)
    slots = _plan(_in_order(pool_jobs + pinned, lanes, now), lanes, step, now)
    return {
        slot.job.pk: Move(slot.job.device_id, pk, seconds_on(slot.job, lanes[pk]))
        for pk, lane_slots in slots.items()
        for slot in lane_slots
        if pk != slot.job.device_id
    }


def _plan(
    order: list[Job], lanes: dict[int, Lane], step: _Stepper, now: dt.datetime
) -> dict[int, list[Slot]]:
    """The lanes for ``order``: made afresh (``_first_pass``, then ``even_out``), unless the lanes as they stand,
    evened out the same way, are better (``_keeps``)."""
    origin = {pk: (lane.free_at, lane.loaded) for pk, lane in lanes.items()}
    gain = _gain(lanes, now)
    slots = _first_pass(order, lanes, step)
    even_out(slots, origin, step, gain_s=gain)
    if all(slot.job.device_id == pk for pk, lane_slots in slots.items() for slot in lane_slots):
        return slots  # the fresh plan is the lanes as they stand
    for pk, (free_at, loaded) in origin.items():  # the first pass stepped the lanes on
        lanes[pk].free_at, lanes[pk].loaded = free_at, loaded
    kept = _first_pass(order, lanes, step, stay=True)
    even_out(kept, origin, step, gain_s=gain)
    return kept if _keeps(kept, slots, origin, step, gain, now) else slots


def _first_pass(
    order: list[Job], lanes: dict[int, Lane], step: _Stepper, *, stay: bool = False
) -> dict[int, list[Slot]]:
    """Each job, in the household's order, into the lane where it would finish first (``best_lane``); ``stay``:
    into the lane it waits in where that device may start it (a new job, or one whose device went away, goes where
    it would finish first)."""
    slots: dict[int, list[Slot]] = {pk: [] for pk in lanes}
    for rank, job in enumerate(order):
        if stay and job.device_id in {c.device.pk for c in candidates(job, lanes)}:
            lane = lanes[job.device_id]
        else:
            lane = best_lane(job, lanes, step)
        if lane is None:
            continue  # its device (or every device of its pool) is away or paused: it waits where it is
        _take(job, lane, step)
        may = frozenset(c.device.pk for c in candidates(job, lanes)) if not job.pinned else frozenset()
        slots[lane.device.pk].append(Slot(rank, job, may | {lane.device.pk}))
    return slots


def _keeps(
    kept: dict[int, list[Slot]],
    placed: dict[int, list[Slot]],
    origin: dict[int, tuple[float, tuple[str, ...]]],
    step: _Stepper,
    gain_s: float,
    now: dt.datetime,
) -> bool:
    """Whether the lanes as they stand (``kept``, evened out) beat the plan made afresh (``placed``): they end the
    night at least ``gain_s`` sooner, and leave no device that is free now without work the fresh plan gives it.

    A plan made afresh places the jobs one by one and then evens the ends out by single changes; it can end the
    night later than the lanes it replaces (bench_pool, 3 Tiinys: a plan at +36 s ended the night at 58.2 s, the
    next, made afresh 4 s later, at 59.2 s, and the night did end at 59.6 s)."""
    kept_end = max(ends_of(kept, origin, step).values(), default=0.0)
    if kept_end > max(ends_of(placed, origin, step).values(), default=0.0) - gain_s:
        return False
    free_now = {pk for pk, (free_at, _loaded) in origin.items() if free_at <= now.timestamp()}
    return all(kept[pk] or not placed[pk] for pk in free_now)


def _gain(lanes: dict[int, Lane], now: dt.datetime) -> float:
    """What a change between lanes must win: a thousandth of the work ahead, at least SAME_FINISH (a move for
    less is churn: pages redrawn, a job's "waiting on" changing back and forth)."""
    ahead = max(lane.free_at for lane in lanes.values()) - now.timestamp()
    return max(SAME_FINISH, ahead / 1000)


def rebalance(now: dt.datetime | None = None) -> set[int]:
    """Move each waiting pool job to its lane (``assign``); a move holds only while the job still waits where it
    was read. Returns the devices whose lanes changed; their plans are recomputed with this change's pushes."""
    changed: set[int] = set()
    for job_id, move in assign(now).items():
        moved = Job.objects.filter(pk=job_id, device_id=move.old, state__in=PENDING_STATES).update(
            device_id=move.new, estimate_s=move.estimate_s
        )
        if moved:
            changed |= {move.old, move.new}
    for device_id in changed:
        replan(device_id)
    return changed


def rebalance_and_wake(now: dt.datetime | None = None, *, besides: int | None = None) -> set[int]:
    """``rebalance``, then a dispatch for each idle device whose lane changed (``besides``: the one the caller
    dispatches itself)."""
    try:
        changed = rebalance(now)
    except Exception:  # the pool's lanes are an optimisation of where jobs wait: never a reason to stop
        logger.exception("rebalancing the pool failed")
        return set()
    idle = (
        changed
        - {besides}
        - set(
            Job.objects.filter(device_id__in=changed, state__in=ACTIVE_STATES).values_list(
                "device_id", flat=True
            )
        )
    )
    for device_id in sorted(idle):
        enqueue.send("dispatch", device_id)
    return changed


def device_state_changed(*, device_id: int, state: str) -> None:
    """A device went away or came back (the device layer's hook, after commit): its pool jobs move at once; back,
    it first stops any render the hub gave up on while it was away (``jobs.queue.engine.stop_lost_renders``)."""
    if state == Device.State.ONLINE and LostRender.objects.filter(device_id=device_id).exists():
        enqueue.send("stop_lost_renders", device_id)
    rebalance_and_wake()


def device_capabilities_changed(*, device_id: int) -> None:
    """What a device reports it can do changed (the device layer's hook, after commit): the waiting pool jobs it
    can run now take it into their pools, those it no longer can let it go (``jobs.queue.membership``), and they
    move to their lanes at once."""
    if refit(device_id):
        rebalance_and_wake()


# -- a render lost with its device -------------------------------------------------------------------------------


def device_lost_after() -> dt.timedelta:
    return dt.timedelta(seconds=settings.JOBS_DEVICE_LOST_S)


def lost_renders(active: list[Job], now: dt.datetime) -> list[Job]:
    """The pool jobs whose render is in flight on a device that has been away for ``JOBS_DEVICE_LOST_S``: their
    device may still be rendering them, but the household's work should move on (a pinned job waits for its
    device instead: nowhere else may run it)."""
    lost_since = now - device_lost_after()
    candidates = [
        job
        for job in active
        if not job.pinned
        and job.device.state in Device.QUEUE_BLOCKING_STATES
        and job.device.state_changed_at is not None
        and job.device.state_changed_at <= lost_since
    ]
    if not candidates:
        return []
    # Only where another device of its pool may take it now: else the device that went away is still its best
    # hope (back with the render finished), and giving up would only throw its progress away.
    others = {pk for job in candidates for pk in job.pool or []}
    usable = set(
        Device.objects.filter(pk__in=others, queue_paused=False)
        .exclude(state__in=Device.QUEUE_BLOCKING_STATES)
        .values_list("pk", flat=True)
    )
    return [job for job in candidates if (set(job.pool or []) & usable) - {job.device_id}]


def seen_away(job: Job) -> bool:
    """Whether a request of the job's own, made ``JOBS_DEVICE_LOST_S`` after its device went away, still found it
    away (``away_seen_at``, noted by the engine's poll): a render the device has, followed by its poll chain, is
    given up only then (``jobs.queue.reconcile.give_up_lost_renders``). The device's state is only as fresh as the
    hub's last request to it: a worker that died made none, and the device may be back meanwhile with the render
    alive (bench_pool's chaos night: a render given up as the worker restarted, 4 s after a 3 s lock had ended)."""
    if not job.remote_id or style_of(job.device.kind, job.kind) != "poll":
        return True  # nothing on the device to keep: its state is all there is
    seen = job.remote_data.get("away_seen_at") if isinstance(job.remote_data, dict) else None
    return seen is not None and seen >= (job.device.state_changed_at + device_lost_after()).timestamp()

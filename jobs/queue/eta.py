"""Render-time predictions and the queue plan.

A ``RenderStat`` per (device, kind, model, shape) learns from finished jobs (EWMA of the device-seconds they
took). Until a shape has history, the seed comes from the reference's measured times: each (device kind, job
kind) has its shape and its seed in ``jobs.kinds.estimates``, and ``jobs.kinds.table`` says which pair uses which.
"""

from __future__ import annotations

import datetime as dt
import logging
from typing import Any

from django.db import transaction
from django.utils import timezone

from devices.loads import device_load_costs
from devices.models import Device
from jobs.core.changes import Changes, plan_changed
from jobs.core.links import held_on
from jobs.core.scheduler import base_key, earliest_start, held_after, order_with_reasons, snapshot_for
from jobs.kinds.table import seed_seconds, shape_of
from jobs.models import ACTIVE_STATES, PENDING_STATES, Job, JobLink, RenderStat, waiting_on

logger = logging.getLogger("jobs")

EWMA_ALPHA = 0.3
LOAD_SECONDS = 30.0  # a model that is not loaded yet: launch + warm-up


def estimate(*, device_id: int, device_kind: str, kind: str, model_id: str, params: dict[str, Any]) -> float:
    """A request's render seconds on a device: what the device taught the hub of its shape, else the seed."""
    return Estimator([device_id])(
        device_id=device_id, device_kind=device_kind, kind=kind, model_id=model_id, params=params
    )


class Estimator:
    """``estimate`` for many requests on a few devices, their learned render times read in one query (the pool's
    planner asks for every waiting job on every device of its pool)."""

    def __init__(self, device_ids: list[int] | set[int]) -> None:
        stats = RenderStat.objects.filter(device_id__in=device_ids, samples__gt=0)
        self._learned = {
            (device_id, kind, model_id, shape): mean_s
            for device_id, kind, model_id, shape, mean_s in stats.values_list(
                "device_id", "kind", "model_id", "shape", "mean_s"
            )
        }

    def __call__(
        self, *, device_id: int, device_kind: str, kind: str, model_id: str, params: dict[str, Any]
    ) -> float:
        shape = shape_of(device_kind, kind, model_id, params)
        learned = self._learned.get((device_id, kind, model_id, shape))
        return learned if learned is not None else seed_seconds(device_kind, kind, model_id, params)


def learn(job: Any) -> None:
    """Fold a finished job's device time into its shape's EWMA (first sample replaces the seed): without the
    model load the hub made for it (``load_s``, noted by the engine) and the wait after it until the model took
    requests (``ready_wait_s``: a Tiiny's readiness window), which the plan counts on their own where a load is
    due (``devices.loads.device_load_costs``); learned with them, the first job after a load taught its shape a
    render a whole load too long, and a short one's by half again the window.

    The jobs waiting on that device with that shape take the new mean as their estimate: theirs was the mean when
    they were queued there, and the plans (the device's, the pool's) count each job's estimate. Kept as it was, a
    shape that rendered faster than its first samples said stayed too long in the plans all night (bench_pool: two
    videos 8 % too long at the end of one device's lane, which ended the night a second early)."""
    data = job.remote_data if isinstance(job.remote_data, dict) else {}
    try:
        render_s = float(job.device_seconds or 0.0) - float(data.get("load_s") or 0.0)
        render_s -= float(data.get("ready_wait_s") or 0.0)
    except (TypeError, ValueError):
        render_s = float(job.device_seconds or 0.0)
    if render_s <= 0:
        return
    shape = shape_of(job.device.kind, job.kind, job.model_id, job.params)
    with transaction.atomic():
        stat, _ = RenderStat.objects.select_for_update().get_or_create(
            device_id=job.device_id, kind=job.kind, model_id=job.model_id, shape=shape
        )
        if stat.samples == 0:
            stat.mean_s = render_s
        else:
            stat.mean_s = EWMA_ALPHA * render_s + (1 - EWMA_ALPHA) * stat.mean_s
        stat.samples += 1
        stat.save()
    alike = Job.objects.filter(
        device_id=job.device_id, kind=job.kind, model_id=job.model_id, state__in=PENDING_STATES
    ).only("pk", "kind", "model_id", "params")
    same = [w.pk for w in alike if shape_of(job.device.kind, w.kind, w.model_id, w.params) == shape]
    if same:
        Job.objects.filter(pk__in=same, state__in=PENDING_STATES).update(estimate_s=stat.mean_s)


# -- a running job's time left ----------------------------------------------------------------------------------
#: Weight of the job's own progress rate once it has moved this far since it was first seen moving; below it,
#: the model's history (the estimate) counts more. The own rate never counts fully: progress is not linear.
OWN_RATE_FULL_AT = 0.25
OWN_RATE_MAX_WEIGHT = 0.9
#: Replan the device (later jobs' start times) when a running job's finish moved by more than this.
REPLAN_DRIFT_S = 20.0


#: What is left of a render is never counted below this share of what its progress says is left: a render past
#: the end its rate foretold has, by that much, gone slower than its rate (a slower last stretch).
LEFT_FLOOR_SHARE = 0.1


def remaining_seconds(job: Any, *, now: dt.datetime) -> float:
    """Time left for a running job: its own progress rate since it was first seen moving, blended with the
    model's history (the estimate scaled by what is left), as of when its progress was read (``read_at``), less
    the time since. Never 0 while work remains, whatever the estimate."""
    est = float(job.estimate_s or 0.0)
    p = min(max(float(job.progress or 0.0) / 100.0, 0.0), 1.0)
    history = est * (1.0 - p)
    read = read_at(job) or now
    since = max(0.0, (now - read).total_seconds())
    left = history
    anchor = (job.remote_data or {}).get("eta_anchor") if isinstance(job.remote_data, dict) else None
    try:
        t0, p0 = dt.datetime.fromisoformat(anchor[0]), float(anchor[1])
    except (TypeError, ValueError, IndexError):
        t0 = None
    if t0 is not None and p < 1.0:
        moved, elapsed = p - p0, (min(read, now) - t0).total_seconds()
        if moved > 0.005 and elapsed > 0:
            own = (1.0 - p) * elapsed / moved
            weight = min(OWN_RATE_MAX_WEIGHT, moved / OWN_RATE_FULL_AT)
            left = weight * own + (1.0 - weight) * history
    return max(left - since, LEFT_FLOOR_SHARE * left) if since else left


def read_at(job: Any) -> dt.datetime | None:
    """When a polled render's progress was read: the latest poll ``jobs.queue.pacing`` noted for it, while the job
    still shows what that poll read (a poll that has just read more is under way: now). The hub polls a long
    render rarely until near its end; meanwhile the device renders on, and what is left shrinks with the clock,
    not with the stored progress. None for a job with no such note (a stream's progress is written as it comes)."""
    data = job.remote_data if isinstance(job.remote_data, dict) else {}
    pace, sent = data.get("pace"), getattr(job, "submit_started_at", None)
    if not sent or not isinstance(pace, dict) or pace.get("id") != getattr(job, "remote_id", None):
        return None
    try:
        polls, seen = pace["polls"], float(pace["progress"])
        at = sent + dt.timedelta(seconds=float(polls[-1][0]))
    except (KeyError, TypeError, ValueError, IndexError):
        return None
    return at if abs(seen - float(job.progress or 0.0)) < 1e-6 else None


def note_progress(job_id: int) -> None:
    """After a running job's progress moved: remember where it was first seen moving (the anchor of its own
    rate), and replan the device when its finish drifted, so the plan's later start times move with it."""
    job = Job.objects.filter(pk=job_id).first()
    if job is None or not job.progress:
        return
    now = timezone.now()
    data = job.remote_data if isinstance(job.remote_data, dict) else {}
    if "eta_anchor" not in data:
        Job.objects.filter(pk=job_id).update(
            remote_data={**data, "eta_anchor": [now.isoformat(), round(job.progress / 100.0, 4)]}
        )
        return
    if finish_drifted(job, now=now):
        plan_device(job.device_id)


def finish_drifted(job: Any, *, now: dt.datetime) -> bool:
    """The running job's finish moved more than ``REPLAN_DRIFT_S`` from the stored plan (or it has none)."""
    finish = now + dt.timedelta(seconds=remaining_seconds(job, now=now))
    return (
        job.predicted_finish is None or abs((finish - job.predicted_finish).total_seconds()) > REPLAN_DRIFT_S
    )


def plan(
    device_id: int, *, now: dt.datetime | None = None, extra: Any = None, snap: Any = None
) -> list[tuple[Any, dt.datetime, dt.datetime]]:
    """(job, predicted start, predicted finish) for the active job then the waiting ones, in run order; each
    waiting job also gets its ``planned_reason`` (why it waits where it does, ``order_with_reasons``; its stored
    ``plan_reason`` is left as read, for ``store_plan`` to compare).

    ``extra`` is a not-yet-saved job (``jobs.queue.admission`` asks where a request would land): it takes its place
    in the order like any waiting job, so the submit form's times are the plan's times; ``snap``: the device's
    scheduling facts as admission just read them (``snapshot_for`` at ``now``), so they are read once.
    """
    now = now or timezone.now()
    device = Device.objects.get(pk=device_id)
    if snap is None or snap.device_id != device_id:
        snap = snapshot_for(device_id, now=now, device=device)
    out = []
    cursor = now
    horizon = now + PLAN_HORIZON
    loaded = tuple(sorted(snap.loaded))
    load_costs = device_load_costs(device)  # the pool's planner counts the same (``jobs.queue.pool``)
    for job in Job.objects.filter(device_id=device_id, state__in=ACTIVE_STATES).order_by("started_at"):
        start = job.started_at or now
        done = _later(now, remaining_seconds(job, now=now), horizon)
        out.append((job, start, done))
        cursor = max(cursor, done)
        loaded = held_after(snap, loaded, job.model_id)
    waiting = waiting_on(device_id) + held_on([device_id], now=now)
    if extra is not None:
        waiting.append(extra)
    pending = order_with_reasons(snap, waiting)
    finishes: dict[int, dt.datetime] = {}  # this plan's finishes: a child here is released at its parent's
    while pending:
        job, why = pending.pop(_next_in(pending, cursor, snap, finishes))
        job.planned_reason = why
        est = job.estimate_s or estimate(
            device_id=device_id,
            device_kind=device.kind,
            kind=job.kind,
            model_id=job.model_id,
            params=job.params,
        )
        if job.model_id not in loaded:
            est += load_costs.get(job.model_id, LOAD_SECONDS)
        start = min(max(cursor, _opens(job, snap, finishes)), horizon)
        finish = _later(start, est, horizon)
        out.append((job, start, finish))
        finishes[job.pk] = finish
        cursor = finish
        loaded = held_after(snap, loaded, job.model_id)
    return out


def _opens(job: Any, snap: Any, finishes: dict[int, dt.datetime]) -> dt.datetime:
    """When ``job`` may start: ``earliest_start``, and for a child, after its parents' finishes in this plan."""
    t = earliest_start(job, snap)
    for pk in getattr(job, "parent_ids", None) or ():
        if pk in finishes and finishes[pk] > t:
            t = finishes[pk]
    return t


def _next_in(pending: list[tuple[Any, str]], cursor: dt.datetime, snap: Any, finishes: dict) -> int:
    """Which of ``pending`` (in the scheduler's order) the device runs next at ``cursor``: the first that may
    start by then; a child released by then goes before it where the scheduler's base order would put it (once
    released, it is a waiting job like any other); none may start: the one that may start first. So the device
    never idles for a child while other work could run, and a child never starts before its release."""
    chains = any(getattr(job, "parent_ids", None) is not None for job, _why in pending)
    if not chains:
        return 0  # the scheduler's order holds as it is (its later jobs come in the order they open)
    opens = [_opens(job, snap, finishes) for job, _why in pending]
    first = next((i for i, t in enumerate(opens) if t <= cursor), None)
    if first is None:
        return min(range(len(pending)), key=lambda i: opens[i])
    head = base_key(pending[first][0], snap)
    for i, (job, _why) in enumerate(pending):
        if i != first and getattr(job, "parent_ids", None) is not None and opens[i] <= cursor:
            if base_key(job, snap) < head:
                return i
    return first


#: The plan looks this far ahead at most. Nothing admitted waits longer (``jobs.queue.admission.MAX_NOT_BEFORE`` is
#: 30 days), but a stored date may be anything, e.g. a ``not_before`` in the year 9999 written straight into
#: the database: such a job is planned at the horizon instead of overflowing ``datetime`` for everyone else's
#: submit form and admission summary on that device.
PLAN_HORIZON = dt.timedelta(days=366)


def _later(t: dt.datetime, seconds: float, ceiling: dt.datetime) -> dt.datetime:
    """``t`` plus ``seconds``, never past ``ceiling`` and never an OverflowError (nor NaN or infinity)."""
    if t >= ceiling:
        return ceiling
    seconds = float(seconds or 0.0)
    if not seconds < (ceiling - t).total_seconds():  # also catches NaN and infinity
        return ceiling
    return t + dt.timedelta(seconds=max(seconds, 0.0))


def replan_changed(collected: Changes) -> None:
    """The outbox's ``plan`` stage: each device whose plan moved is planned anew before anything is pushed; one
    whose job only moved on while holding it, when that job's finish drifted (or the job is gone)."""
    collected.replan |= _drifted(collected)
    while collected.replan:  # a replan records its queue in this same collection: it goes out with it
        device_id = collected.replan.pop()
        try:
            plan_device(device_id)
        except Exception:
            logger.exception("planning device %s failed", device_id)


def _drifted(collected: Changes) -> set[int]:
    """The devices of the jobs that moved on while holding them whose finish drifted from the stored plan (after
    a model load, say), or that are gone."""
    moved = {job: device for job, device in collected.moved.items() if device not in collected.replan}
    if not moved:
        return set()
    fields = ("pk", "estimate_s", "progress", "remote_data", "predicted_finish")
    jobs = {job.pk: job for job in Job.objects.filter(pk__in=moved).only(*fields)}
    now = timezone.now()
    return {device for job, device in moved.items() if job not in jobs or finish_drifted(jobs[job], now=now)}


def plan_device(device_id: int, *, _seen: frozenset[int] = frozenset()) -> None:
    """Recompute and store every queued job's predicted start/finish; the queue goes out once, after commit,
    through the one sender (``jobs.core.changes.plan_changed``; an identical plan is not sent again). Where a
    finish moved, the devices of the jobs waiting for those results are planned again (their release moved)."""
    if store_plan(device_id):
        for other in _children_devices(device_id) - _seen - {device_id}:
            plan_device(other, _seen=_seen | {device_id})
    plan_changed(device_id)


def _children_devices(device_id: int) -> set[int]:
    """The devices where jobs wait for a result of one of ``device_id``'s planned jobs."""
    return set(
        JobLink.objects.filter(
            parent__device_id=device_id, released_at__isnull=True, child__state__in=PENDING_STATES
        ).values_list("child__device_id", flat=True)
    )


def store_plan(device_id: int) -> int:
    """Compute the device's plan and store what changed of it: each job's predicted start/finish and, for the
    waiting ones, its place in the plan and why (``plan_position``, ``plan_reason``: what the pages draw).
    Returns how many jobs were written (0: the stored plan still holds)."""
    reason_chars = Job._meta.get_field("plan_reason").max_length
    changed = []
    moved = False
    position = 0
    for job, start, finish in plan(device_id):
        if job.state in PENDING_STATES:
            position += 1
            place, why = position, job.planned_reason[:reason_chars]
        else:  # the running job has no place in line (nor one to come back to, should it be requeued)
            place, why = None, ""
        if (job.predicted_start, job.predicted_finish, job.plan_position, job.plan_reason) != (
            start,
            finish,
            place,
            why,
        ):
            changed.append(
                Job(
                    pk=job.pk,
                    predicted_start=start,
                    predicted_finish=finish,
                    plan_position=place,
                    plan_reason=why,
                )
            )
            # A new place or reason is always written; times only when one moved by a second or more.
            moved = moved or (job.plan_position, job.plan_reason) != (place, why)
            moved = moved or _moved(job.predicted_start, start) or _moved(job.predicted_finish, finish)
    if not moved:
        return 0
    # The whole plan, so the stored one is always one plan (a start is the finish before it).
    _write_plan(changed)
    return len(changed)


_PLAN_FIELDS = ("predicted_start", "predicted_finish", "plan_position", "plan_reason")


def _write_plan(rows: list[Job]) -> None:
    """Store ``rows``' plan fields: one parameterised UPDATE per row, sent as one batch, in one transaction.

    Django's ``bulk_update`` builds a ``CASE WHEN id = … THEN …`` per field over every row and resolves each branch
    as an expression: at a few hundred waiting jobs that cost more than computing the plan (half of a full replan
    of 1,000 jobs on 10 devices, ``bench/bench_plan_scale.py``'s profile). The database takes the batch as fast."""
    if not rows:
        return
    fields = [Job._meta.get_field(name) for name in _PLAN_FIELDS]
    connection = transaction.get_connection(Job.objects.db)
    quote = connection.ops.quote_name
    sql = "UPDATE {} SET {} WHERE {} = %s".format(
        quote(Job._meta.db_table),
        ", ".join(f"{quote(field.column)} = %s" for field in fields),
        quote(Job._meta.pk.column),
    )
    params = [
        [field.get_db_prep_save(getattr(row, field.attname), connection) for field in fields] + [row.pk]
        for row in rows
    ]
    with transaction.atomic(using=Job.objects.db), connection.cursor() as cursor:
        cursor.executemany(sql, params)


#: A replan whose times all moved less than this keeps the stored plan: a replan comes with every job start and
#: end, several within a second on the way from one render to the next, and each would rewrite every waiting
#: job's times (they start "now") by a few milliseconds: no page shows that, and the write is most of its cost.
PLAN_SLACK = dt.timedelta(seconds=1)


def _moved(stored: dt.datetime | None, new: dt.datetime) -> bool:
    return stored is None or abs(new - stored) >= PLAN_SLACK

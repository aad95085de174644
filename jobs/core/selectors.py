"""Reads for views, fragments and the engine. No device I/O here."""

from __future__ import annotations

import datetime as dt
from typing import Any

from django.contrib.auth import get_user_model
from django.db.models import Count, F, Max, Q, QuerySet
from django.http import Http404

from jobs.core.scheduler import order_with_reasons, snapshot_for
from jobs.models import ACTIVE_STATES, WAITING_STATES, Job, JobState, clamp_datetime, waiting_on


def jobs_visible_to(user: Any) -> QuerySet[Job]:
    """Jobs ``user`` may see: their own, shared ones, and everything for admins (newest first)."""
    qs = Job.objects.select_related("owner", "device").filter(hidden_at__isnull=True)
    if not getattr(user, "is_authenticated", False):
        return qs.none()
    if user.is_admin:
        return qs
    return qs.filter(Q(owner=user) | Q(shared=True))


def can_view(user: Any, job: Job) -> bool:
    if not getattr(user, "is_authenticated", False):
        return False
    if job.hidden_at is not None and not user.is_admin:  # deleted through /v1: gone for everyone but admins
        return False
    return user.is_admin or job.owner_id == user.pk or job.shared


def plan_shows_prompt(viewer: Any, job: Job) -> bool:
    """Whether the queue plan and the running-now card name ``job`` by its prompt for ``viewer``: whoever may view
    it (its owner, admins, everyone once shared), as in the REST plan. ``viewer`` None is the version every
    other signed-in person gets (shared jobs only); the rest see e.g. "Video by mia"."""
    if viewer is None:
        return job.shared and job.hidden_at is None
    return can_view(viewer, job)


def can_manage(user: Any, job: Job) -> bool:
    """Cancel, retry, share: the owner (if they may still submit) and admins."""
    if not getattr(user, "is_authenticated", False):
        return False
    return user.is_admin or (job.owner_id == user.pk and user.can_submit)


def job_for(user: Any, job_id: int | str) -> Job:
    """The job, or Http404 when it doesn't exist *or* ``user`` may not see it (no existence leak)."""
    try:
        job = Job.objects.select_related("owner", "device").get(pk=int(job_id))
    except (Job.DoesNotExist, ValueError, TypeError):
        raise Http404("No such job.") from None
    if not can_view(user, job):
        raise Http404("No such job.")
    return job


def job_by_share_token(token: str) -> Job:
    if not token:
        raise Http404("No such job.")
    job = Job.objects.select_related("owner", "device").filter(share_token=token).first()
    if job is None:
        raise Http404("No such job.")
    return job


def running_job(device: Any) -> Job | None:
    device_id = getattr(device, "pk", device)
    return Job.objects.filter(device_id=device_id, state__in=ACTIVE_STATES).order_by("started_at").first()


def queue_plan(device: Any) -> list[Job]:
    """The device's active job(s) then waiting jobs, in the order the scheduler will run them, each with the
    ``predicted_start``/``predicted_finish`` that ``jobs.queue.eta.plan_device`` stored last."""
    device_id = getattr(device, "pk", device)
    waiting = waiting_on(device_id)
    return _active_on(device_id) + (_in_run_order(device, waiting) if waiting else [])


def _active_on(device_id: int) -> list[Job]:
    return list(_active_jobs(device_id=device_id))


def _active_jobs(**where: Any) -> QuerySet[Job]:
    """Active jobs (``where`` narrows them to devices), each with its owner, the first started first."""
    return (
        Job.objects.filter(state__in=ACTIVE_STATES, **where)
        .select_related("owner")
        .order_by("started_at", "id")
    )


def _in_run_order(device: Any, waiting: list[Any]) -> list[Any]:
    """``waiting`` (jobs or ``PlanRow``) in the scheduler's run order, each with its ``owner`` and ``plan_reason``."""
    device_id = getattr(device, "pk", device)
    # The few owners in one query, shared by their jobs (a join built one User per waiting job).
    owners = get_user_model().objects.in_bulk({job.owner_id for job in waiting})
    for job in waiting:
        if job.owner_id in owners:  # (one deleted meanwhile takes its jobs with it: left to load lazily)
            job.owner = owners[job.owner_id]
    snap = snapshot_for(device_id, device=device if hasattr(device, "loaded_models") else None)
    order = []
    for job, why in order_with_reasons(snap, waiting):
        job.plan_reason = why  # shown in the plan: why it waits where it does
        order.append(job)
    return order


class PlanRow:
    """A waiting job as the plan orders it: only what the scheduler's order and the plan's axis read. Reading
    every waiting job in full was most of a plan page (150 rows to draw 8); the entries drawn are read in full
    (:func:`plan_jobs`)."""

    FIELDS = ("id", "owner_id", "priority", "created", "model_id", "bypassed", "when", "not_before",
              "retry_after", "polite", "predicted_finish")  # fmt: skip
    __slots__ = ("pk", *FIELDS[1:], "owner", "plan_reason")

    def __init__(self, values: tuple) -> None:
        for name, value in zip(("pk", *self.FIELDS[1:]), values, strict=True):
            # Dates come clamped, as ``Job.from_db`` gives them to every other reader.
            setattr(self, name, clamp_datetime(value) if isinstance(value, dt.datetime) else value)
        self.owner = None
        self.plan_reason = ""


def waiting_plan_rows(device: Any) -> list[PlanRow]:
    """The waiting part of ``queue_plan`` for the pages: each waiting job as a ``PlanRow``, in run order."""
    device_id = getattr(device, "pk", device)
    rows = [
        PlanRow(values)
        for values in Job.objects.filter(device_id=device_id, state__in=WAITING_STATES)
        .order_by()  # as waiting_on: the index's few rows, not the device's history by date
        .values_list(*PlanRow.FIELDS)
    ]
    return _in_run_order(device, rows) if rows else []


_WAITING_STATS = {
    "n": Count("pk"),
    "unplanned": Count("pk", filter=Q(plan_position__isnull=True)),
    "end": Max("predicted_finish"),
}


class PagePlan:
    """The device's plan as the pages draw it: the stored one (``jobs.queue.eta.store_plan``: each waiting job's
    ``plan_position`` and ``plan_reason`` beside its predicted times), read a page at a time.

    Ordering every waiting job again for each page was most of a dashboard or a queue page (150 waiting jobs a
    device: ~8 ms of ~12 per device); the planner stores the order with the times it already stores, so a page
    reads a count and the entries it draws, and what it draws is one plan (a start is the finish before it).
    While a waiting job has no place yet (submitted a moment ago, its replan not yet run), the queue is ordered
    here instead, as the planner would.
    """

    def __init__(self, device: Any, *, active: list[Job] | None = None, stats: dict | None = None) -> None:
        """``active`` and ``stats`` (count, unplanned, end of the waiting jobs), when given, are this device's
        part of :meth:`for_devices`' reads; otherwise they are read here."""
        self.device_id = getattr(device, "pk", device)
        self.active = _active_on(self.device_id) if active is None else active
        if stats is None:
            stats = self._waiting().aggregate(**_WAITING_STATS)
        self.waiting: int = stats["n"]
        self.end: dt.datetime | None = clamp_datetime(stats["end"]) if stats["end"] else None
        self._rows: list[PlanRow] | None = None
        if stats["unplanned"]:
            self._rows = waiting_plan_rows(device)
            self.waiting = len(self._rows)
            self.end = max((r.predicted_finish for r in self._rows if r.predicted_finish), default=None)

    @classmethod
    def for_devices(cls, devices: list[Any]) -> dict[int, PagePlan]:
        """The plans of several devices (a page showing each), from two reads whatever their number: their
        active jobs, and their waiting jobs' count and end (per device, these were two reads each)."""
        ids = [getattr(d, "pk", d) for d in devices]
        active: dict[int, list[Job]] = {pk: [] for pk in ids}
        for job in _active_jobs(device_id__in=ids):
            active[job.device_id].append(job)
        none = {"n": 0, "unplanned": 0, "end": None}
        stats = {
            row.pop("device_id"): row
            for row in Job.objects.filter(device_id__in=ids, state__in=WAITING_STATES)
            .order_by()
            .values("device_id")
            .annotate(**_WAITING_STATS)
        }
        return {
            pk: cls(device, active=active[pk], stats=stats.get(pk, none))
            for pk, device in zip(ids, devices, strict=True)
        }

    @property
    def running(self) -> Job | None:
        return self.active[0] if self.active else None  # the first by started_at, as ``running_job``

    def jobs(self, start: int, count: int) -> list[Job | None]:
        """The waiting jobs at places ``start + 1`` … ``start + count``, each with its owner and ``plan_reason``
        (None for one deleted since the plan was ordered here)."""
        if count <= 0 or start >= self.waiting:  # (nothing waiting there: no read)
            return []
        if self._rows is not None:
            return plan_jobs(self._rows[start : start + count])
        return list(
            self._waiting()
            .select_related("owner")
            .order_by(F("plan_position").asc(nulls_last=True), "created", "id")[start : start + count]
        )

    def _waiting(self) -> QuerySet[Job]:
        return Job.objects.filter(device_id=self.device_id, state__in=WAITING_STATES)


def plan_jobs(rows: list[PlanRow]) -> list[Job | None]:
    """The full jobs of ``rows`` (the plan entries a page draws), in their order, each with its owner and
    ``plan_reason``; None for one deleted since the plan was read."""
    jobs = Job.objects.in_bulk([row.pk for row in rows])
    out: list[Job | None] = []
    for row in rows:
        job = jobs.get(row.pk)
        if job is not None:
            if row.owner is not None:
                job.owner = row.owner
            job.plan_reason = row.plan_reason
        out.append(job)
    return out


def jobs_ask_soon(device: Any, now: dt.datetime, window: dt.timedelta) -> bool:
    """``devices.hooks.jobs_ask_soon``: a submitted or running job of ``device`` polls it within ``window`` of now."""
    return device.jobs.filter(
        state__in=(JobState.SUBMITTED, JobState.RUNNING),
        next_poll_at__lte=now + window,
        next_poll_at__gte=now - window,
    ).exists()

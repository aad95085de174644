"""Reads for views, fragments and the engine. No device I/O here."""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from django.contrib.auth import get_user_model
from django.db.models import Count, F, Max, Q, QuerySet
from django.http import Http404
from django.utils import timezone

from devices.models import Device
from jobs.core.albums import sees_through_album
from jobs.core.links import Link, children_of, held_on, parents_of
from jobs.core.scheduler import order_with_reasons, snapshot_for
from jobs.models import ACTIVE_STATES, PENDING_STATES, Job, JobState, clamp_datetime, waiting_on


def jobs_visible_to(user: Any) -> QuerySet[Job]:
    """Jobs ``user`` may see: their own, shared ones, and everything for admins (newest first)."""
    qs = Job.objects.select_related("owner", "device").filter(hidden_at__isnull=True)
    if not getattr(user, "is_authenticated", False):
        return qs.none()
    if user.is_admin:
        return qs
    return qs.filter(Q(owner=user) | Q(shared=True))


def can_view(user: Any, job: Job) -> bool:
    """The one check of who may see a job and its files: its owner, admins, everyone once shared, and the people
    of an album its owner put it in (``jobs.core.albums``; asked last, it is the only one that reads)."""
    if not getattr(user, "is_authenticated", False):
        return False
    if job.hidden_at is not None and not user.is_admin:  # deleted through /v1: gone for everyone but admins
        return False
    return _sees_plainly(user, job) or sees_through_album(user, job)


def _sees_plainly(user: Any, job: Job) -> bool:
    """``can_view`` without albums, for a signed-in ``user``: no read."""
    return user.is_admin or job.owner_id == user.pk or job.shared


def plan_shows_prompt(viewer: Any, job: Job) -> bool:
    """Whether the queue plan and the running-now card name ``job`` by its prompt for ``viewer``: whoever may view
    it (its owner, admins, everyone once shared), as in the REST plan. ``viewer`` None is the version every
    other signed-in person gets (shared jobs only); the rest see e.g. "Video by mia"."""
    if viewer is None:
        return job.shared and job.hidden_at is None
    if not getattr(viewer, "is_authenticated", False) or (job.hidden_at is not None and not viewer.is_admin):
        return False
    # Not through albums: only a finished job is ever in one, and the plan names waiting and running jobs (a read
    # per entry of every page's plan would buy nothing).
    return _sees_plainly(viewer, job)


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
    # A hidden job (in the trash, deleted through /v1) opens for nobody by its link.
    job = (
        Job.objects.select_related("owner", "device")
        .filter(share_token=token, hidden_at__isnull=True)
        .first()
    )
    if job is None:
        raise Http404("No such job.")
    return job


def job_links(viewer: Any, job: Job) -> tuple[list[Link], list[Link]]:
    """(parents, children) of ``job`` as ``viewer`` may see them: the jobs whose results it takes as inputs and
    those that take its results (``jobs.core.links``), only those ``viewer`` may view; a parent deleted outright
    keeps its number (it was theirs to use). The job page and the API show these."""
    parents, children = parents_of(job), children_of(job)
    ids = {link.job_id for link in parents + children if link.job_id is not None}
    if not ids:
        return parents, children
    visible = set(jobs_visible_to(viewer).filter(pk__in=ids).values_list("pk", flat=True))
    gone = ids - set(Job.objects.filter(pk__in=ids).values_list("pk", flat=True))
    shown = visible | gone
    return [p for p in parents if p.job_id in shown], [c for c in children if c.job_id in shown]


def running_job(device: Any) -> Job | None:
    device_id = getattr(device, "pk", device)
    return Job.objects.filter(device_id=device_id, state__in=ACTIVE_STATES).order_by("started_at").first()


def queue_plan(device: Any) -> list[Job]:
    """The device's active job(s) then waiting jobs, in the order the scheduler will run them, each with the
    ``predicted_start``/``predicted_finish`` that ``jobs.queue.eta.plan_device`` stored last."""
    device_id = getattr(device, "pk", device)
    waiting = waiting_on(device_id) + held_on([device_id], now=timezone.now())  # held: at their release
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
              "retry_after", "polite", "predicted_finish", "pinned", "estimate_s")  # fmt: skip
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
        for values in Job.objects.filter(device_id=device_id, state__in=PENDING_STATES)
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

    def __init__(
        self,
        device: Any,
        *,
        active: list[Job] | None = None,
        stats: dict | None = None,
        devices: dict[int, Any] | None = None,
    ) -> None:
        """``active`` and ``stats`` (count, unplanned, end of the waiting jobs), when given, are this device's
        part of :meth:`for_devices`' reads; otherwise they are read here. ``devices``: the devices the page has
        read already (a pool job's line names the others of its pool; the missing ones are read when drawn)."""
        self.device_id = getattr(device, "pk", device)
        self.devices: dict[int, Any] = dict(devices or {})
        if isinstance(device, Device):
            self.devices.setdefault(device.pk, device)
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
            for row in Job.objects.filter(device_id__in=ids, state__in=PENDING_STATES)
            .order_by()
            .values("device_id")
            .annotate(**_WAITING_STATS)
        }
        known = {d.pk: d for d in devices if isinstance(d, Device)}
        return {
            pk: cls(device, active=active[pk], stats=stats.get(pk, none), devices=known)
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

    def jobs_after(self, start: int, count: int) -> list[tuple[Job | None, Job | None]]:
        """:meth:`jobs`, each with the job just ahead of it in the lane (the running one before the first): what
        its :func:`plan_line` says it runs after. One read, as :meth:`jobs` (the one ahead of a later page's
        first entry comes with it); the devices of the pool jobs drawn are read once if the page had not."""
        if count <= 0 or start >= self.waiting:
            return []
        ahead_first = start > 0
        jobs = self.jobs(start - 1 if ahead_first else start, count + (1 if ahead_first else 0))
        before = jobs[0] if ahead_first else self.running
        drawn = jobs[1:] if ahead_first else jobs
        self.devices = with_pool_devices([j for j in drawn if j is not None], self.devices)
        out = []
        for job in drawn:
            out.append((job, before))
            before = job
        return out

    def _waiting(self) -> QuerySet[Job]:
        return Job.objects.filter(device_id=self.device_id, state__in=PENDING_STATES)


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


# -- where and when a waiting job runs, and why there -------------------------------------------------------------
#: A start further off than this names its day ("Tue 01:40"); a nearer one only its time.
DAY_SHOWN_AFTER = dt.timedelta(hours=18)
#: How much of the prompt of the job ahead a line quotes (the person may see it).
AFTER_TITLE = 40


@dataclass(frozen=True)
class PlanLine:
    """Where and when a waiting job is expected to run, and why there, as one person may read it:

        on Living-room Tiiny around 01:40, after mia's video · any device: Living-room Tiiny frees first

    Built in one place (:func:`plan_line`) for the dashboard, the queue page, the job page and the REST plan.
    ``parts`` is the sentence as (text, time) pieces: the pages draw each time with ``when`` (the zone of the
    page, ``jobs/_fragments.html#plan-line``), the API writes them in the household's zone (:meth:`text`). Plain
    fields, so a drawing of it is kept (``{% kept %}``) under it."""

    device_id: int
    device_name: str
    pinned: bool
    start: dt.datetime | None
    position: int | None
    after: str  # the job ahead of it in its lane as the person may see it; "" when none is
    why_here: (
        str  # a pool job: why this lane ("Living-room Tiiny frees first"); a pinned one: why it can't start
    )
    fmt: str  # how its time is written: "H:i", or "D H:i" for a start more than a day off

    @property
    def parts(self) -> tuple[tuple[str, dt.datetime | None], ...]:
        """Where and when: "on Living-room Tiiny around 01:40, after mia's video", as (text, time) pieces."""
        where = f"on {self.device_name}"
        out: list[tuple[str, dt.datetime | None]] = [
            (where + " around " if self.start else where, self.start)
        ]
        if self.after:
            out.append((f", after {self.after}", None))
        elif self.position == 1:
            out.append((", next in line", None))
        return tuple(out)

    @property
    def why(self) -> str:
        """Why this lane: "any device: Living-room Tiiny frees first"; a pinned job only when it can't start."""
        if not self.why_here:
            return ""
        return self.why_here if self.pinned else f"any device: {self.why_here}"

    def text(self, zone: dt.tzinfo) -> str:
        """The whole line with its times in ``zone`` (the API: the household's), its first letter up."""
        fmt = "%a %H:%M" if self.fmt.startswith("D") else "%H:%M"
        text = "".join(t + (timezone.localtime(at, zone).strftime(fmt) if at else "") for t, at in self.parts)
        if self.why:
            text += f" · {self.why}"
        return text[:1].upper() + text[1:]


def plan_line(
    job: Any,
    *,
    viewer: Any,
    ahead: Any,
    device: Any,
    devices: Mapping[int, Any],
    position: int | None = None,
    now: dt.datetime | None = None,
) -> PlanLine:
    """The line of waiting ``job`` in ``device``'s lane, for ``viewer`` (None: the version everyone may read).

    ``ahead`` is the job just before it in the lane (the running one before the first), named as ``viewer`` may
    see it: by its prompt when ``plan_shows_prompt`` allows, else "mia's video"; ``position``, its place in the
    lane (by default the stored plan's). ``devices`` holds the devices of
    a pool job's pool (:func:`with_pool_devices`): why it waits in this lane rather than another's. The pool
    planner (``jobs.queue.pool``) puts it where it finishes first, counting a model load where the lane does not
    hold its model: so it is here because this device holds its model, or frees first, or is the only one of its
    pool that may start work now."""
    now = now or timezone.now()
    start = job.predicted_start
    return PlanLine(
        device_id=device.pk,
        device_name=device.name,
        pinned=job.pinned,
        start=start,
        position=job.plan_position if position is None else position,
        after=_named(ahead, viewer) if ahead is not None else "",
        why_here=_pinned_why(device) if job.pinned else _pool_why(job, ahead, device, devices),
        fmt="D H:i" if start and start - now > DAY_SHOWN_AFTER else "H:i",
    )


def _named(job: Any, viewer: Any) -> str:
    if plan_shows_prompt(viewer, job) and (text := " ".join((job.prompt or "").split())):
        short = text if len(text) <= AFTER_TITLE else text[: AFTER_TITLE - 1].rstrip() + "…"
        return f"“{short}”"
    return f"{job.owner}'s {job.get_kind_display().lower()}"


def _away(device: Any) -> str:
    """Why ``device`` may start no work now ("" when it may), in the line's words."""
    if device.state in Device.QUEUE_BLOCKING_STATES:
        return "away"
    return "paused" if device.queue_paused else ""


def _pinned_why(device: Any) -> str:
    away = _away(device)
    return f"only on {device.name}, which is {away}: it waits for it" if away else ""


def _pool_why(job: Any, ahead: Any, device: Any, devices: Mapping[int, Any]) -> str:
    others = [devices[pk] for pk in dict.fromkeys(job.pool or []) if pk != device.pk and pk in devices]
    if away := _away(device):
        return f"no device that can do it may start work now ({device.name} is {away}): it waits"
    if not others:
        return f"{device.name} is the only device that can do it"
    usable = [d for d in others if not _away(d)]
    if not usable:
        return _all_away(others)
    # The lane holds its model when it starts (the job ahead leaves it loaded, or none is ahead and it is loaded
    # now) where no other device that may start work holds it: the load it saves is why it waits here. Else (the
    # others hold it too, or none does) this device is where it finishes first.
    held = ahead.model_id == job.model_id if ahead is not None else job.model_id in loaded_models(device)
    elsewhere = any(job.model_id in loaded_models(d) for d in usable)
    return f"{device.name} {'holds its model' if held and not elsewhere else 'frees first'}"


def _all_away(others: list[Any]) -> str:
    """The other devices, none of which may start work: e.g. "Kitchen Tiiny is away"."""
    words = {_away(d) for d in others}
    word = words.pop() if len(words) == 1 else "away or paused"
    return f"{', '.join(d.name for d in others)} {'is' if len(others) == 1 else 'are'} {word}"


def loaded_models(device: Any) -> set[str]:
    """The models running on the device, by its last reading."""
    return {str(m.get("model_id")) for m in getattr(device, "loaded_models", None) or [] if m.get("model_id")}


def with_pool_devices(jobs: Iterable[Any], known: Mapping[int, Any]) -> dict[int, Any]:
    """``known`` and the devices of the pools of ``jobs`` it lacks (one read, only when some are missing)."""
    wanted = {pk for job in jobs if not job.pinned for pk in (job.pool or [])} - set(known)
    out = dict(known)
    if wanted:
        fields = ("pk", "name", "state", "queue_paused", "loaded_models")
        out.update({d.pk: d for d in Device.objects.filter(pk__in=wanted).only(*fields)})
    return out


def job_plan_line(job: Job, *, viewer: Any = None) -> PlanLine | None:
    """The job page's line for a waiting ``job`` (None once it no longer waits): the job ahead of it in its lane
    by the stored plan (or the running one), and its pool's devices; at most three reads."""
    if job.state not in PENDING_STATES:
        return None
    if job.plan_position is None:  # not placed yet (its replan is on its way): nothing known ahead of it
        ahead = None
    elif job.plan_position > 1:
        ahead = (
            Job.objects.select_related("owner")
            .filter(device_id=job.device_id, state__in=PENDING_STATES, plan_position=job.plan_position - 1)
            .first()
        )
    else:
        ahead = _active_jobs(device_id=job.device_id).first()
    device = job.device
    devices = with_pool_devices([job], {device.pk: device})
    return plan_line(job, viewer=viewer, ahead=ahead, device=device, devices=devices)


def jobs_ask_soon(device: Any, now: dt.datetime, window: dt.timedelta) -> bool:
    """``devices.hooks.jobs_ask_soon``: a submitted or running job of ``device`` polls it within ``window`` of now."""
    return device.jobs.filter(
        state__in=(JobState.SUBMITTED, JobState.RUNNING),
        next_poll_at__lte=now + window,
        next_poll_at__gte=now - window,
    ).exists()

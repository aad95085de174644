"""Live job and queue fragments: whole elements with stable ids, rendered from the pages' own partials.

Who receives what is decided in ``jobs.live.broadcast`` (the one module that pushes):

- :func:`job_page_fragments` is the job page's live part (status, events, result, actions, header badge):
  only for people who may view the job. The actions box is rendered per viewer (:func:`actions_variants`:
  the owner and admins get the buttons ``Job.can_cancel``/``can_retry`` allow).
- :func:`running_fragment` (the device's running-now card) and :func:`queue_fragments` (the card and the plan)
  are rendered for one person: a job they may not view appears as "Video by mia" without its prompt (their
  own and shared jobs show it, admins see every prompt and the memory summaries); the version for ``None`` is
  safe for everyone. :func:`queue_admin_fragments` is the admins' controls, for admins only.
- :func:`render_my_jobs` / :func:`render_job_row`: the dashboard's "my recent jobs", for its owner.

A player (video, audio, 3D viewer, image) is never in a fragment once the result exists, except the one push
that brings it (the job's move to done): pushes update status, progress and text around it.

Each fragment carries ``hx-swap-oob="true"``; duplicates or late arrivals are harmless because every push
replaces the whole element with the current truth from the database.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from typing import Any

from django.db.models import Prefetch
from django.template.defaultfilters import floatformat
from django.template.loader import render_to_string
from django.urls import reverse
from django.utils import timezone

from devices.capabilities import Capabilities
from devices.models import Device, DeviceMetric
from hub import live
from jobs.core.selectors import (
    PagePlan,
    PlanLine,
    can_manage,
    job_plan_line,
    plan_line,
    plan_shows_prompt,
    running_job,
)
from jobs.models import ACTIVE_STATES, Artifact, Job, JobEvent, JobState
from jobs.queue.eta import remaining_seconds

DETAIL = "jobs/detail.html"
PARTS = "jobs/_fragments.html"
EVENTS_SHOWN = 60
#: The dashboard's "my recent jobs": the page (``jobs.doors.pages``) and the pushes of the list show as many.
RECENT_SHOWN = 8
MOVES = [("up", "↑", "Move up"), ("down", "↓", "Move down")]


# -- labels ------------------------------------------------------------------------------------------------
def public_label(job: Job) -> str:
    """What people who may not view a job see of it: its kind and its owner, never the prompt."""
    return f"{job.get_kind_display()} by {job.owner}"


def job_title(job: Job, *, limit: int = 80) -> str:
    text = " ".join((job.prompt or "").split())
    if not text:
        return f"{job.get_kind_display()} #{job.pk}"
    return text if len(text) <= limit else text[: limit - 1].rstrip() + "…"


def plan_label(job: Any, viewer: Any = None) -> str:
    """How the queue plan and the running-now card name a job for one person (``{{ job|plan_label:user }}``):
    by its prompt where ``jobs.core.selectors.plan_shows_prompt`` allows, else "Video by mia". ``viewer``: the
    person a page is drawn for or a push goes to; None (or missing from a template's context) for the version
    everyone else gets."""
    if job is None or job == "":
        return ""
    person = viewer if getattr(viewer, "is_authenticated", False) else None  # missing from the context: None
    return job_title(job) if plan_shows_prompt(person, job) else public_label(job)


# -- job fragments ----------------------------------------------------------------------------------------------
def job_context(job: Job, *, share_token: str = "", **extra: Any) -> dict[str, Any]:
    """Everything the job partials read. Events and artifacts come from prefetches when the caller made them.

    With ``share_token`` the file links point at the public read-only view (the token is the permission).
    """
    events = list(job.events.all())[-EVENTS_SHOWN:]
    # Thumbnails are the gallery's (``jobs.files.thumbnails``): not a result to play or download.
    artifacts = [a for a in job.artifacts.all() if a.kind != Artifact.Kind.THUMB]
    for a in artifacts:
        a.url = (
            reverse("jobs-public-file", args=[share_token, a.pk])
            if share_token
            else reverse("jobs-file", args=[job.pk, a.pk])
        )
    return {
        "job": job,
        "title": job_title(job),
        "events": events,
        "artifacts": artifacts,
        "result": result_of(artifacts),
        "eta": eta_for(job),
        **extra,
    }


@dataclass(frozen=True)
class Result:
    main: Artifact | None  # the thing a player shows (video, audio, mesh, image)
    sidecar: Artifact | None  # e.g. the WAV beside a MiniMax video
    others: list[Artifact]


def result_of(artifacts: list[Artifact]) -> Result:
    main = next((a for a in artifacts if a.kind != Artifact.Kind.SIDECAR), None)
    sidecar = next((a for a in artifacts if a.kind == Artifact.Kind.SIDECAR), None)
    others = [a for a in artifacts if a is not main and a is not sidecar]
    return Result(main, sidecar, others)


def eta_for(job: Job, *, now: dt.datetime | None = None) -> dict[str, Any] | None:
    """Remaining time of a running job, from its own progress rate and its model's history (``jobs.queue.eta``)."""
    if job.state not in ACTIVE_STATES or not job.estimate_s:
        return None
    now = now or timezone.now()
    remaining = remaining_seconds(job, now=now)
    return {"finish": now + dt.timedelta(seconds=remaining), "remaining_s": int(remaining)}


def job_with_related(job_id: int) -> Job | None:
    return (
        Job.objects.select_related("owner", "device")
        .prefetch_related(
            Prefetch("events", queryset=JobEvent.objects.order_by("seq")),
            Prefetch("artifacts", queryset=Artifact.objects.order_by("id")),
        )
        .filter(pk=job_id)
        .first()
    )


def render_status(job: Job, *, ctx: dict[str, Any] | None = None) -> str:
    return render_to_string(f"{DETAIL}#job-status", ctx or job_context(job, oob=True))


def render_events(ctx: dict[str, Any]) -> str:
    return render_to_string(f"{DETAIL}#job-events", ctx)


def render_result(ctx: dict[str, Any]) -> str:
    return render_to_string(f"{DETAIL}#job-result", ctx)


def render_privacy(job: Job) -> str:
    return render_to_string(f"{DETAIL}#job-privacy", {"job": job, "oob": True})


def render_plan_line(job: Job) -> str:
    """The job page's plan line (where, when and why it runs; empty once it no longer waits): the version every
    person who may view the job may read (another person's private job ahead of it without its prompt), on the
    page as in its pushes."""
    return render_to_string(f"{DETAIL}#job-plan", {"job": job, "plan_line": job_plan_line(job), "oob": True})


def render_buttons(job: Job, *, manage: bool, submit: bool) -> str:
    return render_to_string(
        f"{DETAIL}#job-buttons", {"job": job, "may": {"manage": manage, "submit": submit}, "oob": True}
    )


def has_player(job: Job) -> bool:
    """The job's result section holds a player (or the picture): pushes must never replace it."""
    return job.state == JobState.DONE


def job_page_fragments(job: Job, *, viewer: Any, with_player: bool) -> list[str]:
    """The job page's live elements as ``viewer`` sees them (the websocket snapshot).

    Without ``with_player`` a finished job's result is left out: the page has it, and its player must stay.
    """
    ctx = job_context(job, oob=True)
    out = [render_status(job, ctx=ctx), render_plan_line(job), render_events(ctx), render_privacy(job)]
    if with_player or not has_player(job):
        out.append(render_result(ctx))
    out.append(
        render_buttons(job, manage=can_manage(viewer, job), submit=bool(getattr(viewer, "can_submit", False)))
    )
    return out


def actions_variants(job: Job) -> list[tuple[str, list[str], list[str]]]:
    """The actions box for everyone who may see the job: (html, audience, exclude) per kind of viewer.

    The owner and admins may act (cancel, retry, share); others see at most "Run again with changes" (people
    who may queue jobs) and only on a shared job. ``exclude`` keeps each socket to its one version.
    """
    owner, admins = live.user_group(job.owner_id), live.ADMINS
    managers = render_buttons(job, manage=True, submit=True)
    if job.owner.can_submit:
        out = [(managers, [owner, admins], [])]
    else:  # e.g. an owner who is a viewer now: may still cancel and share, not queue again
        out = [(render_buttons(job, manage=True, submit=False), [owner], []), (managers, [admins], [owner])]
    if job.shared:
        out.append((render_buttons(job, manage=False, submit=True), [live.SUBMITTERS], [owner, admins]))
        out.append(
            (
                render_buttons(job, manage=False, submit=False),
                [live.EVERYONE],
                [owner, admins, live.SUBMITTERS],
            )
        )
    return out


def render_job_row(job: Job) -> str:
    return render_to_string(f"{PARTS}#job-row", {"c": JobRow.of(job, oob=True)})


def recent_jobs(owner_id: int) -> list[Job]:
    """The dashboard's "my recent jobs" (``RECENT_SHOWN`` of them, newest first)."""
    return list(
        Job.objects.filter(owner_id=owner_id, hidden_at__isnull=True)
        .select_related("device", "owner")
        .order_by("-created", "-id")[:RECENT_SHOWN]
    )


def render_my_jobs(owner: Any, *, jobs: list[Job] | None = None) -> str:
    jobs = recent_jobs(owner.pk) if jobs is None else jobs
    ctx = {"recent": [JobRow.of(j) for j in jobs], "user": owner, "oob": True}
    return render_to_string("dashboard.html#my-jobs", ctx)


def running_fragment(device: Device, *, viewers: list[Any] | None = None) -> list[str]:
    """The running-now card once per viewer (None: the version for everyone else; see ``queue_fragments``)."""
    running = running_job(device)
    ctx = {
        "device": device,
        "running": running,
        "oob": True,
        "running_eta": eta_for(running) if running else None,
    }
    return [render_to_string(f"{PARTS}#device-running", {**ctx, "user": v}) for v in (viewers or [None])]


# -- the queue ------------------------------------------------------------------------------------------------
#: Plan entries shown per device wherever the plan is a glance (the dashboard, the new-job page, every push of
#: the plan), the rest as one line ("and 142 more waiting — see the queue"). Drawing each entry costs ~0.2 ms
#: (per-person label, times, bar): 300 waiting jobs made the dashboard a 100 ms page.
PLAN_SHOWN = 8
#: Plan entries per page on the queue page (``?device=<id>&page=<n>``), for everyone and in the admins' controls:
#: a phone's few screens a device. At 50 the page drew 100 entries for two devices (32 ms in-process at 100k
#: jobs, 21 ms at 25), most of them far below what anyone scrolls to.
QUEUE_PAGE_SIZE = 25


@dataclass
class PlanEntry:
    job: Job
    label: str  # the admins' controls' label (the plan names it per person: ``plan_label``)
    start: dt.datetime | None
    finish: dt.datetime | None
    offset_pct: float = 0.0  # where the bar starts on the timeline
    width_pct: float = 0.0
    position: int = 0  # 1 = runs next, in the whole queue (not on this page)
    ahead: Job | None = None  # the job before it in the lane (the running one before the first)
    device: Device | None = None  # the lane's
    devices: dict[int, Device] | None = None  # its pool's (``jobs.core.selectors.plan_line``)

    def line(self, viewer: Any) -> PlanLine | None:
        """Where, when and why it runs, as ``viewer`` may read it (None: the lane's device is not known here)."""
        if self.device is None:
            return None
        return plan_line(
            self.job,
            viewer=viewer,
            ahead=self.ahead,
            device=self.device,
            devices=self.devices or {},
            position=self.position,
        )


@dataclass(frozen=True)
class QueueRow:
    """One waiting job in the admins' controls (``jobs/_fragments.html#qa-item``: its buttons, the page they
    come back to): everything it shows, the key its drawing is kept under (``{% kept %}``)."""

    pk: int
    device_id: int
    label: str
    kind_label: str
    owner: str
    finish: dt.datetime | None
    position: int
    pinned: bool  # off: a job for any device, waiting in this lane for now
    last: bool  # the last of the whole queue: it can't move down
    page: int  # the queue page's page it is on (its forms send it back)
    back: str  # where a plain cancel comes back to

    moves = MOVES  # (a class constant, not a field: the same for every row)

    @classmethod
    def of(cls, entry: PlanEntry, *, device_id: int, page: int, waiting: int, back: str) -> QueueRow:
        job = entry.job
        return cls(
            pk=job.pk,
            device_id=device_id,
            label=entry.label,
            kind_label=job.get_kind_display(),
            owner=str(job.owner),
            finish=entry.finish,
            position=entry.position,
            pinned=job.pinned,
            last=entry.position == waiting,
            page=page,
            back=back,
        )


@dataclass(frozen=True)
class JobRow:
    """A row of a person's job list (``jobs/_fragments.html#job-row``: the dashboard's recent jobs, and the row a
    push of the job replaces): everything it shows, the key its drawing is kept under (``{% kept %}``)."""

    pk: int
    owner_id: int
    state: str
    state_label: str
    kind: str
    kind_label: str
    device: str
    created: dt.datetime
    title: str
    active: bool
    progress: str  # as drawn (whole percent)
    oob: bool = False

    @classmethod
    def of(cls, job: Job, *, oob: bool = False) -> JobRow:
        return cls(
            pk=job.pk,
            owner_id=job.owner_id,
            state=job.state,
            state_label=job.get_state_display(),
            kind=job.kind,
            kind_label=job.get_kind_display(),
            device=job.device.name,
            created=job.created,
            title=job_title(job),
            active=job.is_active,
            progress=floatformat(job.progress, 0),
            oob=oob,
        )


@dataclass(frozen=True)
class PlanItem:
    """One entry of the plan as one person sees it (``jobs/_fragments.html#plan-item``): everything it shows and
    nothing else, so it is also the key its drawing is kept under (``{% kept %}``, hub.templatetags.hub_kept)."""

    pk: int
    owner_id: int
    kind: str
    shared: bool
    label: str  # ``plan_label`` for the person it is drawn for
    owner: str
    start: dt.datetime | None
    finish: dt.datetime | None
    when: str
    not_before: dt.datetime | None
    first: bool  # moved to the front by an admin
    reason: str
    offset_pct: float
    width_pct: float
    position: int
    paged: bool  # on a page of the queue page (its own element ids)
    pinned: bool  # off: a job for any device, waiting in this lane for now
    where: PlanLine | None  # where, when and why it runs, for the person it is drawn for

    @classmethod
    def of(cls, entry: PlanEntry, viewer: Any, *, paged: bool) -> PlanItem:
        job = entry.job
        return cls(
            pk=job.pk,
            owner_id=job.owner_id,
            kind=job.kind,
            shared=job.shared,
            label=plan_label(job, viewer),
            owner=str(job.owner),
            start=entry.start,
            finish=entry.finish,
            when=job.when,
            not_before=job.not_before,
            first=job.priority > 0,
            reason=getattr(job, "plan_reason", "") or "",
            offset_pct=entry.offset_pct,
            width_pct=entry.width_pct,
            position=entry.position,
            paged=paged,
            pinned=job.pinned,
            where=entry.line(viewer if getattr(viewer, "is_authenticated", False) else None),
        )


def summary_window(device: Device) -> dict[str, Any] | None:
    """The vault's nightly memory summaries for the plan (None when unknown or off) and the device's decision."""
    vault = Capabilities.from_dict(device.capabilities).vault
    if vault.summary_model is None or vault.summary_start_hour is None or vault.summary_end_hour is None:
        return None
    return {
        "start": dt.time(vault.summary_start_hour),
        "end": dt.time(vault.summary_end_hour),
        "model_name": vault.summary_model.rsplit("/", 1)[-1],
        "may_evict": device.may_evict_summary_model,
    }


def _pager(total: int, page: int) -> dict[str, Any]:
    """The queue page's page ``page`` (out of range: the nearest one) of ``total`` waiting jobs."""
    pages = max(1, -(-total // QUEUE_PAGE_SIZE))
    page = min(max(1, page), pages)
    first = (page - 1) * QUEUE_PAGE_SIZE
    return {
        "page": page,
        "pages": pages,
        "prev": page - 1 if page > 1 else None,
        "next": page + 1 if page < pages else None,
        "start": first,
        "first": first + 1,
        "last": min(total, first + QUEUE_PAGE_SIZE),
    }


def queue_context(
    device: Device,
    *,
    admin: bool = False,
    now: dt.datetime | None = None,
    page: int | None = None,
    summary: bool = False,
    plan: PagePlan | None = None,
) -> dict[str, Any]:
    """The plan as a timeline: waiting jobs with their predicted start/finish and a bar on a shared axis.

    The plan (order, predictions, the axis, "queue clear") is the whole queue's; only the entries drawn are cut:
    without ``page`` the first ``PLAN_SHOWN`` and ``more`` (how many follow), what the dashboard shows and every
    push sends; with ``page`` that page of the queue page (``pager``), and with ``summary`` also the first
    ``PLAN_SHOWN`` as ``summary`` (the admins' folded copy of the dashboard's plan). ``plan``: the device's
    :class:`PagePlan` when the page read several at once (``PagePlan.for_devices``)."""
    now = now or timezone.now()
    plan = plan if plan is not None else PagePlan(device)
    running, waiting = plan.running, plan.waiting
    axis = _Axis.of(plan, now)
    pager = _pager(waiting, page) if page is not None else None
    shown = (
        axis.entries(plan, pager["start"], QUEUE_PAGE_SIZE, admin=admin)
        if pager
        else axis.entries(plan, 0, PLAN_SHOWN, admin=admin)
    )
    ctx = {
        "device": device,
        "running": running,
        "running_label": _entry_label(running, admin=admin) if running else "",
        "running_eta": eta_for(running, now=now) if running else None,
        "entries": shown,
        "waiting": waiting,
        "more": 0 if pager else waiting - len(shown),
        "pager": pager,
        "queue_back": _queue_back(device, pager),
        "plan_end": axis.end,
        "summaries": summary_window(device),
        "now": now,
        "admin": admin,
        "moves": MOVES,
    }
    if summary:
        head = (
            shown[:PLAN_SHOWN]
            if pager and pager["page"] == 1
            else axis.entries(plan, 0, PLAN_SHOWN, admin=admin)
        )
        ctx["summary"] = {"entries": head, "more": waiting - len(head)}
    return ctx


def _entry_label(job: Job, *, admin: bool) -> str:
    """A plan entry's label in the admins' controls and the running card's for everyone: the prompt when the job is
    shared (or the label is for admins), else "Video by mia" (each person's plan labels with ``plan_label``)."""
    return job_title(job) if (job.shared or admin) else public_label(job)


def _queue_back(device: Device, pager: dict[str, Any] | None) -> str:
    """Where the admins' buttons come back to (a cancel's plain POST): this page of the queue page."""
    on_page = pager and pager["page"] > 1
    return reverse("jobs-queue") + (f"?device={device.pk}&page={pager['page']}" if on_page else "")


@dataclass(frozen=True)
class _Axis:
    """The plan's timeline: from now to the end of the last predicted finish (``end``; ``total`` seconds)."""

    now: dt.datetime
    end: dt.datetime | None
    total: float

    @classmethod
    def of(cls, plan: PagePlan, now: dt.datetime) -> _Axis:
        ends = [plan.end] if plan.end else []
        if plan.running and plan.running.predicted_finish:
            ends.append(plan.running.predicted_finish)
        end = max(ends, default=None)
        return cls(now, end, (end - now).total_seconds() if end and end > now else 0.0)

    def entries(self, plan: PagePlan, start: int, count: int, *, admin: bool) -> list[PlanEntry]:
        """Plan entries ``start`` to ``start + count`` (0-based) with their bars on this axis."""
        out = []
        for i, (job, ahead) in enumerate(plan.jobs_after(start, count), start=start + 1):
            if job is None:  # deleted since the plan was read
                continue
            entry = PlanEntry(
                job,
                _entry_label(job, admin=admin),
                job.predicted_start,
                job.predicted_finish,
                position=i,
                ahead=ahead,
                device=plan.devices.get(plan.device_id),
                devices=plan.devices,
            )
            self.place(entry)
            out.append(entry)
        return out

    def place(self, e: PlanEntry) -> None:
        """``e``'s bar: where it starts on the axis and how wide it is (percent; at least 1.5 so it shows)."""
        if self.total and e.start and e.finish:
            e.offset_pct = round(max(0.0, (e.start - self.now).total_seconds()) / self.total * 100, 1)
            width = round(max(1.5, (e.finish - max(e.start, self.now)).total_seconds() / self.total * 100), 1)
            e.width_pct = min(width, 100 - e.offset_pct)


def queue_fragments(device: Device, *, viewer: Any = None) -> list[str]:
    """The running-now card and the plan as ``viewer`` may see them: their own entries and the ones they may view
    by prompt, the rest as "Video by mia" (``plan_label``), the memory summaries for admins. ``viewer`` None is
    the version for everyone else: no private prompt, nothing for admins only."""
    return queue_fragments_for(device, [viewer])[0]


def queue_fragments_for(device: Device, viewers: list[Any]) -> list[list[str]]:
    """``queue_fragments`` for several people from one read of the plan (the pushes' variants)."""
    ctx = queue_context(device)
    ctx["oob"] = True
    return [
        [
            render_to_string(f"{PARTS}#{part}", {**ctx, "user": v})
            for part in ("device-running", "device-queue")
        ]
        for v in viewers
    ]


def queue_admin_fragments(device: Device) -> list[str]:
    """The admins' control list for one device (prompts and buttons), the queue page's first page: ``admins``
    only. (A queue page on a later page doesn't watch the queue: these would replace its entries.)"""
    ctx = queue_context(device, admin=True, page=1)
    ctx["oob"] = True
    return [render_to_string(f"{PARTS}#queue-admin", ctx)]


# -- sparklines (server-drawn SVG: no chart library needed for a glance) --------------------------------------
SPARK_W, SPARK_H = 300, 60


def sparkline(device_id: int, *, since: dt.datetime, until: dt.datetime | None = None) -> dict[str, Any]:
    """NPU utilisation and NPU memory (percent) between ``since`` and ``until`` as SVG polyline points.

    Reads the stored history only (10-second buckets for the last day, 5-minute ones before that).
    """
    return sparklines([device_id], since=since, until=until)[device_id]


def sparklines(
    device_ids: list[int], *, since: dt.datetime, until: dt.datetime | None = None
) -> dict[int, dict]:
    """:func:`sparkline` of each device, from one read (a page showing several devices)."""
    until = until or timezone.now()
    resolution = (
        10
        if until - since <= dt.timedelta(hours=2) and timezone.now() - since < dt.timedelta(hours=23)
        else 300
    )
    rows: dict[int, list[tuple]] = {pk: [] for pk in device_ids}
    for device_id, *row in (
        DeviceMetric.objects.filter(
            device_id__in=device_ids, resolution=resolution, bucket__gte=since, bucket__lte=until
        )
        .order_by("device_id", "bucket")
        .values_list("device_id", "bucket", "samples", "npu_util_sum", "npu_mem_sum")
    ):
        rows[device_id].append(row)
    return {pk: _spark(rows[pk], since, until) for pk in device_ids}


def _spark(rows: list[tuple], since: dt.datetime, until: dt.datetime) -> dict[str, Any]:
    span = max((until - since).total_seconds(), 1.0)

    def points(index: int) -> str:
        out = []
        for row in rows:
            if not row[1]:
                continue
            x = (row[0] - since).total_seconds() / span * SPARK_W
            y = SPARK_H - min(100.0, row[index] / row[1]) / 100 * SPARK_H
            out.append(f"{x:.1f},{y:.1f}")
        return " ".join(out)

    last = rows[-1] if rows and rows[-1][1] else None
    return {
        "points": points(2) if rows else "",
        "mem_points": points(3) if rows else "",
        "w": SPARK_W,
        "h": SPARK_H,
        "since": since,
        "until": until,
        "last_util": round(last[2] / last[1]) if last else None,
        "peak_util": round(max((r[2] / r[1] for r in rows if r[1]), default=0)),
    }

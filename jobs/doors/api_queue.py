"""REST routes for the queue: each device's plan, the pool's, the admins' controls, and a person's usage.

The same rules as the queue and usage pages, through the same services (``jobs.queue.services``,
``jobs.quotas.services``): admins pause and resume a device's lane, move a waiting job up or down, or run it
next; everyone reads the plans (another person's private job shows as "Video by mia", without its prompt) and
their own usage. A control answers with the device's plan as it now is. Errors are turned into JSON by
``hub.api``: 403 for someone who may not, 404 for what they may not see, 422 for a job that is no longer
waiting.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Literal

from django.http import Http404, HttpRequest
from django.urls import reverse
from django.utils import timezone
from django.utils.text import capfirst
from ninja import Router, Schema

from devices.models import Device
from hub.api_auth import require_scope
from hub.api_errors import ERRORS
from hub.parsing import parse_id
from jobs.core.scheduler import blocked_reason, snapshot_for
from jobs.core.selectors import can_view, job_for, plan_line, queue_plan, running_job, with_pool_devices
from jobs.kinds.schemas import PlanOut, PoolPlanOut, UsageOut
from jobs.live.fragments import job_title, public_label
from jobs.models import PENDING_STATES, QUOTA_FIELDS, Job
from jobs.queue import services
from jobs.quotas import services as quotas
from jobs.quotas.per_device import DeviceTimes, device_times

router = Router(tags=["queue"])
READ, SUBMIT = "read", "submit"
USAGE_DAYS = 14


class MoveIn(Schema):
    direction: Literal["up", "down"]


def _device(device_id: str) -> Device:
    pk = parse_id(device_id)
    device = Device.objects.filter(pk=pk).first() if pk is not None else None
    if device is None:
        raise Http404("No such device.")
    return device


def _job(request: HttpRequest, job_id: str) -> Job:
    pk = parse_id(job_id)
    if pk is None:
        raise Http404("No such job.")
    return job_for(request.user, pk)  # 404 for a job this person may not see


def waiting_because(job: Job, *, ahead: int, blocked: str) -> str:
    """Why a waiting job has not started: the device's block, else the plan's own reason
    (``jobs.core.scheduler.order_with_reasons``, the same words as the queue page), else its place in line."""
    if blocked:
        return blocked
    if getattr(job, "plan_reason", ""):
        return capfirst(job.plan_reason) + "."
    if ahead:
        return f"Behind {ahead} job{'s' if ahead != 1 else ''}."
    return "Next in line: it starts as soon as the device is free."


def _seen(request: HttpRequest, job: Job) -> tuple[str, str | None, str | None]:
    if can_view(request.user, job):
        return job_title(job), job.prompt, request.build_absolute_uri(reverse("api:job_get", args=[job.pk]))
    return public_label(job), None, None


def _waiting_row(
    request: HttpRequest,
    job: Job,
    *,
    position: int,
    ahead: Job | None,
    behind: int,
    blocked: str,
    device: Device,
    devices: dict[int, Device],
) -> dict[str, Any]:
    label, prompt, url = _seen(request, job)
    line = plan_line(job, viewer=request.user, ahead=ahead, device=device, devices=devices, position=position)
    pool = [device.pk] if job.pinned else [pk for pk in dict.fromkeys(job.pool or []) if pk in devices]
    return {
        "position": position,
        "id": job.pk,
        "kind": job.kind,
        "state": job.state,
        "owner": job.owner.username,
        "label": label,
        "prompt": prompt,
        "model": job.model_id,
        "device": device.pk,
        "device_name": device.name,
        "pinned": job.pinned,
        "pool": pool,
        "when": job.when,
        "not_before": job.not_before,
        "predicted_start": job.predicted_start,
        "predicted_finish": job.predicted_finish,
        "line": line.text(quotas.household_zone()),
        "why_here": line.why,
        "waiting_because": waiting_because(job, ahead=behind, blocked=blocked),
        "url": url,
    }


def _running_row(request: HttpRequest, job: Job) -> dict[str, Any]:
    label, prompt, url = _seen(request, job)
    return {
        "id": job.pk,
        "kind": job.kind,
        "state": job.state,
        "owner": job.owner.username,
        "label": label,
        "prompt": prompt,
        "pinned": job.pinned,
        "progress": round(job.progress, 1),
        "phase": job.phase,
        "predicted_finish": job.predicted_finish,
        "url": url,
    }


def plan_out(
    request: HttpRequest, device: Device, *, devices: dict[int, Device] | None = None
) -> dict[str, Any]:
    """One device's plan (its lane) as the API shows it to this person; ``devices``: the hub's, when the caller
    read them (the pool jobs' lines name the others of their pool)."""
    device.refresh_from_db()  # a control just changed the row (paused flag) behind this instance
    blocked = blocked_reason(snapshot_for(device.pk))
    running = running_job(device)
    waiting = [j for j in queue_plan(device) if j.state in PENDING_STATES]
    devices = with_pool_devices(waiting, {**(devices or {}), device.pk: device})
    first = 1 if running else 0
    rows = []
    for i, job in enumerate(waiting):
        ahead = waiting[i - 1] if i else running
        rows.append(
            _waiting_row(
                request,
                job,
                position=i + 1,
                ahead=ahead,
                behind=i + first,
                blocked=blocked,
                device=device,
                devices=devices,
            )
        )
    ends = [j.predicted_finish for j in [*waiting, *([running] if running else [])] if j.predicted_finish]
    return {
        "device": device.pk,
        "device_name": device.name,
        "paused": device.queue_paused,
        "blocked": blocked,
        "night_start": device.night_start,
        "night_end": device.night_end,
        "running": _running_row(request, running) if running is not None else None,
        "jobs": rows,
        "clear_at": max(ends) if ends else None,
    }


@router.get("/devices/{device_id}/plan", url_name="device_plan", response={200: PlanOut, **ERRORS},
            summary="A device's queue plan")  # fmt: skip
def device_plan(request: HttpRequest, device_id: str):
    """The order the device will run the jobs of its lane in, each with predicted start and finish, where and when
    it is expected to run and why there (``line``), and why it waits.

    Everyone sees the whole plan; another person's private job shows as e.g. “Video by mia”, without its
    prompt (as on the queue page). Jobs for any device (``pinned`` false) wait in this lane for now: the pool
    moves them to another device of theirs when that one would finish them first.
    """
    require_scope(request, READ)
    return plan_out(request, _device(device_id))


@router.get(
    "/plan", url_name="pool_plan", response={200: PoolPlanOut, **ERRORS}, summary="Every device's plan"
)
def pool_plan(request: HttpRequest):
    """Every device's plan (its lane), the default device first, then by name; when the whole queue is predicted
    done; how many devices may start work now, and how many waiting jobs are for any device.

    A job for any device waits in the lane of the device where it should finish first (``pinned`` false), and
    moves when that changes: each job says where and when it is expected to run, and why there (``line``)."""
    require_scope(request, READ)
    devices = list(Device.objects.order_by("-is_default", "name", "pk"))
    known = {d.pk: d for d in devices}
    plans = [plan_out(request, device, devices=known) for device in devices]
    ends = [p["clear_at"] for p in plans if p["clear_at"]]
    usable = [p for p in plans if not p["blocked"]]
    return {
        "devices": plans,
        "clear_at": max(ends) if ends else None,
        "devices_usable": len(usable),
        "waiting_any": sum(1 for p in plans for row in p["jobs"] if not row["pinned"]),
    }


def _on_device(request: HttpRequest, device_id: str, change: Callable[..., None]) -> dict[str, Any]:
    """An admin's change to a device's lane through the queue's service; the answer is the plan as it now is."""
    require_scope(request, SUBMIT)
    device = _device(device_id)
    change(device=device, by=request.user)
    return plan_out(request, device)


def _on_job(request: HttpRequest, job_id: str, change: Callable[..., None], **how: Any) -> dict[str, Any]:
    """An admin's change to a waiting job's place through the queue's service; the answer is its device's plan."""
    require_scope(request, SUBMIT)
    job = _job(request, job_id)
    change(job=job, by=request.user, **how)
    return plan_out(request, job.device)


@router.post("/devices/{device_id}/pause", url_name="device_pause", response={200: PlanOut, **ERRORS},
             summary="Pause a device's queue (admins)")  # fmt: skip
def device_pause(request: HttpRequest, device_id: str):
    """Nothing new starts on the device until it is resumed; a render in progress finishes. Idempotent."""
    return _on_device(request, device_id, services.queue_pause)


@router.post("/devices/{device_id}/resume", url_name="device_resume", response={200: PlanOut, **ERRORS},
             summary="Resume a device's queue (admins)")  # fmt: skip
def device_resume(request: HttpRequest, device_id: str):
    """The device takes its next job as soon as it is free. Idempotent."""
    return _on_device(request, device_id, services.queue_resume)


@router.post("/jobs/{job_id}/move", url_name="job_move", response={200: PlanOut, **ERRORS},
             summary="Move a waiting job up or down its device's plan (admins)")  # fmt: skip
def job_move(request: HttpRequest, job_id: str, payload: MoveIn):
    """Swaps the job with its neighbour in the plan; the admins' order then holds over fair share."""
    return _on_job(request, job_id, services.queue_move, direction=payload.direction)


@router.post("/jobs/{job_id}/run-next", url_name="job_run_next", response={200: PlanOut, **ERRORS},
             summary="Run a waiting job next on its device (admins)")  # fmt: skip
def job_run_next(request: HttpRequest, job_id: str):
    """The job goes before every other waiting job of its device."""
    return _on_job(request, job_id, services.queue_run_next)


def _limit(limits: quotas.Limits, name: str) -> dict[str, Any]:
    return {"value": limits.get(name), "own": name in limits.overridden}


@router.get("/usage", url_name="usage", response={200: UsageOut, **ERRORS}, summary="Your limits and usage")
def usage(request: HttpRequest):
    """What the Usage page shows you: your limits (none = no limit; ``own`` when set for you rather than the
    household's default), device minutes today and this week, what your waiting jobs will still take, jobs in
    the queue, storage, the last 14 household days, and your device time per device (admins: the household's
    too)."""
    require_scope(request, READ)
    user, now = request.user, timezone.now()
    limits, used = quotas.limits_for(user), quotas.usage_for(user, now=now)
    days = quotas.usage_days(user=user, days=USAGE_DAYS, now=now)
    return {
        "limits": {name: _limit(limits, name) for name in QUOTA_FIELDS},
        "device_minutes_today": round(used.day_s / 60, 1),
        "device_minutes_this_week": round(used.week_s / 60, 1),
        "booked_minutes": round(used.booked_s / 60, 1),
        "queued": used.queued,
        "storage_mb": round(used.storage_mb, 1),
        "trash_mb": round(used.trash_mb, 1),
        "summary": quotas.usage_line(limits, used) if limits.any else "",
        "days": [
            {"date": d.date, "device_minutes": round(d.device_min, 1), "stored_mb": round(d.stored_mb, 1)}
            for d in days
        ],
        "devices": _per_device(device_times(user=user, days=USAGE_DAYS, now=now)),
        "household_devices": (
            _per_device(device_times(user=None, days=USAGE_DAYS, now=now)) if user.is_admin else None
        ),
    }


def _per_device(times: DeviceTimes) -> list[dict[str, Any]]:
    return [
        {
            "device": row.device_id,
            "device_name": row.name,
            "minutes_today": round(row.today_s / 60, 1),
            "minutes_this_week": round(row.week_s / 60, 1),
            "minutes_last_14_days": round(row.recent_s / 60, 1),
        }
        for row in times.rows
    ]

"""Quotas and usage pages: the Usage page (everyone: their own; admins: everyone's too), deleting results to
free storage (after a confirmation), and the admins' limit forms shown in the People page.

Rules and numbers live in ``jobs.quotas.services``; these views only check access, read a form and call it.
"""

from __future__ import annotations

from typing import Any

from django import forms
from django.contrib import messages
from django.contrib.auth import get_user_model
from django.core.exceptions import PermissionDenied, ValidationError
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import reverse
from django.utils import timezone
from django.utils.http import url_has_allowed_host_and_scheme
from django.views.decorators.http import require_GET, require_http_methods, require_POST

from hub.accounts.decorators import admin_required
from jobs.core.selectors import job_for
from jobs.models import QUOTA_FIELDS, UNLIMITED
from jobs.queue import trash
from jobs.quotas import services as quotas
from jobs.quotas.per_device import device_times

CHART_DAYS = 14
PEOPLE_DAYS = 7


# -- the chart: server-rendered SVG bars, with the same numbers in a table beside them ----------------------------
def bar_chart(points: list[tuple[str, str, float]], *, unit: str, height: int = 120) -> dict[str, Any]:
    """``points``: (short label, long label, value). Bars scaled to the largest value; the template draws them."""
    top = max((v for _s, _l, v in points), default=0.0)
    width, gap = 28, 6
    bars = []
    for i, (short, long, value) in enumerate(points):
        h = 0 if top <= 0 else max(1 if value > 0 else 0, round(value / top * height))
        bars.append(
            {
                "x": i * (width + gap),
                "y": height - h,
                "w": width,
                "h": h,
                "short": short,
                "long": long,
                "value": value,
                "text": f"{value:.0f} {unit}" if value >= 10 or value == 0 else f"{value:.1f} {unit}",
            }
        )
    return {
        "bars": bars,
        "height": height,
        "width": max(1, len(points) * (width + gap) - gap),
        "top": top,
        "unit": unit,
        "empty": top <= 0,
    }


def _day_charts(days: list[quotas.Day]) -> tuple[dict, dict]:
    minutes = [(f"{d.date:%d}", f"{d.date:%a %d %b}", d.device_min) for d in days]
    stored = [(f"{d.date:%d}", f"{d.date:%a %d %b}", d.stored_mb) for d in days]
    return bar_chart(minutes, unit="min"), bar_chart(stored, unit="MB")


def _limit_rows(limits: quotas.Limits, usage: quotas.Usage) -> list[dict[str, Any]]:
    used = {
        "device_minutes_per_day": usage.day_s / 60,
        "device_minutes_per_week": usage.week_s / 60,
        "max_queued": usage.queued,
        "storage_mb": usage.storage_mb,
    }
    rows = []
    for name in QUOTA_FIELDS:
        limit = limits.get(name)
        rows.append(
            {
                "name": name,
                "label": quotas.LABELS[name],
                "unit": quotas.UNITS[name],
                "limit": limit,
                "used": used[name],
                "own": name in limits.overridden,
                "share": None if not limit else min(100.0, 100.0 * used[name] / limit),
            }
        )
    return rows


@require_GET
def usage(request: HttpRequest) -> HttpResponse:
    """Mine: limits, device minutes and storage by day, my results (largest first). Admins: everyone's too."""
    user = request.user
    now = timezone.now()
    limits, mine = quotas.limits_for(user), quotas.usage_for(user, now=now)
    days = quotas.usage_days(user=user, days=CHART_DAYS, now=now)
    minutes_chart, storage_chart = _day_charts(days)
    ctx: dict[str, Any] = {
        "limits": limits,
        "usage": mine,
        "limit_rows": _limit_rows(limits, mine),
        "booked_min": mine.booked_s / 60,
        "days": days,
        "minutes_chart": minutes_chart,
        "storage_chart": storage_chart,
        "results": quotas.results_of(user=user),
        "chart_days": CHART_DAYS,
        "people_days": PEOPLE_DAYS,
        "device_times": device_times(user=user, days=CHART_DAYS, now=now),
        "trash_days": trash.trash_days(),
    }
    if user.is_admin:
        people = quotas.usage_people(days=PEOPLE_DAYS, now=now)
        top = [p for p in people if p.device_s > 0][:5]
        everyone_days = quotas.usage_days(user=None, days=CHART_DAYS, now=now)
        ctx.update(
            people=people,
            top_users=top,
            top_chart=bar_chart([(str(p.user)[:5], str(p.user), p.device_s / 60) for p in top], unit="min"),
            everyone_minutes_chart=_day_charts(everyone_days)[0],
            everyone_days=everyone_days,
            everyone_results=quotas.results_of(user=None, limit=20),
            everyone_device_times=device_times(user=None, days=CHART_DAYS, now=now),
        )
    return render(request, "jobs/usage.html", ctx)


def _deletable(request: HttpRequest, job_id: int):
    job = job_for(request.user, job_id)  # 404 for a job they may not see
    if not quotas.can_delete_results(request.user, job):
        raise PermissionDenied("only the owner or an admin can delete these results")
    return job


def _back(request: HttpRequest, default: str) -> str:
    """``next`` if it is a path of ours, else ``default`` (never a bare word: ``redirect`` takes it for a URL name)."""
    target = request.POST.get("next") or request.GET.get("next") or ""
    if target.startswith("/") and url_has_allowed_host_and_scheme(target, allowed_hosts={request.get_host()}):
        return target
    return default


@require_http_methods(["GET", "POST"])
def results_delete(request: HttpRequest, job_id: int) -> HttpResponse:
    """GET: what would go (and the jobs that wait for it), and a button; POST: move the job and its results to
    the trash (``jobs.queue.trash``), where they stay ``HUB_TRASH_DAYS`` days, restorable."""
    job = _deletable(request, job_id)
    artifacts = list(job.artifacts.order_by("id"))
    if request.method == "POST":
        try:
            trash.trash_move(job=job, by=request.user, force=True)  # the page warned of the waiting jobs
        except ValidationError as exc:
            messages.error(request, " ".join(exc.messages))
            return redirect(_back(request, reverse("usage")))
        messages.success(
            request,
            f"Moved {job} to the trash: restore it from the Trash page within {trash.trash_days()} days.",
        )
        return redirect(_back(request, reverse("usage")))
    total = sum(a.bytes for a in artifacts)
    ctx = {
        "job": job,
        "artifacts": artifacts,
        "total_mb": total / quotas.MB,
        "running": job.is_active or job.is_waiting,
        "children": trash.waiting_children(job),
        "trash_days": trash.trash_days(),
        "next": _back(request, reverse("usage")),
    }
    return render(request, "jobs/usage_delete.html", ctx)


# -- the admins' limit forms (the People page's quota section) -----------------------------------------------------
class LimitsForm(forms.Form):
    """Text fields: a number, or a word ("default", "none"); a field left out of the POST is not changed."""

    device_minutes_per_day = forms.CharField(required=False, max_length=20, label="Device minutes per day")
    device_minutes_per_week = forms.CharField(required=False, max_length=20, label="Device minutes per week")
    max_queued = forms.CharField(required=False, max_length=20, label="Jobs in the queue at once")
    storage_mb = forms.CharField(required=False, max_length=20, label="Storage for results (MB)")

    def __init__(self, *args: Any, person: bool, **kw: Any) -> None:
        super().__init__(*args, **kw)
        self.person = person

    def values(self) -> dict[str, int | None]:
        out: dict[str, int | None] = {}
        for name in QUOTA_FIELDS:
            if name not in self.data:
                continue
            try:
                out[name] = quotas.parse_limit(self.cleaned_data.get(name), person=self.person)
            except ValidationError as exc:
                self.add_error(name, exc)
        return out


def _apply(request: HttpRequest, *, person: Any | None) -> HttpResponse:
    form = LimitsForm(request.POST, person=person is not None)
    values = form.values() if form.is_valid() else {}
    who = "the household" if person is None else str(person)
    if form.errors:
        for name, errs in form.errors.items():
            label = quotas.LABELS.get(name, name)
            messages.error(request, f"{label} of {who}: {' '.join(errs)}")
    elif not values:
        messages.info(request, "Nothing to change.")
    else:
        try:
            quotas.quota_set(by=request.user, user=person, **values)
        except ValidationError as exc:
            messages.error(request, " ".join(exc.messages))
        else:
            messages.success(request, f"Limits of {who} saved.")
    return redirect(_back(request, reverse("people") + "#quotas"))


@admin_required
@require_POST
def quota_defaults(request: HttpRequest) -> HttpResponse:
    return _apply(request, person=None)


@admin_required
@require_POST
def quota_person(request: HttpRequest, user_id: int) -> HttpResponse:
    return _apply(request, person=get_object_or_404(get_user_model(), pk=user_id))


def people_quota_context(viewer: Any) -> dict[str, Any]:
    """What the People page's quota section shows (admins): the defaults and each person's limits and usage."""
    if not getattr(viewer, "is_admin", False):
        return {"quota_people": []}
    defaults = quotas.household_limits()
    now = timezone.now()
    rows = []
    people = list(get_user_model().objects.order_by("-is_active", "username"))
    ids = [person.pk for person in people]
    limits_of = quotas.limits_of_many(ids)
    usage_of = quotas.usage_of_many(ids, now=now)
    for person in people:
        limits, own = limits_of[person.pk]
        use = usage_of[person.pk]
        rows.append(
            {
                "person": person,
                "fields": [
                    {
                        "name": name,
                        "label": quotas.LABELS[name],
                        "unit": quotas.UNITS[name],
                        "own": own[name],
                        "shown": ""
                        if own[name] is None
                        else ("none" if own[name] == UNLIMITED else own[name]),
                        "default": defaults.get(name),
                        "limit": limits.get(name),
                    }
                    for name in QUOTA_FIELDS
                ],
                "usage": use,
                "line": quotas.usage_line(limits, use) if limits.any else "",
            }
        )
    return {
        "quota_defaults": [
            {"name": n, "label": quotas.LABELS[n], "unit": quotas.UNITS[n], "value": defaults.get(n)}
            for n in QUOTA_FIELDS
        ],
        "quota_people": rows,
    }

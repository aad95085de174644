"""Small display filters for job pages (durations and file sizes as people read them)."""

from __future__ import annotations

import datetime as dt

from django import template
from django.utils import timezone

register = template.Library()


@register.filter
def duration(seconds: float | int | None) -> str:
    """``754`` → ``"13 min"``, ``3900`` → ``"1 h 5 min"``, ``40`` → ``"40 s"``; rounds up to whole minutes."""
    if seconds is None or seconds == "":
        return "—"
    s = max(0, int(round(float(seconds))))
    if s < 60:
        return f"{s} s"
    minutes = -(-s // 60)
    if minutes < 60:
        return f"{minutes} min"
    hours, rest = divmod(minutes, 60)
    return f"{hours} h {rest} min" if rest else f"{hours} h"


@register.filter
def aspect(size: str) -> str:
    """``"832x480"`` → ``"832 / 480"`` for CSS ``aspect-ratio`` (the canvas picker's little frames)."""
    w, _, h = str(size).lower().partition("x")
    return f"{int(w)} / {int(h)}" if w.isdigit() and h.isdigit() else "1 / 1"


@register.filter
def orientation(size: str) -> str:
    w, _, h = str(size).lower().partition("x")
    if not (w.isdigit() and h.isdigit()):
        return ""
    return "landscape" if int(w) > int(h) else "portrait" if int(w) < int(h) else "square"


@register.filter
def took(job) -> float | None:
    """Seconds from start to finish of a job (None while it runs)."""
    if not (job.started_at and job.finished_at):
        return None
    return (job.finished_at - job.started_at).total_seconds()


@register.filter
def dtlocal(value) -> str:
    """A value for ``<input type="datetime-local">``: "2026-11-29T23:00" in the hub's time zone."""
    if isinstance(value, dt.datetime):
        if timezone.is_aware(value):
            value = timezone.localtime(value)
        return value.strftime("%Y-%m-%dT%H:%M")
    return str(value or "")[:16]

"""The job page's "Notifications" box (its owner sees where the job's news went) and small labels."""

from __future__ import annotations

from django import template

from notify.selectors import deliveries_for_job

register = template.Library()

_PILL = {"sent": "done", "failed": "failed", "retrying": "running", "sending": "running", "pending": "queued"}


@register.filter
def delivery_pill(status: str) -> str:
    return f"state-pill state-{_PILL.get(status, 'queued')}"


@register.inclusion_tag("notify/_job_deliveries.html", takes_context=True)
def job_deliveries(context, job):
    request = context.get("request")
    user = getattr(request, "user", None)
    deliveries = deliveries_for_job(user, job) if user is not None else []
    return box_context(job, user, deliveries)


def box_context(job, user, deliveries) -> dict:
    return {
        "job": job,
        "deliveries": deliveries,
        "mine": bool(user is not None and user.is_authenticated and job.owner_id == user.pk),
        "open": any(d.status in ("pending", "sending", "retrying") for d in deliveries),
    }

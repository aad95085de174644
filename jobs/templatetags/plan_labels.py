"""``{{ job|plan_label:user }}``: how the queue plan and the running-now card name a job for one person.

The rule is ``jobs.core.selectors.plan_shows_prompt``; the page passes the person it is rendered for (``user``), a
push the person it goes to, or None for the version everyone else gets.
"""

from __future__ import annotations

from typing import Any

from django import template

register = template.Library()


@register.filter
def plan_label(job: Any, viewer: Any = None) -> str:
    from jobs.core.selectors import plan_shows_prompt
    from jobs.live.fragments import job_title, public_label

    if job is None or job == "":
        return ""
    person = viewer if getattr(viewer, "is_authenticated", False) else None  # missing from the context: None
    return job_title(job) if plan_shows_prompt(person, job) else public_label(job)


@register.simple_tag
def plan_item(entry: Any, viewer: Any = None, pager: Any = None) -> Any:
    """``{% plan_item e user pager as item %}``: the plan entry ``e`` as ``viewer`` sees it (``PlanItem``)."""
    from jobs.live.fragments import PlanItem

    return PlanItem.of(
        entry, viewer, paged=bool(pager)
    )  # (its label is plan_label's: viewer as plan_label takes it)


@register.simple_tag
def queue_row(entry: Any, device: Any, pager: Any, waiting: int, back: str) -> Any:
    """``{% queue_row e device pager waiting queue_back as row %}``: an entry of the admins' controls."""
    from jobs.live.fragments import QueueRow

    page = pager["page"] if pager else 1
    return QueueRow.of(entry, device_id=device.pk, page=page, waiting=waiting, back=back)

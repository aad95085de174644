"""``{{ job|plan_label:user }}``, ``{% plan_item %}``, ``{% queue_row %}``: the plan as one person sees it.

The labels and the rows are the live fragments' (``jobs.live.fragments``: ``plan_label``, ``PlanItem``,
``QueueRow``); the page passes the person it is rendered for (``user``), a push the person it goes to, or None
for the version everyone else gets.
"""

from __future__ import annotations

from typing import Any

from django import template

from jobs.live.fragments import PlanItem, QueueRow, plan_label

register = template.Library()
register.filter("plan_label", plan_label)


@register.simple_tag
def plan_item(entry: Any, viewer: Any = None, pager: Any = None) -> Any:
    """``{% plan_item e user pager as item %}``: the plan entry ``e`` as ``viewer`` sees it (``PlanItem``; its
    label is ``plan_label``'s, the viewer taken as it takes it)."""
    return PlanItem.of(entry, viewer, paged=bool(pager))


@register.simple_tag
def queue_row(entry: Any, device: Any, pager: Any, waiting: int, back: str) -> Any:
    """``{% queue_row e device pager waiting queue_back as row %}``: an entry of the admins' controls."""
    page = pager["page"] if pager else 1
    return QueueRow.of(entry, device_id=device.pk, page=page, waiting=waiting, back=back)

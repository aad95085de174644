"""``{% people_quota as quota %}``: the People page's quota section reads its rows here (``jobs.doors.quota_views``),
so the People view itself (``hub.accounts``) needs to know nothing about quotas."""

from __future__ import annotations

from typing import Any

from django import template

from jobs.doors.quota_views import people_quota_context

register = template.Library()


@register.simple_tag(takes_context=True)
def people_quota(context: Any) -> dict[str, Any]:
    request = context.get("request")
    return people_quota_context(getattr(request, "user", None))

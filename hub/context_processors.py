from __future__ import annotations

from django.conf import settings

from hub.health import redis_ok


def hub(request) -> dict:
    """Page-wide facts: the banner when live parts can't work, and the person's role flags."""
    if not getattr(request, "user", None) or not request.user.is_authenticated:
        return {}
    return {"redis_down": not redis_ok(), "hub_time_zone": settings.TIME_ZONE}

from __future__ import annotations

from django.utils import timezone

from hub.health import redis_ok
from hub.version import __version__


def hub(request) -> dict:
    """Page-wide facts: the banner when live parts can't work, and the person's role flags."""
    if not getattr(request, "user", None) or not request.user.is_authenticated:
        return {}
    # The zone the page's times are shown and its date fields read in: the person's own when they chose one
    # (hub.accounts.middleware.TimeZoneMiddleware), else HUB_TIME_ZONE.
    return {
        "redis_down": not redis_ok(),
        "hub_time_zone": timezone.get_current_timezone_name(),
        "hub_version": __version__,  # the footer (signed-in people only: a stranger learns no version)
    }

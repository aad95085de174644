"""Times on pages and in pushes: ``{{ value|when:"H:i" }}`` renders an aware datetime as

    <time datetime="2026-12-01T13:30Z" data-fmt="H:i" data-tz="UTC">13:30</time>

The text is Django's own ``date`` format in the zone active for the render: the person's on a page load
(hub.accounts.middleware.TimeZoneMiddleware), HUB_TIME_ZONE in the worker that renders a push once for every
viewer. static/js/localtime.js rewrites the text of any ``<time data-fmt>`` whose ``data-tz`` is not the zone
of the page (``<body data-tz>``) into that zone, with the same format, so a pushed time reads like a page load
while the pushed HTML stays one for everyone (skip-unchanged keeps working).

The ``datetime`` value is cut to what the format shows (minutes unless it shows seconds), as the text is:
an estimate that moves by a few seconds every tick must not make an otherwise unchanged fragment differ.
Values that are not aware datetimes (a time of day such as a night window, a date) are formatted as ``date``
would, without the element: there is no instant to move to another zone.
"""

from __future__ import annotations

import datetime as dt
import functools

from django import template
from django.template.defaultfilters import date as date_filter
from django.utils import timezone, translation
from django.utils.html import format_html

register = template.Library()


def iso_utc(value: dt.datetime, *, seconds: bool) -> str:
    at = value.astimezone(dt.UTC)
    return at.strftime("%Y-%m-%dT%H:%M:%SZ" if seconds else "%Y-%m-%dT%H:%MZ")


@register.filter(is_safe=True)  # (no expects_localtime: an aware value is moved to the zone in _when, once)
def when(value, fmt: str = "H:i"):
    """``value`` in ``fmt`` (Django's date format letters; localtime.js knows D j d M Y H i s)."""
    if value in (None, ""):
        return ""
    if not isinstance(value, dt.datetime) or timezone.is_naive(value):
        return date_filter(value, fmt)
    return _when(value, str(fmt), timezone.get_current_timezone(), translation.get_language())


@functools.lru_cache(maxsize=4096)
def _when(value: dt.datetime, fmt: str, zone: dt.tzinfo, language: str | None) -> str:
    """The element for one instant, format, zone and language: a pure function of them, so it is kept (a plan's
    times are the same on every load until it is replanned; drawing each was a quarter of the queue page)."""
    local = timezone.localtime(value, zone)
    return format_html(
        '<time datetime="{}" data-fmt="{}" data-tz="{}">{}</time>',
        iso_utc(local, seconds="s" in fmt),
        fmt,
        timezone.get_current_timezone_name(),  # ``zone``'s: it is the active one
        date_filter(local, fmt),
    )

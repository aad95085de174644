"""``|when`` keeps the element it drew for an instant (``hub_time._when``): the zone and the language of the render
(and the language) are part of what it is kept by, so a person in another zone never gets someone else's text."""

from __future__ import annotations

import datetime as dt

from django.utils import timezone

from hub.templatetags.hub_time import when

AT = dt.datetime(2026, 12, 1, 13, 30, tzinfo=dt.UTC)


def test_the_same_instant_reads_in_each_renders_own_zone():
    with timezone.override("UTC"):
        utc = when(AT, "H:i")
    with timezone.override("Asia/Tokyo"):
        tokyo = when(AT, "H:i")
    with timezone.override("UTC"):
        again = when(AT, "H:i")
    assert ">13:30</time>" in utc and 'data-tz="UTC"' in utc
    assert ">22:30</time>" in tokyo and 'data-tz="Asia/Tokyo"' in tokyo
    assert again == utc

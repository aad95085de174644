"""Cursor pagination shared by every list the hub pages: a cursor names the last row shown by (created, id).

A page is "the next N older than this row", never OFFSET: rows arriving meanwhile don't shift or repeat, and page
500 costs what page 1 does. Any model with ``created`` and ``pk`` pages this way (jobs, deliveries).
"""

from __future__ import annotations

import base64
import datetime as dt
from typing import Any

from django.utils import timezone
from django.utils.dateparse import parse_datetime

from hub.parsing import parse_id

#: A real cursor is ~45 characters; anything much longer is not one (and is not worth decoding).
MAX_CURSOR_CHARS = 120
#: Cursors name a row's creation time: anything outside these years is not one (and extreme dates overflow
#: when converted to UTC or handed to the database).
CURSOR_YEARS = (2000, 9000)


def encode_cursor(row: Any) -> str:
    """The cursor after ``row`` (anything with ``created`` and ``pk``)."""
    raw = f"{row.created.isoformat()}|{row.pk}".encode()
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def decode_cursor(cursor: str) -> tuple[dt.datetime, int] | None:
    """(created, id) of the last row shown, or None: a mangled, foreign or extreme cursor shows the first
    page rather than an error."""
    if not cursor or len(cursor) > MAX_CURSOR_CHARS:
        return None
    try:
        raw = base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4)).decode("ascii")
        stamp, _, pk_text = raw.partition("|")
        created = parse_datetime(stamp)
        if created is None:
            return None
        if timezone.is_naive(created):
            created = created.replace(tzinfo=dt.UTC)
        created = created.astimezone(dt.UTC)  # "9999-12-31T23:59-05:00" overflows here
    except (ValueError, UnicodeDecodeError, OverflowError):
        return None
    pk = parse_id(pk_text)
    if pk is None or not CURSOR_YEARS[0] <= created.year <= CURSOR_YEARS[1]:
        return None
    return created, pk

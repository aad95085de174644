"""The one way to read ids and numbers from a request (query string, form data, path, cookies, cursors).

Python's own parsing is too generous for raw input: ``"²".isdigit()`` is true but ``int("²")`` raises;
``int("١٢")`` is 12 (Arabic-Indic digits), ``int(" 12 ")`` is 12, ``int("1_000")`` is 1000; a 10,000-digit
string makes ``int()`` raise (Python's limit on integer strings); and anything past 2**63 makes SQLite raise
``OverflowError`` in the query. Each of those was a 500. Here a value is a plain ASCII integer of bounded length
or it is nothing, and the caller decides: a bad id is a 404/400, a bad optional number is the default (with a
message where a person typed it).

    parse_id("12")      -> 12        parse_id("²"), parse_id(" 12"), parse_id("0"), parse_id("9" * 19) -> None
    parse_int("7", default=5, minimum=1, maximum=10) -> 7      parse_int("70", ...) -> 5
"""

from __future__ import annotations

import re
from typing import Any

#: A primary key: 1 to 18 ASCII digits, so it always fits a signed 64-bit column (BigAutoField).
ID_MAX_DIGITS = 18
#: A plain integer: an optional minus, then at most 18 ASCII digits (no "+", no "_", no spaces, no exponent).
INT_MAX_DIGITS = 18

_ID = re.compile(rf"[0-9]{{1,{ID_MAX_DIGITS}}}")
_INT = re.compile(rf"-?[0-9]{{1,{INT_MAX_DIGITS}}}")


def _text(value: Any) -> str | None:
    """The raw value as text, or None for what can't be one (bools, lists, bytes that aren't ASCII, floats)."""
    if isinstance(value, str):
        return value
    if isinstance(value, bytes):
        try:
            return value.decode("ascii")
        except UnicodeDecodeError:
            return None
    return None


def parse_id(value: Any) -> int | None:
    """A database id (1 .. 10**18 - 1) from raw input, or None when the value is not one.

    An ``int`` (from a path converter) is accepted when it is in range; ``bool`` never is.
    """
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value if 0 < value < 10**ID_MAX_DIGITS else None
    text = _text(value)
    if text is None or not _ID.fullmatch(text):
        return None
    number = int(text)
    return number or None


def parse_int(value: Any, default: int, *, minimum: int | None = None, maximum: int | None = None) -> int:
    """An optional integer from raw input: the value when it is a plain integer within the bounds, else
    ``default`` (missing, empty, "²", "1e3", "3.5", 10,000 digits, out of range: all the default)."""
    number = parse_int_or_none(value, minimum=minimum, maximum=maximum)
    return default if number is None else number


def parse_int_or_none(value: Any, *, minimum: int | None = None, maximum: int | None = None) -> int | None:
    """As ``parse_int``, but None instead of a default, so a view can tell the person their value was ignored."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        number = value if abs(value) < 10**INT_MAX_DIGITS else None
        if number is None:
            return None
    else:
        text = _text(value)
        if text is None or not _INT.fullmatch(text):
            return None
        number = int(text)
    if minimum is not None and number < minimum:
        return None
    if maximum is not None and number > maximum:
        return None
    return number


__all__ = ["ID_MAX_DIGITS", "INT_MAX_DIGITS", "parse_id", "parse_int", "parse_int_or_none"]

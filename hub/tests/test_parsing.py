"""``hub.parsing``: ids and numbers from a request are plain ASCII integers of bounded length, or nothing."""

from __future__ import annotations

import pytest

from hub.parsing import parse_id, parse_int, parse_int_or_none

# Each of these is true for str.isdigit() or accepted by int(), and each was once a 500 somewhere.
NOT_AN_ID = [
    "²",  # isdigit() is true, int() raises
    "١٢",  # Arabic-Indic digits: int() says 12
    "１２",  # full-width digits: int() says 12
    "9" * 10_000,  # past Python's limit on integer strings: int() raises
    "9" * 19,  # fits int(), not a 64-bit column: SQLite raises OverflowError
    "-1",
    "0",
    "1e3",
    "1_000",
    "+5",
    " 12",
    "12 ",
    "12\n",
    "",
    " ",
    "0x1f",
    "3.0",
    None,
    True,
    ["1"],
    b"\xb2",
]


@pytest.mark.parametrize("value", NOT_AN_ID, ids=lambda v: repr(v)[:20])
def test_it_refuses_anything_that_is_not_a_plain_bounded_id(value):
    assert parse_id(value) is None


def test_it_reads_plain_ids_and_path_ints():
    assert parse_id("12") == 12
    assert parse_id("007") == 7
    assert parse_id("9" * 18) == 10**18 - 1  # the longest id: fits a BigAutoField
    assert parse_id(b"42") == 42
    assert parse_id(42) == 42  # a path converter's int
    assert parse_id(10**18) is None and parse_id(0) is None and parse_id(-3) is None


@pytest.mark.parametrize("value", ["²", "١٢", "9" * 10_000, "1e3", "3.5", "", " ", " 4", None, False, "--1"])
def test_a_bad_optional_number_is_the_default(value):
    assert parse_int(value, 5, minimum=1, maximum=10) == 5


def test_numbers_in_bounds_are_read_and_out_of_bounds_are_the_default():
    assert parse_int("7", 5, minimum=1, maximum=10) == 7
    assert parse_int("-1", 5, minimum=1) == 5
    assert parse_int("-1", 5) == -1
    assert parse_int("11", 5, maximum=10) == 5
    assert parse_int(8, 5, maximum=10) == 8
    assert parse_int(10**30, 5) == 5  # an int that big is not a request's number either
    assert parse_int_or_none("abc") is None and parse_int_or_none("0") == 0

"""Parsing, formatting and conversion of fingerprint values."""

from __future__ import annotations

import json
import re

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from neardup.core.bits import (
    as_fingerprints,
    from_binary,
    hamming,
    popcount,
    to_binary,
    to_hex,
)
from neardup.errors import InputError
from neardup.io.formats import format_json_rows, parse_decimal_lines


@given(st.lists(st.integers(0, 2**64 - 1), max_size=50), st.sampled_from(["\n", "\r\n"]))
def test_parse_round_trip(values, eol):
    text = "".join(f"  {v}\t{eol}\n" if i % 3 == 0 else f"{v}{eol}" for i, v in enumerate(values))
    got = parse_decimal_lines(text.encode())
    assert got.dtype == np.uint64
    assert got.tolist() == values


def test_parse_accepts_leading_zeros_blank_lines_and_no_final_newline():
    assert parse_decimal_lines(b"\n007\n\n  \r\n18446744073709551615").tolist() == [7, 2**64 - 1]
    assert parse_decimal_lines(b"").tolist() == []


@pytest.mark.parametrize(
    "data, line, text, reason",
    [
        (b"1\n2\nabc\n", 3, "abc", "not an unsigned decimal"),
        (b"1\n-5\n", 2, "-5", "negative"),
        (b"18446744073709551616\n", 1, "18446744073709551616", "not below 2\\*\\*64"),
        (b"99999999999999999999999\n", 1, "99999999999999999999999", "not below"),
        (b"1\n\n12 3\n", 3, "12 3", "not an unsigned"),
        (b"1\n+4\n", 2, "+4", "not an unsigned"),
        (b"1\n0x10\n", 2, "0x10", "not an unsigned"),
        (b"1.0\n", 1, "1.0", "not an unsigned"),
    ],
)
def test_parse_errors_name_source_line_and_text(data, line, text, reason):
    with pytest.raises(InputError, match=rf"^in\.txt:{line}: '{re.escape(text)}' is {reason}") as e:
        parse_decimal_lines(data, source="in.txt")
    assert e.value.line == line


@given(st.lists(st.lists(st.integers(0, 2**64 - 1), max_size=5), max_size=20))
def test_format_rows_is_json(rows):
    flat = np.array([v for r in rows for v in r], dtype=np.uint64)
    ptr = np.cumsum([0] + [len(r) for r in rows])
    out = format_json_rows(flat, ptr).decode()
    lines = out.splitlines()
    assert [json.loads(x) for x in lines] == rows
    assert all(x == json.dumps(r) for x, r in zip(lines, rows))


def test_conversions():
    v = 0b1011 << 60
    assert to_binary(v) == "1011" + "0" * 60 and from_binary(to_binary(v)) == v
    assert to_hex(2**64 - 1) == "f" * 16
    assert popcount(np.array([0, 2**64 - 1], dtype=np.uint64)).tolist() == [0, 64]
    assert hamming(np.uint64(5), np.uint64(6)).tolist() == 2
    with pytest.raises(ValueError):
        from_binary("102")
    np.testing.assert_array_equal(as_fingerprints(range(3)), np.arange(3, dtype=np.uint64))

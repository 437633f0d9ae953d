"""Decimal fingerprint lines in, JSON rows out, and how paths are named in messages.

A fingerprint is an unsigned 64-bit integer written in decimal; bit 63 is the most significant.
"""

from __future__ import annotations

import os
import sys

import numpy as np

from neardup.core import small
from neardup.errors import InputError

#: Decimal fingerprint inputs up to this many bytes are parsed in Python (no numba).
SMALL_PARSE_BYTES = 64 << 10

STDIO = "-"


def display_name(path: str | os.PathLike, output: bool = False) -> str:
    """How a path is named in messages: ``-`` is ``<stdin>``, or ``<stdout>`` for an output."""
    if str(path) == STDIO:
        return "<stdout>" if output else "<stdin>"
    return str(path)


def read_bytes(path: str | os.PathLike) -> bytes:
    """Read a whole file (or stdin for ``-``) as bytes; OSError names the file."""
    if str(path) == STDIO:
        return sys.stdin.buffer.read()
    with open(path, "rb") as f:
        return f.read()


def read_fingerprints(path: str | os.PathLike) -> np.ndarray:
    """Read one unsigned decimal 64-bit fingerprint per line (blank lines skipped).

    Raises :class:`neardup.errors.InputError` naming the file, the 1-based line number and the
    offending text on the first bad line.
    """
    return parse_decimal_lines(read_bytes(path), source=display_name(path))


def parse_decimal_lines(data: bytes, source: str = "<input>") -> np.ndarray:
    """Parse one unsigned decimal fingerprint per line into a uint64 array.

    Surrounding whitespace and CRLF line ends are accepted, blank lines skipped. The first bad line
    raises :class:`InputError` naming ``source``, its 1-based line number and its text.
    """
    if len(data) <= SMALL_PARSE_BYTES:
        small = _parse_small(data)
        if small is not None:
            return small
    from neardup.io import _kernels as kernels  # numba loads only for inputs that need it

    buf = np.frombuffer(data, dtype=np.uint8)
    values, status, line, start, end = kernels.parse_decimal_lines(buf)
    if status == 0:
        return values
    text = data[start:end].decode("utf-8", errors="replace").strip()
    shown = text if len(text) <= 60 else text[:57] + "..."
    if status == 2:
        reason = "is not below 2**64"
    elif text.startswith("-") and text[1:].isdigit():
        reason = "is negative"
    else:
        reason = "is not an unsigned decimal integer"
    raise InputError(source, int(line), f"{shown!r} {reason}")


def _parse_small(data: bytes) -> np.ndarray | None:
    """The values of a small valid input in plain Python (the kernel's rules: ASCII digits
    between optional space, tab, CR, VT or FF); None when a line is bad (the kernel then names
    it)."""
    out = []
    for line in data.split(b"\n"):
        text = line.strip()  # the kernel's spaces, and no others: \n is the separator
        if not text:
            continue
        if not text.isdigit():
            return None
        v = int(text)
        if v >> 64:
            return None
        out.append(v)
    return np.array(out, dtype=np.uint64)


def format_json_rows(values: np.ndarray, row_ptr: np.ndarray) -> bytes:
    """Format rows of uint64 values as JSON arrays, one per line: ``[a, b, c]\\n``.

    Row ``r`` holds ``values[row_ptr[r]:row_ptr[r + 1]]``.
    """
    values = np.ascontiguousarray(values, dtype=np.uint64)
    row_ptr = np.ascontiguousarray(row_ptr, dtype=np.int64)
    if len(row_ptr) <= 1:
        return b""
    if len(values) <= small.SMALL_INPUT:
        return "".join(
            "[" + ", ".join(map(str, values[a:b].tolist())) + "]\n"
            for a, b in zip(row_ptr[:-1].tolist(), row_ptr[1:].tolist(), strict=True)
        ).encode()
    from neardup.io import _kernels as kernels

    return kernels.format_json_rows(values, row_ptr).tobytes()

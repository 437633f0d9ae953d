"""numba kernels of the text formats: decimal fingerprint lines in, JSON rows out.

Every function takes contiguous arrays and validates nothing. Kernels other modules call are public
(``__all__``), the rest ``_``-prefixed.
"""

from __future__ import annotations

import numpy as np

from neardup.compiled import njit

__all__ = ["format_json_rows", "json_too_deep", "parse_decimal_lines"]

_U0 = np.uint64(0)


@njit(cache=True, nogil=True, inline="always")
def _is_space(c):
    return c == 32 or c == 9 or c == 13 or c == 11 or c == 12


@njit(cache=True, nogil=True)
def parse_decimal_lines(buf):
    """Parse newline-separated unsigned decimals; returns (values, status, line, start, end).

    status 0 = ok; 1 = a line that is not digits; 2 = a value >= 2**64. ``line`` is 1-based and
    ``start:end`` the byte range of the offending line.
    """
    n = buf.shape[0]
    lines = 1
    for i in range(n):
        if buf[i] == 10:
            lines += 1
    out = np.empty(lines, dtype=np.uint64)
    cnt = 0
    line = 1
    i = 0
    limit = np.uint64(1844674407370955161)
    ten = np.uint64(10)
    while i < n:
        j = i
        while j < n and buf[j] != 10:
            j += 1
        s = i
        e = j
        while s < e and _is_space(buf[s]):
            s += 1
        while e > s and _is_space(buf[e - 1]):
            e -= 1
        if s < e:
            v = _U0
            for t in range(s, e):
                c = buf[t]
                if c < 48 or c > 57:
                    return out[:0], 1, line, i, j
                d = np.uint64(c - 48)
                if v > limit or (v == limit and d > np.uint64(5)):
                    return out[:0], 2, line, i, j
                v = v * ten + d
            out[cnt] = v
            cnt += 1
        line += 1
        i = j + 1
    return out[:cnt], 0, 0, 0, 0


@njit(cache=True, nogil=True)
def format_json_rows(values, row_ptr):
    """Write rows ``values[row_ptr[r]:row_ptr[r+1]]`` as ``[a, b]\\n`` lines into a byte array."""
    nrows = row_ptr.shape[0] - 1
    out = np.empty(values.shape[0] * 22 + nrows * 3 + 16, dtype=np.uint8)
    digits = np.empty(20, dtype=np.uint8)
    w = 0
    ten = np.uint64(10)
    for r in range(nrows):
        out[w] = 91  # [
        w += 1
        for t in range(row_ptr[r], row_ptr[r + 1]):
            if t > row_ptr[r]:
                out[w] = 44  # ,
                out[w + 1] = 32
                w += 2
            v = values[t]
            nd = 0
            while True:
                digits[nd] = np.uint8(v % ten) + 48
                nd += 1
                v = v // ten
                if v == _U0:
                    break
            for d in range(nd - 1, -1, -1):
                out[w] = digits[d]
                w += 1
        out[w] = 93  # ]
        out[w + 1] = 10
        w += 2
    return out[:w]


@njit(cache=True, nogil=True)
def json_too_deep(buf, limit):
    """True when the JSON text ``buf`` nests arrays/objects more than ``limit`` deep.

    Counts ``[`` and ``{`` outside strings (a backslash escapes the next byte inside a string).
    """
    depth = 0
    in_string = False
    escaped = False
    for i in range(buf.shape[0]):
        c = buf[i]
        if in_string:
            if escaped:
                escaped = False
            elif c == 92:  # backslash
                escaped = True
            elif c == 34:  # "
                in_string = False
        elif c == 34:
            in_string = True
        elif c == 91 or c == 123:  # [ {
            depth += 1
            if depth > limit:
                return True
        elif c == 93 or c == 125:  # ] }
            depth -= 1
    return False

"""numba kernels of the block readers: a whole block of JSONL or text lines at a time, GIL-free.

Every function takes contiguous arrays and validates nothing. Kernels other modules call are public
(``__all__``), the rest ``_``-prefixed. The JSONL kernel accepts only what Python's ``json`` module
accepts, with the same values; any line it is not sure of (invalid UTF-8, an escaped key, a
repeated text or id key, a lone surrogate in the text or id, nesting deeper than its stack, a
number it does not convert, any syntax error, ...) is marked ``LINE_SLOW`` for the Python reader to
decide, so results and errors are the Python reader's.

Numba's on-disk cache of these kernels is keyed by this file alone: after editing
``_json_kernels.py`` in a source checkout, delete the ``__pycache__`` numba files (``*.nbi``,
``*.nbc``) or the kernels here keep the old code.
"""

from __future__ import annotations

import numpy as np

from neardup.compiled import njit
from neardup.io._json_kernels import _copy_utf8, _number, _skip_value, _string, _ws

__all__ = [
    "ID_INT",
    "ID_STR",
    "LINE_BLANK",
    "LINE_OK",
    "LINE_SLOW",
    "LINE_TOO_BIG",
    "STACK",
    "parse_lines",
]

LINE_OK = 0  # a document: its text (and id) written to the output buffers
LINE_BLANK = 1  # only ASCII whitespace (bytes.strip): not a record (JSONL)
LINE_SLOW = 2  # left to the Python reader
LINE_TOO_BIG = 3  # longer than the record limit (line end not counted)

ID_STR = 1  # the id's UTF-8 in the id buffer (a given string, or "source:line")
ID_INT = 2  # an integer id in ``id_int``

#: Deepest nesting the JSONL kernel follows (deeper lines go to the Python reader).
STACK = 64


@njit(cache=True, nogil=True)
def _same(buf, a, b, name):
    if b - a != name.shape[0]:
        return False
    for k in range(b - a):
        if buf[a + k] != name[k]:
            return False
    return True


@njit(cache=True, nogil=True)
def _is_blank(buf, s, e):
    for i in range(s, e):
        c = buf[i]
        if not (c == 32 or (9 <= c <= 13)):
            return False
    return True


@njit(cache=True, nogil=True)
def _jsonl_line(buf, s, e, field, id_name, id_mode, depth, stack, out, o, ids, q, id_int, k):
    """One JSONL line ``buf[s:e]`` (line end excluded): ``(status, o, q, id_kind)``, its text
    at ``out[o_in:o]`` and a string id at ``ids[q_in:q]`` (newline-terminated)."""
    o0 = o
    q0 = q
    i = _ws(buf, s, e)
    if depth < 1 or i >= e or buf[i] != 123:
        return LINE_SLOW, o0, q0, 0
    i = _ws(buf, i + 1, e)
    have_text = False
    id_kind = 0
    while True:
        if i >= e or buf[i] != 34:
            return LINE_SLOW, o0, q0, 0  # also the empty object: no text field
        ks = i + 1
        i, _, flags = _string(buf, i, e, stack, 0, False)
        if i < 0 or flags != 0:
            return LINE_SLOW, o0, q0, 0  # an escaped key might spell a field's name
        ke = i - 1
        i = _ws(buf, i, e)
        if i >= e or buf[i] != 58:
            return LINE_SLOW, o0, q0, 0
        i = _ws(buf, i + 1, e)
        if i >= e:
            return LINE_SLOW, o0, q0, 0
        if _same(buf, ks, ke, field):
            if have_text or buf[i] != 34:
                return LINE_SLOW, o0, q0, 0
            i, o, _ = _string(buf, i, e, out, o0, True)
            if i < 0:
                return LINE_SLOW, o0, q0, 0
            have_text = True
        elif id_mode != 0 and _same(buf, ks, ke, id_name):
            if id_kind != 0:
                return LINE_SLOW, o0, q0, 0
            if buf[i] == 34:
                i, q, flags = _string(buf, i, e, ids, q0, True)
                if i < 0 or flags & 2:
                    return LINE_SLOW, o0, q0, 0  # a newline would split the id list
                ids[q] = 10
                q += 1
                id_kind = ID_STR
            else:
                j, is_int, digits = _number(buf, i, e)
                if j < 0 or not is_int or digits > 18:
                    return LINE_SLOW, o0, q0, 0
                neg = buf[i] == 45
                v = 0
                for t in range(i + 1 if neg else i, j):
                    v = v * 10 + (buf[t] - 48)
                id_int[k] = -v if neg else v
                id_kind = ID_INT
                i = j
        else:
            i = _skip_value(buf, i, e, stack, depth - 1)
            if i < 0:
                return LINE_SLOW, o0, q0, 0
        i = _ws(buf, i, e)
        if i >= e:
            return LINE_SLOW, o0, q0, 0
        if buf[i] == 44:
            i = _ws(buf, i + 1, e)
            continue
        if buf[i] != 125:
            return LINE_SLOW, o0, q0, 0
        i = _ws(buf, i + 1, e)
        break
    if i != e or not have_text or (id_mode == 2 and id_kind == 0):
        return LINE_SLOW, o0, q0, 0
    return LINE_OK, o, q, id_kind


@njit(cache=True, nogil=True)
def _text_line(buf, s, e, out, o):
    """One line as a document: ``buf[s:e]`` less its trailing ``\\r``/``\\n`` bytes, strict
    UTF-8; ``(status, o)``."""
    while e > s and (buf[e - 1] == 13 or buf[e - 1] == 10):
        e -= 1
    i = s
    o0 = o
    while i < e:
        c = buf[i]
        if c < 128:
            out[o] = c
            o += 1
            i += 1
            continue
        i, o = _copy_utf8(buf, i, e, out, o)
        if i < 0:
            return LINE_SLOW, o0
    return LINE_OK, o


@njit(cache=True, nogil=True)
def _put_default_id(ids, q, prefix, number):
    """``prefix`` and the decimal ``number`` (> 0), then a newline, at ``ids[q:]``."""
    for t in range(prefix.shape[0]):
        ids[q + t] = prefix[t]
    q += prefix.shape[0]
    nd = 0
    v = number
    while v > 0:
        nd += 1
        v //= 10
    v = number
    for t in range(nd - 1, -1, -1):
        ids[q + t] = 48 + v % 10
        v //= 10
    ids[q + nd] = 10
    return q + nd + 1


@njit(cache=True, nogil=True)
def parse_lines(buf, jsonl, field, id_name, id_mode, prefix, first, limit, depth):
    """Every line of ``buf`` (whole lines; the last may lack its newline).

    ``jsonl``: JSON objects whose ``field`` is the text and ``id_name`` the id (``id_mode`` 0:
    no id field, 1: used when present, 2: required), else a document per line. Lines are
    numbered from ``first``. A string id, or ``prefix`` and the line number where a record has
    no id (with an empty ``prefix``, nothing: the caller names it), is written to the id buffer
    followed by a newline.

    Returns ``(status, text_end, chars, id_kind, id_end, id_int, text, ids, line_end)`` per
    line: the text of line ``j`` (``LINE_OK``) is ``text[text_end[j - 1]:text_end[j]]``
    (``chars`` code points; other lines add nothing), its string id
    ``ids[id_end[j - 1]:id_end[j] - 1]``, and the line ends at ``buf[line_end[j]]`` (its line
    end, or the end of ``buf``).
    """
    n = buf.shape[0]
    lines = 0
    for i in range(n):
        if buf[i] == 10:
            lines += 1
    if n > 0 and buf[n - 1] != 10:
        lines += 1
    status = np.empty(lines, dtype=np.uint8)
    text_end = np.empty(lines, dtype=np.int64)
    chars = np.zeros(lines, dtype=np.int64)
    id_kind = np.zeros(lines, dtype=np.uint8)
    id_end = np.empty(lines, dtype=np.int64)
    id_int = np.zeros(lines, dtype=np.int64)
    line_end = np.empty(lines, dtype=np.int64)
    text = np.empty(max(n, 1), dtype=np.uint8)
    ids = np.empty(n + lines * (prefix.shape[0] + 21) + 1, dtype=np.uint8)
    stack = np.empty(STACK, dtype=np.uint8)
    depth = min(depth, STACK)
    o = 0
    q = 0
    s = 0
    for k in range(lines):
        e = s
        while e < n and buf[e] != 10:
            e += 1
        kind = 0
        if e - s > limit:
            st = LINE_TOO_BIG
        elif jsonl and _is_blank(buf, s, e):
            st = LINE_BLANK
        elif jsonl:
            o1 = o
            st, o, q, kind = _jsonl_line(
                buf, s, e, field, id_name, id_mode, depth, stack, text, o, ids, q, id_int, k
            )
            c = 0
            for t in range(o1, o):
                c += (text[t] & 0xC0) != 0x80
            chars[k] = c
        else:
            o1 = o
            st, o = _text_line(buf, s, e, text, o)
            c = 0
            for t in range(o1, o):
                c += (text[t] & 0xC0) != 0x80
            chars[k] = c
        if st == LINE_OK and kind == 0 and prefix.shape[0] > 0:
            q = _put_default_id(ids, q, prefix, first + k)
            kind = ID_STR
        status[k] = st
        text_end[k] = o
        id_kind[k] = kind
        id_end[k] = q
        line_end[k] = e
        s = e + 1
    return status, text_end, chars, id_kind, id_end, id_int, text[:o], ids[:q], line_end

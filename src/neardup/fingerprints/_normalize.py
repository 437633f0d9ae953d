"""Numba kernels: Unicode normalization (NFKC, case folding) of text, without the GIL.

Only ``@njit(cache=True, nogil=True)`` functions over arrays (``_``-prefixed but for
:func:`first_invalid_utf8`, which the UTF-8 readers call), and the constants they share with
``unicode_tables.py`` (which builds their tables from :mod:`unicodedata`).

Input text is UTF-8 (``uint8`` arrays; lone surrogates allowed, as ``surrogatepass`` encodes
them) or UTF-16 little-endian code units (``uint16`` arrays, as ``str.encode("utf-16-le")``
gives them); output is always UTF-8. ``_normalize_doc`` gives the UTF-8 of
``unicodedata.normalize("NFKC", s).casefold()`` (or of the NFKC or case folding alone, or of
``s`` itself). Characters flagged ``NFKC_STABLE`` are normalization boundaries that NFKC leaves
as they are: they are case folded one by one (ASCII: ``A-Z`` to ``a-z``); the text between two
boundaries that holds anything else goes through the full algorithm, as CPython's
``unicodedata`` runs it: compatibility decomposition, canonical ordering (a stable insertion sort
by combining class), canonical composition (CPython's loop, Hangul included), then case folding.
"""

from __future__ import annotations

import numpy as np

from neardup.compiled import njit
from neardup.primitives import put_utf8

__all__ = [
    "COMP_FIRST",
    "COMP_LAST",
    "FOLD_MASK",
    "FOLD_MULTI",
    "L_BASE",
    "L_COUNT",
    "NFKC_STABLE",
    "NORM_CASEFOLD",
    "NORM_NFKC",
    "NORM_NFKC_CASEFOLD",
    "NORM_NONE",
    "S_BASE",
    "T_BASE",
    "T_COUNT",
    "V_BASE",
    "V_COUNT",
    "first_invalid_utf8",
]

# props bits (see unicode_tables.py)
FOLD_MASK = (1 << 21) - 1
FOLD_MULTI = 1 << 21
NFKC_STABLE = 1 << 22
COMP_FIRST = 1 << 23
COMP_LAST = 1 << 24

# normalization modes: bit 0 case folding, bit 1 NFKC (applied first)
NORM_NONE = 0
NORM_CASEFOLD = 1
NORM_NFKC = 2
NORM_NFKC_CASEFOLD = 3

# Hangul (Unicode chapter 3.12), with CPython's bounds
S_BASE = 0xAC00
L_BASE = 0x1100
V_BASE = 0x1161
T_BASE = 0x11A7
L_COUNT = 19
V_COUNT = 21
T_COUNT = 28


@njit(cache=True, nogil=True)
def _utf16_cp(x, y):
    """Code point and length of UTF-16 code units ``x`` (not ASCII) and ``y`` (the next unit, 0
    at the end): a surrogate pair is one character, a lone surrogate is itself."""
    if 0xD800 <= x < 0xDC00 and 0xDC00 <= y < 0xE000:
        return 0x10000 + ((x - 0xD800) << 10) + (y - 0xDC00), 2
    return x, 1


@njit(cache=True, nogil=True)
def _utf8_cp(x, b1, b2, b3, avail):
    """Code point and length of the UTF-8 sequence of lead byte ``x`` (not ASCII) and the next
    bytes, ``avail`` bytes from ``x`` on in the text (as ``_kernels._decode``: lenient)."""
    if x < 0xE0:
        n = 2
        cp = x & 0x1F
    elif x < 0xF0:
        n = 3
        cp = x & 0x0F
    else:
        n = 4
        cp = x & 0x07
    if n > avail:
        return np.int64(0xFFFD), 1
    cp = (cp << 6) | (b1 & 0x3F)
    if n > 2:
        cp = (cp << 6) | (b2 & 0x3F)
    if n > 3:
        cp = (cp << 6) | (b3 & 0x3F)
    if cp > 0x10FFFF:
        cp = 0xFFFD
    return np.int64(cp), n


@njit(cache=True, nogil=True)
def _decode_at(src, i, end):
    """Code point and length in units of the character at ``src[i]``: UTF-16 code units for a
    ``uint16`` array, UTF-8 bytes otherwise. (Hot loops repeat these lines rather than call:
    a call that passes an array may cost reference counting when LLVM does not inline it.)"""
    x = np.int64(src[i])
    if x < 0x80:
        return x, 1
    if src.itemsize == 2:
        return _utf16_cp(x, np.int64(src[i + 1]) if i + 1 < end else np.int64(0))
    b1 = np.int64(src[i + 1]) if i + 1 < end else np.int64(0)
    b2 = np.int64(src[i + 2]) if i + 2 < end else np.int64(0)
    b3 = np.int64(src[i + 3]) if i + 3 < end else np.int64(0)
    return _utf8_cp(x, b1, b2, b3, end - i)


@njit(cache=True, nogil=True)
def _emit_multi(out, o, p, fold_seq, fold_off):
    """Write the case folding of several code points of ``props`` entry ``p`` as UTF-8."""
    k = p & FOLD_MASK
    for t in range(fold_off[k], fold_off[k + 1]):
        o = put_utf8(out, o, np.int64(fold_seq[t]))
    return o


@njit(cache=True, nogil=True)
def _emit(out, o, cp, fold, props, fold_seq, fold_off):
    """Write ``cp`` (case folded when ``fold``) as UTF-8; at most 12 bytes.

    Inlined by hand in the byte loop of ``_normalize_into``: a call with arrays there costs
    reference counting on every character."""
    if not fold:
        return put_utf8(out, o, cp)
    p = props[cp]
    if p & FOLD_MULTI:
        return _emit_multi(out, o, p, fold_seq, fold_off)
    return put_utf8(out, o, np.int64(p & FOLD_MASK))


@njit(cache=True, nogil=True)
def _ccc(tables, cp):
    return tables.slow[cp] & 0xFF


@njit(cache=True, nogil=True)
def _composite(tables, first, second):
    """The primary composite of ``first`` + ``second``, or -1."""
    key = (np.int64(first) << 21) | np.int64(second)
    keys = tables.pair_keys
    lo = 0
    hi = keys.shape[0]
    while lo < hi:
        mid = (lo + hi) >> 1
        if keys[mid] < key:
            lo = mid + 1
        else:
            hi = mid
    if lo < keys.shape[0] and keys[lo] == key:
        return np.int64(tables.pair_vals[lo])
    return np.int64(-1)


@njit(cache=True, nogil=True)
def _nfkc_segment(buf, start, end, tables, work):
    """NFKC of the text ``buf[start:end]`` (UTF-8 bytes or UTF-16 code units) as code points
    in ``work[:n]``; returns ``n``, or -1 when ``work`` is too small."""
    # full compatibility decomposition
    cap = work.shape[0]
    n = 0
    i = start
    while i < end:
        cp, ln = _decode_at(buf, i, end)
        i += ln
        k = np.int64(tables.slow[cp] >> 8)
        if k == 0:
            if n >= cap:
                return -1
            work[n] = cp
            n += 1
        else:
            lo = tables.decomp_off[k - 1]
            hi = tables.decomp_off[k]
            if n + hi - lo > cap:
                return -1
            for t in range(lo, hi):
                work[n] = tables.decomp[t]
                n += 1
    # canonical ordering: CPython's insertion sort of non-starters by combining class
    if n > 1:
        prev = _ccc(tables, np.int64(work[0]))
        for i in range(1, n):
            cur = _ccc(tables, np.int64(work[i]))
            if prev == 0 or cur == 0 or prev <= cur:
                prev = cur
                continue
            o = i - 1
            while True:
                tmp = work[o + 1]
                work[o + 1] = work[o]
                work[o] = tmp
                o -= 1
                if o < 0:
                    break
                prev = _ccc(tables, np.int64(work[o]))
                if prev == 0 or prev <= cur:
                    break
            prev = _ccc(tables, np.int64(work[i]))
    # canonical composition: CPython's nfc_nfkc loop, in place (the output position never
    # passes the input position); characters composed into an earlier one are marked -1
    i = 0
    o = 0
    while i < n:
        code = np.int64(work[i])
        if code < 0:
            i += 1
            continue
        if (
            L_BASE <= code < L_BASE + L_COUNT
            and i + 1 < n
            and V_BASE <= work[i + 1] < V_BASE + V_COUNT
        ):
            code = S_BASE + ((code - L_BASE) * V_COUNT + (work[i + 1] - V_BASE)) * T_COUNT
            i += 2
            if i < n and T_BASE < work[i] < T_BASE + T_COUNT:
                code += work[i] - T_BASE
                i += 1
            work[o] = code
            o += 1
            continue
        if not (tables.props[code] & COMP_FIRST):
            work[o] = code
            o += 1
            i += 1
            continue
        i1 = i + 1
        comb = 0
        while i1 < n:
            code1 = np.int64(work[i1])
            if code1 < 0:  # never reached: marks composed by earlier starters lie before i
                i1 += 1
                continue
            comb1 = _ccc(tables, code1)
            if comb != 0:
                if comb1 == 0:
                    break
                if comb >= comb1:  # blocked
                    i1 += 1
                    continue
            composite = np.int64(-1)
            if tables.props[code1] & COMP_LAST:
                composite = _composite(tables, code, code1)
            if composite < 0:
                if comb1 == 0:
                    break
                comb = comb1
                i1 += 1
                continue
            code = composite
            work[i1] = -1
            i1 += 1
            if not (tables.props[code] & COMP_FIRST):
                break
        work[o] = code
        o += 1
        i += 1
    return o


@njit(cache=True, nogil=True)
def _normalize_into(buf, start, end, mode, tables, out, work):
    """Normalize the text ``buf[start:end]`` (UTF-8 bytes or UTF-16 code units) into the UTF-8
    ``out[:m]``; returns ``m``, or -1 when ``out`` is too small, -2 when the code point scratch
    ``work`` is."""
    # (no array is reassigned here: that would cost reference counting in the byte loop)
    fold = (mode & NORM_CASEFOLD) != 0
    nfkc = (mode & NORM_NFKC) != 0
    props = tables.props
    fold_seq = tables.fold
    fold_off = tables.fold_off
    cap = out.shape[0]
    if end - start + 16 > cap:
        return -1
    o = np.int64(0)  # not the literal 0: calls typed with a literal compile twice
    seg_in = start  # the last boundary seen (where a segment to normalize would start)
    seg_out = o
    i = start
    while i < end:
        x = buf[i]
        if x < 0x80:  # ASCII: a boundary; NFKC keeps it, case folding is A-Z to a-z
            seg_in = i
            seg_out = o
            if fold and 65 <= x <= 90:
                x += 32
            out[o] = x
            o += 1
            i += 1
            continue
        # _decode_at, by hand
        if buf.itemsize == 2:
            y = np.int64(buf[i + 1]) if i + 1 < end else np.int64(0)
            cp, ln = _utf16_cp(np.int64(x), y)
        else:
            b1 = np.int64(buf[i + 1]) if i + 1 < end else np.int64(0)
            b2 = np.int64(buf[i + 2]) if i + 2 < end else np.int64(0)
            b3 = np.int64(buf[i + 3]) if i + 3 < end else np.int64(0)
            cp, ln = _utf8_cp(np.int64(x), b1, b2, b3, end - i)
        p = props[cp] if nfkc or fold else np.uint32(0)  # (the tables of "none" are empty)
        if not nfkc or (p & NFKC_STABLE):
            seg_in = i
            seg_out = o
            # keep room for 12 bytes now and one per input byte left (the ASCII path)
            if o + 12 + end - i > cap:
                return -1
            if not fold:
                o = put_utf8(out, o, cp)
            elif p & FOLD_MULTI:
                o = _emit_multi(out, o, p, fold_seq, fold_off)  # rare: a call here is fine
            else:
                o = put_utf8(out, o, np.int64(p & FOLD_MASK))
            i += ln
            continue
        # from the last boundary to the next one: the full algorithm
        j = i + ln
        while j < end:
            if buf[j] < 0x80:
                break
            cp2, ln2 = _decode_at(buf, j, end)  # rare: a call here is fine
            if props[cp2] & NFKC_STABLE:
                break
            j += ln2
        n = _nfkc_segment(buf, seg_in, j, tables, work)
        if n < 0:
            return -2
        o = seg_out
        if o + 12 * n + end - j + 16 > cap:
            return -1
        for t in range(n):
            o = _emit(out, o, np.int64(work[t]), fold, props, fold_seq, fold_off)
        i = j
        seg_in = j
        seg_out = o
    return o


@njit(cache=True, nogil=True)
def _normalize_doc(buf, start, end, mode, tables, out, work):
    """Normalize the text ``buf[start:end]`` (UTF-8 bytes or UTF-16 code units) into the UTF-8
    ``out[:m]`` (``mode``: ``NORM_*``; ``NORM_NONE`` only transcodes).

    Returns ``(out, m, work)``; ``out`` and the code point scratch ``work`` are replaced by
    larger arrays when they are too small.
    """
    if end - start + 16 > out.shape[0]:
        out = np.empty(2 * (end - start) + 64, dtype=np.uint8)
    while True:
        m = _normalize_into(buf, start, end, mode, tables, out, work)
        if m >= 0:
            return out, m, work
        if m == -1:
            out = np.empty(2 * out.shape[0], dtype=np.uint8)
        else:
            work = np.empty(2 * work.shape[0], dtype=np.int32)


@njit(cache=True, nogil=True)
def _is_ascii(buf, start, end):
    """Whether ``buf[start:end]`` is all ASCII (< 0x80)."""
    acc = 0
    for i in range(start, end):
        acc |= buf[i]
    return acc < 0x80


@njit(cache=True, nogil=True)
def _lower_ascii(buf, start, end, out):
    """``out[:end - start]`` = ``buf[start:end]`` with A-Z turned to a-z (ASCII text: its NFKC
    and case folding)."""
    for k in range(end - start):
        x = buf[start + k]
        out[k] = x + 32 * ((x >= 65) & (x <= 90))


@njit(cache=True, nogil=True)
def _narrow_ascii(buf16, start, end, out):
    """``out[:n]`` = the UTF-16 ``buf16[start:end]`` with ASCII units as bytes and every other
    unit as 0x80 (not a letter, not NUL): what the ``ascii_letters`` tokenizer sees of the
    text; returns ``n``."""
    n = end - start
    for k in range(n):
        x = buf16[start + k]
        out[k] = x if x < 0x80 else 0x80
    return n


@njit(cache=True, nogil=True)
def _char_to_unit_offsets(buf16, offsets):
    """Code unit offsets of documents in the UTF-16 ``buf16`` (no lone surrogates) from their
    code point offsets ``offsets`` (non-decreasing, from 0); a new array. One pass over the
    units, without loads that depend on the previous one."""
    out = np.empty_like(offsets)
    nd = offsets.shape[0]
    d = 0
    c = 0  # code points before unit u
    for u in range(buf16.shape[0]):
        x = buf16[u]
        if x < 0xDC00 or x >= 0xE000:  # a code point starts here (not a low surrogate)
            while d < nd and offsets[d] == c:
                out[d] = u
                d += 1
            c += 1
    while d < nd:  # the end of the last documents
        out[d] = buf16.shape[0]
        d += 1
    return out


@njit(cache=True, nogil=True)
def _valid_utf8(buf, start, end):
    """Whether ``buf[start:end]`` is UTF-8 as Python's strict decoder accepts it (no overlong
    forms, no surrogates, nothing above U+10FFFF, no truncated sequence)."""
    i = start
    while i < end:
        x = buf[i]
        if x < 0x80:
            i += 1
            continue
        if 0xC2 <= x <= 0xDF:
            n = 1
            lo, hi = 0x80, 0xBF
        elif 0xE0 <= x <= 0xEF:
            n = 2
            lo = 0xA0 if x == 0xE0 else 0x80
            hi = 0x9F if x == 0xED else 0xBF
        elif 0xF0 <= x <= 0xF4:
            n = 3
            lo = 0x90 if x == 0xF0 else 0x80
            hi = 0x8F if x == 0xF4 else 0xBF
        else:
            return False
        if i + n >= end:  # truncated
            return False
        y = buf[i + 1]
        if y < lo or y > hi:
            return False
        for k in range(2, n + 1):
            if buf[i + k] & 0xC0 != 0x80:
                return False
        i += n + 1
    return True


@njit(cache=True, nogil=True)
def first_invalid_utf8(buf, offsets):
    """Index of the first document ``buf[offsets[d]:offsets[d+1]]`` that is not valid UTF-8,
    or -1."""
    for d in range(offsets.shape[0] - 1):
        if not _valid_utf8(buf, offsets[d], offsets[d + 1]):
            return d
    return -1

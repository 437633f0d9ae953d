"""numba kernels that scan JSON text exactly as Python's ``json`` module accepts it: white
space, strings (validated, or unescaped into UTF-8), numbers, literals and whole values.

Every function is ``_``-prefixed, takes contiguous arrays and validates nothing; each returns
-1 for an end where ``json`` would refuse the text (or where the caller must not trust it).
"""

from __future__ import annotations

import numpy as np

from neardup.compiled import njit
from neardup.primitives import put_utf8


@njit(cache=True, nogil=True)
def _is_ws(c):
    return c == 32 or c == 9 or c == 13 or c == 10


@njit(cache=True, nogil=True)
def _ws(buf, i, e):
    while i < e and _is_ws(buf[i]):
        i += 1
    return i


@njit(cache=True, nogil=True)
def _cont(buf, i, e, lo, hi):
    return i < e and lo <= buf[i] <= hi


@njit(cache=True, nogil=True)
def _utf8_len(buf, i, e):
    """Length of the valid (strict, as Python decodes) UTF-8 sequence at ``buf[i] >= 0x80``,
    or 0."""
    c = buf[i]
    if c < 0xC2:
        return 0
    if c < 0xE0:
        return 2 if _cont(buf, i + 1, e, 0x80, 0xBF) else 0
    if c < 0xF0:
        lo = 0xA0 if c == 0xE0 else 0x80
        hi = 0x9F if c == 0xED else 0xBF  # no UTF-8 encoded surrogates
        ok = _cont(buf, i + 1, e, lo, hi) and _cont(buf, i + 2, e, 0x80, 0xBF)
        return 3 if ok else 0
    if c < 0xF5:
        lo = 0x90 if c == 0xF0 else 0x80
        hi = 0x8F if c == 0xF4 else 0xBF
        ok = (
            _cont(buf, i + 1, e, lo, hi)
            and _cont(buf, i + 2, e, 0x80, 0xBF)
            and _cont(buf, i + 3, e, 0x80, 0xBF)
        )
        return 4 if ok else 0
    return 0


@njit(cache=True, nogil=True)
def _copy_utf8(buf, i, e, out, o):
    """Copy the UTF-8 sequence at ``buf[i] >= 0x80`` to ``out[o:]``: ``(i, o)`` after it, ``i``
    -1 when it is not valid UTF-8."""
    n = _utf8_len(buf, i, e)
    if n == 0:
        return -1, o
    for k in range(n):
        out[o + k] = buf[i + k]
    return i + n, o + n


@njit(cache=True, nogil=True)
def _hex4(buf, i, e):
    """The 4 hex digits at ``buf[i:i + 4]`` as a code unit, or -1."""
    if i + 4 > e:
        return -1
    v = 0
    for k in range(4):
        c = buf[i + k]
        if 48 <= c <= 57:
            d = c - 48
        elif 97 <= c <= 102:
            d = c - 87
        elif 65 <= c <= 70:
            d = c - 55
        else:
            return -1
        v = v * 16 + d
    return v


@njit(cache=True, nogil=True)
def _string(buf, i, e, out, o, copy):
    """The JSON string whose opening quote is ``buf[i]``: returns ``(end, o, flags)``, ``end``
    just after the closing quote or -1 where ``json`` would fail (or, with ``copy``, the string
    holds a lone surrogate). With ``copy`` its value is written to ``out[o:]`` as UTF-8.
    ``flags``: 1 an escape was seen, 2 the value holds a newline."""
    i += 1
    flags = 0
    while i < e:
        c = buf[i]
        if c == 34:  # "
            return i + 1, o, flags
        if c == 92:  # backslash
            flags |= 1
            if i + 1 >= e:
                return -1, o, flags
            x = buf[i + 1]
            i += 2
            if x == 117:  # u
                cp = _hex4(buf, i, e)
                if cp < 0:
                    return -1, o, flags
                i += 4
                if 0xD800 <= cp <= 0xDBFF and i + 1 < e and buf[i] == 92 and buf[i + 1] == 117:
                    lo = _hex4(buf, i + 2, e)
                    if lo < 0:
                        return -1, o, flags  # json: invalid \uXXXX escape
                    if 0xDC00 <= lo <= 0xDFFF:
                        cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00)
                        i += 6
                if copy:
                    if 0xD800 <= cp <= 0xDFFF:
                        return -1, o, flags  # a lone surrogate: not UTF-8
                    o = put_utf8(out, o, cp)
                    if cp == 10:
                        flags |= 2
                continue
            if x == 34 or x == 92 or x == 47:
                v = x
            elif x == 110:
                v = 10
                flags |= 2
            elif x == 116:
                v = 9
            elif x == 114:
                v = 13
            elif x == 98:
                v = 8
            elif x == 102:
                v = 12
            else:
                return -1, o, flags
            if copy:
                out[o] = v
                o += 1
            continue
        if c < 32:
            return -1, o, flags  # json (strict): invalid control character
        if c < 128:
            if copy:
                out[o] = c
                o += 1
            i += 1
            continue
        if copy:
            i, o = _copy_utf8(buf, i, e, out, o)
        else:
            n = _utf8_len(buf, i, e)
            i = i + n if n else -1
        if i < 0:
            return -1, o, flags
    return -1, o, flags


# the literals json reads: null true false NaN Infinity (offset, length into _LITERALS)
_LITERALS = np.frombuffer(b"nulltruefalseNaNInfinity", dtype=np.uint8)


@njit(cache=True, nogil=True)
def _word(buf, i, e, at, n):
    """``i + n`` when ``buf[i:i + n]`` is ``_LITERALS[at:at + n]``, else -1."""
    if i + n > e:
        return -1
    for k in range(n):
        if buf[i + k] != _LITERALS[at + k]:
            return -1
    return i + n


@njit(cache=True, nogil=True)
def _number(buf, i, e):
    """The JSON number at ``buf[i]`` as ``json`` scans it: ``(end, is_int, digits)`` with
    ``end`` -1 when there is none; ``digits``: of the integer part."""
    j = i
    if j < e and buf[j] == 45:  # -
        j += 1
    if j >= e:
        return -1, False, 0
    c = buf[j]
    start = j
    if 49 <= c <= 57:
        j += 1
        while j < e and 48 <= buf[j] <= 57:
            j += 1
    elif c == 48:
        j += 1
    else:
        return -1, False, 0
    digits = j - start
    is_int = True
    if j + 1 < e and buf[j] == 46 and 48 <= buf[j + 1] <= 57:  # .
        is_int = False
        j += 2
        while j < e and 48 <= buf[j] <= 57:
            j += 1
    if j < e and (buf[j] == 101 or buf[j] == 69):  # e E
        k = j + 1
        if k < e and (buf[k] == 43 or buf[k] == 45):
            k += 1
        m = k
        while m < e and 48 <= buf[m] <= 57:
            m += 1
        if m > k:
            is_int = False
            j = m
    return j, is_int, digits


@njit(cache=True, nogil=True)
def _scalar(buf, i, e):
    """End of the literal or number at ``buf[i]``, or -1."""
    c = buf[i]
    if c == 110:  # null
        return _word(buf, i, e, 0, 4)
    if c == 116:  # true
        return _word(buf, i, e, 4, 4)
    if c == 102:  # false
        return _word(buf, i, e, 8, 5)
    if c == 78:  # NaN
        return _word(buf, i, e, 13, 3)
    if c == 73:  # Infinity
        return _word(buf, i, e, 16, 8)
    if c == 45 and i + 1 < e and buf[i + 1] == 73:  # -Infinity
        return _word(buf, i + 1, e, 16, 8)
    j, is_int, digits = _number(buf, i, e)
    if is_int and digits > 600:
        return -1  # Python may refuse to convert it (sys.get_int_max_str_digits)
    return j


@njit(cache=True, nogil=True)
def _key(buf, i, e, scratch):
    """After ``"key"``, ``:`` and white space; -1 on anything ``json`` refuses."""
    if i >= e or buf[i] != 34:
        return -1
    i, _, _ = _string(buf, i, e, scratch, 0, False)
    if i < 0:
        return -1
    i = _ws(buf, i, e)
    if i >= e or buf[i] != 58:  # :
        return -1
    return _ws(buf, i + 1, e)


@njit(cache=True, nogil=True)
def _skip_value(buf, i, e, stack, depth):
    """End of the JSON value at ``buf[i]`` (validated, not kept), nesting at most ``depth``
    more levels; -1 otherwise."""
    sp = 0
    while True:
        if i >= e:
            return -1
        c = buf[i]
        if c == 123 or c == 91:  # { [
            if sp >= depth:
                return -1
            stack[sp] = c
            sp += 1
            i = _ws(buf, i + 1, e)
            if i >= e:
                return -1
            if c == 123:
                if buf[i] != 125:
                    i = _key(buf, i, e, stack)
                    if i < 0:
                        return -1
                    continue
            elif buf[i] != 93:
                continue
            i += 1  # the empty container's end
            sp -= 1
        elif c == 34:
            i, _, _ = _string(buf, i, e, stack, 0, False)
            if i < 0:
                return -1
        else:
            i = _scalar(buf, i, e)
            if i < 0:
                return -1
        # after a complete value: close containers, or a comma and the next value
        while sp > 0:
            i = _ws(buf, i, e)
            if i >= e:
                return -1
            c = buf[i]
            top = stack[sp - 1]
            if c == 44:  # ,
                i = _ws(buf, i + 1, e)
                if top == 123:
                    i = _key(buf, i, e, stack)
                    if i < 0:
                        return -1
                break
            if (top == 123 and c == 125) or (top == 91 and c == 93):
                i += 1
                sp -= 1
                continue
            return -1
        if sp == 0:
            return i

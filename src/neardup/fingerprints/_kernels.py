"""Numba kernels for fingerprinting: feature hashes, tokenizing UTF-8 bytes, tallies.

Only ``@njit(cache=True, nogil=True)`` functions over arrays live here, public when another module
calls them (``__all__``), else ``_``-prefixed; the public modules validate and convert at the
boundary. All 64-bit arithmetic is done on ``uint64`` values (constants are typed ``np.uint64`` so
numba never falls back to float), and 32-bit arithmetic for lookup3 is done in ``uint64`` and
masked to 32 bits after every step.

Bit order: bit 63 is the most significant bit of a fingerprint; with ``reverse`` set the tally of
feature bit ``i`` sets fingerprint bit ``63 - i`` (the order of the C++ original).
"""

from __future__ import annotations

import numpy as np

from neardup.compiled import njit
from neardup.primitives import FNV_OFFSET, FNV_PRIME

__all__ = [
    "CLS_CHAR",
    "CLS_CHAR_MARK",
    "CLS_SEP",
    "CLS_WORD",
    "HASH_FNV1A64",
    "HASH_JENKINS",
    "SHINGLE_CHAIN",
    "SHINGLE_CYCLIC",
    "TOK_ASCII_LETTERS",
    "TOK_UNICODE",
    "TOK_UNICODE_WORDS",
    "WEIGHT_COUNT",
    "WEIGHT_LOG",
    "WEIGHT_UNIQUE",
    "compute_csr",
    "jenkins64_bytes",
    "lookup3_2",
    "tally_unit",
    "tally_weighted",
]

_U0 = np.uint64(0)
_U1 = np.uint64(1)
_M32 = np.uint64(0xFFFFFFFF)
_DEADBEEF = np.uint64(0xDEADBEEF)
_S32 = np.uint64(32)
_S8 = np.uint64(8)
_S16 = np.uint64(16)
_S24 = np.uint64(24)
_S64 = np.uint64(64)
_S5 = np.uint64(5)
_S26 = np.uint64(26)
_UPPER_A = np.uint64(65)
_BYTE = np.uint64(0xFF)

# Token classes of the code-point table (see tokenize.py).
CLS_SEP = 0
CLS_WORD = 1
CLS_CHAR = 2  # a letter/digit of a script written without spaces: one token per character
CLS_CHAR_MARK = 3  # a combining mark of such a script: extends the current character token

TOK_ASCII_LETTERS = 0
TOK_UNICODE = 1
TOK_UNICODE_WORDS = 2

HASH_JENKINS = 0
HASH_FNV1A64 = 1

SHINGLE_CYCLIC = 0
SHINGLE_CHAIN = 1

WEIGHT_COUNT = 0
WEIGHT_UNIQUE = 1
WEIGHT_LOG = 2


@njit(cache=True, nogil=True)
def _rot32(x, k):
    # callers pass k as np.uint64: a literal int compiles one specialization per value
    k64 = np.uint64(k)
    return ((x << k64) | (x >> (_S32 - k64))) & _M32


@njit(cache=True, nogil=True)
def _rotl64(x, k):
    k64 = np.uint64(k) % _S64
    if k64 == _U0:
        return x
    return (x << k64) | (x >> (_S64 - k64))


@njit(cache=True, nogil=True)
def _word4(buf, i):
    """Little-endian 32-bit word from the 4 bytes of ``buf`` at ``i``."""
    return (
        np.uint64(buf[i])
        | (np.uint64(buf[i + 1]) << _S8)
        | (np.uint64(buf[i + 2]) << _S16)
        | (np.uint64(buf[i + 3]) << _S24)
    )


@njit(cache=True, nogil=True)
def _word_at(buf, i, n):
    """Little-endian 32-bit word from up to ``n`` (<= 4) bytes of ``buf`` at ``i``, zero-padded."""
    if n >= 4:
        return _word4(buf, i)
    w = np.uint64(buf[i])
    if n > 1:
        w |= np.uint64(buf[i + 1]) << _S8
    if n > 2:
        w |= np.uint64(buf[i + 2]) << _S16
    return w


@njit(cache=True, nogil=True)
def lookup3_2(buf, start, end, pc, pb):
    """Bob Jenkins' lookup3 ``hashlittle2`` over ``buf[start:end]``; returns ``(c, b)``."""
    length = end - start
    a = (_DEADBEEF + np.uint64(length) + pc) & _M32
    b = a
    c = (a + pb) & _M32
    i = start
    while length > 12:
        a = (a + _word4(buf, i)) & _M32
        b = (b + _word4(buf, i + 4)) & _M32
        c = (c + _word4(buf, i + 8)) & _M32
        # mix(a, b, c)
        a = (a - c) & _M32
        a ^= _rot32(c, np.uint64(4))
        c = (c + b) & _M32
        b = (b - a) & _M32
        b ^= _rot32(a, np.uint64(6))
        a = (a + c) & _M32
        c = (c - b) & _M32
        c ^= _rot32(b, np.uint64(8))
        b = (b + a) & _M32
        a = (a - c) & _M32
        a ^= _rot32(c, np.uint64(16))
        c = (c + b) & _M32
        b = (b - a) & _M32
        b ^= _rot32(a, np.uint64(19))
        a = (a + c) & _M32
        c = (c - b) & _M32
        c ^= _rot32(b, np.uint64(4))
        b = (b + a) & _M32
        length -= 12
        i += 12
    if length == 0:
        return c, b
    # last block: 1..12 bytes, zero-padded
    a = (a + _word_at(buf, i, min(length, 4))) & _M32
    if length > 4:
        b = (b + _word_at(buf, i + 4, min(length - 4, 4))) & _M32
    if length > 8:
        c = (c + _word_at(buf, i + 8, length - 8)) & _M32
    # final(a, b, c)
    c ^= b
    c = (c - _rot32(b, np.uint64(14))) & _M32
    a ^= c
    a = (a - _rot32(c, np.uint64(11))) & _M32
    b ^= a
    b = (b - _rot32(a, np.uint64(25))) & _M32
    c ^= b
    c = (c - _rot32(b, np.uint64(16))) & _M32
    a ^= c
    a = (a - _rot32(c, np.uint64(4))) & _M32
    b ^= a
    b = (b - _rot32(a, np.uint64(14))) & _M32
    c ^= b
    c = (c - _rot32(b, np.uint64(24))) & _M32
    return c, b


@njit(cache=True, nogil=True)
def jenkins64_bytes(buf, start, end, seed):
    """64-bit lookup3 as the C++ library used it: ``(c << 32) | b`` with ``pc, pb`` from seed."""
    c, b = lookup3_2(buf, start, end, seed >> _S32, seed & _M32)
    return (c << _S32) | b


@njit(cache=True, nogil=True)
def _fnv1a64_lower(buf, start, end):
    """``fnv1a64`` of ``buf[start:end]`` with ASCII A-Z taken as a-z (off the multiply chain,
    so about as fast)."""
    h = FNV_OFFSET
    for i in range(start, end):
        x = np.uint64(buf[i])
        upper = np.uint64((x - _UPPER_A) < _S26)  # unsigned: x < 65 wraps around
        h ^= x | (upper << _S5)
        h *= FNV_PRIME
    return h


# ----------------------------------------------------------------------------------------------
# tokenizing


@njit(cache=True, nogil=True)
def _is_ascii_letter(x):
    return (65 <= x <= 90) or (97 <= x <= 122)


@njit(cache=True, nogil=True)
def _tokens_ascii(buf, start, end, starts, ends):
    """Runs of ASCII letters in ``buf[start:end]``; a NUL byte ends the text (C string)."""
    n = 0
    i = start
    while i < end:
        x = buf[i]
        if x == 0:
            break
        if _is_ascii_letter(x):
            j = i + 1
            while j < end and _is_ascii_letter(buf[j]):
                j += 1
            starts[n] = i
            ends[n] = j
            n += 1
            i = j
        else:
            i += 1
    return n


@njit(cache=True, nogil=True)
def _decode(buf, i, end):
    """Code point and byte length of the UTF-8 sequence at ``buf[i]`` (lenient, never overruns)."""
    x = np.int64(buf[i])
    if x < 0x80:
        return x, 1
    if x < 0xE0:
        n = 2
        cp = x & 0x1F
    elif x < 0xF0:
        n = 3
        cp = x & 0x0F
    else:
        n = 4
        cp = x & 0x07
    if i + n > end:
        return 0xFFFD, 1
    for k in range(1, n):
        cp = (cp << 6) | (np.int64(buf[i + k]) & 0x3F)
    if cp > 0x10FFFF:
        cp = 0xFFFD
    return cp, n


@njit(cache=True, nogil=True)
def _tokens_unicode(buf, start, end, table, split_chars, starts, ends):
    """Tokens of UTF-8 text: runs of word characters; with ``split_chars`` every character of a
    script written without spaces (class 2, plus its combining marks) is a token of its own."""
    n = 0
    i = start
    tok_start = -1
    while i < end:
        x = buf[i]
        if x < 0x80:
            cp = np.int64(x)
            ln = 1
        else:
            cp, ln = _decode(buf, i, end)
        cls = table[cp]
        if cls == CLS_SEP:
            if tok_start >= 0:
                starts[n] = tok_start
                ends[n] = i
                n += 1
                tok_start = -1
        elif cls == CLS_WORD or not split_chars:
            if cls != CLS_SEP and tok_start < 0:
                tok_start = i
        elif cls == CLS_CHAR:
            if tok_start >= 0:
                starts[n] = tok_start
                ends[n] = i
                n += 1
            tok_start = i
        else:  # CLS_CHAR_MARK: stays with the current token (or starts one)
            if tok_start < 0:
                tok_start = i
        # a character token ends after its marks: close it when the next char is not a mark
        if split_chars and (cls == CLS_CHAR or cls == CLS_CHAR_MARK):
            nxt = i + ln
            if nxt >= end:
                pass
            else:
                cp2, _ln2 = _decode(buf, nxt, end)
                if table[cp2] != CLS_CHAR_MARK:
                    starts[n] = tok_start
                    ends[n] = nxt
                    n += 1
                    tok_start = -1
        i += ln
    if tok_start >= 0:
        starts[n] = tok_start
        ends[n] = end
        n += 1
    return n


# ----------------------------------------------------------------------------------------------
# tallies


@njit(cache=True, nogil=True)
def tally_unit(feats, m, reverse):
    """Fingerprint of ``feats[:m]`` with unit weights: bit = 1 where more than half are 1.

    Counts the 64 bit positions in parallel with bit-sliced binary counters, so each feature
    costs a couple of word operations instead of 64 additions.
    """
    if m == 0:
        return _U0
    counters = np.zeros(64, dtype=np.uint64)
    levels = 0
    for t in range(m):
        carry = feats[t]
        k = 0
        while carry != _U0:
            old = counters[k]
            counters[k] = old ^ carry
            carry = old & carry
            k += 1
        if k > levels:
            levels = k
    # lanes whose count > m // 2, compared bit-sliced from the top level down
    threshold = m // 2
    gt = _U0
    eq = ~_U0
    for k in range(levels - 1, -1, -1):
        if (threshold >> k) & 1:
            eq &= counters[k]
        else:
            gt |= eq & counters[k]
            eq &= ~counters[k]
    if threshold >> levels:  # threshold wider than any count: no lane exceeds it
        gt = _U0
    if not reverse:
        return gt
    return _reverse64(gt)


@njit(cache=True, nogil=True)
def _reverse64(x):
    """Bit ``i`` of ``x`` moved to bit ``63 - i``."""
    out = _U0
    for _ in range(64):
        out = (out << _U1) | (x & _U1)
        x >>= _U1
    return out


@njit(cache=True, nogil=True)
def tally_weighted(feats, weights, m, reverse):
    """Fingerprint of ``feats[:m]`` weighted by ``weights[:m]``: bit = 1 where the tally > 0."""
    acc = np.zeros(64, dtype=np.float64)
    for t in range(m):
        h = feats[t]
        w = weights[t]
        for j in range(64):
            if (h >> np.uint64(j)) & _U1:
                acc[j] += w
            else:
                acc[j] -= w
    out = _U0
    for j in range(64):
        if acc[j] > 0.0:
            if reverse:
                out |= _U1 << np.uint64(63 - j)
            else:
                out |= _U1 << np.uint64(j)
    return out


@njit(cache=True, nogil=True)
def compute_csr(hashes, offsets, weights, use_weights, out):
    """``out[i]`` = weighted simhash of ``hashes[offsets[i]:offsets[i+1]]`` (natural bit order)."""
    for i in range(offsets.shape[0] - 1):
        a = offsets[i]
        b = offsets[i + 1]
        if use_weights:
            out[i] = tally_weighted(hashes[a:b], weights[a:b], b - a, False)
        else:
            out[i] = tally_unit(hashes[a:b], b - a, False)


@njit(cache=True, nogil=True)
def _radix_sort(a, m, nbytes, tmp, counts):
    """Sort ``a[:m]`` (uint64 values below ``2 ** (8 * nbytes)``) ascending, in place.

    An LSD radix sort, one byte a pass (a pass whose byte is the same in every value is
    skipped), insertion sort up to 32 values: several times faster than numba's quicksort on
    a document's features, and a fraction of its compile time. ``tmp`` holds at least ``m``
    values, ``counts`` (int64) ``256 * nbytes``.
    """
    if m <= 32:
        for i in range(1, m):
            x = a[i]
            j = i - 1
            while j >= 0 and a[j] > x:
                a[j + 1] = a[j]
                j -= 1
            a[j + 1] = x
        return
    for q in range(256 * nbytes):
        counts[q] = 0
    for i in range(m):
        x = a[i]
        for p in range(nbytes):
            counts[256 * p + np.int64((x >> np.uint64(8 * p)) & _BYTE)] += 1
    src = a
    dst = tmp
    moved = False
    for p in range(nbytes):
        base = 256 * p
        sh = np.uint64(8 * p)
        if counts[base + np.int64((src[0] >> sh) & _BYTE)] == m:
            continue
        total = 0
        for q in range(base, base + 256):
            c = counts[q]
            counts[q] = total
            total += c
        for i in range(m):
            x = src[i]
            d = base + np.int64((x >> sh) & _BYTE)
            dst[counts[d]] = x
            counts[d] += 1
        src, dst = dst, src
        moved = not moved
    if moved:
        for i in range(m):
            a[i] = tmp[i]


@njit(cache=True, nogil=True)
def _weigh_sorted(feats, m, weighting, weights, tmp, counts):
    """Sort ``feats[:m]`` in place and collapse equal hashes; returns the number of unique
    features, with ``weights[k]`` = 1 (unique) or 1 + ln(count) (log). ``tmp`` and ``counts``
    are the scratch of :func:`_radix_sort` (2048 counts)."""
    f = feats[:m]
    _radix_sort(f, m, np.int64(8), tmp, counts)
    u = 0
    t = 0
    while t < m:
        h = f[t]
        r = t + 1
        while r < m and f[r] == h:
            r += 1
        f[u] = h
        if weighting == WEIGHT_LOG:
            weights[u] = 1.0 + np.log(r - t)
        else:
            weights[u] = 1.0
        u += 1
        t = r
    return u

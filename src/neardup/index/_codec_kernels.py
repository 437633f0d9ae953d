"""numba kernels of the Elias-Fano table codec (see :mod:`neardup.index.codec`).

A compressed table is one uint64 array: a header of ``_HEADER`` words, then the upper bits (a
bitvector, bit ``p`` of the vector is bit ``p & 63`` of word ``p >> 6``), the low bits packed
``l`` per element from bit 0 up, and two sample arrays. Element ``i`` with value ``v`` has high
part ``H = v >> l`` and sets bit ``H + i`` of the upper bitvector; every bucket ``H`` ends with a
zero. ``sel0[j]`` is the bitvector position where bucket ``j << s0`` starts, ``sel1[j]`` the
position of element ``j << s1``.

Every function takes contiguous arrays and scalars and validates nothing. All uint64 arithmetic is
kept in uint64 explicitly. Kernels other modules call are public (``__all__``), the rest
``_``-prefixed.
"""

from __future__ import annotations

import numpy as np

from neardup.compiled import njit
from neardup.primitives import popcount

__all__ = [
    "HEADER",
    "MAGIC",
    "check_table",
    "decode_range",
    "encode",
    "equal_ranges",
    "prefix_values",
    "probe_rows",
    "searchsorted_left",
]

_U0 = np.uint64(0)
_U1 = np.uint64(1)

MAGIC = 0x4E44454631000001  # "NDEF1" + version 1
HEADER = 16
# header word positions
H_MAGIC, H_N, H_L, H_H, H_S0, H_S1 = 0, 1, 2, 3, 4, 5
H_UOFF, H_UWORDS, H_LOFF, H_LWORDS, H_S0OFF, H_S0N, H_S1OFF, H_S1N = 6, 7, 8, 9, 10, 11, 12, 13
H_FIRST, H_LAST = 14, 15


@njit(cache=True, nogil=True, inline="always")
def _ctz(x):
    # trailing zeros of a non-zero word: the bits below its lowest set bit
    return np.int64(popcount((x & (~x + _U1)) - _U1))


@njit(cache=True, nogil=True, inline="always")
def _low(words, loff, lbits, i):
    """The ``lbits`` low bits of element ``i`` (``1 <= lbits <= 63``).

    Always reads two words (the section has a spare one) and shifts in two steps, so the
    word-straddling case needs no branch: ``(w1 << 1) << (63 - off)`` is 0 when ``off`` is 0.
    """
    bit = i * lbits
    w = loff + (bit >> 6)
    off = np.uint64(bit & 63)
    v = (words[w] >> off) | ((words[w + 1] << _U1) << (np.uint64(63) - off))
    return v & ((_U1 << np.uint64(lbits)) - _U1)


# a table's probe spec, packed in one uint64 array (see codec.pack_spec)
S_SHIFT, S_LEAD, S_NCHK, S_IDENTITY, S_NSEG, S_MOVES = 0, 1, 2, 3, 4, 5


@njit(cache=True, nogil=True, inline="always")
def _move_back(x, spec):
    """A permuted value moved back to the fingerprint (the spec holds the inverse move)."""
    r = _U0
    nseg = np.int64(spec[S_NSEG])
    for s in range(nseg):
        b = S_MOVES + 3 * s
        r |= ((x >> spec[b]) & spec[b + 1]) << spec[b + 2]
    return r


@njit(cache=True, nogil=True, inline="always")
def _first_of(x, spec):
    # the pair belongs to this table only if no earlier-ordered block outside it also agrees
    c0 = S_MOVES + 3 * np.int64(spec[S_NSEG])
    for c in range(np.int64(spec[S_NCHK])):
        if (x & spec[c0 + c]) == _U0:
            return False
    return True


@njit(cache=True, nogil=True)
def encode(values, lbits, hbits, s0, s1, out):
    """Write the Elias-Fano form of sorted ``values`` into ``out`` (header already filled, every
    other word zero)."""
    n = values.shape[0]
    uoff = np.int64(out[H_UOFF])
    loff = np.int64(out[H_LOFF])
    s0off = np.int64(out[H_S0OFF])
    s0n = np.int64(out[H_S0N])
    s1off = np.int64(out[H_S1OFF])
    lsh = np.uint64(lbits)
    lmask = (_U1 << lsh) - _U1 if lbits > 0 else _U0
    nextj = 0
    for i in range(n):
        v = values[i]
        hi = np.int64(v >> lsh) if lbits < 64 else np.int64(0)
        while nextj < s0n and (nextj << s0) <= hi:
            out[s0off + nextj] = np.uint64((nextj << s0) + i)
            nextj += 1
        p = hi + i
        out[uoff + (p >> 6)] |= _U1 << np.uint64(p & 63)
        if (i & ((1 << s1) - 1)) == 0:
            out[s1off + (i >> s1)] = np.uint64(p)
        if lbits > 0:
            low = v & lmask
            bit = i * lbits
            w = loff + (bit >> 6)
            off = np.uint64(bit & 63)
            out[w] |= low << off
            if np.int64(off) + lbits > 64:
                out[w + 1] |= low >> (np.uint64(64) - off)
    while nextj < s0n:
        out[s0off + nextj] = np.uint64((nextj << s0) + n)
        nextj += 1


@njit(cache=True, nogil=True, inline="always")
def _bucket_start(words, hb):
    """Bitvector position where bucket ``hb`` starts (``hb`` < number of buckets).

    Positions are clamped to the bitvector, so a corrupt sample gives wrong answers (which
    ``verify`` reports), never a read outside the array.
    """
    uoff = np.int64(words[H_UOFF])
    end = np.int64(words[H_UWORDS]) * 64 - 64
    s0 = np.int64(words[H_S0])
    j = hb >> s0
    p = min(np.int64(words[np.int64(words[H_S0OFF]) + j]), end)
    z = hb - (j << s0)  # zeros (bucket ends) still to pass
    while z > 0 and p < end:
        off = p & 63
        w = ~words[uoff + (p >> 6)] >> np.uint64(off)
        c = np.int64(popcount(w))
        if z <= c:
            for _ in range(z - 1):
                w &= w - _U1
            return p + _ctz(w) + 1
        z -= c
        p += 64 - off
    return min(p, end)


@njit(cache=True, nogil=True, inline="always")
def _next_one(words, p):
    """The first bitvector position >= ``p`` holding a one (an element); the caller knows one
    exists (in a corrupt file: the end of the bitvector's spare word)."""
    uoff = np.int64(words[H_UOFF])
    last = np.int64(words[H_UWORDS]) - 1
    wi = min(p >> 6, last)
    off = p & 63 if wi == p >> 6 else 0
    w = words[uoff + wi] >> np.uint64(off)
    p = (wi << 6) + off
    while w == _U0:
        if wi >= last:
            return p
        p += 64 - off
        off = 0
        wi += 1
        w = words[uoff + wi]
    return p + _ctz(w)


@njit(cache=True, nogil=True, inline="always")
def _lower_bound(words, x):
    """(index, bitvector position) of the first element >= ``x``; index = n when none."""
    n = np.int64(words[H_N])
    if n == 0 or x > words[H_LAST]:
        return n, np.int64(-1)
    lbits = np.int64(words[H_L])
    loff = np.int64(words[H_LOFF])
    hb = np.int64(x >> np.uint64(lbits)) if lbits < 64 else np.int64(0)
    p = _bucket_start(words, hb)
    i = p - hb
    while i < n:
        p = _next_one(words, p)
        h = p - i
        if h > hb:
            return i, p
        v = (np.uint64(h) << np.uint64(lbits)) | _low(words, loff, lbits, i)
        if v >= x:
            return i, p
        i += 1
        p += 1
    return n, np.int64(-1)


@njit(cache=True, nogil=True)
def _decode_into(words, start, out):
    """Decode elements ``start .. start + len(out) - 1`` into ``out`` (all must exist)."""
    m = out.shape[0]
    if m == 0:
        return
    lbits = np.int64(words[H_L])
    loff = np.int64(words[H_LOFF])
    uoff = np.int64(words[H_UOFF])
    s1 = np.int64(words[H_S1])
    i = (start >> s1) << s1
    p = np.int64(words[np.int64(words[H_S1OFF]) + (start >> s1)])
    while i < start:  # from the sampled element to the first wanted one
        p = _next_one(words, p) + 1
        i += 1
    wi = p >> 6
    w = words[uoff + wi] & ~((_U1 << np.uint64(p & 63)) - _U1)
    lsh = np.uint64(lbits)
    lmask = (_U1 << lsh) - _U1
    bit = i * lbits
    for k in range(m):
        while w == _U0:
            wi += 1
            w = words[uoff + wi]
        pos = (wi << 6) + _ctz(w)
        w &= w - _U1
        lw = loff + (bit >> 6)
        off = np.uint64(bit & 63)
        low = (words[lw] >> off) | ((words[lw + 1] << _U1) << (np.uint64(63) - off))
        out[k] = (np.uint64(pos - i) << lsh) | (low & lmask)
        i += 1
        bit += lbits


@njit(cache=True, nogil=True)
def decode_range(words, start, stop):
    """Elements ``start .. stop-1`` as a new uint64 array."""
    stop = min(stop, np.int64(words[H_N]))
    out = np.empty(max(stop - start, 0), dtype=np.uint64)
    _decode_into(words, start, out)
    return out


@njit(cache=True, nogil=True)
def equal_ranges(words, values):
    """For each value, the index range ``[lo, hi)`` of the elements equal to it."""
    m = values.shape[0]
    lo = np.empty(m, dtype=np.int64)
    hi = np.empty(m, dtype=np.int64)
    n = np.int64(words[H_N])
    lbits = np.int64(words[H_L])
    loff = np.int64(words[H_LOFF])
    for q in range(m):
        x = values[q]
        i, p = _lower_bound(words, x)
        lo[q] = i
        while i < n:
            p = _next_one(words, p)
            v = (np.uint64(p - i) << np.uint64(lbits)) | _low(words, loff, lbits, i)
            if v != x:
                break
            i += 1
            p += 1
        hi[q] = i
    return lo, hi


@njit(cache=True, nogil=True)
def searchsorted_left(words, values):
    """``np.searchsorted(table, values, "left")`` over the compressed table."""
    out = np.empty(values.shape[0], dtype=np.int64)
    for q in range(values.shape[0]):
        out[q] = _lower_bound(words, values[q])[0]
    return out


@njit(cache=True, nogil=True)
def prefix_values(words, prefix, shift):
    """Every element whose top ``64 - shift`` bits equal ``prefix``, decoded, and the index of
    the first."""
    n = np.int64(words[H_N])
    sh = np.uint64(shift)
    lo = _lower_bound(words, prefix << sh)[0]
    top = (prefix << sh) | ((_U1 << sh) - _U1)  # the last value carrying the prefix
    hi = n if top == ~_U0 else _lower_bound(words, top + _U1)[0]
    out = np.empty(hi - lo, dtype=np.uint64)
    _decode_into(words, lo, out)
    return out, lo


@njit(cache=True, nogil=True)
def probe_rows(table, fps, spec, queries, q_order, k, q_start, qi, rows, dist):
    """Probe one compressed permuted table with permuted queries sorted ascending.

    For each element sharing a query's top ``64 - shift`` bits that lies within ``k`` bits and
    that this table is the first (in table order) to find, write (query index, row, distance)
    into ``qi``/``rows``/``dist``. An identity table is the sorted fingerprints themselves, so an
    element's index is its row; other tables hold distinct permuted values, which are moved back
    to fingerprints and located in ``fps`` (the compressed sorted fingerprints), every equal
    fingerprint being a row.

    Starts at query ``q_start``; returns (matches written, next query). When the buffers fill
    up, the query being probed is left out entirely and is the next query, so the caller grows
    the buffers and calls again from there (the buffers are never reallocated in here, which
    keeps the loop free of reference counting).
    """
    n = np.int64(table[H_N])
    lbits = np.int64(table[H_L])
    loff = np.int64(table[H_LOFF])
    lsh = np.uint64(lbits)
    sh = spec[S_SHIFT]
    lead_mask = spec[S_LEAD]
    identity = spec[S_IDENTITY] != _U0
    kmax = np.uint64(k)
    nf = np.int64(fps[H_N])
    flbits = np.int64(fps[H_L])
    floff = np.int64(fps[H_LOFF])
    cap = qi.shape[0]
    cnt = 0
    for q in range(q_start, queries.shape[0]):
        v = queries[q]
        pre = v >> sh
        i, p = _lower_bound(table, pre << sh)
        mark = cnt
        while i < n:
            p = _next_one(table, p)
            e = (np.uint64(p - i) << lsh) | _low(table, loff, lbits, i)
            if (e >> sh) != pre:
                break
            x = e ^ v
            d = popcount(x)
            if d <= kmax and (x & lead_mask) == _U0 and _first_of(x, spec):
                if identity:
                    if cnt == cap:
                        return mark, q
                    qi[cnt] = q_order[q]
                    rows[cnt] = i
                    dist[cnt] = np.int64(d)
                    cnt += 1
                else:
                    f = _move_back(e, spec)
                    r, fp_pos = _lower_bound(fps, f)
                    while r < nf:
                        fp_pos = _next_one(fps, fp_pos)
                        g = (np.uint64(fp_pos - r) << np.uint64(flbits)) | _low(
                            fps, floff, flbits, r
                        )
                        if g != f:
                            break
                        if cnt == cap:
                            return mark, q
                        qi[cnt] = q_order[q]
                        rows[cnt] = r
                        dist[cnt] = np.int64(d)
                        cnt += 1
                        r += 1
                        fp_pos += 1
            i += 1
            p += 1
    return cnt, queries.shape[0]


@njit(cache=True, nogil=True)
def check_table(words):
    """Structural check of a decoded table: ones in the bitvector equal ``n``, elements ascend,
    samples point at what they describe. Returns the first problem's code (0 when sound)."""
    n = np.int64(words[H_N])
    uoff = np.int64(words[H_UOFF])
    uw = np.int64(words[H_UWORDS])
    ones = 0
    for w in range(uw):
        ones += np.int64(popcount(words[uoff + w]))
    if ones != n:
        return 1
    if n == 0:
        return 0
    lbits = np.int64(words[H_L])
    loff = np.int64(words[H_LOFF])
    s1 = np.int64(words[H_S1])
    s1off = np.int64(words[H_S1OFF])
    prev = _U0
    p = np.int64(0)
    for i in range(n):
        p = _next_one(words, p)
        if (i & ((1 << s1) - 1)) == 0 and np.int64(words[s1off + (i >> s1)]) != p:
            return 3
        v = (np.uint64(p - i) << np.uint64(lbits)) | _low(words, loff, lbits, i)
        if (i == 0 and v != words[H_FIRST]) or (i > 0 and v < prev):
            return 2
        prev = v
        p += 1
    if prev != words[H_LAST]:
        return 2
    # bucket b starts right after the b-th zero (bucket b-1's end); every 2**s0-th is sampled
    s0 = np.int64(words[H_S0])
    s0off = np.int64(words[H_S0OFF])
    s0n = np.int64(words[H_S0N])
    if s0n < 1 or words[s0off] != _U0:
        return 4
    step = np.int64(1) << s0
    zeros = 0
    for w in range(uw):
        z = ~words[uoff + w]
        while z != _U0 and zeros < s0n * step:
            zeros += 1
            if (zeros & (step - 1)) == 0 and zeros // step < s0n:
                if np.int64(words[s0off + zeros // step]) != (w << 6) + _ctz(z) + 1:
                    return 4
            z &= z - _U1
    return 0

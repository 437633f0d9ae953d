"""numba kernels and nothing else: key building, run scans, verification, parsing, formatting.

Every function here is ``_``-prefixed, takes contiguous arrays and scalars, validates nothing and
never allocates Python objects. Bit 63 is the most significant bit of a fingerprint. All uint64
arithmetic is kept in uint64 explicitly (numba would otherwise promote uint64 op int64 to float).
Table kernels take the layout's packed :class:`neardup.core.layout.TableSpec` (``spec``) and a
table row ``t``; masks named ``*_fp`` are in fingerprint bits, ``*_key`` in key bits.
"""

from __future__ import annotations

import numpy as np
from numba import njit

_U0 = np.uint64(0)
_U1 = np.uint64(1)
_M1 = np.uint64(0x5555555555555555)
_M2 = np.uint64(0x3333333333333333)
_M4 = np.uint64(0x0F0F0F0F0F0F0F0F)
_H01 = np.uint64(0x0101010101010101)
_S56 = np.uint64(56)


@njit(cache=True, nogil=True, inline="always")
def _popcount(x):
    # SWAR popcount; LLVM turns this idiom into the popcnt instruction on the host CPU.
    x = x - ((x >> _U1) & _M1)
    x = (x & _M2) + ((x >> np.uint64(2)) & _M2)
    x = (x + (x >> np.uint64(4))) & _M4
    return (x * _H01) >> _S56


@njit(cache=True, nogil=True, inline="always")
def _to_key(x, spec, t):
    # fingerprint bits -> table t's key bits
    r = _U0
    for s in range(spec.nseg[t]):
        r |= ((x >> spec.seg_src[t, s]) & spec.seg_mask[t, s]) << spec.seg_dst[t, s]
    return r


@njit(cache=True, nogil=True, inline="always")
def _to_fp(y, spec, t):
    # table t's key bits -> fingerprint bits
    r = _U0
    for s in range(spec.nseg[t]):
        r |= ((y >> spec.seg_dst[t, s]) & spec.seg_mask[t, s]) << spec.seg_src[t, s]
    return r


@njit(cache=True, nogil=True, inline="always")
def _first_table(x, chk, t, nchk):
    # The pair belongs to table t only if no earlier-ordered block outside it also agrees;
    # ``chk`` is spec.chk_fp for x = fp ^ fp, spec.chk_key for x = key ^ key.
    for c in range(nchk):
        if (x & chk[t, c]) == _U0:
            return False
    return True


@njit(cache=True, nogil=True)
def _index_bits(n):
    b = 1
    while (1 << b) < n:
        b += 1
    return b


@njit(cache=True, nogil=True)
def _build_keys(fp, spec, t, keys, lo, hi):
    """Fill ``keys[lo:hi]``: element i's key in table ``t`` with its low bits replaced by ``i``.

    The table's leading blocks sit in the top bits, so sorting ``keys`` groups equal prefixes
    into runs, and the permuted bits kept between the prefix and the
    index let the scan reject most candidates without touching ``fp``.
    """
    ib = np.uint64(_index_bits(fp.shape[0]))
    high = ~((_U1 << ib) - _U1)
    for i in range(lo, hi):
        keys[i] = (_to_key(fp[i], spec, t) & high) | np.uint64(i)


@njit(cache=True, nogil=True)
def _partition_bit(keys, lo, hi, bit):
    """Reorder ``keys[lo:hi]`` in place so keys with ``bit`` clear come first; return the cut.

    Used to split one sort into independent parts that threads sort in place, with no second
    buffer: every key left of the cut is smaller than every key right of it.
    """
    m = _U1 << np.uint64(bit)
    i = lo
    j = hi - 1
    while True:
        while i <= j and (keys[i] & m) == _U0:
            i += 1
        while i <= j and (keys[j] & m) != _U0:
            j -= 1
        if i >= j:
            return i
        t = keys[i]
        keys[i] = keys[j]
        keys[j] = t
        i += 1
        j -= 1


@njit(cache=True, nogil=True)
def _run_start(keys, pbits, i):
    """The first position >= ``i`` that starts a run of equal prefixes in sorted ``keys``."""
    n = keys.shape[0]
    rsh = np.uint64(64 - min(pbits, 64 - _index_bits(n)))
    while 0 < i < n and (keys[i] >> rsh) == (keys[i - 1] >> rsh):
        i += 1
    return i


# Runs at least this long are gathered into a buffer once (a random read per member) instead of
# filtering pairs on the key bits and reading both fingerprints of each surviving candidate.
_GATHER_RUN = 16


@njit(cache=True, nogil=True)
def _emit_pair(out, cnt, i, j):
    if cnt == out.shape[0]:
        grown = np.empty((2 * out.shape[0] + 1024, 2), dtype=np.int64)
        for t in range(cnt):  # a loop, not a slice copy: it compiles in a fraction of the time
            grown[t, 0] = out[t, 0]
            grown[t, 1] = out[t, 1]
        out = grown
    out[cnt, 0] = i
    out[cnt, 1] = j
    return out, cnt + 1


@njit(cache=True, nogil=True)
def _scan_pairs(keys, fp, spec, t, k, out, cnt, lo, hi):
    """Append to ``out[cnt:]`` every pair (i < j) in a run of equal prefixes of sorted
    ``keys[lo:hi]`` (table ``t``) that matches within ``k`` bits and that table ``t`` is the first
    to find; return (out, cnt). ``lo`` and ``hi`` must be run boundaries.

    Runs share the top ``pbits`` bits (fewer when the index needs the room). Inside a short run
    the permuted bits kept in the keys give a lower bound of the distance, so only candidates
    that pass it read the full fingerprints; a long run is read into a buffer once instead.
    """
    n = keys.shape[0]
    ibits = _index_bits(n)
    ib = np.uint64(ibits)
    imask = (_U1 << ib) - _U1
    rsh = np.uint64(64 - min(spec.pbits[t], 64 - ibits))
    kmax = np.uint64(k)
    lead_mask = spec.lead_fp[t]
    chk = spec.chk_fp
    nchk = spec.nchk[t]
    buf_fp = np.empty(256, dtype=np.uint64)
    buf_ix = np.empty(256, dtype=np.int64)
    r = lo
    while r < hi - 1:
        pr = keys[r] >> rsh
        if (keys[r + 1] >> rsh) != pr:
            r += 1
            continue
        e = r + 2
        while e < hi and (keys[e] >> rsh) == pr:
            e += 1
        if e - r >= _GATHER_RUN:
            # a long run: read its fingerprints once, then check every pair from cache
            s = e - r
            if s > buf_fp.shape[0]:
                buf_fp = np.empty(2 * s, dtype=np.uint64)
                buf_ix = np.empty(2 * s, dtype=np.int64)
            for u in range(s):
                ix = np.int64(keys[r + u] & imask)
                buf_ix[u] = ix
                buf_fp[u] = fp[ix]
            for a in range(s - 1):
                fa = buf_fp[a]
                c = a + 1
                while c < s:
                    while c < s and _popcount(fa ^ buf_fp[c]) > kmax:
                        c += 1
                    if c == s:
                        break
                    x = fa ^ buf_fp[c]
                    if (x & lead_mask) == _U0 and _first_table(x, chk, t, nchk):
                        ia = buf_ix[a]
                        ic = buf_ix[c]
                        out, cnt = _emit_pair(out, cnt, min(ia, ic), max(ia, ic))
                    c += 1
            r = e
            continue
        for a in range(r, e - 1):
            ka = keys[a]
            c = a + 1
            while c < e:
                # tight search for the next candidate: no stores, so LLVM keeps it in registers
                while c < e and _popcount((ka ^ keys[c]) >> ib) > kmax:
                    c += 1
                if c == e:
                    break
                ia = np.int64(ka & imask)
                ic = np.int64(keys[c] & imask)
                x = fp[ia] ^ fp[ic]
                if (
                    _popcount(x) <= kmax
                    and (x & lead_mask) == _U0
                    and _first_table(x, chk, t, nchk)
                ):
                    out, cnt = _emit_pair(out, cnt, min(ia, ic), max(ia, ic))
                c += 1
        r = e
    return out, cnt


@njit(cache=True, nogil=True)
def _permute(x, spec, t, inverse):
    """Fingerprints -> table ``t``'s keys, or keys -> fingerprints when ``inverse``."""
    out = np.empty(x.shape[0], dtype=np.uint64)
    if inverse:
        for i in range(x.shape[0]):
            out[i] = _to_fp(x[i], spec, t)
    else:
        for i in range(x.shape[0]):
            out[i] = _to_key(x[i], spec, t)
    return out


@njit(cache=True, nogil=True)
def _emit_match(qi, pos, dist, cnt, q, j, d):
    if cnt == qi.shape[0]:
        cap = 2 * qi.shape[0] + 1024
        qi2 = np.empty(cap, dtype=np.int64)
        pos2 = np.empty(cap, dtype=np.int64)
        dist2 = np.empty(cap, dtype=np.int64)
        qi2[:cnt] = qi[:cnt]
        pos2[:cnt] = pos[:cnt]
        dist2[:cnt] = dist[:cnt]
        qi, pos, dist = qi2, pos2, dist2
    qi[cnt] = q
    pos[cnt] = j
    dist[cnt] = d
    return qi, pos, dist, cnt + 1


@njit(cache=True, nogil=True)
def _query_table(table, queries, q_order, spec, t, k):
    """Probe table ``t``, sorted keys, with the queries' keys sorted ascending.

    ``table`` holds the corpus's keys in table ``t`` sorted ascending; a candidate shares the
    query's leading ``spec.pbits[t]`` bits. Returns (query index, table position, distance) for
    every match that this table is the first (in table order) to find. Runs are located by galloping from the previous
    query's position, so a large sorted batch costs about one merge of the two arrays.
    """
    n = table.shape[0]
    sh = np.uint64(64 - spec.pbits[t])
    kmax = np.uint64(k)
    lead_mask = spec.lead_key[t]
    chk = spec.chk_key
    nchk = spec.nchk[t]
    qi = np.empty(1024, dtype=np.int64)
    pos = np.empty(1024, dtype=np.int64)
    dist = np.empty(1024, dtype=np.int64)
    cnt = 0
    lo = 0
    for q in range(queries.shape[0]):
        v = queries[q]
        pre = v >> sh
        # gallop forward to the first table entry with prefix >= pre
        step = 1
        hi = lo
        while hi < n and (table[hi] >> sh) < pre:
            lo = hi + 1
            hi += step
            step *= 2
        if hi > n:
            hi = n
        while lo < hi:
            mid = (lo + hi) // 2
            if (table[mid] >> sh) < pre:
                lo = mid + 1
            else:
                hi = mid
        j = lo
        while j < n and (table[j] >> sh) == pre:
            x = table[j] ^ v
            d = _popcount(x)
            if d <= kmax and (x & lead_mask) == _U0 and _first_table(x, chk, t, nchk):
                qi, pos, dist, cnt = _emit_match(qi, pos, dist, cnt, q_order[q], j, np.int64(d))
            j += 1
    return qi[:cnt].copy(), pos[:cnt].copy(), dist[:cnt].copy()

"""numba kernels and nothing else: key building, run scans, verification, parsing, formatting.

Every function here takes contiguous arrays and scalars, validates nothing and never allocates
Python objects. Kernels other modules call are public (``__all__``), the rest ``_``-prefixed. Bit
63 is the most significant bit of a fingerprint. All uint64 arithmetic is kept in uint64 explicitly
(numba would otherwise promote uint64 op int64 to float). Table kernels take the layout's packed
:class:`neardup.core.layout.TableSpec` (``spec``) and a table row ``t``; masks named ``*_fp`` are
in fingerprint bits, ``*_key`` in key bits.
"""

from __future__ import annotations

import numpy as np

from neardup.compiled import njit
from neardup.primitives import popcount

__all__ = ["permute", "query_table", "to_fp", "to_key"]

_U0 = np.uint64(0)
_U1 = np.uint64(1)


@njit(cache=True, nogil=True, inline="always")
def to_key(x, spec, t):
    # fingerprint bits -> table t's key bits
    r = _U0
    for s in range(spec.nseg[t]):
        r |= ((x >> spec.seg_src[t, s]) & spec.seg_mask[t, s]) << spec.seg_dst[t, s]
    return r


@njit(cache=True, nogil=True, inline="always")
def to_fp(y, spec, t):
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
def permute(x, spec, t, inverse):
    """Fingerprints -> table ``t``'s keys, or keys -> fingerprints when ``inverse``."""
    out = np.empty(x.shape[0], dtype=np.uint64)
    if inverse:
        for i in range(x.shape[0]):
            out[i] = to_fp(x[i], spec, t)
    else:
        for i in range(x.shape[0]):
            out[i] = to_key(x[i], spec, t)
    return out


@njit(cache=True, nogil=True)
def _emit_match(qi, pos, dist, cnt, q, j, d):
    if cnt == qi.shape[0]:
        cap = 2 * qi.shape[0] + 1024
        qi2 = np.empty(cap, dtype=np.int64)
        pos2 = np.empty(cap, dtype=np.int64)
        dist2 = np.empty(cap, dtype=np.int64)
        for p in range(cnt):  # (loops: slice assignment costs seconds of compiling)
            qi2[p] = qi[p]
            pos2[p] = pos[p]
            dist2[p] = dist[p]
        qi, pos, dist = qi2, pos2, dist2
    qi[cnt] = q
    pos[cnt] = j
    dist[cnt] = d
    return qi, pos, dist, cnt + 1


@njit(cache=True, nogil=True)
def query_table(table, queries, q_order, spec, t, k):
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
    cnt = np.int64(0)  # not the literal 0: a call typed with a literal compiles twice
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
            d = popcount(x)
            if d <= kmax and (x & lead_mask) == _U0 and _first_table(x, chk, t, nchk):
                qi, pos, dist, cnt = _emit_match(qi, pos, dist, cnt, q_order[q], j, np.int64(d))
            j += 1
    return qi[:cnt].copy(), pos[:cnt].copy(), dist[:cnt].copy()

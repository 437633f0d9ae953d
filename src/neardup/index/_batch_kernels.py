"""numba kernels of batch mode (see :mod:`neardup.index.batch`): a stream of stored fingerprints
probes the permuted tables of a new batch through a directory of their top bits.

Every function takes contiguous arrays and scalars and validates nothing. All uint64 arithmetic is
kept in uint64 explicitly. Kernels other modules call are public (``__all__``), the rest
``_``-prefixed.
"""

from __future__ import annotations

import numpy as np

from neardup.compiled import njit
from neardup.primitives import popcount

__all__ = ["GROUP", "build_directory", "permute_sorted", "probe_batch"]

_U0 = np.uint64(0)
_U1 = np.uint64(1)

# one table's spec, a row of a uint64 matrix (see batch.pack_specs)
S_SHIFT, S_LEAD, S_NCHK, S_NSEG, S_MOVES = 0, 1, 2, 3, 4


@njit(cache=True, nogil=True)
def permute_sorted(fp, spec, vals, rows):
    """Fill ``vals`` with ``fp`` moved into the table's key order and ``rows`` with positions,
    both ordered by value (rows ascending among equal values)."""
    nseg = np.int64(spec[S_NSEG])
    n = fp.shape[0]
    tmp = np.empty(n, dtype=np.uint64)
    for i in range(n):
        x = fp[i]
        r = _U0
        for s in range(nseg):
            b = S_MOVES + 3 * s
            r |= ((x >> spec[b]) & spec[b + 1]) << spec[b + 2]
        tmp[i] = r
    order = np.argsort(tmp, kind="mergesort")
    for j in range(n):
        vals[j] = tmp[order[j]]
        rows[j] = order[j]


@njit(cache=True, nogil=True)
def build_directory(vals, dbits, out):
    """``out[b]`` = first position in sorted ``vals`` whose top ``dbits`` bits are >= ``b``."""
    sh = np.uint64(64 - dbits)
    nb = out.shape[0] - 1
    j = 0
    n = vals.shape[0]
    for b in range(nb):
        while j < n and np.int64(vals[j] >> sh) < b:
            j += 1
        out[b] = j
    out[nb] = n


#: Stored fingerprints looked up together: their directory and table reads are independent, so
#: the CPU overlaps the cache misses instead of waiting for each in turn.
GROUP = 32


@njit(cache=True, nogil=True)
def probe_batch(fps, vals, rows, dirs, specs, dbits, k, i_start, out_b, out_i, out_d):
    """Probe every table of the batch with stored fingerprints ``fps[i_start:]``.

    For each stored fingerprint and each table: move it into the table's order, look up its
    bucket (top ``dbits`` bits) in ``dirs``, and check every batch entry of the bucket that
    shares the table's prefix; a pair within ``k`` bits is written (batch row, stored position,
    distance) by the first table (in table order) whose leading blocks all agree.

    Returns (matches written, next stored position). When the buffers fill up, the fingerprint
    being probed is left out entirely and is the next position: the caller grows the buffers and
    calls again from there.
    """
    T = vals.shape[0]
    m = fps.shape[0]
    dsh = np.uint64(64 - dbits)
    kmax = np.uint64(k)
    cap = out_b.shape[0]
    cnt = 0
    pvs = np.empty((GROUP, T), dtype=np.uint64)
    lo = np.empty((GROUP, T), dtype=np.int64)
    hi = np.empty((GROUP, T), dtype=np.int64)
    touch = _U0
    for g0 in range(i_start, m, GROUP):
        g1 = min(m, g0 + GROUP)
        for i in range(g0, g1):  # 1: every directory entry of the group
            f = fps[i]
            for t in range(T):
                nseg = np.int64(specs[t, S_NSEG])
                pv = _U0
                for s in range(nseg):
                    b = S_MOVES + 3 * s
                    pv |= ((f >> specs[t, b]) & specs[t, b + 1]) << specs[t, b + 2]
                bkt = np.int64(pv >> dsh)
                pvs[i - g0, t] = pv
                lo[i - g0, t] = dirs[t, bkt]
                hi[i - g0, t] = dirs[t, bkt + 1]
        for i in range(g0, g1):  # 2: the first entry of every bucket, loads in flight together
            for t in range(T):
                if lo[i - g0, t] < hi[i - g0, t]:
                    touch ^= vals[t, lo[i - g0, t]]
        for i in range(g0, g1):  # 3: the candidates, now in cache
            mark = cnt
            for t in range(T):
                pv = pvs[i - g0, t]
                sh = specs[t, S_SHIFT]
                pre = pv >> sh
                nseg = np.int64(specs[t, S_NSEG])
                for j in range(lo[i - g0, t], hi[i - g0, t]):
                    e = vals[t, j]
                    if (e >> sh) != pre:
                        continue
                    x = e ^ pv
                    d = popcount(x)
                    if d > kmax or (x & specs[t, S_LEAD]) != _U0:
                        continue
                    c0 = S_MOVES + 3 * nseg
                    first = True
                    for c in range(np.int64(specs[t, S_NCHK])):
                        if (x & specs[t, c0 + c]) == _U0:
                            first = False
                            break
                    if not first:
                        continue
                    if cnt == cap:
                        return mark, i, touch
                    out_b[cnt] = rows[t, j]
                    out_i[cnt] = i
                    out_d[cnt] = np.int64(d)
                    cnt += 1
    return cnt, m, touch

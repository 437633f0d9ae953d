"""numba kernels of the index's few-query path: every table of every segment probed in one call.

A committed state's arrays are passed as a matrix of addresses and lengths (one row per segment:
its tables, then its sorted fingerprints, id keys and tombstones), so one call reads them all
without numba unboxing a list of arrays on each query. The caller keeps the arrays alive for the
call (:class:`neardup.index.probe.FewPlan` holds them).

Every function takes contiguous arrays and scalars and validates nothing. All uint64 arithmetic is
kept in uint64 explicitly. Kernels other modules call are public (``__all__``), the rest
``_``-prefixed.
"""

from __future__ import annotations

import numpy as np
from numba import carray, types
from numba.extending import intrinsic

from neardup.compiled import njit
from neardup.core.kernels import to_fp, to_key
from neardup.primitives import popcount

__all__ = ["SORT_IN_KERNEL", "probe_few"]

_U0 = np.uint64(0)
#: Matches sorted by the kernel (an insertion sort); more are sorted by the caller.
SORT_IN_KERNEL = 256


@intrinsic
def _u64_at(typingctx, addr):
    """A ``uint64*`` from an address (an int64)."""
    sig = types.CPointer(types.uint64)(types.int64)

    def codegen(context, builder, signature, args):
        return builder.inttoptr(args[0], context.get_value_type(types.CPointer(types.uint64)))

    return sig, codegen


@intrinsic
def _i64_at(typingctx, addr):
    """An ``int64*`` from an address (an int64)."""
    sig = types.CPointer(types.int64)(types.int64)

    def codegen(context, builder, signature, args):
        return builder.inttoptr(args[0], context.get_value_type(types.CPointer(types.int64)))

    return sig, codegen


@njit(cache=True, nogil=True, inline="always")
def _lower(a, n, v, sh):
    """First position of sorted ``a[:n]`` whose value shifted right by ``sh`` is >= ``v``."""
    lo = 0
    hi = n
    while lo < hi:
        mid = (lo + hi) >> 1
        if (a[mid] >> sh) < v:
            lo = mid + 1
        else:
            hi = mid
    return lo


@njit(cache=True, nogil=True, inline="always")
def _is_dead(dead, nd, row):
    lo = 0
    hi = nd
    while lo < hi:
        mid = (lo + hi) >> 1
        if dead[mid] < row:
            lo = mid + 1
        else:
            hi = mid
    return lo < nd and dead[lo] == row


@njit(cache=True, nogil=True)
def _grow(buf, cnt):
    out = np.empty((buf.shape[0], 2 * buf.shape[1] + 16), dtype=np.int64)
    for r in range(buf.shape[0]):
        for i in range(cnt):
            out[r, i] = buf[r, i]
    return out


@njit(cache=True, nogil=True)
def _sort_found(buf, cnt):
    """Sort the first ``cnt`` columns of ``buf`` (query, distance, key, segment, row) by query,
    distance, key: an insertion sort, as a few queries find few matches."""
    for i in range(1, cnt):
        c = buf[:, i].copy()
        j = i - 1
        while j >= 0 and (
            buf[0, j] > c[0]
            or (
                buf[0, j] == c[0] and (buf[1, j] > c[1] or (buf[1, j] == c[1] and buf[2, j] > c[2]))
            )
        ):
            buf[:, j + 1] = buf[:, j]
            j -= 1
        buf[:, j + 1] = c


@njit(cache=True, nogil=True)
def probe_few(queries, k, spec, addr, lens, ntab):
    """Every live match within ``k`` bits of each of ``queries`` in every segment.

    ``addr``/``lens`` have a row per segment: columns ``0 .. ntab-1`` its tables (sorted keys,
    an identity table being the fingerprints), ``ntab`` the sorted fingerprints, ``ntab + 1``
    the id keys by row, ``ntab + 2`` the tombstones (sorted rows). Returns an int64 matrix of
    five rows (query, distance, key, segment, row), one column per match, grouped by query;
    the query offsets (n + 1); and whether the matches are sorted by query, distance and key
    (up to ``SORT_IN_KERNEL`` matches; the caller sorts more).
    """
    nseg = addr.shape[0]
    kmax = np.uint64(k)
    buf = np.empty((5, 64), dtype=np.int64)
    cnt = 0
    offsets = np.zeros(queries.shape[0] + 1, dtype=np.int64)
    for qi in range(queries.shape[0]):
        q = queries[qi]
        for t in range(ntab):
            key = q if spec.identity[t] else to_key(q, spec, t)
            sh = np.uint64(64 - spec.pbits[t])
            pre = key >> sh
            nchk = spec.nchk[t]
            for s in range(nseg):
                n = lens[s, t]
                tab = carray(_u64_at(addr[s, t]), (n,))
                j = _lower(tab, n, pre, sh)
                while j < n and (tab[j] >> sh) == pre:
                    x = tab[j] ^ key
                    d = popcount(x)
                    ok = d <= kmax
                    for c in range(nchk if ok else 0):
                        if (x & spec.chk_key[t, c]) == _U0:
                            ok = False
                            break
                    if ok:
                        nf = lens[s, ntab]
                        fps = carray(_u64_at(addr[s, ntab]), (nf,))
                        keys = carray(_i64_at(addr[s, ntab + 1]), (nf,))
                        nd = lens[s, ntab + 2]
                        dead = carray(_i64_at(addr[s, ntab + 2]), (max(nd, 1),))
                        if spec.identity[t]:
                            r0, r1 = j, j + 1
                        else:
                            fp = to_fp(tab[j], spec, t)
                            r0 = _lower(fps, nf, fp, np.uint64(0))
                            r1 = r0
                            while r1 < nf and fps[r1] == fp:
                                r1 += 1
                        for r in range(r0, r1):
                            if nd and _is_dead(dead, nd, r):
                                continue
                            if cnt == buf.shape[1]:
                                buf = _grow(buf, cnt)
                            buf[0, cnt] = qi
                            buf[1, cnt] = np.int64(d)
                            buf[2, cnt] = keys[r]
                            buf[3, cnt] = s
                            buf[4, cnt] = r
                            cnt += 1
                    j += 1
        offsets[qi + 1] = cnt
    done = cnt <= SORT_IN_KERNEL
    if done:
        _sort_found(buf, cnt)
    return buf[:, :cnt], offsets, done

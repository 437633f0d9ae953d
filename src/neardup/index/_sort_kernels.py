"""numba kernels that sort the index's columns when a segment is written: uint64 values, with or
without a payload of int64 positions, by two passes of counting sort on the top bits and an
insertion sort of the few values each bucket is left with.

Every function takes contiguous arrays and scalars and validates nothing. Kernels other modules
call are public (``__all__``), the rest ``_``-prefixed. Fingerprints and permuted keys are close to
uniform in their top bits, so two passes leave buckets of one or two values; a bucket left large
(skewed values) is split by further digits, at most 64 bits' worth, so no input costs more than
about six passes. A merge of runs whose tables are already sorted merges them instead
(:func:`merge_distinct`).
"""

from __future__ import annotations

import numpy as np
from numba import carray

from neardup.compiled import njit
from neardup.index._query_kernels import _u64_at

__all__ = ["merge_distinct", "radix_sort"]

_BITS1 = 12  # most bits of the first pass
_BITS2 = 11  # bits of the second pass: 2048 counters, a first-pass bucket stays in cache
_SMALL = 32  # buckets up to this size are insertion-sorted


@njit(cache=True, nogil=True, inline="always")
def _insertion(vals, pay, a, b, has_pay):
    # stable: a value moves left only past larger ones
    for i in range(a + 1, b):
        v = vals[i]
        p = pay[i] if has_pay else 0
        j = i - 1
        while j >= a and vals[j] > v:
            vals[j + 1] = vals[j]
            if has_pay:
                pay[j + 1] = pay[j]
            j -= 1
        vals[j + 1] = v
        if has_pay:
            pay[j + 1] = p


@njit(cache=True, nogil=True)
def radix_sort(vals, pay, tmpv, tmpp, has_pay):
    """Sort ``vals`` ascending in place; with ``has_pay``, move ``pay`` (int64) along, stably
    (equal values keep their order). ``tmpv``/``tmpp`` are scratch of the same sizes (``pay``
    and ``tmpp`` may be empty without ``has_pay``).

    Most significant digit first: a bucket is split by its next digit into the other buffer
    (a stable counting pass), until it is small enough for an insertion sort or has no bits
    left (all its values are equal)."""
    n = vals.shape[0]
    if n <= _SMALL:
        _insertion(vals, pay, 0, n, has_pay)
        return
    lg = 0
    while (1 << lg) < n:
        lg += 1
    b1 = min(_BITS1, max(1, lg - _BITS2))
    cap = (1 << _BITS1) + 8 * (1 << _BITS2) + 8
    st_a = np.empty(cap, dtype=np.int64)
    st_b = np.empty(cap, dtype=np.int64)
    st_s = np.empty(cap, dtype=np.int64)  # bits not yet split on
    st_t = np.empty(cap, dtype=np.bool_)  # the bucket is in tmp
    cnt = np.empty((1 << _BITS1) + 1, dtype=np.int64)
    st_a[0], st_b[0], st_s[0], st_t[0] = 0, n, 64, False
    top = 1
    while top > 0:
        top -= 1
        a, b, s, intmp = st_a[top], st_b[top], st_s[top], st_t[top]
        if b - a <= _SMALL or s == 0:
            if intmp:
                for i in range(a, b):
                    vals[i] = tmpv[i]
                    if has_pay:
                        pay[i] = tmpp[i]
            if s > 0:
                _insertion(vals, pay, a, b, has_pay)
            continue
        d = b1 if s == 64 else min(_BITS2, s)
        sh = np.uint64(s - d)
        mask = np.uint64((1 << d) - 1)
        nb = 1 << d
        src, srcp, dst, dstp = vals, pay, tmpv, tmpp
        if intmp:
            src, srcp, dst, dstp = tmpv, tmpp, vals, pay
        cnt[: nb + 1] = 0
        for i in range(a, b):
            cnt[np.int64((src[i] >> sh) & mask) + 1] += 1
        cnt[0] = a
        for c in range(1, nb + 1):
            cnt[c] += cnt[c - 1]
        for i in range(a, b):
            c = np.int64((src[i] >> sh) & mask)
            dst[cnt[c]] = src[i]
            if has_pay:
                dstp[cnt[c]] = srcp[i]
            cnt[c] += 1
        lo = a
        for c in range(nb):  # cnt[c] is now the end of digit c's bucket
            if cnt[c] > lo:
                st_a[top], st_b[top], st_s[top], st_t[top] = lo, cnt[c], s - d, not intmp
                top += 1
            lo = cnt[c]


@njit(cache=True, nogil=True)
def merge_distinct(addr, lens, out):
    """Merge sorted uint64 runs (``lens[r]`` values at address ``addr[r]``) into ``out``,
    ascending, each value once; return how many values ``out`` holds. The caller keeps the runs
    alive for the call."""
    k = addr.shape[0]
    pos = np.zeros(k, dtype=np.int64)
    cnt = 0
    last = np.uint64(0)
    while True:
        best = -1
        bv = np.uint64(0)
        for r in range(k):
            if pos[r] < lens[r]:
                v = carray(_u64_at(addr[r]), (lens[r],))[pos[r]]
                if best < 0 or v < bv:
                    best = r
                    bv = v
        if best < 0:
            return cnt
        pos[best] += 1
        if cnt == 0 or bv != last:
            out[cnt] = bv
            cnt += 1
            last = bv

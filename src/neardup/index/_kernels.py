"""numba kernels of the persistent index: string id keys, sorted-id lookups, string comparison.

Every function takes contiguous arrays and scalars and validates nothing. Kernels other modules
call are public (``__all__``), the rest ``_``-prefixed.
"""

from __future__ import annotations

import numpy as np

from neardup.compiled import njit
from neardup.primitives import string_key

__all__ = [
    "first_bad_offset",
    "first_not_permutation",
    "gather_strings",
    "lookup_keys",
    "string_keys",
    "strings_equal",
]


@njit(cache=True, nogil=True)
def string_keys(blob, offsets):
    """The stored key (:func:`neardup.primitives.string_key`) of each UTF-8 string id
    ``blob[offsets[i]:offsets[i+1]]``."""
    n = offsets.shape[0] - 1
    out = np.empty(n, dtype=np.uint64)
    for i in range(n):
        out[i] = string_key(blob, offsets[i], offsets[i + 1])
    return out


@njit(cache=True, nogil=True)
def lookup_keys(keys, order, queries):
    """For each query key, the range ``[lo, hi)`` of ``order`` whose rows hold that key.

    ``keys[order]`` is ascending. Binary search through the indirection, so ``keys`` and
    ``order`` may stay memory-mapped.
    """
    n = order.shape[0]
    m = queries.shape[0]
    lo_out = np.empty(m, dtype=np.int64)
    hi_out = np.empty(m, dtype=np.int64)
    for q in range(m):
        v = queries[q]
        lo = 0
        hi = n
        while lo < hi:
            mid = (lo + hi) // 2
            if keys[order[mid]] < v:
                lo = mid + 1
            else:
                hi = mid
        e = lo
        while e < n and keys[order[e]] == v:
            e += 1
        lo_out[q] = lo
        hi_out[q] = e
    return lo_out, hi_out


@njit(cache=True, nogil=True)
def strings_equal(blob_a, off_a, idx_a, blob_b, off_b, idx_b):
    """``out[i]`` is True when string ``idx_a[i]`` of ``a`` equals string ``idx_b[i]`` of ``b``."""
    m = idx_a.shape[0]
    out = np.zeros(m, dtype=np.bool_)
    for i in range(m):
        sa = off_a[idx_a[i]]
        la = off_a[idx_a[i] + 1] - sa
        sb = off_b[idx_b[i]]
        lb = off_b[idx_b[i] + 1] - sb
        if la != lb:
            continue
        same = True
        for j in range(la):
            if blob_a[sa + j] != blob_b[sb + j]:
                same = False
                break
        out[i] = same
    return out


@njit(cache=True, nogil=True)
def gather_strings(blob, offsets, rows):
    """Concatenate strings ``rows`` of ``(blob, offsets)`` into a new ``(blob, offsets)``."""
    m = rows.shape[0]
    off = np.empty(m + 1, dtype=np.int64)
    off[0] = 0
    for i in range(m):
        off[i + 1] = off[i] + (offsets[rows[i] + 1] - offsets[rows[i]])
    out = np.empty(off[m], dtype=np.uint8)
    for i in range(m):
        s = offsets[rows[i]]
        for j in range(off[i + 1] - off[i]):
            out[off[i] + j] = blob[s + j]
    return out, off


@njit(cache=True, nogil=True)
def first_not_permutation(order):
    """-1 when ``order`` holds each of ``0 .. len(order) - 1`` once, else the first position
    whose value is out of range or repeats an earlier one."""
    n = order.shape[0]
    seen = np.zeros((n + 7) // 8, dtype=np.uint8)
    for i in range(n):
        v = np.int64(order[i])
        if v < 0 or v >= n:
            return i
        byte = v >> 3
        bit = np.uint8(1 << (v & 7))
        if seen[byte] & bit:
            return i
        seen[byte] |= bit
    return -1


@njit(cache=True, nogil=True)
def first_bad_offset(offsets, size):
    """-1 when ``offsets`` starts at 0, never decreases and ends at ``size``, else the first
    position that breaks this."""
    n = offsets.shape[0]
    if n == 0 or offsets[0] != 0:
        return 0
    for i in range(1, n):
        if offsets[i] < offsets[i - 1] or offsets[i] > size:
            return i
    if offsets[n - 1] != size:
        return n - 1
    return -1

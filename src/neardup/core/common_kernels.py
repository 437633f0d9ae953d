"""numba kernels of :mod:`neardup.core.common`: keys counted by bucket (their top bits), counted
exactly in the few buckets that can hold a common key, gathered for a sort, the runs of a sorted
array, shingle sets without a set of keys, and the counts of two parts merged.

Keys are uint32 shingle keys (hash bits); a key's bucket is ``key >> shift``. Shingle sets are
CSR: document ``d`` holds ``keys[offsets[d] - offsets[0]:offsets[d + 1] - offsets[0]]`` of a
chunk. Every function takes contiguous arrays and scalars and validates nothing: the caller
sizes every output. Kernels other modules call are public (``__all__``), the rest
``_``-prefixed.
"""

from __future__ import annotations

import numpy as np

from neardup.compiled import njit

__all__ = [
    "bucket_counts",
    "bucket_sums",
    "gather_buckets",
    "merge_sums",
    "runs_over",
    "sets_without",
    "slot_counts",
]


@njit(cache=True, nogil=True)
def bucket_counts(keys, shift, counts):
    """``counts[b] += `` the number of ``keys`` whose bucket ``key >> shift`` is ``b``."""
    for i in range(keys.shape[0]):
        counts[keys[i] >> shift] += 1


@njit(cache=True, nogil=True)
def bucket_sums(keys, counts, shift, sizes):
    """``sizes[b] += `` the counts of the ``keys`` whose bucket ``key >> shift`` is ``b``."""
    for i in range(keys.shape[0]):
        sizes[keys[i] >> shift] += counts[i]


@njit(cache=True, nogil=True)
def _place(sorted_keys, k):
    """The place of ``k`` in ``sorted_keys`` (ascending), or -1, by a binary search."""
    lo = 0
    hi = sorted_keys.shape[0]
    while lo < hi:
        mid = (lo + hi) >> 1
        if sorted_keys[mid] < k:
            lo = mid + 1
        else:
            hi = mid
    if lo < sorted_keys.shape[0] and sorted_keys[lo] == k:
        return lo
    return -1


@njit(cache=True, nogil=True)
def slot_counts(keys, shift, slot, counts):
    """Each key counted at ``(slot[key >> shift] << shift) | (key & (2**shift - 1))`` of
    ``counts``: ``slot`` gives each bucket counted exactly its block of ``2**shift`` counts, and
    every other bucket one spare block (its counts are never read). No branch per key."""
    low = np.uint32((1 << shift) - 1)
    for i in range(keys.shape[0]):
        k = keys[i]
        counts[(slot[k >> shift] << shift) | np.int64(k & low)] += 1


@njit(cache=True, nogil=True)
def gather_buckets(keys, shift, take, out, at):
    """The keys whose bucket is marked in ``take`` (uint8) written to ``out`` from ``at`` on;
    returns where the next one goes. ``out`` needs one spare place (every key is written, the
    place advanced only for those taken: no branch per key)."""
    for i in range(keys.shape[0]):
        k = keys[i]
        out[at] = k
        at += take[k >> shift]
    return at


@njit(cache=True, nogil=True)
def _fill_runs(s, limit, values, lengths):
    """Each run of equal values of sorted ``s`` longer than ``limit``: its value and length
    written to ``values`` and ``lengths`` (when they hold the runs; empty: only counted);
    returns how many runs."""
    n = s.shape[0]
    m = 0
    start = 0
    for i in range(1, n + 1):
        if i == n or s[i] != s[i - 1]:
            if i - start > limit:
                if values.shape[0]:
                    values[m] = s[start]
                    lengths[m] = i - start
                m += 1
            start = i
    return m


@njit(cache=True, nogil=True)
def runs_over(s, limit):
    """The value and the length (int64) of each run of sorted ``s`` longer than ``limit``."""
    m = _fill_runs(s, limit, s[:0], np.zeros(0, dtype=np.int64))
    values = np.empty(m, dtype=s.dtype)
    lengths = np.empty(m, dtype=np.int64)
    _fill_runs(s, limit, values, lengths)
    return values, lengths


@njit(cache=True, nogil=True)
def sets_without(offsets, keys, table, shift, drop, out_offsets, out_keys):
    """The chunk's sets without the keys of ``drop`` (sorted, not empty) into ``out_keys``
    (as long as ``keys``) and ``out_offsets`` (from 0); returns the keys kept. ``table[key >>
    shift]`` is the place in ``drop`` of the one key of ``drop`` in that slot, -1 for none, -2
    for several (then a binary search decides)."""
    base = offsets[0]
    j = 0
    out_offsets[0] = 0
    for d in range(offsets.shape[0] - 1):
        for i in range(offsets[d] - base, offsets[d + 1] - base):
            k = keys[i]
            t = table[k >> shift]
            if t == -2:
                keep = _place(drop, k) < 0
            else:
                keep = (t < 0) | (drop[max(t, 0)] != k)
            out_keys[j] = k
            j += keep
        out_offsets[d + 1] = j
    return j


@njit(cache=True, nogil=True)
def merge_sums(a_keys, a_counts, b_keys, b_counts):
    """Two sorted runs of distinct keys with their counts merged into one: every key of either,
    ascending, with the sum of its counts (int64); views of arrays as long as both runs."""
    n, m = a_keys.shape[0], b_keys.shape[0]
    keys = np.empty(n + m, dtype=a_keys.dtype)
    counts = np.empty(n + m, dtype=np.int64)
    i = j = k = 0
    while i < n and j < m:
        if a_keys[i] < b_keys[j]:
            keys[k], counts[k] = a_keys[i], a_counts[i]
            i += 1
        elif b_keys[j] < a_keys[i]:
            keys[k], counts[k] = b_keys[j], b_counts[j]
            j += 1
        else:
            keys[k], counts[k] = a_keys[i], a_counts[i] + b_counts[j]
            i += 1
            j += 1
        k += 1
    for p in range(i, n):
        keys[k], counts[k] = a_keys[p], a_counts[p]
        k += 1
    for p in range(j, m):
        keys[k], counts[k] = b_keys[p], b_counts[p]
        k += 1
    return keys[:k], counts[:k]

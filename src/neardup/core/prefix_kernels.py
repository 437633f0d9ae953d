"""numba kernels of :mod:`neardup.core.prefix`: each set's prefix under the corpus order of its
keys, and the keep/drop pass that finds candidates through an inverted index of the kept
documents' prefixes.

Shingle sets are CSR: document ``d`` holds ``keys[offsets[d]:offsets[d + 1]]``, sorted ascending
and unique (uint32). A key's rank in the corpus order is the uint64 ``count << 32 | key``:
rarer keys first, ties by key, so the order is total and the same for every document. Every
function takes contiguous arrays and scalars and validates nothing: the caller sizes every
output. Kernels other modules call are public (``__all__``), the rest ``_``-prefixed.
"""

from __future__ import annotations

import numpy as np

from neardup.compiled import njit
from neardup.core.verify_kernels import drops_for, min_intersection

__all__ = [
    "count_keys",
    "group_pairs",
    "key_ids",
    "key_ids64",
    "key_table",
    "key_table64",
    "prefix_keep",
    "prefixes",
]

#: Multiplier of the slot hash (Knuth's, 2^32 / golden ratio): keys are hash bits already, the
#: product spreads any structure left in their low bits.
_MIX = np.uint64(0x9E3779B1)
_LOW32 = np.uint64(0xFFFFFFFF)


@njit(cache=True, nogil=True, inline="always")
def _slot(key, shift):
    """The top ``32 - shift`` bits of the 32-bit product ``key * _MIX`` (int64)."""
    return np.int64(((np.uint64(key) * _MIX) & _LOW32) >> np.uint64(shift))


@njit(cache=True, nogil=True)
def count_keys(keys, shift, counts, lo, hi):
    """``counts[slot(key)] += 1`` for the keys ``keys[lo:hi]``; a key's slot is the top
    ``32 - shift`` bits of its 32-bit product with :data:`_MIX`."""
    for i in range(lo, hi):
        counts[_slot(keys[i], shift)] += 1


@njit(cache=True, nogil=True, inline="always")
def _select(a, n, k):
    """Reorder ``a[:n]`` so that its ``k + 1`` smallest values come first (quickselect with a
    median of three and a branch-free partition: about twice as fast as ``np.partition``,
    which copies, on sets of a few hundred keys)."""
    lo = 0
    hi = n - 1
    while hi > lo:
        mid = (lo + hi) >> 1
        if a[mid] < a[lo]:
            a[mid], a[lo] = a[lo], a[mid]
        if a[hi] < a[lo]:
            a[hi], a[lo] = a[lo], a[hi]
        if a[mid] < a[hi]:
            a[mid], a[hi] = a[hi], a[mid]
        pivot = a[hi]
        i = lo
        for j in range(lo, hi):
            t = a[j]
            a[j] = a[i]
            a[i] = t
            i += 1 if t < pivot else 0
        a[i], a[hi] = a[hi], a[i]
        if i == k:
            return
        if i < k:
            lo = i + 1
        else:
            hi = i - 1


@njit(cache=True, nogil=True)
def prefixes(offsets, keys, counts, shift, poff, pkeys, lo, hi):
    """The prefix of each document ``d`` in ``[lo, hi)``: its ``poff[d + 1] - poff[d]`` keys of
    lowest rank (``counts[slot(key)] << 32 | key``), written to ``pkeys[poff[d]:poff[d + 1]]``
    in rank order: the ``j``-th is the document's ``j``-th key in the corpus order."""
    most = 0
    for d in range(lo, hi):
        most = max(most, offsets[d + 1] - offsets[d])
    rank = np.empty(most, dtype=np.uint64)
    for d in range(lo, hi):
        a = offsets[d]
        s = offsets[d + 1] - a
        p = poff[d + 1] - poff[d]
        if p == 0:
            continue
        for j in range(s):
            k = keys[a + j]
            rank[j] = (np.uint64(counts[_slot(k, shift)]) << np.uint64(32)) | np.uint64(k)
        if p < s:
            _select(rank, s, p - 1)
        rank[:p].sort()
        for j in range(p):
            pkeys[poff[d] + j] = np.uint32(rank[j] & _LOW32)


@njit(cache=True, nogil=True)
def key_table(shared):
    """An open-addressing table of the unique keys ``shared``, at most a quarter full:
    (table, shift). A slot holds ``key << 32 | (index in shared + 1)``, 0 when empty; a key
    starts at the slot of its top ``32 - shift`` hash bits (:func:`_slot`)."""
    bits = 4
    while (1 << bits) < 4 * shared.shape[0]:
        bits += 1
    table = np.zeros(1 << bits, dtype=np.uint64)
    shift = 32 - bits
    mask = (1 << bits) - 1
    for i in range(shared.shape[0]):
        h = _slot(shared[i], shift)
        while table[h] != 0:
            h = (h + 1) & mask
        table[h] = (np.uint64(shared[i]) << np.uint64(32)) | np.uint64(i + 1)
    return table, shift


@njit(cache=True, nogil=True)
def key_ids(table, shift, pkeys, ids, lo, hi):
    """``ids[j]``: the index in ``shared`` of ``pkeys[j]`` by the :func:`key_table` of
    ``shared``, or -1, for ``j`` in ``[lo, hi)``."""
    mask = table.shape[0] - 1
    for j in range(lo, hi):
        k = np.uint64(pkeys[j])
        h = _slot(pkeys[j], shift)
        ids[j] = -1
        while table[h] != 0:
            if (table[h] >> np.uint64(32)) == k:
                ids[j] = np.int64(table[h] & _LOW32) - 1
                break
            h = (h + 1) & mask


_MIX64 = np.uint64(0x9E3779B97F4A7C15)


@njit(cache=True, nogil=True)
def key_table64(shared):
    """An open-addressing table of the unique 64-bit keys ``shared``, at most half full:
    (keys, indexes, bits); a slot's index is -1 when empty, and a key starts at the slot of
    the top ``bits`` bits of its product with the golden ratio."""
    bits = 4
    while (1 << bits) < 2 * shared.shape[0]:
        bits += 1
    tkeys = np.zeros(1 << bits, dtype=np.uint64)
    tidx = np.full(1 << bits, -1, dtype=np.int32)
    mask = (1 << bits) - 1
    for i in range(shared.shape[0]):
        h = np.int64((shared[i] * _MIX64) >> np.uint64(64 - bits))
        while tidx[h] >= 0:
            h = (h + 1) & mask
        tkeys[h] = shared[i]
        tidx[h] = i
    return tkeys, tidx, bits


@njit(cache=True, nogil=True)
def key_ids64(tkeys, tidx, bits, keys, ids, lo, hi):
    """``ids[j]``: the index in ``shared`` of ``keys[j]`` by the :func:`key_table64` of
    ``shared``, or -1, for ``j`` in ``[lo, hi)``."""
    mask = (1 << bits) - 1
    for j in range(lo, hi):
        h = np.int64((keys[j] * _MIX64) >> np.uint64(64 - bits))
        ids[j] = -1
        while tidx[h] >= 0:
            if tkeys[h] == keys[j]:
                ids[j] = tidx[h]
                break
            h = (h + 1) & mask


@njit(cache=True, nogil=True, inline="always")
def _weight(sx, i, sy, j, t, need):
    """What a key that sets of ``sx`` and ``sy`` keys share at the ``i``-th place of the one's
    prefix and the ``j``-th of the other's counts towards the ``need`` shared keys that make
    them candidates: 0 when they cannot reach Jaccard ``t`` (the positional filter: at most
    ``min(i, j)`` common keys come before it, each earlier in both prefixes, and at most
    ``min(sx - i - 1, sy - j - 1)`` after it), ``need`` when one common key can be enough
    (:func:`~neardup.core.verify_kernels.min_intersection` at most 1), else 1. The exact count
    is asked only of pairs that pass its real-number bound ``t * (sx + sy) / (1 + t)``, less a
    margin of float rounding."""
    most = min(i, j) + 1 + min(sx - i - 1, sy - j - 1)
    s = sx + sy
    if most < t * s / (1.0 + t) - 1e-9 * s:
        return 0
    c = min_intersection(sx, sy, t)
    if most < c:
        return 0
    return need if c <= 1 else 1


@njit(cache=True, nogil=True)
def prefix_keep(
    offsets, keys, docs, poff, ids, base, t, positional, need, kept_for, inter, union,
    near_for, near_inter, near_union,
):  # fmt: skip
    """Keep or drop ``docs`` (class representatives in priority order, ``kept_for`` -2 while
    undecided), each dropped for the first kept earlier document, in priority order, with
    Jaccard ``>= t`` among its candidates, else kept (-1). The keys of ``d``'s prefix, in rank
    order, are ``ids[poff[d]:poff[d + 1]]``: each an index below ``n_shared`` of a key that two
    or more prefixes hold (the only keys that can pair documents), or -1. A candidate shares
    prefix keys whose weights (:func:`_weight`: the positional filter at each) reach ``need``
    (with ``positional`` False, the keys' places are not ranks, as with band keys: the size
    filter alone). Only kept documents are indexed: shared key ``g`` holds its kept
    documents side by side in slots ``base[g]`` to ``base[g + 1]`` (int64, ``n_shared + 1``:
    room for every prefix that holds it), so a walk of a key reads memory in order instead of
    chasing links. With ``near_for`` of length ``n`` (else empty), each checked pair under
    ``t`` is offered as a near miss. Returns (set intersections computed, candidate pairs
    examined)."""
    # a slot's document (a rank in docs), the key's place in its prefix and its set size
    # (int32: fewer than 2**31 documents in one pass)
    ent = np.empty((base[-1], 3), dtype=np.int32)
    fill = base[:-1].copy()
    seen = np.full(docs.shape[0], -1, dtype=np.int64)
    score = np.zeros(docs.shape[0], dtype=np.int32)
    buf = np.empty(docs.shape[0], dtype=np.int64)
    checks = 0
    cands = 0
    for q in range(docs.shape[0]):
        d = docs[q]
        sd = offsets[d + 1] - offsets[d]
        m = 0
        for j in range(poff[d], poff[d + 1]):
            g = ids[j]
            if g < 0:
                continue
            for e in range(base[g], fill[g]):
                r = ent[e, 0]
                if seen[r] != q:
                    seen[r] = q
                    score[r] = 0
                    buf[m] = r
                    m += 1
                if score[r] < need:
                    i = np.int64(j - poff[d]) if positional else np.int64(0)
                    k = np.int64(ent[e, 1]) if positional else np.int64(0)
                    score[r] += _weight(sd, i, np.int64(ent[e, 2]), k, t, need)
        c = 0
        for x in range(m):
            if score[buf[x]] >= need:
                buf[c] = buf[x]
                c += 1
        m = c
        cands += m
        found = False
        if m:
            order = np.sort(buf[:m])
            for i in range(m):
                e = docs[order[i]]
                checks += 1
                if drops_for(offsets, keys, d, e, t, kept_for, inter, union, near_for,
                             near_inter, near_union):  # fmt: skip
                    found = True
                    break
        if found:
            continue
        kept_for[d] = -1
        for j in range(poff[d], poff[d + 1]):
            g = ids[j]
            if g >= 0:
                e = fill[g]
                ent[e, 0] = q
                ent[e, 1] = j - poff[d]
                ent[e, 2] = sd
                fill[g] = e + 1
    return checks, cands


@njit(cache=True, nogil=True)
def group_pairs(pos, at, size, starts, ends, t, need, out):
    """The pairs of positions within each group ``pos[starts[g]:ends[g]]`` (the entries of one
    key, positions ascending; ``at``: the key's place in each document's prefix, ``size``: the
    document's set size), each written to ``out`` as rows ``(pos[i], pos[j])``, ``i < j``, as
    many times as the key weighs for the pair (:func:`_weight`: 0 to ``need``); returns the
    rows written. A pair is a candidate when its rows over all keys reach ``need``, the rule
    of :func:`prefix_keep`."""
    k = 0
    for g in range(starts.shape[0]):
        for i in range(starts[g], ends[g]):
            for j in range(i + 1, ends[g]):
                w = _weight(size[i], at[i], size[j], at[j], t, need)
                for _ in range(w):
                    out[k, 0] = pos[i]
                    out[k, 1] = pos[j]
                    k += 1
    return k

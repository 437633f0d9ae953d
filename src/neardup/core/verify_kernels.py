"""numba kernels for verification: set hashes and classes, exact intersections of sorted uint32
shingle keys, the MinHash sketch and the simhash of a key set, and the keep/drop passes.

Shingle sets are CSR: document ``d`` holds ``keys[offsets[d]:offsets[d + 1]]``, sorted ascending
and unique (uint32). Every function takes contiguous arrays and scalars and validates nothing.
Kernels other modules call are public (``__all__``), the rest ``_``-prefixed. ``J >= t`` is decided
on exact integer counts as ``inter / union >= t`` in float64 (the comparison Python makes), so
every decision is exact and reproducible; the early exits (size bound, merge stopped once the
intersection cannot reach ``t``) never change it.
"""

from __future__ import annotations

import numpy as np

from neardup.compiled import njit
from neardup.primitives import FNV_PRIME, GOLDEN, fmix64

__all__ = [
    "check_sorted_unique",
    "drops_for",
    "first_match",
    "gather_keys",
    "greedy_keep",
    "min_intersection",
    "pair_intersections",
    "reaches",
    "reaches_near",
    "set_classes",
    "set_digests",
    "set_hashes",
    "set_minhash",
    "set_simhash",
]

_C1 = np.uint64(0xFF51AFD7ED558CCD)
_S27 = np.uint64(27)
_S37 = np.uint64(37)


@njit(cache=True, nogil=True)
def set_hashes(offsets, keys, out, lo, hi):
    """``out[d]`` = a 64-bit hash of the key sequence of document ``d`` (equal sets, equal hash)."""
    for d in range(lo, hi):
        a = offsets[d]
        b = offsets[d + 1]
        h = np.uint64(b - a) * GOLDEN
        for p in range(a, b):
            h = (h ^ np.uint64(keys[p])) * _C1
            h = (h << _S27) | (h >> _S37)
        out[d] = fmix64(h)


_C2 = np.uint64(0xC4CEB9FE1A85EC53)
_C3 = np.uint64(0x9FB21C651E98DF25)
_S31 = np.uint64(31)
_S33 = np.uint64(33)


@njit(cache=True, nogil=True)
def set_digests(offsets, keys, out, lo, hi):
    """``out[d, 0]``, ``out[d, 1]``: a 128-bit digest of the key sequence of document ``d``, two
    64-bit lanes of different multipliers, rotations and seeds (lane 0 is :func:`set_hashes`):
    equal sets give equal digests; two different sets share one with odds of about 2**-128
    for keys not chosen to collide."""
    for d in range(lo, hi):
        a = offsets[d]
        b = offsets[d + 1]
        h = np.uint64(b - a) * GOLDEN
        g = (np.uint64(b - a) + _C3) * _C2
        for p in range(a, b):
            k = np.uint64(keys[p])
            h = (h ^ k) * _C1
            h = (h << _S27) | (h >> _S37)
            g = (g + k) * _C3
            g = ((g << _S31) | (g >> _S33)) ^ _C2
        out[d, 0] = fmix64(h)
        out[d, 1] = fmix64(g ^ _C3)


@njit(cache=True, nogil=True)
def check_sorted_unique(offsets, keys):
    """First position ``p`` with ``keys[p] <= keys[p - 1]`` inside one document, or -1."""
    n = offsets.shape[0] - 1
    for d in range(n):
        for p in range(offsets[d] + 1, offsets[d + 1]):
            if keys[p] <= keys[p - 1]:
                return p
    return -1


@njit(cache=True, nogil=True)
def _same_set(offsets, keys, x, y):
    a = offsets[x]
    b = offsets[y]
    m = offsets[x + 1] - a
    if offsets[y + 1] - b != m:
        return False
    for k in range(m):
        if keys[a + k] != keys[b + k]:
            return False
    return True


@njit(cache=True, nogil=True)
def gather_keys(offsets, keys, wanted, out_offsets, out_keys, lo, hi):
    """Copy the keys of documents ``d`` in ``[lo, hi)`` with ``wanted[d]`` to
    ``out_keys[out_offsets[d]:out_offsets[d + 1]]``."""
    for d in range(lo, hi):
        if wanted[d]:
            a = offsets[d]
            o = out_offsets[d]
            for p in range(offsets[d + 1] - a):
                out_keys[o + p] = keys[a + p]


@njit(cache=True, nogil=True)
def set_classes(offsets, keys, hashes, order, rep):
    """Class representative of every document in ``order`` (non-empty documents sorted by set
    hash, then by priority): the first document of its run of equal hashes whose set is equal.

    ``rep[d] = d`` for the representative itself. A run of equal hashes almost always holds one
    set; hash collisions are resolved by comparing the keys.
    """
    m = order.shape[0]
    heads = np.empty(max(m, 1), dtype=np.int64)
    s = 0
    while s < m:
        e = s + 1
        while e < m and hashes[order[e]] == hashes[order[s]]:
            e += 1
        nh = 0
        for q in range(s, e):
            d = order[q]
            r = -1
            for k in range(nh):
                if _same_set(offsets, keys, heads[k], d):
                    r = heads[k]
                    break
            if r < 0:
                heads[nh] = d
                nh += 1
                r = d
            rep[d] = r
        s = e


@njit(cache=True, nogil=True, inline="always")
def min_intersection(sa, sb, t):
    """Smallest intersection ``c`` with ``c / (sa + sb - c) >= t`` (float64, as Python divides);
    ``min(sa, sb) + 1`` when none reaches ``t``; 0 for ``t <= 0``. The ratio grows with ``c``, so
    stepping from the estimate to the first ``c`` that passes is exact."""
    if t <= 0.0:
        return 0
    s = sa + sb
    lim = min(sa, sb)
    c = min(max(int(np.ceil(t * s / (1.0 + t))), 0), lim + 1)
    while c > 0 and (c - 1) / (s - (c - 1)) >= t:
        c -= 1
    while c <= lim and c / (s - c) < t:
        c += 1
    return c


@njit(cache=True, nogil=True, inline="always")
def _intersect(keys, a, a_end, b, b_end, need):
    """``|A & B|`` of two sorted unique runs, or -1 as soon as it cannot reach ``need``."""
    c = 0
    while a < a_end and b < b_end:
        if c + min(a_end - a, b_end - b) < need:
            return -1
        x = keys[a]
        y = keys[b]
        if x == y:
            c += 1
            a += 1
            b += 1
        elif x < y:
            a += 1
        else:
            b += 1
    return c if c >= need else -1


@njit(cache=True, nogil=True)
def pair_intersections(offsets, keys, pi, pj, t, inter, lo, hi):
    """``inter[k] = |S(pi[k]) & S(pj[k])|`` where the pair reaches Jaccard ``t``, else -1.

    ``t = 0`` computes every intersection exactly. Pairs with an empty set get -1 (their Jaccard
    is defined as 0: documents without shingles are never similar).
    """
    for k in range(lo, hi):
        x = pi[k]
        y = pj[k]
        a = offsets[x]
        b = offsets[y]
        sa = offsets[x + 1] - a
        sb = offsets[y + 1] - b
        if sa == 0 or sb == 0:
            inter[k] = -1
            continue
        need = min_intersection(sa, sb, t)
        if need > min(sa, sb):
            inter[k] = -1
            continue
        inter[k] = _intersect(keys, a, a + sa, b, b + sb, need)


@njit(cache=True, nogil=True)
def set_simhash(offsets, keys, out, lo, hi):
    """``out[d]``: simhash of document ``d``'s key set, every key weighing 1. Bit ``i`` (bit 63
    most significant) is set where more keys than not have bit ``i`` set in
    ``fmix64(key + 0x9E3779B97F4A7C15)``; an empty set gives 0."""
    tally = np.zeros(64, dtype=np.int64)
    for d in range(lo, hi):
        for b in range(64):  # (a loop: slice assignment costs a second of compiling)
            tally[b] = 0
        for p in range(offsets[d], offsets[d + 1]):
            h = fmix64(np.uint64(keys[p]) + GOLDEN)
            for b in range(64):
                tally[b] += np.int64((h >> np.uint64(b)) & np.uint64(1)) * 2 - 1
        v = np.uint64(0)
        for b in range(64):
            if tally[b] > 0:
                v |= np.uint64(1) << np.uint64(b)
        out[d] = v


_ALL = np.uint64(0xFFFFFFFFFFFFFFFF)
_LOW58 = np.uint64((1 << 58) - 1)
_S58 = np.uint64(58)
_SALT = np.uint64(0xD6E8FEB86659FD93)
_STEP = FNV_PRIME
_ONE = np.uint64(1)
_TRIES = 4096


@njit(cache=True, nogil=True)
def set_minhash(offsets, keys, out, lo, hi):
    """``out[d]``: one-permutation 1-bit MinHash of document ``d``'s key set (0 when empty).

    Each key is mixed to ``h = fmix64(key + 0x9E3779B97F4A7C15)``; its top 6 bits pick one of 64
    buckets and its low 58 bits rank it there. Bit ``b`` (bit 0 the least significant) is the
    lowest bit of ``fmix64(h_min ^ b * 0xD6E8FEB86659FD93)`` for the key ``h_min`` of least rank
    in bucket ``b``; an empty bucket borrows the minimum of the bucket found by probing
    ``fmix64(b * 0x100000001B3 + attempt) >> 58`` for attempt 1, 2, ... (optimal
    densification; after 4,096 misses the next non-empty bucket in cyclic order).
    """
    rank = np.empty(64, dtype=np.uint64)
    arg = np.empty(64, dtype=np.uint64)
    for d in range(lo, hi):
        a = offsets[d]
        e = offsets[d + 1]
        if a == e:
            out[d] = 0
            continue
        rank[:] = _ALL
        for p in range(a, e):
            h = fmix64(np.uint64(keys[p]) + GOLDEN)
            b = np.int64(h >> _S58)
            r = h & _LOW58
            if r < rank[b]:
                rank[b] = r
                arg[b] = h
        v = np.uint64(0)
        for b in range(64):
            src = b
            tries = 0
            while rank[src] == _ALL:
                tries += 1
                if tries <= _TRIES:
                    src = np.int64(fmix64(np.uint64(b) * _STEP + np.uint64(tries)) >> _S58)
                else:
                    src = (src + 1) & 63
            bit = fmix64(arg[src] ^ (np.uint64(b) * _SALT)) & _ONE
            v |= bit << np.uint64(b)
        out[d] = v


@njit(cache=True, nogil=True, inline="always")
def reaches(offsets, keys, x, y, t):
    """``|S(x) & S(y)|`` when ``J(x, y) >= t``, else -1 (size bound first, then the merge)."""
    a = offsets[x]
    b = offsets[y]
    sa = offsets[x + 1] - a
    sb = offsets[y + 1] - b
    need = min_intersection(sa, sb, t)
    if need > min(sa, sb):
        return -1
    return _intersect(keys, a, a + sa, b, b + sb, need)


@njit(cache=True, nogil=True, inline="always")
def reaches_near(offsets, keys, x, y, t, near_for, near_inter, near_union):
    """As :func:`reaches`, and a pair that stays under ``t`` becomes ``x``'s nearest miss
    (``near_for[x] = y`` with its exact counts) when its Jaccard beats the one recorded; the
    merge stops as soon as it can neither reach ``t`` nor beat that one."""
    a = offsets[x]
    b = offsets[y]
    sa = offsets[x + 1] - a
    sb = offsets[y + 1] - b
    if sa == 0 or sb == 0:
        return -1
    need = min_intersection(sa, sb, t)
    best = 0.0
    if near_for[x] >= 0:
        best = near_inter[x] / near_union[x]
    low = min_intersection(sa, sb, best)
    if low > min(sa, sb):
        return -1
    c = _intersect(keys, a, a + sa, b, b + sb, low)
    if c >= need:
        return c
    if c >= 0 and (near_for[x] < 0 or c / (sa + sb - c) > best):
        near_for[x] = y
        near_inter[x] = c
        near_union[x] = sa + sb - c
    return -1


@njit(cache=True, nogil=True, inline="always")
def drops_for(offsets, keys, d, e, t, kept_for, inter, union, near_for, near_inter, near_union):
    """Whether ``d`` reaches Jaccard ``t`` with the kept ``e``: if so ``d`` is dropped for it
    (``kept_for``, ``inter`` and ``union`` of ``d`` set). With ``near_for`` of length ``n``
    (else empty) a pair under ``t`` is offered to :func:`reaches_near`."""
    if near_for.shape[0] > 0:
        c = reaches_near(offsets, keys, d, e, t, near_for, near_inter, near_union)
    else:
        c = reaches(offsets, keys, d, e, t)
    if c < 0:
        return False
    kept_for[d] = e
    inter[d] = c
    union[d] = (offsets[d + 1] - offsets[d]) + (offsets[e + 1] - offsets[e]) - c
    return True


@njit(cache=True, nogil=True)
def greedy_keep(
    offsets, keys, docs, adj_off, adj, t, kept_for, inter, union, lo, hi,
    near_for, near_inter, near_union,
):  # fmt: skip
    """Keep or drop ``docs[lo:hi]`` (class representatives in priority order; ``docs[:lo]``
    already decided) given, for each position ``q``, its earlier candidates
    ``adj[adj_off[q]:adj_off[q + 1]]`` (positions, ascending).

    ``kept_for[d]`` is -2 while ``d`` is undecided; a document already dropped (>= 0) stays
    dropped. An undecided one is dropped for its first kept earlier candidate with Jaccard
    ``>= t`` and kept (-1) otherwise. Only kept candidates are ever checked. With ``near_for``
    of length ``n`` (else empty), each checked pair under ``t`` is offered to
    :func:`reaches_near`. Returns the number of set intersections computed.
    """
    checks = 0
    for q in range(lo, hi):
        d = docs[q]
        if kept_for[d] != -2:
            continue
        for p in range(adj_off[q], adj_off[q + 1]):
            e = docs[adj[p]]
            if kept_for[e] != -1:
                continue
            checks += 1
            if drops_for(offsets, keys, d, e, t, kept_for, inter, union, near_for, near_inter,
                         near_union):  # fmt: skip
                break
        if kept_for[d] == -2:
            kept_for[d] = -1
    return checks


@njit(cache=True, nogil=True)
def first_match(
    offsets, keys, queries, cand_off, cands, t, kept_for, inter, union, lo, hi,
    near_for, near_inter, near_union,
):  # fmt: skip
    """For each query ``queries[g]`` (``g`` in ``[lo, hi)``), its first candidate in
    ``cands[cand_off[g]:cand_off[g + 1]]`` (kept documents in priority order) with Jaccard
    ``>= t``: the query is dropped for it. ``near_for``: as in :func:`greedy_keep`. Returns the
    number of set intersections computed."""
    checks = 0
    for g in range(lo, hi):
        d = queries[g]
        for p in range(cand_off[g], cand_off[g + 1]):
            e = cands[p]
            checks += 1
            if drops_for(offsets, keys, d, e, t, kept_for, inter, union, near_for, near_inter,
                         near_union):  # fmt: skip
                break
    return checks

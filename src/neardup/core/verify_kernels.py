"""numba kernels for verification: set hashes, exact intersections of sorted uint32 shingle keys,
the Jaccard of candidate pairs and the greedy keep/drop pass.

Shingle sets are CSR: document ``d`` holds ``keys[offsets[d]:offsets[d + 1]]``, sorted ascending
and unique (uint32). Every function is ``_``-prefixed, takes contiguous arrays and scalars and
validates nothing. A Jaccard value is kept as the exact pair ``(intersection, union)`` of integer
counts; two values are compared by cross-multiplication, and ``J >= t`` as ``inter / union >= t``
in float64 (the comparison Python makes), so every decision is exact and reproducible.
"""

from __future__ import annotations

import numpy as np
from numba import njit

_GOLDEN = np.uint64(0x9E3779B97F4A7C15)
_C1 = np.uint64(0xFF51AFD7ED558CCD)
_C2 = np.uint64(0xC4CEB9FE1A85EC53)
_S33 = np.uint64(33)
_S27 = np.uint64(27)
_S37 = np.uint64(37)


@njit(cache=True, nogil=True, inline="always")
def _fmix64(h):
    h ^= h >> _S33
    h *= _C1
    h ^= h >> _S33
    h *= _C2
    h ^= h >> _S33
    return h


@njit(cache=True, nogil=True)
def _set_hashes(offsets, keys, out, lo, hi):
    """``out[d]`` = a 64-bit hash of the key sequence of document ``d`` (equal sets, equal hash)."""
    for d in range(lo, hi):
        a = offsets[d]
        b = offsets[d + 1]
        h = np.uint64(b - a) * _GOLDEN
        for p in range(a, b):
            h = (h ^ np.uint64(keys[p])) * _C1
            h = (h << _S27) | (h >> _S37)
        out[d] = _fmix64(h)


@njit(cache=True, nogil=True)
def _check_sorted_unique(offsets, keys):
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
def _set_classes(offsets, keys, hashes, order, rep):
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
def _min_intersection(sa, sb, t):
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
def _pair_intersections(offsets, keys, pi, pj, t, inter, lo, hi):
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
        need = _min_intersection(sa, sb, t)
        if need > min(sa, sb):
            inter[k] = -1
            continue
        inter[k] = _intersect(keys, a, a + sa, b, b + sb, need)


@njit(cache=True, nogil=True)
def _greedy(
    offsets,
    keys,
    docs,
    rank,
    unit,
    adj_off,
    adj,
    t,
    kept_head,
    kept_next,
    active,
    active_cnt,
    kept_for,
    inter_out,
    union_out,
):
    """Keep or drop each document of ``docs`` (class representatives in priority order).

    A document is dropped when an already kept document in its unit (equal fingerprints) or in
    an adjacent unit (a candidate pair) has Jaccard ``>= t`` with it; ``kept_for`` is the one with
    the highest Jaccard, ties to the lower ``rank``. Only kept documents are ever checked: each
    unit keeps a list of its kept documents (``kept_head``/``kept_next``) and the units next to
    it holding one (``active``, filled at ``adj_off[u]`` up to ``active_cnt[u]``). The per-unit
    arrays of different connected components are disjoint, so components may run on different
    threads at once. Returns the number of intersections computed.
    """
    checks = 0
    for q in range(docs.shape[0]):
        d = docs[q]
        u = unit[d]
        a = offsets[d]
        sa = offsets[d + 1] - a
        best = -1
        bc = 0
        bu = 1
        for w in range(-1, active_cnt[u]):
            v = u if w < 0 else active[adj_off[u] + w]
            e = kept_head[v]
            while e >= 0:
                b = offsets[e]
                sb = offsets[e + 1] - b
                need = _min_intersection(sa, sb, t)
                if best >= 0:
                    # must at least tie the best so far: c * bu >= bc * (sa + sb - c)
                    s = sa + sb
                    tie = (bc * s + bu + bc - 1) // (bu + bc)
                    if tie > need:
                        need = tie
                if need <= min(sa, sb):
                    checks += 1
                    c = _intersect(keys, a, a + sa, b, b + sb, need)
                    if c >= 0:
                        un = sa + sb - c
                        better = best < 0 or c * bu > bc * un
                        if not better and c * bu == bc * un and rank[e] < rank[best]:
                            better = True
                        if better:
                            best = e
                            bc = c
                            bu = un
                e = kept_next[e]
        if best >= 0:
            kept_for[d] = best
            inter_out[d] = bc
            union_out[d] = bu
            continue
        kept_for[d] = -1
        if kept_head[u] < 0:
            for p in range(adj_off[u], adj_off[u + 1]):
                v = adj[p]
                active[adj_off[v] + active_cnt[v]] = u
                active_cnt[v] += 1
        kept_next[d] = kept_head[u]
        kept_head[u] = d
    return checks

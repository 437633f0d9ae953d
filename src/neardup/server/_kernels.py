"""numba kernels of the service (arrays in, arrays out, no validation)."""

from __future__ import annotations

import numpy as np

from neardup.compiled import njit

__all__ = ["grouped_survivors", "results_json"]


@njit(cache=True, nogil=True)
def grouped_survivors(group, rep, offsets, to, self_link, seen):
    """First-survivor dedup of a batch over groups of identical items: item j is new unless
    ``seen[j]`` or an earlier new item i < j matches it; ``by[j]`` is the smallest such i,
    else -1. A drop is always justified by a kept item itself, never through a chain.

    Item j's group is ``group[j]``; the groups it matches are ``to[offsets[g]:offsets[g + 1]]``
    and, where ``self_link[g]``, its own. ``rep[g]`` is the group's first item not seen (-1 if
    none): every later item of a self-linked group is dropped by it or by what drops it, so the
    reps are the only new items of self-linked groups and the only candidates for ``by``. The
    work is one pass over the items, each scanning its group's links (groups that do not link
    themselves, empty sketches, link no other group either).
    """
    n = seen.shape[0]
    new = np.zeros(n, dtype=np.bool_)
    by = np.full(n, -1, dtype=np.int64)
    for j in range(n):
        if seen[j]:
            continue
        g = group[j]
        best = -1
        r = rep[g]
        if self_link[g] and 0 <= r < j and new[r]:
            best = r
        for p in range(offsets[g], offsets[g + 1]):
            r = rep[to[p]]
            if 0 <= r < j and new[r] and (best < 0 or r < best):
                best = r
        if best >= 0:
            by[j] = best
        else:
            new[j] = True
    return new, by


@njit(cache=True, nogil=True)
def _put_int(out, pos, v):
    """Write the decimal digits of int64 ``v`` at ``out[pos:]``; return the new position."""
    if v < 0:
        out[pos] = 45  # '-'
        pos += 1
        mag = np.uint64(-(v + 1)) + np.uint64(1)  # also right for -2**63
    else:
        mag = np.uint64(v)
    start = pos
    while True:
        out[pos] = 48 + np.uint8(mag % np.uint64(10))
        pos += 1
        mag //= np.uint64(10)
        if mag == 0:
            break
    i, j = start, pos - 1
    while i < j:
        out[i], out[j] = out[j], out[i]
        i += 1
        j -= 1
    return pos


@njit(cache=True, nogil=True)
def results_json(bounds, ids, dist):
    """The JSON array ``[{"matches":[{"id":I,"distance":D,"jaccard":null},...]},...]`` as UTF-8
    bytes, query q holding matches ``bounds[q]:bounds[q + 1]`` of int64 ``ids``/``dist``; the
    same text as ``json.dumps(..., separators=(",", ":"))``."""
    n = bounds.shape[0] - 1
    m = ids.shape[0]
    out = np.empty(2 + 15 * n + 60 * m, dtype=np.uint8)
    head = b'{"matches":['
    mid1 = b'{"id":'
    mid2 = b',"distance":'
    tail = b',"jaccard":null}'
    pos = 0
    out[pos] = 91  # '['
    pos += 1
    for q in range(n):
        if q:
            out[pos] = 44  # ','
            pos += 1
        for c in head:
            out[pos] = c
            pos += 1
        for k in range(bounds[q], bounds[q + 1]):
            if k > bounds[q]:
                out[pos] = 44
                pos += 1
            for c in mid1:
                out[pos] = c
                pos += 1
            pos = _put_int(out, pos, ids[k])
            for c in mid2:
                out[pos] = c
                pos += 1
            pos = _put_int(out, pos, dist[k])
            for c in tail:
                out[pos] = c
                pos += 1
        out[pos] = 93  # ']'
        out[pos + 1] = 125  # '}'
        pos += 2
    out[pos] = 93
    pos += 1
    return out[:pos]

"""numba kernels of the MinHash sketches that verify against an index: the extra words of a
sketch and the number of differing bits of sketch pairs.

Every function takes contiguous arrays and scalars and validates nothing. Kernels other modules
call are public (``__all__``), the rest ``_``-prefixed. Shingle sets are CSR (document ``d`` holds
``keys[offsets[d]:offsets[d + 1]]``, sorted unique uint32); sketches are uint64 arrays of shape (n,
K), bit 0 the least significant of each word.
"""

from __future__ import annotations

import numpy as np

from neardup.compiled import njit
from neardup.primitives import FNV_PRIME, GOLDEN, fmix64, popcount, scaled_top

__all__ = ["differing_bits", "fill_sketch_words"]

#: Mixes a key's first hash into the independent hash that places it among the extra buckets.
_SEED = np.uint64(0x2545F4914F6CDD1D)
_SALT = np.uint64(0xD6E8FEB86659FD93)
_STEP = FNV_PRIME
_ONE = np.uint64(1)
_TRIES = 4096


@njit(cache=True, nogil=True)
def fill_sketch_words(offsets, keys, out, lo, hi):
    """Words 1..K-1 of the sketch of each document ``d`` in ``[lo, hi)`` (``out`` is uint64
    (n, K); word 0 is left alone): a one-permutation 1-bit MinHash over ``nb = 64 * (K - 1)``
    buckets, all zero for an empty set.

    Each key's hash ``h = fmix64(key + 0x9E3779B97F4A7C15)`` (the one word 0 is made of) is
    mixed again, ``g = fmix64(h ^ 0x2545F4914F6CDD1D)`` (distinct keys, distinct ``g``); the top
    32 bits of ``g`` scaled to ``[0, nb)`` pick its bucket and the least ``g`` of a bucket is its
    minimum. Bucket ``b`` is bit ``b % 64`` of word ``1 + b // 64``: the lowest bit of
    ``fmix64(g_min ^ (b + 64) * 0xD6E8FEB86659FD93)``. An empty bucket ``b`` borrows the minimum
    of the bucket ``fmix64((b + 64) * 0x100000001B3 + attempt)`` scaled to ``[0, nb)`` for
    attempt 1, 2, ... (after 4,096 misses: the next non-empty bucket in cyclic order).
    """
    words = out.shape[1]
    nb = 64 * (words - 1)
    if nb == 0:
        return
    best = np.empty(nb, dtype=np.uint64)
    full = np.zeros(nb, dtype=np.bool_)
    for d in range(lo, hi):
        a = offsets[d]
        e = offsets[d + 1]
        for w in range(1, words):
            out[d, w] = 0
        if a == e:
            continue
        full[:] = False
        for p in range(a, e):
            g = fmix64(fmix64(np.uint64(keys[p]) + GOLDEN) ^ _SEED)
            b = scaled_top(g, nb)
            if not full[b] or g < best[b]:
                best[b] = g
                full[b] = True
        for b in range(nb):
            src = b
            tries = 0
            salt = np.uint64(b + 64)
            while not full[src]:
                tries += 1
                if tries <= _TRIES:
                    src = scaled_top(fmix64(salt * _STEP + np.uint64(tries)), nb)
                else:
                    src = (src + 1) % nb
            bit = fmix64(best[src] ^ (salt * _SALT)) & _ONE
            out[d, 1 + b // 64] |= bit << np.uint64(b % 64)


@njit(cache=True, nogil=True)
def differing_bits(qs, cs, qi, ci, first, out, lo, hi):
    """``out[k]`` = differing bits of ``qs[qi[k]]`` and ``cs[ci[k]]`` over words ``first..K-1``,
    for ``k`` in ``[lo, hi)``."""
    words = qs.shape[1]
    for k in range(lo, hi):
        x = qi[k]
        y = ci[k]
        c = 0
        for w in range(first, words):
            c += np.int64(popcount(qs[x, w] ^ cs[y, w]))
        out[k] = c

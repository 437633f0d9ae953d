"""numba kernels of :mod:`neardup.core.bands`: each set's MinHash band keys.

Shingle sets are CSR: document ``d`` holds ``keys[offsets[d]:offsets[d + 1]]`` (uint32). Band
``i`` of ``b`` is one-permutation MinHash with ``r`` rows: every key is mixed once to
``h = fmix64(key)``, then to ``v = h * a_i + c_i`` (mod 2**64; ``a_i = fmix64((i + 1) *
0x9E3779B97F4A7C15) | 1``, ``c_i = fmix64(a_i)``: a bijection of the keys for each band, one
multiply a key and band), its row is the top bits' share ``((v >> 32) * r) >> 32`` and the
row's value the least ``v`` there. An empty row borrows the value of the row found by probing
``((fmix64(i << 32 | j << 16 | attempt) >> 32) * r) >> 32`` for attempt 1, 2, ... (optimal
densification: the same probe for every document, so two sets still agree on a row with
probability their Jaccard; after 4,096 misses the next non-empty row in cyclic order). The band's
key chains the rows: ``h = fmix64((i + 1) * 0x9E3779B97F4A7C15)``, then ``h = fmix64(h ^ value)``
for rows 0 to ``r - 1``. Every function takes contiguous arrays and validates nothing.
"""

from __future__ import annotations

import numpy as np

from neardup.compiled import njit
from neardup.primitives import GOLDEN, fmix64, scaled_top

__all__ = ["band_keys"]

_ALL = np.uint64(0xFFFFFFFFFFFFFFFF)
_S16 = np.uint64(16)
_S32 = np.uint64(32)
_TRIES = 4096


@njit(cache=True, nogil=True)
def band_keys(offsets, keys, poff, b, r, out, lo, hi):
    """The ``b`` band keys (uint64) of each document ``d`` in ``[lo, hi)`` that has
    ``poff[d + 1] - poff[d] == b`` slots (others have none), written to
    ``out[poff[d]:poff[d + 1]]`` in band order."""
    low = np.empty(r, dtype=np.uint64)
    most = 0
    for d in range(lo, hi):
        most = max(most, offsets[d + 1] - offsets[d])
    mixed = np.empty(most, dtype=np.uint64)
    for d in range(lo, hi):
        if poff[d + 1] - poff[d] != b:
            continue
        a = offsets[d]
        e = offsets[d + 1]
        for p in range(a, e):
            mixed[p - a] = fmix64(np.uint64(keys[p]))
        for i in range(b):
            salt = np.uint64(i) << _S32
            mul = fmix64(np.uint64(i + 1) * GOLDEN) | np.uint64(1)
            add = fmix64(mul)
            low[:] = _ALL
            for p in range(e - a):
                v = mixed[p] * mul + add
                j = scaled_top(v, r)
                low[j] = min(low[j], v)
            h = fmix64(np.uint64(i + 1) * GOLDEN)
            for j in range(r):
                src = j
                tries = 0
                while low[src] == _ALL:
                    tries += 1
                    if tries <= _TRIES:
                        probe = salt | (np.uint64(j) << _S16) | np.uint64(tries)
                        src = scaled_top(fmix64(probe), r)
                    else:
                        src = (src + 1) % r
                h = fmix64(h ^ low[src])
            out[poff[d] + i] = h

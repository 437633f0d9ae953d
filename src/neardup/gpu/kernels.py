"""numba-cuda kernels of the GPU engine and nothing else: key building and the two scans.

One thread per element. Keys are a table's keys sorted ascending; a run is a stretch of equal
prefixes (the top ``64 - sh`` bits, the table's leading blocks). Thread ``i`` scans the rest of its
run, ``j > i``, and keeps the pairs within ``k`` bits that this table is the first to own (no check
block agrees, :mod:`neardup.core.layout`'s rule). :func:`count_pairs` counts them, an exclusive
prefix sum of the counts gives each thread its place, and :func:`write_pairs` writes them, so the
output needs no atomics and is the same on every run. With ``nc >= 0`` (a join) only pairs of a
position below ``nc`` (the corpus) and one at or above it (a query) count. Under numba's CUDA
simulator these run as Python on the CPU (small inputs only).
"""

from __future__ import annotations

import numpy as np
from numba import cuda

__all__ = ["count_pairs", "permute", "write_pairs"]

_U0 = np.uint64(0)


@cuda.jit(device=True)
def _owned(x, chk, nchk):
    for c in range(nchk):
        if (x & chk[c]) == _U0:
            return False
    return True


@cuda.jit(device=True)
def _keep(x, k, chk, nchk, nc, a, b):
    if cuda.popc(x) > k or not _owned(x, chk, nchk):
        return False
    return nc < 0 or (a < nc) != (b < nc)


@cuda.jit
def permute(fp, seg_src, seg_mask, seg_dst, nseg, keys):
    """Table keys of ``fp`` (fingerprint bits -> key bits by the table's segments)."""
    i = cuda.grid(1)
    if i < fp.shape[0]:
        x = fp[i]
        r = _U0
        for s in range(nseg):
            r |= ((x >> seg_src[s]) & seg_mask[s]) << seg_dst[s]
        keys[i] = r


@cuda.jit
def count_pairs(keys, pos, sh, k, chk, nchk, nc, counts):
    """``counts[i]``: the pairs thread ``i`` owns (see the module docstring)."""
    i = cuda.grid(1)
    n = keys.shape[0]
    if i < n:
        v = keys[i]
        pre = v >> sh
        c = 0
        j = i + 1
        while j < n and (keys[j] >> sh) == pre:
            if _keep(v ^ keys[j], k, chk, nchk, nc, pos[i], pos[j]):
                c += 1
            j += 1
        counts[i] = c


@cuda.jit
def write_pairs(keys, pos, sh, k, chk, nchk, nc, offsets, first, second):
    """Thread ``i``'s pairs of positions (smaller first) from ``offsets[i]`` on."""
    i = cuda.grid(1)
    n = keys.shape[0]
    if i < n:
        v = keys[i]
        pre = v >> sh
        o = offsets[i]
        a = pos[i]
        j = i + 1
        while j < n and (keys[j] >> sh) == pre:
            b = pos[j]
            if _keep(v ^ keys[j], k, chk, nchk, nc, a, b):
                first[o] = min(a, b)
                second[o] = max(a, b)
                o += 1
            j += 1

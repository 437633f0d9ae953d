"""numba kernels of the service (arrays in, arrays out, no validation)."""

from __future__ import annotations

import numpy as np
from numba import njit


@njit(cache=True, nogil=True)
def _first_survivors(pi, pj, seen):
    """First-survivor dedup of a batch: item j is new unless ``seen[j]`` or an earlier new item
    i < j is within distance (pairs ``(pi[p], pj[p])``, i < j, sorted by j then i).

    Returns (new, by): ``by[j]`` is the smallest new i that drops j, else -1. A drop is always
    justified by a kept item itself, never through a chain of dropped ones.
    """
    n = seen.shape[0]
    new = np.empty(n, dtype=np.bool_)
    by = np.full(n, -1, dtype=np.int64)
    for j in range(n):
        new[j] = not seen[j]
    for p in range(pi.shape[0]):
        i = pi[p]
        j = pj[p]
        # every pair ending at i comes before this one, so new[i] is final here
        if new[j] and new[i]:
            new[j] = False
            by[j] = i
    return new, by

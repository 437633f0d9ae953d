"""numba kernels of the Redis index's bulk writes (arrays in, arrays out, no validation)."""

from __future__ import annotations

import numpy as np

from neardup.compiled import njit

__all__ = ["counting_order"]


@njit(cache=True, nogil=True)
def counting_order(values, n_values):
    """Stable order of ``values`` (each in ``[0, n_values)``) by a counting sort: O(n + n_values).

    Returns (order, starts): ``values[order]`` is ascending, and the items of value v are
    ``order[starts[v]:starts[v + 1]]``.
    """
    starts = np.zeros(n_values + 1, dtype=np.int64)
    for i in range(values.shape[0]):
        starts[values[i] + 1] += 1
    for v in range(n_values):
        starts[v + 1] += starts[v]
    fill = starts[:-1].copy()
    order = np.empty(values.shape[0], dtype=np.int64)
    for i in range(values.shape[0]):
        v = values[i]
        order[fill[v]] = i
        fill[v] += 1
    return order, starts

"""Tiny inputs by brute force, with numpy alone: a command on a few fingerprints answers before
numba's runtime could even load (loading it costs about half a second on every start).

Same answers as :func:`neardup.core.search.find_all`, :func:`~neardup.core.search.find_clusters`
and :func:`~neardup.core.search.cluster_groups`: a match is ``popcount(a ^ b) <= distance``
(inclusive) over 64-bit fingerprints, bit 63 the most significant. The cost is
``n * (n - 1) / 2`` XOR-popcounts, so use these below :data:`SMALL_INPUT`.
"""

from __future__ import annotations

import numpy as np

__all__ = ["cluster_groups_small", "find_all_small", "find_clusters_small"]

#: The seed tools answer up to this many distinct fingerprints by numpy brute force
#: (:mod:`neardup.core.small`) and format their output in Python, without loading numba.
SMALL_INPUT = 2048


def find_all_small(values: np.ndarray, distance: int) -> np.ndarray:
    """Every pair ``(i, j)``, ``i < j``, with ``popcount(values[i] ^ values[j]) <= distance``,
    as an int64 array of shape ``(m, 2)`` sorted by ``i`` then ``j``.

    Parameters
    ----------
    values : ndarray of uint64, shape (n,)
    distance : int
        Largest number of differing bits that matches, ``>= 0``.
    """
    v = np.ascontiguousarray(values, dtype=np.uint64)
    if distance < 0:
        raise ValueError(f"distance must be >= 0 (got distance={distance})")
    parts = []
    for i in range(len(v) - 1):
        j = np.flatnonzero(np.bitwise_count(v[i + 1 :] ^ v[i]) <= distance) + (i + 1)
        if len(j):
            parts.append(np.stack([np.full(len(j), i, dtype=np.int64), j], axis=1))
    return np.concatenate(parts) if parts else np.empty((0, 2), dtype=np.int64)


def find_clusters_small(values: np.ndarray, distance: int) -> np.ndarray:
    """Connected components of the match graph: for each position, the smallest position of
    its cluster (its own for a singleton), int64 of shape ``(n,)``."""
    v = np.ascontiguousarray(values, dtype=np.uint64)
    parent = list(range(len(v)))

    def root(a: int) -> int:
        while parent[a] != a:
            parent[a] = parent[parent[a]]
            a = parent[a]
        return a

    for i, j in find_all_small(v, distance).tolist():
        ri, rj = root(i), root(j)
        if ri != rj:  # the smaller position becomes the root, so roots are first members
            parent[max(ri, rj)] = min(ri, rj)
    return np.array([root(a) for a in range(len(v))], dtype=np.int64)


def cluster_groups_small(labels: np.ndarray, min_size: int = 2) -> list[np.ndarray]:
    """Member positions (ascending) of each cluster with at least ``min_size`` members, ordered
    by first member, from labels that are each cluster's smallest position."""
    labels = np.asarray(labels, dtype=np.int64)
    order = np.argsort(labels, kind="stable")
    cuts = np.flatnonzero(np.diff(labels[order])) + 1
    groups = np.split(order, cuts) if len(order) else []
    return [g for g in groups if len(g) >= min_size]

"""numba kernels for fingerprint-only decisions: candidate pairs as CSR adjacency by keep
order, and the keep-order pass over it.

Every function takes contiguous int64 arrays and validates nothing. Kernels other modules call are
public (``__all__``), the rest ``_``-prefixed. Documents are named by their rank in keep order (0
is kept first); see :func:`neardup.core.decide.decide`.
"""

from __future__ import annotations

import numpy as np

from neardup.compiled import njit

__all__ = ["earlier_adjacency", "keep_order"]


@njit(cache=True, nogil=True)
def earlier_adjacency(a, b, n):
    """CSR over ranks ``0..n-1`` of the pairs ``(a[k], b[k])``: for each rank, the smaller
    ranks it is paired with, ascending (a counting sort by the larger rank, then each row
    sorted). Returns ``(adj_off, adj)``."""
    p = a.shape[0]
    adj_off = np.zeros(n + 1, dtype=np.int64)
    for k in range(p):
        adj_off[max(a[k], b[k]) + 1] += 1
    for q in range(n):
        adj_off[q + 1] += adj_off[q]
    fill = adj_off[:n].copy()
    adj = np.empty(p, dtype=np.int64)
    for k in range(p):
        hi = max(a[k], b[k])
        adj[fill[hi]] = min(a[k], b[k])
        fill[hi] += 1
    for q in range(n):
        adj[adj_off[q] : adj_off[q + 1]].sort()
    return adj_off, adj


@njit(cache=True, nogil=True)
def keep_order(lead, adj_off, adj, kept_for):
    """Keep or drop every rank ``q`` in order, into ``kept_for[q]`` (-1 kept, else the rank of
    the kept document it is dropped for).

    ``lead[q]`` is the first rank of ``q``'s class of identical fingerprints. A class leader is
    dropped for its first kept earlier candidate in ``adj[adj_off[q]:adj_off[q + 1]]`` (ranks,
    ascending), else kept; another member follows its leader: dropped for it when it is kept,
    else for the document the leader was dropped for. Only kept documents are ever named, so a
    drop never goes through a chain. Returns the number of candidates looked at.
    """
    n = lead.shape[0]
    looked = 0
    for q in range(n):
        r = lead[q]
        if r != q:
            kept_for[q] = r if kept_for[r] < 0 else kept_for[r]
            continue
        kept_for[q] = -1
        for p in range(adj_off[q], adj_off[q + 1]):
            looked += 1
            e = adj[p]
            if kept_for[e] < 0:
                kept_for[q] = e
                break
    return looked

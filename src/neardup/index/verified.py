"""How a local index with sketches decides verified matches: a candidate pair (query, entry)
is a match when the Jaccard estimated from their MinHash sketches reaches the threshold
(:func:`neardup.core.sketch.sketch_decide`)."""

from __future__ import annotations

from typing import Any

import numpy as np

from neardup.core.sketch import Sketches, sketch_decide
from neardup.index.segments import Segment

__all__ = ["VERIFY_QUERY_CHUNK", "decide"]

#: Queries a verified query searches at a time (its candidate pairs are held per chunk).
VERIFY_QUERY_CHUNK = 1 << 16

#: (query index, segment index, row, distance, estimated Jaccard) of matching pairs
Decided = tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]


def decide(
    segs: list[Segment],
    sk: Sketches,
    t: float,
    candidates: tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray],
    threads: int | None,
) -> Decided:
    """The candidate pairs ``(query index, segment index, row, distance)`` whose estimated
    Jaccard (query sketches ``sk``, the rows' stored sketches) reaches ``t``, with the estimates."""
    qi, si, rows, dist = candidates
    keep = np.zeros(len(qi), dtype=bool)
    jac = np.zeros(len(qi), dtype=np.float64)
    for s in np.unique(si).tolist():
        seg = segs[s]
        sel = np.flatnonzero(si == s)
        ok, est = sketch_decide(
            sk, Sketches(seg.sketch, seg.ssize), qi[sel], rows[sel], t, threads=threads
        )
        keep[sel] = ok
        jac[sel] = est
    return qi[keep], si[keep], rows[keep], dist[keep], jac[keep]


def no_decisions() -> Decided:
    e = np.empty(0, dtype=np.int64)
    return e, e.copy(), e.copy(), e.copy(), np.empty(0)


def concat(parts: list[Any]) -> Decided:
    """Decided pairs of several chunks in one."""
    if not parts:
        return no_decisions()
    return tuple(np.concatenate(p) for p in zip(*parts, strict=True))  # type: ignore[return-value]

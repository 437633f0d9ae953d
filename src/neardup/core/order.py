"""Sort orders of integer columns, by packing them into one uint64.

``np.lexsort`` sorts by each column in turn with an indirect stable sort, whose random reads
cost about 700 ns a row on 10 million rows of two int64 columns; packing the columns (each less
its minimum) and the row numbers into one uint64 and sorting that costs about 60 ns a row
(measured with numpy 2.4 on 2 cores). Where the row numbers do not fit beside the columns,
distinct packed values are sorted without them (ties take a stable sort), and columns whose
value ranges do not fit in 64 bits together fall back to ``np.lexsort``: the answers are the
same either way.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

__all__ = ["lexorder", "row_counts"]


def _spans(cols: Sequence[np.ndarray]) -> list[tuple[int, int]] | None:
    """Each column's ``(minimum, bits of its value range)``, or None when one is not an integer
    (or bool) column."""
    spans = []
    for c in cols:
        if not (np.issubdtype(c.dtype, np.integer) or c.dtype == np.bool_):
            return None
        lo, hi = int(c.min()), int(c.max())
        spans.append((lo, (hi - lo).bit_length()))
    return spans


def _pack(cols: Sequence[np.ndarray], spans: list[tuple[int, int]], shift: int) -> np.ndarray:
    """The columns (the last most significant), each less its minimum, packed above the low
    ``shift`` bits of a uint64."""
    packed = np.zeros(len(cols[0]), dtype=np.uint64)
    for c, (lo, bits) in zip(cols, spans, strict=True):
        if bits:
            v = c.astype(np.int64) - lo if c.dtype != np.uint64 else c - np.uint64(lo)
            packed |= v.astype(np.uint64) << np.uint64(shift)
        shift += bits
    return packed


def lexorder(keys: Sequence[np.ndarray]) -> np.ndarray:
    """The order of ``np.lexsort(keys)`` (int64): by the last column, ties by the one before
    it and so on, remaining ties in row order.

    Parameters
    ----------
    keys : sequence of ndarray
        Columns of one length, the last the primary key (as ``np.lexsort`` takes them).

    Returns
    -------
    ndarray of int64
        The row numbers in sorted order.
    """
    keys = [np.asarray(k) for k in keys]
    n = len(keys[0]) if len(keys) else 0
    if n < 2:
        return np.arange(n, dtype=np.int64)
    spans = _spans(keys)
    idx = (n - 1).bit_length()
    bits = 65 if spans is None else sum(b for _, b in spans)
    if bits + idx <= 64:
        packed = _pack(keys, spans, idx)
        packed |= np.arange(n, dtype=np.uint64)  # row numbers make every value unique: stable
        packed.sort()
        return (packed & np.uint64((1 << idx) - 1)).astype(np.int64)
    if bits <= 64:  # no room for the row numbers: distinct values need no stable sort
        packed = _pack(keys, spans, 0)
        order = np.argsort(packed)
        v = packed[order]
        if np.any(v[1:] == v[:-1]):
            order = np.argsort(packed, kind="stable")
        return order.astype(np.int64)
    return np.lexsort(keys).astype(np.int64)


def row_counts(rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The distinct rows of ``rows`` (int64, shape (k, 2)), sorted by the first column then
    the second, and how many times each occurs (int64)."""
    if len(rows) == 0:
        return rows, np.zeros(0, dtype=np.int64)
    cols = (rows[:, 1], rows[:, 0])
    spans = _spans(cols)
    if spans is None or spans[0][1] + spans[1][1] > 63:
        rows = rows[np.lexsort(cols)]
        first = np.flatnonzero(np.r_[True, np.any(rows[1:] != rows[:-1], axis=1)])
        return rows[first], np.diff(np.r_[first, len(rows)])
    packed = _pack(cols, spans, 0)
    packed.sort()
    first = np.flatnonzero(np.r_[True, packed[1:] != packed[:-1]])
    v = packed[first]
    low = np.uint64((1 << spans[0][1]) - 1)
    out = np.empty((len(v), 2), dtype=rows.dtype)
    out[:, 0] = (v >> np.uint64(spans[0][1])).astype(np.int64) + spans[1][0]
    out[:, 1] = (v & low).astype(np.int64) + spans[0][0]
    return out, np.diff(np.r_[first, len(packed)])

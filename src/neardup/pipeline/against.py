"""Incremental dedup against an index: drop what the index has seen, add the survivors.

Used by :func:`neardup.dedup` (``against=``, ``update=``) and ``neardup dedup --against``.
"""

from __future__ import annotations

import os
from typing import Any

import numpy as np

from neardup.errors import IdError, InputError
from neardup.index import Index
from neardup.pipeline.scan import Scan


def open_index(against: str | os.PathLike | Index, update: bool) -> Index:
    """``against`` as an open :class:`Index`: a path is opened for writing when ``update``
    (taking the writer lock for the whole dedup), else read-only. An ``Index`` is returned as is.
    """
    if isinstance(against, Index):
        if update and against.mode != "w":
            raise ValueError(f"index {against.path} is open read-only; update needs mode='w'")
        return against
    return Index.open(against, "w" if update else "r")


def seen_mask(
    index: Index,
    fingerprints: np.ndarray,
    distance: int,
    already_seen: np.ndarray | None = None,
) -> np.ndarray:
    """True for each fingerprint within ``distance`` bits of something in ``index`` (OR-ed with
    ``already_seen``)."""
    if distance > index.distance:
        raise ValueError(
            f"index {index.path} answers distances up to {index.distance} bits but dedup uses "
            f"{distance}; create the index with distance {distance} or more, or dedup with "
            f"distance {index.distance} or less"
        )
    mask = index.dedup_mask(fingerprints, distance)
    if already_seen is not None:
        mask |= np.asarray(already_seen, dtype=bool)
    return mask


def _survivor_ids(index: Index, ids: list[Any], kept: np.ndarray) -> tuple[np.ndarray, list[Any]]:
    """Positions of the kept documents and their ids in the form the index takes: as given
    when all are integers and the index takes integers, else as text."""
    pos = np.flatnonzero(kept)
    sel = [ids[i] for i in pos.tolist()]
    ints = all(isinstance(i, (int, np.integer)) and not isinstance(i, bool) for i in sel)
    if index.id_type == "str" or not ints or (index.id_type is None and not sel):
        sel = [str(i) for i in sel]
    return pos, sel


def _where(scan: Scan | None, i: int) -> tuple[str, int | None]:
    if scan is None:
        return "<input>", i
    return scan.files[int(scan.source[i])].path, int(scan.record[i])


def check_survivors(
    index: Index, ids: list[Any], fingerprints: np.ndarray, kept: np.ndarray, scan: Scan | None
) -> None:
    """Raise :class:`InputError` naming the document when :func:`add_survivors` would fail: an
    id of the wrong kind or already in the index. Runs before any output is written."""
    pos, sel = _survivor_ids(index, ids, kept)
    try:
        present = index.contains(sel)
    except IdError as e:
        if e.position is None:
            raise
        source, line = _where(scan, int(pos[e.position]))
        raise InputError(source, line, f"index {index.path}: {e.reason}") from None
    if present.any():
        k = int(np.flatnonzero(present)[0])
        source, line = _where(scan, int(pos[k]))
        raise InputError(
            source,
            line,
            f"id {sel[k]!r} is already in index {index.path} and this document is not near it; "
            "ids must be unique in the index (choose another --id-field or remove the old one)",
        )


def add_survivors(index: Index, ids: list[Any], fingerprints: np.ndarray, kept: np.ndarray) -> int:
    """Add the kept documents to ``index`` (ids as given when all are integers and the index
    takes integers, else as text); return how many were added."""
    pos, sel = _survivor_ids(index, ids, kept)
    index.add(np.asarray(fingerprints, dtype=np.uint64)[pos], sel)
    return len(sel)

"""Incremental dedup against an index: drop what the index has seen, add the survivors.

Used by :func:`neardup.dedup` (``against=``, ``update=``) and ``neardup dedup --against``.
On Dask the check runs in batch mode, and the stored corpus may also be Parquet files.
"""

from __future__ import annotations

import os
from typing import Any

import numpy as np

from neardup.errors import IdError, InputError
from neardup.index import Index
from neardup.pipeline.scan import Scan


class ParquetCorpus:
    """Stored fingerprints in Parquet files (columns ``fingerprint`` and ``id``), checked in
    batch mode on Dask (:func:`neardup.distributed.query`); read-only."""

    def __init__(self, paths: list[str]) -> None:
        self.paths = paths
        self.path = ", ".join(paths)

    def close(self) -> None:
        """Nothing to release (the workers read the files)."""


def _parquet_paths(against: Any) -> list[str] | None:
    items = against if isinstance(against, (list, tuple)) else [against]
    if not items or not all(isinstance(p, (str, os.PathLike)) for p in items):
        return None
    paths = [os.fspath(p) for p in items]
    if all(p.endswith(".parquet") and not os.path.isdir(p) for p in paths):
        return paths
    return None


def open_index(against: Any, update: bool) -> Index | ParquetCorpus:
    """``against`` as an open :class:`Index`: a path is opened for writing when ``update``
    (taking the writer lock for the whole dedup), else read-only. An ``Index`` is returned as is.
    Paths ending in ``.parquet`` (files or globs) are a :class:`ParquetCorpus`.
    """
    paths = _parquet_paths(against)
    if paths is not None:
        if update:
            raise ValueError(
                f"cannot add to Parquet files ({', '.join(paths)}); update needs an index"
            )
        return ParquetCorpus(paths)
    if isinstance(against, Index):
        if update and against.mode != "w":
            raise ValueError(f"index {against.path} is open read-only; update needs mode='w'")
        return against
    return Index.open(against, "w" if update else "r")


def seen_mask(
    index: Index | ParquetCorpus,
    fingerprints: np.ndarray,
    distance: int,
    already_seen: np.ndarray | None = None,
    client: Any = None,
) -> np.ndarray:
    """True for each fingerprint within ``distance`` bits of something in ``index`` (OR-ed with
    ``already_seen``). With a Dask ``client`` this runs in batch mode: the fingerprints' tables
    are shipped to the workers, which stream the index's segments past them."""
    if isinstance(index, ParquetCorpus):
        if client is None:
            raise ValueError(
                f"a Parquet corpus ({index.path}) is checked in batch mode on Dask: pass a "
                f"client (--scheduler or --workers), or build an index with neardup index add"
            )
        corpus: Any = index.paths
    elif distance > index.distance:
        raise ValueError(
            f"index {index.path} answers distances up to {index.distance} bits but dedup uses "
            f"{distance}; create the index with distance {distance} or more, or dedup with "
            f"distance {index.distance} or less"
        )
    else:
        corpus = index
    if client is None:
        assert isinstance(index, Index)
        mask = index.dedup_mask(fingerprints, distance)
    else:
        from neardup.distributed import query

        m = query(corpus, fingerprints, distance, client=client)
        mask = np.zeros(len(fingerprints), dtype=bool)
        mask[m.query_index] = True
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
    index: Index | ParquetCorpus,
    ids: list[Any],
    fingerprints: np.ndarray,
    kept: np.ndarray,
    scan: Scan | None,
) -> None:
    """Raise :class:`InputError` naming the document when :func:`add_survivors` would fail: an
    id of the wrong kind or already in the index. Runs before any output is written."""
    assert isinstance(index, Index)  # a Parquet corpus is read-only: open_index refuses update
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


def add_survivors(
    index: Index | ParquetCorpus, ids: list[Any], fingerprints: np.ndarray, kept: np.ndarray
) -> int:
    """Add the kept documents to ``index`` (ids as given when all are integers and the index
    takes integers, else as text); return how many were added."""
    assert isinstance(index, Index)
    pos, sel = _survivor_ids(index, ids, kept)
    index.add(np.asarray(fingerprints, dtype=np.uint64)[pos], sel)
    return len(sel)

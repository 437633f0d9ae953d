"""Incremental dedup against an index: drop what the index has seen, add the survivors.

Used by :func:`neardup.dedup` (``against=``, ``update=``) and ``neardup dedup --against``.
An index created for verified dedup (``threshold=``) keeps a MinHash sketch per entry: a new
document is dropped only when the Jaccard estimated from the sketches of an entry reaches the
threshold. Any other index drops documents within a fingerprint distance of an entry. On Dask
the candidates come from batch mode, and the stored corpus may also be Parquet files.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from typing import Any, NamedTuple

import numpy as np

from neardup.core.sketch import Sketches
from neardup.errors import IdError, InputError
from neardup.index import IndexBackend
from neardup.index import open_index as open_backend
from neardup.pipeline.scan import Scan


class ParquetCorpus:
    """Stored fingerprints in Parquet files (columns ``fingerprint`` and ``id``), checked in
    batch mode on Dask (:func:`neardup.distributed.query`); read-only."""

    #: Parquet corpora keep no sketches
    sketch_words = None

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


def open_index(against: Any, update: bool) -> IndexBackend | ParquetCorpus:
    """``against`` as an open :class:`Index`: a path (or ``redis://`` URL) is opened for
    writing when ``update``, else read-only (:func:`neardup.open_index`). An open index is
    returned as is.
    Paths ending in ``.parquet`` (files or globs) are a :class:`ParquetCorpus`. With
    ``update``, the job holds the index's writers off for its whole run (:func:`hold_writes`).
    """
    paths = _parquet_paths(against)
    if paths is not None:
        if update:
            raise ValueError(
                f"cannot add to Parquet files ({', '.join(paths)}); update needs an index"
            )
        return ParquetCorpus(paths)
    if not isinstance(against, (str, os.PathLike)):  # an open index
        if update and against.mode != "w":
            raise ValueError(f"index {against.path} is open read-only; update needs mode='w'")
        return against
    return open_backend(against, "w" if update else "r")


@contextlib.contextmanager
def hold_writes(index: IndexBackend) -> Iterator[None]:
    """No other writer changes ``index`` (open for writing) inside the block, so the ids checked
    by :func:`check_survivors` are still free when :func:`add_survivors` adds them. A local index
    holds its writer lock while it is open for writing; a Redis index takes its writers' lease
    here (renewed while held; raises ``IndexUnavailableError`` if another writer keeps it)."""
    with index.lock():
        yield


class IndexCheck(NamedTuple):
    """What an index says about each of ``n`` documents (arrays of shape (n,)).

    Attributes
    ----------
    found : ndarray of bool
        Documents matched by an entry: dropped.
    id : list
        The entry each was dropped for (its nearest, or best estimated, match); None if none.
    distance : ndarray of int64
        Fingerprint distance to that entry in bits; -1 where none.
    jaccard : ndarray of float64
        Jaccard estimated from the sketches (index with sketches); NaN otherwise.
    how : str
        ``"sketch"``: estimated Jaccard ``>= threshold`` (the index keeps sketches);
        ``"fingerprint"``: fingerprint distance only, not Jaccard-verified.
    path : str
        The index (or Parquet files).
    distance_limit : int
        The candidate distance used (bits).
    """

    found: np.ndarray
    id: list[Any]
    distance: np.ndarray
    jaccard: np.ndarray
    how: str
    path: str
    distance_limit: int

    @property
    def n_found(self) -> int:
        return int(np.count_nonzero(self.found))


def sketch_words(index: Any) -> int | None:
    """Words of the sketches ``index`` keeps per entry, None when it keeps none (Parquet
    corpora and Redis indexes never do)."""
    return index.sketch_words


def _check_distance(index: Any, distance: int) -> None:
    if not isinstance(index, ParquetCorpus) and distance > index.distance:
        raise ValueError(
            f"index {index.path} answers distances up to {index.distance} bits but dedup uses "
            f"{distance}; create the index with distance {distance} or more, or dedup with "
            f"distance {index.distance} or less"
        )


def check_index(
    index: IndexBackend | ParquetCorpus,
    fingerprints: np.ndarray,
    distance: int,
    *,
    sketches: Sketches | None = None,
    threshold: float | None = None,
    client: Any = None,
    threads: int | None = None,
) -> IndexCheck:
    """Check ``n`` new documents against ``index``.

    An index with sketches (:func:`sketch_words`) is asked :meth:`Index.verified_query` with
    ``sketches`` at ``threshold``: a document is found when the Jaccard estimated from the
    sketches of an entry within ``distance`` bits reaches it. Any other index (or Parquet
    corpus) finds the documents whose ``fingerprints`` lie within ``distance`` bits of an entry.
    With a Dask ``client`` the candidates come from batch mode on the cluster
    (:func:`neardup.distributed.query`; Parquet corpora need one), the same ones.
    """
    n = len(fingerprints)
    _check_distance(index, distance)
    words = sketch_words(index)
    if isinstance(index, ParquetCorpus) and client is None:
        raise ValueError(
            f"a Parquet corpus ({index.path}) is checked in batch mode on Dask: pass a "
            f"client (--scheduler or --workers), or build an index with neardup index add"
        )
    query_fps = sketches.fingerprints if words is not None and sketches is not None else None
    if words is not None and (sketches is None or threshold is None):
        raise ValueError(
            f"index {index.path} keeps sketches for verified dedup; checking against it needs "
            "the documents' sketches and a threshold (verified dedup, not --no-verify)"
        )
    candidates = None
    if client is not None:
        from neardup.distributed import query

        corpus: Any = index.paths if isinstance(index, ParquetCorpus) else index
        fps = query_fps if query_fps is not None else fingerprints
        candidates = query(corpus, fps, distance, client=client)
    if words is not None:
        assert sketches is not None and threshold is not None
        m = index.verified_query(
            sketches, threshold, distance, threads=threads, candidates=candidates
        )
    elif candidates is not None:
        m = candidates
    else:
        m = index.nearest(fingerprints, distance, threads=threads)
    # the first match of each query: nearest (fingerprints) or best estimated (sketches)
    found = m.found()
    q = np.flatnonzero(found)
    at = m.offsets[:-1][found]
    ids: list[Any] = [None] * n
    for k, v in zip(q.tolist(), m.ids[at].tolist(), strict=True):
        ids[k] = v
    dist = np.full(n, -1, dtype=np.int64)
    dist[q] = m.distances[at]
    jac = np.full(n, np.nan)
    if m.jaccards is not None:
        jac[q] = m.jaccards[at]
    how = "sketch" if words is not None else "fingerprint"
    return IndexCheck(found, ids, dist, jac, how, index.path, distance)


def _survivor_ids(index: Any, ids: list[Any], kept: np.ndarray) -> tuple[np.ndarray, list[Any]]:
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
    index: IndexBackend | ParquetCorpus,
    ids: list[Any],
    fingerprints: np.ndarray,
    kept: np.ndarray,
    scan: Scan | None,
) -> None:
    """Raise :class:`InputError` naming the document when :func:`add_survivors` would fail: an
    id of the wrong kind or already in the index. Runs before any output is written."""
    # a Parquet corpus is read-only: open_index refuses update
    assert not isinstance(index, ParquetCorpus)
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
    index: IndexBackend | ParquetCorpus,
    ids: list[Any],
    fingerprints: np.ndarray,
    kept: np.ndarray,
    sketches: Sketches | None = None,
) -> int:
    """Add the kept documents to ``index`` (ids as given when all are integers and the index
    takes integers, else as text), with their ``sketches`` in an index that keeps them (whose
    fingerprints are the sketches' first words); return how many were added."""
    assert not isinstance(index, ParquetCorpus)
    pos, sel = _survivor_ids(index, ids, kept)
    if sketch_words(index) is not None:
        assert sketches is not None
        index.add(None, sel, sketches=sketches.take(pos))
    else:
        index.add(np.asarray(fingerprints, dtype=np.uint64)[pos], sel)
    return len(sel)

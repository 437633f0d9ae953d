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
from collections.abc import Callable, Iterable, Iterator
from typing import Any, NamedTuple

import numpy as np

from neardup.core.matches import Matches
from neardup.core.sketch import Sketches
from neardup.errors import IdError, InputError
from neardup.index import IndexBackend
from neardup.index import open_index as open_backend
from neardup.index.parquet import ParquetCorpus
from neardup.io.rows import MEMORY_SOURCE
from neardup.io.writers import OutputSet, RolledBack
from neardup.pipeline.scan import Scan

__all__ = [
    "add_parts",
    "check_distance",
    "check_index",
    "check_survivors",
    "commit_with_update",
    "entry_ids",
    "hold_writes",
    "IndexCheck",
    "open_against",
    "open_index",
    "own_entries",
    "sketch_words",
]


def _parquet_paths(against: Any) -> list[str] | None:
    items = against if isinstance(against, (list, tuple)) else [against]
    if not items or not all(isinstance(p, (str, os.PathLike)) for p in items):
        return None
    paths = [os.fspath(p) for p in items]
    if all(p.endswith(".parquet") and not os.path.isdir(p) for p in paths):
        return paths
    return None


def open_index(against: Any, update: bool) -> IndexBackend:
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
    by :func:`check_survivors` are still free when :func:`add_parts` adds them. A local index
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
    own : ndarray of bool
        Documents the index already holds as themselves (same id, same fingerprint): never
        found, and never added again (:func:`own_entries`).
    """

    found: np.ndarray
    id: list[Any]
    distance: np.ndarray
    jaccard: np.ndarray
    how: str
    path: str
    distance_limit: int
    own: np.ndarray | None = None

    @property
    def n_own(self) -> int:
        return 0 if self.own is None else int(np.count_nonzero(self.own))

    @property
    def n_found(self) -> int:
        return int(np.count_nonzero(self.found))


def sketch_words(index: Any) -> int | None:
    """Words of the sketches ``index`` keeps per entry, None when it keeps none (Parquet
    corpora and Redis indexes never do)."""
    return index.sketch_words


def check_distance(index: Any, distance: int) -> None:
    """Refuse a dedup distance greater than an index answers.

    Parameters
    ----------
    index : IndexBackend
        The index deduplicated against (a Parquet corpus answers any distance).
    distance : int
        The dedup's distance in bits (the fingerprint distance: the sketches' for an index
        with sketches).

    Raises
    ------
    ValueError
        When ``distance`` exceeds the distance in bits the index was created for.
    """
    if distance > index.distance:
        raise ValueError(
            f"index {index.path} answers distances up to {index.distance} bits but dedup uses "
            f"{distance}; create the index with distance {distance} or more, or dedup with "
            f"distance {index.distance} or less"
        )


def own_entries(index: Any, ids: list[Any] | None, stored: np.ndarray) -> np.ndarray:
    """Documents the index already holds as themselves: an entry has the document's id and
    the fingerprint it would store for it (``stored``: the fingerprints, or the sketches'
    first words of an index with sketches). Such a document is not a near-duplicate of
    itself: a rerun of ``--update`` on the same dump keeps it and does not add it again."""
    n = len(stored)
    own = np.zeros(n, dtype=bool)
    if ids is None or n == 0 or index.id_type is None:
        return own
    _, sel = _survivor_ids(index, ids, np.ones(n, dtype=bool))
    try:
        cand = np.flatnonzero(index.contains(sel))
    except IdError:  # ids of the other kind than the index's: none is in it
        return own
    if len(cand) == 0:
        return own
    m = index.search(np.asarray(stored, dtype=np.uint64)[cand], 0)
    qi = m.query_index
    want = np.empty(len(cand), dtype=m.ids.dtype)
    want[:] = [sel[i] for i in cand.tolist()]
    same = m.ids == want[qi]
    own[cand[qi[same]]] = True
    return own


def _spread(m: Matches, ask: np.ndarray, n: int) -> Matches:
    """The matches ``m`` of the queries ``ask`` (ascending positions among ``n``) as matches
    of all ``n`` queries, the others without any."""
    counts = np.zeros(n, dtype=np.int64)
    counts[ask] = m.counts
    offsets = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(counts, out=offsets[1:])
    return Matches(offsets, m.ids, m.distances, m.jaccards)


def entry_ids(index: Any, ids: list[Any], own: np.ndarray) -> np.ndarray:
    """The index's ids of the documents ``own`` (their entries), as the index stores them."""
    _, sel = _survivor_ids(index, ids, own)
    out = np.empty(len(sel), dtype=object if index.id_type == "str" else np.int64)
    out[:] = sel
    return out


def check_index(
    index: IndexBackend,
    fingerprints: np.ndarray,
    distance: int,
    *,
    sketches: Sketches | None = None,
    threshold: float | None = None,
    client: Any = None,
    threads: int | None = None,
    ids: list[Any] | None = None,
    device: str = "cpu",
    set_aside: np.ndarray | None = None,
) -> IndexCheck:
    """Check ``n`` new documents against ``index``.

    An index with sketches (:func:`sketch_words`) is asked :meth:`Index.verified_query` with
    ``sketches`` at ``threshold``: a document is found when the Jaccard estimated from the
    sketches of an entry within ``distance`` bits reaches it. Any other index (or Parquet
    corpus) finds the documents whose ``fingerprints`` lie within ``distance`` bits of an entry.
    With a Dask ``client`` the candidates come from batch mode on the cluster
    (:func:`neardup.distributed.query`, its tasks on each worker's ``device``; Parquet
    corpora need one), the same ones.

    With the documents' ``ids``, a document the index already holds as itself
    (:func:`own_entries`) is never found, and no document is found for such an entry: the
    decisions within the batch settle those, as they did when the entries were added.
    ``set_aside``: the index's ids of every such entry of the run, where the documents are
    checked in parts (a staged run's shards): no document is found for any of them.
    """
    n = len(fingerprints)
    check_distance(index, distance)
    words = sketch_words(index)
    if index.needs_cluster and client is None:
        raise ValueError(
            f"a {index.backend} corpus ({index.path}) is checked in batch mode on Dask: pass "
            f"a client (--scheduler or --workers), or build an index with neardup index add"
        )
    query_fps = sketches.fingerprints if words is not None and sketches is not None else None
    if words is not None and (sketches is None or threshold is None):
        raise ValueError(
            f"index {index.path} keeps sketches for verified dedup; checking against it needs "
            "the documents' sketches and a threshold (verified dedup, not --no-verify)"
        )
    own = own_entries(index, ids, query_fps if query_fps is not None else fingerprints)
    aside = entry_ids(index, ids, own) if own.any() else set_aside
    if set_aside is not None and len(set_aside):
        aside = set_aside
    every = aside is not None and len(aside) > 0
    m = _matches(
        index, fingerprints, distance, sketches, threshold, client, threads, own, every, device
    )
    if every:
        m = m.select(~(own[m.query_index] | np.isin(m.ids, aside)))
    # the first match of each query: nearest (fingerprints) or best estimated (sketches)
    found = m.found()
    q = np.flatnonzero(found)
    at = m.offsets[:-1][found]
    found_ids: list[Any] = [None] * n
    for k, v in zip(q.tolist(), m.ids[at].tolist(), strict=True):
        found_ids[k] = v
    dist = np.full(n, -1, dtype=np.int64)
    dist[q] = m.distances[at]
    jac = np.full(n, np.nan)
    if m.jaccards is not None:
        jac[q] = m.jaccards[at]
    how = "sketch" if words is not None else "fingerprint"
    return IndexCheck(found, found_ids, dist, jac, how, index.path, distance, own)


def _matches(
    index: Any,
    fingerprints: np.ndarray,
    distance: int,
    sketches: Sketches | None,
    threshold: float | None,
    client: Any,
    threads: int | None,
    own: np.ndarray,
    every: bool,
    device: str = "cpu",
) -> Matches:
    """The index's matches of the documents, sorted by query then preference (nearest, or
    best estimated): all of them where some documents are the index's own (whose entries
    are then set aside, ``every``), else only the first of each query where the index can
    say so."""
    words = sketch_words(index)
    query_fps = sketches.fingerprints if words is not None and sketches is not None else None
    if client is not None:
        from neardup.distributed import query

        corpus = index.batch_source()
        fps = query_fps if query_fps is not None else fingerprints
        candidates = query(corpus, fps, distance, client=client, device=device)
        if words is None:
            return candidates
        assert sketches is not None and threshold is not None
        return index.verified_query(
            sketches, threshold, distance, threads=threads, candidates=candidates
        )
    if not every and words is None:
        return index.nearest(fingerprints, distance, threads=threads)
    ask = np.flatnonzero(~own)  # the index's own documents need no search
    if words is not None:
        assert sketches is not None and threshold is not None
        part = sketches.take(ask) if own.any() else sketches
        m = index.verified_query(part, threshold, distance, threads=threads)
    else:  # all matches: those of the index's own entries are set aside afterwards
        m = index.search(np.asarray(fingerprints, dtype=np.uint64)[ask], distance, threads=threads)
    return _spread(m, ask, len(fingerprints))


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
    """The file and record of document ``i`` (in-memory input: its position)."""
    if scan is None:
        return MEMORY_SOURCE, i
    if not scan.files:  # in-memory rows: their records are positions
        return MEMORY_SOURCE, int(scan.record[i])
    return scan.files[int(scan.source[i])].path, int(scan.record[i])


def check_survivors(
    index: IndexBackend,
    ids: list[Any],
    fingerprints: np.ndarray,
    kept: np.ndarray,
    scan: Scan | None,
) -> None:
    """Raise :class:`InputError` naming the document when :func:`add_parts` would fail: an
    id of the wrong kind or already in the index. Runs before any output is written."""
    index.require("add")  # a Parquet corpus is read-only: open_index refuses update
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


def commit_with_update(outputs: OutputSet, index: Any, add: Callable[[], object]) -> None:
    """Commit the run's ``outputs`` and ``add`` the survivors to ``index`` together: the index
    is updated once every output is in place, and if that fails the outputs are put back, so
    both change or neither does. The error (exit status 2) says the state of each: the index
    not updated (a Redis index: perhaps in part), the outputs as they were or those that could
    not be put back, and that the same command finishes the run (``--update`` keeps and does
    not add again the documents the index already holds)."""
    try:
        outputs.commit(then=add)
    except RolledBack as e:
        cause = e.cause
        reason = str(cause)
        if isinstance(cause, OSError) and cause.strerror:
            reason = f"{cause.filename}: {cause.strerror}" if cause.filename else cause.strerror
        partly = " (or only in part)" if index.partial_adds else ""
        fix = "run the same command again"
        if partly or e.left:
            fix += " to finish (a rerun does not add a document the index already holds)"
        raise InputError(
            str(index.path), None, f"index not updated{partly}: {reason}; {e.state}; {fix}"
        ) from None


def open_against(
    stack: contextlib.ExitStack, outputs: OutputSet, against: Any, update: bool, verify: bool
) -> Any:
    """The index (or Parquet corpus) ``against`` names, open for the run: its files protected
    from the outputs, other writers held off while ``update``."""
    index = open_index(against, update)
    if index is not against:
        stack.callback(index.close)
    if index.input_files():  # a Parquet corpus: its files are inputs, never overwritten
        outputs.add_inputs(index.input_files())
    else:
        outputs.protect(index.path)
        if update:  # the ids checked free stay free until the survivors are added
            stack.enter_context(hold_writes(index))
    if sketch_words(index) is not None and not verify:
        raise ValueError(
            f"index {index.path} keeps sketches for verified dedup; its fingerprints are "
            "set fingerprints, which --no-verify does not compute: dedup it verified"
        )
    return index


def add_parts(index: IndexBackend, parts: Iterable[tuple[Any, ...]]) -> int:
    """Add the kept documents of each part of a run (its shards) to ``index`` (ids as given
    when all are integers and the index takes integers, else as text; with their sketches in
    an index that keeps them, whose fingerprints are the sketches' first words), each
    ``(ids, fingerprints, kept, sketches)``, committed as one add where the index can (its
    :meth:`~neardup.index.IndexBackend.session`); returns how many were added."""
    words = sketch_words(index)
    session = index.session() if "session" in index.capabilities else contextlib.nullcontext()
    added = 0
    with session as s:
        target = s if s is not None else index
        for ids, fingerprints, kept, sketches in parts:
            pos, sel = _survivor_ids(index, ids, kept)
            if not sel:
                continue
            if words is not None:
                target.add(None, sel, sketches=sketches.take(pos))
            else:
                target.add(np.asarray(fingerprints, dtype=np.uint64)[pos], sel)
            added += len(sel)
    return added

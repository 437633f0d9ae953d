"""What the service does with an index: reads from a shared view, writes through one writer.

:class:`LocalBackend` serves an index directory. Every worker process memory-maps the committed
segments read-only (the page cache is shared) and, before each request, switches to a newer
commit if there is one (:class:`LocalBackend`), so an acknowledged write is answered by every
worker from the next request on. A write opens the index for writing (its ``flock`` makes the writers of
all workers and of other programs take turns), commits durably (fsync) and closes it before the
response. :class:`RedisBackend` serves an index on Redis: reads are live, writes take the
index's lease in Redis, so any number of replicas can serve one index.
"""

from __future__ import annotations

import contextlib
import os
import threading
import time
from collections.abc import Iterator
from typing import Any, NamedTuple

import numpy as np

from neardup import config
from neardup.core.bits import popcount
from neardup.core.decide import DEFAULT_DEDUP_THRESHOLD
from neardup.core.matches import Matches
from neardup.core.search import find_all
from neardup.core.similarity import check_threshold, distance_for_threshold
from neardup.core.sketch import Sketches, sketch_decide
from neardup.index import Index, IndexLockedError
from neardup.index.backend import check_query_distance
from neardup.index.redis import IndexUnavailableError, RedisIndex, is_redis_url
from neardup.index.storage import MANIFEST
from neardup.server import _kernels

__all__ = [
    "LocalBackend",
    "RedisBackend",
    "DedupOutcome",
    "index_threshold",
    "open_backend",
    "WriterBusyError",
]


class WriterBusyError(IndexUnavailableError):
    """The index's single writer stayed busy longer than ``config.SERVE_WRITE_WAIT_S``."""


class DedupOutcome(NamedTuple):
    """Result of :meth:`Backend.dedup` for ``n`` items (arrays of length ``n`` unless noted)."""

    new: np.ndarray  #: bool: nothing indexed and no earlier new item within distance
    matches: Matches  #: against the index (the item's own id left out)
    by: np.ndarray  #: int64: earlier item of the batch that makes it a duplicate, or -1
    by_distance: np.ndarray  #: int64: bits to that item
    added: int


class _Backend:
    kind = ""

    def reader(self) -> Any:
        raise NotImplementedError

    def writer(self) -> contextlib.AbstractContextManager[Any]:
        raise NotImplementedError

    @property
    def sketch_words(self) -> int | None:
        """Words of the MinHash sketch the index keeps per entry (None: fingerprints only)."""
        return self.reader().sketch_words

    def query(
        self,
        q: np.ndarray,
        distance: int | None,
        sketches: Sketches | None = None,
        threshold: float | None = None,
    ) -> tuple[Any, int]:
        """(matches, generation). With ``sketches`` (texts sent to an index with sketches) the
        matches are verified by the Jaccard estimated from them, at ``threshold`` or by default
        at the index's own (:func:`index_threshold`, within at most the index's distance)."""
        ix = self.reader()
        if sketches is not None and threshold is None:
            threshold = index_threshold(ix)
            if distance is None:
                distance = min(distance_for_threshold(threshold), ix.distance)
        if threshold is not None:
            return ix.verified_query(sketches, threshold, distance), ix.generation
        return ix.search(q, distance), ix.generation

    def add(
        self, q: np.ndarray, ids: np.ndarray, sketches: Sketches | None = None
    ) -> tuple[int, int, int]:
        """(added, already stored, generation). Items whose id is stored with the same
        fingerprint are skipped, so a call retried after a failure gives the same state."""
        with self.writer() as w:
            m = w.search(q, 0)
            own = _own(m, ids)
            fresh = np.ones(len(q), dtype=bool)
            fresh[m.query_index[own]] = False
            n = int(fresh.sum())
            if n:
                _store(w, q, ids, sketches, fresh)
            return n, len(q) - n, w.generation

    def remove(self, ids: np.ndarray, missing: str) -> tuple[int, int]:
        with self.writer() as w:
            return w.remove(ids, missing=missing), w.generation

    def dedup(
        self,
        q: np.ndarray,
        ids: np.ndarray,
        distance: int | None,
        sketches: Sketches | None = None,
        threshold: float | None = None,
    ) -> tuple[DedupOutcome, int]:
        """Which items are new (first survivor: nothing indexed within ``distance`` and no
        earlier new item of the batch within it), and store the new ones, as one write.

        With ``threshold`` (an index with sketches) a match, in the index or in the batch, is
        also verified by the sketches' estimated Jaccard. The batch's own links are found
        before the writer is taken, over its distinct items only, so the work is linear in
        repeated items and the lock is held for the index's part alone."""
        n = len(q)
        reader = self.reader()
        k = reader.distance if distance is None else int(distance)
        if threshold is not None and distance is None:
            k = distance_for_threshold(check_threshold(threshold))
        check_query_distance(k, reader.distance)
        links = batch_links(q, k, sketches, threshold)
        with self.writer() as w:
            if threshold is not None:
                m = w.verified_query(sketches, threshold, k)
            else:
                m = w.search(q, k)
            own = _own(m, ids)
            stored = np.zeros(n, dtype=bool)
            stored[m.query_index[own]] = True
            m = m.select(~own)
            seen = np.zeros(n, dtype=bool)
            seen[m.query_index] = True
            new, by = links.survivors(seen)
            by_d = np.full(n, -1, dtype=np.int64)
            hit = by >= 0
            by_d[hit] = popcount(q[hit] ^ q[by[hit]]).astype(np.int64)
            todo = new & ~stored
            added = int(todo.sum())
            if added:
                _store(w, q, ids, sketches, todo)
            return DedupOutcome(new, m, by, by_d, added), w.generation

    def stats(self) -> dict[str, Any]:
        info = self.reader().info()
        info["backend"] = self.kind
        return info

    def health(self) -> dict[str, Any]:
        ix = self.reader()
        return {"status": "ok", "backend": self.kind, "generation": ix.generation}


def index_threshold(ix: Any) -> float:
    """The Jaccard threshold an index with sketches was created for; for one created before
    neardup recorded it, ``DEFAULT_DEDUP_THRESHOLD`` (0.8, as ``/dedup``)."""
    return DEFAULT_DEDUP_THRESHOLD if ix.threshold is None else float(ix.threshold)


def _store(w: Any, q: np.ndarray, ids: np.ndarray, sketches: Sketches | None, keep: Any) -> None:
    """Add the items ``keep`` (a boolean mask) with their sketches where the index keeps them."""
    if sketches is None:
        w.add(q[keep], ids[keep])
    else:
        w.add(None, ids[keep], sketches=sketches.take(np.flatnonzero(keep)))


def _own(m: Matches, ids: np.ndarray) -> np.ndarray:
    """Matches that are the query's own id (a retried call sees what it stored before)."""
    if m.size == 0:
        return np.zeros(0, dtype=bool)
    mine = ids[m.query_index]
    if mine.dtype.kind != m.ids.dtype.kind and "O" not in (mine.dtype.kind, m.ids.dtype.kind):
        return np.zeros(m.size, dtype=bool)
    return np.asarray(mine == m.ids, dtype=bool)


class BatchLinks(NamedTuple):
    """Which items of a batch match each other, over its groups of identical items.

    ``group[j]`` is item j's group (equal fingerprints, or equal sketches and sizes);
    ``linked`` (CSR ``offsets``/``to``) the other groups within distance (and verified);
    ``self_link[g]`` whether the items of group g match each other (not for empty sets).
    """

    group: np.ndarray
    offsets: np.ndarray
    to: np.ndarray
    self_link: np.ndarray

    def survivors(self, seen: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(new, by): first-survivor dedup given which items match the index (``seen``)."""
        n_groups = len(self.self_link)
        rep = np.full(n_groups, -1, dtype=np.int64)
        free = np.flatnonzero(~seen)
        g, first = np.unique(self.group[free], return_index=True)
        rep[g] = free[first]
        return _kernels.grouped_survivors(
            self.group, rep, self.offsets, self.to, self.self_link, seen
        )


def batch_links(
    q: np.ndarray, k: int, sketches: Sketches | None = None, threshold: float | None = None
) -> BatchLinks:
    """The :class:`BatchLinks` of a batch: pairs searched among its distinct items only."""
    if threshold is None or sketches is None:
        keys, group = np.unique(q, return_inverse=True)
        fps, self_link = keys, np.ones(len(keys), dtype=bool)
        rows = None
    else:
        table = np.column_stack([sketches.words, sketches.sizes.astype(np.uint64)])
        keys, group = np.unique(table, axis=0, return_inverse=True)
        fps, self_link = keys[:, 0].copy(), keys[:, -1] > 0
        rows = Sketches(np.ascontiguousarray(keys[:, :-1]), keys[:, -1].astype(np.uint32))
    group = np.asarray(group, dtype=np.int64).reshape(-1)
    pairs = find_all(fps, k) if len(fps) > 1 else np.empty((0, 2), np.int64)
    if rows is not None and len(pairs):
        ok, _ = sketch_decide(rows, rows, pairs[:, 0], pairs[:, 1], check_threshold(threshold))
        pairs = pairs[ok]
    a = np.concatenate([pairs[:, 0], pairs[:, 1]])
    b = np.concatenate([pairs[:, 1], pairs[:, 0]])
    order = np.argsort(a, kind="stable")
    offsets = np.zeros(len(fps) + 1, dtype=np.int64)
    np.cumsum(np.bincount(a, minlength=len(fps)), out=offsets[1:])
    return BatchLinks(group, offsets, np.ascontiguousarray(b[order], dtype=np.int64), self_link)


class LocalBackend(_Backend):
    """An index directory: shared read-only maps, one writer at a time across processes.

    Before each request a worker compares the inode of the index's ``MANIFEST`` with that of
    the manifest it opened, which it keeps open so that the inode cannot be reused (one
    ``stat``, about a microsecond). A commit renames a new file over ``MANIFEST``, so a
    different inode means a newer commit, which the worker opens before answering: a write
    acknowledged by any worker is seen by the next request on every worker (read-your-writes).
    """

    kind = "local"

    def __init__(self, path: str) -> None:
        self.path = path
        self._manifest = os.path.join(path, MANIFEST)
        try:
            self._held = self._hold()
        except OSError:
            Index.open(path, "r").close()  # raises the index's own one-line error
            raise
        self._reader = Index.open(path, "r")
        self._swap = threading.Lock()
        self._write = threading.Lock()

    def _hold(self) -> tuple[int, int]:
        """(file descriptor, inode) of the current ``MANIFEST``, opened before the index is."""
        fd = os.open(self._manifest, os.O_RDONLY)
        return fd, os.fstat(fd).st_ino

    def reader(self) -> Index:
        if os.stat(self._manifest).st_ino != self._held[1]:
            with self._swap:
                if os.stat(self._manifest).st_ino != self._held[1]:
                    # held before opening: a commit in between only makes the next request
                    # open again. A new object, so queries running on the old snapshot
                    # finish on it.
                    held = self._hold()
                    try:
                        self._reader = Index.open(self.path, "r")
                    except BaseException:
                        os.close(held[0])
                        raise
                    old, self._held = self._held, held
                    os.close(old[0])
        return self._reader

    @contextlib.contextmanager
    def writer(self) -> Iterator[Index]:
        with self._write:
            deadline = time.monotonic() + config.SERVE_WRITE_WAIT_S
            delay = 0.001
            while True:
                try:
                    w = Index.open(self.path, "w")
                    break
                except IndexLockedError as e:
                    if time.monotonic() > deadline:
                        raise WriterBusyError(f"{e}; retry later") from None
                    time.sleep(delay)
                    delay = min(2 * delay, 0.02)
            try:
                yield w
            finally:
                w.close()


class RedisBackend(_Backend):
    """An index on Redis or Redis Cluster, shared by any number of replicas."""

    kind = "redis"

    def __init__(self, url: str) -> None:
        self.ix = RedisIndex.open(url, "w")

    def reader(self) -> RedisIndex:
        return self.ix

    def writer(self) -> contextlib.AbstractContextManager[RedisIndex]:
        return self.ix.lock()

    def stats(self) -> dict[str, Any]:
        self.ix.refresh()
        return super().stats()

    def health(self) -> dict[str, Any]:
        self.ix.refresh()
        return super().health()


def open_backend(location: str) -> LocalBackend | RedisBackend:
    """The backend for an index directory or a ``redis://`` URL."""
    if is_redis_url(location):
        return RedisBackend(location)
    return LocalBackend(location)

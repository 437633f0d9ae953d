"""What the service does with an index: reads from a shared view, writes through one writer.

:class:`LocalBackend` serves an index directory. Every worker process memory-maps the committed
segments read-only (the page cache is shared) and, at most every ``config.SERVE_REFRESH_S``
seconds, rereads the manifest and switches to a newer commit, so any commit is answered by every
worker within that delay. A write opens the index for writing (its ``flock`` makes the writers of
all workers and of other programs take turns), commits durably (fsync) and closes it before the
response. :class:`RedisBackend` serves an index on Redis: reads are live, writes take the
index's lease in Redis, so any number of replicas can serve one index.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Iterator
from typing import Any, NamedTuple

import numpy as np

from neardup import config
from neardup.core.bits import popcount
from neardup.core.search import find_all
from neardup.index import Index, IndexLockedError
from neardup.index.redis import IndexUnavailableError, RedisIndex, is_redis_url
from neardup.index.storage import read_manifest
from neardup.server import _kernels

__all__ = ["LocalBackend", "RedisBackend", "DedupOutcome", "open_backend", "WriterBusyError"]


class WriterBusyError(IndexUnavailableError):
    """The index's single writer stayed busy longer than ``config.SERVE_WRITE_WAIT_S``."""


class DedupOutcome(NamedTuple):
    """Result of :meth:`Backend.dedup` for ``n`` items (arrays of length ``n`` unless noted)."""

    new: np.ndarray  #: bool: nothing indexed and no earlier new item within distance
    matches: Any  #: IndexMatches against the index (the item's own id left out)
    by: np.ndarray  #: int64: earlier item of the batch that makes it a duplicate, or -1
    by_distance: np.ndarray  #: int64: bits to that item
    added: int


class _Backend:
    kind = ""

    def reader(self) -> Any:
        raise NotImplementedError

    def writer(self) -> contextlib.AbstractContextManager[Any]:
        raise NotImplementedError

    def query(self, q: np.ndarray, distance: int | None) -> tuple[Any, int]:
        ix = self.reader()
        return ix.query_arrays(q, distance), ix.generation

    def add(self, q: np.ndarray, ids: np.ndarray) -> tuple[int, int, int]:
        """(added, already stored, generation). Items whose id is stored with the same
        fingerprint are skipped, so a call retried after a failure gives the same state."""
        with self.writer() as w:
            m = w.query_arrays(q, 0)
            own = _own(m, ids)
            fresh = np.ones(len(q), dtype=bool)
            fresh[m.query_index[own]] = False
            n = int(fresh.sum())
            if n:
                w.add(q[fresh], ids[fresh])
            return n, len(q) - n, w.generation

    def remove(self, ids: np.ndarray, missing: str) -> tuple[int, int]:
        with self.writer() as w:
            return w.remove(ids, missing=missing), w.generation

    def dedup(
        self, q: np.ndarray, ids: np.ndarray, distance: int | None
    ) -> tuple[DedupOutcome, int]:
        """Which items are new (first survivor: nothing indexed within ``distance`` and no
        earlier new item of the batch within it), and store the new ones, as one write."""
        n = len(q)
        with self.writer() as w:
            m = w.query_arrays(q, distance)
            own = _own(m, ids)
            stored = np.zeros(n, dtype=bool)
            stored[m.query_index[own]] = True
            m = type(m)(*(a[~own] for a in m))
            seen = np.zeros(n, dtype=bool)
            seen[m.query_index] = True
            k = w.distance if distance is None else int(distance)
            pairs = find_all(q, k) if n > 1 else np.empty((0, 2), np.int64)
            order = np.lexsort((pairs[:, 0], pairs[:, 1]))
            new, by = _kernels._first_survivors(
                np.ascontiguousarray(pairs[order, 0]),
                np.ascontiguousarray(pairs[order, 1]),
                seen,
            )
            by_d = np.full(n, -1, dtype=np.int64)
            hit = by >= 0
            by_d[hit] = popcount(q[hit] ^ q[by[hit]]).astype(np.int64)
            todo = new & ~stored
            added = int(todo.sum())
            if added:
                w.add(q[todo], ids[todo])
            return DedupOutcome(new, m, by, by_d, added), w.generation

    def stats(self) -> dict[str, Any]:
        info = self.reader().info()
        info["backend"] = self.kind
        return info

    def health(self) -> dict[str, Any]:
        ix = self.reader()
        return {"status": "ok", "backend": self.kind, "generation": ix.generation}


def _own(m: Any, ids: np.ndarray) -> np.ndarray:
    """Matches that are the query's own id (a retried call sees what it stored before)."""
    if len(m.id) == 0:
        return np.zeros(0, dtype=bool)
    mine = ids[m.query_index]
    if mine.dtype.kind != np.asarray(m.id).dtype.kind and "O" not in (
        mine.dtype.kind,
        m.id.dtype.kind,
    ):
        return np.zeros(len(m.id), dtype=bool)
    return np.asarray(mine == m.id, dtype=bool)


class LocalBackend(_Backend):
    """An index directory: shared read-only maps, one writer at a time across processes."""

    kind = "local"

    def __init__(self, path: str) -> None:
        self.path = path
        self._gen = read_manifest(path)["generation"]
        self._reader = Index.open(path, "r")
        self._checked = time.monotonic()
        self._swap = threading.Lock()
        self._write = threading.Lock()

    def reader(self) -> Index:
        now = time.monotonic()
        if now - self._checked >= config.SERVE_REFRESH_S:
            with self._swap:
                if now - self._checked >= config.SERVE_REFRESH_S:
                    gen = read_manifest(self.path)["generation"]
                    if gen != self._gen:
                        # a new object, so queries running on the old snapshot finish on it
                        self._reader = Index.open(self.path, "r")
                        self._gen = self._reader.generation
                    self._checked = time.monotonic()
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
                self._checked = -1e9  # this worker answers from its own write at once


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

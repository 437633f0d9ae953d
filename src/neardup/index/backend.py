"""The index backend protocol: what every index (local directory or Redis) does, in one base.

:class:`IndexBackend` lists the operations (search, nearest, contains, add, remove, verified
query, lock, session, info, verify) and which of them a backend can do
(:attr:`IndexBackend.capabilities`). The index logic shared by every backend (the list and mask
forms of a query, the nearest match, the bulk-insert session, the check of a query's distance)
is written here once; a backend implements :meth:`~IndexBackend.search`, the writes and its
bookkeeping. An operation a backend cannot do raises
:class:`~neardup.errors.UnsupportedOperation` naming the capability.

Open any backend with :func:`neardup.open_index` (a directory or a ``redis://`` URL).
"""

from __future__ import annotations

import contextlib
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, NamedTuple, TypeVar

import numpy as np

from neardup.core.bits import as_fingerprints
from neardup.core.matches import Matches
from neardup.core.sketch import Sketches, as_sketches
from neardup.errors import UnsupportedOperation

if TYPE_CHECKING:
    from neardup.core.layout import Layout

__all__ = [
    "CAPABILITIES",
    "IndexBackend",
    "IndexMatches",
    "Session",
    "check_query_distance",
]

#: Every capability a backend may have. ``search`` (all matches, :meth:`IndexBackend.search`,
#: and its list, flat and mask forms), ``nearest``, ``contains``, ``add``, ``remove``,
#: ``compact``, ``lock`` (hold other writers off), ``session`` (batched adds), ``info``,
#: ``verify`` (check the stored data), ``verified`` (Jaccard-verified queries over MinHash
#: sketches kept per entry) and ``parts`` (segment files that batch mode and Dask workers read
#: directly).
CAPABILITIES = frozenset(
    {
        "search",
        "nearest",
        "contains",
        "add",
        "remove",
        "compact",
        "lock",
        "session",
        "info",
        "verify",
        "verified",
        "parts",
    }
)

_B = TypeVar("_B", bound="IndexBackend")


def check_query_distance(
    distance: Any,
    limit: int,
    *,
    name: str = "query distance",
    of: str = "the index's distance",
    fix: str = "create the index with a larger distance",
) -> int:
    """``distance`` (None: ``limit``) as an int in ``[0, limit]`` bits.

    Raises
    ------
    ValueError
        ``"{name} must be an integer between 0 and {of} {limit} (got ...); {fix}"``.
    """
    k = limit if distance is None else distance
    if isinstance(k, bool) or not isinstance(k, (int, np.integer)) or not 0 <= k <= limit:
        raise ValueError(
            f"{name} must be an integer between 0 and {of} {limit} (got {distance!r}); {fix}"
        )
    return int(k)


class IndexMatches(NamedTuple):
    """Deprecated flat form of :class:`neardup.Matches` (what :meth:`IndexBackend.query_arrays`
    returns): one row per match, sorted by query, then distance, then id."""

    query_index: np.ndarray  #: int64, position of the query in the batch
    id: np.ndarray  #: int64 ids, or an object array of str ids
    distance: np.ndarray  #: int64 Hamming distance


class IndexBackend:
    """Base of the index backends (:class:`neardup.index.Index`,
    :class:`neardup.index.redis.RedisIndex`).

    A backend sets ``layout``, ``path`` and ``mode``, lists what it can do in
    :attr:`capabilities`, and implements :meth:`search`, :meth:`contains`, :meth:`add`,
    :meth:`remove`, :meth:`info`, :meth:`refresh`, :meth:`close`, ``__len__`` and the
    properties ``id_type`` and ``generation``; the rest is written here once.
    """

    #: What this backend can do (a subset of :data:`CAPABILITIES`).
    capabilities: frozenset[str] = frozenset()
    #: Short name of the backend in messages and :meth:`info`.
    backend: str = ""
    #: Words of the MinHash sketch kept per entry, None when the index keeps none.
    sketch_words: int | None = None
    #: The Jaccard threshold an index with sketches was created for (None when not recorded).
    threshold: float | None = None
    #: Whether a failed add may have stored part of its entries (no all-or-nothing commit).
    partial_adds: bool = False
    #: Whether it is read only by a cluster's workers in batch mode (no search of its own).
    needs_cluster: bool = False

    layout: Layout
    path: str
    mode: str

    # ------------------------------------------------------------------ capabilities
    def require(self, capability: str) -> None:
        """Raise :class:`~neardup.errors.UnsupportedOperation` unless this backend can do
        ``capability`` (one of :data:`CAPABILITIES`)."""
        if capability not in CAPABILITIES:
            raise ValueError(f"unknown index capability {capability!r}")
        if capability not in self.capabilities:
            raise UnsupportedOperation(self.path, self.backend, capability)

    # ------------------------------------------------------------------ context and layout
    def __enter__(self: _B) -> _B:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @property
    def distance(self) -> int:
        """Largest query distance (bits, inclusive)."""
        return self.layout.distance

    @property
    def blocks(self) -> int:
        return self.layout.blocks

    def _query_distance(self, distance: Any) -> int:
        """A query's distance in bits, at most the index's (the default)."""
        return check_query_distance(distance, self.distance)

    # ------------------------------------------------------------------ what backends implement
    def search(
        self,
        fingerprints: Sequence[int] | np.ndarray,
        distance: int | None = None,
        *,
        threads: int | None = None,
    ) -> Matches:
        """Every indexed id within ``distance`` bits of each query fingerprint.

        Parameters
        ----------
        fingerprints : sequence of int or ndarray
            Query fingerprints (uint64, bit 63 most significant).
        distance : int, optional
            Bits (inclusive), at most the index's distance (the default).
        threads : int, optional
            Threads for large batches (backends that search locally). Default: all usable CPUs.

        Returns
        -------
        Matches
            Per query, its matches sorted by distance (nearest first), then id (integer ids;
            string ids in a fixed but unspecified order, the same on every backend).
        """
        raise UnsupportedOperation(self.path, self.backend, "search")

    def contains(self, ids: Sequence[int] | Sequence[str] | np.ndarray) -> np.ndarray:
        """Batch form of ``id in index``: a bool per id."""
        raise UnsupportedOperation(self.path, self.backend, "contains")

    def add(
        self,
        fingerprints: Sequence[int] | np.ndarray | None,
        ids: Sequence[int] | Sequence[str] | np.ndarray | None = None,
        *,
        sketches: Sketches | tuple[Any, Any] | None = None,
    ) -> None:
        """Add fingerprints with their ids and commit them durably."""
        raise UnsupportedOperation(self.path, self.backend, "add")

    def remove(
        self, ids: Sequence[int] | Sequence[str] | np.ndarray, *, missing: str = "error"
    ) -> int:
        """Remove entries by id and commit; return how many were removed."""
        raise UnsupportedOperation(self.path, self.backend, "remove")

    def compact(self, compress: bool | None = None) -> None:
        """Merge what a backend keeps in pieces (nothing to do on some); ``compress`` converts
        the stored tables where the backend has a choice."""
        raise UnsupportedOperation(self.path, self.backend, "compact")

    def info(self) -> dict[str, Any]:
        """Layout, sizes and generation of the index."""
        raise UnsupportedOperation(self.path, self.backend, "info")

    def verify(self) -> None:
        """Check the stored data; raise ``CorruptIndexError`` naming what is damaged."""
        raise UnsupportedOperation(self.path, self.backend, "verify")

    def verified_query(
        self,
        sketches: Sketches | tuple[Any, Any],
        threshold: float,
        distance: int | None = None,
        *,
        threads: int | None = None,
        candidates: Matches | None = None,
    ) -> Matches:
        """Every entry whose Jaccard estimated from the MinHash sketches reaches ``threshold``
        (backends with the ``verified`` capability)."""
        raise UnsupportedOperation(self.path, self.backend, "verified")

    def lock(self) -> contextlib.AbstractContextManager[Any]:
        """Hold every other writer off inside the block (the index must be open for writing):
        ``with index.lock(): ...`` (re-entrant)."""
        raise UnsupportedOperation(self.path, self.backend, "lock")

    def refresh(self) -> None:
        """Move to the newest committed state."""

    def batch_source(self) -> Any:
        """What batch mode on Dask reads (:func:`neardup.distributed.query`): the index."""
        return self

    def input_files(self) -> list[str]:
        """Files of the index that a run reads as inputs (never written): none, for an index
        that keeps its own storage."""
        return []

    def close(self) -> None:
        """Release what the backend holds."""

    # ------------------------------------------------------------------ written once
    def nearest(
        self,
        fingerprints: Sequence[int] | np.ndarray,
        distance: int | None = None,
        *,
        threads: int | None = None,
    ) -> Matches:
        """For each query with a match within ``distance`` bits, its nearest entry (ties: the
        first in :meth:`search`'s order): at most one match per query."""
        self.require("nearest")
        return self.search(fingerprints, distance, threads=threads).first()

    def query(
        self, fingerprints: Sequence[int] | np.ndarray, distance: int | None = None
    ) -> list[list[tuple[Any, int]]]:
        """For each query fingerprint, the list of ``(id, distance)`` within ``distance`` bits,
        nearest first (:meth:`search` as lists)."""
        return self.search(fingerprints, distance).to_lists()

    def query_arrays(
        self,
        fingerprints: Sequence[int] | np.ndarray,
        distance: int | None = None,
        *,
        threads: int | None = None,
    ) -> IndexMatches:
        """Deprecated flat form of :meth:`search`: ``(query_index, id, distance)`` arrays."""
        m = self.search(fingerprints, distance, threads=threads)
        return IndexMatches(m.query_index, m.ids, m.distances)

    def dedup_mask(
        self, fingerprints: Sequence[int] | np.ndarray, distance: int | None = None
    ) -> np.ndarray:
        """Boolean array, True where a fingerprint is within ``distance`` bits of an indexed one."""
        return self.nearest(fingerprints, distance).found()

    def session(self) -> Session:
        """A bulk-insert session: ``with index.session() as s: s.add(...)`` queues the adds and
        commits them as one :meth:`add` when the block ends without an error (nothing is
        written when it raises)."""
        self.require("session")
        return Session(self)


class Session:
    """Adds queued for one commit (see :meth:`IndexBackend.session`).

    Each :meth:`add` takes the arguments of :meth:`IndexBackend.add`; the fingerprints (and
    sketches) are checked at once, the ids when the session commits. Pass ids to every add of a
    session or to none (automatic ids). A failed commit raises and writes nothing.
    """

    def __init__(self, backend: IndexBackend) -> None:
        self.backend = backend
        self._fps: list[np.ndarray] = []
        self._ids: list[Any] = []
        self._sketches: list[Sketches] = []
        self._committed = False

    def __enter__(self) -> Session:
        return self

    def __exit__(self, exc_type: Any, *exc: object) -> None:
        if exc_type is None:
            self.commit()

    def __len__(self) -> int:
        """Fingerprints queued so far."""
        return sum(map(len, self._fps))

    def add(
        self,
        fingerprints: Sequence[int] | np.ndarray | None,
        ids: Sequence[int] | Sequence[str] | np.ndarray | None = None,
        *,
        sketches: Sketches | tuple[Any, Any] | None = None,
    ) -> None:
        """Queue an add (committed with the others when the session ends)."""
        if self._committed:
            raise ValueError(f"index {self.backend.path}: this session has committed already")
        if self._fps and (ids is None) != (self._ids[0] is None):
            raise ValueError(
                f"index {self.backend.path}: pass ids to every add of a session or to none"
            )
        if self._fps and (sketches is None) != (not self._sketches):
            raise ValueError(
                f"index {self.backend.path}: pass sketches to every add of a session or to none"
            )
        if sketches is not None:
            self.backend.require("verified")
            if self.backend.sketch_words is None:
                raise ValueError(f"index {self.backend.path} keeps no sketches")
            sk = as_sketches(sketches, self.backend.sketch_words)
            self._sketches.append(sk)
            fp = sk.fingerprints if fingerprints is None else fingerprints
        elif fingerprints is None:
            raise ValueError("pass the fingerprints to add")
        else:
            fp = fingerprints
        self._fps.append(as_fingerprints(fp, "fingerprints"))
        self._ids.append(ids)

    def commit(self) -> None:
        """Add everything queued as one commit (what leaving the ``with`` block does)."""
        self._committed = True
        if not self._fps:
            return
        fps = np.concatenate(self._fps)
        ids = None if self._ids[0] is None else _concat_ids(self._ids)
        if self._sketches:
            sk = Sketches(
                np.concatenate([s.words for s in self._sketches]),
                np.concatenate([s.sizes for s in self._sketches]),
            )
            self.backend.add(None, ids, sketches=sk)
        else:
            self.backend.add(fps, ids)


def _concat_ids(parts: list[Any]) -> Any:
    """The ids of a session's adds in one sequence (one array when all are numeric arrays)."""
    if all(isinstance(p, np.ndarray) and p.dtype.kind in "iu" for p in parts):
        return np.concatenate(parts)
    return [v for p in parts for v in (p.tolist() if isinstance(p, np.ndarray) else p)]

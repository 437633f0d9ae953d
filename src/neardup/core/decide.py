"""Dedup decisions from fingerprints alone: clusters, one survivor each, distances to it.

Arrays in, arrays out: fingerprints are uint64 (bit 63 most significant), positions int64.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from neardup.config import DEFAULT_DEDUP_DISTANCE
from neardup.core.bits import as_fingerprints, popcount
from neardup.core.search import find_clusters

__all__ = [
    "DEFAULT_DEDUP_DISTANCE",
    "DEFAULT_DEDUP_THRESHOLD",
    "KEEP_POLICIES",
    "Decisions",
    "decide",
    "from_kept_for",
]

#: Default Jaccard threshold of verified dedup (documents dropped at exact Jaccard >= 0.8).
DEFAULT_DEDUP_THRESHOLD = 0.8
#: How the survivor of a cluster is chosen.
KEEP_POLICIES = ("first", "longest")


@dataclass(frozen=True)
class Decisions:
    """What to do with each of ``n`` documents (all arrays have shape ``(n,)``).

    Attributes
    ----------
    labels : ndarray of int64
        Cluster of each document: the smallest position in its cluster (its own for a singleton).
    survivor : ndarray of int64
        Position of the member its cluster keeps.
    distance : ndarray of int64
        ``popcount(fp ^ fp[survivor])`` in bits. Clusters are connected components, so this may
        exceed the search distance (A~B~C with A and C further apart).
    kept : ndarray of bool
        True for documents to keep: survivors not marked ``already_seen``.
    """

    labels: np.ndarray
    survivor: np.ndarray
    distance: np.ndarray
    kept: np.ndarray

    @property
    def dropped(self) -> np.ndarray:
        """Boolean mask of the documents removed."""
        return ~self.kept

    @property
    def in_cluster(self) -> np.ndarray:
        """Boolean mask of the documents in a cluster of two or more members."""
        if len(self.labels) == 0:
            return np.zeros(0, dtype=bool)
        sizes = np.bincount(self.labels, minlength=len(self.labels))
        return sizes[self.labels] >= 2

    @property
    def n_clusters(self) -> int:
        """Number of clusters with two or more members."""
        if len(self.labels) == 0:
            return 0
        return int(np.count_nonzero(np.bincount(self.labels) >= 2))


def _survivors(labels: np.ndarray, lengths: np.ndarray | None, keep: str) -> np.ndarray:
    n = len(labels)
    if keep == "first" or n == 0:
        return labels.copy()
    # longest: order by cluster, then length descending, then position; take each group's head
    pos = np.arange(n, dtype=np.int64)
    order = np.lexsort((pos, -lengths, labels))
    lab = labels[order]
    head = np.ones(n, dtype=bool)
    head[1:] = lab[1:] != lab[:-1]
    best = np.empty(n, dtype=np.int64)
    best[lab[head]] = order[head]
    return best[labels]


def decide(
    fingerprints: Sequence[int] | np.ndarray,
    lengths: Sequence[int] | np.ndarray | None = None,
    *,
    keep: str = "first",
    distance: int = DEFAULT_DEDUP_DISTANCE,
    blocks: int | None = None,
    threads: int | None = None,
    already_seen: np.ndarray | None = None,
    labels: np.ndarray | None = None,
) -> Decisions:
    """Clusters, survivors and distances for ``n`` fingerprints.

    Parameters
    ----------
    fingerprints : sequence of int or ndarray
        Unsigned 64-bit simhash fingerprints (bit 63 most significant), one per document in
        input order.
    lengths : sequence of int or ndarray, optional
        Document lengths (characters); needed for ``keep="longest"``.
    keep : {"first", "longest"}
        Survivor of a cluster: its first member in input order, or its longest member (ties go
        to the first).
    distance : int, default 6
        Largest Hamming distance (bits, inclusive) that links two documents.
    blocks : int, optional
        Block count of the search layout (default: chosen for ``n``).
    threads : int, optional
        Worker threads for the search.
    already_seen : ndarray of bool, optional
        Documents to drop whatever their cluster (e.g. found in an existing index).
    labels : ndarray of int64, optional
        Clusters already computed (e.g. by :func:`neardup.distributed.find_clusters`): the
        smallest position of each document's cluster. Skips the search.

    Returns
    -------
    Decisions

    Examples
    --------
    >>> d = decide([0b1111, 0b0111, 1 << 40], distance=1)
    >>> d.labels.tolist(), d.kept.tolist(), d.distance.tolist()
    ([0, 0, 2], [True, False, True], [0, 1, 0])
    """
    if keep not in KEEP_POLICIES:
        raise ValueError(f"keep must be one of {list(KEEP_POLICIES)} (got {keep!r})")
    fp = as_fingerprints(fingerprints)
    n = len(fp)
    lens: np.ndarray | None = None
    if keep == "longest":
        if lengths is None:
            raise ValueError("keep='longest' needs the document lengths")
    if lengths is not None:
        lens = np.ascontiguousarray(lengths, dtype=np.int64).ravel()
        if len(lens) != n:
            raise ValueError(f"got {n} fingerprints but {len(lens)} lengths")
    if labels is None:
        labels = find_clusters(fp, distance, blocks, threads=threads)
    else:
        labels = np.ascontiguousarray(labels, dtype=np.int64)
        if labels.shape != (n,):
            raise ValueError(f"got {n} fingerprints but labels of shape {labels.shape}")
    survivor = _survivors(labels, lens, keep)
    dist = popcount(fp ^ fp[survivor]).astype(np.int64) if n else np.zeros(0, np.int64)
    kept = survivor == np.arange(n, dtype=np.int64)
    if already_seen is not None:
        seen = np.asarray(already_seen, dtype=bool).ravel()
        if len(seen) != n:
            raise ValueError(f"already_seen has {len(seen)} entries for {n} documents")
        kept &= ~seen
    return Decisions(labels, survivor, dist, kept)


def from_kept_for(
    kept_for: np.ndarray,
    fingerprints: Sequence[int] | np.ndarray,
    already_seen: np.ndarray | None = None,
) -> Decisions:
    """:class:`Decisions` from verified ones: a cluster is a kept document and the documents
    dropped for it (``kept_for[i]``, -1 when ``i`` is kept), labelled by its smallest position.

    Examples
    --------
    >>> d = from_kept_for(np.array([-1, 2, -1, 2]), [0, 1, 3, 7])
    >>> d.labels.tolist(), d.survivor.tolist(), d.distance.tolist(), d.kept.tolist()
    ([0, 1, 1, 1], [0, 2, 2, 2], [0, 1, 0, 1], [True, False, True, False])
    """
    fp = as_fingerprints(fingerprints)
    kf = np.ascontiguousarray(kept_for, dtype=np.int64)
    n = len(kf)
    pos = np.arange(n, dtype=np.int64)
    survivor = np.where(kf < 0, pos, kf)
    first = pos.copy()
    np.minimum.at(first, survivor, pos)
    labels = first[survivor]
    dist = popcount(fp ^ fp[survivor]).astype(np.int64) if n else np.zeros(0, np.int64)
    kept = kf < 0
    if already_seen is not None:
        seen = np.asarray(already_seen, dtype=bool).ravel()
        if len(seen) != n:
            raise ValueError(f"already_seen has {len(seen)} entries for {n} documents")
        kept &= ~seen
    return Decisions(labels, survivor, dist, kept)

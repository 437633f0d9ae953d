"""Dedup decisions from fingerprints alone: clusters, one survivor each, distances to it.

Arrays in, arrays out: fingerprints are uint64 (bit 63 most significant), positions int64.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from neardup.config import DEFAULT_DEDUP_DISTANCE
from neardup.core.bits import as_fingerprints, popcount
from neardup.core.search import find_clusters

__all__ = [
    "DEFAULT_DEDUP_DISTANCE",
    "DEFAULT_DEDUP_THRESHOLD",
    "KEEP_POLICIES",
    "Decisions",
    "cluster_survivors",
    "decide",
    "from_kept_for",
    "keep_field",
    "keep_key",
]

#: Default Jaccard threshold of verified dedup (documents dropped at exact Jaccard >= 0.8).
DEFAULT_DEDUP_THRESHOLD = 0.8
#: How the survivor of a cluster is chosen (and ``"max:FIELD"`` / ``"min:FIELD"``: the
#: highest / lowest value of a field of the records, :func:`keep_field`).
KEEP_POLICIES = ("first", "longest")


def keep_field(keep: str) -> str | None:
    """The field of a keep order ``"max:FIELD"`` or ``"min:FIELD"`` (None for ``"first"`` and
    ``"longest"``); anything else is a ValueError in one line.

    Examples
    --------
    >>> keep_field("max:score"), keep_field("longest")
    ('score', None)
    """
    if isinstance(keep, str):
        if keep in KEEP_POLICIES:
            return None
        how, _, name = keep.partition(":")
        if how in ("max", "min") and name:
            return name
    raise ValueError(f"keep must be first, longest, max:FIELD or min:FIELD (got {keep!r})")


def keep_key(keep: str, values: Sequence[Any] | np.ndarray | None, n: int) -> np.ndarray | None:
    """The sort key of a keep order over ``n`` documents: kept first is the smallest key, ties
    to the earlier document; None for ``"first"`` (input order).

    ``values`` are the documents' characters for ``"longest"`` (the key is their negation) or
    their field's values for ``"max:FIELD"`` (negated) and ``"min:FIELD"`` (as they are), as
    float64 (numbers, or instants as :func:`neardup.io.readers.priority_value` reads dates).
    """
    name = keep_field(keep)
    if keep == "first":
        return None
    what = "the document lengths" if name is None else f"the values of field {name!r}"
    if values is None:
        raise ValueError(f"keep={keep!r} needs {what}")
    v = np.ascontiguousarray(values, dtype=np.int64 if name is None else np.float64).ravel()
    if v.shape[0] != n:
        raise ValueError(f"got {n} documents but {v.shape[0]} of {what}")
    return v if keep.startswith("min:") else -v


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


def cluster_survivors(labels: np.ndarray, key: np.ndarray | None) -> np.ndarray:
    """The member each cluster keeps, for each of ``n`` documents (int64[n]): the smallest
    ``key`` (:func:`keep_key`; None: the first), ties to the earliest. ``labels`` (int64[n])
    name each document's cluster by a position in ``0..n-1`` (its root or first member)."""
    n = len(labels)
    if key is None or n == 0:
        return labels.copy()
    # order by cluster, then key, then position; take each group's head
    pos = np.arange(n, dtype=np.int64)
    order = np.lexsort((pos, key, labels))
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
        Document lengths (characters), needed for ``keep="longest"``; for ``"max:FIELD"`` and
        ``"min:FIELD"`` the field's values (float64).
    keep : {"first", "longest", "max:FIELD", "min:FIELD"}
        Survivor of a cluster: its first member in input order, its longest member, or the
        member with the highest (lowest) value of a field (ties go to the first).
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
    keep_field(keep)
    fp = as_fingerprints(fingerprints)
    n = len(fp)
    key = keep_key(keep, lengths, n)
    if labels is None:
        labels = find_clusters(fp, distance, blocks, threads=threads)
    else:
        labels = np.ascontiguousarray(labels, dtype=np.int64)
        if labels.shape != (n,):
            raise ValueError(f"got {n} fingerprints but labels of shape {labels.shape}")
    survivor = cluster_survivors(labels, key)
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

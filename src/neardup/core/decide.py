"""Dedup decisions from fingerprints alone (``--no-verify``): who is kept, and for whom each
other document is dropped.

The rule is the keep-order rule of verified dedup (:func:`neardup.core.verify.decide_verified`)
with fingerprint distance in place of Jaccard: documents in keep order, each dropped for the
first already kept document within the distance, else kept (:func:`keep_order`, its pass a
numba kernel in :mod:`neardup.core.decide_kernels`). Never through a chain: a document near
only a dropped document is kept.

Arrays in, arrays out: fingerprints are uint64 (bit 63 most significant), positions int64.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from neardup.config import DEFAULT_DEDUP_DISTANCE
from neardup.core import decide_kernels as DK
from neardup.core.bits import as_fingerprints, popcount
from neardup.core.layout import Layout
from neardup.core.order import lexorder
from neardup.core.search import find_all

__all__ = [
    "DEFAULT_DEDUP_DISTANCE",
    "DEFAULT_DEDUP_THRESHOLD",
    "KEEP_POLICIES",
    "Decisions",
    "decide",
    "from_kept_for",
    "keep_field",
    "keep_key",
    "keep_order",
    "priority_order",
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
        Cluster of each document. A cluster is a kept document and the documents dropped for
        it, labelled by the smallest position among them (a singleton: its own position).
    survivor : ndarray of int64
        Position of the kept document a document was dropped for (its own when kept).
    distance : ndarray of int64
        ``popcount(fp ^ fp[survivor])`` in bits. Decided by fingerprints (:func:`decide`) it is
        at most the search distance, since a drop is never chained through another document.
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


def priority_order(
    n: int, keep: str = "first", lengths: Sequence[int] | np.ndarray | None = None
) -> np.ndarray:
    """Document positions in keep-priority order (int64[n]).

    ``"first"``: input order. ``"longest"``: most characters first (``lengths``: the
    characters). ``"max:FIELD"`` / ``"min:FIELD"``: the highest / lowest value of the field
    first (``lengths``: the values, :func:`neardup.core.decide.keep_key`). Ties go to the
    earlier document.
    """
    key = keep_key(keep, lengths, n)
    pos = np.arange(n, dtype=np.int64)
    if key is None:
        return pos
    return lexorder((pos, key)).astype(np.int64)


def _class_leaders(fp: np.ndarray, rank: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The distinct fingerprints ``u``, each document's value (index into ``u``) and each
    value's first rank in keep order (its class leader)."""
    u, value = np.unique(fp, return_inverse=True)
    value = value.astype(np.int64).reshape(-1)
    first = np.full(len(u), len(fp), dtype=np.int64)
    np.minimum.at(first, value, rank)
    return u, value, first


def _value_pairs(
    u: np.ndarray,
    value: np.ndarray,
    pairs: np.ndarray | None,
    distance: int,
    blocks: int | None,
    threads: int | None,
) -> np.ndarray:
    """Pairs of distinct values (indices into ``u``) within ``distance``: searched among ``u``,
    or taken from document ``pairs`` (those further apart, or of one value, left out)."""
    if pairs is None:
        return find_all(u, distance, blocks, threads=threads)
    Layout(distance + 1, distance)  # validates distance with a clear message
    p = np.asarray(pairs, dtype=np.int64).reshape(-1, 2)
    if len(p) and (p.min() < 0 or p.max() >= len(value)):
        raise ValueError(f"pairs name positions outside 0..{len(value) - 1}")
    vp = value[p]
    near = popcount(u[vp[:, 0]] ^ u[vp[:, 1]]) <= distance
    return vp[near & (vp[:, 0] != vp[:, 1])]


def keep_order(
    fingerprints: np.ndarray,
    order: np.ndarray,
    distance: int,
    *,
    pairs: np.ndarray | None = None,
    blocks: int | None = None,
    threads: int | None = None,
) -> np.ndarray:
    """The keep-order rule over fingerprints: for each document, the kept document it is
    dropped for, or -1 when it is kept (int64[n]).

    Documents are visited in ``order`` (positions, keep order first). One is dropped when an
    already kept document lies within ``distance`` bits of it, and then for the first such
    kept document in ``order``; otherwise it is kept. So every dropped document is within
    ``distance`` bits of a kept one, never dropped through a chain of dropped ones.

    Parameters
    ----------
    fingerprints : ndarray of uint64
        One per document (bit 63 most significant).
    order : ndarray of int64
        Every position once, keep order (see :func:`priority_order`).
    distance : int
        Largest Hamming distance (bits, inclusive) at which a kept document drops another.
    pairs : ndarray of int64, shape (p, 2), optional
        Candidate pairs found elsewhere (on Dask, a GPU, a staged run's search). They must
        link every two distinct values within ``distance`` through one pair of documents
        holding them; pairs of one value or further apart are ignored. The result then equals
        the searched one.
    blocks, threads : int, optional
        Layout and worker threads of the search (without ``pairs``).

    Returns
    -------
    ndarray of int64

    Examples
    --------
    >>> fp = np.array([0b000, 0b001, 0b011], dtype=np.uint64)  # 0~1~2, 0 and 2 two bits apart
    >>> keep_order(fp, np.arange(3), 1).tolist()
    [-1, 0, -1]
    """
    fp = as_fingerprints(fingerprints)
    n = len(fp)
    order = np.ascontiguousarray(order, dtype=np.int64)
    rank = np.empty(n, dtype=np.int64)
    rank[order] = np.arange(n, dtype=np.int64)
    u, value, first = _class_leaders(fp, rank)
    vp = _value_pairs(u, value, pairs, distance, blocks, threads)
    a = np.ascontiguousarray(first[vp[:, 0]])
    b = np.ascontiguousarray(first[vp[:, 1]])
    adj_off, adj = DK.earlier_adjacency(a, b, n)
    lead = np.ascontiguousarray(first[value[order]])
    by_rank = np.empty(n, dtype=np.int64)
    DK.keep_order(lead, adj_off, adj, by_rank)
    kept_for = np.full(n, -1, dtype=np.int64)
    dropped = by_rank >= 0
    kept_for[order[dropped]] = order[by_rank[dropped]]
    return kept_for


def decide(
    fingerprints: Sequence[int] | np.ndarray,
    lengths: Sequence[int] | np.ndarray | None = None,
    *,
    keep: str = "first",
    distance: int = DEFAULT_DEDUP_DISTANCE,
    blocks: int | None = None,
    threads: int | None = None,
    already_seen: np.ndarray | None = None,
    pairs: np.ndarray | None = None,
) -> Decisions:
    """Keep or drop each of ``n`` documents by its fingerprint alone (``--no-verify``).

    The rule (:func:`keep_order`): documents in keep order; one is dropped when an already
    kept document is within ``distance`` bits of it, and then for the first such kept
    document in keep order; otherwise it is kept. A drop is never chained through a dropped
    document, so every dropped document is within ``distance`` bits of its survivor.

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
        Largest Hamming distance (bits, inclusive) at which a kept document drops another.
    blocks : int, optional
        Block count of the search layout (default: chosen for ``n``).
    threads : int, optional
        Worker threads for the search.
    already_seen : ndarray of bool, optional
        Documents to drop whatever the rule says (e.g. found in an existing index); they
        still take part in the rule.
    pairs : ndarray of int64, shape (p, 2), optional
        Candidate pairs found elsewhere (e.g. on Dask); see :func:`keep_order`. Skips the
        search.

    Returns
    -------
    Decisions
        ``survivor`` the kept document a dropped one was dropped for, ``labels`` the
        smallest position among a kept document and those dropped for it.

    Examples
    --------
    >>> d = decide([0b1111, 0b0111, 0b0011, 1 << 40], distance=1)
    >>> d.labels.tolist(), d.kept.tolist(), d.distance.tolist()
    ([0, 0, 2, 3], [True, False, True, True], [0, 1, 0, 0])
    """
    keep_field(keep)
    fp = as_fingerprints(fingerprints)
    n = len(fp)
    if lengths is not None and len(np.ravel(lengths)) != n:
        raise ValueError(f"got {n} fingerprints but {len(np.ravel(lengths))} lengths")
    order = priority_order(n, keep, lengths)
    kept_for = keep_order(fp, order, distance, pairs=pairs, blocks=blocks, threads=threads)
    return from_kept_for(kept_for, fp, already_seen)


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

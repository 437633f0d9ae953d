"""Verified near-duplicates: exact Jaccard of shingle sets behind every pair and every drop.

Shingle sets are CSR arrays of sorted unique uint32 keys (see :mod:`neardup.core.similarity`);
fingerprints are uint64, bit 63 the most significant. A document without shingles has Jaccard 0
with everything, so it is never similar to anything and never dropped as a near-duplicate.

Candidates are pairs whose fingerprints differ in at most ``distance`` bits. By default the
fingerprint is :func:`set_fingerprints`: the simhash of the key set itself, every key weighing 1,
which tracks the Jaccard of the sets more closely than a fingerprint weighted by occurrence counts.

Decision rule (:func:`decide_verified`), deterministic for any thread count:

1. Documents are ranked by priority: input order (``keep="first"``), most characters first
   (``keep="longest"``) or the highest (lowest) value of a field first (``keep="max:FIELD"``,
   ``"min:FIELD"``), ties to the earlier.
2. Documents with identical non-empty key sets form a class represented by its first member in
   priority order; the class is decided once and every other member follows its representative:
   dropped for it (Jaccard 1) when it is kept, else dropped for the document it was dropped for
   (with the same Jaccard, since the sets are equal).
3. Representatives are visited in priority order. One is dropped for the first already kept
   representative (in priority order) that is a candidate for it and has Jaccard
   ``>= threshold``; otherwise it is kept.

So every dropped document is verified ``>= threshold`` against the kept document named for it,
never through a chain, and no two kept documents that are candidates of each other reach the
threshold. Only kept documents are ever checked, and in dense regions (families of near-identical
documents) the search itself only pairs a document with kept ones: such a family costs about one
check per member, not one per candidate pair.
"""

from __future__ import annotations

import warnings
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

import numpy as np

from neardup.core import verify_kernels as VK
from neardup.core.bands import band_scheme, band_sets
from neardup.core.bits import as_fingerprints, popcount
from neardup.core.decide import KEEP_POLICIES, priority_order
from neardup.core.layout import Layout
from neardup.core.order import lexorder
from neardup.core.prefix import prefix_keep, prefix_sets, rank_counts
from neardup.core.search import PermutedTables, find_all, resolve_layout
from neardup.core.similarity import (
    DEFAULT_THRESHOLD,
    ShingleSets,
    SimilarPairs,
    as_pairs,
    as_shingle_sets,
    check_threshold,
    coerce,
    distance_for_threshold,
    gather_sets,
    identical_classes,
    page_out,
    pair_jaccard,
    resolve_threads,
    set_fingerprints,
    similar_pairs,
    subset_sets,
)

__all__ = [
    "DEFAULT_THRESHOLD",
    "DENSITY_SAMPLE",
    "KEEP_POLICIES",
    "LEAF_DOCS",
    "NO_SHINGLES_WARN_FRACTION",
    "PAIRS_PER_DOC",
    "PROBE_BATCH",
    "ShingleSets",
    "SimilarPairs",
    "VerifiedDecisions",
    "as_shingle_sets",
    "decide_verified",
    "distance_for_threshold",
    "pair_jaccard",
    "priority_order",
    "set_fingerprints",
    "similar_pairs",
]

#: Warn when more than this fraction of the documents has no shingles.
NO_SHINGLES_WARN_FRACTION = 0.01
#: The keep/drop pass pairs all documents of a block by one search when the block holds at most
#: LEAF_DOCS documents or about PAIRS_PER_DOC candidate pairs per document or fewer (estimated
#: from an evenly spaced sample of DENSITY_SAMPLE documents; a family with many more pairs shows
#: in the sample in proportion to its square). A denser block is halved, and the later half is
#: searched against the kept documents of the earlier one only.
LEAF_DOCS = 1024
PAIRS_PER_DOC = 64
DENSITY_SAMPLE = 512
#: Documents probed at once against the kept documents (bounds the memory of one probe).
PROBE_BATCH = 1024


@dataclass(frozen=True)
class VerifiedDecisions:
    """What to do with each of ``n`` documents, and why (all arrays have shape ``(n,)``).

    Attributes
    ----------
    kept : ndarray of bool
        True for documents kept.
    kept_for : ndarray of int64
        For a dropped document, the kept document it was verified against; -1 when kept.
    jaccard : ndarray of float64
        Exact Jaccard with ``kept_for`` (``>= threshold``); NaN when kept.
    distance : ndarray of int64
        Fingerprint distance ``popcount(fp ^ fp[kept_for])`` in bits; -1 when kept. With
        fingerprints other than :func:`set_fingerprints`, a document whose set equals its class
        representative's may lie further than the search distance.
    no_shingles : ndarray of bool
        Documents without shingles; always kept.
    checks : int
        Set intersections computed (the verification work).
    candidates : int
        Candidate pairs examined: pairs inside blocks of at most :data:`LEAF_DOCS` documents (or
        the given pairs) plus (document, earlier kept document) pairs found by probing.
    near_for : ndarray of int64, optional
        With ``near_misses=True`` (else None): for a kept document, the kept document before it
        in priority order, among its candidates, with the highest Jaccard (all are under the
        threshold; ties to the earliest); -1 for a dropped document or one without candidates.
    near_jaccard : ndarray of float64, optional
        The exact Jaccard with ``near_for``; NaN where ``near_for`` is -1.
    family : (int, int) or None
        With prefix candidates: the most documents whose prefixes share one key, and the first
        of them (:func:`neardup.core.prefix.largest_family`); None otherwise.
    """

    kept: np.ndarray
    kept_for: np.ndarray
    jaccard: np.ndarray
    distance: np.ndarray
    no_shingles: np.ndarray
    checks: int = 0
    candidates: int = 0
    near_for: np.ndarray | None = None
    near_jaccard: np.ndarray | None = None
    family: tuple[int, int] | None = None

    @property
    def dropped(self) -> np.ndarray:
        """Boolean mask of the documents removed."""
        return ~self.kept

    @property
    def n_no_shingles(self) -> int:
        """Number of documents without shingles."""
        return int(np.count_nonzero(self.no_shingles))


def _earlier_adjacency(m: int, local: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """For positions ``0..m-1``, the earlier positions paired with each, ascending (CSR)."""
    lo = np.minimum(local[:, 0], local[:, 1])
    hi = np.maximum(local[:, 0], local[:, 1])
    order = lexorder((lo, hi))
    adj = np.ascontiguousarray(lo[order])
    adj_off = np.zeros(m + 1, dtype=np.int64)
    np.cumsum(np.bincount(hi, minlength=m), out=adj_off[1:])
    return adj_off, adj


class _Greedy:
    """The keep/drop pass over class representatives in priority order.

    A block with few candidate pairs (see :data:`PAIRS_PER_DOC`) is decided from all its pairs,
    found by one search. A dense one is divided, so that its documents are only ever paired with
    kept ones: decide the first half, probe the second half against the first half's kept
    documents (each document is dropped for its first match), then decide what is left of the
    second half. Decisions do not depend on where blocks are cut.
    """

    def __init__(self, sets, fp, t, distance, blocks, threads, kept_for, inter, union, near):
        self.sets, self.fp, self.t = sets, fp, t
        self.distance, self.blocks, self.threads = distance, blocks, threads
        self.kept_for, self.inter, self.union = kept_for, inter, union
        self.near = near  # (near_for, its intersections, its unions); empty arrays: not kept
        self.checks = 0
        self.candidates = 0
        self.family: tuple[int, int] | None = None  # prefix candidates: the largest family

    def run_pairs(self, docs: np.ndarray, local: np.ndarray) -> None:
        adj_off, adj = _earlier_adjacency(len(docs), local)
        self.candidates += len(adj)
        paired = np.zeros(len(self.kept_for), dtype=np.bool_)
        paired[docs[local.ravel()]] = True
        o = gather_sets(self.sets, paired, self.threads)
        self.checks += VK.greedy_keep(
            o.offsets, o.keys, docs, adj_off, adj, self.t,
            self.kept_for, self.inter, self.union, 0, len(docs), *self.near,
        )  # fmt: skip

    def solve(self, docs: np.ndarray) -> None:
        if len(docs) == 0:
            return
        if len(docs) <= LEAF_DOCS or self.sparse(docs):
            found = find_all(self.fp[docs], self.distance, self.blocks, threads=self.threads)
            self.run_pairs(docs, found)
            return
        half = len(docs) // 2
        first, second = docs[:half], docs[half:]
        self.solve(first)
        kept = first[self.kept_for[first] == -1]
        if len(kept):
            self.probe(kept, second)
        self.solve(second[self.kept_for[second] == -2])

    def sparse(self, docs: np.ndarray) -> bool:
        """Whether all candidate pairs of ``docs`` fit in ``PAIRS_PER_DOC`` per document,
        estimated from an evenly spaced sample of ``DENSITY_SAMPLE`` of them."""
        n = len(docs)
        sample = docs[:: max(1, n // DENSITY_SAMPLE)]
        m = len(sample)
        found = len(find_all(self.fp[sample], self.distance, self.blocks, threads=1))
        return found * n * (n - 1) <= PAIRS_PER_DOC * n * m * (m - 1)

    def probe(self, kept: np.ndarray, queries: np.ndarray) -> None:
        """Drop each query for its first kept document (in priority order) that reaches the
        threshold among those within the distance. Queries go in batches (bounded memory),
        batches on several threads when there are many."""
        layout = resolve_layout(len(kept), self.distance, self.blocks)
        tables = PermutedTables(self.fp[kept], layout)
        o = self.sets

        def batch(lo: int) -> tuple[int, int]:
            q = queries[lo : lo + PROBE_BATCH]
            r = tables.probe(self.fp[q])
            r_qi = r.query_index
            order = lexorder((r.ids, r_qi))
            qi = r_qi[order]
            cands = np.ascontiguousarray(kept[r.ids[order]])
            uq, starts = np.unique(qi, return_index=True)
            qdocs = np.ascontiguousarray(q[uq])
            cand_off = np.append(starts, len(qi)).astype(np.int64)
            checks = VK.first_match(
                o.offsets, o.keys, qdocs, cand_off, cands, self.t,
                self.kept_for, self.inter, self.union, 0, len(qdocs), *self.near,
            )  # fmt: skip
            page_out(o.keys)
            return checks, len(qi)

        starts = range(0, len(queries), PROBE_BATCH)
        if self.threads > 1 and len(starts) > 1:
            with ThreadPoolExecutor(min(self.threads, len(starts))) as pool:
                done = list(pool.map(batch, starts))
        else:
            done = [batch(lo) for lo in starts]
        self.checks += sum(c for c, _ in done)
        self.candidates += sum(p for _, p in done)


def _without(rep: np.ndarray, rank: np.ndarray, exclude: np.ndarray) -> np.ndarray:
    """Classes ``rep`` without the ``exclude``-d documents (their class -1): a class whose
    representative is excluded is led by its first remaining member in priority ``rank``."""
    if exclude.shape != rep.shape:
        raise ValueError(f"exclude has {exclude.shape[0]} entries for {rep.shape[0]} documents")
    rep = rep.copy()
    rep[exclude] = -1
    orphans = np.flatnonzero((rep >= 0) & exclude[np.maximum(rep, 0)])
    if len(orphans):
        order = orphans[lexorder((rank[orphans], rep[orphans]))]
        head = np.ones(len(order), dtype=bool)
        head[1:] = rep[order[1:]] != rep[order[:-1]]
        leader = order[head][np.cumsum(head) - 1]
        rep[order] = leader
    return rep


def _local_pairs(pairs: Any, is_rep: np.ndarray, docs: np.ndarray) -> np.ndarray:
    """Candidate pairs between distinct representatives, as positions in ``docs`` (each pair
    once, the smaller position first)."""
    n = len(is_rep)
    p = as_pairs(pairs, n)
    p = p[is_rep[p[:, 0]] & is_rep[p[:, 1]] & (p[:, 0] != p[:, 1])]
    at = np.full(n, -1, dtype=np.int64)
    at[docs] = np.arange(len(docs), dtype=np.int64)
    return np.unique(np.sort(at[p], axis=1), axis=0).reshape(-1, 2)


def _warn_no_shingles(empty: np.ndarray) -> None:
    n, n_empty = len(empty), int(np.count_nonzero(empty))
    if n and n_empty > NO_SHINGLES_WARN_FRACTION * n:
        warnings.warn(
            f"{n_empty} of {n} documents have no shingles (empty or no words); they are kept "
            "and never counted as near-duplicates",
            UserWarning,
            stacklevel=3,
        )


def _follow_representatives(
    rep: np.ndarray,
    is_rep: np.ndarray,
    sizes: np.ndarray,
    kept_for: np.ndarray,
    inter: np.ndarray,
    union: np.ndarray,
) -> None:
    """Every other member of a class of identical sets follows its representative: dropped
    for the representative when that is kept, else for what it was dropped for (in place)."""
    f = np.flatnonzero((rep >= 0) & ~is_rep)
    r = rep[f]
    kf = kept_for[r]
    follows_rep = kf < 0
    kept_for[f] = np.where(follows_rep, r, kf)
    inter[f] = np.where(follows_rep, sizes[f], inter[r])
    union[f] = np.where(follows_rep, sizes[f], union[r])


def _nearest_misses(near: tuple, kept: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(near_for, near_jaccard) of the kept documents from the kernels' record of every
    document's best failed check (a dropped document's is dropped)."""
    near_for, near_inter, near_union = near
    near_for[~kept] = -1
    has = near_for >= 0
    jac = np.full(len(kept), np.nan)
    jac[has] = near_inter[has] / near_union[has]
    return near_for, jac


def _keep_or_drop(
    greedy: _Greedy,
    candidates: str,
    docs: np.ndarray,
    is_rep: np.ndarray,
    pairs: Any,
    counts: np.ndarray | None = None,
    scheme: tuple[int | None, int | None] = (None, None),
) -> None:
    """The keep/drop pass over the representatives ``docs`` (in priority order), with the
    candidates of ``candidates``: prefix filtering (in the key order of ``counts``, else of
    these sets), MinHash bands (``scheme``: bands, rows, as given to
    :func:`~neardup.core.bands.band_scheme`), the given ``pairs`` or the search."""
    g, sets, t = greedy, greedy.sets, greedy.t
    if candidates in ("prefix", "bands"):
        if candidates == "bands":
            pre = band_sets(sets, *band_scheme(t, *scheme), g.threads, take=is_rep)
        else:
            if counts is None:
                counts = rank_counts(sets.keys, g.threads)
            pre = prefix_sets(sets, t, counts, g.threads, take=is_rep)
        g.checks, g.candidates, g.family = prefix_keep(
            sets, docs, pre, t, (g.kept_for, g.inter, g.union), g.near, g.threads,
            positional=candidates == "prefix",
        )  # fmt: skip
    elif candidates != "fingerprint":
        raise ValueError(
            f"candidates must be 'prefix', 'bands' or 'fingerprint', not {candidates!r}"
        )
    elif pairs is None:
        Layout(greedy.distance + 1, greedy.distance)  # validates distance with a clear message
        greedy.solve(docs)
    else:
        greedy.run_pairs(docs, _local_pairs(pairs, is_rep, docs))


def _fingerprints(fingerprints: Any, sets: ShingleSets, search: bool,
                  threads: int) -> np.ndarray | None:  # fmt: skip
    """The ``fingerprints`` given (one a set), else the sets' own where the fingerprint
    ``search`` needs them, else None (only the drops' distances read some)."""
    if fingerprints is None:
        return set_fingerprints(sets, threads=threads) if search else None
    fp = as_fingerprints(fingerprints)
    if fp.shape[0] != len(sets):
        raise ValueError(f"got {len(sets)} shingle sets but {fp.shape[0]} fingerprints")
    return fp


def _drop_distances(sets: ShingleSets, fp: np.ndarray | None, dropped: np.ndarray,
                    kept_for: np.ndarray, threads: int, distances: bool) -> np.ndarray:  # fmt: skip
    """The bits between each ``dropped`` document's fingerprint and that of the document it was
    dropped for (``kept_for``), -1 for the others (and for all without ``distances``); ``fp``
    None: :func:`set_fingerprints` computed for those documents only."""
    dist = np.full(len(dropped), -1, dtype=np.int64)
    if not distances:
        return dist
    if fp is None:
        fp = np.zeros(len(dropped), dtype=np.uint64)
        need = np.unique(np.concatenate([np.flatnonzero(dropped), kept_for[dropped]]))
        if len(need):
            fp[need] = set_fingerprints(subset_sets(sets, need), threads=threads)
    dist[dropped] = popcount(fp[dropped] ^ fp[kept_for[dropped]])
    return dist


def decide_verified(
    shingles: ShingleSets | tuple[Any, Any],
    fingerprints: Sequence[int] | np.ndarray | None = None,
    threshold: float = DEFAULT_THRESHOLD,
    *,
    distance: int | None = None,
    pairs: Any = None,
    keep: str = "first",
    lengths: Sequence[int] | np.ndarray | None = None,
    blocks: int | None = None,
    threads: int | None = None,
    exclude: np.ndarray | None = None,
    near_misses: bool = False,
    candidates: str = "fingerprint",
    counts: np.ndarray | None = None,
    bands: int | None = None,
    rows: int | None = None,
    distances: bool = True,
) -> VerifiedDecisions:
    """Keep or drop each document, every drop verified against the document kept for it.

    The rule is in this module's docstring: identical sets are one class; representatives in
    priority order are dropped for the first already kept candidate with Jaccard
    ``>= threshold``. No chaining: a document is never dropped because it is similar to a
    document that was itself dropped.

    Parameters
    ----------
    shingles : ShingleSets or (offsets, keys)
        CSR shingle sets: int64 offsets[n + 1], sorted unique uint32 keys per document.
    fingerprints : sequence of int or ndarray, optional
        Unsigned 64-bit fingerprints (bit 63 most significant) that define the candidates
        and the drops' ``distance`` (default: :func:`set_fingerprints` of the shingle sets,
        computed only for the documents that need one when the candidates are not a
        fingerprint search).
    threshold : float, default 0.9
        Jaccard threshold in (0, 1]; 1.0 drops only identical sets.
    distance : int, optional
        Candidates are representatives whose fingerprints differ in at most this many bits
        (default: :func:`distance_for_threshold`). Ignored when ``pairs`` is given.
    pairs : array of int, shape (p, 2), optional
        Candidate pairs computed elsewhere (e.g. on Dask); only pairs between representatives
        count. The result equals the ``distance`` form when these are ``find_all(fps, d)``.
    keep : {"first", "longest", "max:FIELD", "min:FIELD"}
        Priority: input order, most characters first, or the highest (lowest) value of a
        field first (:func:`priority_order`; needs ``lengths``).
    lengths : sequence of int or float, optional
        Characters per document for ``keep="longest"``; the field's values for
        ``"max:FIELD"`` and ``"min:FIELD"``.
    blocks : int, optional
        Block count of the fingerprint search layout (default: chosen for each search).
    threads : int, optional
        Worker threads (default: all usable CPUs). Decisions do not depend on it.
    exclude : ndarray of bool, optional
        Documents decided elsewhere (e.g. found in an index): they take no part, neither
        dropped here nor a kept document another is dropped for, and are returned kept
        (``kept_for`` -1); the others are decided as if they were absent.
    near_misses : bool
        Also find each kept document's nearest miss (``near_for``, ``near_jaccard``): the kept
        candidate before it with the highest Jaccard, all under the threshold. The decisions
        are the same; the checks that fail then run to the exact intersection (for a report).
    candidates : {"fingerprint", "prefix", "bands"}
        Where the candidates come from: documents whose ``fingerprints`` differ in at most
        ``distance`` bits, or (``"prefix"``) documents that share a key of their prefixes
        (:mod:`neardup.core.prefix`): every pair at or above the threshold is a candidate, so
        the decisions are those of the rule over all pairs, and keys that many documents hold
        (templates) make no candidates; or (``"bands"``) documents that share a MinHash band
        (:mod:`neardup.core.bands`): a pair at the threshold with probability 0.999 by
        default. ``distance``, ``blocks`` and ``pairs`` are then unused.
    counts : ndarray of uint32, optional
        With ``candidates="prefix"``: the key order, as :func:`neardup.core.prefix.rank_counts`
        of a whole corpus these documents are part of (default: of these sets). The decisions
        do not depend on it; the candidates, their checks and the near misses do.
    bands, rows : int, optional
        With ``candidates="bands"``: the scheme, ``bands`` bands of ``rows`` MinHash rows
        (:func:`neardup.core.bands.band_scheme` chooses what is not given from the
        threshold).
    distances : bool, default True
        False: leave ``distance`` -1 for every document, for a caller that measures the drops
        otherwise (set fingerprints are then computed only for a fingerprint search).

    Returns
    -------
    VerifiedDecisions

    Warns
    -----
    UserWarning
        When more than 1% of the documents have no shingles (they are all kept).

    Examples
    --------
    >>> sets = ([0, 3, 6, 10], [1, 2, 3, 1, 2, 3, 1, 2, 3, 4])
    >>> d = decide_verified(sets, threshold=0.7)
    >>> d.kept.tolist(), d.kept_for.tolist(), d.jaccard[1:].tolist()
    ([True, False, False], [-1, 0, 0], [1.0, 0.75])
    """
    sets = coerce(shingles)
    n = len(sets)
    t = check_threshold(threshold)
    nthreads = resolve_threads(threads)
    fp = _fingerprints(fingerprints, sets, candidates == "fingerprint" and pairs is None, nthreads)
    order = priority_order(n, keep, lengths)
    rank = np.empty(n, dtype=np.int64)
    rank[order] = np.arange(n, dtype=np.int64)
    sizes = sets.sizes
    empty = sizes == 0
    _warn_no_shingles(empty)

    rep = identical_classes(sets, rank, nthreads)
    if exclude is not None:
        rep = _without(rep, rank, np.asarray(exclude, dtype=bool))
    pos = np.arange(n, dtype=np.int64)
    is_rep = rep == pos
    docs = order[is_rep[order]]  # representatives in priority order
    kept_for = np.where(is_rep, -2, -1).astype(np.int64)
    inter = np.zeros(n, dtype=np.int64)
    union = np.ones(n, dtype=np.int64)
    d = distance_for_threshold(t) if distance is None else int(distance)
    near = tuple(np.full(n if near_misses else 0, v, dtype=np.int64) for v in (-1, 0, 1))
    greedy = _Greedy(sets, fp, t, d, blocks, nthreads, kept_for, inter, union, near)
    _keep_or_drop(greedy, candidates, docs, is_rep, pairs, counts, (bands, rows))
    _follow_representatives(rep, is_rep, sizes, kept_for, inter, union)
    kept = kept_for < 0
    dropped = ~kept
    kept_for[kept] = -1
    jac = np.full(n, np.nan)
    jac[dropped] = inter[dropped] / union[dropped]
    dist = _drop_distances(sets, fp, dropped, kept_for, nthreads, distances)
    near_for, near_jac = _nearest_misses(near, kept) if near_misses else (None, None)
    return VerifiedDecisions(kept, kept_for, jac, dist, empty, greedy.checks, greedy.candidates,
                             near_for, near_jac, greedy.family)  # fmt: skip

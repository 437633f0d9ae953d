"""Verified near-duplicates: exact Jaccard of shingle sets behind every pair and every drop.

Arrays in, arrays out. A document's shingle set is a sorted run of unique uint32 keys (the low 32
bits of the shingle hashes the fingerprinter computes), stored for all documents as CSR:
``offsets`` int64[n + 1] and ``keys`` uint32[total], document ``d`` holding
``keys[offsets[d]:offsets[d + 1]]``. Fingerprints are uint64, bit 63 the most significant.

Similarity is the exact Jaccard ``|A & B| / |A | B|`` of two key sets; a document without
shingles (empty, punctuation only) has Jaccard 0 with everything, itself included, so it is never
similar to anything and never dropped as a near-duplicate.

Decision rule (:func:`decide_verified`), deterministic for any thread count:

1. Documents are ranked by priority: input order (``keep="first"``) or most characters first,
   ties to the earlier (``keep="longest"``).
2. Documents with identical non-empty key sets form a class represented by its first member in
   priority order; the class is decided once and every other member follows its representative:
   dropped for it (Jaccard 1) when it is kept, else dropped for the document it was dropped for
   (with the same Jaccard, since the sets are equal).
3. Representatives are visited in priority order. One is dropped when an already kept
   representative that is a candidate for it (fingerprints within ``distance`` bits, or a given
   candidate pair) has Jaccard ``>= threshold`` with it; it is dropped for the one with the
   highest Jaccard, ties to the earliest in priority. Otherwise it is kept.

So every dropped document is verified ``>= threshold`` against the kept document named for it,
never through a chain, and no two kept documents that are candidates of each other reach the
threshold. Only kept documents are ever checked, so a family of near-identical documents costs
about one check per member and per kept member of the family, not one per candidate pair.
"""

from __future__ import annotations

import warnings
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any, NamedTuple

import numpy as np

from neardup.config import default_threads
from neardup.core import verify_kernels as VK
from neardup.core.bits import as_fingerprints, popcount
from neardup.core.search import clusters_from_pairs, find_all

__all__ = [
    "DEFAULT_THRESHOLD",
    "KEEP_POLICIES",
    "NO_SHINGLES_WARN_FRACTION",
    "ShingleSets",
    "SimilarPairs",
    "VerifiedDecisions",
    "as_shingle_sets",
    "decide_verified",
    "distance_for_threshold",
    "pair_jaccard",
    "priority_order",
    "similar_pairs",
]

#: Default Jaccard threshold of :func:`similar_pairs` and :func:`decide_verified`.
DEFAULT_THRESHOLD = 0.9
#: How the document kept among near-duplicates is chosen.
KEEP_POLICIES = ("first", "longest")
#: Warn when more than this fraction of the documents has no shingles.
NO_SHINGLES_WARN_FRACTION = 0.01
#: Candidate pairs (or documents) per task when the kernels run on several threads.
CHUNK = 1 << 16

#: Fingerprint distance (bits) whose candidates hold at least 98% of the pairs at each Jaccard
#: threshold on the real-text evaluation corpus (bench/eval_verify.py): (lowest threshold, bits).
_DISTANCE_RULE = ((0.95, 10), (0.85, 11), (0.75, 12), (0.0, 14))


class ShingleSets(NamedTuple):
    """Per-document shingle keys as CSR (validated by :func:`as_shingle_sets`).

    Attributes
    ----------
    offsets : ndarray of int64, shape (n + 1,)
        Document ``d`` holds ``keys[offsets[d]:offsets[d + 1]]``.
    keys : ndarray of uint32, shape (total,)
        Each document's keys, sorted ascending and unique.
    """

    offsets: np.ndarray
    keys: np.ndarray

    @property
    def sizes(self) -> np.ndarray:
        """Number of keys of each document, int64[n]."""
        return np.diff(self.offsets)

    def __len__(self) -> int:  # type: ignore[override]
        return len(self.offsets) - 1


class SimilarPairs(NamedTuple):
    """Pairs of documents at or above a Jaccard threshold, sorted by ``(i, j)``.

    Attributes
    ----------
    i, j : ndarray of int64
        Document positions, ``i < j``.
    jaccard : ndarray of float64
        Exact Jaccard of the two documents' shingle sets.
    """

    i: np.ndarray
    j: np.ndarray
    jaccard: np.ndarray


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
        Fingerprint distance ``popcount(fp ^ fp[kept_for])`` in bits; -1 when kept. A document
        whose set equals its class representative's may lie further than the search distance.
    no_shingles : ndarray of bool
        Documents without shingles; always kept.
    checks : int
        Set intersections computed (the verification work).
    candidate_pairs : int
        Candidate pairs between distinct fingerprints (or given pairs) used.
    """

    kept: np.ndarray
    kept_for: np.ndarray
    jaccard: np.ndarray
    distance: np.ndarray
    no_shingles: np.ndarray
    checks: int = 0
    candidate_pairs: int = 0

    @property
    def dropped(self) -> np.ndarray:
        """Boolean mask of the documents removed."""
        return ~self.kept

    @property
    def n_no_shingles(self) -> int:
        """Number of documents without shingles."""
        return int(np.count_nonzero(self.no_shingles))


def as_shingle_sets(offsets: Any, keys: Any) -> ShingleSets:
    """Validate CSR shingle sets; arrays already int64/uint32 and contiguous are not copied.

    Raises
    ------
    ValueError
        Naming the first problem: shapes, offsets not running from 0 to ``len(keys)``, keys
        outside ``[0, 2**32)``, or a document whose keys are not sorted and unique.
    """
    off = np.asarray(offsets)
    k = np.asarray(keys)
    if off.ndim != 1 or off.shape[0] < 1 or (off.size and off.dtype.kind not in "iu"):
        raise ValueError(
            f"offsets must be a 1-D integer array of n + 1 entries (got shape {off.shape}, "
            f"dtype {off.dtype})"
        )
    if k.ndim != 1 or (k.size and k.dtype.kind not in "iu"):
        raise ValueError(f"keys must be a 1-D integer array (got shape {k.shape}, dtype {k.dtype})")
    if k.size and k.dtype != np.uint32 and (int(k.min()) < 0 or int(k.max()) > 0xFFFFFFFF):
        raise ValueError(
            f"keys must be 32-bit unsigned (got values in [{int(k.min())}, {int(k.max())}]); "
            "keep the low 32 bits of each shingle hash"
        )
    off = np.ascontiguousarray(off, dtype=np.int64)
    k = np.ascontiguousarray(k, dtype=np.uint32)
    if off[0] != 0 or off[-1] != k.shape[0] or np.any(np.diff(off) < 0):
        raise ValueError(
            f"offsets must be non-decreasing from 0 to len(keys)={k.shape[0]} "
            f"(got {int(off[0])} .. {int(off[-1])})"
        )
    bad = VK._check_sorted_unique(off, k)
    if bad >= 0:
        d = int(np.searchsorted(off, bad, side="right")) - 1
        raise ValueError(
            f"the keys of document {d} are not sorted and unique (key {int(k[bad])} after "
            f"{int(k[bad - 1])}); sort and deduplicate each document's keys (np.unique)"
        )
    return ShingleSets(off, k)


def _sets(shingles: ShingleSets | tuple[Any, Any]) -> ShingleSets:
    if isinstance(shingles, ShingleSets):
        return shingles
    if not isinstance(shingles, tuple) or len(shingles) != 2:
        raise TypeError("shingle sets must be a ShingleSets or an (offsets, keys) tuple")
    return as_shingle_sets(*shingles)


def _threads(threads: int | None) -> int:
    if threads is None:
        return default_threads()
    if threads < 1:
        raise ValueError(f"threads must be >= 1 (got {threads})")
    return int(threads)


def _check_threshold(threshold: float) -> float:
    t = float(threshold)
    if not 0.0 < t <= 1.0:
        raise ValueError(f"threshold must be a Jaccard value in (0, 1] (got {threshold!r})")
    return t


def _run_chunks(fn, n: int, threads: int) -> None:
    """Call ``fn(lo, hi)`` over ``[0, n)`` in chunks, on ``threads`` threads (kernels are nogil)."""
    cuts = list(range(0, n, CHUNK)) + [n]
    if threads <= 1 or len(cuts) <= 2:
        fn(0, n)
        return
    with ThreadPoolExecutor(min(threads, len(cuts) - 1)) as pool:
        list(pool.map(fn, cuts[:-1], cuts[1:]))


def distance_for_threshold(threshold: float) -> int:
    """Fingerprint search distance (bits) used for a Jaccard threshold.

    On the real-text evaluation corpus (``bench/eval_verify.py``) the fingerprint pairs within
    this distance hold at least 98% of the document pairs at or above the threshold. Thresholds
    below 0.75 get 14 bits, where recall is lower (see the README).
    """
    t = _check_threshold(threshold)
    for lowest, bits in _DISTANCE_RULE:
        if t >= lowest:
            return bits
    return _DISTANCE_RULE[-1][1]  # pragma: no cover - the last rule starts at 0


def priority_order(
    n: int, keep: str = "first", lengths: Sequence[int] | np.ndarray | None = None
) -> np.ndarray:
    """Document positions in keep-priority order (int64[n]).

    ``"first"``: input order. ``"longest"``: most characters first, ties to the earlier.
    """
    if keep not in KEEP_POLICIES:
        raise ValueError(f"keep must be one of {list(KEEP_POLICIES)} (got {keep!r})")
    pos = np.arange(n, dtype=np.int64)
    if keep == "first":
        return pos
    if lengths is None:
        raise ValueError("keep='longest' needs the document lengths")
    lens = np.ascontiguousarray(lengths, dtype=np.int64).ravel()
    if lens.shape[0] != n:
        raise ValueError(f"got {n} documents but {lens.shape[0]} lengths")
    return np.lexsort((pos, -lens)).astype(np.int64)


def _classes(sets: ShingleSets, rank: np.ndarray, threads: int) -> np.ndarray:
    """Representative of each document's class of identical non-empty sets (-1: no shingles)."""
    n = len(sets)
    hashes = np.empty(n, dtype=np.uint64)
    _run_chunks(lambda lo, hi: VK._set_hashes(sets.offsets, sets.keys, hashes, lo, hi), n, threads)
    nonempty = np.flatnonzero(sets.sizes > 0)
    order = nonempty[np.lexsort((rank[nonempty], hashes[nonempty]))]
    rep = np.full(n, -1, dtype=np.int64)
    VK._set_classes(sets.offsets, sets.keys, hashes, order, rep)
    return rep


def _intersections(
    sets: ShingleSets, i: np.ndarray, j: np.ndarray, threshold: float, threads: int
) -> np.ndarray:
    inter = np.empty(len(i), dtype=np.int64)
    _run_chunks(
        lambda lo, hi: VK._pair_intersections(
            sets.offsets, sets.keys, i, j, threshold, inter, lo, hi
        ),
        len(i),
        threads,
    )
    return inter


def _as_pairs(pairs: Any, n: int) -> np.ndarray:
    p = np.asarray(pairs)
    if p.size == 0:
        return np.empty((0, 2), dtype=np.int64)
    if p.ndim != 2 or p.shape[1] != 2 or p.dtype.kind not in "iu":
        raise ValueError(f"pairs must be an integer array of shape (p, 2) (got {p.shape})")
    p = np.ascontiguousarray(p, dtype=np.int64)
    if p.min() < 0 or p.max() >= n:
        raise ValueError(
            f"pairs must index the {n} documents (got values in [{p.min()}, {p.max()}])"
        )
    return p


def pair_jaccard(
    shingles: ShingleSets | tuple[Any, Any], pairs: Any, *, threads: int | None = None
) -> np.ndarray:
    """Exact Jaccard of each pair of documents, float64[p] (0 where a set is empty).

    Parameters
    ----------
    shingles : ShingleSets or (offsets, keys)
        CSR shingle sets (see :func:`as_shingle_sets`).
    pairs : array of int, shape (p, 2)
        Document positions.
    threads : int, optional
        Worker threads (default: all usable CPUs).

    Examples
    --------
    >>> pair_jaccard(([0, 3, 5], [1, 2, 3, 2, 3]), [[0, 1]]).tolist()
    [0.6666666666666666]
    """
    sets = _sets(shingles)
    p = _as_pairs(pairs, len(sets))
    i = np.ascontiguousarray(p[:, 0])
    j = np.ascontiguousarray(p[:, 1])
    inter = _intersections(sets, i, j, 0.0, _threads(threads))
    sizes = sets.sizes
    union = sizes[i] + sizes[j] - np.maximum(inter, 0)
    out = np.zeros(len(p), dtype=np.float64)
    ok = inter > 0
    out[ok] = inter[ok] / union[ok]
    return out


def _adjacency(m: int, upairs: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    src = np.concatenate([upairs[:, 0], upairs[:, 1]])
    dst = np.concatenate([upairs[:, 1], upairs[:, 0]])
    adj = np.ascontiguousarray(dst[np.argsort(src, kind="stable")])
    adj_off = np.zeros(m + 1, dtype=np.int64)
    np.cumsum(np.bincount(src, minlength=m), out=adj_off[1:])
    return adj_off, adj


def decide_verified(
    shingles: ShingleSets | tuple[Any, Any],
    fingerprints: Sequence[int] | np.ndarray,
    threshold: float = DEFAULT_THRESHOLD,
    *,
    distance: int | None = None,
    pairs: Any = None,
    keep: str = "first",
    lengths: Sequence[int] | np.ndarray | None = None,
    blocks: int | None = None,
    threads: int | None = None,
) -> VerifiedDecisions:
    """Keep or drop each document, every drop verified against the document kept for it.

    The rule is in this module's docstring: identical sets are one class; representatives in
    priority order are dropped when an already kept candidate has Jaccard ``>= threshold`` (the
    highest Jaccard wins, ties to the earliest in priority). No chaining: a document is never
    dropped because it is similar to a document that was itself dropped.

    Parameters
    ----------
    shingles : ShingleSets or (offsets, keys)
        CSR shingle sets: int64 offsets[n + 1], sorted unique uint32 keys per document.
    fingerprints : sequence of int or ndarray
        Unsigned 64-bit fingerprints (bit 63 most significant), one per document.
    threshold : float, default 0.9
        Jaccard threshold in (0, 1]; 1.0 drops only identical sets.
    distance : int, optional
        Candidates are representatives whose fingerprints differ in at most this many bits
        (default: :func:`distance_for_threshold`). Ignored when ``pairs`` is given.
    pairs : array of int, shape (p, 2), optional
        Candidate pairs computed elsewhere (e.g. on Dask); only pairs between representatives
        count. The result equals the ``distance`` form when these are ``find_all(fps, d)``.
    keep : {"first", "longest"}
        Priority: input order, or most characters first (needs ``lengths``).
    lengths : sequence of int, optional
        Characters per document, for ``keep="longest"``.
    blocks : int, optional
        Block count of the fingerprint search layout (default: chosen for the input size).
    threads : int, optional
        Worker threads (default: all usable CPUs). Decisions do not depend on it.

    Returns
    -------
    VerifiedDecisions

    Warns
    -----
    UserWarning
        When more than 1% of the documents have no shingles (they are all kept).

    Examples
    --------
    >>> sets = ([0, 3, 6, 9], [1, 2, 3, 1, 2, 3, 7, 8, 9])
    >>> d = decide_verified(sets, [5, 5, 1 << 60], 0.9, distance=3)
    >>> d.kept.tolist(), d.kept_for.tolist(), d.jaccard[1]
    ([True, False, True], [-1, 0, -1], 1.0)
    """
    sets = _sets(shingles)
    n = len(sets)
    fp = as_fingerprints(fingerprints)
    if fp.shape[0] != n:
        raise ValueError(f"got {n} shingle sets but {fp.shape[0]} fingerprints")
    t = _check_threshold(threshold)
    nthreads = _threads(threads)
    order = priority_order(n, keep, lengths)
    rank = np.empty(n, dtype=np.int64)
    rank[order] = np.arange(n, dtype=np.int64)
    sizes = sets.sizes
    empty = sizes == 0
    n_empty = int(np.count_nonzero(empty))
    if n and n_empty > NO_SHINGLES_WARN_FRACTION * n:
        warnings.warn(
            f"{n_empty} of {n} documents have no shingles (empty or no words); they are kept "
            "and never counted as near-duplicates",
            UserWarning,
            stacklevel=2,
        )

    rep = _classes(sets, rank, nthreads)
    pos = np.arange(n, dtype=np.int64)
    reps = np.flatnonzero(rep == pos)
    unit = np.full(n, -1, dtype=np.int64)
    if pairs is None:
        d = distance_for_threshold(t) if distance is None else distance
        ufp, inv = np.unique(fp[reps], return_inverse=True)
        unit[reps] = inv.ravel()
        m = len(ufp)
        upairs = find_all(ufp, d, blocks, threads=nthreads)
    else:
        p = _as_pairs(pairs, n)
        p = p[(rep[p[:, 0]] == p[:, 0]) & (rep[p[:, 1]] == p[:, 1]) & (p[:, 0] != p[:, 1])]
        m = len(reps)
        unit[reps] = np.arange(m, dtype=np.int64)
        up = unit[p]
        upairs = np.unique(np.sort(up, axis=1), axis=0).reshape(-1, 2)

    adj_off, adj = _adjacency(m, upairs)
    kept_for = np.full(n, -1, dtype=np.int64)
    inter = np.zeros(n, dtype=np.int64)
    union = np.ones(n, dtype=np.int64)
    state = (
        np.full(m, -1, dtype=np.int64),  # kept_head
        np.full(n, -1, dtype=np.int64),  # kept_next
        np.empty(len(adj), dtype=np.int64),  # active
        np.zeros(m, dtype=np.int64),  # active_cnt
    )
    docs = reps[np.argsort(rank[reps], kind="stable")]

    def run(part: np.ndarray) -> int:
        return VK._greedy(
            sets.offsets, sets.keys, part, rank, unit, adj_off, adj, t, *state,
            kept_for, inter, union,
        )  # fmt: skip

    if nthreads > 1 and len(docs) >= CHUNK:
        parts = _component_parts(docs, unit, m, upairs, nthreads)
        with ThreadPoolExecutor(len(parts)) as pool:
            checks = sum(pool.map(run, parts))
    else:
        checks = run(docs)

    # every other member of a class follows its representative
    f = np.flatnonzero((rep >= 0) & (rep != pos))
    r = rep[f]
    kf = kept_for[r]
    follows_rep = kf < 0
    kept_for[f] = np.where(follows_rep, r, kf)
    inter[f] = np.where(follows_rep, sizes[f], inter[r])
    union[f] = np.where(follows_rep, sizes[f], union[r])

    kept = kept_for < 0
    dropped = ~kept
    jac = np.full(n, np.nan)
    jac[dropped] = inter[dropped] / union[dropped]
    dist = np.full(n, -1, dtype=np.int64)
    dist[dropped] = popcount(fp[dropped] ^ fp[kept_for[dropped]])
    return VerifiedDecisions(kept, kept_for, jac, dist, empty, int(checks), len(upairs))


def _component_parts(
    docs: np.ndarray, unit: np.ndarray, m: int, upairs: np.ndarray, threads: int
) -> list[np.ndarray]:
    """Split ``docs`` (in priority order) into per-thread lists of whole connected components of
    the unit graph, balanced by document count; each list stays in priority order."""
    label = clusters_from_pairs(m, upairs)
    comp = label[unit[docs]]
    sizes = np.bincount(comp, minlength=m)
    # components largest first, cut into runs of about len(docs) / threads documents
    big = np.argsort(-sizes, kind="stable")
    before = np.cumsum(sizes[big]) - sizes[big]
    owner = np.empty(m, dtype=np.int64)
    owner[big] = np.minimum(before * threads // max(len(docs), 1), threads - 1)
    who = owner[comp]
    parts = [docs[who == b] for b in range(threads)]
    return [p for p in parts if len(p)]


def _from_texts(
    texts: Sequence[Any], fingerprinter: Any, threads: int | None
) -> tuple[ShingleSets, np.ndarray]:
    if fingerprinter is None:
        from neardup.fingerprints import Fingerprinter

        fingerprinter = Fingerprinter()
    emit = getattr(fingerprinter, "fingerprints_and_shingles", None)
    if emit is None:
        raise TypeError(
            f"{type(fingerprinter).__name__} does not emit shingle keys "
            "(fingerprints_and_shingles); pass (offsets, keys, fingerprints) instead"
        )
    fps, offsets, keys = emit(texts, threads=threads)
    return as_shingle_sets(offsets, keys), as_fingerprints(fps)


def similar_pairs(
    documents: Sequence[Any] | tuple[Any, Any, Any],
    threshold: float = DEFAULT_THRESHOLD,
    *,
    distance: int | None = None,
    fingerprinter: Any = None,
    blocks: int | None = None,
    threads: int | None = None,
) -> SimilarPairs:
    """Every pair of documents found with exact Jaccard ``>= threshold``.

    Candidates are the pairs whose fingerprints differ in at most ``distance`` bits (found
    exactly by :func:`neardup.find_all`); each is verified by the exact Jaccard of the two
    shingle sets. Recall is that of the fingerprint candidates: the default distance
    (:func:`distance_for_threshold`) keeps at least 98% of the pairs at or above the threshold on
    the evaluation corpus; a larger ``distance`` finds more at more cost. Precision is exact:
    every pair returned reaches the threshold. Documents without shingles are in no pair.

    Parameters
    ----------
    documents : sequence of str or bytes, or (offsets, keys, fingerprints)
        Texts (fingerprinted with ``fingerprinter``, which must emit its shingle keys), or the
        arrays: CSR shingle sets (int64 offsets[n + 1], sorted unique uint32 keys per document)
        and uint64 fingerprints[n].
    threshold : float, default 0.9
        Jaccard threshold in (0, 1].
    distance : int, optional
        Candidate fingerprint distance in bits (default: :func:`distance_for_threshold`).
    fingerprinter : Fingerprinter, optional
        For texts (default: ``Fingerprinter("default")``).
    blocks : int, optional
        Block count of the search layout (default: chosen for the input size).
    threads : int, optional
        Worker threads (default: all usable CPUs). Results do not depend on it.

    Returns
    -------
    SimilarPairs
        ``(i, j, jaccard)``: int64, int64, float64 arrays, ``i < j``, sorted by ``(i, j)``.

    Examples
    --------
    >>> sets = ([0, 3, 6, 9], [1, 2, 3, 1, 2, 3, 7, 8, 9])
    >>> r = similar_pairs((*sets, [5, 5, 1 << 60]), 0.9, distance=3)
    >>> r.i.tolist(), r.j.tolist(), r.jaccard.tolist()
    ([0], [1], [1.0])
    """
    t = _check_threshold(threshold)
    nthreads = _threads(threads)
    if isinstance(documents, tuple) and len(documents) == 3 and not isinstance(documents[0], str):
        sets = as_shingle_sets(documents[0], documents[1])
        fp = as_fingerprints(documents[2])
        if fp.shape[0] != len(sets):
            raise ValueError(f"got {len(sets)} shingle sets but {fp.shape[0]} fingerprints")
    else:
        sets, fp = _from_texts(documents, fingerprinter, threads)
    n = len(sets)
    d = distance_for_threshold(t) if distance is None else distance
    cand = find_all(fp, d, blocks, threads=nthreads)
    i = np.ascontiguousarray(cand[:, 0])
    j = np.ascontiguousarray(cand[:, 1])
    # identical sets are Jaccard 1 without a merge (families of copies cost one hash each)
    rep = _classes(sets, np.arange(n, dtype=np.int64), nthreads)
    same = (rep[i] == rep[j]) & (rep[i] >= 0)
    inter = np.where(same, sets.sizes[i], -1)
    rest = np.flatnonzero(~same)
    if len(rest):
        inter[rest] = _intersections(sets, i[rest], j[rest], t, nthreads)
    ok = inter >= 0
    i, j, c = i[ok], j[ok], inter[ok]
    sizes = sets.sizes
    return SimilarPairs(i, j, c / (sizes[i] + sizes[j] - c))

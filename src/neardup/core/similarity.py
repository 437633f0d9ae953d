"""Shingle sets and their similarity: CSR validation, exact Jaccard of document pairs,
identical-set classes, the simhash of each set, and :func:`similar_pairs`.

A document's shingle set is a sorted run of unique uint32 keys (the low 32 bits of the shingle
hashes the fingerprinter computes), stored for all documents as CSR: ``offsets`` int64[n + 1]
and ``keys`` uint32[total], document ``d`` holding ``keys[offsets[d]:offsets[d + 1]]``. The
Jaccard of two documents is ``|A & B| / |A | B|`` of their key sets, and 0 when either is empty.
"""

from __future__ import annotations

import mmap
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any, NamedTuple

import numpy as np

from neardup.config import default_threads
from neardup.core import verify_kernels as VK
from neardup.core.bits import as_fingerprints
from neardup.core.order import lexorder
from neardup.core.search import find_all

__all__ = [
    "CHUNK",
    "DEFAULT_THRESHOLD",
    "ShingleSets",
    "SimilarPairs",
    "as_pairs",
    "as_shingle_sets",
    "check_threshold",
    "coerce",
    "distance_for_threshold",
    "identical_classes",
    "pair_intersections",
    "pair_jaccard",
    "resolve_threads",
    "run_chunks",
    "set_fingerprints",
    "similar_pairs",
    "subset_sets",
]

#: Candidate pairs (or documents) per task when the kernels run on several threads.
CHUNK = 1 << 16
#: Default Jaccard threshold of :func:`similar_pairs` and the verified decisions.
DEFAULT_THRESHOLD = 0.9

#: Fingerprint distance (bits) at which the candidates from :func:`set_fingerprints` held at least
#: 98% of the pairs at each Jaccard threshold on the real-text evaluation corpus
#: (bench/eval_verify.py, 14,931 documents): (lowest threshold, bits).
_DISTANCE_RULE = ((0.95, 4), (0.9, 6), (0.85, 7), (0.8, 10), (0.75, 12), (0.7, 13), (0.0, 16))


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
    bad = VK.check_sorted_unique(off, k)
    if bad >= 0:
        d = int(np.searchsorted(off, bad, side="right")) - 1
        raise ValueError(
            f"the keys of document {d} are not sorted and unique (key {int(k[bad])} after "
            f"{int(k[bad - 1])}); sort and deduplicate each document's keys (np.unique)"
        )
    return ShingleSets(off, k)


def coerce(shingles: ShingleSets | tuple[Any, Any]) -> ShingleSets:
    """A :class:`ShingleSets` as is, or an ``(offsets, keys)`` tuple validated."""
    if isinstance(shingles, ShingleSets):
        return shingles
    if not isinstance(shingles, tuple) or len(shingles) != 2:
        raise TypeError("shingle sets must be a ShingleSets or an (offsets, keys) tuple")
    return as_shingle_sets(*shingles)


def resolve_threads(threads: int | None) -> int:
    """``threads`` checked (>= 1), or the default thread count for ``None``."""
    if threads is None:
        return default_threads()
    if threads < 1:
        raise ValueError(f"threads must be >= 1 (got {threads})")
    return int(threads)


def _mapping(keys: np.ndarray) -> Any:
    base: Any = keys
    while base is not None and not isinstance(base, mmap.mmap):
        base = getattr(base, "base", None)
    return base


def page_out(keys: np.ndarray) -> None:
    """Drop the resident pages of ``keys`` when it is a read-only file mapping (``np.memmap``
    of a spooled key file): they are read back from the page cache when touched again, so
    the keys count against the process's resident memory one chunk of work at a time, not
    all at once. Does nothing for keys in memory."""
    base = _mapping(keys)
    if base is not None and hasattr(mmap, "MADV_DONTNEED"):
        try:
            base.madvise(mmap.MADV_DONTNEED)
        except (OSError, ValueError):  # closed, or not allowed here: only a hint
            pass


def gather_sets(sets: ShingleSets, wanted: np.ndarray, threads: int = 1) -> ShingleSets:
    """``sets`` with the keys of the documents where ``wanted`` (bool[n]) copied into memory and
    the other documents empty, at the same positions; ``sets`` itself when its keys are already
    in memory.

    Random reads from a memory-mapped key file make the kernel map the pages around each read
    too (fault-around, 64 KB by default), so touching a few thousand scattered documents would
    map nearly the whole file; reading the wanted ones in order, a chunk at a time with
    :func:`page_out` after each, keeps the mapped part small.
    """
    if _mapping(sets.keys) is None:
        return sets
    sizes = np.where(wanted, sets.sizes, 0)
    offsets = np.zeros(len(sizes) + 1, dtype=np.int64)
    np.cumsum(sizes, out=offsets[1:])
    keys = np.empty(int(offsets[-1]), dtype=np.uint32)
    w = np.ascontiguousarray(wanted, dtype=np.bool_)
    run_chunks(
        lambda lo, hi: VK.gather_keys(sets.offsets, sets.keys, w, offsets, keys, lo, hi),
        len(sizes),
        threads,
        sets.keys,
    )
    return ShingleSets(offsets, keys)


def run_chunks(fn, n: int, threads: int, keys: np.ndarray | None = None) -> None:
    """Call ``fn(lo, hi)`` over ``[0, n)`` in chunks, on ``threads`` threads (kernels are nogil);
    with ``keys``, :func:`page_out` them after each chunk."""
    cuts = list(range(0, n, CHUNK)) + [n]

    def run(lo: int, hi: int) -> None:
        fn(lo, hi)
        if keys is not None:
            page_out(keys)

    if threads <= 1 or len(cuts) <= 2:
        for lo, hi in zip(cuts[:-1], cuts[1:]):
            run(lo, hi)
        return
    with ThreadPoolExecutor(min(threads, len(cuts) - 1)) as pool:
        list(pool.map(run, cuts[:-1], cuts[1:]))


def identical_classes(sets: ShingleSets, rank: np.ndarray, threads: int) -> np.ndarray:
    """Representative of each document's class of identical non-empty sets (-1: no shingles)."""
    n = len(sets)
    hashes = np.empty(n, dtype=np.uint64)
    run_chunks(
        lambda lo, hi: VK.set_hashes(sets.offsets, sets.keys, hashes, lo, hi),
        n,
        threads,
        sets.keys,
    )
    nonempty = np.flatnonzero(sets.sizes > 0)
    order = nonempty[lexorder((rank[nonempty], hashes[nonempty]))]
    rep = np.full(n, -1, dtype=np.int64)
    h = hashes[order]
    shared = np.zeros(n, dtype=np.bool_)  # documents whose hash is not unique: keys compared
    if len(h) > 1:
        same = h[1:] == h[:-1]
        shared[order[1:][same]] = True
        shared[order[:-1][same]] = True
    compared = gather_sets(sets, shared, threads)
    VK.set_classes(compared.offsets, compared.keys, hashes, order, rep)
    return rep


def pair_intersections(
    sets: ShingleSets, i: np.ndarray, j: np.ndarray, threshold: float, threads: int
) -> np.ndarray:
    """``|S(i[k]) & S(j[k])|`` where the pair's Jaccard is ``>= threshold``, else -1 (int64);
    ``threshold=0`` gives every intersection (-1 where a set is empty)."""
    inter = np.empty(len(i), dtype=np.int64)
    run_chunks(
        lambda lo, hi: VK.pair_intersections(
            sets.offsets, sets.keys, i, j, threshold, inter, lo, hi
        ),
        len(i),
        threads,
        sets.keys,
    )
    return inter


def as_pairs(pairs: Any, n: int) -> np.ndarray:
    """``pairs`` as a contiguous int64 (p, 2) array of positions in ``[0, n)``."""
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
    sets = coerce(shingles)
    p = as_pairs(pairs, len(sets))
    i = np.ascontiguousarray(p[:, 0])
    j = np.ascontiguousarray(p[:, 1])
    inter = pair_intersections(sets, i, j, 0.0, resolve_threads(threads))
    sizes = sets.sizes
    union = sizes[i] + sizes[j] - np.maximum(inter, 0)
    out = np.zeros(len(p), dtype=np.float64)
    ok = inter > 0
    out[ok] = inter[ok] / union[ok]
    return out


def set_fingerprints(
    shingles: ShingleSets | tuple[Any, Any],
    *,
    method: str = "minhash",
    threads: int | None = None,
) -> np.ndarray:
    """A 64-bit fingerprint of each document's key set (uint64[n]) whose Hamming distance tracks
    the Jaccard similarity of the sets; a document without keys gets 0.

    Parameters
    ----------
    shingles : ShingleSets or (offsets, keys)
        CSR shingle sets.
    method : {"minhash", "simhash"}
        ``"minhash"`` (the default, behind :func:`distance_for_threshold`): one-permutation
        1-bit MinHash. Each key is mixed by ``h = fmix64(key + 0x9E3779B97F4A7C15)``
        (MurmurHash3's finalizer); the top 6 bits of ``h`` choose one of 64 buckets, its low 58
        bits rank the key there, and bit ``b`` (bit 0 the least significant) is one hashed bit of
        bucket ``b``'s least key (an empty bucket borrows another bucket's, chosen by a hash of
        ``b``: optimal densification). Two sets agree on a bit with probability about
        ``(1 + J) / 2``, so at Jaccard ``J`` they differ in about ``32 * (1 - J)`` bits: 3.2 at
        0.9, 6.4 at 0.8.
        ``"simhash"``: the simhash of the key set, every key weighing 1: bit ``i`` (bit 63 the
        most significant) is set where more keys than not have bit ``i`` set in ``h``. Equal-size
        sets at Jaccard ``J`` differ in about ``64 * arccos(2J / (1 + J)) / pi`` bits: 5.6 at
        0.9, 9.7 at 0.8, so its candidates need larger search distances for the same recall.
    threads : int, optional
        Worker threads (default: all usable CPUs).
    """
    kernels = {"minhash": VK.set_minhash, "simhash": VK.set_simhash}
    if method not in kernels:
        raise ValueError(f"method must be one of {sorted(kernels)} (got {method!r})")
    kernel = kernels[method]
    sets = coerce(shingles)
    out = np.empty(len(sets), dtype=np.uint64)
    run_chunks(
        lambda lo, hi: kernel(sets.offsets, sets.keys, out, lo, hi),
        len(sets),
        resolve_threads(threads),
        sets.keys,
    )
    return out


def check_threshold(threshold: float) -> float:
    """``threshold`` as a float in (0, 1], or a ValueError saying so."""
    t = float(threshold)
    if not 0.0 < t <= 1.0:
        raise ValueError(f"threshold must be a Jaccard value in (0, 1] (got {threshold!r})")
    return t


def distance_for_threshold(threshold: float) -> int:
    """Fingerprint search distance (bits) used for a Jaccard threshold.

    On the real-text evaluation corpus (``bench/eval_verify.py``) the pairs of
    :func:`set_fingerprints` within this distance held at least 98% of the document pairs at or
    above the threshold: 4 bits from 0.95 (99.9%), 6 from 0.9 (99.4%), 7 from 0.85 (98.4%),
    10 from 0.8 (98.8%), 12 from 0.75 (98.6%), 13 from 0.7 (98.4%) and 16 below (lower
    thresholds get less). The set simhash (``method="simhash"``) needs 11 bits at 0.9 and 13 at
    0.8 for the same recall, a search several times as costly.
    """
    t = check_threshold(threshold)
    for lowest, bits in _DISTANCE_RULE:
        if t >= lowest:
            return bits
    return _DISTANCE_RULE[-1][1]  # pragma: no cover - the last rule starts at 0


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


def _from_texts(
    texts: Sequence[Any], fingerprinter: Any, threads: int | None
) -> tuple[ShingleSets, np.ndarray]:
    if fingerprinter is None:
        from neardup.fingerprints import Fingerprinter

        fingerprinter = Fingerprinter()
    emit = getattr(fingerprinter, "features_many", None)
    if emit is None:
        raise TypeError(
            f"{type(fingerprinter).__name__} does not emit shingle keys (features_many); "
            "pass (offsets, keys) instead"
        )
    feats = emit(texts, threads=threads)
    return as_shingle_sets(feats.offsets, feats.keys), feats.fingerprints


def similar_pairs(
    documents: Sequence[Any] | tuple[Any, ...],
    threshold: float = DEFAULT_THRESHOLD,
    *,
    distance: int | None = None,
    fingerprinter: Any = None,
    blocks: int | None = None,
    threads: int | None = None,
) -> SimilarPairs:
    """Every pair of documents found with exact Jaccard ``>= threshold``.

    Candidates are the pairs whose fingerprints differ in at most ``distance`` bits (found
    exactly by :func:`neardup.find_all`), plus every pair of identical sets; each is verified by
    the exact Jaccard of the two shingle sets. Precision is exact: every pair returned reaches
    the threshold. Recall is that of the candidates: with the default fingerprints
    (:func:`set_fingerprints`) and distance (:func:`distance_for_threshold`) they held at least
    98% of the pairs at or above each threshold on the evaluation corpus
    (``bench/eval_verify.py``); a larger ``distance`` finds more at more cost. Documents without
    shingles are in no pair.

    Parameters
    ----------
    documents : sequence of str or bytes, or (offsets, keys), or (offsets, keys, fingerprints)
        Texts (shingle keys from ``fingerprinter.features_many``), or CSR shingle sets (int64
        offsets[n + 1], sorted unique uint32 keys per document), optionally with the uint64
        fingerprints[n] that define the candidates (default: :func:`set_fingerprints`).
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
    >>> sets = ([0, 3, 6, 10, 12], [1, 2, 3, 1, 2, 3, 1, 2, 3, 4, 8, 9])
    >>> r = similar_pairs(sets, 0.7)
    >>> r.i.tolist(), r.j.tolist(), r.jaccard.tolist()
    ([0, 0, 1], [1, 2, 2], [1.0, 0.75, 0.75])
    """
    t = check_threshold(threshold)
    nthreads = resolve_threads(threads)
    arrays = isinstance(documents, tuple) and len(documents) in (2, 3)
    if arrays and not isinstance(documents[0], (str, bytes)):
        sets = as_shingle_sets(documents[0], documents[1])
        fps = documents[2] if len(documents) == 3 else None
    else:
        sets = _from_texts(documents, fingerprinter, threads)[0]
        fps = None  # candidates from the set fingerprints, which the distances are made for
    n = len(sets)
    if fps is None:
        fp = set_fingerprints(sets, threads=nthreads)
    else:
        fp = as_fingerprints(fps)
        if fp.shape[0] != n:
            raise ValueError(f"got {n} shingle sets but {fp.shape[0]} fingerprints")
    d = distance_for_threshold(t) if distance is None else distance
    cand = find_all(fp, d, blocks, threads=nthreads)
    # identical sets are Jaccard 1 without a merge, and candidates whatever the fingerprints say
    # (set fingerprints of identical sets are equal, so only given fingerprints can miss them)
    rep = identical_classes(sets, np.arange(n, dtype=np.int64), nthreads)
    if fps is not None:
        cand = _with_identical_pairs(cand, rep, n)
    i = np.ascontiguousarray(cand[:, 0])
    j = np.ascontiguousarray(cand[:, 1])
    same = (rep[i] == rep[j]) & (rep[i] >= 0)
    inter = np.where(same, sets.sizes[i], -1)
    rest = np.flatnonzero(~same)
    if len(rest):
        inter[rest] = pair_intersections(sets, i[rest], j[rest], t, nthreads)
    ok = inter >= 0
    i, j, c = i[ok], j[ok], inter[ok]
    sizes = sets.sizes
    return SimilarPairs(i, j, c / (sizes[i] + sizes[j] - c))


def _with_identical_pairs(cand: np.ndarray, rep: np.ndarray, n: int) -> np.ndarray:
    """``cand`` plus every pair of documents with identical non-empty sets, sorted, unique."""
    members = np.flatnonzero(rep >= 0)
    members = members[np.bincount(rep[members], minlength=n)[rep[members]] >= 2]
    order = members[lexorder((members, rep[members]))]  # classes together, ascending
    extra = [cand]
    for g in np.split(order, np.flatnonzero(np.diff(rep[order])) + 1):
        a, b = np.triu_indices(len(g), k=1)
        extra.append(np.stack([g[a], g[b]], axis=1))
    p = np.concatenate(extra)
    key = np.unique(p[:, 0].astype(np.uint64) * np.uint64(n) + p[:, 1].astype(np.uint64))
    return np.stack([key // np.uint64(n), key % np.uint64(n)], axis=1).astype(np.int64)


def subset_sets(sets: ShingleSets, idx: np.ndarray) -> ShingleSets:
    """The sets of the documents at positions ``idx`` (int, ascending), copied into memory
    (of memory-mapped keys, only the span they cover is read).

    Examples
    --------
    >>> sets = ShingleSets(np.array([0, 2, 3, 5]), np.array([1, 2, 7, 3, 4], np.uint32))
    >>> sub = subset_sets(sets, np.array([0, 2]))
    >>> sub.offsets.tolist(), sub.keys.tolist()
    ([0, 2, 4], [1, 2, 3, 4])
    """
    idx = np.asarray(idx, dtype=np.int64)
    starts = np.asarray(sets.offsets[idx], dtype=np.int64)
    sizes = np.asarray(sets.offsets[idx + 1], dtype=np.int64) - starts
    offsets = np.zeros(len(idx) + 1, dtype=np.int64)
    np.cumsum(sizes, out=offsets[1:])
    if offsets[-1] == 0:
        return ShingleSets(offsets, np.zeros(0, dtype=np.uint32))
    lo, hi = int(starts.min()), int((starts + sizes).max())
    window = np.asarray(sets.keys[lo:hi])
    at = np.repeat(starts - lo - offsets[:-1], sizes) + np.arange(offsets[-1], dtype=np.int64)
    return ShingleSets(offsets, np.ascontiguousarray(window[at]))

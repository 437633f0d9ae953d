"""Shingle sets: CSR validation, exact Jaccard of document pairs, identical-set classes and the
simhash of each set.

A document's shingle set is a sorted run of unique uint32 keys (the low 32 bits of the shingle
hashes the fingerprinter computes), stored for all documents as CSR: ``offsets`` int64[n + 1]
and ``keys`` uint32[total], document ``d`` holding ``keys[offsets[d]:offsets[d + 1]]``. The
Jaccard of two documents is ``|A & B| / |A | B|`` of their key sets, and 0 when either is empty.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from typing import Any, NamedTuple

import numpy as np

from neardup.config import default_threads
from neardup.core import verify_kernels as VK

__all__ = [
    "CHUNK",
    "ShingleSets",
    "as_pairs",
    "as_shingle_sets",
    "coerce",
    "identical_classes",
    "pair_intersections",
    "pair_jaccard",
    "resolve_threads",
    "run_chunks",
    "set_fingerprints",
]

#: Candidate pairs (or documents) per task when the kernels run on several threads.
CHUNK = 1 << 16


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
    bad = VK._check_sorted_unique(off, k)
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


def run_chunks(fn, n: int, threads: int) -> None:
    """Call ``fn(lo, hi)`` over ``[0, n)`` in chunks, on ``threads`` threads (kernels are nogil)."""
    cuts = list(range(0, n, CHUNK)) + [n]
    if threads <= 1 or len(cuts) <= 2:
        fn(0, n)
        return
    with ThreadPoolExecutor(min(threads, len(cuts) - 1)) as pool:
        list(pool.map(fn, cuts[:-1], cuts[1:]))


def identical_classes(sets: ShingleSets, rank: np.ndarray, threads: int) -> np.ndarray:
    """Representative of each document's class of identical non-empty sets (-1: no shingles)."""
    n = len(sets)
    hashes = np.empty(n, dtype=np.uint64)
    run_chunks(lambda lo, hi: VK._set_hashes(sets.offsets, sets.keys, hashes, lo, hi), n, threads)
    nonempty = np.flatnonzero(sets.sizes > 0)
    order = nonempty[np.lexsort((rank[nonempty], hashes[nonempty]))]
    rep = np.full(n, -1, dtype=np.int64)
    VK._set_classes(sets.offsets, sets.keys, hashes, order, rep)
    return rep


def pair_intersections(
    sets: ShingleSets, i: np.ndarray, j: np.ndarray, threshold: float, threads: int
) -> np.ndarray:
    """``|S(i[k]) & S(j[k])|`` where the pair's Jaccard is ``>= threshold``, else -1 (int64);
    ``threshold=0`` gives every intersection (-1 where a set is empty)."""
    inter = np.empty(len(i), dtype=np.int64)
    run_chunks(
        lambda lo, hi: VK._pair_intersections(
            sets.offsets, sets.keys, i, j, threshold, inter, lo, hi
        ),
        len(i),
        threads,
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
    shingles: ShingleSets | tuple[Any, Any], *, threads: int | None = None
) -> np.ndarray:
    """64-bit simhash of each document's key set, every key weighing 1 (uint64[n]).

    Bit ``i`` (bit 63 the most significant) is set where more of the document's keys than not
    have bit ``i`` set in ``fmix64(key + 0x9E3779B97F4A7C15)`` (MurmurHash3's finalizer); a
    document without keys gets 0. Two sets at Jaccard ``J`` differ in about
    ``64 * arccos(2J / (1 + J)) / pi`` bits when their sizes are equal.
    """
    sets = coerce(shingles)
    out = np.empty(len(sets), dtype=np.uint64)
    run_chunks(
        lambda lo, hi: VK._set_simhash(sets.offsets, sets.keys, out, lo, hi),
        len(sets),
        resolve_threads(threads),
    )
    return out

"""MinHash sketches of shingle sets: what an index keeps per entry to verify dedup against it.

A sketch is ``K`` uint64 words per document (bit 0 the least significant of each word):

- word 0 is :func:`neardup.core.similarity.set_fingerprints`, the one-permutation 1-bit MinHash
  of the set over 64 buckets: the fingerprint an index searches;
- words 1..K-1 are a one-permutation 1-bit MinHash of the same set over ``64 * (K - 1)`` more
  buckets, from a second, independent hash of each key.

Two sets at Jaccard ``J`` agree on each bit with probability ``(1 + J) / 2``, so the Jaccard is
estimated from ``D`` differing bits among ``B`` as ``1 - 2 * D / B``. The decision of
:func:`sketch_decide` leaves word 0 out of ``B``: candidates are chosen for a small word-0
distance, which would bias an estimate that counted it upward; words 1..K-1 are independent of
that choice. Beside the estimate it applies the exact bound ``J <= min(|A|, |B|) / max(|A|, |B|)``
from the two set sizes, which the index keeps too, and documents without shingles never match.
"""

from __future__ import annotations

from typing import Any, NamedTuple

import numpy as np

from neardup.core import sketch_kernels as SK
from neardup.core.similarity import (
    ShingleSets,
    check_threshold,
    coerce,
    resolve_threads,
    run_chunks,
    set_fingerprints,
)

__all__ = [
    "MAX_SIZE",
    "MAX_WORDS",
    "SKETCH_WORDS",
    "Sketches",
    "as_sketches",
    "check_sketch_words",
    "estimated_jaccard",
    "set_sketches",
    "sketch_decide",
]

#: Words (uint64) per sketch by default: word 0 to search, 15 more (960 bits) to estimate.
SKETCH_WORDS = 16
#: Most words a sketch may have.
MAX_WORDS = 64
#: Set sizes are kept as uint32, saturating here (a bound from saturated sizes is only weaker).
MAX_SIZE = 2**32 - 1


class Sketches(NamedTuple):
    """MinHash sketches and set sizes of ``n`` documents (see :func:`set_sketches`).

    Attributes
    ----------
    words : ndarray of uint64, shape (n, K)
        Each document's sketch; word 0 is its set fingerprint.
    sizes : ndarray of uint32, shape (n,)
        Each document's number of distinct shingle keys (saturating at :data:`MAX_SIZE`); 0 for a
        document without shingles, which never matches anything.
    """

    words: np.ndarray
    sizes: np.ndarray

    @property
    def fingerprints(self) -> np.ndarray:
        """Word 0 of each sketch (uint64[n]): :func:`set_fingerprints`, what an index searches."""
        return np.ascontiguousarray(self.words[:, 0])

    def __len__(self) -> int:  # type: ignore[override]
        return int(self.words.shape[0])

    def take(self, positions: np.ndarray) -> Sketches:
        """The sketches of the documents at ``positions`` (int or bool array), copied."""
        return Sketches(
            np.ascontiguousarray(self.words[positions]), np.ascontiguousarray(self.sizes[positions])
        )


def check_sketch_words(words: Any) -> int:
    """``words`` as an int in [2, MAX_WORDS], or a ValueError naming the fix."""
    if isinstance(words, bool) or not isinstance(words, (int, np.integer)):
        raise ValueError(f"sketch words must be an integer (got {words!r})")
    if not 2 <= int(words) <= MAX_WORDS:
        raise ValueError(
            f"a sketch has 2 to {MAX_WORDS} words of 64 bits (got {words}); use 8 or 16"
        )
    return int(words)


def as_sketches(sketches: Any, words: int | None = None) -> Sketches:
    """A :class:`Sketches` (or a ``(words, sizes)`` pair) checked: uint64 words of shape
    (n, K) with 2 <= K <= 64 (K = ``words`` when given), sizes of shape (n,) in
    ``[0, 2**32)``, a document without shingles all zeros and size 0.

    Raises
    ------
    ValueError
        Naming the first problem and the fix.
    """
    if isinstance(sketches, Sketches):
        sketches = (sketches.words, sketches.sizes)
    if not isinstance(sketches, tuple) or len(sketches) != 2:
        raise TypeError(
            "sketches must be a Sketches (neardup.core.sketch.set_sketches) or a (words, sizes) "
            "pair"
        )
    w = np.asarray(sketches[0])
    z = np.asarray(sketches[1])
    if w.ndim != 2 or (w.size and w.dtype != np.uint64):
        raise ValueError(
            f"sketch words must be a uint64 array of shape (n, K) (got {w.dtype} {w.shape})"
        )
    k = check_sketch_words(w.shape[1])
    if words is not None and k != words:
        raise ValueError(
            f"sketches have {k} words, the index keeps {words}; make them with "
            f"set_sketches(..., words={words})"
        )
    if z.shape != (w.shape[0],) or (z.size and z.dtype.kind not in "iu"):
        raise ValueError(
            f"sketch sizes must be an integer array of one size per sketch (got {z.dtype} "
            f"{z.shape} for {w.shape[0]} sketches)"
        )
    if z.size and (int(z.min()) < 0 or int(z.max()) > MAX_SIZE):
        raise ValueError(
            f"sketch sizes must be in [0, 2**32) (got [{int(z.min())}, {int(z.max())}])"
        )
    z = np.ascontiguousarray(z, dtype=np.uint32)
    w = np.ascontiguousarray(w, dtype=np.uint64)
    empty = np.flatnonzero((z == 0) & (w != 0).any(axis=1))
    if len(empty):
        raise ValueError(
            f"sketch {int(empty[0])} has size 0 (no shingles) but non-zero words; a document "
            "without shingles has an all-zero sketch"
        )
    return Sketches(w, z)


def set_sketches(
    shingles: ShingleSets | tuple[Any, Any],
    words: int = SKETCH_WORDS,
    *,
    threads: int | None = None,
) -> Sketches:
    """The MinHash sketch and the size of each document's shingle set.

    Parameters
    ----------
    shingles : ShingleSets or (offsets, keys)
        CSR shingle sets (int64 offsets[n + 1], sorted unique uint32 keys per document), e.g.
        ``Fingerprinter().features_many(texts)``'s ``offsets`` and ``keys``.
    words : int, default 16
        64-bit words per sketch, 2 to 64. Word 0 equals :func:`set_fingerprints` (64 buckets);
        words 1..``words``-1 are one one-permutation 1-bit MinHash over ``64 * (words - 1)``
        buckets of a second hash (:func:`neardup.core.sketch_kernels.fill_sketch_words` gives the
        hashes). A document without keys gets all zeros and size 0.
    threads : int, optional
        Worker threads (default: all usable CPUs). The result does not depend on it.

    Returns
    -------
    Sketches
        ``words`` uint64 (n, ``words``) and ``sizes`` uint32 (n,).

    Examples
    --------
    >>> s = set_sketches(([0, 3, 6, 6], [1, 2, 3, 1, 2, 3]), words=4)
    >>> s.words.shape, bool((s.words[0] == s.words[1]).all()), s.words[2].tolist()
    ((3, 4), True, [0, 0, 0, 0])
    >>> s.sizes.tolist()
    [3, 3, 0]
    """
    k = check_sketch_words(words)
    sets = coerce(shingles)
    nthreads = resolve_threads(threads)
    out = np.zeros((len(sets), k), dtype=np.uint64)
    out[:, 0] = set_fingerprints(sets, threads=nthreads)
    run_chunks(
        lambda lo, hi: SK.fill_sketch_words(sets.offsets, sets.keys, out, lo, hi),
        len(sets),
        nthreads,
    )
    return Sketches(out, np.minimum(sets.sizes, MAX_SIZE).astype(np.uint32))


def estimated_jaccard(differing: np.ndarray, bits: int) -> np.ndarray:
    """``1 - 2 * differing / bits`` (float64): the Jaccard estimate of two 1-bit MinHashes of
    ``bits`` bits that differ in ``differing`` of them (may be below 0 by chance)."""
    return 1.0 - 2.0 * np.asarray(differing, dtype=np.float64) / bits


def sketch_decide(
    queries: Sketches,
    entries: Sketches,
    qi: np.ndarray,
    ci: np.ndarray,
    threshold: float,
    *,
    threads: int | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """Which candidate pairs ``(queries[qi[k]], entries[ci[k]])`` reach ``threshold`` by their
    sketches.

    Pair ``k`` matches when both sets are non-empty, ``min(size) / max(size) >= threshold`` (an
    exact bound on the Jaccard) and the estimate from words 1..K-1 (``D`` differing bits of
    ``B = 64 * (K - 1)``), ``1 - 2 * D / B``, is ``>= threshold``, all in float64 as Python
    computes them. Word 0 is left out of the estimate: candidates are chosen for its small
    distance, so it would bias the estimate upward.

    Parameters
    ----------
    queries, entries : Sketches
        Sketches and sizes (:func:`set_sketches`) with the same number of words; the entries'
        arrays may be memory-mapped.
    qi, ci : ndarray of int
        Candidate pairs: positions in ``queries`` and in ``entries`` (not checked).
    threshold : float
        Jaccard threshold in (0, 1].
    threads : int, optional
        Worker threads (default: all usable CPUs).

    Returns
    -------
    match : ndarray of bool
        Per pair, whether it reaches the threshold.
    jaccard : ndarray of float64
        Per pair, the estimated Jaccard (0 where a set is empty).

    Examples
    --------
    >>> s = set_sketches(([0, 3, 6, 12], [1, 2, 3, 1, 2, 3, 1, 2, 3, 4, 5, 6]), words=4)
    >>> m, j = sketch_decide(s, s, np.array([0, 0]), np.array([1, 2]), 0.9)
    >>> m.tolist(), j[0].item()
    ([True, False], 1.0)
    """
    t = check_threshold(threshold)
    words = queries.words.shape[1]
    if entries.words.shape[1] != words:
        raise ValueError(
            f"sketches of {words} and of {entries.words.shape[1]} words cannot be compared; "
            "make both with the same words"
        )
    if words < 2:
        raise ValueError(f"sketches of {words} word cannot estimate a Jaccard; use 2 or more")
    qi = np.ascontiguousarray(qi, dtype=np.int64)
    ci = np.ascontiguousarray(ci, dtype=np.int64)
    diff = np.empty(len(qi), dtype=np.int64)
    qs = np.ascontiguousarray(queries.words, dtype=np.uint64)
    cs = np.ascontiguousarray(entries.words, dtype=np.uint64)
    run_chunks(
        lambda lo, hi: SK.differing_bits(qs, cs, qi, ci, 1, diff, lo, hi),
        len(qi),
        resolve_threads(threads),
    )
    jac = estimated_jaccard(diff, 64 * (words - 1))
    a = np.asarray(queries.sizes, dtype=np.int64)[qi]
    b = np.asarray(entries.sizes, dtype=np.int64)[ci]
    small = np.minimum(a, b)
    big = np.maximum(a, b)
    nonempty = small > 0
    ratio = np.zeros(len(qi), dtype=np.float64)
    ratio[nonempty] = small[nonempty] / big[nonempty]
    jac[~nonempty] = 0.0
    return nonempty & (ratio >= t) & (jac >= t), jac

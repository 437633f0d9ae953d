"""Matches of an index as flat arrays, and the queries ``neardup dedup --against`` asks: the
nearest entry of each query, and verified queries of an index with sketches (candidates by
fingerprint distance, decided by the Jaccard estimated from the MinHash sketches the index keeps
per entry, :mod:`neardup.core.sketch`).

:class:`IndexMatching` is a mixin of :class:`neardup.index.Index`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, NamedTuple

import numpy as np

from neardup import config
from neardup.core.bits import as_fingerprints
from neardup.core.similarity import check_threshold, distance_for_threshold
from neardup.core.sketch import Sketches, as_sketches, sketch_decide
from neardup.index.segments import convert_ids

__all__ = ["IndexMatches", "IndexMatching", "VerifiedMatches"]


class IndexMatches(NamedTuple):
    """Matches of a batch query as flat arrays, sorted by query, then distance, then id."""

    query_index: np.ndarray  #: int64, position of the query in the batch
    id: np.ndarray  #: int64 ids, or an object array of str ids
    distance: np.ndarray  #: int64 Hamming distance


class VerifiedMatches(NamedTuple):
    """Matches of a verified query as flat arrays, sorted by query, then estimated Jaccard
    (highest first), then distance, then id."""

    query_index: np.ndarray  #: int64, position of the query in the batch
    id: np.ndarray  #: int64 ids, or an object array of str ids
    distance: np.ndarray  #: int64 Hamming distance of the sketches' first words
    jaccard: np.ndarray  #: float64 Jaccard estimated from the sketches (>= the threshold)

    def first(self, n: int) -> np.ndarray:
        """For each of ``n`` queries, the position of its best match in these arrays, -1 for
        none (int64[n])."""
        best = np.full(n, -1, dtype=np.int64)
        q, at = np.unique(self.query_index, return_index=True)
        best[q] = at
        return best


class IndexMatching:
    """Mixin of :class:`neardup.index.Index`: its queries (all matches, the nearest, those
    decided by sketches) over the probe of :class:`neardup.index.probe.IndexProbe`; the list and
    mask forms are :class:`neardup.index.base.IndexBase`'s."""

    def query_arrays(
        self,
        fingerprints: Sequence[int] | np.ndarray,
        distance: int | None = None,
        *,
        threads: int | None = None,
    ) -> IndexMatches:
        """Every indexed id within ``distance`` bits of each query, as flat arrays.

        Parameters
        ----------
        fingerprints : sequence of int or ndarray
            Query fingerprints (uint64, bit 63 most significant). A large batch is probed table
            by table in one sorted pass, like :func:`neardup.find_all`.
        distance : int, optional
            Bits (inclusive), at most the index's distance (the default).
        threads : int, optional
            Threads probing tables in parallel for large batches. Default: all usable CPUs.

        Returns
        -------
        IndexMatches
            ``(query_index, id, distance)``, sorted by query, then distance (nearest first), then
            id (integer ids; string ids in a fixed but unspecified order).
        """
        qi, si, rows, d = self._probe(fingerprints, distance, threads)
        keys, values = self._ids_of(si, rows)
        order = np.lexsort((keys, d, qi))
        return IndexMatches(qi[order], values[order], d[order])

    def nearest_arrays(
        self,
        fingerprints: Any,
        distance: int | None = None,
        *,
        threads: int | None = None,
    ) -> IndexMatches:
        """For each query with a match within ``distance`` bits, its nearest entry (ties: the
        smallest id; string ids in the index's fixed order): the first match of each query in
        :meth:`query_arrays`, whose parameters it takes, with ids looked up for those only."""
        q = as_fingerprints(fingerprints, "fingerprints")
        qi, si, rows, d = self._probe(q, distance, threads)
        keys = np.zeros(len(qi), dtype=np.int64)
        for s in np.unique(si).tolist():
            sel = si == s
            keys[sel] = self._segs[s].keys[rows[sel]]
        order = np.lexsort((keys, d, qi))
        qi, si, rows, d = qi[order], si[order], rows[order], d[order]
        head = np.ones(len(qi), dtype=bool)
        head[1:] = qi[1:] != qi[:-1]
        _, values = self._ids_of(si[head], rows[head])
        return IndexMatches(qi[head], values, d[head])

    def verified_query(
        self,
        sketches: Sketches | tuple[Any, Any],
        threshold: float,
        distance: int | None = None,
        *,
        threads: int | None = None,
        candidates: Any = None,
    ) -> VerifiedMatches:
        """Every entry whose estimated Jaccard with each query reaches ``threshold``.

        Candidates are the entries whose fingerprints (the sketches' first words) lie within
        ``distance`` bits of the query's first word; each is decided by
        :func:`neardup.core.sketch.sketch_decide`: both sets non-empty, the exact size bound
        ``min / max >= threshold`` and the Jaccard estimated from the other words
        ``>= threshold``.

        Parameters
        ----------
        sketches : Sketches
            The queries' sketches and sizes (:func:`neardup.core.sketch.set_sketches` with
            ``words=index.sketch_words``).
        threshold : float
            Jaccard threshold in (0, 1].
        distance : int, optional
            Candidate distance in bits (default: :func:`distance_for_threshold` of
            ``threshold``), at most the index's distance.
        threads : int, optional
            Threads for the search and the estimates.
        candidates : IndexMatches, optional
            Candidates found elsewhere (``neardup.distributed.query`` of the first words on
            Dask): decided here instead of searching (``distance`` is then not used).

        Returns
        -------
        VerifiedMatches
            ``(query_index, id, distance, jaccard)``; :meth:`VerifiedMatches.first` gives each
            query's best match.

        Raises
        ------
        ValueError
            For an index without sketches, sketches of other words, or a distance above the
            index's.
        """
        self._check_open()
        words = self.sketch_words
        if words is None:
            raise ValueError(
                f"index {self.path} keeps no sketches; a verified query needs an index created "
                "with threshold= (`neardup index create --threshold`)"
            )
        sk = as_sketches(sketches, words)
        t = check_threshold(threshold)
        d = distance_for_threshold(t) if distance is None else distance
        parts: list[tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]] = []
        if candidates is not None:
            parts.append(self._decide_candidates(sk, t, candidates, threads))
        else:
            step = max(1, config.VERIFY_QUERY_CHUNK)
            for lo in range(0, len(sk), step):
                part = sk.take(np.arange(lo, min(lo + step, len(sk))))
                qi, si, rows, dist = self._probe(part.fingerprints, d, threads)
                qi, si, rows, dist, jac = self._decide(part, t, qi, si, rows, dist, threads)
                parts.append((qi + lo, si, rows, dist, jac))
        if parts:
            qi, si, rows, dist, jac = (np.concatenate(p) for p in zip(*parts, strict=True))
        else:
            e = np.empty(0, dtype=np.int64)
            qi, si, rows, dist, jac = e, e, e, e, np.empty(0)
        keys, values = self._ids_of(si, rows)
        order = np.lexsort((keys, dist, -jac, qi))
        return VerifiedMatches(qi[order], values[order], dist[order], jac[order])

    def _decide(
        self,
        sk: Sketches,
        t: float,
        qi: np.ndarray,
        si: np.ndarray,
        rows: np.ndarray,
        dist: np.ndarray,
        threads: int | None,
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """The candidate pairs (query, segment, row) that reach ``t``, with their estimates."""
        keep = np.zeros(len(qi), dtype=bool)
        jac = np.zeros(len(qi), dtype=np.float64)
        for s in np.unique(si).tolist():
            seg = self._segs[s]
            sel = np.flatnonzero(si == s)
            ok, est = sketch_decide(
                sk, Sketches(seg.sketch, seg.ssize), qi[sel], rows[sel], t, threads=threads
            )
            keep[sel] = ok
            jac[sel] = est
        return qi[keep], si[keep], rows[keep], dist[keep], jac[keep]

    def _decide_candidates(
        self, sk: Sketches, t: float, candidates: Any, threads: int | None
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """:meth:`_decide` for candidates given as (query_index, id, distance) arrays: each id is
        found in the index (ids removed meanwhile are no candidates)."""
        cq = np.asarray(candidates.query_index, dtype=np.int64)
        cd = np.asarray(candidates.distance, dtype=np.int64)
        e = np.empty(0, dtype=np.int64)
        if len(cq) == 0 or self.id_type is None:
            return e, e, e, e, np.empty(0)
        if len(cq) and (cq.min() < 0 or cq.max() >= len(sk)):
            raise ValueError(f"candidates name queries outside the {len(sk)} sketches given")
        owner, si, rows = self._find(convert_ids(candidates.id, None, self.id_type))
        return self._decide(sk, t, cq[owner], si, rows, cd[owner], threads)

"""The one answer of a batch query: the matches of ``n`` queries in CSR form.

:class:`Matches` is what :func:`neardup.query`, every index backend's
:meth:`~neardup.index.backend.IndexBackend.search`, ``verified_query`` and ``nearest``, batch mode
and :func:`neardup.distributed.query` return. Query ``i``'s matches are
``ids[offsets[i]:offsets[i + 1]]`` (with their ``distances`` and, for verified queries,
``jaccards``), best first. The per-query lists of tuples are built here, in one place.
"""

from __future__ import annotations

from typing import Any

import numpy as np

__all__ = ["Matches"]


class Matches:
    """Matches of a batch of ``n`` queries, grouped by query (CSR).

    Parameters
    ----------
    offsets : ndarray of int64, shape (n + 1,)
        Query ``i``'s matches are positions ``offsets[i]`` to ``offsets[i + 1] - 1``;
        ``offsets[0] == 0`` and ``offsets[-1] == len(ids)``.
    ids : ndarray
        The matched ids: int64 (corpus positions for :func:`neardup.query`, integer ids of an
        index) or an object array of str ids.
    distances : ndarray of int64
        Hamming distance in bits of each match.
    jaccards : ndarray of float64, optional
        Jaccard estimated from the MinHash sketches (verified queries only), else None.

    Notes
    -----
    Within a query, matches are ordered best first: by distance then id, or for verified
    queries by estimated Jaccard (highest first), distance, then id.

    Examples
    --------
    >>> m = Matches.from_sorted(np.array([0, 0, 2]), np.array([7, 9, 7]), np.array([0, 3, 1]), 3)
    >>> m.offsets.tolist(), m.for_query(0), m.to_lists()
    ([0, 2, 2, 3], [(7, 0), (9, 3)], [[(7, 0), (9, 3)], [], [(7, 1)]])
    """

    __slots__ = ("offsets", "ids", "distances", "jaccards")

    def __init__(
        self,
        offsets: np.ndarray,
        ids: np.ndarray,
        distances: np.ndarray,
        jaccards: np.ndarray | None = None,
    ) -> None:
        self.offsets = np.asarray(offsets, dtype=np.int64)
        self.ids = np.asarray(ids)
        self.distances = np.asarray(distances, dtype=np.int64)
        self.jaccards = None if jaccards is None else np.asarray(jaccards, dtype=np.float64)
        m = len(self.ids)
        if (
            self.offsets.ndim != 1
            or len(self.offsets) == 0
            or self.offsets[0] != 0
            or self.offsets[-1] != m
            or len(self.distances) != m
            or (self.jaccards is not None and len(self.jaccards) != m)
        ):
            raise ValueError(
                f"Matches need offsets of n + 1 positions from 0 to {m} and {m} distances "
                "(and jaccards, when given)"
            )

    @classmethod
    def from_sorted(
        cls,
        query_index: np.ndarray,
        ids: np.ndarray,
        distances: np.ndarray,
        n: int,
        jaccards: np.ndarray | None = None,
    ) -> Matches:
        """Matches from flat arrays already sorted by query (``query_index`` in ``[0, n)``)."""
        qi = np.asarray(query_index, dtype=np.int64)
        offsets = np.zeros(n + 1, dtype=np.int64)
        np.cumsum(np.bincount(qi, minlength=n)[:n], out=offsets[1:])
        return cls(offsets, ids, distances, jaccards)

    @classmethod
    def empty(cls, n: int, id_type: str | None = "int64", verified: bool = False) -> Matches:
        """No match for any of ``n`` queries (``id_type="str"``: an object array of ids)."""
        ids = np.empty(0, dtype=object if id_type == "str" else np.int64)
        e = np.empty(0, dtype=np.int64)
        return cls(np.zeros(n + 1, dtype=np.int64), ids, e, np.empty(0) if verified else None)

    def __len__(self) -> int:
        """Number of queries."""
        return len(self.offsets) - 1

    def __repr__(self) -> str:
        kind = ", verified" if self.jaccards is not None else ""
        return f"Matches({len(self)} queries, {self.size} matches{kind})"

    @property
    def size(self) -> int:
        """Number of matches of all queries together."""
        return len(self.ids)

    @property
    def counts(self) -> np.ndarray:
        """Matches per query (int64[n])."""
        return np.diff(self.offsets)

    @property
    def query_index(self) -> np.ndarray:
        """The query of each match (int64, ascending): the flat (COO) form."""
        return np.repeat(np.arange(len(self), dtype=np.int64), self.counts)

    def found(self) -> np.ndarray:
        """Whether each query has a match (bool[n])."""
        return self.counts > 0

    def first_positions(self) -> np.ndarray:
        """Position in :attr:`ids` of each query's best match, -1 for none (int64[n])."""
        return np.where(self.found(), self.offsets[:-1], -1)

    def first(self) -> Matches:
        """Each query's best match only (its nearest, or its best estimate when verified)."""
        found = self.found()
        at = self.offsets[:-1][found]
        offsets = np.zeros(len(self) + 1, dtype=np.int64)
        np.cumsum(found, out=offsets[1:])
        jac = None if self.jaccards is None else self.jaccards[at]
        return Matches(offsets, self.ids[at], self.distances[at], jac)

    def select(self, keep: np.ndarray) -> Matches:
        """The matches where the bool array ``keep`` (one per match) is True, grouped as here."""
        keep = np.asarray(keep, dtype=bool)
        kept = np.concatenate(([0], np.cumsum(keep, dtype=np.int64)))
        offsets = kept[self.offsets]
        jac = None if self.jaccards is None else self.jaccards[keep]
        return Matches(offsets, self.ids[keep], self.distances[keep], jac)

    def for_query(self, i: int, jaccard_digits: int | None = None) -> list[tuple[Any, ...]]:
        """Query ``i``'s matches as ``(id, distance)`` tuples, or ``(id, distance, jaccard)``
        for verified matches (Jaccards rounded to ``jaccard_digits`` when given), best first."""
        a, b = int(self.offsets[i]), int(self.offsets[i + 1])
        return self._rows(a, b, jaccard_digits)

    def to_lists(self, jaccard_digits: int | None = None) -> list[list[tuple[Any, ...]]]:
        """One list of match tuples per query (see :meth:`for_query`)."""
        rows = self._rows(0, self.size, jaccard_digits)
        bounds = self.offsets.tolist()
        return [rows[a:b] for a, b in zip(bounds[:-1], bounds[1:], strict=True)]

    def _rows(self, a: int, b: int, digits: int | None) -> list[tuple[Any, ...]]:
        cols = [self.ids[a:b].tolist(), self.distances[a:b].tolist()]
        if self.jaccards is not None:
            jac = self.jaccards[a:b].tolist()
            cols.append(jac if digits is None else [round(j, digits) for j in jac])
        return list(zip(*cols, strict=True))

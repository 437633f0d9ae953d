"""What every index backend shares: the local :class:`neardup.index.Index` and the Redis
:class:`neardup.index.redis.RedisIndex` answer the same queries in the same forms.

:class:`IndexBase` holds the layout's distance and blocks, the context manager, and the list and
mask forms of a query built on the backend's own ``query_arrays`` and ``_probe``;
:func:`check_query_distance` is the one check of a query's distance.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, TypeVar

import numpy as np

from neardup.core.bits import as_fingerprints

if TYPE_CHECKING:
    from neardup.core.layout import Layout

__all__ = ["IndexBase", "check_query_distance"]

_I = TypeVar("_I", bound="IndexBase")


def check_query_distance(
    distance: Any,
    limit: int,
    *,
    name: str = "query distance",
    of: str = "the index's distance",
    fix: str = "create the index with a larger distance",
) -> int:
    """``distance`` (None: ``limit``) as an int in ``[0, limit]`` bits.

    Raises
    ------
    ValueError
        ``"{name} must be an integer between 0 and {of} {limit} (got ...); {fix}"``.
    """
    k = limit if distance is None else distance
    if isinstance(k, bool) or not isinstance(k, (int, np.integer)) or not 0 <= k <= limit:
        raise ValueError(
            f"{name} must be an integer between 0 and {of} {limit} (got {distance!r}); {fix}"
        )
    return int(k)


class IndexBase:
    """Base of the index backends.

    A backend sets ``layout`` and ``path`` and defines ``close()``,
    ``query_arrays(fingerprints, distance)`` (an :class:`~neardup.index.matches.IndexMatches`
    sorted by query) and ``_probe(fingerprints, distance, threads)``, whose first array is the
    query index of each match.
    """

    layout: Layout
    path: str

    def __enter__(self: _I) -> _I:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @property
    def distance(self) -> int:
        """Largest query distance (bits, inclusive)."""
        return self.layout.distance

    @property
    def blocks(self) -> int:
        return self.layout.blocks

    def _query_distance(self, distance: Any) -> int:
        """A query's distance in bits, at most the index's (the default)."""
        return check_query_distance(distance, self.distance)

    def query(
        self, fingerprints: Sequence[int] | np.ndarray, distance: int | None = None
    ) -> list[list[tuple[Any, int]]]:
        """For each query fingerprint, the list of ``(id, distance)`` within ``distance`` bits,
        nearest first (see :meth:`query_arrays` for the order and the parameters)."""
        q = as_fingerprints(fingerprints, "fingerprints")
        m = self.query_arrays(q, distance)
        bounds = np.searchsorted(m.query_index, np.arange(len(q) + 1)).tolist()
        ids = m.id.tolist()
        dist = m.distance.tolist()
        return [
            list(zip(ids[a:b], dist[a:b], strict=True))
            for a, b in zip(bounds[:-1], bounds[1:], strict=True)
        ]

    def dedup_mask(
        self, fingerprints: Sequence[int] | np.ndarray, distance: int | None = None
    ) -> np.ndarray:
        """Boolean array, True where a fingerprint is within ``distance`` bits of an indexed one."""
        q = as_fingerprints(fingerprints, "fingerprints")
        qi = self._probe(q, distance, None)[0]
        mask = np.zeros(len(q), dtype=bool)
        mask[qi] = True
        return mask

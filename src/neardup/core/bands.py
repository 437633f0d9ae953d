"""Candidates by MinHash bands, what MinHash-LSH dedups use: ``b`` bands of ``r`` MinHash rows
each; two documents are candidates when all ``r`` rows of one band agree.

A pair at Jaccard ``J`` agrees on a row with probability ``J`` and becomes a candidate with
probability ``1 - (1 - J**r)**b`` (the S-curve). :func:`band_scheme` picks ``b`` and ``r`` from
the threshold: a pair at the threshold is a candidate with probability at least
:data:`RECALL`, with as many rows as fit in :data:`BUDGET` values a document (the steeper the
curve, the fewer pairs under the threshold are candidates). Unlike prefix filtering
(:mod:`neardup.core.prefix`) a pair at the threshold may be missed, and pages that share a
template (Jaccard about 0.5) are candidates of each other with a probability the curve gives
(0.30 at ``J = 0.53`` for the default 30 x 7 at 0.8): a templated family stays quadratic.

The band keys are 64-bit (:mod:`neardup.core.band_kernels`); a document's keys are held in a
:class:`~neardup.core.prefix.PrefixSets` (``b`` a document, in band order), so the keep/drop
pass, the staged key groups and the families of prefix filtering serve bands unchanged, with
only the size filter (no positional one: a band's place says nothing about the overlap).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from neardup.core import band_kernels as BK
from neardup.core.prefix import PrefixSets
from neardup.core.similarity import ShingleSets, run_chunks

__all__ = ["BUDGET", "RECALL", "Bands", "band_scheme", "band_sets", "candidate_probability"]

#: The least probability that a pair at the threshold becomes a candidate (default scheme).
RECALL = 0.999
#: MinHash values a document (``b * r``) the default scheme stays within: each band hashes
#: every shingle once more.
BUDGET = 256
#: The most rows a band may have (``r``), and the most bands.
MAX_ROWS = 64
MAX_BANDS = 4096


@dataclass(frozen=True)
class Bands:
    """MinHash band candidates with a scheme of their own: ``candidates=Bands(bands=20,
    rows=5)`` (``candidates="bands"`` is ``Bands()``); what is not given is chosen from the
    threshold (:func:`band_scheme`).

    Examples
    --------
    >>> Bands().scheme(0.8), Bands(rows=5).scheme(0.8)
    ((30, 7), (18, 5))
    """

    bands: int | None = None
    rows: int | None = None

    def scheme(self, t: float) -> tuple[int, int]:
        """``(bands, rows)`` at threshold ``t`` (:func:`band_scheme`)."""
        return band_scheme(t, self.bands, self.rows)


def candidate_probability(j: float, bands: int, rows: int) -> float:
    """The probability that a pair at Jaccard ``j`` shares a band: ``1 - (1 - j**r)**b``."""
    return 1.0 - (1.0 - j**rows) ** bands


def _bands_for(t: float, rows: int) -> int:
    """The fewest bands of ``rows`` rows that find a pair at ``t`` with probability
    :data:`RECALL`."""
    p = t**rows
    if p >= 1.0:
        return 1
    if p <= 0.0:
        return MAX_BANDS
    return max(1, math.ceil(math.log(1.0 - RECALL) / math.log1p(-p) - 1e-9))


def band_scheme(t: float, bands: int | None = None, rows: int | None = None) -> tuple[int, int]:
    """``(b, r)`` for threshold ``t``: both given are taken as they are; ``rows`` alone gets
    the fewest bands that find a pair at ``t`` with probability :data:`RECALL`; ``bands``
    alone the most rows that still do (at least 1); neither, the most rows whose bands fit
    in :data:`BUDGET` values (``b * r``), with those bands.

    Raises
    ------
    ValueError
        When ``bands`` or ``rows`` is out of range (1 to :data:`MAX_BANDS`, 1 to
        :data:`MAX_ROWS`).
    """
    for name, v, most in (("bands", bands, MAX_BANDS), ("rows", rows, MAX_ROWS)):
        if v is not None and not 1 <= int(v) <= most:
            raise ValueError(f"{name} must be an integer from 1 to {most}, not {v!r}")
    if bands is not None and rows is not None:
        return int(bands), int(rows)
    if rows is not None:
        return min(MAX_BANDS, _bands_for(t, int(rows))), int(rows)
    if bands is not None:
        fits = [r for r in range(1, MAX_ROWS + 1) if _bands_for(t, r) <= int(bands)]
        return int(bands), max(fits, default=1)
    fits = [r for r in range(1, MAX_ROWS + 1) if _bands_for(t, r) * r <= BUDGET]
    r = max(fits, default=1)
    return min(MAX_BANDS, _bands_for(t, r)), r


def band_sets(
    sets: ShingleSets,
    bands: int,
    rows: int,
    threads: int = 1,
    take: np.ndarray | None = None,
) -> PrefixSets:
    """The band keys of ``sets``: ``bands`` uint64 keys a document, in band order, none for an
    empty set or one left out by ``take`` (bool, n)."""
    n = len(sets)
    has = sets.sizes > 0
    if take is not None:
        has &= np.asarray(take, dtype=bool)
    poff = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(np.where(has, bands, 0), out=poff[1:])
    out = np.empty(int(poff[-1]), dtype=np.uint64)
    run_chunks(
        lambda lo, hi: BK.band_keys(sets.offsets, sets.keys, poff, bands, rows, out, lo, hi),
        n,
        threads,
    )
    return PrefixSets(poff, out)

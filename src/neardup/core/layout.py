"""Block layouts and table permutations for the Hamming-distance problem.

The 64 bits are split into ``blocks`` (m) contiguous blocks numbered from the top: block 0 ("A")
holds the most significant bits. With ``64 = q*m + r`` the first ``r`` blocks are ``q + 1`` bits
wide and the rest ``q`` bits (m=6 -> 11,11,11,11,10,10). Two fingerprints within ``distance`` (k)
bits agree on at least m-k blocks, so for every combination of m-k *leading* blocks (in
lexicographic order: A B C, A B D, ..., D E F) there is a table whose key puts those blocks first,
in their original order, followed by the remaining blocks in their original order.
"""

from __future__ import annotations

import functools
import itertools
import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import NamedTuple

import numpy as np

from neardup import config
from neardup.config import MAX_TABLES
from neardup.core import kernels

BITS = 64
_FULL = (1 << 64) - 1


def block_widths(blocks: int) -> tuple[int, ...]:
    """Widths in bits of the ``blocks`` blocks, from the most significant block down."""
    if not 1 <= blocks <= BITS:
        raise ValueError(f"blocks must be between 1 and 64 (got blocks={blocks})")
    q, r = divmod(BITS, blocks)
    return tuple(q + 1 if i < r else q for i in range(blocks))


def count_tables(blocks: int, distance: int) -> int:
    """Number of tables C(blocks, blocks - distance) a layout needs."""
    return math.comb(blocks, blocks - distance)


def validate(blocks: int, distance: int) -> None:
    """Raise ``ValueError`` with a one-line fix unless ``0 <= distance < blocks <= 64``."""
    if isinstance(distance, bool) or not isinstance(distance, (int, np.integer)):
        raise ValueError(f"distance must be an integer (got {distance!r})")
    if isinstance(blocks, bool) or not isinstance(blocks, (int, np.integer)):
        raise ValueError(f"blocks must be an integer (got {blocks!r})")
    if distance < 0:
        raise ValueError(f"distance must be >= 0 (got distance={distance})")
    if distance >= BITS:
        raise ValueError(f"distance must be < 64 (got distance={distance})")
    if blocks > BITS:
        raise ValueError(f"blocks must be <= 64 (got blocks={blocks}); use blocks <= 64")
    if blocks <= distance:
        raise ValueError(
            f"blocks must be > distance (got blocks={blocks}, distance={distance}); "
            f"use blocks >= {distance + 1}"
        )
    n = count_tables(blocks, distance)
    if n > MAX_TABLES:
        raise ValueError(
            f"blocks={blocks} with distance={distance} needs {n} tables (limit {MAX_TABLES}); "
            f"use fewer blocks or leave blocks unset to choose automatically"
        )


@dataclass(frozen=True)
class Table:
    """One permuted table: which blocks lead, and the bit segments that move them.

    ``segments`` are ``(src_low_bit, width, dst_low_bit)`` triples: bits ``src..src+width-1`` of a
    fingerprint go to bits ``dst..dst+width-1`` of the permuted key. ``prefix_bits`` is the width
    of the leading blocks, which sit in the top bits of the key.
    """

    index: int
    leading: tuple[int, ...]
    order: tuple[int, ...]
    segments: tuple[tuple[int, int, int], ...]
    prefix_bits: int
    lead_mask: int
    check_masks: tuple[int, ...]


@dataclass(frozen=True)
class Layout:
    """A split of 64 bits into ``blocks`` blocks for searching within ``distance`` bits."""

    blocks: int
    distance: int
    widths: tuple[int, ...] = field(init=False, repr=False)
    lows: tuple[int, ...] = field(init=False, repr=False)

    def __post_init__(self) -> None:
        validate(self.blocks, self.distance)
        object.__setattr__(self, "blocks", int(self.blocks))
        object.__setattr__(self, "distance", int(self.distance))
        widths = block_widths(self.blocks)
        lows, top = [], BITS
        for w in widths:
            top -= w
            lows.append(top)
        object.__setattr__(self, "widths", widths)
        object.__setattr__(self, "lows", tuple(lows))

    @property
    def n_tables(self) -> int:
        return count_tables(self.blocks, self.distance)

    def block_mask(self, b: int) -> int:
        """Bit mask (as a Python int) of block ``b`` (0 = most significant)."""
        return ((1 << self.widths[b]) - 1) << self.lows[b]

    @property
    def tables(self) -> tuple[Table, ...]:
        return _tables(self.blocks, self.distance)

    def table_masks(self, t: int) -> list[int]:
        """Table ``t``'s permutation as contiguous block masks in key order (popcounts sum to 64)."""
        return [self.block_mask(b) for b in self.tables[t].order]

    def apply(self, x: np.ndarray, t: int) -> np.ndarray:
        """Permute uint64 values into table ``t``'s key order (leading blocks in the top bits)."""
        return _move(np.ascontiguousarray(x, dtype=np.uint64), self.tables[t].segments)

    def reverse(self, y: np.ndarray, t: int) -> np.ndarray:
        """Undo :meth:`apply`: ``reverse(apply(x, t), t) == x``."""
        inverse = tuple((dst, w, src) for src, w, dst in self.tables[t].segments)
        return _move(np.ascontiguousarray(y, dtype=np.uint64), inverse)

    def apply_mask(self, mask: int, t: int) -> int:
        """Where the bits of ``mask`` land in table ``t``'s key."""
        return int(self.apply(np.array([mask], dtype=np.uint64), t)[0])


def _move(x: np.ndarray, segments: tuple[tuple[int, int, int], ...]) -> np.ndarray:
    src = np.array([s for s, _, _ in segments], dtype=np.uint64)
    mask = np.array([((1 << w) - 1) & _FULL for _, w, _ in segments], dtype=np.uint64)
    dst = np.array([d for _, _, d in segments], dtype=np.uint64)
    return kernels._permute(x, src, mask, dst)


@functools.lru_cache(maxsize=64)
def _tables(blocks: int, distance: int) -> tuple[Table, ...]:
    widths = block_widths(blocks)
    lows = [BITS - sum(widths[: b + 1]) for b in range(blocks)]
    masks = [((1 << widths[b]) - 1) << lows[b] for b in range(blocks)]
    out = []
    for t, leading in enumerate(itertools.combinations(range(blocks), blocks - distance)):
        rest = tuple(b for b in range(blocks) if b not in leading)
        order = leading + rest
        segments: list[list[int]] = []
        top = BITS
        for pos, b in enumerate(order):
            w = widths[b]
            top -= w
            # merge with the previous segment when both source and destination are adjacent, but
            # never across the end of the leading blocks, so the prefix stays its own segments
            boundary = pos == len(leading)
            if (
                segments
                and not boundary
                and segments[-1][0] == lows[b] + w
                and segments[-1][2] == top + w
            ):
                segments[-1][0] = lows[b]
                segments[-1][1] += w
                segments[-1][2] = top
            else:
                segments.append([lows[b], w, top])
        pbits = sum(widths[b] for b in leading)
        lead_mask = 0
        for b in leading:
            lead_mask |= masks[b]
        last = leading[-1]
        check = tuple(masks[b] for b in range(last) if b not in leading)
        out.append(
            Table(
                index=t,
                leading=leading,
                order=order,
                segments=tuple((s, w, d) for s, w, d in segments),
                prefix_bits=pbits,
                lead_mask=lead_mask,
                check_masks=check,
            )
        )
    return tuple(out)


# Cost model for choosing blocks, in units of one candidate check (xor + popcount + compare).
# Measured with bench/find_all.py --sweep (N = 1M and 10M, distances 3, 6, 8): one fingerprint
# costs about 60 checks per table (build key, sort, and the scan's random gather when runs are
# short), so 10M at distance 6 takes 8 blocks (25.6 s) rather than 9 (67.3 s) and 1M at
# distance 8 takes 10 (8.9 s) rather than 11 (16.1 s). The fixed cost per table keeps tiny
# inputs on ``distance + 1`` blocks, the fastest measured at N = 100..10k.
_SORT_COST = 60.0
_TABLE_COST = 20_000.0


def estimated_cost(n: int, blocks: int, distance: int) -> float:
    """Estimated work of a batch search of ``n`` random fingerprints, in candidate-check units.

    Each table costs one bucketing pass over ``n`` keys plus about ``n**2 / 2**(p+1)`` candidate
    checks, ``p`` being its leading bits (capped by what fits beside a row index).
    """
    q, r = divmod(BITS, blocks)
    j = blocks - distance
    idx_bits = max(1, (max(n, 2) - 1).bit_length())
    cand = 0.0
    # number of tables with i wide (q+1 bit) blocks among the j leading ones
    for i in range(max(0, j - (blocks - r)), min(r, j) + 1):
        tables = math.comb(r, i) * math.comb(blocks - r, j - i)
        p = min(j * q + i, BITS - idx_bits)
        cand += tables * (float(n) * float(n) / 2.0 ** (p + 1))
    ntab = count_tables(blocks, distance)
    return ntab * (_TABLE_COST + _SORT_COST * n) + cand


def choose_blocks(n: int, distance: int) -> int:
    """The number of blocks with the least :func:`estimated_cost` for ``n`` fingerprints.

    Tries every ``blocks`` from ``distance + 1`` up to 64 whose table count stays within
    ``MAX_TABLES``. Small inputs get few, wide blocks (few tables); large inputs get enough blocks
    that the leading blocks of a table span about ``log2(n)`` bits or more.
    """
    validate(distance + 1, distance)
    best, best_cost = distance + 1, math.inf
    for m in range(distance + 1, BITS + 1):
        if count_tables(m, distance) > MAX_TABLES:
            break
        cost = estimated_cost(n, m, distance)
        if cost < best_cost:
            best, best_cost = m, cost
    return best


def choose_query_blocks(n: int, distance: int) -> int:
    """Blocks minimising the estimated cost of one query against ``n`` fingerprints.

    A query probes every table (a fixed cost each) and checks about ``n / 2**p`` candidates per
    table, ``p`` being the table's leading bits. More blocks mean longer prefixes (fewer
    candidates) but more tables (``C(blocks, distance)``, each 8 bytes per fingerprint).
    """
    validate(distance + 1, distance)
    best, best_cost = distance + 1, math.inf
    for m in range(distance + 1, BITS + 1):
        if count_tables(m, distance) > min(MAX_TABLES, config.MAX_INDEX_TABLES):
            break
        q, r = divmod(BITS, m)
        j = m - distance
        cost = 0.0
        for i in range(max(0, j - (m - r)), min(r, j) + 1):
            tables = math.comb(r, i) * math.comb(m - r, j - i)
            cost += tables * (config.PROBE_COST + n / 2.0 ** (j * q + i))
        if cost < best_cost:
            best, best_cost = m, cost
    return best


def _u64(values: Sequence[int]) -> np.ndarray:
    return np.array([v & ((1 << 64) - 1) for v in values], dtype=np.uint64)


class TableSpecs(NamedTuple):
    """Tables packed as arrays for the kernels, one row per table.

    Segments are in fingerprint-bit coordinates (bit 0 least significant): bits
    ``src..src+width-1`` of a fingerprint move to bits ``dst..dst+width-1`` of the key, where
    ``mask = 2**width - 1``. ``lead_mask`` and ``chk`` are in fingerprint-bit coordinates too
    (the scan XORs fingerprints); ``pbits`` counts the key's leading (top) bits.
    """

    seg_src: np.ndarray
    seg_mask: np.ndarray
    seg_dst: np.ndarray
    nseg: np.ndarray
    pbits: np.ndarray
    lead_mask: np.ndarray
    chk: np.ndarray
    nchk: np.ndarray


def pack_tables(tables: Sequence[Table]) -> TableSpecs:
    """Pack ``tables`` (from :attr:`Layout.tables`) into one :class:`TableSpecs`."""
    ns = max(len(t.segments) for t in tables)
    nc = max(1, max(len(t.check_masks) for t in tables))
    T = len(tables)
    seg_src = np.zeros((T, ns), dtype=np.uint64)
    seg_mask = np.zeros((T, ns), dtype=np.uint64)
    seg_dst = np.zeros((T, ns), dtype=np.uint64)
    chk = np.zeros((T, nc), dtype=np.uint64)
    for r, t in enumerate(tables):
        seg = t.segments
        seg_src[r, : len(seg)] = [s for s, _, _ in seg]
        seg_mask[r, : len(seg)] = _u64([(1 << w) - 1 for _, w, _ in seg])
        seg_dst[r, : len(seg)] = [d for _, _, d in seg]
        chk[r, : len(t.check_masks)] = _u64(t.check_masks)
    nseg = np.array([len(t.segments) for t in tables], dtype=np.int64)
    return TableSpecs(
        seg_src,
        seg_mask,
        seg_dst,
        nseg,
        np.array([t.prefix_bits for t in tables], dtype=np.int64),
        _u64([t.lead_mask for t in tables]),
        chk,
        np.array([len(t.check_masks) for t in tables], dtype=np.int64),
    )

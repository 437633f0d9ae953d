"""Block layouts, their tables packed for the kernels, and the cost model that picks a layout.

The 64 bits are split into ``blocks`` (m) contiguous blocks numbered from the top: block 0 ("A")
holds the most significant bits. With ``64 = q*m + r`` the first ``r`` blocks are ``q + 1`` bits
wide and the rest ``q`` bits (m=6 -> 11,11,11,11,10,10). Two fingerprints within ``distance`` (k)
bits agree on at least m-k blocks, so for every combination of m-k *leading* blocks (in
lexicographic order: A B C, A B D, ..., D E F) there is a table whose key puts those blocks first,
in their original order, followed by the remaining blocks in their original order.

Two coordinate systems, both numbering bit 0 as the least significant:

*fingerprint bits*
    positions in the fingerprint itself. The batch scan XORs two fingerprints, so its masks
    (``TableSpec.lead_fp``, ``TableSpec.chk_fp``) are in fingerprint bits.
*key bits*
    positions in a table's key, the fingerprint with its blocks moved into the table's order
    (leading blocks in the top ``prefix_bits`` bits). Sorted tables and permuted queries are
    XORed as keys, so the probe's masks (``TableSpec.lead_key``, ``TableSpec.chk_key``) are in
    key bits. ``Layout.apply`` maps fingerprint bits to key bits and ``Layout.reverse`` back.
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

    ``segments`` are ``(src_low_bit, width, dst_low_bit)`` triples: fingerprint bits
    ``src..src+width-1`` go to key bits ``dst..dst+width-1``. ``prefix_bits`` is the width of the
    leading blocks, which sit in the top bits of the key. ``lead_mask`` (the leading blocks) and
    ``check_masks`` (each block outside the table that precedes its last leading block) are in
    fingerprint bits: a pair belongs to this table when its XOR is zero under ``lead_mask`` and
    nonzero under every check mask.
    """

    index: int
    leading: tuple[int, ...]
    order: tuple[int, ...]
    segments: tuple[tuple[int, int, int], ...]
    prefix_bits: int
    lead_mask: int
    check_masks: tuple[int, ...]

    def key_mask(self, mask: int) -> int:
        """Where the fingerprint bits of ``mask`` land in this table's key (a key-bit mask)."""
        out = 0
        for src, w, dst in self.segments:
            out |= ((mask >> src) & ((1 << w) - 1)) << dst
        return out


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

    @property
    def spec(self) -> TableSpec:
        """Every table packed for the kernels (built once per ``(blocks, distance)``)."""
        return _spec(self.blocks, self.distance)

    def apply(self, x: np.ndarray, t: int) -> np.ndarray:
        """Permute uint64 values into table ``t``'s key order (leading blocks in the top bits)."""
        return kernels._permute(np.ascontiguousarray(x, dtype=np.uint64), self.spec, t, False)

    def reverse(self, y: np.ndarray, t: int) -> np.ndarray:
        """Undo :meth:`apply`: ``reverse(apply(x, t), t) == x``."""
        return kernels._permute(np.ascontiguousarray(y, dtype=np.uint64), self.spec, t, True)

    def apply_mask(self, mask: int, t: int) -> int:
        """Where the bits of ``mask`` (fingerprint bits) land in table ``t``'s key (key bits)."""
        return self.tables[t].key_mask(int(mask) & _FULL)


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


class TableSpec(NamedTuple):
    """Every table of a layout packed as arrays for the kernels, one row per table.

    numba passes a NamedTuple of arrays to a kernel as one argument; a kernel reads row ``t``.
    Key building moves fingerprint bits ``seg_src[t, s]..+width`` to key bits
    ``seg_dst[t, s]..+width`` (``seg_mask[t, s] = 2**width - 1``, ``s < nseg[t]``); the table's
    prefix is the top ``pbits[t]`` key bits. The ownership masks of :class:`Table` come twice:
    ``lead_fp``/``chk_fp`` in fingerprint bits (for ``fp ^ fp``, the batch scan) and
    ``lead_key``/``chk_key`` in key bits (for ``key ^ key``, probing sorted tables); the first
    ``nchk[t]`` columns of ``chk_*`` are used. ``identity[t]`` is True when the key equals the
    fingerprint (table 0 always is).
    """

    seg_src: np.ndarray  #: (T, S) uint64, low bit of each segment in fingerprint bits
    seg_mask: np.ndarray  #: (T, S) uint64, ``2**width - 1``
    seg_dst: np.ndarray  #: (T, S) uint64, low bit of each segment in key bits
    nseg: np.ndarray  #: (T,) int64
    pbits: np.ndarray  #: (T,) int64, prefix width in bits
    lead_fp: np.ndarray  #: (T,) uint64, leading blocks in fingerprint bits
    chk_fp: np.ndarray  #: (T, C) uint64, check masks in fingerprint bits
    lead_key: np.ndarray  #: (T,) uint64, leading blocks in key bits (the top ``pbits``)
    chk_key: np.ndarray  #: (T, C) uint64, check masks in key bits
    nchk: np.ndarray  #: (T,) int64
    identity: np.ndarray  #: (T,) bool


#: Former name of :class:`TableSpec`.
TableSpecs = TableSpec


def _u64(values: Sequence[int]) -> np.ndarray:
    return np.array([v & _FULL for v in values], dtype=np.uint64)


def pack_tables(tables: Sequence[Table]) -> TableSpec:
    """Pack ``tables`` (from :attr:`Layout.tables`) into one :class:`TableSpec`.

    :attr:`Layout.spec` keeps one packed copy per layout; call this for a subset of tables.
    """
    ns = max(len(t.segments) for t in tables)
    nc = max(1, max(len(t.check_masks) for t in tables))
    rows = len(tables)
    seg_src = np.zeros((rows, ns), dtype=np.uint64)
    seg_mask = np.zeros((rows, ns), dtype=np.uint64)
    seg_dst = np.zeros((rows, ns), dtype=np.uint64)
    chk_fp = np.zeros((rows, nc), dtype=np.uint64)
    chk_key = np.zeros((rows, nc), dtype=np.uint64)
    for r, t in enumerate(tables):
        seg = t.segments
        seg_src[r, : len(seg)] = [s for s, _, _ in seg]
        seg_mask[r, : len(seg)] = _u64([(1 << w) - 1 for _, w, _ in seg])
        seg_dst[r, : len(seg)] = [d for _, _, d in seg]
        chk_fp[r, : len(t.check_masks)] = _u64(t.check_masks)
        chk_key[r, : len(t.check_masks)] = _u64([t.key_mask(m) for m in t.check_masks])
    return TableSpec(
        seg_src=seg_src,
        seg_mask=seg_mask,
        seg_dst=seg_dst,
        nseg=np.array([len(t.segments) for t in tables], dtype=np.int64),
        pbits=np.array([t.prefix_bits for t in tables], dtype=np.int64),
        lead_fp=_u64([t.lead_mask for t in tables]),
        chk_fp=chk_fp,
        lead_key=_u64([t.key_mask(t.lead_mask) for t in tables]),
        chk_key=chk_key,
        nchk=np.array([len(t.check_masks) for t in tables], dtype=np.int64),
        identity=np.array([all(s == d for s, _, d in t.segments) for t in tables], dtype=bool),
    )


@functools.lru_cache(maxsize=64)
def _spec(blocks: int, distance: int) -> TableSpec:
    return pack_tables(_tables(blocks, distance))


# -- the cost model ------------------------------------------------------------------------------
# One unit is one candidate check (xor + popcount + compare). The constants live in config
# (TABLE_COST, KEY_COST for batch search, PROBE_COST for queries), where their measurements are
# described; both choices below weigh them against the candidates a longer prefix saves.


def prefix_classes(blocks: int, distance: int) -> list[tuple[int, int]]:
    """``(tables, prefix_bits)`` for each prefix width occurring among the layout's tables.

    With ``64 = q*m + r`` a table whose ``m - k`` leading blocks include ``i`` of the ``r`` wide
    blocks has a prefix of ``(m - k) * q + i`` bits; ``C(r, i) * C(m - r, m - k - i)`` tables do.
    """
    q, r = divmod(BITS, blocks)
    j = blocks - distance
    return [
        (math.comb(r, i) * math.comb(blocks - r, j - i), j * q + i)
        for i in range(max(0, j - (blocks - r)), min(r, j) + 1)
    ]


def estimated_cost(n: int, blocks: int, distance: int) -> float:
    """Estimated work of a batch search of ``n`` random fingerprints, in candidate-check units.

    Each table costs a fixed ``config.TABLE_COST``, ``config.KEY_COST`` per fingerprint (build the
    key, sort, scan) and about ``n**2 / 2**(p+1)`` candidate checks, ``p`` being its leading bits
    (capped by what fits beside a row index).
    """
    idx_bits = max(1, (max(n, 2) - 1).bit_length())
    cand = 0.0
    for tables, p in prefix_classes(blocks, distance):
        cand += tables * (float(n) * float(n) / 2.0 ** (min(p, BITS - idx_bits) + 1))
    ntab = count_tables(blocks, distance)
    return ntab * (config.TABLE_COST + config.KEY_COST * n) + cand


def estimated_query_cost(n: int, blocks: int, distance: int) -> float:
    """Estimated work of one query against ``n`` sorted fingerprints, in candidate-check units.

    A query probes every table (``config.PROBE_COST`` each) and checks about ``n / 2**p``
    candidates per table, ``p`` being the table's leading bits.
    """
    return sum(
        tables * (config.PROBE_COST + n / 2.0**p) for tables, p in prefix_classes(blocks, distance)
    )


def _cheapest(cost, n: int, distance: int, max_tables: int) -> int:
    validate(distance + 1, distance)
    best, best_cost = distance + 1, math.inf
    for m in range(distance + 1, BITS + 1):
        if count_tables(m, distance) > max_tables:
            break
        c = cost(n, m, distance)
        if c < best_cost:
            best, best_cost = m, c
    return best


def choose_blocks(n: int, distance: int) -> int:
    """The number of blocks with the least :func:`estimated_cost` for ``n`` fingerprints.

    Tries every ``blocks`` from ``distance + 1`` up to 64 whose table count stays within
    ``MAX_TABLES``. Small inputs get few, wide blocks (few tables); large inputs get enough blocks
    that the leading blocks of a table span about ``log2(n)`` bits or more.
    """
    return _cheapest(estimated_cost, n, distance, MAX_TABLES)


def choose_query_blocks(n: int, distance: int) -> int:
    """Blocks minimising :func:`estimated_query_cost` for ``n`` indexed fingerprints.

    More blocks mean longer prefixes (fewer candidates) but more tables (``C(blocks, distance)``,
    each 8 bytes per fingerprint), at most ``config.MAX_INDEX_TABLES``.
    """
    return _cheapest(estimated_query_cost, n, distance, min(MAX_TABLES, config.MAX_INDEX_TABLES))

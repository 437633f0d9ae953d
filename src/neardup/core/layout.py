"""Block layouts, their tables packed for the kernels, and the schemes of a batch search.

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

The cost model that chooses among layouts and schemes is :mod:`neardup.core.cost`; its public
names (``choose_blocks``, ``choose_scheme``, ...) can still be imported from here.
"""

from __future__ import annotations

import functools
import itertools
import math
from dataclasses import dataclass, field

import numpy as np

from neardup.core import kernels
from neardup.core.tables import TableSpec, pack_tables

#: Largest number of permuted tables a layout may need before it is refused as unusable.
MAX_TABLES = 100_000

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
        return kernels.permute(np.ascontiguousarray(x, dtype=np.uint64), self.spec, t, False)

    def reverse(self, y: np.ndarray, t: int) -> np.ndarray:
        """Undo :meth:`apply`: ``reverse(apply(x, t), t) == x``."""
        return kernels.permute(np.ascontiguousarray(y, dtype=np.uint64), self.spec, t, True)

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


@functools.lru_cache(maxsize=64)
def _spec(blocks: int, distance: int) -> TableSpec:
    return pack_tables(_tables(blocks, distance))


# -- schemes: how a batch search covers every pair ------------------------------------------------


@dataclass(frozen=True)
class Part:
    """Fingerprint bits ``low .. low+width-1`` split into ``blocks`` blocks (numbered from the
    top, the first ``width % blocks`` one bit wider), searched for the pairs whose distance
    within these bits is at most ``threshold``: such a pair agrees on at least
    ``blocks - threshold`` of the blocks, so the part's tables are those combinations."""

    low: int
    width: int
    blocks: int
    threshold: int

    @property
    def widths(self) -> tuple[int, ...]:
        q, r = divmod(self.width, self.blocks)
        return tuple(q + 1 if i < r else q for i in range(self.blocks))

    @property
    def lows(self) -> tuple[int, ...]:
        top = self.low + self.width
        return tuple(top - sum(self.widths[: b + 1]) for b in range(self.blocks))

    @property
    def mask(self) -> int:
        return ((1 << self.width) - 1) << self.low

    @property
    def n_tables(self) -> int:
        return math.comb(self.blocks, self.threshold)


@dataclass(frozen=True)
class Scheme:
    """One or more disjoint parts of the 64 bits that together find every pair within
    ``distance`` bits, each pair once.

    The thresholds plus one sum to more than ``distance``, so a pair within ``distance`` is
    within the threshold of some part (pigeonhole; Multi-Index Hashing, Norouzi et al. 2012, and
    the per-part thresholds of GPH, Qin et al. 2018). It belongs to the first such part, and
    there to the first table (combination of the part's blocks) it agrees on. A single part of
    all 64 bits with threshold ``distance`` is the :class:`Layout` of that many blocks.
    """

    distance: int
    parts: tuple[Part, ...]

    def __post_init__(self) -> None:
        if sum(p.threshold + 1 for p in self.parts) <= self.distance:
            raise ValueError(f"part thresholds do not cover distance {self.distance}: {self}")
        used = 0
        for p in self.parts:
            if not (0 <= p.threshold < p.blocks <= p.width and 0 <= p.low) or used & p.mask:
                raise ValueError(f"invalid part {p} of {self}")
            if p.low + p.width > BITS:
                raise ValueError(f"part {p} goes past bit 63")
            used |= p.mask

    @classmethod
    def of(cls, layout: Layout) -> Scheme:
        """The single-part scheme of a :class:`Layout`."""
        return cls(layout.distance, (Part(0, BITS, layout.blocks, layout.distance),))

    def describe(self) -> str:
        if len(self.parts) == 1:
            p = self.parts[0]
            return f"{p.blocks} blocks / {p.n_tables} tables"
        return " + ".join(
            f"[{p.width} bits: {p.blocks} blocks, <= {p.threshold}]" for p in self.parts
        )

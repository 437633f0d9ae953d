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
from dataclasses import dataclass, field

import numpy as np

from neardup import config
from neardup.config import MAX_TABLES
from neardup.core import kernels
from neardup.core.tables import TableSpec, pack_tables
from neardup.core.tree_kernels import DIGIT, MIN_DIGIT

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


# -- the cost model ------------------------------------------------------------------------------
# Batch search (neardup.core.engine) walks the tables of each part as a tree of counting-sort
# splits; its cost is estimated in nanoseconds from constants measured on the engine's kernels
# (config.GROUP_NS, SPLIT_NS, SPLIT_MEM_NS, COUNTER_NS, NODE_NS, ROW_NS, PAIR_NS; see config). For
# uniform fingerprints a node of R members splits into 2**w buckets of R / 2**w; the pairs of a
# bucket follow the Poisson expectation R**2 / 2, which the formulas extend to R < 2. Queries
# against a stored index use PROBE_COST, in candidate checks (binary search + call).


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


_GRID = 2  # grid points per doubling of the node size
_LOW, _HIGH = -24, 44  # log2 node sizes on the grid
_LG = np.arange(_LOW * _GRID, _HIGH * _GRID + 1) / _GRID


def _brute(r: np.ndarray) -> np.ndarray:
    # a bucket of Poisson(r) members is visited when it holds a pair (probability 1-e^-r(1+r))
    visit = -np.expm1(-r) - r * np.exp(-r)
    return visit * config.NODE_NS + r * config.ROW_NS + r * r * (0.5 * config.PAIR_NS)


_CONSTANTS = ("GROUP_NS", "SPLIT_NS", "SPLIT_MEM_NS", "COUNTER_NS", "NODE_NS", "ROW_NS", "PAIR_NS")


def _constants() -> tuple[float, ...]:
    # part of every cache key below, so that changing a constant in config takes effect
    return tuple(getattr(config, name) for name in _CONSTANTS)


def _tree_model(part: Part) -> tuple[np.ndarray, np.ndarray]:
    return _tree_model_for(part, _constants())


@functools.lru_cache(maxsize=1024)
def _tree_model_for(part: Part, constants: tuple[float, ...]) -> tuple[np.ndarray, np.ndarray]:
    """Expected cost (ns) of the part's search over the log2-size grid of the input, and
    ``stop[i, p]``: the largest branch node (depth ``i``, next block ``>= p``) that the kernels
    check pair by pair rather than split."""
    m, j = part.blocks, part.blocks - part.threshold
    widths, lows = part.widths, part.lows
    r = np.exp2(_LG)
    brute = _brute(r)
    split = np.where(r * 12.0 > 1 << 21, config.SPLIT_MEM_NS, config.SPLIT_NS)
    stop = np.full((j + 2, m + 1), -1, dtype=np.int64)
    nodes: dict[tuple[int, int], np.ndarray] = {}

    def block(i: int, c: int) -> np.ndarray:
        # split a node of depth i by block c (digit by digit); children are depth i+1 after c
        cost = np.zeros_like(r)
        bits = 0
        while bits < widths[c]:
            d = min(DIGIT, widths[c] - bits)
            counters = 1 << min(max(d, MIN_DIGIT), lows[c] + widths[c] - bits)
            parts = np.minimum(np.exp2(bits), np.maximum(r, 1.0))
            cost += r * split + parts * (counters * config.COUNTER_NS + config.NODE_NS)
            bits += d
        if i == 0:  # a first block: its own pass over the input, started from Python
            cost += config.GROUP_NS
        shift = widths[c] * _GRID
        below = np.concatenate(
            (_brute(np.exp2(_LG[:shift] - widths[c])), node(i + 1, c + 1)[:-shift])
        )
        return cost + np.exp2(widths[c]) * below

    def node(i: int, p: int) -> np.ndarray:
        if (i, p) not in nodes:
            if i == j:
                nodes[(i, p)] = brute
            else:
                split_cost = sum(block(i, c) for c in range(p, m - j + i + 1))
                # checked pair by pair up to the first size where splitting wins
                wins = np.flatnonzero((brute > split_cost) & (r >= 2))
                stop[i, p] = max(1, int(r[wins[0] - 1])) if len(wins) else 1 << 62
                nodes[(i, p)] = np.minimum(brute, split_cost)
        return nodes[(i, p)]

    return node(0, 0), stop


def stop_sizes(part: Part) -> np.ndarray:
    """``stop[i, p]`` of the part's tree model (int64, ``(blocks - threshold + 2, blocks + 1)``)."""
    return _tree_model(part)[1]


def part_cost(n: int, part: Part) -> float:
    """Estimated time in nanoseconds (one thread) to search one part of ``n`` uniform
    fingerprints: one memory-bound split of the input per first block, splits in cache below,
    pairs checked in small buckets."""
    if n < 2:
        return 0.0
    cost = _tree_model(part)[0]
    x = min(max((math.log2(n) - _LOW) * _GRID, 0.0), len(_LG) - 1.001)
    i = int(x)
    return float(cost[i] + (cost[i + 1] - cost[i]) * (x - i))


def scheme_cost(n: int, scheme: Scheme) -> float:
    """Estimated time in nanoseconds (one thread) of a batch search with ``scheme``."""
    return sum(part_cost(n, p) for p in scheme.parts)


def estimated_cost(n: int, blocks: int, distance: int) -> float:
    """Estimated time in nanoseconds (one thread) of a batch search with that :class:`Layout`."""
    if not 0 <= distance < blocks <= BITS:
        raise ValueError(f"no layout of {blocks} blocks for distance {distance}")
    return part_cost(n, Part(0, BITS, blocks, distance))


def _best_part(
    size: int, low: int, width: int, threshold: int, patience: int = 3
) -> tuple[float, Part]:
    return _best_part_for(size, low, width, threshold, patience, _constants())


@functools.lru_cache(maxsize=4096)
def _best_part_for(
    size: int, low: int, width: int, threshold: int, patience: int, constants: tuple[float, ...]
) -> tuple[float, Part]:
    # blocks from threshold + 1 up, until the cost has risen ``patience`` times in a row
    best: tuple[float, Part] | None = None
    worse = 0
    for m in range(threshold + 1, width + 1):
        if math.comb(m, threshold) > MAX_TABLES:
            break
        p = Part(low, width, m, threshold)
        c = part_cost(size, p)
        if best is None or c < best[0]:
            best, worse = (c, p), 0
        elif (worse := worse + 1) >= patience:
            break
    assert best is not None
    return best


def choose_scheme(n: int, distance: int) -> Scheme:
    """The scheme with the least :func:`scheme_cost` for ``n`` fingerprints.

    Candidates: one part of all 64 bits (the layout of :func:`choose_blocks`); two parts of
    24-40 bits whose thresholds sum to ``distance - 1``, split about in proportion to their
    widths; from distance 8 three parts of 21-22 bits with thresholds summing to
    ``distance - 2``, split about evenly. Each part takes its own best number of blocks.
    """
    validate(distance + 1, distance)
    size = max(2, int(2 ** (round(math.log2(max(n, 2)) * 4) / 4)))  # a coarse grid, cached
    k = distance
    one = _best_part(size, 0, BITS, k, patience=6)
    cands = [(one[0], (one[1],))]
    if one[0] >= 0.999 * float(_brute(np.array([float(size)]))[0]):  # tiny: all pairs at once
        return Scheme(k, cands[0][1])
    for w1 in (32, 28, 36, 24, 40) if k >= 2 else ():
        near = round((k - 1) * w1 / BITS)
        for t1 in range(max(0, near - 1), min(k - 1, near + 1) + 1):
            a = _best_part(size, BITS - w1, w1, t1)
            b = _best_part(size, 0, BITS - w1, k - 1 - t1)
            cands.append((a[0] + b[0], (a[1], b[1])))
    if k >= 8:
        q, r = divmod(k - 2, 3)
        for ts in {(q + (r > 0), q + (r > 1), q), (q + 1, q - 1 + r, q), (q, q + r, q)}:
            ps = [
                _best_part(size, lo, w, t) for (lo, w), t in zip(((43, 21), (21, 22), (0, 21)), ts)
            ]
            cands.append((sum(c for c, _ in ps), tuple(p for _, p in ps)))
    best = min(cands, key=lambda c: c[0])
    # several parts only when clearly cheaper: the model's error between one part and several
    # was measured up to 1.4x at distance 3 (one part faster than estimated, two slower)
    if best[0] > config.SCHEME_MARGIN * cands[0][0]:
        best = cands[0]
    return Scheme(k, best[1])


def _cheapest(cost, n: int, distance: int, max_tables: int) -> int:
    validate(distance + 1, distance)
    best, best_cost = distance + 1, math.inf
    worse = 0
    for m in range(distance + 1, BITS + 1):
        if count_tables(m, distance) > max_tables:
            break
        c = cost(n, m, distance)
        if c < best_cost:
            best, best_cost, worse = m, c, 0
        elif (worse := worse + 1) >= 6:  # past the optimum costs grow (a few bumps aside)
            break
    return best


def estimated_query_cost(n: int, blocks: int, distance: int) -> float:
    """Estimated work of one query against ``n`` sorted fingerprints, in candidate-check units.

    A query probes every table (``config.PROBE_COST`` each) and checks about ``n / 2**p``
    candidates per table, ``p`` being the table's leading bits.
    """
    return sum(
        tables * (config.PROBE_COST + n / 2.0**p) for tables, p in prefix_classes(blocks, distance)
    )


def join_scheme(queries: int, n: int, layout: Layout, distance: int) -> Scheme | None:
    """The scheme for searching ``queries`` fingerprints together with ``n`` stored ones when
    that is estimated cheaper than probing the ``layout``'s sorted tables once per query
    (``config.PROBE_NS`` per unit of :func:`estimated_query_cost`), else None."""
    if queries < config.JOIN_FROM or n < 2:
        return None
    scheme = choose_scheme(n + queries, distance)
    probe = queries * estimated_query_cost(n, layout.blocks, layout.distance) * config.PROBE_NS
    return scheme if scheme_cost(n + queries, scheme) < probe else None


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

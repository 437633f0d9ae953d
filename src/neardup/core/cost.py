"""The cost model that picks layouts and schemes: estimated times of a batch search and of index
queries, and the choices made from them.

Batch search (neardup.core.engine) walks the tables of each part as a tree of counting-sort
splits; its cost is estimated in nanoseconds from constants measured on the engine's kernels
(GROUP_NS, SPLIT_NS, SPLIT_MEM_NS, COUNTER_NS, NODE_NS, ROW_NS, PAIR_NS, below). For
uniform fingerprints a node of R members splits into 2**w buckets of R / 2**w; the pairs of a
bucket follow the Poisson expectation R**2 / 2, which the formulas extend to R < 2. Queries
against a stored index use PROBE_COST, in candidate checks (binary search + call).
"""

from __future__ import annotations

import functools
import math

import numpy as np

from neardup.core.layout import BITS, MAX_TABLES, Layout, Part, Scheme, count_tables, validate
from neardup.core.tree_kernels import DIGIT, MIN_DIGIT

__all__ = [
    "choose_blocks",
    "choose_query_blocks",
    "choose_scheme",
    "estimated_cost",
    "estimated_query_cost",
    "join_scheme",
    "part_cost",
    "prefix_classes",
    "scheme_cost",
    "stop_sizes",
]

# The batch cost model in nanoseconds per operation of the engine's kernels on one core,
# measured with bench/find_all.py --calibrate on the 2-core benchmark machine (AMD EPYC with
# AVX-512): a counting-sort split of a bucket that fits in cache, the first split of the whole
# input (memory bound), each counter of a split, each tree node visited, each row and each pair
# of a bucket checked pair by pair (a vectorised XOR + popcount). Assigning one (tests, a
# calibration run) takes effect at the next call.

#: Batch search: fixed cost of one first block (its pass over the input started from Python) (ns).
GROUP_NS = 60_000.0

#: Batch search: split one fingerprint of a bucket that fits in cache (ns).
SPLIT_NS = 2.0

#: Batch search: split one fingerprint of a node larger than the cache (ns).
SPLIT_MEM_NS = 7.0

#: Batch search: one counter of a split (clear, prefix sum, visit the bucket) (ns).
COUNTER_NS = 1.2

#: Batch search: one node of the search tree (call and bookkeeping) (ns).
NODE_NS = 12.0

#: Batch search: one row of a bucket checked pair by pair (ns).
ROW_NS = 2.5

#: Batch search: one pair checked (ns).
PAIR_NS = 0.15

#: Batch search: a scheme of several parts is chosen over one part only when its estimated cost
#: is below this share of the one part's.
SCHEME_MARGIN = 0.9

#: Cost of probing one table for one query, in candidate checks (binary search + call); the
#: index's layout choice weighs it against the candidates a longer prefix saves.
PROBE_COST = 32.0

#: Time of one unit of the query cost model (PROBE_COST units), measured with PermutedTables on
#: 1M fingerprints (batches of 1,000-100,000 queries at distances 3, 6, 8: 9-26 ns) (ns).
PROBE_NS = 15.0

#: Batches of at least this many queries are searched together with an index's fingerprints by
#: the batch engine when the cost model says that is cheaper than probing its tables.
JOIN_FROM = 256

#: Most tables an index layout may have (each costs 8 bytes per fingerprint on disk).
MAX_INDEX_TABLES = 5000


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
    return visit * NODE_NS + r * ROW_NS + r * r * (0.5 * PAIR_NS)


_CONSTANTS = ("GROUP_NS", "SPLIT_NS", "SPLIT_MEM_NS", "COUNTER_NS", "NODE_NS", "ROW_NS", "PAIR_NS")


def _constants() -> tuple[float, ...]:
    # part of every cache key below, so that changing a constant takes effect
    return tuple(globals()[name] for name in _CONSTANTS)


def _tree_model(part: Part) -> tuple[np.ndarray, np.ndarray]:
    return _tree_model_for(part, _constants())


@functools.lru_cache(maxsize=1024)
def _tree_model_for(part: Part, _constants: tuple[float, ...]) -> tuple[np.ndarray, np.ndarray]:
    """Expected cost (ns) of the part's search over the log2-size grid of the input, and
    ``stop[i, p]``: the largest branch node (depth ``i``, next block ``>= p``) that the kernels
    check pair by pair rather than split."""
    m, j = part.blocks, part.blocks - part.threshold
    widths, lows = part.widths, part.lows
    r = np.exp2(_LG)
    brute = _brute(r)
    split = np.where(r * 12.0 > 1 << 21, SPLIT_MEM_NS, SPLIT_NS)
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
            cost += r * split + parts * (counters * COUNTER_NS + NODE_NS)
            bits += d
        if i == 0:  # a first block: its own pass over the input, started from Python
            cost += GROUP_NS
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
    size: int, low: int, width: int, threshold: int, patience: int, _constants: tuple[float, ...]
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
    if best[0] > SCHEME_MARGIN * cands[0][0]:
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

    A query probes every table (``PROBE_COST`` each) and checks about ``n / 2**p``
    candidates per table, ``p`` being the table's leading bits.
    """
    return sum(tables * (PROBE_COST + n / 2.0**p) for tables, p in prefix_classes(blocks, distance))


def join_scheme(queries: int, n: int, layout: Layout, distance: int) -> Scheme | None:
    """The scheme for searching ``queries`` fingerprints together with ``n`` stored ones when
    that is estimated cheaper than probing the ``layout``'s sorted tables once per query
    (``PROBE_NS`` per unit of :func:`estimated_query_cost`), else None."""
    if queries < JOIN_FROM or n < 2:
        return None
    scheme = choose_scheme(n + queries, distance)
    probe = queries * estimated_query_cost(n, layout.blocks, layout.distance) * PROBE_NS
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
    each 8 bytes per fingerprint), at most ``MAX_INDEX_TABLES``.
    """
    return _cheapest(estimated_query_cost, n, distance, min(MAX_TABLES, MAX_INDEX_TABLES))

"""The nested-partition pair engine behind find_all, find_clusters, query and batch lookups.

A layout of ``m`` blocks and distance ``k`` has one table per combination of ``j = m - k``
leading blocks, and a pair within ``k`` bits belongs to the first table (in lexicographic order)
whose leading blocks it agrees on: the pair's first ``j`` agreeing blocks. Tables that share
their first leading blocks share work, so instead of sorting the input once per table the engine
walks the tables as a tree: the root's children are the possible first blocks ``a``; splitting
the input by block ``a`` (a counting sort, one pass) gives buckets whose members agree on ``a``;
each bucket is split by every possible second block, and so on down to ``j`` blocks, where every
pair in a bucket is checked with one XOR and popcount. Only the first split of each first block
touches the whole input (memory bound, shared by the threads); everything below runs on buckets
that fit in the CPU caches, and a bucket small enough is checked pair by pair at once instead of
being split further (the cost model in :mod:`neardup.core.cost` sets the sizes).

Ownership is checked on each pair found: its agreeing blocks up to the bucket's last block must
be exactly the bucket's path, so every pair is reported once, by the same table as the
table-at-a-time definition.

Threads: the first-level buckets of a block are independent and are searched in parallel chunks;
with enough memory (``NEARDUP_MEMORY`` or ``memory=``, default half the available memory) several
first blocks run at once, each with its own copy of the input partitioned by that block
(12 bytes per fingerprint below 2**31 fingerprints, 16 above).
"""

from __future__ import annotations

import functools
import math
import os
import queue
import re
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import NamedTuple

import numpy as np

from neardup import config
from neardup.core import tree_kernels as tk
from neardup.core.cost import part_cost, stop_sizes
from neardup.core.layout import Layout, Part, Scheme

__all__ = [
    "TreePlan",
    "tree_plan",
    "scheme_plans",
    "pairs",
    "join_pairs",
    "memory_budget",
    "unit_threads",
]

_EMPTY = np.empty((0, 2), dtype=np.int64)

#: Threads: the fewest rows of a slice of a first pass (histogram, scatter) given to a thread,
#: and of a unit's input per chunk of its buckets, so that a small search is not cut into tasks
#: that cost less than handing them to the pool (tens of microseconds each)
SLICE_ROWS = 1 << 16
CHUNK_ROWS = 1 << 14


class TreePlan(NamedTuple):
    """One part of a :class:`~neardup.core.layout.Scheme` as arrays for the tree kernels.

    Blocks are the part's, numbered from the top; ``blo``/``bw``/``bmask`` give each block's low
    bit, width and mask in fingerprint bits. ``leaves[i, c]`` counts the tables below a node of
    depth ``i`` whose last block is ``c``; ``between[p, c]`` is the set (bit ``b`` for block
    ``b``) of blocks ``p..c-1``; ``stop[i, p]`` the largest branch node (depth ``i``, next block
    ``>= p``) checked pair by pair; ``sel`` the running count of selected tables. A pair found
    here is reported when it is within ``k`` bits, within this part's threshold on its bits and
    beyond every earlier part's threshold on that part's bits; ``chk`` packs what that takes
    (part mask, threshold, the number P of earlier parts, their P masks and P thresholds, then
    the block masks). ``imask`` strips the side bit ``fs`` of a row in a join.
    """

    m: int
    j: int
    k: int
    blo: np.ndarray
    bw: np.ndarray
    bmask: np.ndarray
    leaves: np.ndarray
    between: np.ndarray
    stop: np.ndarray
    sel: np.ndarray
    chk: np.ndarray
    imask: np.uint64
    fs: np.uint64


@functools.lru_cache(maxsize=64)
def _plan(part: Part, prior: tuple[Part, ...], distance: int, wide: bool, stop: tuple) -> TreePlan:
    m, t = part.blocks, part.threshold
    j = m - t
    leaves = np.zeros((j + 2, m + 1), dtype=np.int64)
    for i in range(j + 1):
        for c in range(m):
            leaves[i, c] = math.comb(m - 1 - c, j - i) if m - 1 - c >= j - i else 0
    between = np.zeros((m + 1, m + 1), dtype=np.uint64)
    for p in range(m + 1):
        for c in range(p, m + 1):
            between[p, c] = np.uint64(sum(1 << b for b in range(p, c)))
    fs = 62 if wide else 31
    return TreePlan(
        m=m,
        j=j,
        k=distance,
        blo=np.array(part.lows, dtype=np.int64),
        bw=np.array(part.widths, dtype=np.int64),
        bmask=np.array([((1 << w) - 1) << lo for w, lo in zip(part.widths, part.lows)], np.uint64),
        leaves=leaves,
        between=between,
        stop=np.array(stop, dtype=np.int64),
        sel=np.arange(math.comb(m, j) + 1, dtype=np.int64),
        chk=np.array(
            [part.mask, t, len(prior)]
            + [q.mask for q in prior]
            + [q.threshold for q in prior]
            + [((1 << w) - 1) << lo for w, lo in zip(part.widths, part.lows)],
            dtype=np.uint64,
        ),
        imask=np.uint64((1 << fs) - 1),
        fs=np.uint64(fs),
    )


def scheme_plans(scheme: Scheme, wide: bool = False) -> list[TreePlan]:
    """One :class:`TreePlan` per part of ``scheme`` (``wide``: int64 rows, for inputs of
    ``2**31`` fingerprints or more)."""
    ps = scheme.parts
    return [
        _plan(p, ps[:i], scheme.distance, wide, tuple(map(tuple, stop_sizes(p).tolist())))
        for i, p in enumerate(ps)
    ]


def _select(plan: TreePlan, n_tables: int, rows: np.ndarray) -> TreePlan:
    """``plan`` searching only its tables ``rows`` (indices in the part's combination order)."""
    on = np.zeros(n_tables, dtype=np.int64)
    on[np.asarray(rows, dtype=np.int64)] = 1
    sel = np.zeros(n_tables + 1, dtype=np.int64)
    np.cumsum(on, out=sel[1:])
    return plan._replace(sel=sel)


def tree_plan(layout: Layout, rows: np.ndarray | None = None, wide: bool = False) -> TreePlan:
    """The layout's :class:`TreePlan`, searching only the tables ``rows`` if given."""
    plan = scheme_plans(Scheme.of(layout), wide)[0]
    return plan if rows is None else _select(plan, layout.n_tables, rows)


# -- memory ---------------------------------------------------------------------------------------


_SIZE = re.compile(r"^\s*(\d+(?:\.\d*)?|\.\d+)\s*([KMGT]?)(?:I?B)?\s*$", re.IGNORECASE)


def _parse_bytes(text: str, source: str) -> int:
    m = _SIZE.match(text)
    if not m:
        raise ValueError(f"{source} must be a number of bytes such as 8G or 512M (got {text!r})")
    value = int(float(m.group(1)) * (1 << (10 * "_KMGT".index(m.group(2).upper() or "_"))))
    if value <= 0:
        raise ValueError(f"{source} must be positive (got {text!r})")
    return value


def available_memory() -> int:
    """Bytes the operating system reports as available (MemAvailable), or 4 GiB if unknown."""
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    try:
        return os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (ValueError, OSError, AttributeError):
        return 4 << 30


def memory_budget(memory: int | str | None = None) -> int:
    """Bytes the search may use for its partition buffers.

    ``memory`` (bytes, or a string such as ``"8G"``), else the ``NEARDUP_MEMORY`` environment
    variable, else ``config.MEMORY_FRACTION`` of the available memory.
    """
    if memory is None:
        env = os.environ.get("NEARDUP_MEMORY")
        if env:
            return _parse_bytes(env, "NEARDUP_MEMORY")
        return int(available_memory() * config.MEMORY_FRACTION)
    if isinstance(memory, str):
        return _parse_bytes(memory, "memory")
    if isinstance(memory, bool) or not isinstance(memory, (int, np.integer)) or memory <= 0:
        raise ValueError(f"memory must be a positive number of bytes (got {memory!r})")
    return int(memory)


# -- the search -----------------------------------------------------------------------------------


def _first_digit(plan: TreePlan, a: int) -> tuple[int, int, int]:
    """(digit bits, padding bits, shift) of block ``a``'s first split."""
    w = int(plan.bw[a])
    d = min(tk.DIGIT, w)
    hb = int(plan.blo[a]) + w
    pd = min(max(d, tk.MIN_DIGIT), hb)
    return d, pd - d, hb - pd


def _cuts(sizes: np.ndarray, parts: int) -> list[int]:
    """Split buckets into about ``parts`` chunks of similar work (sum of squared sizes + size)."""
    work = sizes.astype(np.float64) ** 2 + 64.0 * sizes
    csum = np.cumsum(work)
    total = csum[-1] if len(csum) else 0.0
    if total <= 0 or parts <= 1:
        return [0, len(sizes)]
    cuts = np.searchsorted(csum, total * np.arange(1, parts) / parts, side="right")
    return sorted({0, len(sizes), *cuts.tolist()})


class _Group:
    """One first block ``a``: the input partitioned by its first digit, then the subtrees."""

    def __init__(self, plan: TreePlan, sides: Sequence[np.ndarray], a: int, join: bool):
        self.plan, self.sides, self.a, self.join = plan, sides, a, join
        self.d1, self.padb, self.shift = _first_digit(plan, a)
        self.nkeys = 1 << (self.d1 + self.padb + (1 if join else 0))

    def run(
        self, pool: ThreadPoolExecutor | None, threads: int, bufs: queue.SimpleQueue
    ) -> list[np.ndarray]:
        """Split the input by the first digit into a partition buffer (taken from ``bufs``,
        or made, and given back), then search the buckets; returns the pairs found."""
        plan, d1, padb, shift, join = self.plan, self.d1, self.padb, self.shift, self.join
        pd = d1 + padb
        slices = [
            (side, f, f_lo, f_hi)
            for side, f in enumerate(self.sides)
            for f_lo, f_hi in _ranges(len(f), threads)
        ]
        counts = np.zeros((len(slices), self.nkeys), dtype=np.int64)

        def hist(r: int) -> None:
            side, f, lo, hi = slices[r]
            tk.first_level_histogram(f, lo, hi, shift, pd, padb, join, side, counts[r])

        _map(pool, hist, range(len(slices)))
        # slice r's running position for each key: all earlier keys, then earlier slices
        total = counts.sum(axis=0)
        starts = np.concatenate(([0], np.cumsum(total)[:-1]))
        pos = starts[None, :] + np.cumsum(counts, axis=0) - counts
        n = int(total.sum())
        try:
            DF, DI = bufs.get_nowait()
        except queue.Empty:  # reusing buffers saves the page faults of fresh ones
            DF = np.empty(n, dtype=np.uint64)
            DI = np.empty(n, dtype=np.int64 if plan.fs == 62 else np.uint32)

        def scatter(r: int) -> None:
            side, f, lo, hi = slices[r]
            tk.first_level_scatter(f, lo, hi, side, shift, pd, padb, join, plan.fs, pos[r], DF, DI)

        _map(pool, scatter, range(len(slices)))
        ends = np.cumsum(total)
        g = 1 << (padb + (1 if join else 0))
        sizes = total.reshape(-1, g).sum(axis=1)
        cuts = _cuts(sizes, 1 if threads <= 1 else min(8 * threads, n // CHUNK_ROWS + 1))

        def search(r: int) -> np.ndarray:
            out, cnt = tk.search_first_level(
                plan, DF, DI, ends, cuts[r], cuts[r + 1], self.a, d1, padb, join
            )
            return out[:cnt]

        found = _map(pool, search, range(len(cuts) - 1))
        bufs.put((DF, DI))
        return found


def _ranges(n: int, parts: int) -> list[tuple[int, int]]:
    parts = max(1, min(parts, n // SLICE_ROWS + 1))
    cuts = [n * i // parts for i in range(parts + 1)]
    return list(zip(cuts[:-1], cuts[1:]))


def _map(pool: ThreadPoolExecutor | None, fn: Callable, items: Sequence) -> list:
    if pool is None or len(items) <= 1:  # one task: no hand-over to the pool
        return [fn(x) for x in items]
    return list(pool.map(fn, items))


def unit_threads(weights: Sequence[float], threads: int, lanes: int) -> list[int]:
    """Threads each unit of work is cut for: twice its share of the estimated work times
    ``threads``, rounded up, at least ``ceil(threads / lanes)``, at most ``threads``.

    A unit cut for ``t`` threads has ``t`` slices of its first pass and ``8 t`` chunks of its
    buckets, all on the search's one pool, so it can use up to ``8 t`` threads; cut for one it
    runs on its lane's thread alone. Twice the share, because the estimate (tables below a
    first block times the part's mean cost per table) runs low for a part's later first blocks
    (3x for the fourth of seven blocks at 10M fingerprints and distance 8).

    Parameters
    ----------
    weights : sequence of float
        Each unit's estimated work (any unit, e.g. nanoseconds of the cost model).
    threads : int
        Threads of the search (the workers of its pool).
    lanes : int
        Units running at once (``1 <= lanes <= threads``).

    Returns
    -------
    list of int
        The threads each unit is cut for, in the order of ``weights``.

    Examples
    --------
    >>> unit_threads([35, 20, 20, 10, 1], 16, 5)
    [14, 8, 8, 4, 4]
    >>> unit_threads([4, 4, 1, 1], 2, 2)
    [2, 2, 1, 1]
    >>> unit_threads([1, 1, 1], 8, 1)
    [8, 8, 8]
    """
    total = float(sum(weights))
    floor = -(-threads // max(1, lanes))
    out = []
    for w in weights:
        share = math.ceil(2 * threads * w / total - 1e-9) if total > 0 else 1
        out.append(min(threads, max(floor, share)))
    return out


def _run_units(work: list, run: Callable, threads: int, lanes: int) -> None:
    """Call ``run(unit, pool, unit_threads)`` for each unit of ``work`` (``(weight, ...)``,
    heaviest first), ``lanes`` units at a time, every unit's tasks on one pool of ``threads``.

    A unit is cut for its share of the threads (:func:`unit_threads`), not for the threads of
    its lane: when lanes were given ``threads // lanes`` threads each, 9 units on 16 threads ran
    on one thread each, and the heaviest first block (a quarter of the work of 10M fingerprints
    at distance 8) bounded the speed-up at about 4 whatever the threads. With no more threads
    than lanes, light units still run on their lane's thread alone.
    """
    if threads <= 1:
        for w in work:
            run(w, None, 1)
        return
    shares = unit_threads([w[0] for w in work], threads, lanes)
    with ThreadPoolExecutor(threads) as pool:
        if lanes == 1:
            for w, t in zip(work, shares):
                run(w, pool, t)
        else:
            with ThreadPoolExecutor(lanes) as outer:
                list(outer.map(lambda wt: run(wt[0], pool, wt[1]), zip(work, shares)))


def _search(
    plans: Sequence[TreePlan],
    sides: Sequence[np.ndarray],
    join: bool,
    threads: int,
    memory: int | str | None,
    table_ns: Sequence[float] | None = None,
) -> np.ndarray:
    """The pairs of ``plans`` over ``sides``; ``table_ns``: each plan's estimated cost of one
    table (weighs its units against other plans'; default, a table costs the same in each)."""
    n = sum(len(s) for s in sides)
    if len(plans) == 1 and n <= plans[0].stop[0, 0] and plans[0].sel[-1] == len(plans[0].sel) - 1:
        return _small(plans[0], sides, join)
    # one unit of work per (part, first block) with a selected table below it
    work = []
    for plan, ns in zip(plans, table_ns or [1.0] * len(plans)):
        first = np.concatenate(([0], np.cumsum(plan.leaves[1, : plan.m - plan.j + 1])))
        for a in range(plan.m - plan.j + 1):
            if plan.sel[first[a + 1]] > plan.sel[first[a]]:
                work.append((float(plan.leaves[1, a]) * ns, plan, a))
    if not work:
        return _EMPTY.copy()
    work.sort(key=lambda w: -w[0])  # heaviest first; each lane takes the next when free
    row_bytes = 8 + (8 if plans[0].fs == 62 else 4)
    lanes = max(1, min(threads, len(work), memory_budget(memory) // max(1, row_bytes * n)))
    results: list[np.ndarray] = []
    bufs: queue.SimpleQueue = queue.SimpleQueue()  # at most one per lane

    def run(w: tuple[float, TreePlan, int], pool: ThreadPoolExecutor | None, t: int) -> None:
        results.extend(_Group(w[1], sides, w[2], join).run(pool, t, bufs))

    _run_units(work, run, threads, lanes)
    results = [r for r in results if len(r)]
    if not results:
        return _EMPTY.copy()
    return np.concatenate(results) if len(results) > 1 else results[0]


def _small(plan: TreePlan, sides: Sequence[np.ndarray], join: bool) -> np.ndarray:
    wide = plan.fs == 62
    F = np.ascontiguousarray(np.concatenate(sides)) if len(sides) > 1 else sides[0]
    idt = np.int64 if wide else np.uint32
    if join:
        rows = np.concatenate(
            [
                np.arange(len(sides[0]), dtype=idt),
                np.arange(len(sides[1]), dtype=idt) | idt(1 << int(plan.fs)),
            ]
        )
        mid = len(sides[0])
    else:
        rows = np.arange(len(F), dtype=idt)
        mid = 0
    out, cnt = tk.root_pairs(plan, F, rows, 0, mid, len(F), join)
    return out[:cnt]


def _plans(
    plan: Layout | Scheme, rows: np.ndarray | None, wide: bool, n: int, part: int | None = None
) -> tuple[list[TreePlan], list[float]]:
    """The plans to search, and each one's estimated nanoseconds per table at ``n`` rows."""
    scheme = Scheme.of(plan) if isinstance(plan, Layout) else plan
    plans = scheme_plans(scheme, wide)
    per_table = [part_cost(n, p) / p.n_tables for p in scheme.parts]
    if part is None and rows is None:
        return plans, per_table
    if part is None:
        if len(plans) != 1:
            raise ValueError("rows select tables of one part of a Scheme: give part=")
        part = 0
    if not 0 <= part < len(plans):
        raise ValueError(f"part {part} of a scheme of {len(plans)} parts")
    one = plans[part]
    return [one if rows is None else _select(one, scheme.parts[part].n_tables, rows)], [1.0]


def pairs(
    fp: np.ndarray,
    plan: Layout | Scheme,
    *,
    rows: np.ndarray | None = None,
    part: int | None = None,
    threads: int = 1,
    memory: int | str | None = None,
) -> np.ndarray:
    """Index pairs ``(i, j)``, ``i < j``, of ``fp`` within the plan's distance, unsorted.

    Each pair once, found by its first part and there by the first table (in order) whose
    leading blocks it agrees on. With ``part``, only the pairs whose first part is that part
    of a :class:`Scheme`; with ``rows`` (tables of that part, or of the single part, numbered
    in the part's combination order), only pairs whose first table is among them.
    """
    fp = np.ascontiguousarray(fp, dtype=np.uint64)
    if len(fp) < 2:
        return _EMPTY.copy()
    plans, ns = _plans(plan, rows, len(fp) >= 1 << 31, len(fp), part)
    return _search(plans, [fp], False, max(1, threads), memory, ns)


def join_pairs(
    queries: np.ndarray,
    corpus: np.ndarray,
    plan: Layout | Scheme,
    *,
    threads: int = 1,
    memory: int | str | None = None,
) -> np.ndarray:
    """``(query position, corpus position)`` of every pair within the plan's distance, unsorted,
    each once."""
    q = np.ascontiguousarray(queries, dtype=np.uint64)
    c = np.ascontiguousarray(corpus, dtype=np.uint64)
    if len(q) == 0 or len(c) == 0:
        return _EMPTY.copy()
    plans, ns = _plans(plan, None, max(len(q), len(c)) >= 1 << 31, len(q) + len(c))
    return _search(plans, [q, c], True, max(1, threads), memory, ns)

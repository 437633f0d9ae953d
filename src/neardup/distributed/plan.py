"""How a batch search is split into shards, and the per-shard work (pure numpy, no Dask).

Every table of a :class:`~neardup.layout.Layout` puts its leading blocks in the top bits of its
key, and two fingerprints can only form a pair in that table when those leading bits agree. So
fingerprints may be partitioned by the top ``shard_bits`` bits of a table's key: every candidate
group of that table lands in one shard. Tables that share their first ``g`` leading blocks share
those top bits too, so one partitioning (a *group*) serves all of them; with ``g = 1`` a layout of
``m`` blocks and distance ``k`` needs ``k + 1`` partitionings instead of ``C(m, k)``.

Inside a shard the same in-memory routine as the single-machine path runs
(:func:`neardup.core.search.pairs_for_tables`) over the group's tables, and local positions are mapped
back to input positions. The first-table rule keeps the union over groups and shards free of
repeats, and :func:`neardup.core.search.sort_pairs` gives the same order as :func:`neardup.find_all`.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from neardup.core.layout import Layout
from neardup.core.search import clusters_from_pairs, pairs_for_tables, resolve_layout

#: Default number of fingerprints a shard should hold (16 bytes each in flight: value + position).
DEFAULT_SHARD_SIZE = 1 << 22

#: Most shard bits used: 2**16 shards per group is far beyond any useful cluster size.
MAX_SHARD_BITS = 16

_EMPTY_PAIRS = np.empty((0, 2), dtype=np.int64)


@dataclass(frozen=True)
class ShardPlan:
    """Which tables share a partitioning, and how many shards each partitioning has.

    A plan is a few integers (cheap to send with every task); the table groups are rebuilt and
    cached on each process that needs them.

    Attributes
    ----------
    layout : Layout
        The block layout (the same one :func:`neardup.find_all` would use for this input size).
    lead_depth : int
        Tables with the same first ``lead_depth`` leading blocks form a group.
    shard_bits : int
        Shards per group are ``2**shard_bits``; a fingerprint's shard in group ``g`` is the top
        ``shard_bits`` bits of its key in table ``groups[g][0]`` (bit 63 most significant).
    """

    layout: Layout
    lead_depth: int
    shard_bits: int

    @property
    def n_shards(self) -> int:
        return 1 << self.shard_bits

    @property
    def groups(self) -> tuple[tuple[int, ...], ...]:
        """Table indices per group, in layout order; the groups cover every table once."""
        return _groups(self.layout.blocks, self.layout.distance, self.lead_depth)

    def describe(self) -> str:
        return (
            f"blocks={self.layout.blocks}, distance={self.layout.distance}, "
            f"tables={self.layout.n_tables}, groups={len(self.groups)}, "
            f"shards per group={self.n_shards}"
        )


@functools.lru_cache(maxsize=16)
def _groups(blocks: int, distance: int, depth: int) -> tuple[tuple[int, ...], ...]:
    order: dict[tuple[int, ...], list[int]] = {}
    for t in Layout(blocks, distance).tables:
        order.setdefault(t.leading[:depth], []).append(t.index)
    return tuple(tuple(v) for v in order.values())


def make_plan(
    n: int,
    distance: int,
    blocks: int | None = None,
    *,
    shard_size: int = DEFAULT_SHARD_SIZE,
    min_shards: int = 1,
) -> ShardPlan:
    """Choose the layout, the table groups and the shard count for ``n`` fingerprints.

    Parameters
    ----------
    n : int
        Number of fingerprints.
    distance, blocks : int
        As in :func:`neardup.find_all` (``blocks=None`` chooses the same layout it would).
    shard_size : int
        Wanted fingerprints per shard; the shard count is the power of two that brings the
        average shard at or below this size.
    min_shards : int
        At least this many shards per group (e.g. the number of worker threads).

    Returns
    -------
    ShardPlan
        Groups use the fewest leading blocks whose width holds the shard bits; when even all
        leading blocks are narrower, the shard bits are capped at the narrowest table prefix.
    """
    if shard_size < 1:
        raise ValueError(f"shard_size must be >= 1 (got {shard_size})")
    layout = resolve_layout(n, distance, blocks)
    tables = layout.tables
    want = max(
        math.ceil(math.log2(max(1.0, n / shard_size))),
        math.ceil(math.log2(max(1, min_shards))),
    )
    want = min(want, MAX_SHARD_BITS)
    lead = len(tables[0].leading)
    for g in range(1, lead + 1):
        room = min(sum(layout.widths[b] for b in t.leading[:g]) for t in tables)
        if room >= want or g == lead:
            bits = min(want, room)
            break
    return ShardPlan(layout, g, bits)


def shard_ids(fp: np.ndarray, plan: ShardPlan, group: int) -> np.ndarray:
    """Shard of each fingerprint in ``group``: the top ``shard_bits`` of its table key, as int64."""
    if plan.shard_bits == 0:
        return np.zeros(len(fp), dtype=np.int64)
    key = plan.layout.apply(fp, plan.groups[group][0])
    return (key >> np.uint64(64 - plan.shard_bits)).astype(np.int64)


def split_partition(
    fp: np.ndarray, offset: int, plan: ShardPlan, group: int
) -> list[tuple[np.ndarray, np.ndarray]]:
    """Bucket one input partition by shard: ``[(values, positions)]`` per shard of ``group``.

    ``offset`` is the input position of ``fp[0]``. Within each shard positions ascend.
    """
    sid = shard_ids(fp, plan, group)
    order = np.argsort(sid, kind="stable")
    cuts = np.searchsorted(sid[order], np.arange(1, plan.n_shards))
    pos = order.astype(np.int64) + np.int64(offset)
    return list(zip(np.split(fp[order], cuts), np.split(pos, cuts), strict=True))


def _concat(pieces: Sequence[tuple[np.ndarray, np.ndarray]]) -> tuple[np.ndarray, np.ndarray]:
    if not pieces:
        return np.empty(0, np.uint64), np.empty(0, np.int64)
    fp = np.concatenate([p[0] for p in pieces]).astype(np.uint64, copy=False)
    pos = np.concatenate([p[1] for p in pieces]).astype(np.int64, copy=False)
    return np.ascontiguousarray(fp), np.ascontiguousarray(pos)


def _group_pairs(fp: np.ndarray, plan: ShardPlan, group: int, device: str) -> np.ndarray:
    """Local pairs of ``fp`` whose first table is in ``group``: on this process's GPU when
    ``device`` says so (:func:`neardup.gpu.use_gpu`, resolved here, on the worker), else by the
    CPU engine. Either way the same pairs (the GPU's sorted, the CPU's in table order)."""
    tables = np.asarray(plan.groups[group], dtype=np.int64)
    if device != "cpu":
        from neardup import gpu

        if gpu.use_gpu(device):
            return gpu.find_all_pairs(fp, plan.layout, tables=tables)
    return pairs_for_tables(fp, plan.layout, tables)


def shard_pairs(
    pieces: Sequence[tuple[np.ndarray, np.ndarray]],
    plan: ShardPlan,
    group: int,
    device: str = "cpu",
) -> np.ndarray:
    """Pairs of input positions found in one shard of ``group`` (first-table rule applied).

    ``pieces`` are the shard's buckets from every input partition, in partition order, so
    positions ascend and local pairs ``i < j`` stay ``i < j`` as input positions. ``device``:
    where the shard is searched, as in :func:`neardup.find_all` (resolved on the process that
    runs this: ``"auto"`` uses its GPU when it has one).
    """
    fp, pos = _concat(pieces)
    if len(fp) < 2:
        return _EMPTY_PAIRS.copy()
    return pos[_group_pairs(fp, plan, group, device)]


def shard_edges(
    pieces: Sequence[tuple[np.ndarray, np.ndarray]],
    plan: ShardPlan,
    group: int,
    device: str = "cpu",
) -> np.ndarray:
    """Edges (input positions) whose connected components are the clusters, for one shard.

    Equal values are searched once: each distinct value is represented by its smallest input
    position, the search runs over the representatives, and in group 0 (where every copy of a
    value shares a shard; any one group would do) each other copy gets an edge to its
    representative. This keeps runs of a repeated value linear, as :func:`neardup.find_clusters`
    does by searching distinct values.
    """
    fp, pos = _concat(pieces)
    if len(fp) < 2:
        return _EMPTY_PAIRS.copy()
    order = np.lexsort((pos, fp))
    fs, ps = fp[order], pos[order]
    first = np.empty(len(fs), dtype=bool)
    first[0] = True
    np.not_equal(fs[1:], fs[:-1], out=first[1:])
    rep_fp = np.ascontiguousarray(fs[first])
    rep_pos = ps[first]
    parts = []
    if group == 0 and len(rep_fp) < len(fs):
        run = np.cumsum(first) - 1
        parts.append(np.stack([rep_pos[run[~first]], ps[~first]], axis=1))
    if len(rep_fp) >= 2:
        local = _group_pairs(rep_fp, plan, group, device)
        parts.append(np.sort(rep_pos[local], axis=1))
    return np.concatenate(parts) if parts else _EMPTY_PAIRS.copy()


def components(edges: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Clusters of the nodes that appear in ``edges``: ``(nodes, roots)``.

    ``nodes`` are the distinct input positions in ``edges`` (ascending) and ``roots[i]`` the
    smallest input position in the cluster of ``nodes[i]``. Every position absent from ``edges``
    is a singleton (its own root). Memory is proportional to the edges, not to the input.
    """
    edges = np.asarray(edges, dtype=np.int64).reshape(-1, 2)
    nodes = np.unique(edges)
    if len(nodes) == 0:
        return nodes, nodes.copy()
    local = np.searchsorted(nodes, edges)
    # nodes ascend, so the smallest local index of a component is its smallest input position
    return nodes, nodes[clusters_from_pairs(len(nodes), local)]

"""How a batch search is split into shards, and the per-shard work (pure numpy, no Dask).

A search :class:`~neardup.core.layout.Scheme` covers the 64 bits with one or more parts; each
part's tables are the combinations of its leading blocks, and two fingerprints can only form a
pair in a table when they agree on its leading blocks. So fingerprints may be partitioned by the
top ``shard_bits`` bits of a table's leading blocks: every candidate group of that table lands
in one shard. Tables of a part that share their first ``g`` leading blocks share those top bits
too, so one partitioning (a *group*) serves all of them; with ``g = 1`` a part of ``m`` blocks
and threshold ``t`` needs ``t + 1`` partitionings instead of ``C(m, t)``.

Inside a shard the same in-memory routine as the single-machine path runs
(:func:`neardup.core.search.pairs_for_tables`) over the group's tables of its part, and local
positions are mapped back to input positions. The first-part and first-table rules keep the
union over groups and shards free of repeats, and :func:`neardup.core.search.sort_pairs` gives
the same order as :func:`neardup.find_all`. The scheme is the one the cost model gives
:func:`neardup.find_all` for the whole input (several parts where they are cheaper), or the
single layout of ``blocks`` (and on a GPU, whose engine searches layouts).
"""

from __future__ import annotations

import functools
import itertools
import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import NamedTuple

import numpy as np

from neardup.core.layout import Layout, Part, Scheme
from neardup.core.order import lexorder
from neardup.core.search import (
    clusters_from_pairs,
    pairs_for_tables,
    resolve_layout,
    resolve_scheme,
)

#: Default number of fingerprints a shard should hold (16 bytes each in flight: value + position).
DEFAULT_SHARD_SIZE = 1 << 22

#: Most shard bits used: 2**16 shards per group is far beyond any useful cluster size.
MAX_SHARD_BITS = 16

_EMPTY_PAIRS = np.empty((0, 2), dtype=np.int64)


class Group(NamedTuple):
    """Tables of one part that share their first leading blocks (``prefix``, block numbers of
    the part from the top); ``rows`` are their indices in the part's combination order and
    ``tables`` their indices among all tables of the scheme (part by part)."""

    part: int
    prefix: tuple[int, ...]
    rows: tuple[int, ...]
    tables: tuple[int, ...]


@dataclass(frozen=True)
class ShardPlan:
    """Which tables share a partitioning, and how many shards each partitioning has.

    A plan is a few integers (cheap to send with every task); the table groups are rebuilt and
    cached on each process that needs them.

    Attributes
    ----------
    scheme : Scheme
        The search scheme (the one :func:`neardup.find_all` would use for this input size, or
        the single layout of the ``blocks`` asked for).
    lead_depth : int
        Tables of a part with the same first ``lead_depth`` leading blocks form a group (fewer
        in a part whose tables have fewer leading blocks).
    shard_bits : int
        Shards per group are ``2**shard_bits``; a fingerprint's shard in a group is the top
        ``shard_bits`` bits of its group's leading blocks, concatenated from the top block
        down (bit 63 most significant).
    """

    scheme: Scheme
    lead_depth: int
    shard_bits: int

    @property
    def n_shards(self) -> int:
        return 1 << self.shard_bits

    @property
    def layout(self) -> Layout:
        """The layout of a single-part plan (a ``ValueError`` for a plan of several parts)."""
        if len(self.scheme.parts) != 1:
            raise ValueError(f"a plan of {len(self.scheme.parts)} parts has no single layout")
        return Layout(self.scheme.parts[0].blocks, self.scheme.distance)

    @property
    def group_info(self) -> tuple[Group, ...]:
        """The groups in order: part by part, and in a part by prefix, as its tables run."""
        return _groups(self.scheme, self.lead_depth)

    @property
    def groups(self) -> tuple[tuple[int, ...], ...]:
        """Table indices per group (part by part); the groups cover every table once."""
        return tuple(g.tables for g in self.group_info)

    def describe(self) -> str:
        return (
            f"{self.scheme.describe()}, distance={self.scheme.distance}, "
            f"groups={len(self.groups)}, shards per group={self.n_shards}"
        )


def _leading(part: Part) -> list[tuple[int, ...]]:
    return list(itertools.combinations(range(part.blocks), part.blocks - part.threshold))


@functools.lru_cache(maxsize=16)
def _groups(scheme: Scheme, depth: int) -> tuple[Group, ...]:
    out: list[Group] = []
    base = 0
    for p, part in enumerate(scheme.parts):
        order: dict[tuple[int, ...], list[int]] = {}
        for row, lead in enumerate(_leading(part)):
            order.setdefault(lead[:depth], []).append(row)
        for prefix, rows in order.items():
            out.append(Group(p, prefix, tuple(rows), tuple(base + r for r in rows)))
        base += part.n_tables
    return tuple(out)


def _room(scheme: Scheme, depth: int) -> int:
    """Fewest bits in a group's prefix at ``depth``."""
    return min(
        sum(scheme.parts[g.part].widths[b] for b in g.prefix) for g in _groups(scheme, depth)
    )


def make_plan(
    n: int,
    distance: int,
    blocks: int | None = None,
    *,
    shard_size: int = DEFAULT_SHARD_SIZE,
    min_shards: int = 1,
    device: str = "cpu",
    scheme: Scheme | None = None,
) -> ShardPlan:
    """Choose the scheme, the table groups and the shard count for ``n`` fingerprints.

    Parameters
    ----------
    n : int
        Number of fingerprints.
    distance, blocks : int
        As in :func:`neardup.find_all` (``blocks=None`` chooses the same scheme it would).
    shard_size : int
        Wanted fingerprints per shard; the shard count is the power of two that brings the
        average shard at or below this size.
    min_shards : int
        At least this many shards per group (e.g. the number of worker threads).
    device : str
        Where the shards are searched: other than ``"cpu"``, the single layout the GPU engine
        searches (:func:`~neardup.core.search.resolve_layout`).
    scheme : Scheme, optional
        Search with this scheme (its distance must be ``distance``) instead of choosing one.

    Returns
    -------
    ShardPlan
        Groups use the fewest leading blocks whose width holds the shard bits; when even all
        leading blocks are narrower, the shard bits are capped at the narrowest prefix.
    """
    if shard_size < 1:
        raise ValueError(f"shard_size must be >= 1 (got {shard_size})")
    if scheme is not None:
        if scheme.distance != distance or blocks is not None:
            raise ValueError(f"scheme {scheme} is for distance {scheme.distance}, no blocks")
    elif blocks is not None or device != "cpu":
        scheme = Scheme.of(resolve_layout(n, distance, blocks))
    else:
        scheme = resolve_scheme(n, distance, None)
    want = max(
        math.ceil(math.log2(max(1.0, n / shard_size))),
        math.ceil(math.log2(max(1, min_shards))),
    )
    want = min(want, MAX_SHARD_BITS)
    deepest = max(p.blocks - p.threshold for p in scheme.parts)
    for g in range(1, deepest + 1):
        room = _room(scheme, g)
        if room >= want or g == deepest:
            bits = min(want, room)
            break
    return ShardPlan(scheme, g, bits)


def shard_ids(fp: np.ndarray, plan: ShardPlan, group: int) -> np.ndarray:
    """Shard of each fingerprint in ``group``: the top ``shard_bits`` of its group's leading
    blocks, as int64."""
    if plan.shard_bits == 0:
        return np.zeros(len(fp), dtype=np.int64)
    info = plan.group_info[group]
    part = plan.scheme.parts[info.part]
    fp = np.asarray(fp, dtype=np.uint64)
    key = np.zeros(len(fp), dtype=np.uint64)
    width = 0
    for b in info.prefix:
        w = part.widths[b]
        key <<= np.uint64(w)
        key |= (fp >> np.uint64(part.lows[b])) & np.uint64((1 << w) - 1)
        width += w
    return (key >> np.uint64(width - plan.shard_bits)).astype(np.int64)


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
    info = plan.group_info[group]
    if device != "cpu" and len(plan.scheme.parts) == 1:
        from neardup import gpu

        if gpu.use_gpu(device):
            tables = np.asarray(info.tables, dtype=np.int64)
            return gpu.find_all_pairs(fp, plan.layout, tables=tables)
    return pairs_for_tables(fp, plan.scheme, np.asarray(info.rows, np.int64), part=info.part)


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
    order = lexorder((pos, fp))
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
    nodes, roots, _ = indexed_components(edges)
    return nodes, roots


def indexed_components(edges: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """:func:`components` and each edge's ends as indices into ``nodes``, shape (e, 2)."""
    nodes, local = distinct_nodes(edges)
    if len(nodes) == 0:
        return nodes, nodes.copy(), local
    # nodes ascend, so the smallest local index of a component is its smallest input position
    return nodes, nodes[clusters_from_pairs(len(nodes), local)], local


def distinct_nodes(edges: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The distinct positions in ``edges`` (ascending) and each edge's ends as indices into
    them, shape (e, 2): ``np.unique(edges, return_inverse=True)`` by one stable (radix) sort,
    several times faster than it on millions of positions."""
    flat = np.asarray(edges, dtype=np.int64).reshape(-1)
    order = np.argsort(flat, kind="stable")
    ordered = flat[order]
    first = np.empty(len(ordered), dtype=bool)
    first[:1] = True
    np.not_equal(ordered[1:], ordered[:-1], out=first[1:])
    local = np.empty(len(flat), dtype=np.int64)
    local[order] = np.cumsum(first) - 1
    return ordered[first], local.reshape(-1, 2)

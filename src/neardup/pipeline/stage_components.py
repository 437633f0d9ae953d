"""Connected components of the verified pairs in tasks, none of which holds the whole graph.

The alternating large-star / small-star rounds of Kiveris et al., "Connected Components in
MapReduce and Beyond" (SoCC 2014), over partitions of the positions (by a multiplicative hash,
:func:`partition`):

cc-edges (one task per edge task: its pairs, those of documents set aside dropped, each sent to
both ends' partitions) -> cc-large-0, cc-small-0, cc-large-1, ... (one task per partition: its
nodes' neighbourhoods, rewired; a round ends the loop when every partition finds its nodes
already in stars around their components' smallest positions) -> cc-route (one task per
partition: each pair sent to the decide group of its component, the partition of its label among
the groups) -> decide. With one partition, one task labels the components (cc-labels) in place of
the rounds.

A task holds the edges of its partition's nodes: about ``2 * pairs / parts``, more only where one
component is larger than that (a component is decided in one task in any case). Each task writes
its edges ``e`` (shape (k, 2), int64 positions) sorted by the partition (or group) they go to,
with ``c``, the cut of each (``parts + 1`` offsets); a reader takes its slice of every writer.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from neardup.core.order import row_counts
from neardup.distributed.plan import distinct_nodes, indexed_components
from neardup.pipeline.task_files import gather_array, inbox, load, save

__all__ = [
    "EDGES",
    "edges_task",
    "labels_task",
    "large_star_task",
    "partition",
    "route_task",
    "small_star_task",
]

#: The stage whose tasks hold the input edges (each pair, both ways, and once as it is).
EDGES = "cc-edges"


#: Fibonacci hashing: consecutive positions spread evenly over the partitions.
_GOLDEN = np.uint64(0x9E3779B97F4A7C15)


def partition(x: np.ndarray, parts: int) -> np.ndarray:
    """The partition (of ``parts``) of each position in ``x``: by a multiplicative hash, so that
    the components' smallest positions, where the rounds gather edges, spread evenly."""
    h = (np.asarray(x, dtype=np.int64).view(np.uint64) * _GOLDEN) >> np.uint64(32)
    return ((h * np.uint64(parts)) >> np.uint64(32)).astype(np.int64)


def _keyed(out: str, key: np.ndarray, e: np.ndarray, parts: int, name: str = "e",
           cut: str = "c", **extra: np.ndarray) -> int:  # fmt: skip
    """Saves the edges ``e`` (shape (k, 2)) sorted by the partition of ``key`` (positions, one
    per edge), and the cuts."""
    p = partition(key, parts)
    order = np.argsort(p, kind="stable")
    cuts = np.searchsorted(p[order], np.arange(parts + 1)).astype(np.int64)
    return save(out, **{name: e.reshape(-1, 2)[order], cut: cuts}, **extra)


def _both_ways(out: str, a: np.ndarray, b: np.ndarray, parts: int,
               **extra: np.ndarray) -> int:  # fmt: skip
    """Saves the undirected edges ``(a, b)`` once from each end, keyed by that end."""
    e = np.stack([np.concatenate([a, b]), np.concatenate([b, a])], axis=1).astype(np.int64)
    return _keyed(out, e[:, 0], e, parts, **extra)


def edges_task(out: str, work: str, stage: str, task: str, offsets: list[int], aside: bool,
               parts: int, name: str = "pairs") -> dict[str, int]:  # fmt: skip
    """The pairs ``name`` of ``task`` (of ``stage``), those of documents found in the index
    dropped with ``aside``, saved both ways by partition (``e``) and once by their first end's
    (``u``)."""
    pairs = np.asarray(load(work, stage, task, name), dtype=np.int64).reshape(-1, 2)
    if aside and len(pairs):
        pos, local = distinct_nodes(pairs)
        off = np.asarray(offsets, dtype=np.int64)
        found = gather_array(work, off, pos, "found", bool, stage="against").astype(bool)
        pairs = pairs[~(found[local[:, 0]] | found[local[:, 1]])]
    u, v = pairs[:, 0], pairs[:, 1]
    nbytes = _keyed(out, u, pairs, parts, name="u", cut="cu")
    return {"pairs": len(pairs), "bytes": nbytes + _both_ways(out, u, v, parts)}


def _neighbourhoods(e: np.ndarray) -> tuple[np.ndarray, ...]:
    """The distinct edges ``(a, b)`` sorted by ``a`` then ``b``: ``a``, ``b``, each node's
    (distinct ``a``) first edge, its degree and ``m``, the smallest of it and its neighbours."""
    e = row_counts(e)[0]
    a, b = e[:, 0], e[:, 1]
    starts = np.flatnonzero(np.r_[True, a[1:] != a[:-1]]) if len(a) else np.zeros(0, np.int64)
    deg = np.diff(np.r_[starts, len(a)])
    m = np.minimum(a[starts], np.minimum.reduceat(b, starts)) if len(a) else a[:0]
    return a, b, starts, deg, m


def large_star_task(out: str, work: str, stage: str, tasks: list[str], p: int,
                    parts: int) -> dict[str, Any]:  # fmt: skip
    """One large-star step for partition ``p``: each neighbour ``b > a`` of each node ``a`` is
    joined to ``m(a)``, the smallest of ``a`` and its neighbours, in place of ``a``. Also saves
    each node's ``m`` (``node``, ``label``) and says whether its input was already stars around
    their smallest nodes (every node has only greater neighbours, or exactly one smaller one):
    then ``m`` is each node's component label."""
    a, b, starts, deg, m = _neighbourhoods(inbox(work, stage, tasks, p))
    lower = np.add.reduceat((b < a).astype(np.int64), starts) if len(a) else deg
    star = bool(np.all((lower == 0) | ((deg == 1) & (lower == 1))))
    up = b > a
    nbytes = _both_ways(out, b[up], np.repeat(m, deg)[up], parts, node=a[starts], label=m)
    return {"nodes": len(starts), "star": star, "bytes": nbytes}


def small_star_task(out: str, work: str, stage: str, tasks: list[str], p: int,
                    parts: int) -> dict[str, Any]:  # fmt: skip
    """One small-star step for partition ``p``: each node ``a`` and its neighbours ``b < a`` are
    joined to ``m(a)``, the smallest of them (edges to greater neighbours are left to those)."""
    a, b, starts, deg, m = _neighbourhoods(inbox(work, stage, tasks, p))
    nodes = a[starts]
    me = np.repeat(m, deg)
    low = (b < a) & (b != me)
    moved = nodes != m
    x = np.concatenate([b[low], nodes[moved]])
    y = np.concatenate([me[low], m[moved]])
    return {"bytes": _both_ways(out, x, y, parts)}


def labels_task(out: str, work: str, tasks: list[str]) -> dict[str, Any]:
    """The component label (smallest position) of every node of the edges of ``tasks`` (of
    cc-edges, one partition), in one task: ``node`` ascending, ``label``."""
    nodes, roots, _ = indexed_components(inbox(work, EDGES, tasks, 0))
    return {"nodes": len(nodes), "bytes": save(out, node=nodes, label=roots)}


def route_task(out: str, work: str, tasks: list[str], labels: str, p: int,
               groups: int) -> dict[str, int]:  # fmt: skip
    """Partition ``p``'s pairs (of cc-edges ``tasks``, by first end) sorted by the decide group
    of their component, whose label is read from task ``p`` of stage ``labels``."""
    u = inbox(work, EDGES, tasks, p, "u", "cu")
    node, label = load(work, labels, p, "node"), load(work, labels, p, "label")
    lab = np.asarray(label)[np.searchsorted(node, u[:, 0])]
    return {"bytes": _keyed(out, lab, u, groups)}

"""Exact Hamming search over in-memory uint64 arrays: find_all, find_clusters and query.

A match is ``popcount(a ^ b) <= distance`` (inclusive). Pairs are int64 index pairs ``(i, j)``
with ``i < j`` into the input, each reported once and returned sorted by ``(i, j)``. The work is
done by :mod:`neardup.core.engine` over a :class:`~neardup.core.layout.Scheme` (a layout of
blocks, or several parts with their own thresholds) chosen by the cost model.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from neardup.config import DEFAULT_DISTANCE, default_threads
from neardup.core import engine, kernels
from neardup.core.bits import as_fingerprints
from neardup.core.cost import choose_blocks, choose_scheme
from neardup.core.layout import Layout, Scheme, TableSpec
from neardup.core.matches import Matches
from neardup.core.order import lexorder

__all__ = [
    "find_all",
    "find_all_values",
    "find_clusters",
    "cluster_groups",
    "clusters_from_pairs",
    "query",
    "resolve_layout",
    "resolve_scheme",
    "PermutedTables",
    "pairs_for_tables",
    "sort_pairs",
    "sorted_query_keys",
    "probe_table",
    "join_pairs",
]

#: Batch search: below this many fingerprints one thread is faster than starting several.
THREADS_FROM = 20_000

#: ``join_pairs(queries, corpus, plan, *, threads, memory)``: unsorted ``(query, corpus)``
#: position pairs within ``plan.distance`` (a Layout or Scheme), each once; the batch engine
#: behind :func:`query` and large :class:`neardup.index.Index` batches.
join_pairs = engine.join_pairs

_EMPTY_PAIRS = np.empty((0, 2), dtype=np.int64)


def resolve_layout(n: int, distance: int, blocks: int | None) -> Layout:
    """The single-part layout for ``n`` fingerprints: ``blocks`` if given, else
    :func:`~neardup.core.cost.choose_blocks` (the layout of stored tables and of Dask shards)."""
    if blocks is None:
        Layout(distance + 1, distance)  # validates distance with a clear message
        blocks = choose_blocks(n, distance)
    return Layout(blocks, distance)


def resolve_scheme(n: int, distance: int, blocks: int | None) -> Scheme:
    """The batch-search scheme for ``n`` fingerprints: the layout of ``blocks`` blocks if given,
    else :func:`~neardup.core.cost.choose_scheme` (one part or several)."""
    if blocks is not None:
        return Scheme.of(Layout(blocks, distance))
    Layout(distance + 1, distance)  # validates distance with a clear message
    return choose_scheme(n, distance)


def _gpu(device: str):
    """The GPU engine's module when ``device`` runs the search there, else None (the CPU).

    ``neardup.gpu`` imports nothing optional at import; it loads CuPy and numba-cuda only when
    a GPU is asked for, and raises a one-line ``DeviceUnavailable`` when ``"cuda"`` cannot run.
    """
    if device == "cpu":
        return None
    from neardup import gpu

    return gpu if gpu.use_gpu(device) else None


def _threads(n: int, threads: int | None) -> int:
    if n < THREADS_FROM:
        return 1
    return max(1, threads or default_threads())


def pairs_for_tables(
    fp: np.ndarray,
    plan: Layout | Scheme,
    rows: np.ndarray,
    *,
    part: int = 0,
    threads: int = 1,
    memory: int | str | None = None,
) -> np.ndarray:
    """Unsorted pairs ``(i, j)``, ``i < j``, within the plan's distance whose first table is
    among ``rows``: tables of part ``part`` of a :class:`Scheme` (or of a :class:`Layout`),
    numbered in that part's order of combinations of leading blocks; a pair's first part is
    the first part whose threshold it is within, and there its first table is the first
    combination of leading blocks it agrees on.

    The routine behind each shard of :mod:`neardup.distributed`: the union over a partition of
    the tables of every part finds every pair once.
    """
    return engine.pairs(fp, plan, rows=rows, part=part, threads=threads, memory=memory)


def sort_pairs(pairs: np.ndarray, n: int) -> np.ndarray:
    """Pairs of positions below ``n`` sorted by first, then second position."""
    if len(pairs) == 0:
        return _EMPTY_PAIRS.copy()
    key = pairs[:, 0].astype(np.uint64) * np.uint64(n) + pairs[:, 1].astype(np.uint64)
    key.sort()
    out = np.empty((len(key), 2), dtype=np.int64)
    out[:, 0] = key // np.uint64(n)
    out[:, 1] = key % np.uint64(n)
    return out


def find_all(
    fingerprints: Sequence[int] | np.ndarray,
    distance: int = DEFAULT_DISTANCE,
    blocks: int | None = None,
    *,
    threads: int | None = None,
    memory: int | str | None = None,
    device: str = "cpu",
) -> np.ndarray:
    """Every pair of positions whose fingerprints differ in at most ``distance`` bits.

    Parameters
    ----------
    fingerprints : sequence of int or ndarray
        Unsigned 64-bit fingerprints (bit 63 most significant). Repeated values are kept: equal
        fingerprints at different positions form a pair at distance 0.
    distance : int
        Largest Hamming distance that matches (inclusive), ``0 <= distance < 64``.
    blocks : int, optional
        Search with the single layout of this many blocks (``distance < blocks <= 64``).
        ``None`` lets the cost model pick the scheme with the least estimated work for the input
        size (:func:`neardup.core.cost.choose_scheme`), possibly several parts of the bits.
    threads : int, optional
        Worker threads. Default: ``NEARDUP_THREADS`` or all usable CPUs.
    memory : int or str, optional
        Bytes (or ``"8G"``) the search's partition buffers may use; with more room, more first
        blocks are searched at once (12 bytes per fingerprint each). Default: ``NEARDUP_MEMORY``
        or half the available memory. On a GPU: the GPU bytes a pass may use (default 80% of
        the free GPU memory); inputs that do not fit run in passes.
    device : {"cpu", "cuda", "auto"}
        Where the search runs: the CPU engine (default), a CUDA GPU (``pip install
        "neardup[gpu]"``; the same answers), or the GPU when one is usable, else the CPU.

    Returns
    -------
    ndarray of int64, shape (p, 2)
        Index pairs ``(i, j)``, ``i < j``, each pair once, sorted by ``i`` then ``j``.

    Raises
    ------
    ValueError
        For fingerprints outside ``[0, 2**64)`` or an invalid ``distance``/``blocks``/``memory``.
    neardup.gpu.DeviceUnavailable
        (An ``ImportError``.) For ``device="cuda"`` where CuPy, numba-cuda or a CUDA GPU is
        missing: one line naming it and ``pip install "neardup[gpu]"``.

    Examples
    --------
    >>> find_all([0b1011, 0b1001, 1 << 40], distance=1).tolist()
    [[0, 1]]
    """
    fp = as_fingerprints(fingerprints)
    scheme = resolve_scheme(len(fp), distance, blocks)
    n = len(fp)
    gpu = _gpu(device)
    if n < 2:
        return _EMPTY_PAIRS.copy()
    if gpu is not None:
        return gpu.find_all_pairs(fp, resolve_layout(n, distance, blocks), memory=memory)
    pairs = engine.pairs(fp, scheme, threads=_threads(n, threads), memory=memory)
    return sort_pairs(pairs, n)


def find_all_values(
    fingerprints: Sequence[int] | np.ndarray,
    distance: int = DEFAULT_DISTANCE,
    blocks: int | None = None,
    *,
    threads: int | None = None,
    memory: int | str | None = None,
    device: str = "cpu",
) -> np.ndarray:
    """Set form used by ``simhash-find-all``: distinct values, pairs of values ``a < b``.

    Repeated input values collapse to one before the search. Returns uint64 ``(p, 2)`` sorted
    by ``a`` then ``b``. ``threads``, ``memory`` and ``device`` are as in :func:`find_all`.
    """
    uniq = np.unique(as_fingerprints(fingerprints))
    pairs = find_all(uniq, distance, blocks, threads=threads, memory=memory, device=device)
    return uniq[pairs] if len(pairs) else np.empty((0, 2), dtype=np.uint64)


def clusters_from_pairs(n: int, pairs: np.ndarray) -> np.ndarray:
    """Connected components of the graph on ``n`` nodes with edges ``pairs``.

    Returns int64 labels; each label is the smallest index in its component, so a label names the
    component's first member and singletons are labelled with their own index.
    """
    import scipy.sparse  # imported here: find_all and query do not need it
    import scipy.sparse.csgraph

    if n == 0:
        return np.empty(0, dtype=np.int64)
    pairs = np.asarray(pairs, dtype=np.int64).reshape(-1, 2)
    graph = scipy.sparse.coo_matrix(
        (np.ones(len(pairs), dtype=np.int8), (pairs[:, 0], pairs[:, 1])), shape=(n, n)
    ).tocsr()
    _, comp = scipy.sparse.csgraph.connected_components(graph, directed=False)
    first = np.full(comp.max() + 1, n, dtype=np.int64)
    np.minimum.at(first, comp, np.arange(n, dtype=np.int64))
    return first[comp]


def find_clusters(
    fingerprints: Sequence[int] | np.ndarray,
    distance: int = DEFAULT_DISTANCE,
    blocks: int | None = None,
    *,
    threads: int | None = None,
    memory: int | str | None = None,
    device: str = "cpu",
) -> np.ndarray:
    """Connected components of the match graph (``popcount(a ^ b) <= distance``).

    A member of a cluster matches at least one other member, so two members may be further apart
    than ``distance`` (A~B~C with A and C far apart is one cluster). Identical values are one
    cluster and are searched once: a value repeated 100,000 times costs one search entry, not
    5 billion pairs. ``threads``, ``memory`` and ``device`` are as in :func:`find_all`.

    Returns
    -------
    ndarray of int64, shape (n,)
        For each input position, the smallest position in its cluster (its own position for a
        singleton). Use :func:`cluster_groups` for the member lists.
    """
    fp = as_fingerprints(fingerprints)
    # identical values are always one cluster: search the distinct values only, which also
    # keeps runs of one repeated value from producing a quadratic number of pairs
    uniq, inverse = np.unique(fp, return_inverse=True)
    pairs = find_all(uniq, distance, blocks, threads=threads, memory=memory, device=device)
    ulabels = clusters_from_pairs(len(uniq), pairs)
    # relabel by the first input position in each cluster
    comp = ulabels[inverse.reshape(-1)]
    n = len(fp)
    if n == 0:
        return np.empty(0, dtype=np.int64)
    first = np.full(len(uniq), n, dtype=np.int64)
    np.minimum.at(first, comp, np.arange(n, dtype=np.int64))
    return first[comp]


def cluster_groups(labels: np.ndarray, min_size: int = 2) -> list[np.ndarray]:
    """Member positions of each cluster with at least ``min_size`` members.

    Groups are ordered by their first member; positions within a group ascend.
    """
    labels = np.asarray(labels, dtype=np.int64)
    if len(labels) == 0:
        return []
    order = np.argsort(labels, kind="stable")
    sorted_labels = labels[order]
    cuts = np.flatnonzero(np.diff(sorted_labels)) + 1
    groups = np.split(order, cuts)
    return [g for g in groups if len(g) >= min_size]


def sorted_query_keys(
    queries: np.ndarray, spec: TableSpec, t: int
) -> tuple[np.ndarray, np.ndarray]:
    """Queries as table ``t``'s keys sorted ascending, and their positions in ``queries``.

    Returns ``(keys, order)``: uint64 keys and int64 positions, ``keys[i]`` being the key of
    ``queries[order[i]]``.
    """
    q = np.ascontiguousarray(queries, dtype=np.uint64)
    keys = q if spec.identity[t] else kernels.permute(q, spec, t, False)
    if len(keys) == 1:
        return keys, np.zeros(1, dtype=np.int64)
    order = np.argsort(keys, kind="stable")
    return np.ascontiguousarray(keys[order]), order.astype(np.int64)


def probe_table(
    table: np.ndarray,
    query_keys: np.ndarray,
    query_order: np.ndarray,
    spec: TableSpec,
    t: int,
    distance: int,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Matches within ``distance`` bits between sorted queries and one sorted table.

    The probe shared by :class:`PermutedTables` and :class:`neardup.index.Index`.

    Parameters
    ----------
    table : ndarray of uint64
        Keys of table ``t`` (``Layout.apply(corpus, t)``) sorted ascending.
    query_keys, query_order : ndarray
        From :func:`sorted_query_keys` for the same ``spec`` and ``t``.
    spec : TableSpec
        The layout's packed tables (``Layout.spec``).
    t : int
        Table row.
    distance : int
        Bits (inclusive), at most the layout's distance.

    Returns
    -------
    tuple of three int64 arrays
        ``(query position, table position, distance)`` of every match that table ``t`` is the
        first (in layout order) to find, so probing every table reports each match once.
    """
    if len(table) == 0 or len(query_keys) == 0:
        e = np.empty(0, dtype=np.int64)
        return e, e.copy(), e.copy()
    return kernels.query_table(table, query_keys, query_order, spec, int(t), int(distance))


class PermutedTables:
    """The corpus permuted and sorted once per table, ready for repeated queries.

    ``tables[t]`` holds the corpus in table ``t``'s key order sorted ascending and
    ``rows[t][i]`` the corpus position of ``tables[t][i]``.
    """

    def __init__(self, corpus: np.ndarray, layout: Layout) -> None:
        self.layout = layout
        self.corpus = corpus
        self.tables: list[np.ndarray] = []
        self.rows: list[np.ndarray] = []
        for t in range(layout.n_tables):
            perm = layout.apply(corpus, t)
            order = np.argsort(perm, kind="stable")
            self.tables.append(perm[order])
            self.rows.append(order.astype(np.int64))

    def probe(self, queries: np.ndarray, distance: int | None = None) -> Matches:
        """Corpus positions within ``distance`` (at most the layout's) of each query, nearest
        first (ties: the smaller position)."""
        layout = self.layout
        k = layout.distance if distance is None else int(distance)
        if not 0 <= k <= layout.distance:
            raise ValueError(
                f"query distance must be between 0 and the layout's distance {layout.distance} "
                f"(got {k})"
            )
        spec = layout.spec
        parts_q, parts_c, parts_d = [], [], []
        for t in range(layout.n_tables):
            if len(queries) == 0 or len(self.tables[t]) == 0:
                break
            qkeys, qord = sorted_query_keys(queries, spec, t)
            qi, pos, dist = probe_table(self.tables[t], qkeys, qord, spec, t, k)
            parts_q.append(qi)
            parts_c.append(self.rows[t][pos])
            parts_d.append(dist)
        if not parts_q:
            return Matches.empty(len(queries))
        qi, ci, di = np.concatenate(parts_q), np.concatenate(parts_c), np.concatenate(parts_d)
        order = lexorder((ci, di, qi))
        return Matches.from_sorted(qi[order], ci[order], di[order], len(queries))


def query(
    corpus: Sequence[int] | np.ndarray,
    queries: Sequence[int] | np.ndarray,
    distance: int = DEFAULT_DISTANCE,
    blocks: int | None = None,
    *,
    threads: int | None = None,
    memory: int | str | None = None,
    device: str = "cpu",
) -> Matches:
    """For each query fingerprint, the corpus positions within ``distance`` bits.

    Queries and corpus are searched together by the batch engine (the same schemes and threads
    as :func:`find_all`, only pairs of a query and a corpus member are checked); for many
    small batches against one corpus, :class:`PermutedTables` or :class:`neardup.Index` keep
    sorted tables instead. Each (query, corpus position) match is reported once. ``device``
    (and ``memory`` on a GPU) as in :func:`find_all`.

    Returns
    -------
    Matches
        Per query (``offsets``), the corpus positions (``ids``, int64) and ``distances``,
        nearest first, then by corpus position.

    Examples
    --------
    >>> r = query([0b1011, 0b1001, 0b111 << 40], [0b1000], distance=2)
    >>> r.ids.tolist(), r.distances.tolist(), r.to_lists()
    ([1, 0], [1, 2], [[(1, 1), (0, 2)]])
    """
    c = as_fingerprints(corpus, "corpus")
    q = as_fingerprints(queries, "queries")
    n = len(c) + len(q)
    scheme = resolve_scheme(n, distance, blocks)
    gpu = _gpu(device)
    if gpu is not None:
        both = np.concatenate([c, q])
        found = gpu.find_all_pairs(
            both, resolve_layout(n, distance, blocks), corpus_size=len(c), memory=memory
        )
        qi, ci = found[:, 1] - len(c), found[:, 0]
    else:
        pairs = engine.join_pairs(q, c, scheme, threads=_threads(n, threads), memory=memory)
        qi, ci = pairs[:, 0], pairs[:, 1]
    di = np.bitwise_count(q[qi] ^ c[ci]).astype(np.int64)
    order = lexorder((ci, di, qi))
    return Matches.from_sorted(qi[order], ci[order], di[order], len(q))

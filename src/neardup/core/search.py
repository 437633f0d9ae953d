"""Exact Hamming search over in-memory uint64 arrays: find_all, find_clusters and query.

A match is ``popcount(a ^ b) <= distance`` (inclusive). Pairs are int64 index pairs ``(i, j)``
with ``i < j`` into the input, each reported once (by the first table, in layout order, whose
leading blocks agree for that pair) and returned sorted by ``(i, j)``.
"""

from __future__ import annotations

from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import NamedTuple

import numpy as np

from neardup import config
from neardup.config import DEFAULT_DISTANCE, default_threads
from neardup.core import kernels
from neardup.core.bits import as_fingerprints
from neardup.core.layout import Layout, TableSpec, choose_blocks

__all__ = [
    "find_all",
    "find_all_values",
    "find_clusters",
    "cluster_groups",
    "clusters_from_pairs",
    "query",
    "QueryResult",
    "resolve_layout",
    "PermutedTables",
    "pairs_for_tables",
    "sort_pairs",
    "sorted_query_keys",
    "probe_table",
]

_EMPTY_PAIRS = np.empty((0, 2), dtype=np.int64)


def resolve_layout(n: int, distance: int, blocks: int | None) -> Layout:
    """The layout used for ``n`` fingerprints: ``blocks`` if given, else :func:`choose_blocks`."""
    if blocks is None:
        Layout(distance + 1, distance)  # validates distance with a clear message
        blocks = choose_blocks(n, distance)
    return Layout(blocks, distance)


def pairs_for_tables(
    fp: np.ndarray,
    spec: TableSpec,
    rows: np.ndarray,
    k: int,
    pool: ThreadPoolExecutor | None = None,
    threads: int = 1,
) -> np.ndarray:
    """Pairs found by the tables ``rows`` of ``spec``, each pair by the first table that can find it.

    One key buffer (8 bytes per fingerprint) is reused for every table. numpy's in-place sort
    (vectorized, releases the GIL) orders the keys; the numba kernels build and scan them.
    With ``pool`` and ``threads > 1`` each table is split across the threads: keys are built in
    ranges, partitioned in place by their top bits into parts that are sorted concurrently, and
    scanned in ranges cut at run boundaries, so memory stays at one buffer.
    """
    n = len(fp)
    keys = np.empty(n, dtype=np.uint64)
    outs: list[np.ndarray] = []
    out = np.empty((1024, 2), dtype=np.int64)
    cnt = 0
    split = pool is not None and threads > 1
    parts = 1 << max(0, (threads - 1).bit_length()) if split else 1
    for t in rows:
        build = (fp, spec, t, keys)
        scan = (keys, fp, spec, t, k)
        if not split:
            kernels._build_keys(*build, 0, n)
            keys.sort()
            out, cnt = kernels._scan_pairs(*scan, out, cnt, 0, n)
            continue
        cuts = [n * i // threads for i in range(threads + 1)]
        list(pool.map(lambda lo, hi, b=build: kernels._build_keys(*b, lo, hi), cuts[:-1], cuts[1:]))
        ranges = [(0, n)]
        bit = 63
        while len(ranges) < parts:
            ranges = [
                r
                for lo, hi in ranges
                for mid in [kernels._partition_bit(keys, lo, hi, bit)]
                for r in ((lo, mid), (mid, hi))
            ]
            bit -= 1
        list(pool.map(lambda r: keys[r[0] : r[1]].sort(), ranges))
        cuts = (
            [0]
            + [kernels._run_start(keys, spec.pbits[t], n * i // threads) for i in range(1, threads)]
            + [n]
        )
        found = pool.map(
            lambda lo, hi, a=scan: kernels._scan_pairs(
                *a, np.empty((1024, 2), dtype=np.int64), 0, lo, hi
            ),
            cuts[:-1],
            cuts[1:],
        )
        outs.extend(o[:c] for o, c in found)
    outs.append(out[:cnt])
    return np.concatenate(outs) if len(outs) > 1 else outs[0]


def sort_pairs(pairs: np.ndarray, n: int) -> np.ndarray:
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
) -> np.ndarray:
    """Every pair of positions whose fingerprints differ in at most ``distance`` bits.

    Parameters
    ----------
    fingerprints : sequence of int or ndarray
        Unsigned 64-bit fingerprints (bit 63 most significant). Repeated values are kept: equal
        fingerprints at different positions form a pair at distance 0.
    distance : int
        Largest Hamming distance that matches (inclusive), ``0 <= distance < blocks``.
    blocks : int, optional
        Number of blocks the 64 bits are split into (``distance < blocks <= 64``). ``None``
        picks the layout with the least estimated work for the input size
        (:func:`neardup.layout.choose_blocks`).
    threads : int, optional
        Worker threads; tables are independent and run in parallel. Default: all usable CPUs.

    Returns
    -------
    ndarray of int64, shape (p, 2)
        Index pairs ``(i, j)``, ``i < j``, each pair once, sorted by ``i`` then ``j``.

    Raises
    ------
    ValueError
        For fingerprints outside ``[0, 2**64)`` or an invalid ``distance``/``blocks``.

    Examples
    --------
    >>> find_all([0b1011, 0b1001, 1 << 40], distance=1).tolist()
    [[0, 1]]
    """
    fp = as_fingerprints(fingerprints)
    layout = resolve_layout(len(fp), distance, blocks)
    n = len(fp)
    if n < 2:
        return _EMPTY_PAIRS.copy()
    spec = layout.spec
    T = layout.n_tables
    nthreads = max(1, threads or default_threads())
    if n < config.THREADS_FROM:
        nthreads = 1
    k = layout.distance
    if nthreads == 1:
        pairs = pairs_for_tables(fp, spec, np.arange(T), k)
    elif n >= config.SPLIT_TABLES_FROM or T < nthreads:
        # large inputs: all threads work on one table at a time, one key buffer in all
        with ThreadPoolExecutor(nthreads) as pool:
            pairs = pairs_for_tables(fp, spec, np.arange(T), k, pool, nthreads)
    else:
        # small inputs: tables interleaved over threads, one key buffer per thread
        shares = [np.arange(w, T, nthreads) for w in range(nthreads)]
        with ThreadPoolExecutor(nthreads) as pool:
            parts = list(pool.map(lambda rows: pairs_for_tables(fp, spec, rows, k), shares))
        pairs = np.concatenate(parts)
    return sort_pairs(pairs, n)


def find_all_values(
    fingerprints: Sequence[int] | np.ndarray,
    distance: int = DEFAULT_DISTANCE,
    blocks: int | None = None,
    *,
    threads: int | None = None,
) -> np.ndarray:
    """Set form used by ``simhash-find-all``: distinct values, pairs of values ``a < b``.

    Repeated input values collapse to one. Returns uint64 ``(p, 2)`` sorted by ``a`` then ``b``.
    """
    uniq = np.unique(as_fingerprints(fingerprints))
    pairs = find_all(uniq, distance, blocks, threads=threads)
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
) -> np.ndarray:
    """Connected components of the match graph (``popcount(a ^ b) <= distance``).

    A member of a cluster matches at least one other member, so two members may be further apart
    than ``distance`` (A~B~C with A and C far apart is one cluster).

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
    pairs = find_all(uniq, distance, blocks, threads=threads)
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


class QueryResult(NamedTuple):
    """Flat query answers, sorted by query, then distance, then corpus position."""

    query_index: np.ndarray
    corpus_index: np.ndarray
    distance: np.ndarray


def sorted_query_keys(
    queries: np.ndarray, spec: TableSpec, t: int
) -> tuple[np.ndarray, np.ndarray]:
    """Queries as table ``t``'s keys sorted ascending, and their positions in ``queries``.

    Returns ``(keys, order)``: uint64 keys and int64 positions, ``keys[i]`` being the key of
    ``queries[order[i]]``.
    """
    q = np.ascontiguousarray(queries, dtype=np.uint64)
    keys = q if spec.identity[t] else kernels._permute(q, spec, t, False)
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
    return kernels._query_table(table, query_keys, query_order, spec, int(t), int(distance))


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

    def probe(self, queries: np.ndarray, distance: int | None = None) -> QueryResult:
        """Corpus positions within ``distance`` (at most the layout's) of each query."""
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
            e = np.empty(0, dtype=np.int64)
            return QueryResult(e, e.copy(), e.copy())
        qi, ci, di = np.concatenate(parts_q), np.concatenate(parts_c), np.concatenate(parts_d)
        order = np.lexsort((ci, di, qi))
        return QueryResult(qi[order], ci[order], di[order])


def query(
    corpus: Sequence[int] | np.ndarray,
    queries: Sequence[int] | np.ndarray,
    distance: int = DEFAULT_DISTANCE,
    blocks: int | None = None,
) -> QueryResult:
    """For each query fingerprint, the corpus positions within ``distance`` bits.

    Builds the permuted sorted tables of ``corpus`` (the online form of the search) and probes
    them with every query. Each (query, corpus position) match is reported once.

    Returns
    -------
    QueryResult
        Three int64 arrays of equal length ``(query_index, corpus_index, distance)``, sorted by
        query index, then distance (nearest first), then corpus position.

    Examples
    --------
    >>> r = query([0b1011, 0b1001, 0b111 << 40], [0b1000], distance=2)
    >>> r.corpus_index.tolist(), r.distance.tolist()
    ([1, 0], [1, 2])
    """
    c = as_fingerprints(corpus, "corpus")
    q = as_fingerprints(queries, "queries")
    layout = resolve_layout(len(c), distance, blocks)
    return PermutedTables(c, layout).probe(q)

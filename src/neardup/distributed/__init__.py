"""Batch search, clusters and dedup on a Dask cluster (``pip install neardup[dask]``).

Same answers as :func:`neardup.find_all` / :func:`neardup.find_clusters`, computed over
fingerprint sets held across a cluster: a NumPy array, a Dask array, a Dask DataFrame (a
fingerprint column, or a text column fingerprinted per partition) or Parquet files.

The work is split by the permuted tables of the single-machine search (docs/how-search-works.md; the
scheme of seomoz/simhash-cpp and Manku et al., WWW 2007). Tables whose keys start with the same
leading block(s) form a group; for each group every partition buckets its fingerprints by the top
bits of that key (the *shard*), so every candidate group of those tables lands in one shard. One
task per (group, shard) runs the single-machine search routine on the shard and maps its pairs back
to input positions. The pairs (small) are gathered and merged exactly as the threaded path merges.
Clusters are the connected components of the gathered edge list over the nodes that appear in it
(all other positions are singletons), so no process ever holds every fingerprint.

:func:`query` is the batch mode of Manku, Jain and Das Sarma (WWW 2007): a new batch's tables are built once and
shipped to the workers, and the stored corpus (an index, Parquet files, an array) streams past
them partition by partition (see :mod:`neardup.distributed.batch`).

A lost worker is handled by Dask: its tasks are recomputed from the input partitions (each task is
retried up to :data:`RETRIES` times); if that is impossible (e.g. scattered NumPy input lost with
its worker) the call raises :class:`DistributedJobError` and returns nothing.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any, NamedTuple

import numpy as np

from neardup._optional import require
from neardup.config import DEFAULT_DEDUP_DISTANCE, DEFAULT_DISTANCE
from neardup.distributed._dask import (
    DEFAULT_PARTITION_SIZE,
    RETRIES,
    DistributedJobError,
    check_workers,
    cluster_client,
    connect,
    is_parquet_paths,
    load_parts,
    merge_pairs,
    run_shards,
    to_frame,
)
from neardup.distributed.batch import BatchReport, batch_search, query
from neardup.distributed.plan import DEFAULT_SHARD_SIZE, ShardPlan, components, make_plan

__all__ = [
    "BatchReport",
    "DEFAULT_DEDUP_DISTANCE",
    "DistributedJobError",
    "RETRIES",
    "SearchReport",
    "ShardPlan",
    "components",
    "connect",
    "dedup",
    "dedup_frame",
    "find_all",
    "batch_search",
    "check_workers",
    "find_clusters",
    "make_plan",
    "query",
    "search",
]


class SearchReport(NamedTuple):
    """What a distributed search computed and how the work was split.

    ``pairs`` are index pairs (``find_all`` form) or cluster edges; ``n`` the number of input
    fingerprints; ``stats`` holds ``shuffle_bytes`` (bytes of value + position moved into
    shards), ``largest_shard`` (fingerprints) and ``tasks``; ``sizes`` the rows per input
    partition.
    """

    pairs: np.ndarray
    n: int
    plan: ShardPlan
    stats: dict[str, int]
    sizes: np.ndarray


def search(
    fingerprints: Any,
    distance: int = DEFAULT_DISTANCE,
    blocks: int | None = None,
    client: Any = None,
    *,
    column: str = "fingerprint",
    text_column: str | None = None,
    preset: str = "default",
    edges: bool = False,
    workers: int | None = None,
    shard_size: int = DEFAULT_SHARD_SIZE,
    partition_size: int = DEFAULT_PARTITION_SIZE,
    device: str = "cpu",
) -> SearchReport:
    """Run the sharded search and return the pairs with the plan and shuffle figures.

    ``edges=True`` returns cluster edges instead of all pairs (equal values linked to their
    first position and searched once). See :func:`find_all` for the other parameters.
    """
    with _session(client, workers) as c:
        check_workers(c, device)
        parts = load_parts(
            c,
            fingerprints,
            column,
            text_column=text_column,
            preset=preset,
            partition_size=partition_size,
        )
        threads = sum(c.nthreads().values()) or 1
        plan = make_plan(
            parts.n, distance, blocks, shard_size=shard_size, min_shards=threads, device=device
        )
        if parts.n < 2:
            empty = np.empty((0, 2), dtype=np.int64)
            stats = {"shuffle_bytes": 0, "largest_shard": 0, "tasks": 0}
            return SearchReport(empty, parts.n, plan, stats, parts.sizes)
        results, stats = run_shards(c, parts, plan, edges=edges, device=device)
    pairs = merge_pairs(results, parts.n)
    return SearchReport(pairs, parts.n, plan, stats, parts.sizes)


@contextlib.contextmanager
def _session(client: Any, workers: int | None) -> Iterator[Any]:
    with cluster_client(client, workers) as c:
        yield c


def find_all(
    fingerprints: Any,
    distance: int = DEFAULT_DISTANCE,
    blocks: int | None = None,
    client: Any = None,
    *,
    column: str = "fingerprint",
    text_column: str | None = None,
    preset: str = "default",
    workers: int | None = None,
    shard_size: int = DEFAULT_SHARD_SIZE,
    partition_size: int = DEFAULT_PARTITION_SIZE,
    device: str = "cpu",
) -> np.ndarray:
    """Every pair of positions whose fingerprints differ in at most ``distance`` bits, on Dask.

    Parameters
    ----------
    fingerprints : array-like, dask Array, dask DataFrame/Series, or Parquet path(s)
        Unsigned 64-bit fingerprints (bit 63 most significant). Positions count rows in
        partition order (for Parquet: files in the order given, rows in file order).
    distance : int
        Largest Hamming distance that matches (inclusive).
    blocks : int, optional
        Blocks per fingerprint; ``None`` picks the same layout as :func:`neardup.find_all`.
    client : distributed.Client, optional
        The cluster to run on; default: a LocalCluster of ``workers`` processes for this call.
    column : str
        Fingerprint column of a DataFrame or Parquet input.
    text_column : str, optional
        Instead of ``column``: a text column fingerprinted per partition with
        ``Fingerprinter(preset)``.
    workers : int, optional
        Worker processes of the default LocalCluster (ignored with ``client``).
    shard_size : int
        Wanted fingerprints per shard (16 bytes each are moved into shards per table group).
    partition_size : int
        Chunk size when a NumPy array is scattered to the cluster.
    device : {"cpu", "cuda", "auto"}
        Where each shard task searches, decided on the worker that runs it: its CPUs, its GPU
        (``pip install "neardup[gpu]"`` on the workers; the same answers), or its GPU when it
        has a usable one, else its CPUs. Run one worker process per GPU.

    Returns
    -------
    ndarray of int64, shape (p, 2)
        Exactly :func:`neardup.find_all`'s answer: pairs ``(i, j)``, ``i < j``, sorted.

    Raises
    ------
    ValueError
        Bad fingerprints (message names the partition) or an invalid ``distance``/``blocks``.
    DistributedJobError
        Workers were lost and their work could not be recomputed.
    neardup.gpu.DeviceUnavailable
        (An ``ImportError``.) ``device="cuda"`` where a worker has no usable GPU or GPU
        library: one line naming the worker and what is missing, before any work.
    ImportError
        Dask is not installed (``pip install neardup[dask]``).

    Examples
    --------
    >>> from distributed import Client, LocalCluster  # doctest: +SKIP
    >>> with LocalCluster(n_workers=2) as cl, Client(cl) as c:  # doctest: +SKIP
    ...     find_all([0b1011, 0b1001, 1 << 40], distance=1, client=c).tolist()
    [[0, 1]]
    """
    return search(
        fingerprints,
        distance,
        blocks,
        client,
        column=column,
        text_column=text_column,
        preset=preset,
        workers=workers,
        shard_size=shard_size,
        partition_size=partition_size,
        device=device,
    ).pairs


def _labels(n: int, edges: np.ndarray) -> np.ndarray:
    nodes, roots = components(edges)
    labels = np.arange(n, dtype=np.int64)
    labels[nodes] = roots
    return labels


def find_clusters(
    fingerprints: Any,
    distance: int = DEFAULT_DISTANCE,
    blocks: int | None = None,
    client: Any = None,
    **options: Any,
) -> np.ndarray:
    """Connected components of the match graph, on Dask: :func:`neardup.find_clusters`'s answer.

    Accepts the inputs and options of :func:`find_all`. Each shard searches its distinct values
    once and links repeated values to their first position; the gathered edges (not the
    fingerprints) are merged into components on the caller's process, over only the positions
    that occur in an edge.

    Returns
    -------
    ndarray of int64, shape (n,)
        For each position, the smallest position in its cluster (its own for a singleton).
    """
    rep = search(fingerprints, distance, blocks, client, edges=True, **options)
    return _labels(rep.n, rep.pairs)


def dedup(
    fingerprints: Any,
    distance: int = DEFAULT_DEDUP_DISTANCE,
    blocks: int | None = None,
    client: Any = None,
    **options: Any,
) -> np.ndarray:
    """Which rows to keep: the first (smallest position) row of each cluster, on Dask.

    Accepts the inputs and options of :func:`find_all` (default ``distance`` 6).

    Returns
    -------
    ndarray of bool, shape (n,)
        ``True`` for the rows kept: singletons and the first member of every cluster.
    """
    rep = search(fingerprints, distance, blocks, client, edges=True, **options)
    nodes, roots = components(rep.pairs)
    keep = np.ones(rep.n, dtype=bool)
    keep[nodes] = roots == nodes
    return keep


def _keep_rows(part: Any, dropped: np.ndarray, offsets: np.ndarray, partition_info=None) -> Any:
    start = int(offsets[partition_info["number"]]) if partition_info else 0
    pos = np.arange(start, start + len(part), dtype=np.int64)
    at = np.searchsorted(dropped, pos)
    hit = (at < len(dropped)) & (dropped[np.minimum(at, max(len(dropped) - 1, 0))] == pos)
    return part[~hit] if len(dropped) else part


def dedup_frame(
    frame: Any,
    distance: int = DEFAULT_DEDUP_DISTANCE,
    blocks: int | None = None,
    client: Any = None,
    *,
    column: str = "fingerprint",
    text_column: str | None = None,
    **options: Any,
) -> Any:
    """The rows of a Dask DataFrame (or Parquet files) that survive dedup, as a Dask DataFrame.

    Rows are dropped on the workers, partition by partition, from the sorted list of dropped
    positions (the non-first members of every cluster); the kept rows keep their order. Compute
    the result (or ``.to_parquet``) while the cluster is up.
    """
    dd = require("dask.dataframe", "dask", "neardup.distributed")

    if is_parquet_paths(frame):
        frame = to_frame(frame)
    if not isinstance(frame, dd.DataFrame):
        raise ValueError(
            f"dedup_frame needs a Dask DataFrame or Parquet path(s) (got {type(frame).__name__})"
        )
    rep = search(
        frame,
        distance,
        blocks,
        client,
        column=column,
        text_column=text_column,
        edges=True,
        **options,
    )
    nodes, roots = components(rep.pairs)
    dropped = nodes[roots != nodes]
    offsets = np.concatenate([[0], np.cumsum(rep.sizes)[:-1]]).astype(np.int64)
    return frame.map_partitions(_keep_rows, dropped, offsets, meta=frame._meta)

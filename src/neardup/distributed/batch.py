"""Batch mode on Dask: a new batch of fingerprints against a stored corpus of any size.

The batch query of Manku et al. (Detecting near-duplicates for web crawling, WWW 2007): the new
batch B (a day's crawl) is built into permuted tables once, on the caller, and shipped to every
worker; each task streams one partition of the stored corpus F (a row group of a Parquet file, rows
of an index segment, or a chunk of an array) past the tables and returns its matches; the caller
gathers and sorts them. Nothing of F is shuffled or sorted, and a worker holds the tables plus one
partition.

The answer is exactly the local one: :meth:`neardup.index.Index.search` of B when F is an
index, i.e. every (batch position, stored id) within the distance, sorted by batch position,
distance, then id, as one :class:`neardup.Matches`.
"""

from __future__ import annotations

import glob
import os
import time
from typing import Any, NamedTuple

import numpy as np

from neardup._optional import require
from neardup.config import DEFAULT_DISTANCE
from neardup.core.bits import as_fingerprints
from neardup.core.matches import Matches
from neardup.distributed._dask import (
    RETRIES,
    check_workers,
    cluster_client,
    gather_results,
    worker_address,
)
from neardup.index import IndexBackend, open_index
from neardup.index.batch import (
    DEFAULT_PART_ROWS,
    BatchTables,
    IndexPart,
    PartMatches,
    index_parts,
    merge_matches,
    read_index_part,
)
from neardup.index.segments import convert_ids

__all__ = ["BatchReport", "ParquetPart", "batch_search", "query"]


class ParquetPart(NamedTuple):
    """One row group of a Parquet file of the stored corpus; ``offset`` is the position of its
    first row among all rows (the id when the files have no id column)."""

    path: str
    row_group: int
    offset: int
    rows: int
    column: str
    id_column: str | None


class BatchReport(NamedTuple):
    """The matches of a batch query and how the work went.

    ``stats``: ``partitions``, ``stored`` (fingerprints streamed), ``batch`` (its size),
    ``tables`` and ``table_bytes`` (shipped to each worker), ``build_seconds`` (the tables, on
    the caller) and ``worker_seconds`` (the sum over tasks of reading plus probing, wall time
    measured inside the tasks), split into ``read_seconds`` and ``probe_seconds``, and
    ``worker_cpu_seconds`` (the CPU time of the tasks' threads: the work itself, whatever else
    shares the workers' cores).
    """

    matches: Matches
    stats: dict[str, Any]


def _is_index(path: Any) -> bool:
    return isinstance(path, (str, os.PathLike)) and os.path.isfile(
        os.path.join(os.fspath(path), "MANIFEST")
    )


def parquet_parts(paths: Any, column: str, id_column: str | None) -> tuple[list[ParquetPart], str]:
    """Row groups of Parquet file(s) (paths or globs, in the order given) and the id type the
    matches will have (``"int64"``: the id column's integers or row positions; ``"str"``)."""
    pq = require("pyarrow.parquet", "parquet", "batch queries of Parquet corpora")
    pa = require("pyarrow", "parquet", "batch queries of Parquet corpora")
    names = (
        [os.fspath(paths)] if isinstance(paths, (str, os.PathLike)) else list(map(os.fspath, paths))
    )
    files: list[str] = []
    for p in names:
        if any(ch in p for ch in "*?["):
            files += sorted(glob.glob(p))
        elif not os.path.exists(p):
            raise FileNotFoundError(2, "No such file or directory", p)
        else:
            files.append(p)
    parts: list[ParquetPart] = []
    id_type = "int64"
    offset = 0
    for path in files:
        meta = pq.ParquetFile(path)
        schema = meta.schema_arrow
        if column not in schema.names:
            raise ValueError(
                f"{path}: no column {column!r} (columns: {', '.join(schema.names)}); pass the "
                f"fingerprint column's name"
            )
        use_id = id_column if id_column is not None and id_column in schema.names else None
        if use_id is not None:
            t = schema.field(use_id).type
            kind = "str" if pa.types.is_string(t) or pa.types.is_large_string(t) else "int64"
            if not (kind == "str" or pa.types.is_integer(t)):
                raise ValueError(f"{path}: id column {use_id!r} holds {t}; ids are ints or strings")
            if parts and kind != id_type:
                raise ValueError(f"{path}: {kind} ids, but earlier files have {id_type} ids")
            id_type = kind
        elif id_type == "str":
            raise ValueError(f"{path}: no id column {id_column!r}, but earlier files have ids")
        for rg in range(meta.num_row_groups):
            rows = meta.metadata.row_group(rg).num_rows
            parts.append(ParquetPart(path, rg, offset, rows, column, use_id))
            offset += rows
    return parts, id_type


def _read_parquet(part: ParquetPart) -> tuple[np.ndarray, Any]:
    pq = require("pyarrow.parquet", "parquet", "batch queries of Parquet corpora")
    cols = [part.column] + ([part.id_column] if part.id_column else [])
    table = pq.ParquetFile(part.path).read_row_group(part.row_group, columns=cols)
    col = table.column(part.column)
    if col.null_count:
        raise ValueError(f"{part.path}, row group {part.row_group}: missing fingerprint values")
    where = f"{part.path}, row group {part.row_group}"
    fps = as_fingerprints(col.to_numpy(), f"{where}: fingerprints")
    ids = table.column(part.id_column) if part.id_column else None
    if ids is not None and ids.null_count:
        raise ValueError(f"{where}: missing values in the id column {part.id_column!r}")
    return fps, ids


def _probe(
    tables: BatchTables, fps: np.ndarray, k: int, device: str, batch: np.ndarray | None
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(batch positions, partition positions, distances) of a partition's matches: on this
    worker's GPU when ``device`` says so (the batch and the partition searched together, as
    :func:`neardup.query` does there), else by probing the batch's tables; the same matches."""
    if device != "cpu":
        from neardup import gpu
        from neardup.core.search import query as query_here

        try:
            on_gpu = gpu.use_gpu(device)
        except gpu.DeviceUnavailable as e:
            raise gpu.DeviceUnavailable(f"worker {worker_address()}: {e}") from None
        if on_gpu:
            m = query_here(fps, batch, k, device="cuda")
            return m.query_index, m.ids, m.distances
    return tables.probe(fps, k)


def _match(
    tables: BatchTables,
    part: Any,
    k: int,
    device: str = "cpu",
    batch: np.ndarray | None = None,
) -> tuple[PartMatches, float, float, int, float]:
    """One task: read a partition, probe the tables (or search with ``batch`` on the GPU, as
    ``device`` asks), return its matches, its timings (wall seconds reading and probing), its
    size and the CPU seconds of its thread."""
    c0 = time.thread_time()
    t0 = time.perf_counter()
    if isinstance(part, IndexPart):
        fps, keys, ids = read_index_part(part)
    elif isinstance(part, ParquetPart):
        fps, idcol = _read_parquet(part)
    else:  # (chunk of an array, offset)
        fps, offset = part
        fps = np.asarray(fps, dtype=np.uint64)
    t1 = time.perf_counter()
    qi, pos, d = _probe(tables, fps, k, device, batch)
    if isinstance(part, IndexPart):
        m = PartMatches(qi, keys[pos], ids[pos], d)
    elif isinstance(part, ParquetPart) and idcol is not None:
        values = idcol.take(pos).to_pylist()
        kind = "str" if values and isinstance(values[0], str) else None
        conv = convert_ids(values, None, kind) if values else None
        ikeys = conv.keys if conv is not None else np.empty(0, np.int64)
        out = np.empty(len(values), dtype=object if kind == "str" else np.int64)
        out[:] = values
        m = PartMatches(qi, ikeys, out, d)
    else:
        base = part.offset if isinstance(part, ParquetPart) else offset
        m = PartMatches(qi, pos + base, pos + base, d)
    return m, t1 - t0, time.perf_counter() - t1, len(fps), time.thread_time() - c0


def _corpus_parts(
    corpus: Any, distance: int, column: str, id_column: str | None, partition_size: int
) -> tuple[list[Any], str | None]:
    """(the partitions the tasks read, the ids' kind) of a corpus: an index's segment parts,
    Parquet row groups, or (chunk, offset) pairs of an array."""
    if isinstance(corpus, IndexBackend) or _is_index(corpus):
        ix = corpus if isinstance(corpus, IndexBackend) else open_index(corpus)
        try:
            if not 0 <= distance <= ix.distance:
                raise ValueError(
                    f"query distance must be between 0 and the index's distance {ix.distance} "
                    f"(got {distance}); create the index with a larger distance"
                )
            return index_parts(ix, partition_size), ix.id_type
        finally:
            if ix is not corpus:
                ix.close()
    if isinstance(corpus, (str, os.PathLike)) or (
        isinstance(corpus, (list, tuple)) and corpus and isinstance(corpus[0], (str, os.PathLike))
    ):
        return parquet_parts(corpus, column, id_column)
    fp = as_fingerprints(corpus, "corpus")
    return [(fp[a : a + partition_size], a) for a in range(0, len(fp), partition_size)], "int64"


def batch_search(
    corpus: Any,
    batch: Any,
    distance: int = DEFAULT_DISTANCE,
    blocks: int | None = None,
    client: Any = None,
    *,
    column: str = "fingerprint",
    id_column: str | None = "id",
    workers: int | None = None,
    partition_size: int = DEFAULT_PART_ROWS,
    device: str = "cpu",
) -> BatchReport:
    """Run a batch query on Dask and report how the work went; see :func:`query`."""
    parts, id_type = _corpus_parts(corpus, distance, column, id_column, partition_size)
    t0 = time.perf_counter()
    tables = BatchTables(batch, distance, blocks)
    build = time.perf_counter() - t0
    stats: dict[str, Any] = {
        "partitions": len(parts),
        "batch": tables.n,
        "tables": tables.layout.n_tables,
        "table_bytes": tables.nbytes,
        "build_seconds": build,
    }
    with cluster_client(client, workers) as c:
        check_workers(c, device)
        shipped = c.scatter(tables, broadcast=True, hash=False)
        # the GPU searches the batch's fingerprints with each partition instead of its tables
        fp = None if device == "cpu" else as_fingerprints(batch, "batch")
        on = c.scatter(fp, broadcast=True, hash=False) if fp is not None else None
        if parts and not isinstance(parts[0], (IndexPart, ParquetPart)):
            chunks = c.scatter([p[0] for p in parts], hash=False)
            parts = [(ch, p[1]) for ch, p in zip(chunks, parts, strict=True)]
            futs = [
                c.submit(_match_chunk, shipped, ch, off, distance, device, on, retries=RETRIES,
                         pure=False)
                for ch, off in parts
            ]  # fmt: skip
        else:
            P = len(parts)
            futs = c.map(
                _match, [shipped] * P, parts, [distance] * P, [device] * P, [on] * P,
                retries=RETRIES, pure=False,
            )  # fmt: skip
        results = gather_results(c, futs, "batch query")
        del shipped, on
    stats["stored"] = sum(r[3] for r in results)
    stats["read_seconds"] = sum(r[1] for r in results)
    stats["probe_seconds"] = sum(r[2] for r in results)
    stats["worker_seconds"] = stats["read_seconds"] + stats["probe_seconds"]
    stats["worker_cpu_seconds"] = sum(r[4] for r in results)
    return BatchReport(merge_matches([r[0] for r in results], id_type, tables.n), stats)


def _match_chunk(
    tables: BatchTables, chunk: np.ndarray, offset: int, k: int, device: str, batch: Any
):
    return _match(tables, (chunk, offset), k, device, batch)


def query(
    corpus: Any,
    batch: Any,
    distance: int = DEFAULT_DISTANCE,
    blocks: int | None = None,
    client: Any = None,
    **options: Any,
) -> Matches:
    """Every stored fingerprint within ``distance`` bits of each fingerprint of a new batch.

    The batch's tables are built once and shipped to the workers; each task streams one
    partition of the stored corpus past them (the batch mode of Manku et al., WWW 2007).

    Parameters
    ----------
    corpus : Index, index path, Parquet path(s) or array-like
        The stored corpus. An index (or its directory) is read segment by segment by the
        workers, which must see the same path; Parquet files (paths or globs, in order) are read
        one row group per task, fingerprints from ``column`` and ids from ``id_column`` (row
        positions when absent); an array is sent to the cluster in ``partition_size`` chunks
        (ids are positions).
    batch : sequence of int or ndarray
        The new fingerprints (uint64, bit 63 most significant).
    distance : int
        Bits (inclusive); for an index, at most its distance.
    blocks : int, optional
        Layout of the batch's tables (default: the fastest for ``len(batch)``).
    client : distributed.Client, optional
        The cluster; default: a LocalCluster of ``workers`` processes for this call.
    **options
        The options below, by keyword.

    Other Parameters
    ----------------
    column, id_column : str
        Parquet columns of the fingerprints and the ids.
    workers : int, optional
        Worker processes of the default LocalCluster.
    partition_size : int
        Stored rows per task for an index or an array (Parquet: one row group per task).
    device : {"cpu", "cuda", "auto"}
        Where each task searches, decided on its worker: by probing the batch's tables on its
        CPU, on its GPU (the batch and the partition searched together; the same matches), or
        on its GPU when it has a usable one. ``"cuda"`` needs one on every worker (checked
        before any work; one line naming a worker without).

    Returns
    -------
    Matches
        Per position in ``batch``, the stored ids (int64, or str objects) and distances,
        sorted by distance, then id (int ids ascending; str ids in the index's fixed order, by
        a 64-bit hash). For an index this equals ``Index.search(batch, distance)``.

    Raises
    ------
    ValueError
        Bad fingerprints or columns (the file and row group named), a distance above the index's.
    DistributedJobError
        Workers were lost beyond the retry limit; nothing partial is returned.
    """
    return batch_search(corpus, batch, distance, blocks, client, **options).matches

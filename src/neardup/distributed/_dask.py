"""Dask execution of the shard plan: split partitions, submit shard tasks, gather, merge.

Nothing here searches: every task calls a function of :mod:`neardup.distributed.plan`, which runs
the single-machine routines of :mod:`neardup.search` on one shard.
"""

from __future__ import annotations

import contextlib
import logging
import os
import shutil
import tempfile
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from neardup._optional import require
from neardup.core.bits import as_fingerprints
from neardup.core.search import sort_pairs
from neardup.distributed import plan as _plan
from neardup.io.leftovers import TEMP_SUFFIX, remove_leftovers, temp_prefix

#: Fingerprints per partition when a NumPy array (or sequence) is sent to the cluster.
DEFAULT_PARTITION_SIZE = 1 << 20

#: Times a task is retried after an error or a lost worker before the job fails.
RETRIES = 2


def _require() -> tuple[Any, Any]:
    dask = require("dask", "dask", "neardup.distributed")
    distributed = require("distributed", "dask", "neardup.distributed")
    return dask, distributed


class DistributedJobError(RuntimeError):
    """The cluster lost work it could not recompute; no (partial) result is returned."""


@contextlib.contextmanager
def cluster_client(client: Any = None, workers: int | None = None) -> Iterator[Any]:
    """Yield ``client``, or a client of a new LocalCluster (closed on exit).

    ``workers`` sets the LocalCluster's worker processes (one thread each); default: the usable
    CPU count. The cluster's scratch space (where workers spill) is a temporary directory of its
    own in Dask's ``temporary-directory``, else ``TMPDIR``, removed on exit (named as
    :mod:`neardup.io.leftovers` says, so that one a run killed outright left is removed by the
    next cluster, or ``neardup clean``). Dask's own log messages below CRITICAL (a lost worker
    restarted, a slow shutdown) are not shown: a job that fails raises its error, and one whose
    lost work was done again is complete.
    """
    if client is not None:
        yield client
        return
    dask, distributed = _require()
    if workers is not None and workers < 1:
        raise ValueError(f"workers must be >= 1 (got {workers})")
    n = workers or max(1, len(os.sched_getaffinity(0)))
    # in Dask's temporary directory, where its workers spill, when one is configured
    where = dask.config.get("temporary-directory", None) or tempfile.gettempdir()
    with (
        _scratch(where) as scratch,
        dask.config.set({"temporary-directory": scratch}),  # the scheduler's scratch space
        distributed.LocalCluster(
            n_workers=n,
            threads_per_worker=1,
            processes=True,
            local_directory=scratch,
            silence_logs=logging.CRITICAL,
            dashboard_address=None,
            # the scheduler's HTTP server (health, metrics) on a free port: its default, 8787,
            # taken by another cluster, is a warning on stderr
            scheduler_kwargs={"dashboard_address": ":0"},
        ) as cluster,
        distributed.Client(cluster) as c,
    ):
        yield c


@contextlib.contextmanager
def _scratch(where: str) -> Iterator[str]:
    """A new temporary directory in ``where`` for a LocalCluster's scratch space
    (``local_directory``), removed on exit; first, those of clusters killed outright."""
    remove_leftovers(where)
    path = tempfile.mkdtemp(prefix=temp_prefix("neardup-dask"), suffix=TEMP_SUFFIX, dir=where)
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)


@contextlib.contextmanager
def connect(scheduler: str | None = None, workers: int | None = None) -> Iterator[Any]:
    """A client of the cluster at ``scheduler``, else of a new LocalCluster of ``workers``.

    Both are closed on exit. Giving both is an error.
    """
    if scheduler is not None and workers is not None:
        raise ValueError("use either --scheduler or --workers, not both")
    if scheduler is None:
        with cluster_client(None, workers) as c:
            yield c
        return
    _, distributed = _require()
    with distributed.Client(scheduler) as c:
        yield c


@dataclass
class _Parts:
    """Fingerprint partitions held on the cluster: futures of uint64 arrays and their sizes."""

    futures: list[Any]
    sizes: np.ndarray

    @property
    def offsets(self) -> list[int]:
        return [0, *np.cumsum(self.sizes)[:-1].tolist()] if len(self.sizes) else []

    @property
    def n(self) -> int:
        return int(self.sizes.sum())


def _series_to_fp(part: Any, name: str, number: int) -> np.ndarray:
    """A pandas Series / NumPy chunk of fingerprints as uint64; errors name the partition."""
    values = part.to_numpy() if hasattr(part, "to_numpy") else np.asarray(part)
    if values.dtype == object or values.dtype.kind == "f":
        if hasattr(part, "isna") and bool(part.isna().any()):
            raise ValueError(f"{name}, partition {number}: missing fingerprint values")
    try:
        return as_fingerprints(values, f"{name}, partition {number}: fingerprints")
    except ValueError:
        raise
    except (TypeError, OverflowError) as e:
        raise ValueError(f"{name}, partition {number}: not 64-bit fingerprints ({e})") from None


def _text_to_fp(part: Any, preset: str, number: int) -> np.ndarray:
    from neardup.fingerprints import Fingerprinter

    texts = part.tolist()
    for row, v in enumerate(texts):
        if not isinstance(v, str):
            # the same rule as neardup.dedup on one machine: a missing text is an error, not
            # an empty document (which would fingerprint to 0 and merge with every other one)
            what = "missing (None)" if v is None or v != v else f"a {type(v).__name__}"
            raise ValueError(f"partition {number}, row {row}: text is {what}, expected a string")
    return Fingerprinter(preset).fingerprint_many(texts, threads=1)


def is_parquet_paths(data: Any) -> bool:
    """True when ``data`` names Parquet files: a path, or a list/tuple of ``str`` or
    ``os.PathLike`` (for Dask, unlike :func:`neardup.dedup`, a list of str is paths)."""
    if isinstance(data, (str, os.PathLike)):
        return True
    return (
        isinstance(data, (list, tuple))
        and len(data) > 0
        and all(isinstance(d, (str, os.PathLike)) for d in data)
    )


def to_frame(data: Any, columns: Sequence[str] | None = None) -> Any:
    """Parquet path(s) to a Dask DataFrame (one partition per row group or file)."""
    dd = require("dask.dataframe", "dask", "neardup.distributed")

    paths = (
        [os.fspath(data)] if isinstance(data, (str, os.PathLike)) else [os.fspath(d) for d in data]
    )
    for p in paths:
        if not any(ch in p for ch in "*?[") and not os.path.exists(p):
            raise FileNotFoundError(2, "No such file or directory", p)
    return dd.read_parquet(paths, columns=list(columns) if columns else None)


def load_parts(
    client: Any,
    data: Any,
    column: str = "fingerprint",
    *,
    text_column: str | None = None,
    preset: str = "default",
    partition_size: int = DEFAULT_PARTITION_SIZE,
) -> _Parts:
    """Put the fingerprints of ``data`` on the cluster as partitions; explicit dispatch on type.

    ``data`` is a NumPy array or sequence of fingerprints (scattered in ``partition_size``
    chunks), a 1-D Dask array, a Dask Series, a Dask DataFrame (``column`` holds fingerprints, or
    ``text_column`` holds text fingerprinted per partition with ``Fingerprinter(preset)``), or
    Parquet path(s) read as such a DataFrame.
    """
    dask, _ = _require()
    da = require("dask.array", "dask", "neardup.distributed")
    dd = require("dask.dataframe", "dask", "neardup.distributed")

    if is_parquet_paths(data):
        data = to_frame(data)  # the column is selected below (read only that column)
    if isinstance(data, dd.DataFrame):
        want = text_column or column
        if want not in data.columns:
            raise ValueError(
                f"no column {want!r} in the input (columns: {', '.join(map(str, data.columns))})"
            )
        data = data[want]
    if isinstance(data, dd.Series):
        fn: Callable[..., np.ndarray]
        if text_column is not None:
            fn, extra = _text_to_fp, preset
        else:
            fn, extra = _series_to_fp, str(data.name)
        parts = data.to_delayed(optimize_graph=True)
        tasks = [dask.delayed(fn)(p, extra, i) for i, p in enumerate(parts)]
        futures = client.compute(tasks, retries=RETRIES)
    elif isinstance(data, da.Array):
        if data.ndim != 1:
            raise ValueError(f"fingerprints must be one-dimensional (got shape {data.shape})")
        parts = data.to_delayed(optimize_graph=True).ravel().tolist()
        tasks = [dask.delayed(_series_to_fp)(p, "dask array", i) for i, p in enumerate(parts)]
        futures = client.compute(tasks, retries=RETRIES)
    else:
        fp = as_fingerprints(data)
        if partition_size < 1:
            raise ValueError(f"partition_size must be >= 1 (got {partition_size})")
        chunks = [fp[i : i + partition_size] for i in range(0, len(fp), partition_size)]
        futures = client.scatter(chunks, hash=False) if chunks else []
    sizes = np.array(client.gather(client.map(len, futures, pure=False)), dtype=np.int64)
    return _Parts(list(futures), sizes)


def gather_results(client: Any, futures: list[Any], what: str) -> list[Any]:
    """The results of ``futures``; lost workers raise :class:`DistributedJobError` naming
    ``what`` (no partial result)."""
    _, distributed = _require()
    try:
        return client.gather(futures)
    except (distributed.KilledWorker, distributed.client.FutureCancelledError) as e:
        raise DistributedJobError(
            f"distributed {what} failed: {type(e).__name__}: {e}; workers were lost beyond "
            f"the retry limit, no partial result was returned"
        ) from e
    except Exception as e:
        # dependencies that lived only on a dead worker (scattered NumPy input) cannot be
        # recomputed; dask reports them in several ways, all of which end the job here
        if "lost" in str(e).lower() or "cancel" in type(e).__name__.lower():
            raise DistributedJobError(
                f"distributed {what} failed: {type(e).__name__}: {e}; no partial result was "
                f"returned"
            ) from e
        raise


def run_shards(
    client: Any,
    parts: _Parts,
    plan: _plan.ShardPlan,
    *,
    edges: bool = False,
    device: str = "cpu",
) -> tuple[list[np.ndarray], dict[str, int]]:
    """Split every partition per group, run one task per (group, shard), gather their pairs.

    ``device``: where each shard is searched, resolved on the worker that runs it
    (:func:`check_workers` first refuses ``"cuda"`` where a worker has no usable GPU).

    Returns the per-shard pair (or edge) arrays and shuffle statistics: ``shuffle_bytes`` (bytes
    of values + positions moved into shards), ``largest_shard`` (fingerprints) and ``tasks``.
    """
    offsets = parts.offsets
    P = len(parts.futures)
    S = plan.n_shards
    shard_fn = _plan.shard_edges if edges else _plan.shard_pairs
    shard_futs: list[Any] = []
    sizes_futs: list[Any] = []
    # every argument is positional and small (a plan is a few integers), so each task carries
    # its own copy; keys are unique per call (pure=False), so a call never waits on keys that an
    # earlier call is releasing
    for g in range(len(plan.groups)):
        splits = client.map(
            _plan.split_partition,
            parts.futures,
            offsets,
            [plan] * P,
            [g] * P,
            retries=RETRIES,
            pure=False,
        )
        pieces = [
            client.map(_piece, [s] * S, range(S), retries=RETRIES, pure=False) for s in splits
        ]
        by_shard = [[pieces[p][s] for p in range(P)] for s in range(S)]
        shard_futs.extend(
            client.map(
                _search_shard,
                [shard_fn] * S,
                by_shard,
                [plan] * S,
                [g] * S,
                [device] * S,
                retries=RETRIES,
                pure=False,
            )
        )
        sizes_futs.extend(client.map(_split_sizes, splits, retries=RETRIES, pure=False))
        del splits, pieces, by_shard
    results = gather_results(client, shard_futs, "search")
    piece_sizes = np.array(gather_results(client, sizes_futs, "search"), dtype=np.int64)
    per_shard = piece_sizes.reshape(len(plan.groups), len(parts.futures), S).sum(axis=1)
    stats = {
        "shuffle_bytes": int(piece_sizes.sum()) * 16,
        "largest_shard": int(per_shard.max()) if per_shard.size else 0,
        "tasks": len(plan.groups) * (len(parts.futures) * (S + 1) + S),
    }
    return results, stats


def worker_address() -> str:
    """The address of the Dask worker running this task (for messages)."""
    _, distributed = _require()
    try:
        return str(distributed.get_worker().address)
    except ValueError:  # not on a worker (a task run by hand)
        return "this process"


def _search_shard(
    fn: Callable[..., np.ndarray], pieces: Any, plan: _plan.ShardPlan, group: int, device: str
) -> np.ndarray:
    """One shard task: ``fn`` (:func:`~neardup.distributed.plan.shard_pairs` or ``shard_edges``)
    on ``device``; a GPU this worker lacks is one line naming the worker."""
    if device == "cpu":  # the CPU engine never imports the GPU engine
        return fn(pieces, plan, group, device)
    from neardup.gpu import DeviceUnavailable

    try:
        return fn(pieces, plan, group, device)
    except DeviceUnavailable as e:
        raise DeviceUnavailable(f"worker {worker_address()}: {e}") from None


def _gpu_missing() -> str | None:
    """On a worker: why ``device="cuda"`` cannot run there, or None when it can."""
    from neardup.gpu import DeviceUnavailable, use_gpu

    try:
        use_gpu("cuda")
    except DeviceUnavailable as e:
        return str(e)
    return None


def check_workers(client: Any, device: str) -> None:
    """Check ``device`` before any work: ``"cuda"`` needs a usable GPU on every worker, else
    :class:`~neardup.gpu.DeviceUnavailable` names one that lacks it (one line). ``"auto"`` is
    resolved by each task on its worker (its GPU when it has one, else its CPUs)."""
    if device == "cpu":
        return
    from neardup.gpu import DeviceUnavailable, check_device

    if check_device(device) != "cuda":
        return
    missing = {addr: why for addr, why in client.run(_gpu_missing).items() if why}
    if missing:
        addr = min(missing)
        more = f" (and {len(missing) - 1} more)" if len(missing) > 1 else ""
        raise DeviceUnavailable(f"worker {addr}{more}: {missing[addr]}")


def _piece(split: list[tuple[np.ndarray, np.ndarray]], s: int) -> tuple[np.ndarray, np.ndarray]:
    return split[s]


def _split_sizes(split: list[tuple[np.ndarray, np.ndarray]]) -> list[int]:
    return [len(fp) for fp, _ in split]


def merge_pairs(results: list[np.ndarray], n: int) -> np.ndarray:
    """The merge of the threaded path: concatenate and sort by (i, j)."""
    pairs = np.concatenate(results) if results else np.empty((0, 2), dtype=np.int64)
    return sort_pairs(pairs, max(n, 1))

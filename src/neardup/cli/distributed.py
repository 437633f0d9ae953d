"""``neardup find-all`` and ``neardup clusters``: batch search over fingerprint files.

Inputs are decimal fingerprint files (one unsigned value per line) or Parquet files with a
fingerprint column, read as one sequence in the order given. Positions count from 0 over that
sequence. ``--scheduler ADDRESS`` runs on a Dask cluster (Parquet files are then read by the
workers, so they must see the same paths), ``--workers N`` on a local Dask cluster of N
processes; without either, the single-machine threaded path runs.
"""

from __future__ import annotations

import click
import numpy as np

from neardup._optional import require
from neardup.cli.common import (
    Reporter,
    blocks_option,
    dask_options,
    device_option,
    distance_option,
    output_option,
    quiet_option,
)
from neardup.cli.style import announce_compile, plural
from neardup.core.bits import as_fingerprints
from neardup.core.search import cluster_groups
from neardup.errors import InputError, holding
from neardup.io.formats import display_name, format_json_rows, read_fingerprints
from neardup.io.readers import open_parquet
from neardup.io.writers import OutputSet

_HOLDING = "the fingerprints and the search keys (about 30 bytes per fingerprint) and the {} found"
_FIX = "split the input or run the search on Dask (--workers N, --scheduler ADDRESS)"


def _is_parquet(path: str) -> bool:
    return path.lower().endswith((".parquet", ".pq"))


def _read_local(inputs: tuple[str, ...], column: str) -> np.ndarray:
    """All inputs as one uint64 array (decimal files parsed here, Parquet via pyarrow)."""
    parts = []
    for path in inputs:
        if _is_parquet(path):
            pa = require("pyarrow", feature="Parquet")
            pf = open_parquet(path)
            names = pf.schema_arrow.names
            if column not in names:
                raise InputError(path, None, f"no column {column!r} (columns: {', '.join(names)})")
            try:
                col = pf.read(columns=[column]).column(column)
                if col.null_count:
                    raise InputError(path, None, f"column {column!r} has missing values")
                values = col.to_numpy()
            except (pa.ArrowException, OSError, TypeError) as e:
                first = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
                raise InputError(path, None, f"unreadable Parquet data ({first})") from None
            parts.append(as_fingerprints(values, f"{path}: column {column!r}"))
        else:
            parts.append(read_fingerprints(path))
    return np.concatenate(parts) if parts else np.empty(0, dtype=np.uint64)


def _input_files(inputs: tuple[str, ...]) -> list[str]:
    """The inputs as given and the files they name (no output may be one of them)."""
    from neardup.io.sources import InputPath, expand_inputs

    files = expand_inputs([InputPath(p) for p in inputs], one_output=False)
    return [*inputs, *(f.path for f in files)]


def _search(
    inputs: tuple[str, ...],
    column: str,
    distance: int,
    blocks: int | None,
    scheduler: str | None,
    workers: int | None,
    clusters: bool,
    rep: Reporter,
    device: str = "cpu",
) -> tuple[int, np.ndarray]:
    """(n, pairs) or (n, labels), on the cluster when asked, else on this machine (on the GPU
    of each worker, or of this machine, with ``device``)."""
    if scheduler is not None and workers is not None:
        raise click.UsageError("use either --scheduler or --workers, not both")
    from neardup.io.sources import InputPath, expand_inputs

    # directories and globs name their files, as for every command
    inputs = tuple(f.path for f in expand_inputs([InputPath(p) for p in inputs], one_output=False))
    if distance < 0:
        raise click.UsageError(f"distance must be >= 0 (got distance={distance})")
    if scheduler is None and workers is None:
        from neardup.core.search import find_all, find_clusters

        fp = _read_local(inputs, column)
        rep.say(f"read {plural(len(fp), 'fingerprint')} in {rep.lap():.2f}s")
        announce_compile(rep.prog, ["search"], rep.quiet)
        search = find_clusters if clusters else find_all
        out = search(fp, distance, blocks, device=device)
        return len(fp), out

    import neardup.distributed as nd
    from neardup.distributed import connect

    if all(_is_parquet(p) for p in inputs):
        for path in inputs:  # fail before any cluster starts
            names = open_parquet(path).schema_arrow.names
            if column not in names:
                raise InputError(path, None, f"no column {column!r} (columns: {', '.join(names)})")
        data: object = list(inputs)
    elif any(_is_parquet(p) for p in inputs):
        raise click.UsageError("mix of Parquet and decimal inputs; convert them to one kind")
    else:
        data = _read_local(inputs, column)
    with connect(scheduler, workers) as c:
        threads = sum(c.nthreads().values())
        rep.say(f"cluster: {plural(len(c.nthreads()), 'worker')}, {plural(threads, 'thread')}")
        report = nd.search(data, distance, blocks, c, column=column, edges=clusters, device=device)
    rep.say(
        f"{report.plan.describe()}; moved {report.stats['shuffle_bytes'] / 1e6:.1f} MB into "
        f"shards in {rep.lap():.2f}s"
    )
    if not clusters:
        return report.n, report.pairs
    nodes, roots = nd.components(report.pairs)
    labels = np.arange(report.n, dtype=np.int64)
    labels[nodes] = roots
    return report.n, labels


def _options(f):
    f = quiet_option(f)
    f = device_option(f)
    f = dask_options(f)
    f = click.option(
        "--column",
        default="fingerprint",
        show_default=True,
        help="Fingerprint column of Parquet inputs.",
    )(f)
    f = blocks_option(f)
    f = distance_option()(f)
    f = output_option(f)
    f = click.argument("inputs", nargs=-1, required=True)(f)
    return f


@click.command(
    "find-all",
    short_help="Every pair of fingerprints within DISTANCE bits.",
    context_settings={"help_option_names": ["-h", "--help"]},
)
@_options
def find_all_cmd(
    inputs: tuple[str, ...],
    output: str,
    distance: int,
    blocks: int | None,
    column: str,
    scheduler: str | None,
    workers: int | None,
    device: str,
    quiet: bool,
) -> None:
    """Write every pair of positions within DISTANCE bits as a JSON row [i, j], i < j, sorted.

    INPUTS are decimal fingerprint files or Parquet files, read as one sequence in order.
    """
    rep = Reporter("neardup find-all", quiet)
    with OutputSet(_input_files(inputs)) as outs, holding(_HOLDING.format("pairs"), _FIX):
        out = outs.file(output)
        _, pairs = _search(inputs, column, distance, blocks, scheduler, workers, False, rep, device)
        data = format_json_rows(
            pairs.reshape(-1).astype(np.uint64), np.arange(0, 2 * len(pairs) + 1, 2)
        )
        with outs.open(out) as f:
            f.write(data)
        outs.commit()
    rep.say(f"{plural(len(pairs), 'pair')} written to {display_name(output, output=True)}")


@click.command(
    "clusters",
    short_help="Clusters of fingerprints within DISTANCE bits.",
    context_settings={"help_option_names": ["-h", "--help"]},
)
@_options
def clusters_cmd(
    inputs: tuple[str, ...],
    output: str,
    distance: int,
    blocks: int | None,
    column: str,
    scheduler: str | None,
    workers: int | None,
    device: str,
    quiet: bool,
) -> None:
    """Write each cluster of two or more positions as a JSON row [i, j, ...], ascending.

    Clusters are connected components of matches within DISTANCE bits; rows are ordered by their
    first position. INPUTS are decimal fingerprint files or Parquet files, read in order.
    """
    rep = Reporter("neardup clusters", quiet)
    with OutputSet(_input_files(inputs)) as outs, holding(_HOLDING.format("cluster labels"), _FIX):
        out = outs.file(output)
        _, labels = _search(inputs, column, distance, blocks, scheduler, workers, True, rep, device)
        groups = cluster_groups(labels, min_size=2)
        flat = np.concatenate(groups) if groups else np.empty(0, dtype=np.int64)
        ptr = np.zeros(len(groups) + 1, dtype=np.int64)
        np.cumsum([len(g) for g in groups], out=ptr[1:])
        with outs.open(out) as f:
            f.write(format_json_rows(flat.astype(np.uint64), ptr))
        outs.commit()
    rep.say(f"{plural(len(groups), 'cluster')} written to {display_name(output, output=True)}")

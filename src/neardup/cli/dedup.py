"""``neardup dedup``: documents in, documents without their near-duplicates out."""

from __future__ import annotations

import contextlib
import json
import pathlib
import sys
import time
from typing import Any

import click

from neardup.cli.common import dask_options
from neardup.cli.fingerprint import (
    fingerprint_options,
    input_options,
    make_fingerprinter,
    resolve_input,
)
from neardup.dedup import DEFAULT_DEDUP_DISTANCE, KEEP_POLICIES, DedupResult
from neardup.errors import InputError
from neardup.io import atomic_output

PROG = "neardup dedup"


def _json_id(v: object) -> object:
    return v if isinstance(v, (str, int, float, bool)) or v is None else str(v)


def _write_clusters(result: DedupResult, path: str) -> None:
    with atomic_output(path, "w") as f:
        for c in result.iter_clusters():
            c["kept"] = _json_id(c["kept"])
            c["members"] = [_json_id(m) for m in c["members"]]
            f.write(json.dumps(c, ensure_ascii=False) + "\n")


def _write_drop_list(result: DedupResult, path: str) -> None:
    with atomic_output(path, "w") as f:
        for i in result.dropped.nonzero()[0].tolist():
            f.write(f"{result.ids[i]}\n")


def _size(n: float) -> str:
    for unit in ("B", "kB", "MB", "GB"):
        if abs(n) < 1000 or unit == "GB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1000
    return f"{n:.1f} TB"  # pragma: no cover


def _summary_lines(s: dict[str, Any]) -> list[str]:
    sec = s["seconds"]
    docs = s["documents"]
    pct = 100.0 * s["dropped"] / docs if docs else 0.0
    lines = [
        f"documents read   {docs}"
        + (f" ({s['skipped']} bad records skipped)" if s["skipped"] else ""),
        f"clusters         {s['clusters']} (of 2 or more near-duplicates)",
        f"dropped          {s['dropped']} ({pct:.1f}%), kept {s['kept']}",
    ]
    if "bytes_in" in s:
        lines.append(
            f"bytes            {_size(s['bytes_in'])} in, {_size(s['bytes_out'])} out, "
            f"{_size(s['bytes_saved'])} saved"
        )
    stages = ", ".join(f"{k} {v:.2f} s" for k, v in sec.items() if k != "total")
    rate = s["documents_per_second"]
    lines.append(
        f"time             {sec['total']:.2f} s ({stages})"
        + (f", {rate:,} documents/s" if rate else "")
    )
    return lines


@click.command("dedup")
@click.argument("inputs", nargs=-1, required=True, metavar="INPUT...")
@click.option(
    "-o",
    "--output",
    required=True,
    help="Kept documents, in the input's format: JSONL/lines -> a file ('-' stdout), Parquet -> "
    "a Parquet file, text files -> a directory.",
)
@click.option(
    "--clusters",
    "clusters_path",
    default=None,
    help="Write each cluster of near-duplicates as a JSON line: kept id, size, member ids, "
    "each member's distance (bits) to the kept one.",
)
@click.option("--drop-list", default=None, help="Write the ids removed, one per line.")
@click.option(
    "--keep",
    type=click.Choice(KEEP_POLICIES),
    default="first",
    show_default=True,
    help="Survivor of each cluster: first in input order, or longest text (ties: first).",
)
@click.option(
    "-d",
    "--distance",
    type=click.IntRange(0, 63),
    default=DEFAULT_DEDUP_DISTANCE,
    show_default=True,
    help="Largest Hamming distance (bits) between fingerprints that makes documents duplicates.",
)
@click.option(
    "--blocks",
    type=click.IntRange(1, 64),
    default=None,
    help="Search blocks (> distance); default: chosen for the corpus size.",
)
@fingerprint_options
@input_options
@click.option(
    "--skip-bad",
    is_flag=True,
    help="Report malformed records, non-string texts and duplicate ids on stderr and skip them "
    "(they are not written) instead of failing.",
)
@click.option("--threads", type=click.IntRange(min=1), default=None, help="Worker threads.")
@click.option("-q", "--quiet", is_flag=True, help="No progress bars, messages or summary.")
@click.option(
    "--json-summary",
    default=None,
    metavar="FILE",
    help="Write the summary as one JSON object to FILE ('-' stdout).",
)
@click.option(
    "--against",
    default=None,
    metavar="INDEX",
    help="Also drop documents within --distance bits of anything in this neardup index "
    "(see `neardup index`): dedup a new dump against everything seen before.",
)
@click.option("--update", is_flag=True, help="With --against: add the kept documents to the index.")
@dask_options
def dedup(
    inputs: tuple[str, ...],
    output: str,
    clusters_path: str | None,
    drop_list: str | None,
    keep: str,
    distance: int,
    blocks: int | None,
    preset: str,
    window: int | None,
    in_format: str,
    lines: bool,
    field: str | None,
    column: str | None,
    id_field: str,
    skip_bad: bool,
    threads: int | None,
    quiet: bool,
    json_summary: str | None,
    against: str | None,
    update: bool,
    scheduler: str | None,
    workers: int | None,
) -> None:
    """Remove near-duplicate documents.

    Reads JSONL (--text-field, --id-field), Parquet (columns of those names), or text files (a
    directory, glob or list; a document per file, or per line with --lines), finds clusters of
    documents whose 64-bit simhash fingerprints differ in at most --distance bits, keeps one
    document per cluster and writes the kept documents untouched, in input order and in the
    input's format. Clusters are connected components, so two members may differ in more than
    --distance bits. The input is streamed twice (fingerprints, then copying); outputs appear
    only when complete.
    """
    from tqdm import tqdm

    from neardup.dedup import dedup as run_dedup
    from neardup.dedup import write_kept

    fingerprinter = make_fingerprinter(preset, window)
    in_format, text_field = resolve_input(in_format, lines, field, column)
    if blocks is not None and blocks <= distance:
        raise click.BadParameter(
            f"blocks must be > distance (got blocks={blocks}, distance={distance}); "
            f"use --blocks {distance + 1} or more",
            param_hint="--blocks",
        )
    if output == "-" and json_summary == "-":
        raise click.UsageError("--output - and --json-summary - both want stdout; pick one")

    bars: dict[str, Any] = {}

    def progress(stage: str, count: int) -> None:
        bar = bars.get(stage)
        if bar is None:
            total = len(result_docs) if stage == "write" and result_docs else None
            bar = bars[stage] = tqdm(
                total=total,
                desc="fingerprint" if stage == "read" else "write",
                unit=" docs",
                file=sys.stderr,
                disable=True if quiet else None,  # None: only on a terminal
                leave=False,
                dynamic_ncols=True,
            )
        bar.update(count - bar.n)

    def on_bad(err: InputError) -> None:
        if not quiet:
            click.echo(f"{PROG}: skipped {err}", err=True)

    if update and against is None:
        raise click.UsageError("--update needs --against INDEX")
    stack = contextlib.ExitStack()
    client = None
    if scheduler is not None or workers is not None:
        from neardup.distributed._dask import connect

        client = stack.enter_context(connect(scheduler, workers))
    index = None
    if against is not None:
        from neardup.index.hooks import open_index

        index = open_index(against, update)
    result_docs: list[Any] = []
    try:
        result = run_dedup(
            [pathlib.Path(p) for p in inputs],
            distance=distance,
            keep=keep,
            blocks=blocks,
            fingerprinter=fingerprinter,
            text_field=text_field,
            id_field=id_field or None,
            fmt=in_format,
            output=None,
            skip_bad=skip_bad,
            on_bad=on_bad,
            threads=threads,
            progress=progress,
            against=index,
            client=client,
        )
        result_docs = result.ids
        if "read" in bars:
            bars.pop("read").close()
        if not quiet:
            n, c = len(result), result.n_clusters
            click.echo(f"{PROG}: {n} documents fingerprinted, {c} clusters found", err=True)
        assert result.scan is not None
        t0 = time.perf_counter()
        result.bytes_out = write_kept(
            result.scan, result.kept, output, lambda n: progress("write", n)
        )
        result.bytes_in = result.scan.bytes_in
        if clusters_path is not None:
            _write_clusters(result, clusters_path)
        if drop_list is not None:
            _write_drop_list(result, drop_list)
        if index is not None and update:
            from neardup.index.hooks import add_survivors

            added = add_survivors(index, result.ids, result.fingerprints, result.kept)
            if not quiet:
                click.echo(f"{PROG}: added {added} documents to {against}", err=True)
        result.seconds["write"] = time.perf_counter() - t0
    finally:
        for bar in bars.values():
            bar.close()
        if index is not None:
            index.close()
        stack.close()

    summary = result.summary()
    if json_summary is not None:
        with atomic_output(json_summary, "w") as f:
            f.write(json.dumps(summary) + "\n")
    if not quiet:
        for line in _summary_lines(summary):
            click.echo(f"{PROG}: {line}", err=True)

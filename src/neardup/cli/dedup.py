"""``neardup dedup``: documents in, documents without their near-duplicates out."""

from __future__ import annotations

import contextlib
import json
import pathlib
import sys
from typing import Any

import click

from neardup.cli.common import dask_options
from neardup.cli.fingerprint import (
    fingerprint_options,
    input_options,
    make_fingerprinter,
    resolve_input,
)
from neardup.core.decide import DEFAULT_DEDUP_DISTANCE, KEEP_POLICIES
from neardup.errors import InputError
from neardup.io.writers import atomic_output

PROG = "neardup dedup"


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
    "(see `neardup index`): dedup a new dump against everything seen before. With "
    "--scheduler/--workers this runs in batch mode on the cluster, and INDEX may also be "
    "Parquet files of the stored corpus (a path or glob ending in .parquet; columns "
    "'fingerprint' and 'id').",
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

    from neardup.pipeline.job import dedup as run_dedup

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
    if update and against is None:
        raise click.UsageError("--update needs --against INDEX")

    bars: dict[str, Any] = {}

    def progress(stage: str, count: int) -> None:
        bar = bars.get(stage)
        if bar is None:
            for other in bars.values():
                other.close()
            bar = bars[stage] = tqdm(
                desc="fingerprint" if stage == "read" else "write",
                unit=" docs",
                file=sys.stderr,
                disable=True if quiet else None,  # None: only on a terminal
                leave=False,
                dynamic_ncols=True,
            )
        bar.update(count - bar.n)

    def say(message: str) -> None:
        if not quiet:
            for bar in bars.values():
                bar.clear()
            click.echo(f"{PROG}: {message}", err=True)

    def on_bad(err: InputError) -> None:
        say(f"skipped {err}")

    with contextlib.ExitStack() as stack:
        client = None
        if scheduler is not None or workers is not None:
            from neardup.distributed import connect

            client = stack.enter_context(connect(scheduler, workers))
        stack.callback(lambda: [bar.close() for bar in bars.values()])
        result = run_dedup(
            [pathlib.Path(p) for p in inputs],
            distance=distance,
            keep=keep,
            blocks=blocks,
            fingerprinter=fingerprinter,
            text_field=text_field,
            id_field=id_field or None,
            fmt=in_format,
            output=output,
            clusters=clusters_path,
            drop_list=drop_list,
            skip_bad=skip_bad,
            on_bad=on_bad,
            threads=threads,
            progress=progress,
            log=say,
            against=against,
            update=update,
            client=client,
        )

    summary = result.summary()
    if json_summary is not None:
        with atomic_output(json_summary, "w") as f:
            f.write(json.dumps(summary) + "\n")
    if not quiet:
        for line in _summary_lines(summary):
            click.echo(f"{PROG}: {line}", err=True)

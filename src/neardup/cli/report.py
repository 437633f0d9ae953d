"""``neardup report``: an HTML report of a dedup run from its ``--clusters`` file and its input."""

from __future__ import annotations

import os
from typing import Any

import click

from neardup import config
from neardup.cli.fingerprint import input_options, resolve_input
from neardup.cli.progress import Progress, progress_option, tick
from neardup.cli.style import plural, size
from neardup.errors import InputError
from neardup.io.files import input_size, metered
from neardup.io.hf import dataset_texts_and_ids, is_saved_dataset, load_saved_dataset
from neardup.io.readers import read_documents
from neardup.io.sources import InputPath, expand_inputs
from neardup.pipeline.report import (
    digest_clusters_file,
    json_id,
    summary_from_digest,
    texts_from_records,
    write_report,
)

PROG = "neardup report"

#: Documents between two progress callbacks while reading the input.
PROGRESS_EVERY = 256


def report_option(f: Any) -> Any:
    """``--report FILE`` for commands that can write the HTML report of their run."""
    return click.option(
        "--report",
        "report_path",
        default=None,
        metavar="FILE",
        help="Also write an HTML report (summary, histograms, largest clusters, kept and "
        "dropped texts side by side, search by id) to FILE; needs neardup[report].",
    )(f)


def _dataset_texts(path: str, text_field: str, id_field: str | None, wanted: set[Any]):
    """(documents, texts of ``wanted``) of a saved dataset, ids as dedup gave them."""
    ds = load_saved_dataset(path)
    texts, ids = dataset_texts_and_ids(ds, text_field, id_field)
    found: dict[Any, str] = {}
    n = 0
    for n, text in enumerate(texts, start=1):
        key = json_id(ids[n - 1] if ids is not None else n - 1)
        if key in wanted and isinstance(text, str):
            found[key] = text[: config.REPORT_TEXT_CHARS]
    return n, found


def _input_texts(
    inputs: tuple[str, ...],
    in_format: str,
    text_field: str,
    id_field: str,
    wanted: set[Any],
    bar: Progress,
) -> tuple[int, dict[Any, str]]:
    """(documents read, texts of the ``wanted`` ids) from the input files, with progress."""
    files = expand_inputs([InputPath(p) for p in inputs], in_format, one_output=False)
    if any(f.path == "-" for f in files):
        raise InputError("<stdin>", None, "report reads files; save stdin to a file first")
    documents = 0

    def count(n: int) -> None:
        nonlocal documents
        documents = n
        bar.update(meter.done, n)

    with metered() as meter:
        bar.stage("read", sum(input_size(f.path) for f in files))
        records = read_documents(
            [f.path for f in files], in_format, text_field, id_field or None, lambda e: None
        )
        try:
            records = tick(records, count, PROGRESS_EVERY)
            texts = texts_from_records(records, wanted, read_all=True)
        finally:
            bar.close()
    return documents, texts


@click.command("report", short_help="An HTML report of a dedup run.")
@click.argument("inputs", nargs=-1, required=True, metavar="INPUT...")
@click.option(
    "--clusters",
    "clusters_path",
    required=True,
    metavar="FILE",
    help="The --clusters file written by `neardup dedup` (one JSON line per cluster).",
)
@click.option(
    "-o",
    "--output",
    default="report.html",
    show_default=True,
    help="The HTML file to write (one self-contained page).",
)
@click.option(
    "--sample",
    type=click.IntRange(min=0),
    default=None,
    help=f"Clusters whose texts are shown side by side, chosen at random [default: "
    f"{config.REPORT_SAMPLE}].",
)
@click.option("--seed", type=int, default=0, show_default=True, help="Seed of that choice.")
@click.option("--title", default="neardup dedup report", show_default=True, help="Page title.")
@input_options
@click.option("-q", "--quiet", is_flag=True, help="No progress or summary on stderr.")
@progress_option
def report(
    inputs: tuple[str, ...],
    clusters_path: str,
    output: str,
    sample: int | None,
    seed: int,
    title: str,
    in_format: str,
    lines: bool,
    field: str | None,
    column: str | None,
    id_field: str,
    quiet: bool,
    progress_mode: str,
) -> None:
    """Write an HTML report of a dedup run: summary, histograms of cluster sizes and of the
    distance (bits, and Jaccard when recorded) of dropped documents to their kept ones, the
    largest clusters, kept and dropped texts side by side for a sample of clusters, the
    documents dropped as seen in an index (dedup --against) with the entry each matched, and a
    search by id.

    INPUT is what the dedup read (same --text-field/--id-field), read once more to count the
    documents and fetch the sampled texts; the page needs nothing else to open.
    """
    in_format, text_field = resolve_input(in_format, lines, field, column)
    n = config.REPORT_SAMPLE if sample is None else sample
    digest = digest_clusters_file(clusters_path, n, seed)
    wanted = digest.ids()
    if len(inputs) == 1 and is_saved_dataset(inputs[0]):
        documents, texts = _dataset_texts(inputs[0], text_field, id_field or None, wanted)
    else:
        documents, texts = _input_texts(
            inputs, in_format, text_field, id_field, wanted, Progress(PROG, progress_mode, quiet)
        )
    missing = len(wanted) - len(texts)
    if missing and not quiet:
        click.echo(
            f"{PROG}: {plural(missing, 'sampled document')} not found in the input "
            "(check --text-field/--id-field)",
            err=True,
        )
    summary = summary_from_digest(digest, documents)
    settings = {"clusters file": os.path.basename(clusters_path)}
    written = write_report(output, summary, digest, texts, settings=settings, title=title)
    if not quiet:
        click.echo(
            f"{PROG}: wrote {output} ({size(written)}): {plural(digest.count, 'cluster')} "
            f"from {plural(documents, 'document')}, {len(digest.sample):,} shown side by side",
            err=True,
        )

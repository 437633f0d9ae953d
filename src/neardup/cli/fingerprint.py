"""``neardup fingerprint``: documents in, 64-bit simhash fingerprints out."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import click

from neardup import config
from neardup._optional import require
from neardup.cli.common import output_option
from neardup.cli.progress import Progress, progress_option
from neardup.cli.style import announce_compile, plural
from neardup.errors import InputError, holding
from neardup.io.files import input_size, metered
from neardup.io.formats import display_name
from neardup.io.readers import FORMATS
from neardup.io.remote import RETRIES as REMOTE_RETRIES
from neardup.io.sources import InputPath, expand_inputs, require_readers
from neardup.io.writers import OutputSet
from neardup.pipeline.stream import Fingerprinted, fingerprint_all, reads_in_blocks

OUTPUT_FORMATS = ("auto", "decimal", "jsonl", "parquet")
PROG = "neardup fingerprint"


def _output_format(path: str, fmt: str) -> str:
    if fmt != "auto":
        return fmt
    low = path.lower()
    if low.endswith((".jsonl", ".ndjson")):
        return "jsonl"
    if low.endswith((".parquet", ".pq")):
        return "parquet"
    return "decimal"


_HOLDING = (
    "the id and fingerprint of every document (about 220 bytes per document with short ids; "
    "docs/guides/memory.md)"
)
_FIX = "fingerprint the inputs in parts (one command per file) and concatenate the outputs"


def fingerprint_options(func: Callable) -> Callable:
    """The --preset and --window options shared by the commands that fingerprint documents;
    build the fingerprinter with :func:`make_fingerprinter`."""
    func = click.option(
        "--window",
        type=click.IntRange(min=1),
        default=None,
        help="Tokens per shingle (default: the preset's, 3 for 'default'). 2 tolerates small "
        "edits in short documents better.",
    )(func)
    return click.option(
        "--preset",
        default="default",
        show_default=True,
        help="Fingerprint preset: 'default' (Unicode, any language) or 'reference' (simhash-cpp).",
    )(func)


def input_options(func: Callable) -> Callable:
    """The document-input options (--format, --lines, --field, --column, --id-field) shared by
    the commands that read documents; resolve them with :func:`resolve_input`."""
    options = [
        click.option(
            "--format",
            "in_format",
            type=click.Choice(FORMATS),
            default="auto",
            show_default=True,
            help="Input format; auto: *.jsonl/*.ndjson JSONL, *.parquet/*.pq Parquet, else a "
            "document per file ('lines': a document per line).",
        ),
        click.option("--lines", is_flag=True, help="Shorthand for --format lines."),
        click.option(
            "--field",
            "--text-field",
            "field",
            default=None,
            help="JSONL field holding the text [default: text].",
        ),
        click.option(
            "--column", default=None, help="Parquet column holding the text [default: text]."
        ),
        click.option(
            "--id-field",
            default="id",
            show_default=True,
            help="JSONL field / Parquet column holding the document id (else file:line).",
        ),
        click.option(
            "--remote-timeout",
            type=click.FloatRange(min=0, min_open=True),
            default=config.REMOTE_TIMEOUT_S,
            show_default=True,
            metavar="SECONDS",
            expose_value=False,
            callback=_set_remote_timeout,
            help="Remote inputs (https://, s3://, ...): seconds to wait for a connection or for "
            f"the next bytes before a read is retried ({REMOTE_RETRIES} retries, with "
            "backoff, from where it stopped).",
        ),
    ]
    for option in reversed(options):
        func = option(func)
    return func


def _set_remote_timeout(ctx: click.Context, _param: click.Parameter, value: float) -> float:
    config.REMOTE_TIMEOUT_S = value
    return value


def check_preset(preset: str) -> None:
    """Raise click.BadParameter for an unknown --preset."""
    from neardup.fingerprints import PRESETS

    if preset not in PRESETS:
        raise click.BadParameter(
            f"unknown preset {preset!r}; use one of {', '.join(sorted(PRESETS))}",
            param_hint="--preset",
        )


def make_fingerprinter(preset: str, window: int | None = None):
    """The Fingerprinter of the --preset/--window options (a bad preset is a usage error)."""
    from neardup.fingerprints import Fingerprinter

    check_preset(preset)
    return Fingerprinter(preset) if window is None else Fingerprinter(preset, window=window)


def resolve_input(in_format: str, lines: bool, field: str | None, column: str | None):
    """``(format, text_field)`` from the options of :func:`input_options`."""
    if lines:
        if in_format not in ("auto", "lines"):
            raise click.UsageError(f"--lines conflicts with --format {in_format}")
        in_format = "lines"
    if field is not None and column is not None and field != column:
        raise click.UsageError("give the text's name once: --field (JSONL) or --column (Parquet)")
    return in_format, field or column or "text"


@click.command("fingerprint", short_help="Fingerprint documents with 64-bit simhash.")
@click.argument("inputs", nargs=-1, required=True, metavar="INPUT...")
@fingerprint_options
@input_options
@output_option
@click.option(
    "--output-format",
    type=click.Choice(OUTPUT_FORMATS),
    default="auto",
    show_default=True,
    help="auto: by the output's extension (*.jsonl, *.parquet), else decimal lines.",
)
@click.option(
    "--skip-bad",
    is_flag=True,
    help="Report undecodable or malformed records on stderr and skip them instead of failing.",
)
@click.option("--threads", type=click.IntRange(min=1), default=None, help="Worker threads.")
@click.option("-q", "--quiet", is_flag=True, help="No progress bar or summary on stderr.")
@progress_option
def fingerprint(
    inputs: tuple[str, ...],
    preset: str,
    window: int | None,
    in_format: str,
    lines: bool,
    field: str | None,
    column: str | None,
    id_field: str,
    output: str,
    output_format: str,
    skip_bad: bool,
    threads: int | None,
    quiet: bool,
    progress_mode: str,
) -> None:
    """Fingerprint documents with 64-bit simhash.

    Reads plain text (a document per file, or per line with --lines), JSONL (--field) or
    Parquet (--column) and writes one unsigned decimal fingerprint per line, ready for
    simhash-find-all, or JSONL/Parquet with the document id beside each fingerprint. The output
    appears only when complete.
    """
    fp = make_fingerprinter(preset, window)
    in_format, text_field = resolve_input(in_format, lines, field, column)
    out_fmt = _output_format(output, output_format)
    if out_fmt == "parquet" and output == "-":
        raise click.UsageError("Parquet output needs a file: use -o OUT.parquet")
    files = expand_inputs([InputPath(p) for p in inputs], in_format, one_output=False)
    with OutputSet([*inputs, *(f.path for f in files)]) as outs, holding(_HOLDING, _FIX):
        out = outs.file(output)  # checked before any work
        got, skipped = fingerprint_inputs(
            PROG, fp, files, text_field, id_field, skip_bad, threads, quiet, progress_mode
        )
        ids, fps = got.ids, got.fingerprints
        if out_fmt == "parquet":
            pa = require("pyarrow", feature="Parquet output")
            pq = require("pyarrow.parquet", feature="Parquet output")
            table = pa.table(
                {
                    "id": pa.array([None if i is None else str(i) for i in ids], type=pa.string()),
                    "fingerprint": pa.array(fps, type=pa.uint64()),
                }
            )
            with outs.open(out, "wb") as f:
                pq.write_table(table, f)
        elif out_fmt == "jsonl":
            from neardup.pipeline.write import json_id

            with outs.open(out, "w") as f:
                for rid, v in zip(ids, fps.tolist(), strict=True):
                    row = {"id": json_id(rid), "fingerprint": v}
                    f.write(json.dumps(row, allow_nan=False) + "\n")
        else:
            with outs.open(out, "w") as f:
                f.write("".join(f"{v}\n" for v in fps.tolist()))
        outs.commit()
    if not quiet:
        click.echo(
            f"{PROG}: {plural(len(fps), 'document')} fingerprinted"
            + (f", {plural(skipped, 'bad record')} skipped" if skipped else "")
            + f", written to {display_name(output, output=True)}",
            err=True,
        )


def fingerprint_inputs(
    prog: str,
    fp: Any,
    files: list[Any],
    text_field: str,
    id_field: str,
    skip_bad: bool,
    threads: int | None,
    quiet: bool,
    progress_mode: str,
    groups: tuple[str, ...] = ("fingerprint",),
    keys: bool = False,
    each: Callable[[Any], None] | None = None,
) -> tuple[Fingerprinted, int]:
    """Every document of ``files`` fingerprinted with a progress bar, and the bad records
    skipped (reported on stderr; without ``skip_bad`` the first one is raised); ``keys`` and
    ``each`` as for :func:`neardup.pipeline.stream.fingerprint_all`."""
    skipped = 0
    bar = Progress(prog, progress_mode, quiet)

    def on_bad(err: InputError) -> None:
        nonlocal skipped
        skipped += 1
        if not quiet:
            bar.message(f"skipped {err}")

    require_readers(files)  # a missing package is named before the compile notice
    total = None if any(f.path == "-" for f in files) else sum(input_size(f.path) for f in files)
    announce_compile(prog, [*groups, *(["reader"] if reads_in_blocks(files) else [])], quiet)
    with metered() as meter:
        bar.stage("fingerprint", total)
        try:
            got = fingerprint_all(
                files,
                fp,
                text_field=text_field,
                id_field=id_field or None,
                threads=threads,
                on_bad=on_bad if skip_bad else None,
                progress=lambda n: bar.update(meter.done, n),
                keys=keys,
                each=each,
            )
        finally:
            bar.close()
    return got, skipped

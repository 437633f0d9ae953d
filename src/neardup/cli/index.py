"""``neardup index``: create, add to, query, remove from, compact and inspect a persistent index."""

from __future__ import annotations

import contextlib
import json
import os
import sys
from collections.abc import Callable
from typing import Any

import click
import numpy as np

from neardup.cli.common import dask_options
from neardup.cli.progress import progress_option
from neardup.cli.style import announce_compile, plural
from neardup.core.decide import DEFAULT_DEDUP_DISTANCE
from neardup.core.similarity import distance_for_threshold
from neardup.core.sketch import SKETCH_WORDS, Sketches, set_sketches
from neardup.errors import IdError, InputError, holding
from neardup.io.formats import display_name, read_fingerprints
from neardup.io.writers import OutputSet

PROG = "neardup index"


def _input_options(f: Callable[..., Any]) -> Callable[..., Any]:
    """The document options of ``neardup fingerprint``, plus --fingerprints for decimal lines."""
    from neardup.cli.fingerprint import fingerprint_options, input_options

    options = [
        click.option(
            "--fingerprints",
            "raw",
            is_flag=True,
            help="INPUTs hold one unsigned decimal fingerprint per line (ids: 0-based positions "
            "for queries, automatic integers for add).",
        ),
        fingerprint_options,
        input_options,
        click.option("--skip-bad", is_flag=True, help="Skip malformed records (reported)."),
        click.option("--threads", type=click.IntRange(min=1), default=None, help="Threads."),
        click.option("-q", "--quiet", is_flag=True, help="No summary on stderr."),
        progress_option,
    ]
    for opt in reversed(options):
        f = opt(f)
    return f


def read_inputs(
    inputs: tuple[str, ...],
    raw: bool,
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
    progress_mode: str = "auto",
    where: list[tuple[str, int]] | None = None,
    sketch_words: int | None = None,
    groups: tuple[str, ...] = ("fingerprint", "index"),
) -> tuple[np.ndarray, list[Any] | None, Sketches | None]:
    """Fingerprints, ids and sketches of the inputs: decimal lines (ids and sketches None) or
    fingerprinted documents.

    Document ids are the id field's values when all are integers, else their text. ``where``,
    when given, receives the (file, line) of every document, to name one in a later error.
    With ``sketch_words`` (an index with sketches) documents get the MinHash sketch of their
    shingle set, and their fingerprints are the sketches' first words (set fingerprints).
    ``groups``: the kernels the command compiles on a first run (announced before any work).
    """
    from neardup.cli.fingerprint import fingerprint_inputs, make_fingerprinter, resolve_input
    from neardup.io.sources import InputPath, expand_inputs, require_readers

    if not raw:
        in_format, text_field = resolve_input(in_format, lines, field, column)
    files = expand_inputs([InputPath(p) for p in inputs], in_format, one_output=False)
    inputs = tuple(f.path for f in files)
    if raw:
        require_readers(files)  # a missing package is named before the compile notice
        announce_compile(PROG, [g for g in groups if g != "fingerprint"], quiet)
        parts = [read_fingerprints(p) for p in inputs]
        return (np.concatenate(parts) if parts else np.zeros(0, np.uint64)), None, None
    fp = make_fingerprinter(preset, window)
    sketches: list[Sketches] = []

    def sketch(batch: Any) -> None:
        sk = set_sketches((batch.key_offsets, batch.keys), sketch_words, threads=threads)
        sketches.append(sk)

    got, _ = fingerprint_inputs(
        PROG, fp, files, text_field, id_field, skip_bad, threads, quiet, progress_mode,
        groups, keys=sketch_words is not None,
        each=sketch if sketch_words is not None else None,
    )  # fmt: skip
    if where is not None:
        names = ["<stdin>" if f.path == "-" else f.path for f in files]
        where.extend(zip(map(names.__getitem__, got.file.tolist()), got.record.tolist()))
    fps, ids = got.fingerprints, got.ids
    if not all(isinstance(i, int) and not isinstance(i, bool) for i in ids):
        ids = [str(i) for i in ids]
    sk_all = None
    if sketch_words is not None:  # the fingerprints are the sketches' first words
        fps = np.concatenate([s.fingerprints for s in sketches]) if sketches else fps
        sk_all = Sketches(
            np.concatenate([s.words for s in sketches]) if sketches else
            np.zeros((0, sketch_words), dtype=np.uint64),
            np.concatenate([s.sizes for s in sketches]) if sketches else
            np.zeros(0, dtype=np.uint32),
        )  # fmt: skip
    return fps, ids, sk_all


_HOLDING = "the fingerprints and ids of the inputs and their answers (docs/guides/memory.md)"
_FIX = "give the inputs in several smaller calls"


def _fit_ids(ids: list[Any] | None, id_type: str | None) -> list[Any] | None:
    """Document ids in the index's kind: integers become text for a string-id index."""
    if ids is not None and id_type == "str":
        return [str(i) for i in ids]
    return ids


@click.group("index", short_help="A persistent index of fingerprints: add, query, remove.")
def index() -> None:
    """A persistent index of fingerprints: add, query, remove, compact.

    Build one with `neardup index create`, fill it with `add`, ask it with `query`;
    `neardup dedup --against INDEX` drops documents already seen.
    """


@index.command("create", short_help="Create an empty index.")
@click.argument("path")
@click.option(
    "--distance",
    type=click.IntRange(0, 63),
    default=None,
    help="Largest distance (bits) the index answers; `neardup dedup --against` needs at least "
    f"its --distance [default: {DEFAULT_DEDUP_DISTANCE}, dedup's; with --threshold, the "
    f"candidate distance of that threshold: 0.8 -> {distance_for_threshold(0.8)}].",
)
@click.option(
    "-t",
    "--threshold",
    type=click.FloatRange(0, 1, min_open=True),
    default=None,
    help="Create an index for verified dedup down to this Jaccard threshold: it keeps a MinHash "
    "sketch of each document's shingles, and `neardup dedup --against` drops a document only "
    "when its Jaccard estimated from the sketches with an entry is >= dedup's --threshold.",
)
@click.option(
    "--sketch-words",
    type=click.IntRange(2, 64),
    default=None,
    help=f"With --threshold: 64-bit words per sketch [default: {SKETCH_WORDS}, "
    f"{8 * SKETCH_WORDS + 4} bytes per entry]; more words estimate the Jaccard more closely.",
)
@click.option(
    "--blocks",
    type=click.IntRange(1, 64),
    default=None,
    help="Blocks of the layout (C(blocks, distance) tables of 8 bytes per fingerprint); "
    "default: the fastest for --expected-size, or with --threshold distance + 1 (the fewest "
    "tables; dedup --against searches its batch by the batch engine).",
)
@click.option(
    "--expected-size",
    type=click.IntRange(min=1),
    default=1_000_000,
    show_default=True,
    help="Fingerprints the index is expected to hold; picks the fastest layout for that size.",
)
@click.option(
    "--compress",
    is_flag=True,
    help="Store the tables compressed (Elias-Fano: about 64 - log2(N) + 2 bits per fingerprint "
    "per table instead of 64); same answers.",
)
def create_cmd(
    path: str,
    distance: int | None,
    threshold: float | None,
    sketch_words: int | None,
    blocks: int | None,
    expected_size: int,
    compress: bool,
) -> None:
    """Create an empty index in directory PATH."""
    from neardup.index import Index

    if os.path.exists(os.path.join(path, "MANIFEST")):
        raise InputError(
            path,
            None,
            "an index already exists here; add to it with `neardup index add "
            f"{path} INPUT...`, or remove the directory to start again",
        )
    if sketch_words is not None and threshold is None:
        raise click.UsageError("--sketch-words needs --threshold (an index for verified dedup)")
    if distance is None and threshold is None:
        distance = DEFAULT_DEDUP_DISTANCE
    with Index.create(
        path, distance, blocks, expected_size=expected_size, compress=compress,
        threshold=threshold, sketch_words=sketch_words,
    ) as ix:  # fmt: skip
        sketches = ""
        if ix.sketch_words is not None:
            sketches = f", sketches of {ix.sketch_words} words for verified dedup"
        click.echo(
            f"{PROG}: created {ix.path}: distance {ix.distance}, blocks {ix.blocks}, "
            f"{ix.layout.n_tables} tables{', compressed' if compress else ''}{sketches}",
            err=True,
        )


@index.command("add", short_help="Add documents or fingerprints to an index.")
@click.argument("path")
@click.argument("inputs", nargs=-1, required=True, metavar="INPUT...")
@_input_options
def add_cmd(path: str, inputs: tuple[str, ...], quiet: bool, **kw: Any) -> None:
    """Fingerprint INPUT documents (or read --fingerprints) and add them to the index PATH."""
    from neardup.index import Index

    with Index.open(path, "w") as ix, holding(_HOLDING, _FIX):
        where: list[tuple[str, int]] = []
        if kw["raw"] and ix.sketch_words is not None:
            raise click.UsageError(
                f"index {path} keeps a sketch of each document's shingles; add documents, not "
                "--fingerprints"
            )
        fps, ids, sketches = read_inputs(
            inputs, quiet=quiet, where=where, sketch_words=ix.sketch_words, **kw
        )
        if ids is None and ix.id_type == "str":
            raise click.UsageError(
                f"index {ix.path} has string ids and --fingerprints inputs carry none; "
                "add documents (their ids are used)"
            )
        try:
            ix.add(None if sketches is not None else fps, _fit_ids(ids, ix.id_type),
                   sketches=sketches)  # fmt: skip
        except IdError as e:
            if e.position is None or e.position >= len(where):
                raise
            source, line = where[e.position]
            also = ""
            if e.first is not None and e.first < len(where):
                also = f" (first at {where[e.first][0]}:{where[e.first][1]})"
            raise InputError(source, line, f"index {ix.path}: {e.reason}{also}") from None
        if not quiet:
            click.echo(
                f"{PROG}: added {plural(len(fps), 'fingerprint')} to {ix.path}; it holds "
                f"{plural(len(ix), 'entry', 'entries')}",
                err=True,
            )


@index.command("query", short_help="Each document's matches in an index.")
@click.argument("path")
@click.argument("inputs", nargs=-1, required=True, metavar="INPUT...")
@click.option("--distance", type=click.IntRange(min=0), default=None, help="Bits (inclusive).")
@click.option(
    "-t",
    "--threshold",
    type=click.FloatRange(0, 1, min_open=True),
    default=None,
    help="Index with sketches: only the matches whose Jaccard estimated from the sketches is "
    ">= this, as [id, distance, jaccard], best first (--distance default: the threshold's).",
)
@click.option("-o", "--output", default="-", show_default=True, help="JSONL output ('-' stdout).")
@_input_options
@dask_options
def query_cmd(
    path: str,
    inputs: tuple[str, ...],
    distance: int | None,
    threshold: float | None,
    output: str,
    quiet: bool,
    scheduler: str | None,
    workers: int | None,
    **kw: Any,
) -> None:
    """Write, for each INPUT document, its matches in the index as JSONL:
    {"id": ..., "matches": [[id, distance], ...]} nearest first.

    With --scheduler or --workers the query runs in batch mode on Dask: the inputs' tables are
    built once and shipped to the workers, which read the index's segments themselves (they must
    see PATH) and stream them past the tables; the output is the same.

    An index with sketches (created with --threshold) compares set fingerprints: documents
    are fingerprinted so; with --threshold each match is decided by its estimated Jaccard.
    """
    from neardup.index import open_index
    from neardup.io.sources import InputPath, expand_inputs

    files = expand_inputs([InputPath(p) for p in inputs], kw["in_format"], one_output=False)
    with OutputSet([*inputs, *(f.path for f in files)], protect=[path]) as outs:
        out = outs.file(output)  # checked before any work
        with open_index(path) as ix, holding(_HOLDING, _FIX):
            words = None if kw["raw"] else ix.sketch_words
            if threshold is not None and (ix.sketch_words is None or kw["raw"]):
                raise click.UsageError(
                    f"--threshold needs documents and an index with sketches (index {path} "
                    f"{'has' if ix.sketch_words else 'keeps no'} sketches; create one with "
                    "`neardup index create --threshold`)"
                )
            local = scheduler is None and workers is None  # (else the workers query)
            groups = ("fingerprint", "index", *(["query"] if local else []))
            fps, ids, sketches = read_inputs(
                inputs, quiet=quiet, sketch_words=words, groups=groups, **kw
            )
            if threshold is not None:
                k = distance_for_threshold(threshold) if distance is None else distance
            else:
                k = ix.distance if distance is None else distance
            m = None
            if scheduler is not None or workers is not None:
                import neardup.distributed as nd

                with nd.connect(scheduler, workers) as client:
                    m = nd.query(ix, fps, k, client=client)
            if threshold is not None:
                m = ix.verified_query(sketches, threshold, k, candidates=m)
            elif m is None:
                m = ix.search(fps, distance)
            res = m.to_lists(jaccard_digits=6)
        qids = ids if ids is not None else range(len(fps))
        with outs.open(out, "w") as f:
            for qid, matches in zip(qids, res, strict=True):
                row = {"id": qid, "matches": [list(m) for m in matches]}
                f.write(json.dumps(row, allow_nan=False) + "\n")
        outs.commit()
    if not quiet:
        hit = sum(1 for r in res if r)
        click.echo(
            f"{PROG}: {plural(len(res), 'query', 'queries')}, {hit:,} with matches, written to "
            f"{display_name(output, output=True)}",
            err=True,
        )


@index.command("remove", short_help="Remove entries by id.")
@click.argument("path")
@click.argument("ids", nargs=-1)
@click.option("--ids-file", default=None, help="File of ids, one per line.")
@click.option("--ignore-missing", is_flag=True, help="Skip ids not in the index.")
@click.option("-q", "--quiet", is_flag=True, help="No summary on stderr.")
def remove_cmd(
    path: str, ids: tuple[str, ...], ids_file: str | None, ignore_missing: bool, quiet: bool
) -> None:
    """Remove entries by id (arguments and/or --ids-file)."""
    from neardup.index import Index

    items: list[tuple[str, int | None, str]] = [("<arguments>", None, i) for i in ids]
    if ids_file is not None:
        items += _read_ids_file(ids_file)
    if not items:
        raise click.UsageError("give ids to remove as arguments or with --ids-file")
    with Index.open(path, "w") as ix:
        values: list[Any]
        if ix.id_type == "str":
            values = [v for _, _, v in items]
        else:
            values = []
            for src, line, v in items:
                try:
                    values.append(int(v))
                except ValueError:
                    shown = v if len(v) <= 40 else v[:37] + "..."
                    raise InputError(src, line, f"{shown!r} is not an integer id") from None
        try:
            n = ix.remove(values, missing="ignore" if ignore_missing else "error")
        except IdError as e:
            if e.position is None:
                raise
            src, line, _ = items[e.position]
            raise InputError(src, line, e.reason) from None
        except KeyError as e:
            raise ValueError(f"{e.args[0]} (use --ignore-missing to skip such ids)") from None
        if not quiet:
            click.echo(
                f"{PROG}: removed {plural(n, 'entry', 'entries')} from {ix.path}; it holds "
                f"{plural(len(ix), 'entry', 'entries')}",
                err=True,
            )


def _read_ids_file(path: str) -> list[tuple[str, int | None, str]]:
    """(file, line, id) of every non-blank line of ``path`` (``-``: stdin), UTF-8."""
    from neardup.io.readers import iter_lines

    shown = display_name(path)
    out: list[tuple[str, int | None, str]] = []
    with contextlib.ExitStack() as stack:
        f = sys.stdin.buffer if path == "-" else stack.enter_context(open(path, "rb"))
        for n, raw in iter_lines(f):
            if raw is None:
                raise InputError(shown, n, "line too long for an id")
            try:
                line = raw.decode("utf-8").strip()
            except UnicodeDecodeError as e:
                raise InputError(
                    shown, n, f"not valid UTF-8 (byte 0x{raw[e.start]:02x} at offset {e.start})"
                ) from None
            if line:
                out.append((shown, n, line))
    return out


@index.command("compact", short_help="Merge an index's runs into one sorted base.")
@click.argument("path")
@click.option(
    "--compress/--no-compress",
    default=None,
    help="Also convert the index to compressed (or plain) tables; default: keep its setting.",
)
def compact_cmd(path: str, compress: bool | None) -> None:
    """Merge all runs of the index into one sorted base, dropping removed entries."""
    from neardup.index import Index

    with Index.open(path, "w") as ix:
        if "segments" not in ix.info():
            if compress is not None:
                raise click.UsageError(f"{ix.path}: a Redis index has no tables to compress")
            click.echo(
                f"{PROG}: {ix.path}: a Redis index keeps no runs to merge (each remove rewrites "
                "its buckets); nothing to compact",
                err=True,
            )
            return
        before = len(ix.info()["segments"])
        ix.compact(compress=compress)
        click.echo(
            f"{PROG}: compacted {ix.path}: {plural(before, 'run')} merged into "
            f"{plural(len(ix.info()['segments']), 'run')}, {plural(len(ix), 'entry', 'entries')}"
            f"{'' if compress is None else (', compressed' if compress else ', plain tables')}",
            err=True,
        )


@index.command("info", short_help="An index's layout, size and segments as JSON.")
@click.argument("path")
@click.option(
    "--verify",
    is_flag=True,
    help="Also check every file's CRC-32 (reads the whole index); a mismatch is an error.",
)
def info_cmd(path: str, verify: bool) -> None:
    """Print the index's layout, size and segments as JSON.

    "checksums_checked": true when this call read every file and found its CRC-32 as recorded
    (--verify; a mismatch is an error instead); false only means that no such check was asked
    for, not that something is wrong.
    """
    from neardup.index import Index

    with Index.open(path) as ix:
        if verify:
            ix.verify()
        doc = ix.info()
        doc["checksums_checked"] = verify
    click.echo(json.dumps(doc, indent=1))

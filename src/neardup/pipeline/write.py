"""Pass 2 of dedup: the kept records copied untouched, in input order and the input's format."""

from __future__ import annotations

import contextlib
import functools
import itertools
import json
import math
import os
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import IO, Any

import numpy as np

from neardup import config
from neardup._optional import require
from neardup.core.order import lexorder
from neardup.errors import InputError
from neardup.fingerprints.batch import threads_for
from neardup.io.blocks import iter_blocks, kept_lines
from neardup.io.files import (
    changed_error,
    compression_of,
    open_input,
    open_output_stream,
    open_parquet,
    strip_compression,
)
from neardup.io.sources import InputFile
from neardup.io.writers import Output, OutputSet, atomic_output
from neardup.pipeline.scan import Scan
from neardup.pipeline.stream import in_order, reads_in_blocks

__all__ = [
    "json_id",
    "register_outputs",
    "write_clusters",
    "write_drop_list",
    "write_kept",
    "write_summary",
]

#: Rows per batch when copying Parquet rows in dedup's second pass.
PARQUET_BATCH_ROWS = 65536

Progress = Callable[[int], None]
#: Output names of files of records, which text inputs (written as a directory) never take.
_RECORD_FILES = (".jsonl", ".ndjson", ".json", ".parquet", ".pq")


def _kept_by_file(scan: Scan, kept: np.ndarray) -> list[np.ndarray]:
    """Sorted kept record numbers of each input file."""
    src, rec = scan.source[kept], scan.record[kept]
    order = lexorder((rec, src))
    src, rec = src[order], rec[order]
    cuts = np.searchsorted(src, np.arange(len(scan.files) + 1))
    return [rec[cuts[k] : cuts[k + 1]] for k in range(len(scan.files))]


def is_directory_output(output: str | os.PathLike | None, kind: str) -> bool:
    """Whether the kept documents of ``kind`` inputs go to a directory: always for text files;
    for JSONL and line inputs when ``output`` ends with a path separator (one file per shard
    of a staged run, whose concatenation in name order is the single file's bytes; a
    directory named without it stays an error, as a file was likely meant)."""
    if output is None or kind == "parquet":
        return False
    return kind == "text" or os.fspath(output).endswith(("/", os.sep))


def register_outputs(
    outputs: OutputSet,
    files: list[InputFile],
    output: str | os.PathLike | None = None,
    clusters: str | os.PathLike | None = None,
    drop_list: str | os.PathLike | None = None,
    json_summary: str | os.PathLike | None = None,
    removed: str | os.PathLike | None = None,
) -> None:
    """Register and check a dedup run's outputs before any work: the kept documents (a file,
    or a directory, :func:`is_directory_output`), the removed ones (the same), the clusters,
    the drop list and the JSON summary."""
    kind = files[0].kind if files else "jsonl"
    for path, what in ((output, "the output"), (removed, "--removed")):
        if path is not None:
            _register_records(outputs, os.fspath(path), kind, what)
    for path, what in ((clusters, "--clusters"), (drop_list, "--drop-list")):
        if path is not None:
            outputs.file(path, what)
    if json_summary is not None:
        outputs.file(json_summary, "--json-summary")


def _register_records(outputs: OutputSet, out: str, kind: str, what: str) -> None:
    """Register an output of records of ``kind`` inputs (kept or removed ones)."""
    if kind == "text" and out == "-":
        raise InputError(out, None, "text inputs give an output directory, not stdout")
    if kind == "text" and strip_compression(out).lower().endswith(_RECORD_FILES):
        raise InputError(out, None, "names a file of records, but the inputs are read as "
                         "text files (a document per file), written as a directory: pass "
                         "--format jsonl or lines if they hold records, or name an output "
                         "directory")  # fmt: skip
    if is_directory_output(out, kind):
        outputs.directory(
            out, f"{what} directory" if what == "--removed" else "the output directory"
        )
    else:
        if kind == "parquet" and out == "-":
            raise InputError(out, None, "Parquet output needs a file name, not stdout")
        outputs.file(out, what)


def write_kept(
    scan: Scan,
    kept: np.ndarray,
    output: str | os.PathLike,
    progress: Progress | None = None,
    *,
    outputs: OutputSet | None = None,
    threads: int | None = None,
) -> int:
    """Second pass: write the kept records of ``scan``'s inputs, untouched and in input order.

    JSONL and line inputs give one file of the original line bytes (a newline is added only
    after a last line that had none); Parquet inputs give one Parquet file with the inputs'
    schema (rows copied in batches); text files give a directory holding copies of the kept
    files (named relative to the directory given as input, else by base name). Records skipped
    as bad are not written. The output appears only when complete.

    Parameters
    ----------
    scan : Scan
        The first pass's result.
    kept : ndarray of bool, shape (n,)
        Which scanned documents to write.
    output : path
        Output file (``-`` for stdout with line formats) or directory (text inputs).
    progress : callable, optional
        Called with the number of documents written so far.
    outputs : OutputSet, optional
        The run's outputs, with ``output`` registered (:func:`register_outputs`): the output is
        staged there and appears when the caller commits. Default: written and committed now.
    threads : int, optional
        Threads that gather the kept lines of large JSONL and line inputs while the calling
        thread reads and writes (default: ``NEARDUP_THREADS`` or the usable CPU count).

    Returns
    -------
    int
        Bytes written.
    """
    kept = np.asarray(kept, dtype=bool)
    if len(kept) != len(scan.ids):
        raise ValueError(f"kept has {len(kept)} entries for {len(scan.ids)} documents")
    if outputs is None:
        with OutputSet([f.path for f in scan.files]) as own:
            register_outputs(own, scan.files, output)
            n = write_kept(scan, kept, output, progress, outputs=own, threads=threads)
            own.commit()
        return n
    out = outputs.get(output)
    per_file = _kept_by_file(scan, kept)
    kind = scan.files[0].kind if scan.files else "jsonl"
    scan.check_unchanged()  # the records written are those the first pass fingerprinted
    if kind == "text":
        n = _write_text_dir(scan, per_file, outputs, out, progress)
    elif kind == "parquet":
        n = _write_parquet(scan, per_file, outputs, out, progress)
    else:
        n = _write_lines(scan, per_file, outputs, out, progress, threads)
    scan.check_unchanged()  # ... also while this pass read them
    return n


def _read_error(e: OSError, path: str) -> OSError:
    return OSError(e.errno, e.strerror or str(e), e.filename or path)


def _write_lines(
    scan: Scan,
    per_file: list[np.ndarray],
    outputs: OutputSet,
    out: Output,
    progress: Progress | None,
    threads: int | None,
) -> int:
    # Large inputs: the main thread reads blocks and writes the kept lines in order while
    # worker threads gather them (GIL-free); small ones are gathered in Python, which saves
    # loading (or, on a first run, compiling) the kernel.
    kernel = reads_in_blocks(scan.files)
    nthreads = threads_for(threads) if kernel else 0
    written = done = 0
    if progress is not None:
        progress(0)  # reading starts
    with outputs.open(out, "wb") as raw:
        with (
            open_output_stream(raw, out.path) as w,
            ThreadPoolExecutor(nthreads) if nthreads else contextlib.nullcontext() as pool,
        ):
            for f, numbers in zip(scan.files, per_file, strict=True):
                if len(numbers) == 0:
                    continue
                taken = 0
                gather = functools.partial(_gather, numbers=numbers, kernel=kernel)
                with _reading(f.path) as r:
                    items = _kept_blocks(r, f.path, numbers)
                    with contextlib.closing(in_order(pool, gather, items, nthreads)) as parts:
                        for data, n in parts:
                            w.write(data)
                            written += len(data)
                            taken += n
                            if progress is not None:
                                progress(done + taken)
                if taken != len(numbers):
                    raise changed_error(f.path)
                done += taken
        if compression_of(out.path) is not None:  # the file's size, not the lines written
            written = raw.tell()
    return written


def _kept_blocks(r: IO[bytes], path: str, numbers: np.ndarray) -> Iterator[tuple[int, bytes, int]]:
    """``(first line, block, index in numbers of its first kept line)`` of the blocks of an
    input that may hold kept lines, until every kept line is reached; a read error names the
    input."""
    blocks = iter_blocks(r, config.READ_BLOCK_BYTES)
    while True:
        try:
            item = next(blocks, None)
        except OSError as e:
            raise _read_error(e, path) from None
        if item is None:
            return
        first, block = item
        if block is None:  # a line over the size bound: never kept
            continue
        i = int(np.searchsorted(numbers, first))
        if i == len(numbers):
            return
        yield first, block, i


def _gather(item: tuple[int, bytes, int], numbers: np.ndarray, kernel: bool) -> tuple[Any, int]:
    first, block, i = item
    return kept_lines(block, first, numbers, i, kernel=kernel)


def _write_parquet(
    scan: Scan,
    per_file: list[np.ndarray],
    outputs: OutputSet,
    out: Output,
    progress: Progress | None,
) -> int:
    pq = require("pyarrow.parquet", feature="Parquet")
    schema = parquet_schema(scan.files[0].path)
    done = size = 0
    with outputs.open(out, "wb") as w:
        with pq.ParquetWriter(w, schema) as writer:
            for f, numbers in zip(scan.files, per_file, strict=True):
                write_parquet_rows(writer, schema, f.path, numbers)
                done += len(numbers)
                if progress is not None:
                    progress(done)
        size = w.tell()
    return size


def parquet_schema(path: str) -> Any:
    """The Arrow schema of the Parquet output: the first input file's."""
    return open_parquet(path).schema_arrow


def write_parquet_rows(writer: Any, schema: Any, path: str, numbers: np.ndarray) -> None:
    """The rows numbered ``numbers`` (1-based, ascending) of Parquet file ``path``, untouched,
    to ``writer``: one row group per batch of :data:`PARQUET_BATCH_ROWS` input rows that keeps
    any (so a run cut into shards writes the same row groups as one that is not)."""
    pa = require("pyarrow", feature="Parquet")
    pf = open_parquet(path)
    if len(numbers) and numbers[-1] > pf.metadata.num_rows:
        raise changed_error(path)
    mask = np.zeros(pf.metadata.num_rows, dtype=bool)
    mask[numbers - 1] = True
    row = 0
    try:
        for batch in pf.iter_batches(batch_size=PARQUET_BATCH_ROWS):
            m = mask[row : row + batch.num_rows]
            row += batch.num_rows
            if m.any():
                part = pa.Table.from_batches([batch.filter(pa.array(m))])
                writer.write_table(part.cast(schema) if part.schema != schema else part)
    except (pa.ArrowException, OSError, ValueError) as e:
        # a read error of an input, not of the output being written
        first = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        raise InputError(path, row + 1, f"unreadable Parquet data ({first})") from None


@contextlib.contextmanager
def _reading(path: str, decompress: bool = True) -> Iterator[IO[bytes]]:
    """An input opened with :func:`open_input`; an error opening it names it."""
    stack = contextlib.ExitStack()
    try:
        r = stack.enter_context(open_input(path, decompress=decompress))
    except OSError as e:
        raise _read_error(e, path) from None
    with stack:
        yield r


def copy_file(src: str, dest: str, shown_dest: str) -> int:
    """Copy ``src`` as stored (a URL too) to ``dest``; an error names the input or the output
    as the user knows it."""
    n = 0
    with _reading(src, decompress=False) as r, open(dest, "wb") as w:
        while True:
            try:
                chunk = r.read(1 << 20)
            except OSError as e:
                raise _read_error(e, src) from None
            if not chunk:
                return n
            try:
                w.write(chunk)
            except OSError as e:
                raise OSError(e.errno, e.strerror or str(e), shown_dest) from None
            n += len(chunk)


def _write_text_dir(
    scan: Scan,
    per_file: list[np.ndarray],
    outputs: OutputSet,
    out: Output,
    progress: Progress | None,
) -> int:
    written = done = 0
    with outputs.open_directory(out) as tmp:
        for f, numbers in zip(scan.files, per_file, strict=True):
            if len(numbers) == 0:
                continue
            dest = os.path.join(tmp, f.relname)
            os.makedirs(os.path.dirname(dest), exist_ok=True)
            written += copy_file(f.path, dest, os.path.join(out.path, f.relname))
            done += 1
            if progress is not None:
                progress(done)
    return written


def json_id(v: object) -> object:
    """An id as a standard JSON value: other types and non-finite numbers become text."""
    if isinstance(v, float) and not math.isfinite(v):
        return str(v)
    return v if isinstance(v, (str, int, float, bool)) or v is None else str(v)


@contextlib.contextmanager
def _staged(outputs: OutputSet | None, path: str | os.PathLike, mode: str) -> Iterator[IO]:
    if outputs is None:
        with atomic_output(path, mode) as f:
            yield f
        return
    with outputs.open(outputs.get(path), mode) as f:
        yield f


def write_clusters(
    result: Any, path: str | os.PathLike, *, outputs: OutputSet | None = None
) -> None:
    """Write each cluster of ``result`` (a :class:`~neardup.pipeline.result.DedupResult`) as a
    JSON line: ``kept`` id, ``size``, ``members`` (ids), ``distances`` (bits to the kept one),
    ``jaccards`` when verified; then, with an index, one line per index entry that documents
    were dropped for (``"index": true`` and ``"verified"``: ``"sketch"`` or ``"fingerprint"``).

    With ``outputs`` (where ``path`` is registered) the file is staged there, else committed now.
    """
    with _staged(outputs, path, "w") as f:
        for c in itertools.chain(result.iter_clusters(), result.iter_index_clusters()):
            c["kept"] = json_id(c["kept"])
            c["members"] = [json_id(m) for m in c["members"]]
            f.write(json.dumps(c, ensure_ascii=False, allow_nan=False) + "\n")


def write_drop_list(
    result: Any, path: str | os.PathLike, *, outputs: OutputSet | None = None
) -> None:
    """Write the ids of ``result``'s dropped documents, one per line, in input order."""
    with _staged(outputs, path, "w") as f:
        for i in result.dropped.nonzero()[0].tolist():
            f.write(f"{result.ids[i]}\n")


def write_summary(
    summary: dict[str, Any], path: str | os.PathLike, *, outputs: OutputSet | None = None
) -> None:
    """Write a run's summary as one JSON object on one line."""
    with _staged(outputs, path, "w") as f:
        f.write(json.dumps(summary, allow_nan=False) + "\n")

"""What the write stage's tasks share (:mod:`neardup.pipeline.shard_write`): the outputs checked
before a run, Parquet rows and text files copied untouched, ids as JSON, the JSON summary."""

from __future__ import annotations

import contextlib
import json
import math
import os
from collections.abc import Callable, Iterator
from typing import IO, Any

import numpy as np

from neardup._optional import require
from neardup.errors import InputError
from neardup.io.files import (
    changed_error,
    open_input,
    open_parquet,
    strip_compression,
)
from neardup.io.sources import InputFile
from neardup.io.writers import OutputSet, atomic_output

__all__ = [
    "json_id",
    "register_outputs",
    "write_summary",
]

#: Rows per batch when copying Parquet rows in dedup's second pass.
PARQUET_BATCH_ROWS = 65536

Progress = Callable[[int], None]
#: Output names of files of records, which text inputs (written as a directory) never take.
_RECORD_FILES = (".jsonl", ".ndjson", ".json", ".parquet", ".pq")


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


def _read_error(e: OSError, path: str) -> OSError:
    return OSError(e.errno, e.strerror or str(e), e.filename or path)


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


def write_summary(
    summary: dict[str, Any], path: str | os.PathLike, *, outputs: OutputSet | None = None
) -> None:
    """Write a run's summary as one JSON object on one line."""
    with _staged(outputs, path, "w") as f:
        f.write(json.dumps(summary, allow_nan=False) + "\n")

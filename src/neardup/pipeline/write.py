"""Pass 2 of dedup: the kept records copied untouched, in input order and the input's format."""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Callable
from typing import Any

import numpy as np

from neardup import config
from neardup._optional import require
from neardup.errors import InputError
from neardup.io.files import compression_of, is_url, open_input, open_output_stream, open_parquet
from neardup.io.writers import atomic_directory, atomic_output
from neardup.pipeline.scan import Scan

__all__ = ["write_clusters", "write_drop_list", "write_kept"]

Progress = Callable[[int], None]


def _kept_by_file(scan: Scan, kept: np.ndarray) -> list[np.ndarray]:
    """Sorted kept record numbers of each input file."""
    src, rec = scan.source[kept], scan.record[kept]
    order = np.lexsort((rec, src))
    src, rec = src[order], rec[order]
    cuts = np.searchsorted(src, np.arange(len(scan.files) + 1))
    return [rec[cuts[k] : cuts[k + 1]] for k in range(len(scan.files))]


def write_kept(
    scan: Scan, kept: np.ndarray, output: str | os.PathLike, progress: Progress | None = None
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

    Returns
    -------
    int
        Bytes written.
    """
    kept = np.asarray(kept, dtype=bool)
    if len(kept) != len(scan.ids):
        raise ValueError(f"kept has {len(kept)} entries for {len(scan.ids)} documents")
    out = os.fspath(output)
    if out != "-":
        target = os.path.realpath(out)
        for f in scan.files:
            if os.path.realpath(f.path) == target:
                raise InputError(out, None, "the output would overwrite an input")
    per_file = _kept_by_file(scan, kept)
    kind = scan.files[0].kind if scan.files else "jsonl"
    if kind == "text":
        return _write_text_dir(scan, per_file, out, progress)
    if kind == "parquet":
        if out == "-":
            raise InputError(out, None, "Parquet output needs a file name, not stdout")
        return _write_parquet(scan, per_file, out, progress)
    return _write_lines(scan, per_file, out, progress)


def _write_lines(
    scan: Scan, per_file: list[np.ndarray], out: str, progress: Progress | None
) -> int:
    written = done = 0
    with atomic_output(out, "wb") as raw:
        with open_output_stream(raw, out) as w:
            for f, numbers in zip(scan.files, per_file, strict=True):
                if len(numbers) == 0:
                    continue
                wanted = numbers.tolist()
                i, m = 0, len(wanted)
                with open_input(f.path) as r:
                    for number, line in enumerate(r, start=1):
                        if number != wanted[i]:
                            continue
                        if not line.endswith(b"\n"):
                            line += b"\n"
                        w.write(line)
                        written += len(line)
                        i += 1
                        if progress is not None and i % config.PROGRESS_EVERY == 0:
                            progress(done + i)
                        if i == m:
                            break
                done += m
                if progress is not None:
                    progress(done)
        if compression_of(out) is not None:  # the file's size, not the lines written into it
            written = raw.tell()
    return written


def _write_parquet(
    scan: Scan, per_file: list[np.ndarray], out: str, progress: Progress | None
) -> int:
    pa = require("pyarrow", feature="Parquet")
    pq = require("pyarrow.parquet", feature="Parquet")

    schema = open_parquet(scan.files[0].path).schema_arrow
    done = 0
    with atomic_output(out, "wb") as w:
        with pq.ParquetWriter(w, schema) as writer:
            for f, numbers in zip(scan.files, per_file, strict=True):
                pf = open_parquet(f.path)
                mask = np.zeros(pf.metadata.num_rows, dtype=bool)
                mask[numbers - 1] = True
                row = 0
                for batch in pf.iter_batches(batch_size=config.PARQUET_BATCH_ROWS):
                    m = mask[row : row + batch.num_rows]
                    row += batch.num_rows
                    if m.any():
                        part = pa.Table.from_batches([batch.filter(pa.array(m))])
                        writer.write_table(part.cast(schema) if part.schema != schema else part)
                done += len(numbers)
                if progress is not None:
                    progress(done)
    return os.path.getsize(out)


def _write_text_dir(
    scan: Scan, per_file: list[np.ndarray], out: str, progress: Progress | None
) -> int:
    if out == "-":
        raise InputError(out, None, "text inputs give an output directory, not stdout")
    written = done = 0
    with atomic_directory(out) as tmp:
        for f, numbers in zip(scan.files, per_file, strict=True):
            if len(numbers) == 0:
                continue
            dest = os.path.join(tmp, f.relname)
            os.makedirs(os.path.dirname(dest), exist_ok=True)
            if is_url(f.path):  # copied as stored, like a local file
                with open_input(f.path, decompress=False) as r, open(dest, "wb") as w:
                    shutil.copyfileobj(r, w, 1 << 20)
            else:
                shutil.copyfile(f.path, dest)
            written += os.path.getsize(dest)
            done += 1
            if progress is not None:
                progress(done)
    return written


def _json_id(v: object) -> object:
    return v if isinstance(v, (str, int, float, bool)) or v is None else str(v)


def write_clusters(result: Any, path: str | os.PathLike) -> None:
    """Write each cluster of ``result`` (a :class:`~neardup.pipeline.result.DedupResult`) as a
    JSON line: ``kept`` id, ``size``, ``members`` (ids), ``distances`` (bits to the kept one)."""
    with atomic_output(path, "w") as f:
        for c in result.iter_clusters():
            c["kept"] = _json_id(c["kept"])
            c["members"] = [_json_id(m) for m in c["members"]]
            f.write(json.dumps(c, ensure_ascii=False) + "\n")


def write_drop_list(result: Any, path: str | os.PathLike) -> None:
    """Write the ids of ``result``'s dropped documents, one per line, in input order."""
    with atomic_output(path, "w") as f:
        for i in result.dropped.nonzero()[0].tolist():
            f.write(f"{result.ids[i]}\n")

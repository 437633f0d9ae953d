"""Streaming document readers: plain text (a document per file or per line), JSONL and Parquet.

Every reader yields :class:`Record` objects one at a time, in input order, each with its source,
its 1-based line/record/row number, an id and the text. Bad input (bytes that are not UTF-8, a
JSON line that does not parse, a missing field, a value that is not a string) raises
:class:`neardup.errors.InputError` naming the source and record, or, when ``on_bad`` is given, is
passed to ``on_bad`` and skipped.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import sys
from collections.abc import Callable, Iterable, Iterator
from typing import IO, Any, NamedTuple

from neardup._optional import require
from neardup.errors import InputError
from neardup.io.files import open_input, open_parquet, strip_compression

__all__ = [
    "FORMATS",
    "Record",
    "detect_format",
    "read_documents",
    "read_jsonl",
    "read_lines",
    "read_parquet",
    "read_text_file",
]

STDIN = "-"
FORMATS = ("auto", "text", "lines", "jsonl", "parquet")

OnBad = Callable[[InputError], None]


class Record(NamedTuple):
    """One document: where it came from, its id and its text."""

    source: str  #: file name (``<stdin>`` for ``-``)
    number: int  #: 1-based line (text, JSONL) or row (Parquet) number; 1 for a whole file
    id: Any  #: the id field/column when present, else ``"source:number"`` (or the file name)
    text: str


def _name(path: str | os.PathLike) -> str:
    return "<stdin>" if str(path) == STDIN else str(path)


@contextlib.contextmanager
def _open_binary(path: str | os.PathLike) -> Iterator[IO[bytes]]:
    """The file opened for binary reading (decompressed, local or a URL: see
    :func:`neardup.io.files.open_input`), or stdin (left open) for ``-``."""
    if str(path) == STDIN:
        yield sys.stdin.buffer
        return
    with open_input(path) as f:
        yield f


def detect_format(path: str | os.PathLike, fmt: str = "auto") -> str:
    """The reader to use for ``path``: ``fmt`` unless ``"auto"``, then by file extension
    (``.jsonl``/``.ndjson`` -> jsonl, ``.parquet``/``.pq`` -> parquet, else text), after any
    compression suffix (``.gz``, ``.bz2``, ``.xz``, ``.zst``)."""
    if fmt not in FORMATS:
        raise ValueError(f"unknown input format {fmt!r}; use one of {list(FORMATS)}")
    if fmt != "auto":
        return fmt
    low = strip_compression(str(path)).lower()
    if low.endswith((".jsonl", ".ndjson")):
        return "jsonl"
    if low.endswith((".parquet", ".pq")):
        return "parquet"
    return "text"


def _decode(data: bytes, source: str, number: int, what: str = "") -> str:
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as e:
        raise InputError(
            source,
            number,
            f"{what}not valid UTF-8 (byte 0x{data[e.start]:02x} at offset {e.start}); "
            "re-encode the input as UTF-8 or use --skip-bad",
        ) from None


def read_text_file(path: str | os.PathLike, on_bad: OnBad | None = None) -> Iterator[Record]:
    """The whole file as one document (id = the file name); a decoding error names its line."""
    source = _name(path)
    with _open_binary(path) as f:
        data = f.read()
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as e:
        line = data.count(b"\n", 0, e.start) + 1
        err = InputError(
            source,
            line,
            f"not valid UTF-8 (byte 0x{data[e.start]:02x} at file offset {e.start}); "
            "re-encode the input as UTF-8 or use --skip-bad",
        )
        if on_bad is None:
            raise err from None
        on_bad(err)
        return
    yield Record(source, 1, source, text)


def read_lines(path: str | os.PathLike, on_bad: OnBad | None = None) -> Iterator[Record]:
    """One document per line (trailing ``\\n``/``\\r\\n`` removed; empty lines are documents)."""
    source = _name(path)
    with _open_binary(path) as f:
        for number, raw in enumerate(f, start=1):
            try:
                text = _decode(raw.rstrip(b"\r\n"), source, number)
            except InputError as e:
                if on_bad is None:
                    raise
                on_bad(e)
                continue
            yield Record(source, number, f"{source}:{number}", text)


def read_jsonl(
    path: str | os.PathLike,
    field: str = "text",
    id_field: str | None = "id",
    on_bad: OnBad | None = None,
) -> Iterator[Record]:
    """One JSON object per line; the document is ``obj[field]`` (a string), the id
    ``obj[id_field]`` when present. Blank lines are skipped."""
    source = _name(path)
    with _open_binary(path) as f:
        for number, raw in enumerate(f, start=1):
            if not raw.strip():
                continue
            try:
                line = _decode(raw, source, number)
                try:
                    obj = json.loads(line)
                except json.JSONDecodeError as e:
                    raise InputError(source, number, f"not valid JSON: {e.msg}") from None
                if not isinstance(obj, dict):
                    raise InputError(
                        source, number, f"expected a JSON object, got {type(obj).__name__}"
                    )
                if field not in obj:
                    raise InputError(
                        source, number, f"missing field {field!r} (use --field to choose one)"
                    )
                text = obj[field]
                if not isinstance(text, str):
                    raise InputError(
                        source,
                        number,
                        f"field {field!r} is {_json_type(text)}, expected a string",
                    )
            except InputError as e:
                if on_bad is None:
                    raise
                on_bad(e)
                continue
            rid = obj.get(id_field, f"{source}:{number}") if id_field else f"{source}:{number}"
            yield Record(source, number, rid, text)


def _json_type(v: Any) -> str:
    if v is None:
        return "null"
    return {bool: "a boolean", int: "a number", float: "a number", list: "an array",
            dict: "an object"}.get(type(v), type(v).__name__)  # fmt: skip


def read_parquet(
    path: str | os.PathLike,
    column: str = "text",
    id_column: str | None = "id",
    on_bad: OnBad | None = None,
    batch_size: int = 8192,
) -> Iterator[Record]:
    """Rows of a Parquet file, streamed in record batches; the document is the string column
    ``column``, the id the column ``id_column`` when the file has it (else ``"file:row"``)."""
    pa = require("pyarrow", feature="Parquet")
    pq = require("pyarrow.parquet", feature="Parquet")
    source = _name(path)
    if str(path) == STDIN:
        pf = pq.ParquetFile(io.BytesIO(sys.stdin.buffer.read()))
    else:
        pf = open_parquet(path)
    names = pf.schema_arrow.names
    if column not in names:
        raise InputError(source, None, f"no column {column!r} (columns: {', '.join(names)})")
    ctype = pf.schema_arrow.field(column).type
    is_text = pa.types.is_string(ctype) or pa.types.is_large_string(ctype)
    is_binary = pa.types.is_binary(ctype) or pa.types.is_large_binary(ctype)
    if not (is_text or is_binary or pa.types.is_null(ctype)):
        raise InputError(source, None, f"column {column!r} is {ctype}, expected strings")
    cols = [column] + ([id_column] if id_column and id_column in names else [])
    row = 0
    for batch in pf.iter_batches(batch_size=batch_size, columns=cols):
        texts = batch.column(0).to_pylist()
        ids = batch.column(1).to_pylist() if len(cols) == 2 else None
        for k, text in enumerate(texts):
            row += 1
            try:
                if text is None:
                    raise InputError(source, row, f"column {column!r} is null in this row")
                if isinstance(text, bytes):
                    text = _decode(text, source, row, f"column {column!r} is ")
            except InputError as e:
                if on_bad is None:
                    raise
                on_bad(e)
                continue
            rid = ids[k] if ids is not None else f"{source}:{row}"
            yield Record(source, row, rid, text)


def read_documents(
    paths: Iterable[str | os.PathLike],
    fmt: str = "auto",
    field: str = "text",
    id_field: str | None = "id",
    on_bad: OnBad | None = None,
) -> Iterator[Record]:
    """Records of every input in turn, each read with the format ``fmt`` (or detected).

    ``field`` names the JSONL field or Parquet column holding the text; ``id_field`` the one
    holding the id.
    """
    for path in paths:
        kind = detect_format(path, fmt)
        if kind == "text":
            yield from read_text_file(path, on_bad)
        elif kind == "lines":
            yield from read_lines(path, on_bad)
        elif kind == "jsonl":
            yield from read_jsonl(path, field, id_field, on_bad)
        else:
            yield from read_parquet(path, field, id_field, on_bad)

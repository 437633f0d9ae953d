"""Streaming document readers: plain text (a document per file or per line), JSONL and Parquet.

Every reader yields :class:`Record` objects one at a time, in input order, each with its source,
its 1-based line/record/row number, an id and the text. Bad input (bytes that are not UTF-8, a
JSON line that does not parse, a missing field, a value that is not a string) raises
:class:`neardup.errors.InputError` naming the source and record, or, when ``on_bad`` is given, is
passed to ``on_bad`` and skipped.
"""

from __future__ import annotations

import contextlib
import datetime
import decimal
import json
import math
import os
import re
import sys
from collections.abc import Callable, Iterable, Iterator
from typing import IO, Any, NamedTuple

import numpy as np

from neardup import config
from neardup._optional import require
from neardup.errors import InputError
from neardup.io.files import (
    compression_of,
    input_size,
    is_url,
    open_input,
    open_parquet,
    strip_compression,
)

__all__ = [
    "DEFAULT_ID_FIELD",
    "FORMATS",
    "Record",
    "check_id",
    "detect_format",
    "iter_lines",
    "jsonl_record",
    "line_record",
    "open_binary",
    "open_parquet",
    "parquet_batches",
    "parquet_records",
    "parse_json_line",
    "priority_value",
    "read_documents",
    "read_jsonl",
    "read_lines",
    "read_parquet",
    "read_text_file",
    "sniff_format",
    "source_name",
]

STDIN = "-"
FORMATS = ("auto", "text", "lines", "jsonl", "parquet")
#: The id field used when present; any other id field a caller names must be present.
DEFAULT_ID_FIELD = "id"
_SKIP_CHUNK = 1 << 20
_SURROGATE = re.compile("[\ud800-\udfff]")

OnBad = Callable[[InputError], None]


class Record(NamedTuple):
    """One document: where it came from, its id and its text."""

    source: str  #: file name (``<stdin>`` for ``-``)
    number: int  #: 1-based line (text, JSONL) or row (Parquet) number; 1 for a whole file
    id: Any  #: the id field/column when present, else ``"source:number"`` (or the file name)
    text: str
    #: the keep field's value read by :func:`priority_value` (with a ``key_field`` only)
    key: tuple[float, int] | None = None


def source_name(path: str | os.PathLike) -> str:
    """The name records and errors give an input.

    Parameters
    ----------
    path : str or os.PathLike
        An input path or URL, or ``-`` for standard input.

    Returns
    -------
    str
        ``"<stdin>"`` for ``-``, else ``path`` as a string.
    """
    return "<stdin>" if str(path) == STDIN else str(path)


@contextlib.contextmanager
def open_binary(path: str | os.PathLike) -> Iterator[IO[bytes]]:
    """An input opened for binary reading, as a context manager.

    Parameters
    ----------
    path : str or os.PathLike
        A local path or URL (decompressed by its suffix: see
        :func:`neardup.io.files.open_input`), or ``-`` for standard input.

    Yields
    ------
    binary file
        The input's bytes; standard input's buffer is left open on exit.
    """
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


def sniff_format(path: str | os.PathLike) -> str | None:
    """The format of ``path`` told by its first bytes (decompressed): ``"parquet"`` for
    Parquet's magic ``PAR1``, ``"jsonl"`` when the first byte other than white space is ``{``,
    else None (text, lines, or nothing at all)."""
    with open_input(path) as f:
        data = f.read(4)
        if data == b"PAR1":
            return "parquet"
        while data:
            rest = data.lstrip(b" \t\r\n")
            if rest:
                return "jsonl" if rest.startswith(b"{") else None
            data = f.read(_SKIP_CHUNK)
    return None


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


def _too_big(source: str, number: int, size: int | None, what: str, note: str = "") -> InputError:
    limit = config.MAX_RECORD_BYTES
    got = f"{size} bytes{note}" if size is not None else f"over {limit} bytes"
    return InputError(
        source,
        number,
        f"{what} is {got}, more than the {limit} bytes a record may have "
        "(neardup.config.MAX_RECORD_BYTES); split it or use --skip-bad",
    )


def iter_lines(f: IO[bytes], limit: int | None = None) -> Iterator[tuple[int, bytes | None]]:
    """``(line number, line bytes)`` of a binary stream, 1-based, line end included.

    A line longer than ``limit`` bytes (default :data:`neardup.config.MAX_RECORD_BYTES`, line
    end not counted) is read past in pieces and yielded as ``None``, so memory stays bounded.
    """
    limit = config.MAX_RECORD_BYTES if limit is None else limit
    number = 0
    while True:
        line = f.readline(limit + 1)
        if not line:
            return
        number += 1
        if len(line) > limit and not (len(line) == limit + 1 and line.endswith(b"\n")):
            while not line.endswith(b"\n"):
                line = f.readline(_SKIP_CHUNK)
                if not line:
                    break
            yield number, None
        else:
            yield number, line


def _rest_size(f: IO[bytes], done: int) -> int:
    """``done`` plus the bytes left in ``f``, read through (decompressed: the size a record
    has; a compressed file's stored size says nothing of it)."""
    buf = bytearray(_SKIP_CHUNK)
    while n := f.readinto(buf):
        done += n
    return done


def read_text_file(path: str | os.PathLike, on_bad: OnBad | None = None) -> Iterator[Record]:
    """The whole file as one document (id = the file name); a decoding error names its line."""
    source = source_name(path)
    limit = config.MAX_RECORD_BYTES
    with open_binary(path) as f:
        data = f.read(limit + 1)
        packed = compression_of(path) is not None
        if len(data) <= limit:
            size = len(data)
        elif packed or is_url(path) or str(path) == STDIN:
            size = _rest_size(f, len(data))
        else:
            size = input_size(path)  # (a pipe's: its copy's)
    try:
        if len(data) > limit:
            raise _too_big(source, 1, size, "the file", " uncompressed" if packed else "")
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
    except InputError as err:
        if on_bad is None:
            raise
        on_bad(err)
        return
    yield Record(source, 1, source, text)


def read_lines(path: str | os.PathLike, on_bad: OnBad | None = None) -> Iterator[Record]:
    """One document per line (trailing ``\\n``/``\\r\\n`` removed; empty lines are documents)."""
    source = source_name(path)
    with open_binary(path) as f:
        for number, raw in iter_lines(f):
            try:
                rec = line_record(raw, source, number)
            except InputError as e:
                if on_bad is None:
                    raise
                on_bad(e)
                continue
            yield rec


def line_record(raw: bytes | None, source: str, number: int) -> Record:
    """The document of one line of a text file (``raw`` as :func:`iter_lines` yields it: None
    for a line over the size bound), or :class:`InputError` naming the line."""
    if raw is None:
        raise _too_big(source, number, None, "the line")
    return Record(
        source, number, f"{source}:{number}", _decode(raw.rstrip(b"\r\n"), source, number)
    )


def parse_json_line(raw: bytes, source: str, number: int) -> Any:
    """One JSON document from one line of bytes, or :class:`InputError` naming the line.

    Nesting deeper than :data:`neardup.config.MAX_JSON_DEPTH` is refused before parsing (the
    parser recurses once per level); NaN and Infinity are read as Python floats, as ``json``
    does.
    """
    line = _decode(raw, source, number)
    depth = config.MAX_JSON_DEPTH
    if raw.count(b"[") + raw.count(b"{") > depth and _too_deep(raw, depth):
        raise InputError(
            source,
            number,
            f"JSON nested more than {depth} levels deep (neardup.config.MAX_JSON_DEPTH); "
            "flatten the record or use --skip-bad",
        )
    try:
        return json.loads(line)
    except json.JSONDecodeError as e:
        raise InputError(source, number, f"not valid JSON: {e.msg} (column {e.colno})") from None
    except RecursionError:
        raise InputError(source, number, "JSON nested too deeply to parse") from None
    except ValueError as e:  # e.g. an integer of more than 4300 digits
        raise InputError(source, number, f"unusable JSON: {str(e).split(';')[0]}") from None


def _too_deep(raw: bytes, depth: int) -> bool:
    from neardup.io import _kernels  # numba loads only for a line with that many brackets

    return bool(_kernels.json_too_deep(np.frombuffer(raw, dtype=np.uint8), depth))


def check_id(value: Any, source: str, number: int, what: str = "the id") -> Any:
    """``value`` if it can be an id (written to JSON and UTF-8 outputs), else InputError."""
    if isinstance(value, float) and not math.isfinite(value):
        raise InputError(
            source, number, f"{what} is {value!r}; ids must be strings, integers or finite numbers"
        )
    if isinstance(value, str) and _SURROGATE.search(value):
        raise InputError(
            source, number, f"{what} holds an unpaired surrogate (\\u escape); it is not Unicode"
        )
    return value


#: Kinds of keep-field values (:func:`priority_value`): a field must hold one kind only.
KEY_NUMBER, KEY_DATE = 1, 2
KEY_KINDS = {KEY_NUMBER: "a number", KEY_DATE: "a date"}
_EPOCH = datetime.datetime(1970, 1, 1, tzinfo=datetime.timezone.utc)
_MICRO = datetime.timedelta(microseconds=1)


def priority_value(value: Any, source: str, number: int, field: str) -> tuple[float, int]:
    """The value of a keep field (``--keep max:FIELD``) as ``(float, kind)``: a number
    (``KEY_NUMBER``) as it is, or a date (``KEY_DATE``: an ISO-8601 string, or a Parquet date
    or timestamp) as microseconds since 1970-01-01 UTC (a date or time without a zone is
    taken as UTC). Anything else (null, a boolean, NaN, other text) is an InputError naming
    the record and the value.

    Examples
    --------
    >>> priority_value(0.5, "a.jsonl", 1, "score"), priority_value("1970-01-02", "a", 1, "d")
    ((0.5, 1), (86400000000.0, 2))
    """
    if isinstance(value, (int, float, decimal.Decimal)) and not isinstance(value, bool):
        v = float(value)
        if not math.isnan(v):
            return v, KEY_NUMBER
    elif isinstance(value, (str, datetime.date)):
        when = value
        if isinstance(value, str):
            try:
                when = datetime.datetime.fromisoformat(value)
            except ValueError:
                when = None
        if isinstance(when, datetime.date) and not isinstance(when, datetime.datetime):
            when = datetime.datetime(when.year, when.month, when.day)
        if isinstance(when, datetime.datetime):
            if when.tzinfo is None:
                when = when.replace(tzinfo=datetime.timezone.utc)
            return float((when - _EPOCH) // _MICRO), KEY_DATE
    shown = "null" if value is None else repr(value)
    raise InputError(
        source, number, f"--keep field {field!r} is {shown[:80]}; it must be a number or an "
        "ISO-8601 date in every record (fix the record or use --skip-bad)",
    )  # fmt: skip


def _key_of(obj: dict, source: str, number: int, key_field: str | None) -> Any:
    if key_field is None:
        return None
    if key_field not in obj:
        raise InputError(
            source, number, f"missing --keep field {key_field!r} (every record needs it; "
            "choose another field or use --skip-bad)",
        )  # fmt: skip
    return priority_value(obj[key_field], source, number, key_field)


def read_jsonl(
    path: str | os.PathLike,
    field: str = "text",
    id_field: str | None = "id",
    on_bad: OnBad | None = None,
    key_field: str | None = None,
) -> Iterator[Record]:
    """One JSON object per line; the document is ``obj[field]`` (a string), the id
    ``obj[id_field]``, with ``key_field`` the record's ``key`` that field's value
    (:func:`priority_value`; required). Blank lines are skipped.

    The default id field ``"id"`` is used when a record has it (else ``"file:line"``); any other
    ``id_field`` must be in every record (a misspelled one is an error, not a silent fallback).
    """
    source = source_name(path)
    with open_binary(path) as f:
        for number, raw in iter_lines(f):
            try:
                rec = jsonl_record(raw, source, number, field, id_field, key_field)
            except InputError as e:
                if on_bad is None:
                    raise
                on_bad(e)
                continue
            if rec is not None:
                yield rec


def jsonl_record(
    raw: bytes | None,
    source: str,
    number: int,
    field: str = "text",
    id_field: str | None = "id",
    key_field: str | None = None,
) -> Record | None:
    """The record of one JSONL line (``raw`` as :func:`iter_lines` yields it: None for a line
    over the size bound), None for a blank line, or :class:`InputError` naming the line; the
    fields as for :func:`read_jsonl`."""
    if raw is None:
        raise _too_big(source, number, None, "the line")
    if not raw.strip():
        return None
    obj = parse_json_line(raw, source, number)
    if not isinstance(obj, dict):
        raise InputError(source, number, f"expected a JSON object, got {_json_type(obj)}")
    if field not in obj:
        raise InputError(source, number, f"missing field {field!r} (use --field to choose one)")
    text = obj[field]
    if not isinstance(text, str):
        raise InputError(
            source, number, f"field {field!r} is {_json_type(text)}, expected a string"
        )
    if id_field is None:
        rid: Any = f"{source}:{number}"
    elif id_field in obj:
        rid = check_id(obj[id_field], source, number, f"id field {id_field!r}")
    elif id_field != DEFAULT_ID_FIELD:
        raise InputError(
            source,
            number,
            f"missing id field {id_field!r} (use --id-field to choose one, or "
            "--id-field '' for file:line ids)",
        )
    else:
        rid = f"{source}:{number}"
    return Record(source, number, rid, text, _key_of(obj, source, number, key_field))


def _json_type(v: Any) -> str:
    if v is None:
        return "null"
    return {bool: "a boolean", int: "a number", float: "a number", list: "an array",
            dict: "an object", str: "a string"}.get(type(v), type(v).__name__)  # fmt: skip


def _arrow_message(e: BaseException) -> str:
    text = str(e).strip().splitlines()
    return text[0] if text else type(e).__name__


def read_parquet(
    path: str | os.PathLike,
    column: str = "text",
    id_column: str | None = "id",
    on_bad: OnBad | None = None,
    batch_size: int = 8192,
    key_column: str | None = None,
) -> Iterator[Record]:
    """Rows of a Parquet file, streamed in record batches; the document is the string column
    ``column``, the id the column ``id_column`` (the default ``"id"`` when the file has it, else
    ``"file:row"``; any other ``id_column`` must exist), with ``key_column`` the record's
    ``key`` that column's value (:func:`priority_value`)."""
    source = source_name(path)
    for first, texts, ids, keys in parquet_batches(path, column, id_column, batch_size,
                                                   key_column):  # fmt: skip
        yield from parquet_records(source, first, texts, ids, column, on_bad, keys, key_column)


def parquet_batches(
    path: str | os.PathLike,
    column: str = "text",
    id_column: str | None = "id",
    batch_size: int = 8192,
    key_column: str | None = None,
) -> Iterator[tuple[int, Any, Any, Any]]:
    """``(number of the first row (1-based), text column, id column or None, key column or
    None)`` of each record batch of a Parquet file, as pyarrow arrays, read as
    :func:`read_parquet` reads them (the columns checked first; unreadable data an InputError
    naming the row)."""
    pa = require("pyarrow", feature="Parquet")
    source = source_name(path)
    pf = open_parquet(path)
    names = pf.schema_arrow.names
    if column not in names:
        raise InputError(source, None, f"no column {column!r} (columns: {', '.join(names)})")
    ctype = pf.schema_arrow.field(column).type
    is_text = pa.types.is_string(ctype) or pa.types.is_large_string(ctype)
    is_binary = pa.types.is_binary(ctype) or pa.types.is_large_binary(ctype)
    if not (is_text or is_binary or pa.types.is_null(ctype)):
        raise InputError(source, None, f"column {column!r} is {ctype}, expected strings")
    if id_column and id_column not in names and id_column != DEFAULT_ID_FIELD:
        raise InputError(
            source,
            None,
            f"no id column {id_column!r} (columns: {', '.join(names)}); use --id-field to "
            "choose one, or --id-field '' for file:row ids",
        )
    if key_column is not None and key_column not in names:
        raise InputError(
            source, None, f"no --keep column {key_column!r} (columns: {', '.join(names)})"
        )
    cols = [column] + ([id_column] if id_column and id_column in names else [])
    at_key = len(cols)
    cols += [key_column] if key_column is not None else []
    row = 0
    batches = pf.iter_batches(batch_size=batch_size, columns=cols)
    while True:
        try:
            batch = next(batches, None)
        except (pa.ArrowException, OSError, ValueError, TypeError) as e:
            raise InputError(
                source, row + 1, f"unreadable Parquet data ({_arrow_message(e)})"
            ) from None
        if batch is None:
            return
        ids = batch.column(1) if at_key == 2 else None
        yield row + 1, batch.column(0), ids, (batch.column(at_key) if key_column else None)
        row += batch.num_rows


def parquet_records(
    source: str,
    first: int,
    texts: Any,
    ids: Any,
    column: str,
    on_bad: OnBad | None = None,
    keys: Any = None,
    key_column: str | None = None,
) -> Iterator[Record]:
    """The :class:`Record` s of one batch of :func:`parquet_batches` (rows numbered from
    ``first``), each value converted and checked in Python; a bad row raises, or goes to
    ``on_bad`` and is skipped. With ``keys`` (the column ``key_column``), each record's
    ``key`` is its value (:func:`priority_value`)."""
    pa = require("pyarrow", feature="Parquet")
    try:
        text_values = texts.to_pylist()
        id_values = ids.to_pylist() if ids is not None else None
        key_values = keys.to_pylist() if keys is not None else None
    except (pa.ArrowException, OSError, ValueError, TypeError) as e:
        raise InputError(source, first, f"unreadable Parquet data ({_arrow_message(e)})") from None
    for k, text in enumerate(text_values):
        row = first + k
        try:
            if text is None:
                raise InputError(source, row, f"column {column!r} is null in this row")
            if isinstance(text, bytes):
                text = _decode(text, source, row, f"column {column!r} is ")
            rid = (
                check_id(id_values[k], source, row) if id_values is not None else f"{source}:{row}"
            )
            key = None
            if key_values is not None:
                key = priority_value(key_values[k], source, row, str(key_column))
        except InputError as e:
            if on_bad is None:
                raise
            on_bad(e)
            continue
        yield Record(source, row, rid, text, key)


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

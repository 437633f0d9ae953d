"""Texts held in Arrow arrays read as stored: a string array's UTF-8 buffer and offsets go to the
fingerprint kernels without a Python string per value (Parquet record batches, Hugging Face
datasets, pyarrow tables and arrays); anything else is read value by value as before."""

from __future__ import annotations

import os
from collections.abc import Iterable, Iterator
from typing import Any

import numpy as np

from neardup._optional import require
from neardup.errors import InputError
from neardup.io.blocks import DocBlock, read_block
from neardup.io.readers import check_id, parquet_records, priority_value, source_name

__all__ = ["ArrowTexts", "arrow_block", "arrow_utf8"]

_EMPTY = np.zeros(0, dtype=np.uint8)


class ArrowTexts:
    """Texts held in Arrow string arrays (a Hugging Face dataset's column, a pyarrow table's),
    read a chunk at a time: iterating gives the values as Python objects; ``chunks`` gives the
    arrays, for :func:`arrow_utf8` to read as stored."""

    def __init__(self, chunks: Iterable[Any]) -> None:
        self.chunks = chunks

    def __iter__(self) -> Iterator[Any]:
        for chunk in self.chunks:
            yield from chunk.to_pylist()


def arrow_utf8(
    array: Any, binary: bool = False
) -> tuple[np.ndarray, np.ndarray, np.ndarray] | None:
    """``(data, offsets, lengths)`` of a pyarrow string array read as stored: its UTF-8 in one
    writable uint8 buffer (value ``i`` at ``data[offsets[i]:offsets[i + 1]]``, int64 offsets)
    and each value's length in code points; None when it holds a null, is empty, is not a
    string array (with ``binary``, binary arrays too) or is not valid UTF-8."""
    pa = require("pyarrow", feature="Arrow input")
    kinds = [pa.types.is_string, pa.types.is_large_string]
    if binary:
        kinds += [pa.types.is_binary, pa.types.is_large_binary]
    if not len(array) or array.null_count or not any(k(array.type) for k in kinds):
        return None
    try:
        text = array.cast(pa.large_string())  # binary: checked to be UTF-8 here
        text.validate(full=True)
    except pa.ArrowException:
        return None
    pc = require("pyarrow.compute", feature="Arrow input")
    n = len(text)
    offsets = np.frombuffer(text.buffers()[1], dtype=np.int64)[text.offset : text.offset + n + 1]
    lo, hi = int(offsets[0]), int(offsets[-1])
    data = np.frombuffer(text.buffers()[2], dtype=np.uint8)[lo:hi].copy() if hi > lo else None
    lengths = pc.utf8_length(text).to_numpy(zero_copy_only=False).astype(np.int64)
    return (_EMPTY.copy() if data is None else data), offsets - lo, lengths


def arrow_block(
    path: str | os.PathLike,
    first: int,
    texts: Any,
    ids: Any,
    column: str,
    keys: Any = None,
    key_column: str | None = None,
) -> DocBlock:
    """The documents of one batch of the Parquet file ``path``
    (:func:`~neardup.io.readers.parquet_batches`: rows numbered from ``first``; ``keys``: its
    keep column ``key_column``, or None), as :func:`~neardup.io.readers.read_parquet` reads
    them; bad rows are returned, not raised.

    A text column without nulls whose values are valid UTF-8 is taken as it is stored
    (:func:`arrow_utf8`: no ``str`` made per row; pyarrow releases the GIL), so batches are read
    on every thread; any other batch is read row by row in Python, with the Python reader's
    errors.
    """
    source = source_name(path)
    utf8 = arrow_utf8(texts, binary=True)
    id_values: list[Any] | None = None
    if utf8 is not None:
        n = len(texts)
        if ids is None:
            id_values = [f"{source}:{row}" for row in range(first, first + n)]
        else:
            try:
                id_values = [check_id(v, source, r) for r, v in enumerate(ids.to_pylist(), first)]
            except (InputError, ValueError, TypeError, require("pyarrow").ArrowException):
                id_values = None  # read row by row: the bad ids named, in order
    key_values = _key_values(source, first, keys, key_column) if utf8 is not None else None
    if utf8 is None or id_values is None or (keys is not None and key_values is None):
        return read_block([(0, lambda on_bad: parquet_records(
            source, first, texts, ids, column, on_bad, keys, key_column))])[1]  # fmt: skip
    data, offsets, lengths = utf8
    block = DocBlock(
        numbers=np.arange(first, first + len(lengths), dtype=np.int64),
        ids=id_values,
        id_hashes=None,
        lengths=lengths,
        bad=[],
        bad_at=[],
        data=data,
        offsets=offsets,
    )
    if key_values is not None:
        block.priority, block.priority_kind = key_values
    return block


def _key_values(
    source: str, first: int, keys: Any, column: str | None
) -> tuple[np.ndarray, np.ndarray] | None:
    """The keep values (float64) and kinds (int8) of a batch's keep column ``keys``; None
    when there is none, or a row's value is bad (the rows are then read one by one, and the
    bad ones named in order)."""
    if keys is None:
        return None
    try:
        got = [
            priority_value(v, source, r, str(column)) for r, v in enumerate(keys.to_pylist(), first)
        ]
    except (InputError, ValueError, TypeError, OverflowError, require("pyarrow").ArrowException):
        return None
    value = np.fromiter((v for v, _ in got), dtype=np.float64, count=len(got))
    return value, np.fromiter((k for _, k in got), dtype=np.int8, count=len(got))

"""JSONL and text lines read a block of bytes at a time and parsed by a numba kernel, GIL-free.

A block is whole lines of an input stream (decompressed, local or remote: see
:func:`neardup.io.files.open_input`). :func:`parse_block` finds each line's text and id without
the GIL (:mod:`neardup.io._line_kernels`), so blocks parse on several threads at once, and gives
the documents as UTF-8 in one buffer, ready for ``Fingerprinter.features_utf8``. A line the
kernel is not sure of (invalid UTF-8, escaped keys, lone surrogates, deep nesting, floats as
ids, any syntax error, ...) goes through the Python reader (:func:`~neardup.io.readers.jsonl_record`,
:func:`~neardup.io.readers.line_record`), so documents, ids and errors are exactly those of
:func:`~neardup.io.readers.read_jsonl` and :func:`~neardup.io.readers.read_lines`.
"""

from __future__ import annotations

import hashlib
import math
import os
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import IO, Any, NamedTuple

import numpy as np

from neardup import config
from neardup.errors import InputError
from neardup.io import _id_kernels as H
from neardup.io import _kept_kernels as C
from neardup.io import _line_kernels as K
from neardup.io.readers import (
    DEFAULT_ID_FIELD,
    Record,
    jsonl_record,
    line_record,
    open_binary,
    source_name,
)

__all__ = [
    "DocBlock",
    "IdTable",
    "LineFormat",
    "count_line_ends",
    "hash_ids",
    "id_key",
    "iter_blocks",
    "kept_lines",
    "line_format",
    "parse_block",
    "read_block",
    "read_blocks",
    "record_block",
]

_U8 = np.dtype(np.uint8)


class LineFormat(NamedTuple):
    """How the lines of one input are read: JSONL (``jsonl``) or a document per line."""

    source: str  #: the input's name in ids and messages (``<stdin>`` for ``-``)
    jsonl: bool
    field: str
    id_field: str | None
    field_utf8: np.ndarray  #: uint8: the names as the kernel compares them
    id_utf8: np.ndarray
    id_mode: int  #: 0 no id field, 1 the default one (used when present), 2 required
    prefix: np.ndarray  #: uint8: ``source:`` for file:line ids (empty: made in Python)
    #: the keep field (``--keep max:FIELD``): its lines are read by the Python reader
    key_field: str | None = None


def _utf8(text: str) -> np.ndarray | None:
    try:
        return np.frombuffer(text.encode("utf-8"), dtype=np.uint8).copy()
    except UnicodeEncodeError:
        return None


def line_format(
    path: str | os.PathLike,
    jsonl: bool,
    field: str = "text",
    id_field: str | None = "id",
    key_field: str | None = None,
) -> LineFormat | None:
    """The :class:`LineFormat` of ``path`` for :func:`parse_block`, or None when the kernel
    cannot read it (field names that are not UTF-8, or the same field for text and id: the
    Python readers serve those). With ``key_field`` (a keep field of JSONL) the kernel finds
    the lines and the Python reader reads each, its keep value too."""
    source = source_name(path)
    field_b = _utf8(field)
    id_b = _utf8(id_field or "")
    if field_b is None or id_b is None or (jsonl and id_field == field):
        return None
    prefix = _utf8(f"{source}:")
    if prefix is None or 10 in prefix:
        prefix = np.zeros(0, dtype=np.uint8)
    id_mode = 0 if (id_field is None or not jsonl) else 1 if id_field == DEFAULT_ID_FIELD else 2
    key = key_field if jsonl else None
    return LineFormat(source, jsonl, field, id_field, field_b, id_b, id_mode, prefix, key)


def count_line_ends(data: bytes) -> int:
    """The ``\\n`` bytes of ``data``; counted by numpy from 64 KiB on (a 4 MiB block:
    0.21 ms, against 1.24 ms for ``bytes.count``)."""
    if len(data) < 1 << 16:
        return data.count(b"\n")
    return int(np.count_nonzero(np.frombuffer(data, dtype=np.uint8) == 10))


def iter_blocks(f: IO[bytes], size: int, limit: int | None = None) -> Iterator[tuple[int, Any]]:
    """``(number of the first line, bytes)`` blocks of whole lines of a binary stream, of about
    ``size`` bytes or one line when longer (the last line may lack its line end).

    A line longer than ``limit`` bytes (default :data:`neardup.config.MAX_RECORD_BYTES`, line end
    not counted) that does not fit in a block is read past in pieces and yielded as
    ``(number, None)``, as :func:`~neardup.io.readers.iter_lines` does, so memory stays bounded.
    """
    limit = config.MAX_RECORD_BYTES if limit is None else limit
    number = 1
    pieces: list[bytes] = []  # the line read so far, when no line end came yet
    held = 0
    skipping = False
    while True:
        chunk = f.read(size)
        if not chunk:
            if skipping:
                yield number, None
            elif pieces:
                yield number, b"".join(pieces)
            return
        if skipping:
            j = chunk.find(b"\n")
            if j < 0:
                continue
            yield number, None
            number += 1
            skipping = False
            chunk = chunk[j + 1 :]
            if not chunk:
                continue
        cut = chunk.rfind(b"\n") + 1
        if cut:
            pieces.append(chunk[:cut] if cut < len(chunk) else chunk)
            block = b"".join(pieces) if len(pieces) > 1 else pieces[0]
            yield number, block
            number += count_line_ends(block)
            rest = chunk[cut:]
            pieces, held = ([rest], len(rest)) if rest else ([], 0)
        else:
            pieces.append(chunk)
            held += len(chunk)
        if held > limit:
            pieces, held = [], 0
            skipping = True


def kept_lines(
    block: bytes, first: int, numbers: np.ndarray, i: int, kernel: bool = True
) -> tuple[Any, int]:
    """The lines of ``block`` (whole lines numbered from ``first``; the last may lack its
    newline) whose numbers are among ``numbers[i:]`` (ascending int64), each ending in a
    newline, and how many.

    With ``kernel`` the lines are gathered by a GIL-free numba kernel into a uint8 array (blocks
    of one input can be gathered on several threads); without, joined as bytes in Python (no
    kernel to load or compile, for small inputs).
    """
    buf = np.frombuffer(block, dtype=np.uint8)
    ends = np.flatnonzero(buf == 10)
    if len(buf) and buf[-1] != 10:
        ends = np.append(ends, len(buf))
    stop = i + int(np.searchsorted(numbers[i:], first + len(ends)))
    if stop == i:
        return b"", 0
    if kernel:
        out = np.empty(len(buf) + 1, dtype=np.uint8)
        o, n = C.gather_lines(buf, ends, first, numbers, i, out)
        return out[:o], n
    k = numbers[i:stop] - first
    starts = np.zeros(len(ends), dtype=np.int64)
    starts[1:] = ends[:-1] + 1
    chunks = [block[a:b] for a, b in zip(starts[k].tolist(), ends[k].tolist(), strict=True)]
    return b"\n".join(chunks) + b"\n", stop - i


def read_blocks(path: str | os.PathLike, size: int) -> Iterator[tuple[int, Any]]:
    """:func:`iter_blocks` of the file ``path`` (decompressed, local or a URL; ``-`` stdin)."""
    with open_binary(path) as f:
        yield from iter_blocks(f, size)


@dataclass
class DocBlock:
    """The documents of one block of input, in input order, and its bad records.

    The text is either UTF-8 in one buffer (``data``, document ``i`` at
    ``data[offsets[i]:offsets[i + 1]]``; from :func:`parse_block`) or a list of ``str``
    (``texts``; from :func:`record_block`).
    """

    numbers: np.ndarray  #: int64[n]: 1-based line (record, row) number of each document
    ids: list[Any]
    id_hashes: np.ndarray | None  #: uint64[n]: :func:`hash_ids` of ``ids`` (None: not made)
    lengths: np.ndarray  #: int64[n]: characters (code points) of each text
    bad: list[InputError]  #: the block's bad records, in input order...
    bad_at: list[int]  #: ... each met before document ``bad_at[i]`` of the block
    data: np.ndarray | None = None  #: uint8 (writable)
    offsets: np.ndarray | None = None  #: int64[n + 1]
    texts: list[str] | None = None
    #: float64[n]: each document's keep-field value (None without a keep field) ...
    priority: np.ndarray | None = None
    #: ... int8[n]: its kind (:data:`~neardup.io.readers.KEY_NUMBER` or ``KEY_DATE``)
    priority_kind: np.ndarray | None = None
    #: int64[n]: the bytes of each document's line with one newline, as :func:`kept_lines`
    #: writes it (from :func:`parse_block`; None from other readers)
    line_bytes: np.ndarray | None = None

    def __len__(self) -> int:
        return len(self.ids)

    def strings(self) -> list[str]:
        """The texts as ``str`` (lone surrogates kept, as JSON escapes give them)."""
        if self.texts is not None:
            return self.texts
        assert self.data is not None and self.offsets is not None
        raw = self.data.tobytes()
        bounds = self.offsets.tolist()
        return [raw[a:b].decode("utf-8", "surrogatepass") for a, b in zip(bounds, bounds[1:])]


def parse_block(fmt: LineFormat, number: int, data: bytes | None) -> DocBlock:
    """The documents of ``data``, whole lines numbered from ``number`` (``None``: one line over
    the size bound), read as :func:`~neardup.io.readers.read_jsonl` (``fmt.jsonl``) or
    :func:`~neardup.io.readers.read_lines` read them; bad records are returned, not raised."""
    source = fmt.source
    if data is None:
        return _empty([_python_record(source, number, None, fmt)])
    buf = np.frombuffer(data, dtype=np.uint8)
    depth = config.MAX_JSON_DEPTH if fmt.jsonl else 0
    status, text_end, chars, id_kind, id_end, id_int, text, idbuf, line_end = K.parse_lines(
        buf, fmt.jsonl, fmt.field_utf8, fmt.id_utf8, fmt.id_mode, fmt.prefix, number,
        config.MAX_RECORD_BYTES, depth,
    )  # fmt: skip
    if fmt.key_field is not None:  # every line through the Python reader, its keep value too
        status = np.where(status == K.LINE_OK, K.LINE_SLOW, status)
    ok = status == K.LINE_OK
    lines = np.flatnonzero(ok)
    is_str = id_kind[lines] == K.ID_STR
    str_lines = lines[is_str]
    strs = idbuf.tobytes().decode("utf-8").split("\n")[:-1] if len(str_lines) else []
    hashes = np.empty(len(lines), dtype=np.uint64)
    if len(str_lines) == len(lines):
        ids: list[Any] = strs
        hashes[:] = H.hash_strings(idbuf, id_end[str_lines])
    else:
        ids_arr = np.empty(len(lines), dtype=object)
        ids_arr[is_str] = strs
        hashes[is_str] = H.hash_strings(idbuf, id_end[str_lines])
        is_int = id_kind[lines] == K.ID_INT
        ids_arr[is_int] = id_int[lines[is_int]].tolist()
        hashes[is_int] = H.hash_ints(id_int[lines[is_int]])
        rest = ~(is_str | is_int)  # file:line ids the kernel could not write
        if rest.any():
            made = [f"{source}:{number + k}" for k in lines[rest].tolist()]
            ids_arr[rest] = made
            hashes[rest] = hash_ids(made)
        ids = ids_arr.tolist()
    starts = np.zeros(len(lines) + 1, dtype=np.int64)
    starts[1:] = text_end[lines]
    block = DocBlock(
        numbers=lines + number,
        ids=ids,
        id_hashes=hashes,
        lengths=chars[lines],
        bad=[],
        bad_at=[],
        data=text,
        offsets=starts,
    )
    if fmt.key_field is not None:
        block.priority, block.priority_kind = _keys([])
    slow = np.flatnonzero((status == K.LINE_SLOW) | (status == K.LINE_TOO_BIG))
    if len(slow):
        too_big = status[slow] == K.LINE_TOO_BIG
        _python_lines(block, fmt, number, data, slow, too_big, line_end, np.cumsum(ok)[slow])
        at = np.searchsorted(block.numbers, [e.line for e in block.bad])
        block.bad_at = at.tolist()
    # line k is buf[line_end[k - 1] + 1 : line_end[k]]; kept_lines writes it with a newline
    span = np.diff(line_end, prepend=np.int64(-1))
    block.line_bytes = span[block.numbers - number]
    return block


def _python_record(source: str, number: int, raw: bytes | None, fmt: LineFormat) -> Any:
    """The Python reader's record of one line, its InputError, or None (a blank line)."""
    try:
        if fmt.jsonl:
            return jsonl_record(raw, source, number, fmt.field, fmt.id_field, fmt.key_field)
        return line_record(raw, source, number)
    except InputError as e:
        return e


def _python_lines(
    block: DocBlock,
    fmt: LineFormat,
    number: int,
    data: bytes,
    slow: np.ndarray,
    too_big: np.ndarray,
    line_end: np.ndarray,
    before: np.ndarray,
) -> None:
    """Read the lines ``slow`` (indices in the block; ``too_big``: over the size bound) with
    the Python reader and insert their documents (``before``: how many kernel documents
    precede each) or errors into ``block``."""
    recs: list[tuple[int, Record]] = []
    for k, big, at in zip(slow.tolist(), too_big.tolist(), before.tolist(), strict=True):
        start = int(line_end[k - 1]) + 1 if k > 0 else 0
        raw = None if big else data[start : int(line_end[k]) + 1]
        got = _python_record(fmt.source, number + k, raw, fmt)
        if isinstance(got, InputError):
            block.bad.append(got)
        elif got is not None:
            recs.append((at, got))
    if not recs:
        return
    assert block.data is not None and block.offsets is not None
    encoded = [np.frombuffer(r.text.encode("utf-8", "surrogatepass"), _U8) for _, r in recs]
    ats = [at for at, _ in recs]
    # the Python reader's documents go before the kernel's document ``at``
    pieces: list[np.ndarray] = []
    ids: list[Any] = []
    prev = 0
    for at, raw, (_, rec) in zip(ats, encoded, recs, strict=True):
        pieces += [block.data[block.offsets[prev] : block.offsets[at]], raw]
        ids += block.ids[prev:at]
        ids.append(rec.id)
        prev = at
    pieces.append(block.data[block.offsets[prev] :])
    ids += block.ids[prev:]
    sizes = np.insert(np.diff(block.offsets), ats, [len(r) for r in encoded])
    block.offsets = np.zeros(len(sizes) + 1, dtype=np.int64)
    np.cumsum(sizes, out=block.offsets[1:])
    block.data = np.concatenate(pieces)
    block.ids = ids
    assert block.id_hashes is not None
    block.id_hashes = np.insert(block.id_hashes, ats, hash_ids([r.id for _, r in recs]))
    block.numbers = np.insert(block.numbers, ats, [r.number for _, r in recs])
    block.lengths = np.insert(block.lengths, ats, [len(r.text) for _, r in recs])
    if block.priority is not None and block.priority_kind is not None:
        value, kind = _keys([r for _, r in recs])
        block.priority = np.insert(block.priority, ats, value)
        block.priority_kind = np.insert(block.priority_kind, ats, kind)


def _keys(records: list[Record]) -> tuple[np.ndarray, np.ndarray]:
    """The keep-field values (float64) and kinds (int8) of ``records``."""
    value = np.fromiter((r.key[0] for r in records), dtype=np.float64, count=len(records))
    kind = np.fromiter((r.key[1] for r in records), dtype=np.int8, count=len(records))
    return value, kind


def _empty(bad: list[InputError]) -> DocBlock:
    z = np.zeros(0, dtype=np.int64)
    u8 = np.zeros(0, np.uint8)
    return DocBlock(z, [], np.zeros(0, np.uint64), z, bad, [0] * len(bad), u8, np.zeros(1, z.dtype))


def read_block(
    readers: Iterable[tuple[int, Callable[[Callable[[InputError], None]], Iterable[Record]]]],
) -> tuple[np.ndarray, DocBlock]:
    """Every record of each ``(file index, read)`` in turn, ``read(on_bad)`` giving its records
    with bad ones passed to ``on_bad``: ``(file index of each record (int32), DocBlock)``, the
    bad records listed in the block, in input order."""
    records: list[Record] = []
    where: list[int] = []
    bad: list[InputError] = []
    bad_at: list[int] = []

    def on_bad(err: InputError) -> None:
        bad.append(err)
        bad_at.append(len(records))

    for k, read in readers:
        for rec in read(on_bad):
            records.append(rec)
            where.append(k)
    return np.array(where, dtype=np.int32), record_block(records, bad, bad_at)


def record_block(records: list[Record], bad: list[InputError], bad_at: list[int]) -> DocBlock:
    """A :class:`DocBlock` of records read by the Python readers (``texts``, not ``data``);
    ``bad``: the errors met among them, in input order, each before record ``bad_at[i]``."""
    ids = [r.id for r in records]
    block = DocBlock(
        numbers=np.fromiter((r.number for r in records), dtype=np.int64, count=len(records)),
        ids=ids,
        id_hashes=None,
        lengths=np.fromiter((len(r.text) for r in records), dtype=np.int64, count=len(records)),
        bad=bad,
        bad_at=bad_at,
        texts=[r.text for r in records],
    )
    if records and records[0].key is not None:
        block.priority, block.priority_kind = _keys(records)
    return block


# ----------------------------------------------------------------------------------------------
# ids


def id_key(v: Any) -> Any:
    """What two ids are compared by: equal keys are the same id (``"1"`` and ``1`` differ; ``1``,
    ``1.0`` and ``True`` are the same, as Python compares them; lists and objects by their JSON)."""
    try:
        hash(v)
    except TypeError:
        import json

        return ("json", json.dumps(v, sort_keys=True, default=str))
    return (type(v) is str, v)


_I64 = (-(1 << 63), (1 << 63) - 1)


def hash_ids(ids: list[Any]) -> np.ndarray:
    """A 64-bit hash of each id: equal :func:`id_key` give equal hashes (strings: FNV-1a of
    their UTF-8 and MurmurHash3's finalizer, as the block kernel computes them; integral
    numbers in int64 range by value; anything else by a BLAKE2b digest of its key's ``repr``, so
    that every process gives the same hash)."""
    n = len(ids)
    out = np.empty(n, dtype=np.uint64)
    str_pos: list[int] = []
    strs: list[bytes] = []
    int_pos: list[int] = []
    ints: list[int] = []
    for j, v in enumerate(ids):
        if type(v) is str:
            str_pos.append(j)
            strs.append(v.encode("utf-8", "surrogatepass") + b"\n")
            continue
        if isinstance(v, float) and math.isfinite(v) and v.is_integer():
            v = int(v)
        if isinstance(v, int) and _I64[0] <= v <= _I64[1]:
            int_pos.append(j)
            ints.append(int(v))
        else:  # not Python's hash: it differs between processes (workers, resumed runs)
            digest = hashlib.blake2b(repr(id_key(v)).encode("utf-8", "backslashreplace"),
                                     digest_size=8).digest()  # fmt: skip
            out[j] = np.uint64(int.from_bytes(digest, "little"))
    if strs:
        ends = np.cumsum([len(s) for s in strs], dtype=np.int64)
        buf = np.frombuffer(bytearray(b"".join(strs)), dtype=np.uint8)  # writable, as the kernel's
        out[str_pos] = H.hash_strings(buf, ends)
    if ints:
        out[int_pos] = H.hash_ints(np.array(ints, dtype=np.int64))
    return out


class IdTable:
    """The ids seen so far, by :func:`hash_ids` hash, for finding repeated ids in bulk without
    the GIL: :meth:`first` returns, for each new hash, the row it was first seen in."""

    def __init__(self) -> None:
        self._keys = np.zeros(1024, dtype=np.uint64)
        self._rows = np.full(1024, -1, dtype=np.int64)
        self._used = 0

    def first(self, hashes: np.ndarray, base: int) -> np.ndarray:
        """For each hash, the row (``base + j`` for ``hashes[j]``, when it was inserted) of its
        first occurrence before it, or -1 (then it is inserted with its row)."""
        need = 2 * (self._used + len(hashes))
        if need > len(self._keys):
            size = len(self._keys)
            while size < need:
                size *= 2
            keys = np.zeros(size, dtype=np.uint64)
            rows = np.full(size, -1, dtype=np.int64)
            H.rehash(self._keys, self._rows, keys, rows)
            self._keys, self._rows = keys, rows
        found = np.empty(len(hashes), dtype=np.int64)
        self._used = int(H.first_seen(self._keys, self._rows, self._used, hashes, base, found))
        return found

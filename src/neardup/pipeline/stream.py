"""Documents of input files read, parsed and fingerprinted on every core, in input order.

The main thread only reads: blocks of bytes of JSONL and text-line files (decompression and
remote reads included), or records of the other formats in groups. Worker threads parse each
block without the GIL (:func:`neardup.io.blocks.parse_block`) and fingerprint its UTF-8 text in
place (``Fingerprinter.features_utf8``), so reading, JSON parsing and fingerprinting all run on
``threads`` cores. Results come back in input order, a bounded number of blocks in flight.
"""

from __future__ import annotations

import contextlib
import functools
from collections import deque
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

import numpy as np

from neardup import config
from neardup.errors import InputError
from neardup.fingerprints.batch import threads_for
from neardup.io.arrow import arrow_block
from neardup.io.blocks import (
    DocBlock,
    line_format,
    parse_block,
    read_blocks,
    record_block,
)
from neardup.io.files import input_size
from neardup.io.readers import (
    Record,
    parquet_batches,
    read_jsonl,
    read_lines,
    read_parquet,
    read_text_file,
)
from neardup.io.rows import row_block
from neardup.io.sources import InputFile

__all__ = [
    "Batch",
    "Fingerprinted",
    "block_bytes",
    "concat",
    "fingerprint_all",
    "fingerprint_files",
    "fingerprint_item",
    "in_order",
    "input_items",
    "reads_in_blocks",
]

#: Blocks per thread that the block size aims at (between config.READ_BLOCK_MIN_BYTES and
#: config.READ_BLOCK_BYTES), so that threads end together.
READ_BLOCKS_PER_THREAD = 4


@dataclass
class Batch:
    """One block of documents with their fingerprints (uint64, bit 63 most significant)."""

    file: np.ndarray  #: int32[n]: index of each document's input file
    docs: DocBlock  #: numbers, ids, id hashes, lengths and bad records (see DocBlock)
    fingerprints: np.ndarray  #: uint64[n]
    key_offsets: np.ndarray | None  #: int64[n + 1] with ``keys``: the shingle keys ...
    keys: np.ndarray | None  #: ... uint32, of document i at key_offsets[i]:key_offsets[i + 1]

    def __len__(self) -> int:
        return len(self.fingerprints)


def block_bytes(files: list[InputFile], threads: int) -> int:
    """Bytes per block (and per group of records): about ``READ_BLOCKS_PER_THREAD`` blocks for
    every thread over the inputs, between ``READ_BLOCK_MIN_BYTES`` and ``READ_BLOCK_BYTES``."""
    total = _size(files)
    per = total // max(1, threads * READ_BLOCKS_PER_THREAD) if total is not None else None
    if per is None:
        return config.READ_BLOCK_BYTES
    return int(max(config.READ_BLOCK_MIN_BYTES, min(config.READ_BLOCK_BYTES, per)))


def reads_in_blocks(files: list[InputFile], kinds: tuple[str, ...] = ("jsonl", "lines")) -> bool:
    """Whether :func:`fingerprint_files` reads the inputs of ``kinds`` a block at a time (JSONL
    and text lines with the block kernel, Parquet text columns as stored): when they hold
    ``READ_KERNEL_FROM`` bytes or more (or come from stdin); smaller ones are read record by
    record in Python, which saves loading (and, on the first run, compiling) the kernels."""
    lines = [f for f in files if f.kind in kinds]
    if not lines:
        return False
    total = _size(lines)
    return total is None or total >= config.READ_KERNEL_FROM


def _size(files: list[InputFile]) -> int | None:
    """Bytes in ``files`` as stored, None when unknown (stdin)."""
    if any(f.path == "-" for f in files):
        return None
    try:
        return sum(input_size(f.path) for f in files)
    except (OSError, ValueError, InputError):
        return None  # an error to report when the file is read


def _records(f: InputFile, text_field: str, id_field: str | None, on_bad: Any,
             key_field: str | None = None):  # fmt: skip
    if f.kind == "text":
        return read_text_file(f.path, on_bad)
    if f.kind == "lines":
        return read_lines(f.path, on_bad)
    if f.kind == "jsonl":
        return read_jsonl(f.path, text_field, id_field, on_bad, key_field)
    return read_parquet(f.path, text_field, id_field, on_bad, key_column=key_field)


def input_items(
    files: list[InputFile],
    text_field: str,
    id_field: str | None,
    size: int,
    kernel: bool,
    arrow: bool = False,
    key_field: str | None = None,
) -> Iterator[tuple[Any, ...]]:
    """What the main thread reads: ``("raw", file index, LineFormat, number, bytes)`` blocks of
    ``size`` bytes of line files (with ``kernel``), ``("arrow", file index, path, first row,
    texts, ids, column, keys, key column)`` record batches of Parquet files (with ``arrow``),
    ``("docs", file index array, DocBlock)`` groups of records of the other files; with
    ``key_field`` (``--keep max:FIELD``), each document's value of that field too."""
    records: list[Record] = []
    where: list[int] = []
    bad: list[InputError] = []
    bad_at: list[int] = []
    held = 0

    def group() -> tuple[Any, ...]:
        nonlocal records, where, bad, bad_at, held
        item = ("docs", np.array(where, np.int32), record_block(records, bad, bad_at))
        records, where, bad, bad_at, held = [], [], [], [], 0
        return item

    def on_bad(err: InputError) -> None:
        bad.append(err)
        bad_at.append(len(records))

    for k, f in enumerate(files):
        fmt = None
        if f.kind in ("jsonl", "lines") and kernel:
            fmt = line_format(f.path, f.kind == "jsonl", text_field, id_field, key_field)
        if fmt is not None:
            if records or bad:
                yield group()
            for number, data in read_blocks(f.path, size):
                yield "raw", k, fmt, number, data
            continue
        if f.kind == "parquet" and arrow:
            if records or bad:
                yield group()
            rows = max(1, min(config.BATCH_DOCS, size // 1024))
            for first, texts, ids, keys in parquet_batches(f.path, text_field, id_field, rows,
                                                           key_field):  # fmt: skip
                yield "arrow", k, f.path, first, texts, ids, text_field, keys, key_field
            continue
        for rec in _records(f, text_field, id_field, on_bad, key_field):
            records.append(rec)
            where.append(k)
            held += len(rec.text)
            if len(records) >= config.BATCH_DOCS or held >= size:
                yield group()
    if records or bad:
        yield group()


def _fingerprint(block: DocBlock, fper: Any, keys: bool) -> tuple[Any, Any, Any]:
    """(fingerprints, key offsets, keys) of a block's documents, on this thread."""
    if block.data is not None and hasattr(fper, "features_utf8"):
        ascii_ = block.lengths == np.diff(block.offsets)  # as many characters as bytes
        f = fper.features_utf8(
            block.data, block.offsets, 1, keys=keys, validate=False, ascii=ascii_
        )
        return f.fingerprints, (f.offsets if keys else None), (f.keys if keys else None)
    texts = block.strings()
    if keys:
        f = fper.features_many(texts, 1)
        return f.fingerprints, f.offsets, f.keys
    return np.asarray(fper.fingerprint_many(texts, 1), dtype=np.uint64), None, None


def fingerprint_item(item: tuple[Any, ...], *, fper: Any, keys: bool) -> Batch:
    """Parse and fingerprint one item of :func:`input_items`, on the calling thread.

    Parameters
    ----------
    item : tuple
        A ``"raw"`` block of line-file bytes, an ``"arrow"`` record batch or a ``"docs"``
        group of records, as :func:`input_items` yields them, or ``"rows"`` of in-memory
        input (:func:`neardup.io.rows.row_blocks`).
    fper : Fingerprinter
        The fingerprinter (:class:`neardup.fingerprints.simhash.Fingerprinter` or one with
        ``features_many``).
    keys : bool
        Also keep each document's shingle keys (verified dedup).

    Returns
    -------
    Batch
        The item's documents, the input file of each and their 64-bit fingerprints (and keys).
    """
    if item[0] == "raw":
        _, k, fmt, number, data = item
        block = parse_block(fmt, number, data)
        where = np.full(len(block), k, dtype=np.int32)
    elif item[0] == "arrow":
        _, k, *batch = item
        block = arrow_block(*batch)
        where = np.full(len(block), k, dtype=np.int32)
    elif item[0] == "rows":  # in-memory input
        block = row_block(*item[1:])
        where = np.zeros(len(block), dtype=np.int32)
    else:
        _, where, block = item
    fps, key_off, key_vals = _fingerprint(block, fper, keys)
    return Batch(where, block, fps, key_off, key_vals)


def fingerprint_files(
    files: list[InputFile],
    fingerprinter: Any,
    *,
    text_field: str = "text",
    id_field: str | None = "id",
    threads: int | None = None,
    keys: bool = False,
    on_read: Callable[[], None] | None = None,
    key_field: str | None = None,
) -> Iterator[Batch]:
    """Every document of ``files`` fingerprinted, as :class:`Batch` es in input order.

    Bad records are not raised: each batch lists those met among its documents, in order
    (``batch.docs.bad``), for the caller to raise or skip in turn. An input that cannot be read
    further (a corrupt compressed file, say) raises once the batches before it are out. A
    caller that may stop early closes the generator (``contextlib.closing``), which cancels
    the blocks in flight and waits for the threads.

    Parameters
    ----------
    files : list of InputFile
        The inputs (see :func:`neardup.io.sources.expand_inputs`).
    fingerprinter : Fingerprinter or object with ``fingerprint_many``
        With ``keys``, also ``features_many``.
    text_field, id_field : str
        JSONL field / Parquet column of the text and of the id (``None``: ``file:number``).
    threads : int, optional
        Threads that parse and fingerprint (default: ``NEARDUP_THREADS`` or the usable CPU
        count); the calling thread reads.
    keys : bool
        Also the shingle keys of every document (for verification).
    on_read : callable, optional
        Called after each block is read (progress: the byte meter of
        :func:`neardup.io.files.metered` moves as blocks are read, a little ahead of the
        batches).
    key_field : str, optional
        The keep field (``keep="max:FIELD"``): each document's value in
        ``batch.docs.priority`` (a record without a usable one is a bad record).
    """
    nthreads = threads_for(threads)
    size = block_bytes(files, nthreads)
    arrow = reads_in_blocks(files, ("parquet",))
    items = input_items(files, text_field, id_field, size, reads_in_blocks(files), arrow, key_field)
    # blocks in flight: every thread busy, memory bounded
    with ThreadPoolExecutor(max_workers=nthreads) as pool:
        work = functools.partial(fingerprint_item, fper=fingerprinter, keys=keys)
        yield from in_order(pool, work, items, nthreads + 1, on_read)


def in_order(
    pool: ThreadPoolExecutor | None,
    work: Callable[[Any], Any],
    items: Iterator[Any],
    ahead: int,
    on_submit: Callable[[], None] | None = None,
) -> Iterator[Any]:
    """``work(item)`` of every item, computed on ``pool``'s threads (``None``: on this thread,
    one at a time) and given in the items' order, at most ``ahead`` submitted and not yet given.

    An error raised while taking the next item is raised after the results of the items before
    it. Closing the generator cancels the work not started and closes ``items``.
    """
    pending: deque[Future] = deque()
    failed: Exception | None = None
    try:
        while True:
            try:
                item = next(items, None)
            except Exception as e:  # the items taken before it come first
                failed = e
                break
            if item is None:
                break
            if pool is None:
                yield work(item)
                continue
            pending.append(pool.submit(work, item))
            if on_submit is not None:
                on_submit()
            while len(pending) > ahead:
                yield pending.popleft().result()
        while pending:
            yield pending.popleft().result()
    finally:
        for fut in pending:
            fut.cancel()
        if hasattr(items, "close"):
            items.close()
    if failed is not None:
        raise failed


@dataclass
class Fingerprinted:
    """Every document's id, fingerprint and place (what ``fingerprint`` and ``index add``
    keep)."""

    ids: list[Any]
    fingerprints: np.ndarray  #: uint64[n]
    file: np.ndarray  #: int32[n]: index of the input file
    record: np.ndarray  #: int64[n]: 1-based line, row or record number in it


def fingerprint_all(
    files: list[InputFile],
    fingerprinter: Any,
    *,
    text_field: str = "text",
    id_field: str | None = "id",
    threads: int | None = None,
    on_bad: Callable[[InputError], None] | None = None,
    progress: Callable[[int], None] | None = None,
    keys: bool = False,
    each: Callable[[Batch], None] | None = None,
) -> Fingerprinted:
    """:func:`fingerprint_files` gathered: bad records raise (or go to ``on_bad`` and are
    skipped) in input order; ``progress`` gets the documents done after each block; ``each``
    gets every batch in turn (with ``keys``, its shingle keys too), to keep more of it."""
    ids: list[Any] = []
    parts: list[np.ndarray] = []
    where: list[np.ndarray] = []
    numbers: list[np.ndarray] = []
    if progress is not None:
        progress(0)  # reading starts
    batches = fingerprint_files(
        files,
        fingerprinter,
        text_field=text_field,
        id_field=id_field,
        threads=threads,
        keys=keys,
        on_read=(lambda: progress(len(ids))) if progress is not None else None,
    )
    with contextlib.closing(batches):  # its threads end here, also when a bad record raises
        for batch in batches:
            for err in batch.docs.bad:
                if on_bad is None:
                    raise err
                on_bad(err)
            if each is not None:
                each(batch)
            parts.append(batch.fingerprints)
            where.append(batch.file)
            numbers.append(batch.docs.numbers)
            ids.extend(batch.docs.ids)
            if progress is not None:
                progress(len(ids))

    return Fingerprinted(
        ids, concat(parts, np.uint64), concat(where, np.int32), concat(numbers, np.int64)
    )


def concat(parts: list[np.ndarray], dtype: Any) -> np.ndarray:
    """``parts`` end to end, or an empty array of ``dtype`` when there are none."""
    return np.concatenate(parts) if parts else np.zeros(0, dtype=dtype)

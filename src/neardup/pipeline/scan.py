"""Pass 1 of dedup: read every document once and keep only ids, locations, lengths and
fingerprints (uint64, bit 63 most significant); texts are never all held at once."""

from __future__ import annotations

import bisect
import contextlib
import itertools
import os
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

import numpy as np

from neardup import config
from neardup.errors import InputError
from neardup.io.arrow import ArrowTexts, arrow_utf8
from neardup.io.blocks import IdTable, hash_ids, id_key
from neardup.io.files import check_unchanged, file_stamp, input_size, open_parquet
from neardup.io.sources import InputFile, expand_inputs
from neardup.pipeline.stream import Batch, concat, fingerprint_files

__all__ = ["Scan", "SeenDocuments", "check_key_kinds", "first_kinds", "fingerprint_texts",
           "scan_files", "unique_ids"]  # fmt: skip

OnBad = Callable[[InputError], None]
Progress = Callable[[int], None]


@dataclass
class Scan:
    """What the first pass keeps of every document read (arrays of shape ``(n,)``)."""

    files: list[InputFile]
    ids: list[Any]  #: the id of each document (field/column value, else ``file:number``)
    source: np.ndarray  #: int32 index into ``files``
    record: np.ndarray  #: int64 1-based line / row number (1 for a whole text file)
    lengths: np.ndarray  #: int64 characters of text
    fingerprints: np.ndarray  #: uint64
    skipped: int = 0  #: bad records skipped (only with ``on_bad``)
    bytes_in: int = 0  #: total size of the input files in bytes
    #: each file's :func:`neardup.io.files.file_stamp` when the first pass began; the second
    #: pass refuses a file that changed since (:meth:`check_unchanged`)
    stamps: list[tuple] | None = None
    #: float64 values of the keep field (``keep="max:FIELD"``; else None), one kind
    #: (:func:`check_key_kinds`)
    priority: np.ndarray | None = None

    def check_unchanged(self) -> None:
        """Raise :class:`InputError` naming the first input changed since the first pass."""
        for f, stamp in zip(self.files, self.stamps or (), strict=False):
            check_unchanged(f.path, stamp)


def check_parquet_schemas(files: list[InputFile]) -> None:
    if not files or files[0].kind != "parquet":
        return
    schema = open_parquet(files[0].path).schema_arrow
    for f in files[1:]:
        other = open_parquet(f.path).schema_arrow
        if not other.equals(schema, check_metadata=False):
            raise InputError(
                f.path,
                None,
                f"Parquet schema differs from {files[0].path}'s; dedup writes one file, so all "
                "inputs need the same columns and types",
            )


def scan_files(
    inputs: Iterable[str | os.PathLike],
    *,
    fmt: str = "auto",
    text_field: str = "text",
    id_field: str | None = "id",
    fingerprinter: Any = None,
    threads: int | None = None,
    on_bad: OnBad | None = None,
    progress: Progress | None = None,
    files: list[InputFile] | None = None,
    spool: Any = None,
    key_field: str | None = None,
) -> Scan:
    """First pass: fingerprint every document of ``inputs``, keeping only ids and arrays.

    This thread reads the inputs in blocks; ``threads`` threads parse and fingerprint them
    (:func:`neardup.pipeline.stream.fingerprint_files`). Bad records and duplicate ids raise
    :class:`InputError` naming the record (and the first with that id), or are passed to
    ``on_bad`` and skipped, in input order.

    Parameters
    ----------
    inputs : iterable of path
        Files, directories or glob patterns (see :func:`expand_inputs`).
    fmt : str
        Reader: ``"auto"`` (by extension), ``"text"``, ``"lines"``, ``"jsonl"``, ``"parquet"``.
    text_field, id_field : str
        JSONL field / Parquet column of the text and of the id (``None``: ``file:number``).
    fingerprinter : neardup.fingerprints.Fingerprinter, optional
        Default: ``Fingerprinter("default")``.
    threads : int, optional
        Threads that parse and fingerprint.
    on_bad : callable, optional
        Called with each bad record's :class:`InputError` instead of raising; the record is
        skipped and counted in ``Scan.skipped``.
    progress : callable, optional
        Called with the number of documents read so far, after each block.
    files : list of InputFile, optional
        ``inputs`` already expanded by :func:`expand_inputs` (then ``inputs`` is not read).
    spool : neardup.pipeline.spool.ShingleSpool, optional
        Also append every document's shingle keys here, in input order (the fingerprinter's
        ``features_many``, same pass).
    key_field : str, optional
        The keep field (``keep="max:FIELD"``): its values in ``Scan.priority``; a record
        without a usable one is bad, and a field of numbers and dates an InputError
        (:func:`check_key_kinds`).
    """
    from neardup.fingerprints import Fingerprinter

    fper = fingerprinter if fingerprinter is not None else Fingerprinter("default")
    if files is None:
        files = expand_inputs(inputs, fmt)
    stamps = [file_stamp(f.path) for f in files]
    check_parquet_schemas(files)
    if spool is not None:
        _batch_fingerprinter(fper, threads, spool)  # the same TypeError as in-memory input
    skipped = 0

    def bad(err: InputError) -> None:
        nonlocal skipped
        if on_bad is None:
            raise err
        skipped += 1
        on_bad(err)

    seen = SeenDocuments(files)
    if progress is not None:
        progress(0)  # reading starts
    batches = fingerprint_files(
        files,
        fper,
        text_field=text_field,
        id_field=id_field,
        threads=threads,
        keys=spool is not None,
        on_read=(lambda: progress(len(seen.ids))) if progress is not None else None,
        key_field=key_field,
    )
    with contextlib.closing(batches):  # its threads end here, also when a bad record raises
        for batch in batches:
            keep = seen.add(batch, bad)
            if spool is not None:
                spool.append(*_kept_keys(batch.key_offsets, batch.keys, keep))
            if progress is not None:
                progress(len(seen.ids))

    scan = _scan_of(files, seen, skipped, stamps)
    scan.check_unchanged()  # also while this pass read it
    if key_field is not None:
        scan.priority = concat(seen.prio_parts, np.float64)
        kinds = concat(seen.kind_parts, np.int8)
        check_key_kinds([first_kinds(kinds, scan.source, scan.record, files)], key_field)
    return scan


def first_kinds(
    kinds: np.ndarray, source: np.ndarray, record: np.ndarray, files: list[InputFile]
) -> list[list[Any]]:
    """``[kind, file, record]`` of the first document of each kind of keep value among
    ``kinds`` (int8, in input order), in input order."""
    kind, at = np.unique(kinds, return_index=True)
    rows = sorted(zip(at.tolist(), kind.tolist(), strict=True))
    return [[k, files[int(source[i])].path, int(record[i])] for i, k in rows]


def check_key_kinds(firsts: list[list[list[Any]]], key_field: str) -> None:
    """Refuse a keep field that holds numbers in some records and dates in others, naming the
    first record of the second kind and the first of the first; ``firsts``: the
    :func:`first_kinds` of each part of the input, in input order."""
    from neardup.io.readers import KEY_KINDS

    flat = [f for part in firsts for f in part]
    other = [f for f in flat if f[0] != flat[0][0]] if flat else []
    if other:
        (k0, src0, rec0), (k, src, rec) = flat[0], other[0]
        raise InputError(
            src, rec, f"--keep field {key_field!r} is {KEY_KINDS[k]} here but "
            f"{KEY_KINDS[k0]} at {src0}:{rec0}; it must hold numbers only or dates only",
        )  # fmt: skip


def _scan_of(files: list[InputFile], seen: Any, skipped: int, stamps: list[tuple]) -> Scan:
    """The first pass's :class:`Scan` from what ``seen`` gathered, batch by batch."""
    return Scan(
        files=files,
        ids=seen.ids,
        source=concat(seen.src_parts, np.int32),
        record=concat(seen.rec_parts, np.int64),
        lengths=concat(seen.len_parts, np.int64),
        fingerprints=concat(seen.fp_parts, np.uint64),
        skipped=skipped,
        bytes_in=sum(input_size(f.path) for f in files),
        stamps=stamps,
    )


def _kept_keys(
    offsets: np.ndarray, keys: np.ndarray, keep: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """The shingle keys (CSR ``offsets``, ``keys``) of the documents where ``keep`` is True."""
    if keep.all():
        return offsets, keys
    sizes = np.diff(offsets)[keep]
    keys = keys[np.repeat(keep, np.diff(offsets))]
    offsets = np.zeros(len(sizes) + 1, dtype=np.int64)
    np.cumsum(sizes, out=offsets[1:])
    return offsets, keys


class SeenDocuments:
    """The documents kept so far, and their ids, to refuse a repeated one: by id hash without
    the GIL when the block kernel read them (the few hash matches compared in Python), else
    with a dict of the ids, as Python compares them (no kernel to compile for small inputs)."""

    def __init__(
        self, files: list[InputFile], check_ids: bool = True, hashes: bool = False
    ) -> None:
        self.files = files
        self.check_ids = check_ids  #: False: repeated ids are another stage's to find
        self.ids: list[Any] = []
        self.src_parts: list[np.ndarray] = []
        self.rec_parts: list[np.ndarray] = []
        self.len_parts: list[np.ndarray] = []
        self.fp_parts: list[np.ndarray] = []
        self.prio_parts: list[np.ndarray] = []  #: keep-field values (with a keep field)
        self.kind_parts: list[np.ndarray] = []
        self.hash_parts: list[np.ndarray] = []  #: id hashes (:func:`hash_ids`), with ``hashes``
        self.hashes = hashes
        self._starts: list[int] = []  # first document of each part
        self._first_at: dict[Any, tuple[int, int]] | None = None  # id key -> (file, record)
        self._table: IdTable | None = None
        self._rows = 0  # documents looked up so far (kept or refused)
        self._refused: list[int] = []  # their rows, ascending
        self._collided: dict[Any, tuple[int, int]] = {}  # id key -> (file, record)

    def _where(self, doc: int) -> tuple[int, int]:
        p = bisect.bisect_right(self._starts, doc) - 1
        j = doc - self._starts[p]
        return int(self.src_parts[p][j]), int(self.rec_parts[p][j])

    def add(self, batch: Batch, bad: OnBad) -> np.ndarray:
        """Keep the batch's documents whose ids are new; returns which. Its bad records and
        its repeated ids go to ``bad`` in input order."""
        d = batch.docs
        n = len(batch)
        if self._table is None and self._first_at is None:  # the first batch picks the way
            if d.id_hashes is None:
                self._first_at = {}
            else:
                self._table = IdTable()
        if not self.check_ids:
            repeats: list = []
        elif self._first_at is not None:
            repeats = self._by_dict(batch)
        else:
            repeats = self._by_hash(batch)
        keep = np.ones(n, dtype=bool)
        m = 0
        for at, err in [*zip(d.bad_at, d.bad, strict=True), (n, None)]:
            while m < len(repeats) and repeats[m][0] < at:
                j, (first, line) = repeats[m]
                keep[j] = False
                bad(
                    InputError(
                        self.files[int(batch.file[j])].path,
                        int(d.numbers[j]),
                        f"duplicate id {d.ids[j]!r} (first at {self.files[first].path}:{line}); "
                        "ids must be unique: choose another --id-field or use --skip-bad",
                    )
                )
                m += 1
            if err is not None:
                bad(err)
        self._rows += n
        every = bool(keep.all())
        kept = slice(None) if every else keep
        self._starts.append(len(self.ids))
        self.ids.extend(d.ids if every else itertools.compress(d.ids, keep))
        self.src_parts.append(batch.file[kept])
        self.rec_parts.append(d.numbers[kept])
        self.len_parts.append(d.lengths[kept])
        self.fp_parts.append(batch.fingerprints[kept])
        if self.hashes:  # the block kernel's, else hashed here
            h = d.id_hashes if d.id_hashes is not None else hash_ids(d.ids)
            self.hash_parts.append(h[kept])
        if d.priority is not None and d.priority_kind is not None:
            self.prio_parts.append(d.priority[kept])
            self.kind_parts.append(d.priority_kind[kept])
        return keep

    def _by_dict(self, batch: Batch) -> list[tuple[int, tuple[int, int]]]:
        """``(j, (file, record) of the first)`` of the batch's documents whose id came before."""
        assert self._first_at is not None
        d = batch.docs
        first_at = self._first_at
        repeats = []
        for j, (v, k, line) in enumerate(zip(d.ids, batch.file.tolist(), d.numbers.tolist())):
            where = first_at.setdefault(id_key(v), (k, line))
            if where[1] != line or where[0] != k:
                repeats.append((j, where))
        return repeats

    def _by_hash(self, batch: Batch) -> list[tuple[int, tuple[int, int]]]:
        """:meth:`_by_dict` by the ids' hashes in bulk (the matches compared exactly)."""
        assert self._table is not None
        d = batch.docs
        hashes = d.id_hashes if d.id_hashes is not None else hash_ids(d.ids)
        found = self._table.first(hashes, self._rows)
        repeats = []
        for j in np.flatnonzero(found >= 0).tolist():
            first = self._first(batch, j, int(found[j]))
            if first is not None:
                repeats.append((j, first))
                self._refused.append(self._rows + j)  # rows only grow: still ascending
        return repeats

    def _first(self, batch: Batch, j: int, row: int) -> tuple[int, int] | None:
        """(file, record) of the earlier document with the id of document ``j`` of ``batch``,
        whose id hash was first seen at ``row``; None when the ids differ (and none other)."""
        d = batch.docs
        if row >= self._rows:  # in this batch
            k = row - self._rows
            first_id, where = d.ids[k], (int(batch.file[k]), int(d.numbers[k]))
        else:
            doc = row - bisect.bisect_left(self._refused, row)
            first_id, where = self.ids[doc], self._where(doc)
        key = id_key(d.ids[j])
        if id_key(first_id) == key:
            return where
        # a hash collision: ids whose hash matched another's are compared exactly here
        if key in self._collided:
            return self._collided[key]
        self._collided[key] = (int(batch.file[j]), int(d.numbers[j]))
        return None


def _batch_fingerprinter(fper: Any, threads: int | None, spool: Any) -> Callable[[Any], Any]:
    """``texts -> uint64 fingerprints`` (a list of ``str``, or ``(data, offsets)`` of UTF-8 read
    in place, for a fingerprinter with ``features_utf8``); with a spool, also append the texts' shingle keys to it (batches must then be
    fingerprinted one at a time, in order)."""
    if spool is not None and not hasattr(fper, "features_many"):
        raise TypeError(
            f"{type(fper).__name__} does not emit shingle keys (features_many), which "
            "verification needs; use a neardup.Fingerprinter or verify=False (--no-verify)"
        )

    def run(texts: Any) -> np.ndarray:
        if isinstance(texts, tuple):
            f = fper.features_utf8(*texts, threads, keys=spool is not None, validate=False)
        elif spool is not None:
            f = fper.features_many(texts, threads)
        else:
            return fper.fingerprint_many(texts, threads)
        if spool is not None:
            spool.append(f.offsets, f.keys)
        return f.fingerprints

    return run


def fingerprint_texts(
    texts: Iterable[Any], fper: Any, threads: int | None, on_bad: OnBad | None, spool: Any = None
) -> tuple[np.ndarray, np.ndarray, np.ndarray, int]:
    """Fingerprints, lengths and positions of the valid texts, in batches (with ``spool``, their
    shingle keys are appended to it too). Texts in Arrow arrays (:class:`ArrowTexts`) are read
    as stored where a chunk holds only valid strings, else value by value."""
    fingerprint_batch = _batch_fingerprinter(fper, threads, spool)
    fps: list[np.ndarray] = []
    lens: list[np.ndarray] = []
    keep_pos: list[np.ndarray] = []
    batch: list[str] = []
    where: list[int] = []
    skipped = 0
    i = 0

    def flush() -> None:
        nonlocal batch, where
        if batch:
            fps.append(fingerprint_batch(batch))
            lens.append(np.fromiter(map(len, batch), dtype=np.int64, count=len(batch)))
            keep_pos.append(np.array(where, dtype=np.int64))
            batch, where = [], []

    arrow = isinstance(texts, ArrowTexts)
    as_stored = arrow and hasattr(fper, "features_utf8")  # else each value as a str
    for chunk in texts.chunks if arrow else [texts]:
        utf8 = arrow_utf8(chunk) if as_stored else None
        if utf8 is not None:
            flush()
            data, offsets, lengths = utf8
            fps.append(fingerprint_batch((data, offsets)))
            lens.append(lengths)
            keep_pos.append(np.arange(i, i + len(lengths), dtype=np.int64))
            i += len(lengths)
            continue
        for t in chunk.to_pylist() if arrow else chunk:
            if not isinstance(t, str):
                what = "missing (None)" if t is None else f"a {type(t).__name__}"
                err = InputError("<input>", i, f"text is {what}, expected a string")
                if on_bad is None:
                    raise ValueError(f"document {i}: text is {what}, expected a string")
                skipped += 1
                on_bad(err)
            else:
                batch.append(t)
                where.append(i)
                if len(batch) >= config.BATCH_DOCS:
                    flush()
            i += 1
    flush()

    return concat(fps, np.uint64), concat(lens, np.int64), concat(keep_pos, np.int64), skipped


def unique_ids(
    ids: list[Any], pos: np.ndarray, fps: np.ndarray, lens: np.ndarray, on_bad: OnBad | None
) -> tuple[list[Any], np.ndarray, np.ndarray, np.ndarray, int]:
    first: dict[Any, int] = {}
    keep = np.ones(len(ids), dtype=bool)
    for k, v in enumerate(ids):
        j = first.setdefault(id_key(v), k)
        if j != k:
            if on_bad is None:
                raise ValueError(
                    f"document {int(pos[k])}: duplicate id {v!r} (first at document "
                    f"{int(pos[j])}); ids must be unique"
                )
            on_bad(InputError("<input>", int(pos[k]), f"duplicate id {v!r}"))
            keep[k] = False
    if keep.all():
        return ids, fps, lens, pos, 0
    return (
        [v for v, k in zip(ids, keep.tolist(), strict=True) if k],
        fps[keep],
        lens[keep],
        pos[keep],
        int(np.count_nonzero(~keep)),
    )

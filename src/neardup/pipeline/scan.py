"""Pass 1 of dedup: read every document once and keep only ids, locations, lengths and
fingerprints (uint64, bit 63 most significant); texts are never all held at once."""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Iterable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

import numpy as np

from neardup import config
from neardup.errors import InputError
from neardup.io.files import input_size, open_parquet
from neardup.io.readers import read_jsonl, read_lines, read_parquet, read_text_file
from neardup.io.sources import InputFile, expand_inputs

__all__ = ["Scan", "fingerprint_texts", "scan_files", "unique_ids"]

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


def _id_key(v: Any) -> Any:
    try:
        hash(v)
    except TypeError:
        return ("json", json.dumps(v, sort_keys=True, default=str))
    return (type(v) is str, v)


def _records(f: InputFile, text_field: str, id_field: str | None, on_bad: OnBad | None):
    if f.kind == "text":
        return read_text_file(f.path, on_bad)
    if f.kind == "lines":
        return read_lines(f.path, on_bad)
    if f.kind == "jsonl":
        return read_jsonl(f.path, text_field, id_field, on_bad)
    return read_parquet(f.path, text_field, id_field, on_bad)


def _check_parquet_schemas(files: list[InputFile]) -> None:
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
) -> Scan:
    """First pass: fingerprint every document of ``inputs``, keeping only ids and arrays.

    Documents are read in batches of :data:`neardup.config.BATCH_DOCS`; one batch is fingerprinted (on all
    cores) while the next is read. Duplicate ids raise :class:`InputError` naming both records,
    or are passed to ``on_bad`` and skipped.

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
        Fingerprinting threads.
    on_bad : callable, optional
        Called with each bad record's :class:`InputError` instead of raising; the record is
        skipped and counted in ``Scan.skipped``.
    progress : callable, optional
        Called with the number of documents read so far, every
        :data:`neardup.config.PROGRESS_EVERY` documents.
    files : list of InputFile, optional
        ``inputs`` already expanded by :func:`expand_inputs` (then ``inputs`` is not read).
    spool : neardup.pipeline.spool.ShingleSpool, optional
        Also append every document's shingle keys here, in input order (the fingerprinter's
        ``features_many``, same pass).
    """
    from neardup.fingerprints import Fingerprinter

    fper = fingerprinter if fingerprinter is not None else Fingerprinter("default")
    if files is None:
        files = expand_inputs(inputs, fmt)
    _check_parquet_schemas(files)
    skipped = 0

    def bad(err: InputError) -> None:
        nonlocal skipped
        if on_bad is None:
            raise err
        skipped += 1
        on_bad(err)

    fingerprint_batch = _batch_fingerprinter(fper, threads, spool)
    ids: list[Any] = []
    first_at: dict[Any, int] = {}
    src_parts: list[np.ndarray] = []
    rec_parts: list[np.ndarray] = []
    len_parts: list[np.ndarray] = []
    fp_parts: list[Future] = []
    texts: list[str] = []
    srcs: list[int] = []
    recs: list[int] = []

    with ThreadPoolExecutor(max_workers=1) as pool:
        pending: Future | None = None

        def flush() -> None:
            nonlocal pending, texts, srcs, recs
            if not texts:
                return
            if pending is not None:
                pending.result()  # at most one batch in flight: bounded memory
            pending = pool.submit(fingerprint_batch, texts)
            fp_parts.append(pending)
            len_parts.append(np.fromiter(map(len, texts), dtype=np.int64, count=len(texts)))
            src_parts.append(np.array(srcs, dtype=np.int32))
            rec_parts.append(np.array(recs, dtype=np.int64))
            texts, srcs, recs = [], [], []
            if progress is not None:
                progress(len(ids))

        for k, f in enumerate(files):
            for rec in _records(f, text_field, id_field, on_bad and bad):
                key = _id_key(rec.id)
                j = first_at.setdefault(key, len(ids))
                if j != len(ids):
                    where = f"{files[_locate(j, src_parts, srcs)].path}:"
                    where += str(_locate(j, rec_parts, recs))
                    bad(
                        InputError(
                            rec.source,
                            rec.number,
                            f"duplicate id {rec.id!r} (first at {where}); ids must be unique: "
                            "choose another --id-field or use --skip-bad",
                        )
                    )
                    continue
                ids.append(rec.id)
                texts.append(rec.text)
                srcs.append(k)
                recs.append(rec.number)
                if len(texts) >= config.BATCH_DOCS:
                    flush()
                elif progress is not None and len(ids) % config.PROGRESS_EVERY == 0:
                    progress(len(ids))
        flush()
        fps = [p.result() for p in fp_parts]

    def cat(parts: list[np.ndarray], dtype: Any) -> np.ndarray:
        return np.concatenate(parts) if parts else np.zeros(0, dtype=dtype)

    return Scan(
        files=files,
        ids=ids,
        source=cat(src_parts, np.int32),
        record=cat(rec_parts, np.int64),
        lengths=cat(len_parts, np.int64),
        fingerprints=cat(fps, np.uint64),
        skipped=skipped,
        bytes_in=sum(input_size(f.path) for f in files),
    )


def _batch_fingerprinter(fper: Any, threads: int | None, spool: Any) -> Callable[[list], Any]:
    """``texts -> uint64 fingerprints``; with a spool, also append the texts' shingle keys to it
    (batches must then be fingerprinted one at a time, in order)."""
    if spool is None:
        return lambda texts: fper.fingerprint_many(texts, threads)
    if not hasattr(fper, "features_many"):
        raise TypeError(
            f"{type(fper).__name__} does not emit shingle keys (features_many), which "
            "verification needs; use a neardup.Fingerprinter or verify=False (--no-verify)"
        )

    def run(texts: list) -> np.ndarray:
        feats = fper.features_many(texts, threads)
        spool.append(feats.offsets, feats.keys)
        return feats.fingerprints

    return run


def _locate(j: int, parts: list[np.ndarray], tail: list[int]) -> int:
    for p in parts:
        if j < len(p):
            return int(p[j])
        j -= len(p)
    return int(tail[j])


def fingerprint_texts(
    texts: Iterable[Any], fper: Any, threads: int | None, on_bad: OnBad | None, spool: Any = None
) -> tuple[np.ndarray, np.ndarray, np.ndarray, int]:
    """Fingerprints, lengths and positions of the valid texts, in batches (with ``spool``, their
    shingle keys are appended to it too)."""
    fingerprint_batch = _batch_fingerprinter(fper, threads, spool)
    fps: list[np.ndarray] = []
    lens: list[np.ndarray] = []
    keep_pos: list[int] = []
    batch: list[str] = []
    skipped = 0
    for i, t in enumerate(texts):
        if not isinstance(t, str):
            what = "missing (None)" if t is None else f"a {type(t).__name__}"
            err = InputError("<input>", i, f"text is {what}, expected a string")
            if on_bad is None:
                raise ValueError(f"document {i}: text is {what}, expected a string")
            skipped += 1
            on_bad(err)
            continue
        batch.append(t)
        keep_pos.append(i)
        if len(batch) >= config.BATCH_DOCS:
            fps.append(fingerprint_batch(batch))
            lens.append(np.fromiter(map(len, batch), dtype=np.int64, count=len(batch)))
            batch = []
    if batch:
        fps.append(fingerprint_batch(batch))
        lens.append(np.fromiter(map(len, batch), dtype=np.int64, count=len(batch)))
    fp = np.concatenate(fps) if fps else np.zeros(0, dtype=np.uint64)
    ln = np.concatenate(lens) if lens else np.zeros(0, dtype=np.int64)
    return fp, ln, np.array(keep_pos, dtype=np.int64), skipped


def unique_ids(
    ids: list[Any], pos: np.ndarray, fps: np.ndarray, lens: np.ndarray, on_bad: OnBad | None
) -> tuple[list[Any], np.ndarray, np.ndarray, np.ndarray, int]:
    first: dict[Any, int] = {}
    keep = np.ones(len(ids), dtype=bool)
    for k, v in enumerate(ids):
        j = first.setdefault(_id_key(v), k)
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

"""What a dedup's scan keeps of each document: only its id, location, length and fingerprint
(uint64, bit 63 most significant), never its text: a scan task's record of its blocks
(:class:`SeenDocuments`), a whole run's (:class:`Scan`, read back from the spills for a
result), and the checks of the inputs and keep values that go with them."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from neardup.errors import InputError
from neardup.io.blocks import hash_ids
from neardup.io.files import open_parquet
from neardup.io.sources import InputFile
from neardup.pipeline.stream import Batch

__all__ = ["Scan", "SeenDocuments", "check_key_kinds", "check_parquet_schemas", "first_kinds"]

OnBad = Callable[[InputError], None]


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
    #: float64 values of the keep field (``keep="max:FIELD"``; else None), one kind
    #: (:func:`check_key_kinds`)
    priority: np.ndarray | None = None


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


class SeenDocuments:
    """What a scan task keeps of the documents of its blocks, in input order: ids, where each
    is (file, record), characters, fingerprints, keep-field values and id hashes
    (:func:`~neardup.io.blocks.hash_ids`: the block kernel's where it read the ids). Repeated
    ids are the ids stage's to find (:func:`neardup.pipeline.stages.repeated_ids`), across
    every shard."""

    def __init__(self) -> None:
        self.ids: list[Any] = []
        self.src_parts: list[np.ndarray] = []
        self.rec_parts: list[np.ndarray] = []
        self.len_parts: list[np.ndarray] = []
        self.fp_parts: list[np.ndarray] = []
        self.prio_parts: list[np.ndarray] = []  #: keep-field values (with a keep field)
        self.kind_parts: list[np.ndarray] = []
        self.hash_parts: list[np.ndarray] = []  #: id hashes
        #: each document's line bytes (:attr:`~neardup.io.blocks.DocBlock.line_bytes`)
        self.nb_parts: list[np.ndarray] = []
        self.nb_missing = False  #: a block of documents came without them

    def add(self, batch: Batch, bad: OnBad) -> None:
        """Keep the batch's documents; its bad records go to ``bad`` in input order."""
        d = batch.docs
        for err in d.bad:
            bad(err)
        self.ids.extend(d.ids)
        self.src_parts.append(batch.file)
        self.rec_parts.append(d.numbers)
        self.len_parts.append(d.lengths)
        self.fp_parts.append(batch.fingerprints)
        self.hash_parts.append(d.id_hashes if d.id_hashes is not None else hash_ids(d.ids))
        if d.line_bytes is not None:
            self.nb_parts.append(d.line_bytes)
        elif len(d):
            self.nb_missing = True
        if d.priority is not None and d.priority_kind is not None:
            self.prio_parts.append(d.priority)
            self.kind_parts.append(d.priority_kind)

"""In-memory input (a list of texts, pandas, pyarrow, a Hugging Face dataset) as rows that a
dedup's shards cut by position, as they cut files by bytes.

:class:`MemoryRows` holds the texts as given (a list of ``str``, or the Arrow arrays of a
table's or a dataset's text column, never copied) and their ids; :meth:`MemoryRows.rows` gives
the rows ``a`` to ``b`` of one shard, small enough to travel to the task that scans them (a
list slice, or Arrow slices that share the buffers), and :func:`row_blocks` turns them into
the :class:`~neardup.io.blocks.DocBlock` s a scan fingerprints: Arrow text read as stored,
other text as ``str``. A document's record number is its position in the input (0-based), its
id the given one or that position; a value that is not a string is a bad record of that
position.
"""

from __future__ import annotations

import bisect
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np

from neardup import config
from neardup.errors import InputError
from neardup.io import _id_kernels as H
from neardup.io.arrow import ArrowTexts, arrow_utf8
from neardup.io.blocks import DocBlock
from neardup.io.sources import texts_and_ids

__all__ = ["MEMORY_SOURCE", "MemoryRows", "Rows", "row_blocks"]

#: The source that records and errors of in-memory input name.
MEMORY_SOURCE = "<input>"


@dataclass(frozen=True)
class Rows:
    """Rows ``first`` to ``first + n`` of in-memory input: their texts (a list, or Arrow
    arrays end to end) and ids (None: their positions)."""

    first: int
    texts: list[Any]
    ids: list[Any] | None
    arrow: bool = False  #: ``texts`` are Arrow arrays

    def __len__(self) -> int:
        return sum(map(len, self.texts)) if self.arrow else len(self.texts)


class MemoryRows:
    """In-memory input as rows (see the module docstring).

    Parameters
    ----------
    data : list, iterable of str, pandas, pyarrow, numpy or Hugging Face data
        As :func:`neardup.dedup` takes it (:func:`~neardup.io.sources.texts_and_ids`); a
        one-shot iterable is read into a list once.
    text_field, id_field : str
        The text column and the id column (ids: positions when there is none).

    Examples
    --------
    >>> m = MemoryRows(["a b", "c d", "e f"], "text", None)
    >>> len(m), m.rows(1, 3).texts
    (3, ['c d', 'e f'])
    """

    def __init__(self, data: Any, text_field: str = "text", id_field: str | None = "id") -> None:
        texts, ids = texts_and_ids(data, text_field, id_field)
        self.arrow = isinstance(texts, ArrowTexts)
        self.texts: list[Any] = list(texts.chunks) if self.arrow else _as_list(texts)
        self.starts = [0]  # the first row of each Arrow array
        for chunk in self.texts if self.arrow else ():
            self.starts.append(self.starts[-1] + len(chunk))
        self.n = self.starts[-1] if self.arrow else len(self.texts)
        self.ids = None if ids is None else list(ids)
        if self.ids is not None and len(self.ids) != self.n:
            raise ValueError(f"{len(self.ids)} ids for {self.n} texts")

    def __len__(self) -> int:
        return self.n

    def text_bytes(self) -> int:
        """About how many bytes the texts hold: Arrow's buffers as they are, a list's from
        the characters of up to 1,000 of its texts spread over it."""
        if self.arrow:
            return int(sum(c.nbytes for c in self.texts))
        step = max(1, self.n // 1000)
        sample = self.texts[::step]
        chars = sum(len(t) for t in sample if isinstance(t, str))
        return chars * self.n // max(1, len(sample))

    def rows(self, a: int, b: int) -> Rows:
        """Rows ``a`` to ``b`` (exclusive)."""
        ids = None if self.ids is None else self.ids[a:b]
        if not self.arrow:
            return Rows(a, self.texts[a:b], ids)
        parts = []
        k = max(0, bisect.bisect_right(self.starts, a) - 1)
        while k < len(self.texts) and self.starts[k] < b:
            lo, hi = max(a, self.starts[k]), min(b, self.starts[k + 1])
            if hi > lo:
                parts.append(self.texts[k].slice(lo - self.starts[k], hi - lo))
            k += 1
        return Rows(a, parts, ids, arrow=True)


def _as_list(texts: Any) -> list[Any]:
    return texts if isinstance(texts, list) else list(texts)


def row_blocks(rows: Rows, size: int = config.BATCH_DOCS) -> Iterator[tuple[int, Any, Any]]:
    """``(first position, texts, ids)`` of ``rows`` in groups of at most ``size`` rows (an
    Arrow array at most), for :func:`row_block` to read on any thread."""
    at = rows.first
    for texts in rows.texts if rows.arrow else [rows.texts]:
        for lo in range(0, len(texts), size):
            part = texts.slice(lo, size) if rows.arrow else texts[lo : lo + size]
            ids = (
                None
                if rows.ids is None
                else rows.ids[at - rows.first : at - rows.first + len(part)]
            )
            yield at, part, ids
            at += len(part)


def row_block(first: int, texts: Any, ids: list[Any] | None) -> DocBlock:
    """The documents of one group of :func:`row_blocks`: an Arrow array without nulls of
    valid UTF-8 as stored, anything else value by value (a value that is not a string: a bad
    record ``text is ..., expected a string``, and no document)."""
    n = len(texts)
    if not isinstance(texts, list):  # Arrow
        utf8 = arrow_utf8(texts)
        if utf8 is not None:
            data, offsets, lengths = utf8
            return DocBlock(numbers=np.arange(first, first + n, dtype=np.int64),
                            ids=_ids(first, n, ids), id_hashes=_position_hashes(first, n, ids),
                            lengths=lengths, bad=[], bad_at=[], data=data,
                            offsets=offsets)  # fmt: skip
        texts = texts.to_pylist()
    good = [j for j, t in enumerate(texts) if isinstance(t, str)]
    bad, bad_at = [], []
    if len(good) < n:
        at = 0
        for j, t in enumerate(texts):
            if at < len(good) and good[at] == j:
                at += 1
                continue
            what = "missing (None)" if t is None else f"a {type(t).__name__}"
            bad.append(InputError(MEMORY_SOURCE, first + j, f"text is {what}, expected a string"))
            bad_at.append(at)
        texts = [texts[j] for j in good]
        ids = None if ids is None else [ids[j] for j in good]
    pos = np.asarray(good, dtype=np.int64) + first
    return DocBlock(numbers=pos, ids=pos.tolist() if ids is None else ids,
                    id_hashes=H.hash_ints(pos) if ids is None else None,
                    lengths=np.fromiter(map(len, texts), dtype=np.int64, count=len(texts)),
                    bad=bad, bad_at=bad_at, texts=texts)  # fmt: skip


def _ids(first: int, n: int, ids: list[Any] | None) -> list[Any]:
    return list(range(first, first + n)) if ids is None else ids


def _position_hashes(first: int, n: int, ids: list[Any] | None) -> np.ndarray | None:
    """The id hashes of ids that are positions (:func:`~neardup.io.blocks.hash_ids` of ints),
    None for given ids (hashed by the scan)."""
    return H.hash_ints(np.arange(first, first + n, dtype=np.int64)) if ids is None else None

"""The pieces of an index: segments (immutable sorted runs, memory-mapped), ids, table specs.

Fingerprints are uint64, bit 63 the most significant. Ids are int64, or str kept as UTF-8 bytes
plus offsets with a 64-bit hash of each as its sort key.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any, NamedTuple

import numpy as np

from neardup.core.layout import Layout
from neardup.index import _kernels
from neardup.index.codec import load_table
from neardup.index.storage import load_array

_FULL = (1 << 64) - 1


class IndexTableSpec(NamedTuple):
    src: np.ndarray
    mask: np.ndarray
    dst: np.ndarray
    shift: int
    lead: np.uint64
    chk: np.ndarray
    nchk: int
    identity: bool


def table_specs(layout: Layout) -> list[IndexTableSpec]:
    out = []
    for t, table in enumerate(layout.tables):
        segs = table.segments
        src = np.array([s for s, _, _ in segs], dtype=np.uint64)
        mask = np.array([((1 << w) - 1) & _FULL for _, w, _ in segs], dtype=np.uint64)
        dst = np.array([d for _, _, d in segs], dtype=np.uint64)
        chk = np.array([layout.apply_mask(m, t) for m in table.check_masks] or [0], np.uint64)
        out.append(
            IndexTableSpec(
                src,
                mask,
                dst,
                64 - table.prefix_bits,
                np.uint64(layout.apply_mask(table.lead_mask, t)),
                chk,
                len(table.check_masks),
                all(s == d for s, _, d in segs),
            )
        )
    return out


def expand_ranges(lo: np.ndarray, hi: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """For ranges ``[lo[i], hi[i])``: (owner i, position) of every element, in order."""
    cnt = hi - lo
    total = int(cnt.sum())
    owner = np.repeat(np.arange(len(lo), dtype=np.int64), cnt)
    start = np.cumsum(cnt) - cnt
    pos = np.arange(total, dtype=np.int64) - np.repeat(start - lo, cnt)
    return owner, pos


class Ids(NamedTuple):
    """A batch of ids in the index's form: 64-bit keys, plus UTF-8 strings for str ids."""

    kind: str  # "int64" or "str"
    keys: np.ndarray  # int64
    blob: np.ndarray | None
    off: np.ndarray | None
    values: list[Any] | np.ndarray


def convert_ids(ids: Any, n: int | None, kind: str | None) -> Ids:
    if isinstance(ids, (str, bytes)) or not isinstance(ids, (Sequence, np.ndarray, Iterable)):
        raise ValueError(f"ids must be a sequence of ints or strings (got {type(ids).__name__})")
    if not isinstance(ids, (list, tuple, np.ndarray)):
        ids = list(ids)
    if n is not None and len(ids) != n:
        raise ValueError(f"got {n} fingerprints but {len(ids)} ids; give one id per fingerprint")
    arr = ids if isinstance(ids, np.ndarray) else None
    if arr is None:
        if len(ids) == 0:
            arr = np.empty(0, dtype=np.int64 if kind != "str" else object)
        elif all(isinstance(v, str) for v in ids):
            arr = None
        elif all(isinstance(v, (int, np.integer)) and not isinstance(v, bool) for v in ids):
            try:
                arr = np.array(ids, dtype=np.int64)
            except OverflowError:
                raise ValueError("integer ids must fit in int64") from None
        else:
            bad = next(v for v in ids if not isinstance(v, (str, int, np.integer)))
            raise ValueError(
                f"ids must be all ints or all strings (got {type(bad).__name__} {bad!r})"
            )
    if arr is not None and arr.dtype.kind in "iu":
        if arr.dtype.kind == "u" and arr.size and arr.max() > np.iinfo(np.int64).max:
            raise ValueError("integer ids must fit in int64")
        if kind == "str":
            raise ValueError("this index has string ids; got integer ids")
        keys = np.ascontiguousarray(arr, dtype=np.int64)
        return Ids("int64", keys, None, None, keys)
    values = list(arr) if arr is not None else list(ids)
    if not all(isinstance(v, str) for v in values):
        raise ValueError("ids must be all ints or all strings")
    if kind == "int64" and values:
        raise ValueError("this index has integer ids; got string ids")
    enc = [v.encode("utf-8") for v in values]
    off = np.zeros(len(enc) + 1, dtype=np.int64)
    np.cumsum(np.fromiter(map(len, enc), dtype=np.int64, count=len(enc)), out=off[1:])
    blob = np.frombuffer(b"".join(enc), dtype=np.uint8).copy()
    keys = _kernels._hash_strings(blob, off).view(np.int64)
    return Ids("str", keys, blob, off, values)


class Segment:
    """One sorted run, memory-mapped. ``fps`` and ``tables`` are uint64 arrays, or
    :class:`neardup.index.codec.CompressedTable` objects in a segment with ``"codec"``."""

    def __init__(self, directory: str, entry: dict[str, Any], specs: list[IndexTableSpec]) -> None:
        f = entry["files"]
        self.entry = entry
        self.name: str = entry["name"]
        self.fps = load_table(directory, f["fp"])
        self.tables = [
            self.fps if s.identity else load_table(directory, f[f"t{t}"])
            for t, s in enumerate(specs)
        ]
        self.keys = np.asarray(load_array(directory, f["key"]))
        self.kord = np.asarray(load_array(directory, f["kord"]))
        self.blob = np.asarray(load_array(directory, f["sblob"])) if "sblob" in f else None
        self.off = np.asarray(load_array(directory, f["soff"])) if "soff" in f else None
        self.set_deleted(directory, entry.get("deleted"))

    def set_deleted(self, directory: str, entry: dict[str, Any] | None) -> None:
        self.dead = (
            np.asarray(load_array(directory, entry)) if entry else np.empty(0, dtype=np.int64)
        )
        self.n = len(self.fps)
        self.live = self.n - len(self.dead)

    def alive(self, rows: np.ndarray) -> np.ndarray:
        """True for rows not removed."""
        if len(self.dead) == 0:
            return np.ones(len(rows), dtype=bool)
        i = np.searchsorted(self.dead, rows)
        return self.dead[np.minimum(i, len(self.dead) - 1)] != rows

    def live_rows(self) -> np.ndarray:
        keep = np.ones(self.n, dtype=bool)
        keep[self.dead] = False
        return np.flatnonzero(keep)


def concat_strings(
    blobs: list[np.ndarray], offs: list[np.ndarray]
) -> tuple[np.ndarray, np.ndarray]:
    blob = np.concatenate(blobs) if blobs else np.empty(0, np.uint8)
    parts = [np.zeros(1, np.int64)]
    base = 0
    for o in offs:
        parts.append(o[1:] + base)
        base += int(o[-1])
    return blob, np.concatenate(parts)


def segment_files(seg: dict[str, Any]) -> list[dict[str, Any]]:
    out = list(seg["files"].values())
    if seg.get("deleted"):
        out.append(seg["deleted"])
    return out


def show_id(v: Any) -> str:
    return repr(v.item() if isinstance(v, np.generic) else v)

"""The pieces of an index: segments (immutable sorted runs, memory-mapped) and ids.

Fingerprints are uint64, bit 63 the most significant. Ids are int64, or str kept as UTF-8 bytes
plus offsets with a 64-bit hash of each as its sort key.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Sequence
from typing import Any, NamedTuple

import numpy as np

from neardup.core.layout import TableSpec
from neardup.errors import IdError
from neardup.index import _kernels
from neardup.index.codec import load_table
from neardup.index.storage import CorruptIndexError, load_array


def expand_ranges(lo: np.ndarray, hi: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """For ranges ``[lo[i], hi[i])``: (owner i, position) of every element, in order (a range
    with ``hi < lo``, from a damaged file's unsorted values, is empty)."""
    cnt = np.maximum(hi - lo, 0)
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


def _is_int_type(t: type) -> bool:
    return issubclass(t, (int, np.integer)) and not issubclass(t, (bool, np.bool_))


def _id_kind(v: Any) -> str:
    if isinstance(v, str):
        return "str"
    if _is_int_type(type(v)):
        return "int"
    return type(v).__name__


def _first_repeat(keys: np.ndarray) -> tuple[int, int] | None:
    """Positions (first, second) of the earliest repeated value of ``keys``, or None."""
    if len(keys) < 2:
        return None
    order = np.argsort(keys, kind="stable")
    s = keys[order]
    dup = np.flatnonzero(s[1:] == s[:-1])
    if len(dup) == 0:
        return None
    second = order[dup + 1]
    j = int(np.argmin(second))
    return int(order[dup[j]]), int(second[j])


def convert_ids(ids: Any, n: int | None, kind: str | None, *, unique: bool = False) -> Ids:
    """Ids in the index's form, checked before anything is written.

    Parameters
    ----------
    ids : sequence or 1-D array of int or str
        All integers (int64 range) or all strings (valid Unicode); bools, floats, bytes and
        nested values are refused.
    n : int, optional
        Number of fingerprints the ids go with.
    kind : {"int64", "str", None}
        The index's id kind (None: not fixed yet).
    unique : bool
        Refuse repeated ids.

    Raises
    ------
    IdError
        Naming the first bad id and its position (``IdError.position``).
    """
    if isinstance(ids, (str, bytes, bytearray, memoryview, dict, set, frozenset)) or not (
        isinstance(ids, (Sequence, np.ndarray, Iterable))
    ):
        raise IdError(
            f"ids must be a sequence of ints or strings (got {type(ids).__name__}); "
            "pass a list or a 1-D array"
        )
    arr: np.ndarray | None = None
    values: list[Any] | None = None
    if isinstance(ids, np.ndarray):
        if ids.ndim != 1:
            raise IdError(f"ids must be one-dimensional (got an array of shape {ids.shape})")
        if ids.dtype.kind in "iu":
            arr = ids
        elif ids.dtype.kind in "UO":
            values = ids.tolist()
        else:
            raise IdError(f"ids must be integers or strings (got an array of dtype {ids.dtype})")
    else:
        values = list(ids)
    count = len(arr) if arr is not None else len(values)  # type: ignore[arg-type]
    if n is not None and count != n:
        raise IdError(f"got {n} fingerprints but {count} ids; give one id per fingerprint")
    if values is not None:
        types = set(map(type, values))
        if not values:
            arr = np.empty(0, dtype=np.int64)
            if kind == "str":
                values, arr = [], None
        elif all(issubclass(t, str) for t in types):
            pass
        elif all(_is_int_type(t) for t in types):
            try:
                arr = np.array(values, dtype=np.int64)
            except OverflowError:
                k = next(i for i, v in enumerate(values) if not -(2**63) <= int(v) < 2**63)
                raise IdError(f"id {values[k]} does not fit in int64", k) from None
            values = None
        else:
            raise _kinds_error(values)
    if arr is not None:
        return _int_ids(arr, kind, unique)
    assert values is not None
    return _str_ids(values, kind, unique)


def _kinds_error(values: list[Any]) -> IdError:
    """The error for ids that are neither all integers nor all strings."""
    first = _id_kind(values[0])
    k = next((i for i, v in enumerate(values) if _id_kind(v) not in ("str", "int")), None)
    if k is None:
        k = next(i for i, v in enumerate(values) if _id_kind(v) != first)
        return IdError(
            f"ids must be all integers or all strings: id {values[k]!r} is a "
            f"{_id_kind(values[k])}, the first id {values[0]!r} a {first}",
            k,
            0,
        )
    what = f"{type(values[k]).__name__} {values[k]!r}"
    return IdError(f"id is {what}; ids must be integers or strings", k)


def _int_ids(arr: np.ndarray, kind: str | None, unique: bool) -> Ids:
    """Integer ids (an int or uint array) as int64 keys."""
    if arr.dtype.kind == "u" and arr.size and arr.max() > np.iinfo(np.int64).max:
        k = int(np.argmax(arr > np.iinfo(np.int64).max))
        raise IdError(f"id {arr[k]} does not fit in int64", k)
    if kind == "str" and arr.size:
        raise IdError("this index has string ids; got integer ids", 0)
    keys = np.ascontiguousarray(arr, dtype=np.int64)
    ascending = len(keys) < 2 or bool(np.all(keys[1:] > keys[:-1]))
    rep = _first_repeat(keys) if unique and not ascending else None
    if rep is not None:
        raise IdError(f"id {int(keys[rep[1]])} repeats; ids must be unique", rep[1], rep[0])
    return Ids("int64", keys, None, None, keys)


def _str_ids(values: list[Any], kind: str | None, unique: bool) -> Ids:
    """String ids as UTF-8 bytes, offsets and their 64-bit hashes as keys."""
    if kind == "int64" and values:
        raise IdError("this index has integer ids; got string ids", 0)
    enc = []
    for k, v in enumerate(values):
        try:
            enc.append(v.encode("utf-8"))
        except UnicodeEncodeError:
            raise IdError(f"id {v!r} is not valid Unicode", k) from None
    if unique and len(set(values)) != len(values):
        first_at: dict[str, int] = {}
        for k, v in enumerate(values):
            j = first_at.setdefault(v, k)
            if j != k:
                raise IdError(f"id {v!r} repeats; ids must be unique", k, j)
    off = np.zeros(len(enc) + 1, dtype=np.int64)
    np.cumsum(np.fromiter(map(len, enc), dtype=np.int64, count=len(enc)), out=off[1:])
    blob = np.frombuffer(b"".join(enc), dtype=np.uint8).copy()
    keys = _kernels.string_keys(blob, off).view(np.int64)
    return Ids("str", keys, blob, off, [str(v) for v in values])


def _corrupt(path: str, what: str) -> CorruptIndexError:
    return CorruptIndexError(
        f"{path}: {what}; the file is corrupt: restore the index from a backup or rebuild it"
    )


class Segment:
    """One sorted run, memory-mapped. ``fps`` and ``tables`` are uint64 arrays, or
    :class:`neardup.index.codec.CompressedTable` objects in a segment with ``"codec"``. In an
    index with sketches, ``sketch`` (uint64, rows x K) and ``ssize`` (uint32) hold each row's
    MinHash sketch and shingle count (else both are None).

    Loading checks what the kernels rely on to stay inside the arrays: the key order is a
    permutation of the rows, string offsets start at 0, never decrease and end at the blob's
    size, tombstones are increasing rows. A damaged file is a :class:`CorruptIndexError` here,
    never a crash later.
    """

    def __init__(self, directory: str, entry: dict[str, Any], spec: TableSpec) -> None:
        f = entry["files"]
        self.entry = entry
        self.name: str = entry["name"]
        missing = [
            f"t{t}"
            for t, same in enumerate(spec.identity.tolist())
            if not same and f"t{t}" not in f
        ]
        if missing:
            raise CorruptIndexError(
                f"{directory}: segment {self.name} has no table file {missing[0]}; the "
                "manifest is damaged, restore the index"
            )
        self.fps = load_table(directory, f["fp"])
        # an identity table's keys are the sorted fingerprints themselves
        self.tables = [
            self.fps if same else load_table(directory, f[f"t{t}"])
            for t, same in enumerate(spec.identity.tolist())
        ]
        self.keys = np.asarray(load_array(directory, f["key"]))
        self.kord = np.asarray(load_array(directory, f["kord"]))
        bad = _kernels.first_not_permutation(self.kord)
        if bad >= 0:
            raise _corrupt(
                os.path.join(directory, f["kord"]["name"]),
                f"position {bad} holds {int(self.kord[bad])}, not a permutation of "
                f"{len(self.kord)} rows",
            )
        self.sketch = np.asarray(load_array(directory, f["sketch"])) if "sketch" in f else None
        self.ssize = np.asarray(load_array(directory, f["ssize"])) if "ssize" in f else None
        self.blob = np.asarray(load_array(directory, f["sblob"])) if "sblob" in f else None
        self.off = np.asarray(load_array(directory, f["soff"])) if "soff" in f else None
        if self.off is not None:
            assert self.blob is not None
            bad = _kernels.first_bad_offset(self.off, len(self.blob))
            if bad >= 0:
                raise _corrupt(
                    os.path.join(directory, f["soff"]["name"]),
                    f"string offset {bad} is {int(self.off[bad])}, not within 0..{len(self.blob)}"
                    " and increasing",
                )
        self.set_deleted(directory, entry.get("deleted"))

    def set_deleted(self, directory: str, entry: dict[str, Any] | None) -> None:
        dead = np.asarray(load_array(directory, entry)) if entry else np.empty(0, dtype=np.int64)
        if len(dead) and (
            dead[0] < 0 or dead[-1] >= len(self.fps) or np.any(dead[1:] <= dead[:-1])
        ):
            assert entry is not None
            raise _corrupt(
                os.path.join(directory, entry["name"]),
                f"tombstones are not increasing rows below {len(self.fps)}",
            )
        self.dead = dead
        self.n = len(self.fps)
        self.live = self.n - len(self.dead)

    def alive(self, rows: np.ndarray) -> np.ndarray:
        """True for rows not removed."""
        if len(self.dead) == 0:
            return np.ones(len(rows), dtype=bool)
        i = np.searchsorted(self.dead, rows)
        return self.dead[np.minimum(i, len(self.dead) - 1)] != rows

    def live_rows_by_key(self) -> np.ndarray:
        """The live rows in the order of their id keys (int64)."""
        rows = np.asarray(self.kord, dtype=np.int64)
        return rows[self.alive(rows)] if len(self.dead) else rows

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
    """An id as messages show it: its repr, cut after 60 characters (a message never holds a
    caller's value without bound)."""
    r = repr(v.item() if isinstance(v, np.generic) else v)
    return r if len(r) <= 64 else f"{r[:60]}...{r[0]} ({len(r) - 2:,} characters)"

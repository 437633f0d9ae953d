"""A staged dedup's tasks' files read and written (:mod:`neardup.pipeline.layout` says where
each lives): arrays as ``.npy`` files (a whole array memory-mapped, a slice read), records as
JSON lines, a shard's ids, its shingle sets, and the slices of every task of a stage that one
task of the next stage reads. Positions are global: a document's shard offset plus its place in
the shard (the prefix stage's entries hold the place alone, int32, and their reader adds the
offset)."""

from __future__ import annotations

import json
import math
import os
import pickle
from collections.abc import Iterable, Iterator
from typing import Any

import numpy as np

from neardup.core.similarity import ShingleSets, subset_sets
from neardup.errors import reading_back
from neardup.index.storage import read_npy_header
from neardup.pipeline import layout, store
from neardup.pipeline.plan import DedupPlan
from neardup.pipeline.read_cache import local_file
from neardup.pipeline.stream import concat

__all__ = [
    "all_sets",
    "by_shard",
    "gather",
    "gather_array",
    "gather_sets",
    "gather_spans",
    "inbox",
    "keep_values",
    "key_stage",
    "load",
    "load_ids",
    "read_rows",
    "read_records",
    "save",
    "save_records",
    "shard_sets",
    "slices",
    "subset_sets",
]


def save(out: str, **arrays: np.ndarray) -> int:
    """Write each array as ``out/NAME.npy``; the bytes written."""
    return sum(store.save_array(os.path.join(out, f"{name}.npy"), a) for name, a in arrays.items())


def load(work: str, stage: str, task: str | int, name: str) -> np.ndarray:
    """Array ``name`` written by task ``task`` of ``stage`` (memory-mapped)."""
    return store.load_array(layout.path(work, stage, task, name))


#: Each array file's header (shape, dtype, data offset) by the file's device, inode, change
#: time and size: a task of a stage with k tasks before it reads k files' slices, and every
#: task of the next stage reads the same files, so in one process each header is parsed once
#: (numpy parses it with ``ast``: about 70 of the 260 µs that mapping a small file took).
_HEADERS: dict[tuple[int, ...], tuple[tuple[int, ...], np.dtype, int]] = {}
_MOST_HEADERS = 1 << 16


def read_rows(work: str, stage: str, task: str | int, name: str, lo: int = 0,
              hi: int | None = None, into: np.ndarray | None = None) -> np.ndarray:  # fmt: skip
    """Rows ``lo`` to ``hi`` (default: the last) of array ``name`` written by task ``task``
    of ``stage``, read with one open and one read (not mapped: a slice of a file read once
    costs less read than mapped); with ``into`` (``hi - lo`` rows, contiguous), read straight
    into it where the dtypes match, else converted into it, and ``into`` returned."""
    path = layout.path(work, stage, task, name)
    if store.in_memory(path):
        return _rows_of(store.load_array(path), lo, hi, into)
    with reading_back(path), open(local_file(path), "rb") as f:
        shape, dtype, offset = _header(f)
        n = shape[0] if shape else 1
        hi = n if hi is None else hi
        if not 0 <= lo <= hi <= n:
            raise ValueError(f"rows {lo} to {hi} of an array of {n}")
        direct = into is not None and into.dtype == dtype and into.flags.c_contiguous
        out = into if direct else np.empty((hi - lo, *shape[1:]), dtype=dtype)
        if out.shape != (hi - lo, *shape[1:]):
            raise ValueError(f"rows of shape {shape[1:]} read into an array of {out.shape}")
        f.seek(offset + lo * dtype.itemsize * math.prod(shape[1:]))
        got = f.readinto(memoryview(out).cast("B")) if out.nbytes else 0
        if got != out.nbytes:
            raise ValueError(f"{got} bytes where {out.nbytes} were due: the file is cut short")
    if into is not None and not direct:
        into[...] = out
        return into
    return out if shape else out.reshape(())


def _rows_of(a: np.ndarray, lo: int, hi: int | None, into: np.ndarray | None) -> np.ndarray:
    """:func:`read_rows` of an array in memory."""
    hi = len(a) if hi is None else hi
    if not 0 <= lo <= hi <= len(a):
        raise ValueError(f"rows {lo} to {hi} of an array of {len(a)}")
    if into is None:
        return np.array(a[lo:hi])
    into[...] = a[lo:hi]
    return into


def _header(f: Any) -> tuple[tuple[int, ...], np.dtype, int]:
    """The header of the ``.npy`` file open as ``f`` (:data:`_HEADERS`), ``f`` at its start."""
    st = os.fstat(f.fileno())
    key = (st.st_dev, st.st_ino, st.st_ctime_ns, st.st_mtime_ns, st.st_size)
    got = _HEADERS.get(key)
    if got is None:
        shape, fortran, dtype, offset = read_npy_header(f)
        if fortran and len(shape) > 1:
            raise ValueError("an array in Fortran order, which neardup does not write")
        got = (tuple(shape), dtype, offset)
        if len(_HEADERS) >= _MOST_HEADERS:
            _HEADERS.clear()
        _HEADERS[key] = got
    return got


def slices(work: str, stage: str, tasks: Iterable[str | int], p: int,
           cut: str = "c") -> Iterator[tuple[str | int, int, int]]:  # fmt: skip
    """``(task, lo, hi)`` of each task of ``stage`` whose slice ``p`` (a partition, group or
    shard), by its array of cuts ``cut``, holds anything: the reader's share of every writer."""
    for t in tasks:
        c = read_rows(work, stage, t, cut, p, p + 2)
        lo, hi = int(c[0]), int(c[1])
        if hi > lo:
            yield t, lo, hi


def gather(work: str, stage: str, tasks: Iterable[str | int], p: int,
           columns: dict[str, Any], cut: str = "c") -> dict[str, np.ndarray]:  # fmt: skip
    """Slice ``p`` (by the cuts ``cut``, :func:`slices`) of the arrays ``columns`` (name: dtype)
    of every task of ``stage``, end to end, each column one array filled in place. One task's
    file is open at a time, and only while its slice is read (a stage of a near-copy family
    can have tens of thousands of tasks)."""
    return gather_spans(work, stage, list(slices(work, stage, tasks, p, cut)), columns)


def gather_spans(work: str, stage: str, spans: list[tuple[str | int, int, int]],
                 columns: dict[str, Any]) -> dict[str, np.ndarray]:  # fmt: skip
    """:func:`gather` over ``spans`` (``(task, lo, hi)``, as :func:`slices` yields them), each
    read with :func:`read_rows`."""
    total = sum(hi - lo for _, lo, hi in spans)
    out = {}
    for name, dtype in columns.items():
        whole: np.ndarray | None = None
        at = 0
        for t, lo, hi in spans:
            if whole is None:  # the first slice's header gives the rows' shape
                src = read_rows(work, stage, t, name, lo, hi)
                whole = np.empty((total, *src.shape[1:]), dtype=dtype)
                whole[: hi - lo] = src
            else:
                read_rows(work, stage, t, name, lo, hi, into=whole[at : at + hi - lo])
            at += hi - lo
        out[name] = whole if whole is not None else np.zeros(0, dtype=dtype)
    return out


def inbox(work: str, stage: str, tasks: list[str], p: int, name: str = "e",
          cut: str = "c") -> np.ndarray:  # fmt: skip
    """Partition (or group) ``p``'s slice of edges ``name`` of every task of ``stage``, end to
    end, shape (k, 2)."""
    return gather(work, stage, tasks, p, {name: np.int64}, cut)[name].reshape(-1, 2)


def load_ids(work: str, shard: int) -> list[Any]:
    """The ids of shard ``shard``'s documents, in input order."""
    path = layout.path(work, "scan", shard, "ids.pkl")
    with reading_back(path), store.open_bytes(path) as f:
        return pickle.load(f)


def save_records(out: str, name: str, records: list[list[Any]]) -> int:
    """Bad records ``[source, line, message]`` as JSON lines ``name.jsonl``, with ``name.npy``
    the byte offset of each line and of the end; returns the bytes written."""
    at = [0]
    with store.create(os.path.join(out, f"{name}.jsonl")) as f:
        for rec in records:
            f.write(json.dumps(rec, ensure_ascii=False).encode("utf-8") + b"\n")
            at.append(f.tell())
    return at[-1] + save(out, **{name: np.asarray(at, dtype=np.int64)})


def read_records(work: str, stage: str, task: str | int, name: str, lo: int = 0,
                 hi: int | None = None) -> list[list[Any]]:  # fmt: skip
    """Records ``lo`` to ``hi`` of :func:`save_records`' ``name`` in a task's results."""
    at = load(work, stage, task, name)
    hi = len(at) - 1 if hi is None else hi
    if hi <= lo:
        return []
    path = layout.path(work, stage, task, f"{name}.jsonl")
    with reading_back(path), store.open_bytes(path) as f:
        f.seek(int(at[lo]))
        return [json.loads(line) for line in f.read(int(at[hi] - at[lo])).splitlines()]


# ------------------------------------------------------------------------------ candidates
def key_stage(plan: DedupPlan) -> str:
    """The stage whose spills hold the shingle sets that the candidates and the verification
    use: ``"common"`` (the sets without the common shingles) with ``plan.common_shingles``,
    else ``"scan"``."""
    return "scan" if plan.common_shingles is None else "common"


def shard_sets(work: str, s: int, stage: str = "scan") -> ShingleSets:
    """Shard ``s``'s shingle sets as ``stage`` spilled them, the keys memory-mapped."""
    koff = load(work, stage, s, "koff")
    n = int(koff[-1])
    if n == 0:  # an empty file cannot be mapped
        return ShingleSets(koff, np.zeros(0, dtype=np.uint32))
    return ShingleSets(koff, store.raw_array(layout.path(work, stage, s, "keys.u32"), np.uint32, n))


def all_sets(work: str, offsets: np.ndarray, stage: str = "scan") -> ShingleSets:
    """The shingle sets of every document of the run (shards ``offsets``), end to end in
    memory, from the spills of ``stage`` (:func:`key_stage`); the keys read-only, as a
    spool's are (the kernels then take the types that a first run compiled ahead)."""
    sets = _end_to_end([shard_sets(work, s, stage) for s in range(len(offsets) - 1)])
    sets.keys.setflags(write=False)
    return sets


def _end_to_end(parts: list[ShingleSets]) -> ShingleSets:
    """The sets of ``parts`` one after another, in one new pair of arrays."""
    sizes = concat([np.diff(np.asarray(p.offsets)) for p in parts], np.int64)
    out = np.zeros(len(sizes) + 1, dtype=np.int64)
    np.cumsum(sizes, out=out[1:])
    return ShingleSets(out, np.ascontiguousarray(concat([p.keys for p in parts], np.uint32)))


def gather_sets(work: str, offsets: np.ndarray, pos: np.ndarray,
                 stage: str = "scan") -> ShingleSets:  # fmt: skip
    """The shingle sets of the documents at global positions ``pos`` (ascending), from their
    shards' spills (of ``stage``, :func:`key_stage`)."""
    return _end_to_end([subset_sets(shard_sets(work, s, stage), p - offsets[s])
                        for s, p in by_shard(offsets, pos)])  # fmt: skip


def gather_array(work: str, offsets: np.ndarray, pos: np.ndarray, name: str, dtype: Any,
                 stage: str = "scan") -> np.ndarray:  # fmt: skip
    """Array ``name`` of a per-shard stage's tasks (the scan spills) at global positions
    ``pos`` (ascending)."""
    parts = [np.asarray(load(work, stage, s, name))[p - offsets[s]]
             for s, p in by_shard(offsets, pos)]  # fmt: skip
    return concat(parts, dtype)


def by_shard(offsets: np.ndarray, pos: np.ndarray) -> list[tuple[int, np.ndarray]]:
    """``pos`` (global, ascending) cut by shard: ``[(shard, its positions)]``, shards in order,
    each with at least one position."""
    cuts = np.searchsorted(pos, offsets)
    return [(s, pos[cuts[s] : cuts[s + 1]]) for s in range(len(offsets) - 1)
            if cuts[s + 1] > cuts[s]]  # fmt: skip


def keep_values(work: str, plan: DedupPlan, offsets: np.ndarray, pos: np.ndarray) -> Any:
    """The keep order's values of the documents at global positions ``pos`` (ascending):
    characters for ``keep="longest"``, the keep field's values for ``"max:FIELD"``, None for
    ``"first"``."""
    if plan.keep == "first":
        return None
    if plan.key_field is None:
        return gather_array(work, offsets, pos, "len", np.int64)
    return gather_array(work, offsets, pos, "prio", np.float64)

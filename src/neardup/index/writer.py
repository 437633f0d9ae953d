"""How a local index writes: new immutable segment files, the rows a merge gathers, and which
runs an add merges.

Every change of :class:`neardup.index.Index` writes new files with these functions, then
switches the manifest atomically (:mod:`neardup.index.storage`); a crash at any point leaves the
last committed state.
"""

from __future__ import annotations

from concurrent.futures import Future, ThreadPoolExecutor, wait
from typing import Any, NamedTuple

import numpy as np

from neardup.config import default_threads
from neardup.core.bits import as_fingerprints
from neardup.core.layout import Layout
from neardup.core.sketch import Sketches, as_sketches
from neardup.index import _kernels, _sort_kernels
from neardup.index.codec import write_table
from neardup.index.segments import Segment, concat_strings
from neardup.index.storage import io_pool, remove_segment_files, write_array

__all__ = [
    "MAX_SEGMENTS",
    "MERGE_FACTOR",
    "Rows",
    "argsort_values",
    "check_sketches",
    "gather",
    "key_order",
    "merge_range",
    "merge_start",
    "mergeable",
    "merged_table",
    "sort_values",
    "tier",
    "write_segment",
]

#: Most segments (base + delta runs) of a local index: an add merges delta runs beyond it.
MAX_SEGMENTS = 32
#: Runs of a size tier before an add merges them into one run of the next tier (and the size
#: ratio of two tiers).
MERGE_FACTOR = 8
#: Segments with fewer rows write all their files at once (a thread each: their cost is the
#: fsyncs); larger ones sort and write on one thread a core.
PARALLEL_ROWS = 100_000


class Rows(NamedTuple):
    """Entries to write as one segment: fingerprints, int64 id keys, the UTF-8 strings of str
    ids (blob and offsets, else None) and the sketches of an index that keeps them."""

    fps: np.ndarray
    keys: np.ndarray
    blob: Any
    off: Any
    sketches: Sketches | None

    def then(self, other: Rows) -> Rows:
        """These rows followed by ``other``'s."""
        blob, off = (
            concat_strings([self.blob, other.blob], [self.off, other.off])
            if self.blob is not None
            else (None, None)
        )
        sk = None
        if self.sketches is not None and other.sketches is not None:
            sk = Sketches(
                np.concatenate([self.sketches.words, other.sketches.words]),
                np.concatenate([self.sketches.sizes, other.sketches.sizes]),
            )
        return Rows(
            np.concatenate([self.fps, other.fps]),
            np.concatenate([self.keys, other.keys]),
            blob,
            off,
            sk,
        )


def sort_values(vals: np.ndarray) -> np.ndarray:
    """``vals`` (uint64, contiguous, writable) sorted ascending in place; returned."""
    tmp = np.empty_like(vals)
    e = np.empty(0, dtype=np.int64)
    _sort_kernels.radix_sort(vals, e, tmp, e, False)
    return vals


def argsort_values(vals: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``(sorted values, order)``: ``vals`` (uint64) in their stable ascending order, and that
    order (int64); ``vals`` is not changed."""
    v = np.array(vals, dtype=np.uint64, copy=True, order="C")
    order = np.arange(len(v), dtype=np.int64)
    _sort_kernels.radix_sort(v, order, np.empty_like(v), np.empty_like(order), True)
    return v, order


def key_order(keys: np.ndarray, order: np.ndarray) -> np.ndarray:
    """The rows of a segment ordered by id key (stably), for rows ``keys[order]``: when the
    keys come ascending (numbered ids) that is the inverse of ``order``, one pass."""
    n = len(keys)
    dtype = np.uint32 if n < 2**32 else np.int64
    if n < 2 or bool(np.all(keys[1:] > keys[:-1])):
        kord = np.empty(n, dtype=dtype)
        kord[order] = np.arange(n, dtype=dtype)
        return kord
    flipped = keys[order].view(np.uint64) ^ np.uint64(1 << 63)  # int64 order as uint64
    return argsort_values(flipped)[1].astype(dtype)


def _distinct(fps: np.ndarray) -> np.ndarray:
    """The distinct values of sorted ``fps``."""
    return fps[np.concatenate(([True], fps[1:] != fps[:-1]))] if len(fps) else fps


def mergeable(segs: list[Segment]) -> bool:
    """Whether the tables of ``segs`` can be merged rather than sorted again: plain (not
    compressed) and without removed rows (whose values a table still holds)."""
    return all(len(s.dead) == 0 and all(isinstance(t, np.ndarray) for t in s.tables) for s in segs)


def merged_table(runs: list[np.ndarray]) -> np.ndarray:
    """The sorted runs merged, each value once."""
    runs = [np.ascontiguousarray(r, dtype=np.uint64) for r in runs if len(r)]
    addr = np.array([r.ctypes.data for r in runs], dtype=np.int64)
    lens = np.array([len(r) for r in runs], dtype=np.int64)
    out = np.empty(int(lens.sum()), dtype=np.uint64)
    n = _sort_kernels.merge_distinct(addr, lens, out)
    return out[:n]


def write_segment(
    directory: str,
    layout: Layout,
    name: str,
    rows: Rows,
    codec: str | None = None,
    runs: list[Segment] | None = None,
) -> dict[str, Any]:
    """Write ``rows`` as segment ``name`` of the index in ``directory`` (sorted by fingerprint,
    with every permuted table of ``layout``); return its manifest entry.

    Each column is sorted once (a radix sort) and written once; the tables are permuted,
    sorted and written in parallel threads. ``runs``: the rows begin with every row of these
    segments (:func:`mergeable`), whose sorted tables are merged rather than sorted again.
    The files are not fsynced: the commit that names them does
    (:func:`neardup.index.storage.write_manifest`). A write that fails (a full disk) removes
    every file of the segment it wrote before raising."""
    runs = runs or []
    own = sum(s.n for s in runs)

    def table(t: int) -> tuple[str, dict[str, Any]]:
        # the sorted keys, each once (a key is one fingerprint: the permutation is one-to-one)
        v = _distinct(sort_values(layout.apply(rows.fps[own:], t)))
        if runs:
            v = merged_table([s.tables[t] for s in runs] + [v])
        return f"t{t}", write_table(directory, f"{name}.t{t}.npy", v, codec, sync=False)

    def column(item: tuple[str, Any]) -> tuple[str, dict[str, Any]]:
        kind, arr = item
        if kind == "fp":
            return kind, write_table(directory, f"{name}.fp.npy", arr, codec, sync=False)
        return kind, write_array(directory, f"{name}.{kind}.npy", arr, sync=False)

    todo = [t for t in range(layout.n_tables) if not layout.spec.identity[t]]
    # a small segment's cost is its files' fsyncs, which overlap in threads; a large one's is
    # the sorting, one thread a core (the tables sort while this thread sorts and writes the
    # rows)
    small = len(rows.fps) < PARALLEL_ROWS
    ex = io_pool() if small else ThreadPoolExecutor(default_threads())
    pending: list[Future] = []
    try:
        pending += [ex.submit(table, t) for t in todo]
        fps, order = argsort_values(rows.fps)
        columns = _columns(rows, fps, order)
        if small:
            pending += [ex.submit(column, c) for c in columns]
            files = dict(f.result() for f in pending)
        else:  # this thread writes the rows' columns while the tables sort
            files = dict(map(column, columns))
            files.update(f.result() for f in pending)
    except BaseException:  # a full disk, Ctrl-C: none of the segment's files stays
        wait(pending)
        remove_segment_files(directory, name)
        raise
    finally:
        if not small:
            ex.shutdown()
    entry = {"name": name, "rows": len(fps), "files": files, "deleted": None}
    if codec is not None:
        entry["codec"] = codec
    return entry


def _columns(rows: Rows, fps: np.ndarray, order: np.ndarray) -> list[tuple[str, np.ndarray]]:
    """The files of a segment other than its tables, by kind: its rows in fingerprint order
    (``fps``, the fingerprints sorted by ``order``)."""
    columns = [("fp", fps), ("key", rows.keys[order]), ("kord", key_order(rows.keys, order))]
    if rows.sketches is not None:
        sk = rows.sketches
        columns += [("sketch", sk.words[order]), ("ssize", sk.sizes[order])]
    if rows.blob is not None:
        blob, off = _kernels.gather_strings(rows.blob, rows.off, order)
        columns += [("sblob", blob), ("soff", off)]
    return columns


def gather(segs: list[Segment], id_type: str | None, sketch_words: int | None) -> Rows:
    """Live rows of ``segs`` concatenated, older segments first (with their sketches in an
    index that keeps them)."""
    fps, keys, blobs, offs, words, sizes = [], [], [], [], [], []
    for s in segs:
        rows = s.live_rows_by_key()  # ids come ascending: the key order is one pass to write
        fps.append(s.fps[rows])
        keys.append(s.keys[rows])
        if s.sketch is not None:
            words.append(s.sketch[rows])
            sizes.append(s.ssize[rows])
        if s.blob is not None:
            b, o = _kernels.gather_strings(s.blob, s.off, rows)
            blobs.append(b)
            offs.append(o)
    blob = off = None
    if id_type == "str":
        blob, off = concat_strings(blobs, offs)
    sketches = None
    if sketch_words is not None:
        sketches = Sketches(np.concatenate(words), np.concatenate(sizes))
    return Rows(np.concatenate(fps), np.concatenate(keys), blob, off, sketches)


def tier(rows: int, factor: int) -> int:
    """The size tier of a run of ``rows`` live rows: ``floor(log_factor(rows))``."""
    t, size = 0, factor
    while size <= rows:
        t += 1
        size *= factor
    return t


def merge_start(
    segs: list[Segment], new_rows: int, max_segments: int, factor: int = MERGE_FACTOR
) -> int:
    """Position in ``segs`` of the first run an add of ``new_rows`` merges with (``len(segs)``:
    none): the size-tiered policy of log-structured stores.

    Runs are tiered by size (:func:`tier`, a tier ``factor`` times the one below). The new rows
    are merged with the trailing runs of their tier or below once there would be ``factor`` of
    them, and so on up the tiers, the base included; so a row is rewritten about
    ``log_factor(n / add size)`` times, and there are at most ``factor - 1`` runs a tier.
    Beyond that, trailing runs (never the base) are merged to stay within ``max_segments``.
    """
    lives = [s.live for s in segs]
    j = len(lives)
    acc = new_rows
    while True:
        t = tier(acc, factor)
        i = j
        while i > 0 and tier(lives[i - 1], factor) <= t:
            i -= 1
        if i == j or j - i + 1 < factor:
            break
        acc += sum(lives[i:j])
        j = i
    while j > 1 and j + 1 > max_segments:
        j -= 1
    return j


def merge_range(segs: list[Segment], max_segments: int, factor: int = MERGE_FACTOR) -> int:
    """Position of the first of the trailing runs of ``segs`` that are due to be merged into one
    (``len(segs) - 1`` or more: none): :func:`merge_start` with the last run as the new rows."""
    if len(segs) < 2:
        return len(segs)
    return merge_start(segs[:-1], segs[-1].live, max_segments, factor)


def check_sketches(
    path: str, sketch_words: int | None, fingerprints: Any, sketches: Any
) -> Sketches | None:
    """The sketches of an add checked against the index (``sketch_words`` per entry, None when
    it keeps none) and the fingerprints."""
    if sketch_words is None:
        if sketches is not None:
            raise ValueError(
                f"index {path} keeps no sketches; create one with threshold= (or "
                "`neardup index create --threshold`) to keep them"
            )
        if fingerprints is None:
            raise ValueError("pass the fingerprints to add")
        return None
    if sketches is None:
        raise ValueError(
            f"index {path} keeps a MinHash sketch per entry: pass sketches= "
            f"(neardup.core.sketch.set_sketches(shingle sets, words={sketch_words}))"
        )
    sk = as_sketches(sketches, sketch_words)
    if fingerprints is not None:
        fp = as_fingerprints(fingerprints, "fingerprints")
        if fp.shape != (len(sk),) or not np.array_equal(fp, sk.fingerprints):
            raise ValueError(
                f"index {path} searches the sketches' first words: pass "
                "fingerprints=None or sketches.fingerprints"
            )
    return sk

"""How a local index writes: new immutable segment files, the rows a merge gathers, and which
delta runs an add merges.

Every change of :class:`neardup.index.Index` writes new files with these functions, then
switches the manifest atomically (:mod:`neardup.index.storage`); a crash at any point leaves the
last committed state.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from typing import Any, NamedTuple

import numpy as np

from neardup.config import default_threads
from neardup.core.bits import as_fingerprints
from neardup.core.layout import Layout
from neardup.core.sketch import Sketches, as_sketches
from neardup.index import _kernels
from neardup.index.codec import write_table
from neardup.index.segments import Segment, concat_strings
from neardup.index.storage import write_array

__all__ = ["MAX_SEGMENTS", "Rows", "check_sketches", "gather", "merge_start", "write_segment"]

#: Most segments (base + delta runs) of a local index before an add merges delta runs.
MAX_SEGMENTS = 8


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


def write_segment(
    directory: str, layout: Layout, name: str, rows: Rows, codec: str | None = None
) -> dict[str, Any]:
    """Write ``rows`` as segment ``name`` of the index in ``directory`` (sorted by fingerprint,
    with every permuted table of ``layout``); return its manifest entry."""
    order = np.argsort(rows.fps, kind="stable")
    fps = rows.fps[order]
    keys = rows.keys[order]
    files: dict[str, Any] = {}
    if rows.sketches is not None:
        sk = rows.sketches
        files["sketch"] = write_array(directory, f"{name}.sketch.npy", sk.words[order])
        files["ssize"] = write_array(directory, f"{name}.ssize.npy", sk.sizes[order])
    blob, off = rows.blob, rows.off
    if blob is not None:
        blob, off = _kernels._gather_strings(blob, off, order.astype(np.int64))
    distinct = fps[np.concatenate(([True], fps[1:] != fps[:-1]))] if len(fps) else fps
    kord = np.argsort(keys, kind="stable").astype(np.uint32 if len(keys) < 2**32 else np.int64)

    def table(t: int) -> tuple[str, dict[str, Any]]:
        v = layout.apply(distinct, t)
        v.sort()
        return f"t{t}", write_table(directory, f"{name}.t{t}.npy", v, codec)

    todo = [t for t in range(layout.n_tables) if not layout.spec.identity[t]]
    with ThreadPoolExecutor(min(default_threads(), max(1, len(todo)))) as ex:
        files.update(ex.map(table, todo))
    files["fp"] = write_table(directory, f"{name}.fp.npy", fps, codec)
    files["key"] = write_array(directory, f"{name}.key.npy", keys)
    files["kord"] = write_array(directory, f"{name}.kord.npy", kord)
    if blob is not None:
        files["sblob"] = write_array(directory, f"{name}.sblob.npy", blob)
        files["soff"] = write_array(directory, f"{name}.soff.npy", off)
    entry = {"name": name, "rows": len(fps), "files": files, "deleted": None}
    if codec is not None:
        entry["codec"] = codec
    return entry


def gather(segs: list[Segment], id_type: str | None, sketch_words: int | None) -> Rows:
    """Live rows of ``segs`` concatenated, older segments first (with their sketches in an
    index that keeps them)."""
    fps, keys, blobs, offs, words, sizes = [], [], [], [], [], []
    for s in segs:
        rows = s.live_rows()
        fps.append(s.fps[rows])
        keys.append(s.keys[rows])
        if s.sketch is not None:
            words.append(s.sketch[rows])
            sizes.append(s.ssize[rows])
        if s.blob is not None:
            b, o = _kernels._gather_strings(s.blob, s.off, rows)
            blobs.append(b)
            offs.append(o)
    blob = off = None
    if id_type == "str":
        blob, off = concat_strings(blobs, offs)
    sketches = None
    if sketch_words is not None:
        sketches = Sketches(np.concatenate(words), np.concatenate(sizes))
    return Rows(np.concatenate(fps), np.concatenate(keys), blob, off, sketches)


def merge_start(segs: list[Segment], new_rows: int, max_segments: int) -> int:
    """Position in ``segs`` of the first delta run an add of ``new_rows`` merges with: the
    trailing runs while they are not much larger than what is merged so far, and enough of
    them to stay within ``max_segments``. ``len(segs)`` merges nothing; the base (position 0)
    is never merged by an add."""
    delta = segs[1:]
    j = len(delta)
    acc = new_rows
    while j > 0 and (
        2 * acc >= delta[j - 1].live or len(segs) - (len(delta) - j) + 1 > max_segments
    ):
        j -= 1
        acc += delta[j].live
    return j + 1


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

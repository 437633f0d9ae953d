"""Batch mode: a new batch of fingerprints against a stored corpus streamed past its tables.

This is the batch query of Manku et al. (Detecting near-duplicates for web crawling, WWW 2007): when
a crawl brings a batch B of new fingerprints, build B's permuted tables once (small: B is a day's
crawl), then stream the stored corpus F past them, each stored fingerprint probing every table. The
work is one pass over F with no sorting of F, split any way over partitions of F (see
:func:`neardup.distributed.query` for the Dask twin, which ships the tables to the workers).

Each table of the batch keeps its permuted values sorted, the batch position of each, and a
directory of the top ``dbits`` bits (``dbits`` at most the table's prefix bits), so a probe reads
one directory entry and the few batch entries of its bucket. A pair is reported by the first
table (in table order) whose leading blocks all agree, so every (batch position, stored row) pair
within the distance appears once, exactly as :meth:`Index.search` reports it.
"""

from __future__ import annotations

import math
import os
from concurrent.futures import ThreadPoolExecutor
from typing import Any, NamedTuple

import numpy as np

from neardup.config import DEFAULT_DISTANCE, default_threads
from neardup.core.bits import as_fingerprints
from neardup.core.cost import choose_query_blocks as choose_index_blocks
from neardup.core.layout import Layout
from neardup.core.matches import Matches
from neardup.core.order import lexorder
from neardup.index import _batch_kernels as bk
from neardup.index import _kernels
from neardup.index.backend import IndexBackend, check_query_distance
from neardup.index.codec import load_table
from neardup.index.location import open_index
from neardup.index.storage import load_array

__all__ = [
    "BatchTables",
    "IndexPart",
    "PartMatches",
    "batch_query",
    "index_parts",
    "match_index_part",
    "merge_matches",
    "read_index_part",
]

#: Stored rows per partition when an index is streamed in batch mode.
DEFAULT_PART_ROWS = 1 << 22


def pack_specs(layout: Layout) -> np.ndarray:
    """One row per table: prefix shift, lead mask, first-table masks and the move into the
    table's key order, as a uint64 matrix for the probe kernel."""
    spec = layout.spec
    rows = []
    for t in range(layout.n_tables):
        nseg, nchk = int(spec.nseg[t]), int(spec.nchk[t])
        moves = np.stack(
            [spec.seg_src[t, :nseg], spec.seg_mask[t, :nseg], spec.seg_dst[t, :nseg]], axis=1
        ).reshape(-1)
        rows.append(
            [
                64 - int(spec.pbits[t]),
                int(spec.lead_key[t]),
                nchk,
                nseg,
                *moves.tolist(),
                *spec.chk_key[t, :nchk].tolist(),
            ]
        )
    width = max(len(r) for r in rows)
    return np.array([r + [0] * (width - len(r)) for r in rows], dtype=np.uint64)


class BatchTables:
    """The permuted tables of a batch of fingerprints, ready to be probed by stored ones.

    Parameters
    ----------
    batch : sequence of int or ndarray
        The new fingerprints (uint64, bit 63 most significant); a match reports positions in it.
    distance : int
        Largest Hamming distance (bits, inclusive) probes can ask for.
    blocks : int, optional
        Blocks of the layout; default: the fastest for probing ``len(batch)`` fingerprints
        (:func:`neardup.index.choose_index_blocks`).

    Notes
    -----
    Memory: per table, 16 bytes per batch fingerprint (value and position) and a directory of
    about one 8-byte entry per batch fingerprint. A 1M batch at distance 3 (4 tables) takes
    about 100 MB; :attr:`nbytes` gives the exact figure.
    """

    def __init__(
        self, batch: Any, distance: int = DEFAULT_DISTANCE, blocks: int | None = None
    ) -> None:
        fp = as_fingerprints(batch, "batch")
        if blocks is None:
            blocks = choose_index_blocks(max(1, len(fp)), distance)
        self.layout = Layout(blocks, distance)
        self.n = len(fp)
        self.specs = pack_specs(self.layout)
        T = self.layout.n_tables
        self.vals = np.empty((T, self.n), dtype=np.uint64)
        self.rows = np.empty((T, self.n), dtype=np.int64)
        for t in range(T):
            bk.permute_sorted(fp, self.specs[t], self.vals[t], self.rows[t])
        prefix = min(t.prefix_bits for t in self.layout.tables)
        self.dbits = max(1, min(prefix, math.ceil(math.log2(max(self.n, 2)))))
        self.dirs = np.empty((T, (1 << self.dbits) + 1), dtype=np.int64)
        for t in range(T):
            bk.build_directory(self.vals[t], self.dbits, self.dirs[t])

    @property
    def distance(self) -> int:
        return self.layout.distance

    @property
    def nbytes(self) -> int:
        """Bytes held by the tables (what is shipped to each worker)."""
        return int(self.vals.nbytes + self.rows.nbytes + self.dirs.nbytes + self.specs.nbytes)

    def probe(
        self, fingerprints: Any, distance: int | None = None, *, threads: int = 1
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Every (batch position, stored position, distance) within ``distance`` bits.

        Parameters
        ----------
        fingerprints : sequence of int or ndarray
            Stored fingerprints (uint64), in any order.
        distance : int, optional
            Bits (inclusive), at most the tables' distance (the default).
        threads : int
            Threads sharing the stored fingerprints.

        Returns
        -------
        (batch_index, stored_index, distance) : three int64 arrays
            Each pair once, grouped by stored position (ascending).
        """
        fp = as_fingerprints(fingerprints, "fingerprints")
        k = check_query_distance(
            distance,
            self.distance,
            name="distance",
            of="the batch tables' distance",
            fix="build the tables with a larger distance",
        )
        if self.n == 0 or len(fp) == 0:
            e = np.empty(0, dtype=np.int64)
            return e, e.copy(), e.copy()
        threads = max(1, min(int(threads), len(fp) // 65536 + 1))
        if threads == 1:
            return self._probe_range(fp, 0, int(k))
        cuts = np.linspace(0, len(fp), threads + 1).astype(np.int64)
        with ThreadPoolExecutor(threads) as ex:
            parts = list(
                ex.map(
                    lambda a: self._probe_range(fp[cuts[a] : cuts[a + 1]], int(cuts[a]), int(k)),
                    range(threads),
                )
            )
        return tuple(np.concatenate(c) for c in zip(*parts, strict=True))  # type: ignore[return-value]

    def _probe_range(
        self, fp: np.ndarray, offset: int, k: int
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        parts = []
        i = 0
        cap = max(1024, len(fp) // 64)
        while True:
            buf = (np.empty(cap, np.int64), np.empty(cap, np.int64), np.empty(cap, np.int64))
            cnt, i_next, _ = bk.probe_batch(
                fp, self.vals, self.rows, self.dirs, self.specs, self.dbits, k, i, *buf
            )
            parts.append((buf[0][:cnt].copy(), buf[1][:cnt] + offset, buf[2][:cnt].copy()))
            if i_next == len(fp):
                break
            i, cap = i_next, cap * 4
        if len(parts) == 1:
            return parts[0]
        return tuple(np.concatenate(c) for c in zip(*parts, strict=True))  # type: ignore[return-value]


class PartMatches(NamedTuple):
    """Matches of a part of the stored corpus: batch positions, stored ids (and their sort keys:
    the int64 id, or the 64-bit hash of a str id as in the index) and distances."""

    batch_index: np.ndarray
    key: np.ndarray
    id: np.ndarray
    distance: np.ndarray


def merge_matches(parts: list[PartMatches], id_type: str | None, n: int) -> Matches:
    """The matches of every part for a batch of ``n``, sorted as :meth:`Index.search` sorts
    them: by batch position, then distance, then id key."""
    if not parts:
        return Matches.empty(n, id_type)
    qi = np.concatenate([p.batch_index for p in parts])
    key = np.concatenate([p.key for p in parts])
    d = np.concatenate([p.distance for p in parts])
    ids = np.concatenate([p.id for p in parts])
    order = lexorder((key, d, qi))
    return Matches.from_sorted(qi[order], ids[order], d[order], n)


class IndexPart(NamedTuple):
    """Rows ``start .. stop-1`` of one segment of an index (its manifest entry), to be read by
    :func:`read_index_part` wherever the index's directory can be read."""

    path: str
    segment: dict
    start: int
    stop: int
    id_type: str | None


def index_parts(index: IndexBackend, rows: int = DEFAULT_PART_ROWS) -> list[IndexPart]:
    """The committed segments of ``index`` cut into parts of at most ``rows`` rows (a backend
    with the ``parts`` capability: a local index)."""
    if rows < 1:
        raise ValueError(f"rows per part must be >= 1 (got {rows})")
    index.require("parts")
    out = []
    for seg in index.segment_entries:  # type: ignore[attr-defined]
        for a in range(0, int(seg["rows"]), rows):
            b = min(int(seg["rows"]), a + rows)
            out.append(IndexPart(index.path, seg, a, b, index.id_type))
    return out


def read_index_part(part: IndexPart) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(fingerprints, id keys, ids) of the live rows of a part: only the segment's sorted
    fingerprints (decoded when compressed), its keys and, for str ids, its strings are read."""
    files = part.segment["files"]
    table = load_table(part.path, files["fp"])
    fps = np.array(table[part.start : part.stop], dtype=np.uint64)
    keys = np.array(load_array(part.path, files["key"])[part.start : part.stop], dtype=np.int64)
    rows = np.arange(part.start, part.stop, dtype=np.int64)
    if part.segment.get("deleted"):
        dead = np.asarray(load_array(part.path, part.segment["deleted"]))
        live = ~np.isin(rows, dead[(dead >= part.start) & (dead < part.stop)])
        fps, keys, rows = fps[live], keys[live], rows[live]
    if part.id_type != "str":
        return fps, keys, keys
    blob = np.asarray(load_array(part.path, files["sblob"]))
    off = np.asarray(load_array(part.path, files["soff"]))
    b, o = _kernels.gather_strings(blob, off, rows)
    raw = b.tobytes()
    ol = o.tolist()
    ids = np.empty(len(rows), dtype=object)
    ids[:] = [raw[x:y].decode("utf-8") for x, y in zip(ol[:-1], ol[1:], strict=True)]
    return fps, keys, ids


def match_index_part(
    tables: BatchTables, part: IndexPart, distance: int | None = None, threads: int = 1
) -> PartMatches:
    """Stream one part of a stored index past the batch's tables."""
    fps, keys, ids = read_index_part(part)
    qi, pos, d = tables.probe(fps, distance, threads=threads)
    return PartMatches(qi, keys[pos], ids[pos], d)


def batch_query(
    index: IndexBackend | str | os.PathLike,
    batch: Any,
    distance: int | None = None,
    blocks: int | None = None,
    *,
    part_rows: int = DEFAULT_PART_ROWS,
    threads: int | None = None,
) -> Matches:
    """Batch mode on this machine: the answer of ``index.search(batch, distance)``,
    computed by building the batch's tables and streaming the index's segments past them.

    Parameters
    ----------
    index : Index or path
        The stored corpus, a local index (opened read-only when a path).
    batch : sequence of int or ndarray
        New fingerprints (uint64); ``query_index`` counts positions in it.
    distance : int, optional
        Bits (inclusive), at most the index's distance (the default).
    blocks : int, optional
        Layout of the batch's tables (default: chosen for ``len(batch)``).
    part_rows : int
        Stored rows read at a time (memory: about 16 bytes each, plus the tables).
    threads : int, optional
        Threads probing each part. Default: all usable CPUs.

    Returns
    -------
    Matches
        Per query, sorted by distance, then id (as the index sorts).
    """
    ix = index if isinstance(index, IndexBackend) else open_index(index)
    try:
        k = check_query_distance(distance, ix.distance)
        tables = BatchTables(batch, k, blocks)
        nthreads = default_threads() if threads is None else max(1, int(threads))
        parts = [match_index_part(tables, p, k, nthreads) for p in index_parts(ix, part_rows)]
        return merge_matches(parts, ix.id_type, tables.n)
    finally:
        if ix is not index:
            ix.close()

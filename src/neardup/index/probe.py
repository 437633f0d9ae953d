"""How a local index finds rows: the live rows of its segments within a query distance, the
rows holding given ids, and the ids of rows.

A small batch probes each permuted table of each segment with the queries' sorted keys (a
compressed table is decoded in the probe); a large one, when the cost model says it is cheaper
(:func:`neardup.core.cost.join_scheme`), is searched together with each segment's fingerprints
by the batch engine, without reading the stored tables. Every function takes the segments of
one committed state (:class:`neardup.index.segments.Segment`) and returns int64 arrays.
"""

from __future__ import annotations

import os
from concurrent.futures import ThreadPoolExecutor

import numpy as np

from neardup.config import default_threads
from neardup.core.cost import join_scheme
from neardup.core.layout import Layout, Scheme
from neardup.core.search import join_pairs, probe_table, sorted_query_keys
from neardup.index import _kernels, _query_kernels
from neardup.index.codec import CompressedTable
from neardup.index.segments import Ids, Segment, expand_ranges
from neardup.index.storage import CorruptIndexError

__all__ = [
    "FEW_QUERIES",
    "PARALLEL_QUERIES",
    "FewPlan",
    "Rows",
    "find_rows",
    "ids_of",
    "probe",
    "probe_few",
]

#: Query batches at least this large probe the tables in parallel threads.
PARALLEL_QUERIES = 2048
#: Batches up to this size are probed by one kernel call over every table of every segment
#: (:func:`probe_few`), where a plan exists.
FEW_QUERIES = 64

#: (query or id index, segment index, row[, distance]) of matching rows, int64 arrays
Rows = tuple[np.ndarray, ...]


class FewPlan:
    """The arrays of one committed state laid out for :func:`probe_few`: a row per segment of
    addresses and lengths (its tables, fingerprints, id keys, tombstones). It holds the arrays,
    so they stay mapped while a query that took the plan runs."""

    def __init__(self, segs: list[Segment], layout: Layout) -> None:
        T = layout.n_tables
        self.segs = segs
        self.spec = layout.spec
        self.ntab = T
        self.arrays = [[*seg.tables, seg.fps, seg.keys, seg.dead] for seg in segs]
        self.addr = np.zeros((len(segs), T + 3), dtype=np.int64)
        self.lens = np.zeros((len(segs), T + 3), dtype=np.int64)
        for s, row in enumerate(self.arrays):
            for c, a in enumerate(row):
                self.addr[s, c] = a.ctypes.data
                self.lens[s, c] = len(a)

    @classmethod
    def of(cls, segs: list[Segment], layout: Layout) -> FewPlan | None:
        """The plan of ``segs``, or None where a table is compressed (probed by its decoder)."""
        for seg in segs:
            arrays = [*seg.tables, seg.fps, seg.keys, seg.dead]
            if not all(
                isinstance(a, np.ndarray) and a.ndim == 1 and a.flags.c_contiguous for a in arrays
            ):
                return None
            if seg.fps.dtype != np.uint64 or seg.keys.dtype != np.int64:
                return None
            if seg.dead.dtype != np.int64:
                return None
        return cls(segs, layout)


def probe_few(plan: FewPlan, q: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
    """Every live match within ``k`` bits of each of the few queries ``q``: an int64 matrix of
    rows (query, distance, id key, segment, row), a column per match sorted by query, distance
    and key, and the query offsets (``len(q) + 1``)."""
    found, offsets, done = _query_kernels.probe_few(
        q, np.int64(k), plan.spec, plan.addr, plan.lens, np.int64(plan.ntab)
    )
    if not done:
        found = found[:, np.lexsort((found[2], found[1], found[0]))]
    return found, offsets


def _empty(n: int) -> Rows:
    return tuple(np.empty(0, dtype=np.int64) for _ in range(n))


def probe(segs: list[Segment], layout: Layout, q: np.ndarray, k: int, threads: int | None) -> Rows:
    """(query index, segment index, row, distance) of every live row of ``segs`` within ``k``
    bits of a query of ``q`` (uint64), each pair once, in no particular order."""
    if len(q) == 0 or not segs:
        return _empty(4)
    nthreads = 1
    if len(q) >= PARALLEL_QUERIES:
        nthreads = default_threads() if threads is None else max(1, int(threads))
    scheme = join_scheme(len(q), sum(s.live for s in segs), layout, k)
    if scheme is not None:
        return _join(segs, q, scheme, nthreads)
    T = layout.n_tables
    if nthreads > 1 and T > 1:
        with ThreadPoolExecutor(min(nthreads, T)) as ex:
            results = list(ex.map(lambda t: _probe_table(segs, layout, t, q, k), range(T)))
    else:
        results = [_probe_table(segs, layout, t, q, k) for t in range(T)]
    parts = [r for res in results for r in res]
    if not parts:
        return _empty(4)
    qi = np.concatenate([p[0] for p in parts])
    si = np.concatenate([np.full(len(p[0]), p[1], np.int64) for p in parts])
    rows = np.concatenate([p[2] for p in parts])
    d = np.concatenate([p[3] for p in parts])
    return qi, si, rows, d


def _probe_table(
    segs: list[Segment], layout: Layout, t: int, q: np.ndarray, k: int
) -> list[tuple[np.ndarray, int, np.ndarray, np.ndarray]]:
    spec = layout.spec
    qkeys, qord = sorted_query_keys(q, spec, t)
    out = []
    for si, seg in enumerate(segs):
        table = seg.tables[t]
        if isinstance(table, CompressedTable):  # decoded in the probe, which gives rows
            qi, rows, d = table.probe_rows(qkeys, qord, k, spec, t, seg.fps)
        else:
            qi, rows, d = probe_table(table, qkeys, qord, spec, t, k)
            if len(qi) and not spec.identity[t]:
                # tables hold distinct fingerprints: map a match back to every row holding it
                v = layout.reverse(table[rows], t)
                lo = np.searchsorted(seg.fps, v, "left")
                hi = np.searchsorted(seg.fps, v, "right")
                owner, rows = expand_ranges(lo, hi)
                qi, d = qi[owner], d[owner]
        if len(qi) == 0:
            continue
        keep = seg.alive(rows)
        if not keep.all():
            qi, rows, d = qi[keep], rows[keep], d[keep]
        out.append((qi, si, rows, d))
    return out


def _join(segs: list[Segment], q: np.ndarray, scheme: Scheme, threads: int) -> Rows:
    """A large batch searched together with each segment's fingerprints by the batch engine
    (the stored tables are not read)."""
    parts = []
    for si, seg in enumerate(segs):
        pairs = join_pairs(q, seg.fps, scheme, threads=threads)
        qi, rows = pairs[:, 0], pairs[:, 1]
        keep = seg.alive(rows)
        if not keep.all():
            qi, rows = qi[keep], rows[keep]
        d = np.bitwise_count(q[qi] ^ seg.fps[rows]).astype(np.int64)
        parts.append((qi, np.full(len(qi), si, np.int64), rows, d))
    return tuple(np.concatenate(p) for p in zip(*parts, strict=True))


def find_rows(segs: list[Segment], ids: Ids) -> Rows:
    """(id index, segment index, row) of every live row of ``segs`` holding one of ``ids``."""
    parts: list[tuple[np.ndarray, np.ndarray, np.ndarray]] = []
    for si, seg in enumerate(segs if len(ids.keys) else []):
        lo, hi = _kernels.lookup_keys(seg.keys, seg.kord, ids.keys)
        owner, pos = expand_ranges(lo, hi)
        if len(owner) == 0:
            continue
        rows = seg.kord[pos].astype(np.int64)
        keep = seg.alive(rows)
        if ids.kind == "str":
            keep &= _kernels.strings_equal(seg.blob, seg.off, rows, ids.blob, ids.off, owner)
        parts.append((owner[keep], np.full(int(keep.sum()), si, np.int64), rows[keep]))
    if not parts:
        return _empty(3)
    return tuple(np.concatenate(p) for p in zip(*parts, strict=True))


def row_keys(segs: list[Segment], si: np.ndarray, rows: np.ndarray) -> np.ndarray:
    """The int64 id keys (the id, or the 64-bit hash of a str id) of rows ``rows`` of
    segments ``si``."""
    if len(segs) == 1:
        return segs[0].keys[rows]
    keys = np.empty(len(rows), dtype=np.int64)
    for s in np.unique(si).tolist():
        sel = si == s
        keys[sel] = segs[s].keys[rows[sel]]
    return keys


def ids_of(
    directory: str, segs: list[Segment], id_type: str | None, si: np.ndarray, rows: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """(sort key, id values) of rows ``rows`` of segments ``si``: the values are the keys for
    int64 ids, an object array of str ids otherwise."""
    keys = row_keys(segs, si, rows)
    if id_type != "str":
        return keys, keys
    values = np.empty(len(rows), dtype=object)
    for s in np.unique(si).tolist():
        sel = np.flatnonzero(si == s)
        seg = segs[s]
        blob, off = _kernels.gather_strings(seg.blob, seg.off, rows[sel])
        raw = blob.tobytes()
        ol = off.tolist()
        try:
            values[sel] = [raw[a:b].decode() for a, b in zip(ol[:-1], ol[1:], strict=True)]
        except UnicodeDecodeError:
            name = os.path.join(directory, seg.entry["files"]["sblob"]["name"])
            raise CorruptIndexError(
                f"{name}: an id is not valid UTF-8; the file is corrupt: restore the index "
                "from a backup or rebuild it"
            ) from None
    return keys, values

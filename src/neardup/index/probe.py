"""How a local index finds what matches a batch of queries: the live rows of every segment
within the query distance, and the ids of those rows.

A small batch probes each permuted table of each segment with the queries' sorted keys (a
compressed table is decoded in the probe); a large one, when the cost model says it is cheaper
(:func:`neardup.core.cost.join_scheme`), is searched together with each segment's fingerprints
by the batch engine, without reading the stored tables.

:class:`IndexProbe` is a mixin of :class:`neardup.index.Index`.
"""

from __future__ import annotations

import os
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import numpy as np

from neardup import config
from neardup.config import default_threads
from neardup.core.bits import as_fingerprints
from neardup.core.cost import join_scheme
from neardup.core.layout import Scheme
from neardup.core.search import join_pairs, probe_table, sorted_query_keys
from neardup.index import _kernels
from neardup.index.codec import CompressedTable
from neardup.index.segments import expand_ranges
from neardup.index.storage import CorruptIndexError

__all__ = ["IndexProbe"]


class IndexProbe:
    """Mixin of :class:`neardup.index.Index`: ``_probe`` (query index, segment index, row and
    distance of every match, as int64 arrays) and ``_ids_of`` (the ids of rows)."""

    def _probe_table(
        self, t: int, q: np.ndarray, k: int
    ) -> list[tuple[np.ndarray, int, np.ndarray, np.ndarray]]:
        spec = self._spec
        qkeys, qord = sorted_query_keys(q, spec, t)
        out = []
        for si, seg in enumerate(self._segs):
            table = seg.tables[t]
            if isinstance(table, CompressedTable):  # decoded in the probe, which gives rows
                qi, rows, d = table.probe_rows(qkeys, qord, k, spec, t, seg.fps)
            else:
                qi, rows, d = probe_table(table, qkeys, qord, spec, t, k)
                if len(qi) and not spec.identity[t]:
                    # tables hold distinct fingerprints: map a match back to every row holding it
                    v = self.layout.reverse(table[rows], t)
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

    def _probe(
        self, fingerprints: Any, distance: int | None, threads: int | None
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        self._check_open()
        q = as_fingerprints(fingerprints, "fingerprints")
        k = self._query_distance(distance)
        e = np.empty(0, dtype=np.int64)
        if len(q) == 0 or not self._segs:
            return e, e.copy(), e.copy(), e.copy()
        T = self.layout.n_tables
        nthreads = 1
        if len(q) >= config.PARALLEL_QUERIES:
            nthreads = default_threads() if threads is None else max(1, int(threads))
        scheme = join_scheme(len(q), len(self), self.layout, k)
        if scheme is not None:
            return self._join(q, scheme, nthreads)
        if nthreads > 1 and T > 1:
            with ThreadPoolExecutor(min(nthreads, T)) as ex:
                results = list(ex.map(lambda t: self._probe_table(t, q, k), range(T)))
        else:
            results = [self._probe_table(t, q, k) for t in range(T)]
        parts = [r for res in results for r in res]
        if not parts:
            return e, e.copy(), e.copy(), e.copy()
        qi = np.concatenate([p[0] for p in parts])
        si = np.concatenate([np.full(len(p[0]), p[1], np.int64) for p in parts])
        rows = np.concatenate([p[2] for p in parts])
        d = np.concatenate([p[3] for p in parts])
        return qi, si, rows, d

    def _join(
        self, q: np.ndarray, scheme: Scheme, threads: int
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """A large batch searched together with each segment's fingerprints by the batch
        engine (the stored tables are not read)."""
        parts = []
        for si, seg in enumerate(self._segs):
            pairs = join_pairs(q, seg.fps, scheme, threads=threads)
            qi, rows = pairs[:, 0], pairs[:, 1]
            keep = seg.alive(rows)
            if not keep.all():
                qi, rows = qi[keep], rows[keep]
            d = np.bitwise_count(q[qi] ^ seg.fps[rows]).astype(np.int64)
            parts.append((qi, np.full(len(qi), si, np.int64), rows, d))
        return tuple(np.concatenate(p) for p in zip(*parts, strict=True))  # type: ignore[return-value]

    def _ids_of(self, si: np.ndarray, rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(sort key, id values) of rows ``rows`` of segments ``si``."""
        if len(self._segs) == 1:
            keys = self._segs[0].keys[rows]
        else:
            keys = np.empty(len(rows), dtype=np.int64)
            for s in np.unique(si):
                sel = si == s
                keys[sel] = self._segs[s].keys[rows[sel]]
        if self.id_type != "str":
            return keys, keys
        values = np.empty(len(rows), dtype=object)
        for s in np.unique(si):
            sel = np.flatnonzero(si == s)
            seg = self._segs[s]
            blob, off = _kernels._gather_strings(seg.blob, seg.off, rows[sel])
            raw = blob.tobytes()
            ol = off.tolist()
            try:
                values[sel] = [raw[a:b].decode() for a, b in zip(ol[:-1], ol[1:], strict=True)]
            except UnicodeDecodeError:
                name = os.path.join(self.path, seg.entry["files"]["sblob"]["name"])
                raise CorruptIndexError(
                    f"{name}: an id is not valid UTF-8; the file is corrupt: restore the index "
                    "from a backup or rebuild it"
                ) from None
        return keys, values

"""Tables of a :class:`~neardup.core.layout.Layout` packed once as arrays for the kernels.

Coordinates as in :mod:`neardup.core.layout`: masks named ``*_fp`` are in fingerprint bits
(for ``fp ^ fp``), ``*_key`` in key bits (for ``key ^ key``); bit 0 is the least significant.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, NamedTuple

import numpy as np

if TYPE_CHECKING:
    from neardup.core.layout import Table

__all__ = ["TableSpec", "TableSpecs", "pack_tables"]

_FULL = (1 << 64) - 1


class TableSpec(NamedTuple):
    """Every table of a layout packed as arrays for the kernels, one row per table.

    numba passes a NamedTuple of arrays to a kernel as one argument; a kernel reads row ``t``.
    Key building moves fingerprint bits ``seg_src[t, s]..+width`` to key bits
    ``seg_dst[t, s]..+width`` (``seg_mask[t, s] = 2**width - 1``, ``s < nseg[t]``); the table's
    prefix is the top ``pbits[t]`` key bits. The ownership masks of :class:`Table` come twice:
    ``lead_fp``/``chk_fp`` in fingerprint bits (for ``fp ^ fp``, the batch scan) and
    ``lead_key``/``chk_key`` in key bits (for ``key ^ key``, probing sorted tables); the first
    ``nchk[t]`` columns of ``chk_*`` are used. ``identity[t]`` is True when the key equals the
    fingerprint (table 0 always is).
    """

    seg_src: np.ndarray  #: (T, S) uint64, low bit of each segment in fingerprint bits
    seg_mask: np.ndarray  #: (T, S) uint64, ``2**width - 1``
    seg_dst: np.ndarray  #: (T, S) uint64, low bit of each segment in key bits
    nseg: np.ndarray  #: (T,) int64
    pbits: np.ndarray  #: (T,) int64, prefix width in bits
    lead_fp: np.ndarray  #: (T,) uint64, leading blocks in fingerprint bits
    chk_fp: np.ndarray  #: (T, C) uint64, check masks in fingerprint bits
    lead_key: np.ndarray  #: (T,) uint64, leading blocks in key bits (the top ``pbits``)
    chk_key: np.ndarray  #: (T, C) uint64, check masks in key bits
    nchk: np.ndarray  #: (T,) int64
    identity: np.ndarray  #: (T,) bool


#: Former name of :class:`TableSpec`.
TableSpecs = TableSpec


def _u64(values: Sequence[int]) -> np.ndarray:
    return np.array([v & _FULL for v in values], dtype=np.uint64)


def pack_tables(tables: Sequence[Table]) -> TableSpec:
    """Pack ``tables`` (from :attr:`Layout.tables`) into one :class:`TableSpec`.

    :attr:`Layout.spec` keeps one packed copy per layout; call this for a subset of tables.
    """
    ns = max(len(t.segments) for t in tables)
    nc = max(1, max(len(t.check_masks) for t in tables))
    rows = len(tables)
    seg_src = np.zeros((rows, ns), dtype=np.uint64)
    seg_mask = np.zeros((rows, ns), dtype=np.uint64)
    seg_dst = np.zeros((rows, ns), dtype=np.uint64)
    chk_fp = np.zeros((rows, nc), dtype=np.uint64)
    chk_key = np.zeros((rows, nc), dtype=np.uint64)
    for r, t in enumerate(tables):
        seg = t.segments
        seg_src[r, : len(seg)] = [s for s, _, _ in seg]
        seg_mask[r, : len(seg)] = _u64([(1 << w) - 1 for _, w, _ in seg])
        seg_dst[r, : len(seg)] = [d for _, _, d in seg]
        chk_fp[r, : len(t.check_masks)] = _u64(t.check_masks)
        chk_key[r, : len(t.check_masks)] = _u64([t.key_mask(m) for m in t.check_masks])
    return TableSpec(
        seg_src=seg_src,
        seg_mask=seg_mask,
        seg_dst=seg_dst,
        nseg=np.array([len(t.segments) for t in tables], dtype=np.int64),
        pbits=np.array([t.prefix_bits for t in tables], dtype=np.int64),
        lead_fp=_u64([t.lead_mask for t in tables]),
        chk_fp=chk_fp,
        lead_key=_u64([t.key_mask(t.lead_mask) for t in tables]),
        chk_key=chk_key,
        nchk=np.array([len(t.check_masks) for t in tables], dtype=np.int64),
        identity=np.array([all(s == d for s, _, d in t.segments) for t in tables], dtype=bool),
    )

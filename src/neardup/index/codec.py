"""Compressed sorted tables: Elias-Fano coding of a sorted uint64 array, memory-mapped.

A permuted table of the index is a sorted array of n 64-bit values. Elias-Fano splits each value
``v`` into a high part ``v >> l`` and ``l`` low bits: the low bits are stored packed, the high
parts as a bitvector in which element ``i`` sets bit ``(v >> l) + i`` (a unary code of the gaps
between buckets). With ``l`` about ``log2(2**64 / n)`` this takes ``l + 2..3`` bits per value,
close to the information bound ``log2(C(2**64, n)) / n`` (about ``64 - log2(n) + 1.44`` bits) of
any coding of a sorted set: 5.4 bytes instead of 8 at 10M values, 5.0 at 100M. Samples of where
every 256th bucket and every 1024th element sit (one uint64 each) make a lookup constant-time: a
probe decodes only the run of values sharing its prefix, about as many as it would read from the
uncompressed table.

The coded table is one uint64 ``.npy`` file (a header of 16 words, then the bitvector, the low
bits and the two sample arrays), memory-mapped like every other file of the index; its manifest
entry carries ``"codec": "ef"``.

Compared with the block coding of Manku et al. (WWW 2007: blocks starting with a whole
value, each next value coded as the Huffman-coded position of its highest differing bit plus the
bits below it), Elias-Fano stores less on uniformly spread fingerprints and needs no per-block
index in memory; ``bench/compress.py`` measures both on the same tables.
"""

from __future__ import annotations

import math
import os
from typing import Any

import numpy as np

from neardup.core.layout import TableSpec
from neardup.index import _codec_kernels as ek
from neardup.index.storage import (
    CODEC_FORMAT_VERSION,
    FORMAT_VERSION,
    SKETCH_FORMAT_VERSION,
    TABLE_CODECS,
    CorruptIndexError,
    load_array,
    write_array,
)

__all__ = [
    "CODECS",
    "CompressedTable",
    "encode",
    "information_bound_bits",
    "load_table",
    "pack_spec",
    "set_codec",
    "verify_table",
    "write_table",
]

#: Codecs an index can store its tables with (``None``: plain sorted uint64 arrays).
CODECS = TABLE_CODECS

#: One select sample per ``2**SAMPLE_BUCKETS`` buckets of the high bitvector.
SAMPLE_BUCKETS = 8
#: One access sample per ``2**SAMPLE_ELEMENTS`` elements.
SAMPLE_ELEMENTS = 10

_PROBLEMS = {
    1: "the high-bit vector does not hold one bit per value",
    2: "values are not sorted or do not match the first/last values of the header",
    3: "an element sample does not point at its element",
    4: "a bucket sample does not point at its bucket",
}


def information_bound_bits(n: int) -> float:
    """``log2(C(2**64, n)) / n``: the fewest bits per value any coding of a set of ``n`` distinct
    64-bit values can average."""
    if n <= 0:
        return 0.0
    # log2 C(U, n) = sum log2(U - i) - log2(n!); with U = 2**64 the first sum is 64 n less
    # n**2 / (2 U ln 2) bits (under 1e-3 bits per value for n <= 2**40), so it is dropped
    return 64.0 - math.lgamma(n + 1) / math.log(2) / n


def _layout(n: int, lbits: int) -> dict[str, int]:
    """Word offsets and sizes of every section for ``n`` values with ``lbits`` low bits."""
    hbits = 64 - lbits
    buckets = 1 << hbits
    uwords = (n + buckets + 63) // 64 + 1  # one spare word: reads never run past the end
    lwords = (n * lbits + 63) // 64 + 1
    s0n = (buckets >> SAMPLE_BUCKETS) + 1
    s1n = (n + (1 << SAMPLE_ELEMENTS) - 1) >> SAMPLE_ELEMENTS
    uoff = ek.HEADER
    loff = uoff + uwords
    s0off = loff + lwords
    s1off = s0off + s0n
    return {
        "hbits": hbits,
        "uoff": uoff,
        "uwords": uwords,
        "loff": loff,
        "lwords": lwords,
        "s0off": s0off,
        "s0n": s0n,
        "s1off": s1off,
        "s1n": s1n,
        "words": s1off + s1n,
    }


def _choose_low_bits(n: int) -> int:
    """The number of low bits that makes the table smallest (samples included)."""
    if n == 0:
        return 63
    guess = max(1, min(63, 64 - max(1, math.ceil(math.log2(n)))))
    cands = range(max(1, guess - 2), min(63, guess + 2) + 1)
    return min(cands, key=lambda lb: _layout(n, lb)["words"])


def encode(values: np.ndarray) -> np.ndarray:
    """Elias-Fano code of sorted (non-decreasing) uint64 ``values`` as one uint64 array.

    Parameters
    ----------
    values : ndarray of uint64
        Sorted ascending; repeats allowed.

    Returns
    -------
    ndarray of uint64
        Header, high-bit vector, packed low bits and samples (see the module docstring).
    """
    v = np.ascontiguousarray(values, dtype=np.uint64)
    n = len(v)
    lbits = _choose_low_bits(n)
    lay = _layout(n, lbits)
    out = np.zeros(lay["words"], dtype=np.uint64)
    head = [0] * ek.HEADER
    head[ek.H_MAGIC] = ek.MAGIC
    head[ek.H_N] = n
    head[ek.H_L] = lbits
    head[ek.H_H] = lay["hbits"]
    head[ek.H_S0] = SAMPLE_BUCKETS
    head[ek.H_S1] = SAMPLE_ELEMENTS
    head[ek.H_UOFF] = lay["uoff"]
    head[ek.H_UWORDS] = lay["uwords"]
    head[ek.H_LOFF] = lay["loff"]
    head[ek.H_LWORDS] = lay["lwords"]
    head[ek.H_S0OFF] = lay["s0off"]
    head[ek.H_S0N] = lay["s0n"]
    head[ek.H_S1OFF] = lay["s1off"]
    head[ek.H_S1N] = lay["s1n"]
    head[ek.H_FIRST] = int(v[0]) if n else 0
    head[ek.H_LAST] = int(v[-1]) if n else 0
    out[: ek.HEADER] = np.array(head, dtype=np.uint64)
    ek.encode(v, lbits, lay["hbits"], SAMPLE_BUCKETS, SAMPLE_ELEMENTS, out)
    return out


class CompressedTable:
    """A sorted uint64 table in Elias-Fano form, read in place (usually from a memory map).

    Offers what a probe of the index needs: the values under a prefix, the positions of values
    (``searchsorted``), decoding of ranges and of given positions, and the probe kernel itself.

    Parameters
    ----------
    words : ndarray of uint64
        The coded table (from :func:`encode`).
    name : str
        File name used in error messages.

    Raises
    ------
    CorruptIndexError
        When the header does not describe an Elias-Fano table of exactly ``len(words)`` words.
    """

    codec = "ef"

    def __init__(self, words: np.ndarray, name: str = "<memory>") -> None:
        self.name = name
        if words.dtype != np.uint64 or words.ndim != 1 or len(words) < ek.HEADER:
            raise CorruptIndexError(f"{name}: not an Elias-Fano table (too short)")
        head = [int(x) for x in words[: ek.HEADER]]
        if head[ek.H_MAGIC] != ek.MAGIC:
            raise CorruptIndexError(f"{name}: not an Elias-Fano table (bad magic number)")
        n, lbits = head[ek.H_N], head[ek.H_L]
        ok = 1 <= lbits <= 63 and head[ek.H_S0] == SAMPLE_BUCKETS
        ok = ok and head[ek.H_S1] == SAMPLE_ELEMENTS and n < 1 << 48
        if ok:
            lay = _layout(n, lbits)
            ok = len(words) == lay["words"] and all(
                head[h] == lay[key]
                for h, key in (
                    (ek.H_H, "hbits"),
                    (ek.H_UOFF, "uoff"),
                    (ek.H_UWORDS, "uwords"),
                    (ek.H_LOFF, "loff"),
                    (ek.H_LWORDS, "lwords"),
                    (ek.H_S0OFF, "s0off"),
                    (ek.H_S0N, "s0n"),
                    (ek.H_S1OFF, "s1off"),
                    (ek.H_S1N, "s1n"),
                )
            )
        if not ok:
            raise CorruptIndexError(
                f"{name}: Elias-Fano header does not match the file ({len(words)} words); the "
                f"file is corrupt"
            )
        self.words = words
        self.n = n
        self.low_bits = lbits
        self._spec: Any = None
        self._t = -1
        self._packed = np.zeros(0, np.uint64)

    def __len__(self) -> int:
        return self.n

    @property
    def nbytes(self) -> int:
        """Bytes of the coded table."""
        return int(self.words.nbytes)

    def decode(self, start: int = 0, stop: int | None = None) -> np.ndarray:
        """Values ``start .. stop-1`` as a new uint64 array."""
        stop = self.n if stop is None else min(int(stop), self.n)
        start = max(0, int(start))
        return ek.decode_range(self.words, start, stop)

    def __getitem__(self, key: Any) -> Any:
        if isinstance(key, slice):
            start, stop, step = key.indices(self.n)
            return self.decode(start, stop)[::step] if step != 1 else self.decode(start, stop)
        if isinstance(key, (int, np.integer)):
            i = int(key) + (self.n if key < 0 else 0)
            if not 0 <= i < self.n:
                raise IndexError(f"index {key} out of range for a table of {self.n} values")
            return self.decode(i, i + 1)[0]
        idx = np.asarray(key)
        if idx.dtype == bool:
            return self.decode()[idx]
        if len(idx) and (idx.min() < -self.n or idx.max() >= self.n):
            raise IndexError(f"index out of range for a table of {self.n} values")
        return self.decode()[idx]

    def searchsorted(self, values: Any, side: str = "left") -> np.ndarray:
        """``np.searchsorted`` over the decoded table (``side`` ``"left"`` or ``"right"``)."""
        v = np.ascontiguousarray(values, dtype=np.uint64).reshape(-1)
        if side == "left":
            return ek.searchsorted_left(self.words, v)
        if side == "right":
            return ek.equal_ranges(self.words, v)[1]
        raise ValueError(f"side must be 'left' or 'right' (got {side!r})")

    def equal_range(self, values: Any) -> tuple[np.ndarray, np.ndarray]:
        """For each value, the positions ``[lo, hi)`` holding it (``lo == hi`` when absent)."""
        return ek.equal_ranges(
            self.words, np.ascontiguousarray(values, dtype=np.uint64).reshape(-1)
        )

    def prefix_values(self, prefix: int, shift: int) -> tuple[np.ndarray, int]:
        """The values whose top ``64 - shift`` bits equal ``prefix``, decoded into a small
        buffer, and the position of the first (``0 <= shift <= 63``)."""
        return ek.prefix_values(self.words, np.uint64(prefix), int(shift))

    def probe_rows(
        self,
        queries: np.ndarray,
        q_order: np.ndarray,
        k: int,
        spec: TableSpec,
        t: int,
        fps: CompressedTable,
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Probe this permuted table with permuted queries sorted ascending.

        Parameters
        ----------
        queries : ndarray of uint64
            The queries moved into this table's key order, ascending.
        q_order : ndarray of int64
            The batch position of each sorted query.
        k : int
            Distance (bits, inclusive).
        spec : TableSpec
            The layout's packed tables (``Layout.spec``): row ``t`` gives this table's move,
            prefix, leading blocks and the masks that give each pair to one table only.
        t : int
            This table's row in ``spec``.
        fps : CompressedTable
            The segment's sorted fingerprints (table 0), mapping matches back to rows.

        Returns
        -------
        (query_index, row, distance) : three int64 arrays
            Every row within ``k`` bits of a query that this table is the first to find.
        """
        if len(self) == 0 or len(queries) == 0:
            e = np.empty(0, dtype=np.int64)
            return e, e.copy(), e.copy()
        if self._spec is not spec or self._t != t:  # a table is probed as one row: pack it once
            self._packed, self._spec, self._t = pack_spec(spec, t), spec, t
        parts = []
        q = 0
        cap = 64
        while True:
            buf = (np.empty(cap, np.int64), np.empty(cap, np.int64), np.empty(cap, np.int64))
            cnt, nq = ek.probe_rows(
                self.words, fps.words, self._packed, queries, q_order, k, q, *buf
            )
            parts.append(tuple(b[:cnt] for b in buf))
            if nq == len(queries):
                break
            q, cap = nq, cap * 4  # buffers full: the rest with larger ones
        if len(parts) == 1:
            return parts[0]
        return tuple(np.concatenate(c) for c in zip(*parts, strict=True))  # type: ignore[return-value]

    def check(self) -> None:
        """Decode the whole table and check its structure; raise :class:`CorruptIndexError`
        naming the file when it is unsound."""
        code = ek.check_table(self.words)
        if code:
            raise CorruptIndexError(f"{self.name}: {_PROBLEMS[code]}; the file is corrupt")


def pack_spec(spec: TableSpec, t: int) -> np.ndarray:
    """One uint64 array holding what the probe kernel needs from row ``t`` of a layout's
    :class:`~neardup.core.layout.TableSpec`: prefix shift, leading blocks and the first-table
    masks (in key bits), and the move from the table's key order back to the fingerprint's (the
    inverse of the ``seg_src``/``seg_mask``/``seg_dst`` move)."""
    nseg = int(spec.nseg[t])
    nchk = int(spec.nchk[t])
    head = [64 - int(spec.pbits[t]), int(spec.lead_key[t]), nchk, int(bool(spec.identity[t])), nseg]
    moves = np.stack(
        [spec.seg_dst[t, :nseg], spec.seg_mask[t, :nseg], spec.seg_src[t, :nseg]], axis=1
    ).reshape(-1)
    return np.concatenate(
        [
            np.array(head, np.uint64),
            moves.astype(np.uint64),
            spec.chk_key[t, :nchk].astype(np.uint64),
        ]
    )


def write_table(
    directory: str, name: str, values: np.ndarray, codec: str | None, *, sync: bool = True
) -> dict[str, Any]:
    """Write the sorted table ``values`` as ``directory/name``, plain (``codec=None``) or coded;
    return its manifest entry (a coded one carries ``"codec"`` and ``"values"``). ``sync``: as
    :func:`neardup.index.storage.write_array`'s."""
    if codec is None:
        return write_array(directory, name, values, sync=sync)
    if codec != "ef":
        raise ValueError(f"unknown table codec {codec!r}; use one of {', '.join(CODECS)}")
    entry = write_array(directory, name, encode(values), sync=sync)
    entry["codec"] = codec
    entry["values"] = len(values)
    return entry


def load_table(directory: str, entry: dict[str, Any]) -> np.ndarray | CompressedTable:
    """Open a table file: a memory-mapped uint64 array, or a :class:`CompressedTable` over one
    when the entry names a codec."""
    words = np.asarray(load_array(directory, entry))
    codec = entry.get("codec")
    if codec is None:
        return words
    path = os.path.join(directory, entry["name"])
    if codec != "ef":
        raise CorruptIndexError(f"{path}: unknown table codec {codec!r}; upgrade neardup")
    table = CompressedTable(words, path)
    if table.n != entry.get("values"):
        raise CorruptIndexError(
            f"{path}: holds {table.n} values, the manifest records {entry.get('values')}"
        )
    return table


def verify_table(directory: str, entry: dict[str, Any]) -> None:
    """Decode a coded table file and check its structure (nothing for a plain one); raise
    :class:`CorruptIndexError` naming the file."""
    if entry.get("codec") is not None:
        table = load_table(directory, entry)
        assert isinstance(table, CompressedTable)
        table.check()


def set_codec(body: dict[str, Any], codec: str | None) -> None:
    """Make ``body`` (a manifest) describe an index whose tables use ``codec``: the key
    ``"codec"`` and the format version that older readers refuse (plain: no key, version 1;
    an index with sketches has version 3 with either codec)."""
    if codec is not None and codec not in CODECS:
        raise ValueError(f"unknown table codec {codec!r}; use one of {', '.join(CODECS)}")
    if codec is None:
        body.pop("codec", None)
        body["format_version"] = FORMAT_VERSION
    else:
        body["codec"] = codec
        body["format_version"] = CODEC_FORMAT_VERSION
    if body.get("sketch_words") is not None:
        body["format_version"] = SKETCH_FORMAT_VERSION

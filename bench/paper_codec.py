"""The block coding of Manku, Jain and Das Sarma (WWW 2007), as a peer for bench/compress.py.

A sorted table is cut into blocks of ``block_bytes``. A block starts with a whole 64-bit value;
each next value is coded by ``h``, the position of the highest bit where it differs from its
predecessor (Huffman-coded over the table's distribution of ``h``), followed by the ``h`` bits
below it (bit ``h`` itself is 1, the bits above equal the predecessor's). The last value of every
block is kept in memory, so a probe binary-searches those and decodes one block (two when a run
of equal prefixes crosses a block boundary). A repeated value is symbol 64 with no extra bits.

Bits are written most significant first within each uint64 word.
"""

from __future__ import annotations

import heapq
from typing import NamedTuple

import numpy as np
from numba import njit

_U1 = np.uint64(1)


class BlockTable(NamedTuple):
    words: np.ndarray  # uint64, blocks of block_bytes // 8 words
    last: np.ndarray  # uint64, last value of each block (kept in memory)
    first_index: np.ndarray  # int64, index of each block's first value
    n: int
    block_words: int
    code: np.ndarray  # uint64 canonical code of each symbol 0..64
    length: np.ndarray  # int64 code length of each symbol (0: unused)
    # canonical decoding tables, by code length 1..max
    first_code: np.ndarray
    count: np.ndarray
    offset: np.ndarray
    symbols: np.ndarray

    @property
    def disk_bytes(self) -> int:
        return int(self.words.nbytes)

    @property
    def memory_bytes(self) -> int:
        return int(self.last.nbytes)


@njit(cache=True)
def _symbols(values):
    n = values.shape[0]
    h = np.empty(max(n - 1, 0), dtype=np.int64)
    for i in range(1, n):
        x = values[i] ^ values[i - 1]
        if x == 0:
            h[i - 1] = 64
        else:
            b = 63
            while (x >> np.uint64(b)) == 0:
                b -= 1
            h[i - 1] = b
    return h


def _huffman_lengths(freq: np.ndarray) -> np.ndarray:
    length = np.zeros(len(freq), dtype=np.int64)
    live = [(int(f), i, [i]) for i, f in enumerate(freq) if f > 0]
    if len(live) == 1:
        length[live[0][1]] = 1
        return length
    heapq.heapify(live)
    tie = len(freq)
    while len(live) > 1:
        fa, _, a = heapq.heappop(live)
        fb, _, b = heapq.heappop(live)
        for s in a + b:
            length[s] += 1
        heapq.heappush(live, (fa + fb, tie, a + b))
        tie += 1
    return length


def _canonical(length: np.ndarray):
    syms = sorted((int(length[s]), s) for s in range(len(length)) if length[s] > 0)
    maxlen = max((L for L, _ in syms), default=1)
    code = np.zeros(len(length), dtype=np.uint64)
    first_code = np.zeros(maxlen + 2, dtype=np.int64)
    count = np.zeros(maxlen + 2, dtype=np.int64)
    offset = np.zeros(maxlen + 2, dtype=np.int64)
    symbols = np.array([s for _, s in syms], dtype=np.int64)
    c = 0
    prev = syms[0][0] if syms else 1
    for k, (L, s) in enumerate(syms):
        c <<= L - prev
        prev = L
        if count[L] == 0:
            first_code[L] = c
            offset[L] = k
        count[L] += 1
        code[s] = c
        c += 1
    return code, first_code, count, offset, symbols


@njit(cache=True, inline="always")
def _put(words, bitpos, value, nbits):
    # write the low nbits of value at bitpos, most significant bit first
    while nbits > 0:
        w = bitpos >> 6
        room = 64 - (bitpos & 63)
        take = min(room, nbits)
        part = (value >> np.uint64(nbits - take)) & ((_U1 << np.uint64(take)) - _U1)
        words[w] |= part << np.uint64(room - take)
        bitpos += take
        nbits -= take
    return bitpos


@njit(cache=True, inline="always")
def _get(words, bitpos, nbits):
    v = np.uint64(0)
    while nbits > 0:
        w = bitpos >> 6
        room = 64 - (bitpos & 63)
        take = min(room, nbits)
        part = (words[w] >> np.uint64(room - take)) & ((_U1 << np.uint64(take)) - _U1)
        v = (v << np.uint64(take)) | part
        bitpos += take
        nbits -= take
    return v


@njit(cache=True)
def _plan(h, length, block_bits):
    """Index of the first value of every block (greedy fill)."""
    n = h.shape[0] + 1
    starts = np.empty(n, dtype=np.int64)
    nb = 0
    starts[nb] = 0
    nb += 1
    used = 64
    for i in range(1, n):
        s = h[i - 1]
        cost = length[s] + (s if s < 64 else 0)
        if used + cost > block_bits:
            starts[nb] = i
            nb += 1
            used = 64
        else:
            used += cost
    return starts[:nb].copy()


@njit(cache=True)
def _encode(values, h, starts, code, length, block_words, words, last):
    n = values.shape[0]
    nb = starts.shape[0]
    for b in range(nb):
        lo = starts[b]
        hi = starts[b + 1] if b + 1 < nb else n
        pos = b * block_words * 64
        pos = _put(words, pos, values[lo], 64)
        for i in range(lo + 1, hi):
            s = h[i - 1]
            pos = _put(words, pos, code[s], length[s])
            if s < 64 and s > 0:
                pos = _put(words, pos, values[i], s)
        last[b] = values[hi - 1]


@njit(cache=True)
def _decode_block(words, b, count_in_block, block_words, first_code, count, offset, symbols, out):
    pos = b * block_words * 64
    v = _get(words, pos, 64)
    pos += 64
    out[0] = v
    for k in range(1, count_in_block):
        c = 0
        L = 0
        while True:
            c = (c << 1) | np.int64(_get(words, pos, 1))
            pos += 1
            L += 1
            if c - first_code[L] < count[L] and c >= first_code[L]:
                s = symbols[offset[L] + c - first_code[L]]
                break
        if s < 64:
            low = _get(words, pos, s) if s > 0 else np.uint64(0)
            pos += s
            keep = (v >> np.uint64(s + 1)) << np.uint64(s + 1) if s < 63 else np.uint64(0)
            v = keep | (_U1 << np.uint64(s)) | low
        out[k] = v
    return count_in_block


def encode(values: np.ndarray, block_bytes: int = 1024) -> BlockTable:
    """Code sorted uint64 ``values`` (non-empty) in blocks of ``block_bytes``."""
    values = np.ascontiguousarray(values, dtype=np.uint64)
    h = _symbols(values)
    freq = np.bincount(h, minlength=65)
    length = _huffman_lengths(freq)
    code, first_code, count, offset, symbols = _canonical(length)
    block_words = block_bytes // 8
    starts = _plan(h, length, block_words * 64)
    words = np.zeros(len(starts) * block_words + 1, dtype=np.uint64)
    last = np.empty(len(starts), dtype=np.uint64)
    _encode(values, h, starts, code, length, block_words, words, last)
    return BlockTable(
        words,
        last,
        starts,
        len(values),
        block_words,
        code,
        length,
        first_code,
        count,
        offset,
        symbols,
    )


@njit(cache=True)
def _decode_all(words, starts, n, block_words, first_code, count, offset, symbols):
    out = np.empty(n, dtype=np.uint64)
    nb = starts.shape[0]
    for b in range(nb):
        hi = starts[b + 1] if b + 1 < nb else n
        _decode_block(
            words, b, hi - starts[b], block_words, first_code, count, offset, symbols,
            out[starts[b] :],
        )  # fmt: skip
    return out


def decode(t: BlockTable) -> np.ndarray:
    return _decode_all(
        t.words, t.first_index, t.n, t.block_words, t.first_code, t.count, t.offset, t.symbols
    )


@njit(cache=True)
def _prefix_counts(words, last, starts, n, block_words, first_code, count, offset, symbols,
                   prefixes, shift):  # fmt: skip
    """For each prefix, how many values carry it: binary search of the in-memory last values,
    then decode the block (and the next ones while the run continues)."""
    nb = starts.shape[0]
    buf = np.empty(block_words * 64, dtype=np.uint64)
    out = np.zeros(prefixes.shape[0], dtype=np.int64)
    sh = np.uint64(shift)
    for q in range(prefixes.shape[0]):
        pre = prefixes[q]
        lo_val = pre << sh
        a, b = 0, nb
        while a < b:
            m = (a + b) // 2
            if last[m] < lo_val:
                a = m + 1
            else:
                b = m
        blk = a
        done = False
        while blk < nb and not done:
            hi = starts[blk + 1] if blk + 1 < nb else n
            c = _decode_block(
                words, blk, hi - starts[blk], block_words, first_code, count, offset, symbols, buf
            )
            for k in range(c):
                p = buf[k] >> sh
                if p == pre:
                    out[q] += 1
                elif p > pre:
                    done = True
                    break
            blk += 1
    return out


def prefix_counts(t: BlockTable, prefixes: np.ndarray, shift: int) -> np.ndarray:
    return _prefix_counts(
        t.words, t.last, t.first_index, t.n, t.block_words, t.first_code, t.count, t.offset,
        t.symbols, np.ascontiguousarray(prefixes, dtype=np.uint64), int(shift),
    )  # fmt: skip

"""Numba kernels: the whole text-to-fingerprint pipeline over a chunk of documents, GIL-free.

Only ``_``-prefixed ``@njit(cache=True, nogil=True)`` functions over arrays, and the packed
inputs they take (:class:`ChunkData`, :class:`KernelOptions`). Each document is normalized
(``_normalize.py``) into UTF-8, tokenized, its tokens hashed, shingled and tallied
(``_kernels.py``).

Numba's on-disk cache of these kernels is keyed by this file alone: after editing
``_normalize.py`` or ``_kernels.py`` in a source checkout, delete the ``__pycache__`` numba files
(``*.nbi``, ``*.nbc``) or the kernels here keep the old code.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
from numba import njit

from neardup.fingerprints._kernels import (
    _GOLDEN,
    _S32,
    _U0,
    HASH_FNV1A64,
    SHINGLE_CYCLIC,
    TOK_ASCII_LETTERS,
    TOK_UNICODE,
    WEIGHT_COUNT,
    WEIGHT_UNIQUE,
    _fmix64,
    _fnv1a64_lower,
    _hash_bytes,
    _rotl64,
    _tally_unit,
    _tally_weighted,
    _tokens_ascii,
    _tokens_unicode,
    _weigh_sorted,
)
from neardup.fingerprints._normalize import (
    NORM_CASEFOLD,
    NORM_NONE,
    _char_to_unit_offsets,
    _is_ascii,
    _lower_ascii,
    _narrow_ascii,
    _normalize_doc,
)

# how a document's text is held (ChunkData.kind)
KIND_UTF8 = 0  # UTF-8 in buf8, not known to be ASCII (bytes input, or str with lone surrogates)
KIND_UTF16 = 1  # UTF-16 code units in buf16 (str with some non-ASCII character)
KIND_ASCII = 2  # ASCII in buf8 (str.isascii())


class ChunkData(NamedTuple):
    """A chunk of documents as the kernels read it (see ``batch.encode_chunk``).

    Document ``d`` is ``buf8[off8[d]:off8[d + 1]]`` (UTF-8) unless ``kind[d] == KIND_UTF16``,
    then ``buf16[off16[d]:off16[d + 1]]`` (UTF-16 little-endian code units, no lone
    surrogates); the other range is empty. ``off16`` counts code points where
    ``off16_in_chars`` (``str`` lengths; the kernel turns them into code units), else units.
    """

    buf8: np.ndarray  # uint8, at least one byte
    off8: np.ndarray  # int64[n + 1]
    buf16: np.ndarray  # uint16, at least one unit
    off16: np.ndarray  # int64[n + 1]
    kind: np.ndarray  # uint8[n]: KIND_*
    off16_in_chars: bool


class KernelOptions(NamedTuple):
    """The built-in pipeline's settings as kernel codes (``TOK_*``, ``HASH_*``, ``SHINGLE_*``,
    ``WEIGHT_*``, ``NORM_*``); ``window`` in tokens, ``reverse`` 1 for simhash-cpp's bit order."""

    tokenizer: int
    hash_code: int
    shingle: int
    window: int
    weighting: int
    reverse: int
    norm: int


@njit(cache=True, nogil=True)
def _doc_features(src, a, b, classes, opt, lower, starts, ends, toks, ring, feats):
    """Feature hashes of the (normalized) UTF-8 document ``src[a:b]`` into ``feats[:m]``;
    returns ``m``. With ``lower`` (FNV-1a only) tokens are hashed with ASCII A-Z as a-z. The
    scratch arrays hold at least ``b - a + 1`` items."""
    if opt.tokenizer == TOK_ASCII_LETTERS:
        ntok = _tokens_ascii(src, a, b, starts, ends)
    else:
        ntok = _tokens_unicode(src, a, b, classes, opt.tokenizer == TOK_UNICODE, starts, ends)
    if lower:
        for t in range(ntok):
            toks[t] = _fnv1a64_lower(src, starts[t], ends[t])
    else:
        for t in range(ntok):
            toks[t] = _hash_bytes(src, starts[t], ends[t], opt.hash_code)
    window = opt.window
    m = 0
    if opt.shingle == SHINGLE_CYCLIC:
        # moving-window cyclic polynomial: one value per token, from the first token on
        for k in range(window):
            ring[k] = _U0
        cur = _U0
        pos = 0
        for t in range(ntok):
            v = toks[t]
            cur = _rotl64(cur, 1) ^ _rotl64(ring[pos], window) ^ v
            ring[pos] = v
            pos = (pos + 1) % window
            feats[m] = cur
            m += 1
    elif ntok > 0:
        width = min(window, ntok)
        for s in range(ntok - width + 1):
            h = toks[s]
            for k in range(1, width):
                h = h * _GOLDEN + toks[s + k]
            feats[m] = _fmix64(h)
            m += 1
    return m


@njit(cache=True, nogil=True)
def _tally(feats, m, opt, weights):
    """The fingerprint of ``feats[:m]`` under ``opt.weighting`` (sorts ``feats`` unless
    counting every occurrence)."""
    reverse = opt.reverse != 0
    if opt.weighting == WEIGHT_COUNT:
        return _tally_unit(feats, m, reverse)
    u = _weigh_sorted(feats, m, opt.weighting, weights)
    if opt.weighting == WEIGHT_UNIQUE:
        return _tally_unit(feats, u, reverse)
    return _tally_weighted(feats, weights, u, reverse)


@njit(cache=True, nogil=True)
def _append_keys(feats, m, scratch, keys, nk):
    """Append the top 32 bits (63..32) of ``feats[:m]``, sorted and unique, to ``keys[:nk]``;
    returns ``(keys, nk)`` (``keys`` grows as needed)."""
    for t in range(m):
        scratch[t] = feats[t] >> _S32  # uint64: the sort compiled for the tally serves here too
    part = scratch[:m]
    part.sort()
    if nk + m > keys.shape[0]:
        grown = np.empty(max(2 * keys.shape[0], nk + m), dtype=np.uint32)
        for t in range(nk):  # (a loop: slice assignment costs seconds of compiling)
            grown[t] = keys[t]
        keys = grown
    for t in range(m):
        if t == 0 or part[t] != part[t - 1]:
            keys[nk] = part[t]
            nk += 1
    return keys, nk


@njit(cache=True, nogil=True)
def _fingerprint_chunk(chunk, classes, tables, opt, out, key_off, want_keys):
    """Fingerprint every document of ``chunk`` (a :class:`ChunkData`) into ``out``.

    ``classes`` is the tokenizer's code point table, ``tables`` the normalization tables
    (``unicode_tables.NormTables``), ``opt`` a :class:`KernelOptions`. With ``want_keys``, also
    the shingle keys of each document (see ``_append_keys``): document ``d`` has
    ``keys[key_off[d]:key_off[d + 1]]`` of the returned ``keys`` (``key_off``: int64[n + 1],
    filled here); else returns an empty array.
    """
    buf8 = chunk.buf8
    off8 = chunk.off8
    buf16 = chunk.buf16
    off16 = chunk.off16
    kind = chunk.kind
    if chunk.off16_in_chars:
        off16 = _char_to_unit_offsets(buf16, off16)
    ndocs = off8.shape[0] - 1
    maxlen = 1
    for d in range(ndocs):
        maxlen = max(maxlen, off8[d + 1] - off8[d], 3 * (off16[d + 1] - off16[d]))
    cap = maxlen + 1
    starts = np.empty(cap, dtype=np.int64)
    ends = np.empty(cap, dtype=np.int64)
    toks = np.empty(cap, dtype=np.uint64)
    feats = np.empty(cap, dtype=np.uint64)
    weights = np.empty(cap, dtype=np.float64)
    ring = np.zeros(max(opt.window, 1), dtype=np.uint64)
    norm = np.empty(maxlen + 16, dtype=np.uint8)
    work = np.empty(64, dtype=np.int32)
    keys = np.empty(max(1, off8[ndocs] + off16[ndocs]) // 4 + 16 if want_keys else 0, np.uint32)
    scratch = np.empty(cap if want_keys else 0, dtype=np.uint64)
    nk = 0
    key_off[0] = 0
    fold = (opt.norm & NORM_CASEFOLD) != 0
    # ASCII letters are the same code units in UTF-16: no transcoding needed
    narrow16 = opt.norm == NORM_NONE and opt.tokenizer == TOK_ASCII_LETTERS
    for d in range(ndocs):
        a = off8[d]
        b = off8[d + 1]
        k = kind[d]
        if k == KIND_UTF8 and opt.norm != NORM_NONE and _is_ascii(buf8, a, b):
            k = KIND_ASCII
        # one call site of _doc_features: each is inlined whole, and compiling takes long
        src = buf8
        lower = False
        if k == KIND_UTF16 and narrow16:
            b = _narrow_ascii(buf16, off16[d], off16[d + 1], norm)
            src = norm
            a = 0
        elif k != KIND_UTF16 and (opt.norm == NORM_NONE or (k == KIND_ASCII and not fold)):
            pass  # as it is: no normalization, or NFKC alone of ASCII
        elif k == KIND_ASCII and opt.hash_code == HASH_FNV1A64:
            lower = True  # NFKC and case folding of ASCII: A-Z to a-z, while hashing
        elif k == KIND_ASCII:
            _lower_ascii(buf8, a, b, norm)
            src = norm
            b -= a
            a = 0
        else:
            if k == KIND_UTF16:
                norm, nb, work = _normalize_doc(
                    buf16, off16[d], off16[d + 1], opt.norm, tables, norm, work
                )
            else:
                norm, nb, work = _normalize_doc(buf8, a, b, opt.norm, tables, norm, work)
            if nb + 1 > cap:
                cap = 2 * (nb + 1)
                starts = np.empty(cap, dtype=np.int64)
                ends = np.empty(cap, dtype=np.int64)
                toks = np.empty(cap, dtype=np.uint64)
                feats = np.empty(cap, dtype=np.uint64)
                weights = np.empty(cap, dtype=np.float64)
                if want_keys:
                    scratch = np.empty(cap, dtype=np.uint64)
            src = norm
            a = 0
            b = nb
        m = _doc_features(src, a, b, classes, opt, lower, starts, ends, toks, ring, feats)
        if want_keys:
            keys, nk = _append_keys(feats, m, scratch, keys, nk)
            key_off[d + 1] = nk
        out[d] = _tally(feats, m, opt, weights)
    return keys[:nk].copy()

"""Numba kernels: the whole text-to-fingerprint pipeline over a chunk of documents, GIL-free.

Only ``_``-prefixed ``@njit(cache=True, nogil=True)`` functions over arrays, the packed inputs
they take (:class:`ChunkData`, :class:`KernelOptions`) and :func:`chunk_kernel`, which picks
the compiled pipeline for a :class:`Spec`. Each document is normalized (``_normalize.py``)
into UTF-8, tokenized, its tokens hashed, shingled and tallied (``_kernels.py``).

A chunk kernel is compiled for one :class:`Spec`: whether it normalizes, emits shingle keys
and meets UTF-8 or UTF-16 text, and, for the stage families of a preset, its tokenizer, hash
and weighting (other combinations pick those at run time: trying many options compiles one
kernel, not one each). numba drops the branches a spec rules out before it compiles, so a run
compiles only the stages its options and its text use (a run on ASCII text never compiles the
normalization), and every spec gives the same fingerprints for the text it accepts.

Numba's on-disk cache of these kernels is keyed by this file alone: after editing
``_normalize.py`` or ``_kernels.py`` in a source checkout, delete the ``__pycache__`` numba files
(``*.nbi``, ``*.nbc``) or the kernels here keep the old code.
"""

from __future__ import annotations

import threading
from typing import Any, NamedTuple

import numpy as np

from neardup.compiled import njit
from neardup.fingerprints._kernels import (
    _S32,
    _U0,
    HASH_FNV1A64,
    SHINGLE_CYCLIC,
    TOK_ASCII_LETTERS,
    TOK_UNICODE,
    WEIGHT_COUNT,
    WEIGHT_UNIQUE,
    _fnv1a64_lower,
    _radix_sort,
    _rotl64,
    _tokens_ascii,
    _tokens_unicode,
    _weigh_sorted,
    jenkins64_bytes,
    tally_unit,
    tally_weighted,
)
from neardup.fingerprints._normalize import (
    NORM_CASEFOLD,
    _char_to_unit_offsets,
    _is_ascii,
    _lower_ascii,
    _narrow_ascii,
    _normalize_doc,
)
from neardup.primitives import GOLDEN, fmix64, fnv1a64

# how a document's text is held (ChunkData.kind)
KIND_UTF8 = 0  # UTF-8 in buf8, not known to be ASCII (bytes input, or str with lone surrogates)
KIND_UTF16 = 1  # UTF-16 code units in buf16 (str with some non-ASCII character)
KIND_ASCII = 2  # ASCII in buf8 (str.isascii())

_ONE = np.int64(1)


class ChunkData(NamedTuple):
    """A chunk of documents as the kernels read it (see ``batch.encode_chunk``).

    Document ``d`` is ``buf8[off8[d]:off8[d + 1]]`` (UTF-8) unless ``kind[d] == KIND_UTF16``,
    then ``buf16[off16[d]:off16[d + 1]]`` (UTF-16 little-endian code units, no lone
    surrogates); the other range is empty. ``off16`` counts code points where
    ``off16_in_chars`` (``str`` lengths; the kernel turns them into code units), else units.
    ``kinds`` has bit ``1 << k`` set for every kind ``k`` in ``kind`` (it picks the kernel).
    """

    buf8: np.ndarray  # uint8, at least one byte
    off8: np.ndarray  # int64[n + 1]
    buf16: np.ndarray  # uint16, at least one unit
    off16: np.ndarray  # int64[n + 1]
    kind: np.ndarray  # uint8[n]: KIND_*
    off16_in_chars: bool
    kinds: int


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


#: a :class:`Spec` field left to the options at run time
ANY = -1
# tokenizer families (Spec.tokens)
TOKENS_ASCII = 0  # "ascii_letters"
TOKENS_UNICODE = 1  # "unicode", "unicode_words"


class Spec(NamedTuple):
    """What one compiled chunk kernel handles (see :func:`chunk_kernel`)."""

    tokens: int  # TOKENS_* or ANY
    hash_code: int  # HASH_* or ANY
    collapse: int  # 1: weighting "unique" or "log" (features sorted, equal ones collapsed),
    # 0: "count", or ANY
    normalize: bool  # a normalization other than "none"
    keys: bool  # shingle keys as well (features_many)
    utf8: bool  # documents of KIND_UTF8 that need normalizing may occur
    utf16: bool  # documents of KIND_UTF16 may occur


@njit(cache=True, nogil=True)
def _append_keys(feats, m, scratch, tmp, counts, keys, nk):
    """Append the top 32 bits (63..32) of ``feats[:m]``, sorted and unique, to ``keys[:nk]``;
    returns ``(keys, nk)`` (``keys`` grows as needed). ``scratch`` and ``tmp`` hold ``m``
    values, ``counts`` 1024 (see ``_radix_sort``)."""
    for t in range(m):
        scratch[t] = feats[t] >> _S32
    _radix_sort(scratch, m, np.int64(4), tmp, counts)  # (not literals: one compile)
    if nk + m > keys.shape[0]:
        grown = np.empty(max(2 * keys.shape[0], nk + m), dtype=np.uint32)
        for t in range(nk):  # (a loop: slice assignment costs seconds of compiling)
            grown[t] = keys[t]
        keys = grown
    for t in range(m):
        if t == 0 or scratch[t] != scratch[t - 1]:
            keys[nk] = scratch[t]
            nk += 1
    return keys, nk


_KERNELS: dict[Spec, Any] = {}
_LOCK = threading.Lock()


def chunk_kernel(spec: Spec) -> Any:
    """The chunk kernel compiled for ``spec`` (numba compiles it, or loads it from its cache,
    on the first call), or one made before in this process that also accepts more kinds of
    text: ``kernel(chunk, classes, tables, opt, out, key_off) -> keys``.

    It fingerprints every document of ``chunk`` (a :class:`ChunkData` whose kinds ``spec``
    accepts) into ``out``. ``classes`` is the tokenizer's code point table, ``tables`` the
    normalization tables (``unicode_tables.NormTables``), ``opt`` a :class:`KernelOptions`
    that agrees with ``spec``. With ``spec.keys``, also the shingle keys of each document (see
    ``_append_keys``): document ``d`` has ``keys[key_off[d]:key_off[d + 1]]`` of the returned
    ``keys`` (``key_off``: int64[n + 1], filled here); else returns an empty array.
    """
    kernel = _KERNELS.get(spec)
    if kernel is not None:
        return kernel
    with _LOCK:
        for s, k in _KERNELS.items():  # one made already for these kinds of text and more
            if s[:5] == spec[:5] and s.utf8 >= spec.utf8 and s.utf16 >= spec.utf16:
                return k
        kernel = _KERNELS[spec] = _make_chunk_kernel(*spec)
        return kernel


def _named(name: str) -> Any:
    """A decorator that renames a function (its ``__name__`` and ``__qualname__``)."""

    def rename(f: Any) -> Any:
        f.__name__ = f.__qualname__ = name
        return f

    return rename


def _make_chunk_kernel(tokens, hash_code, collapse, normalize, keys, utf8, utf16):
    # Closure variables are constants to numba: it drops the branches they rule out before
    # typing, so nothing behind them is compiled (its cache keys each variant by their values).
    # Each choice below is made here when the spec fixes it, else (ANY) by ``opt`` at run time.
    ascii_only = tokens == TOKENS_ASCII
    tokens_any = tokens == ANY
    fnv_only = hash_code == HASH_FNV1A64
    hash_any = hash_code == ANY
    collapse_only = collapse == 1
    weights_any = collapse == ANY
    norm8 = utf8 and normalize  # UTF-8 documents normalized (after a look for ASCII)
    # UTF-16 documents narrowed to bytes (ASCII letters are the same code units) ...
    narrow_only = utf16 and not normalize and ascii_only
    narrow_any = utf16 and not normalize and tokens_any
    norm16 = utf16 and not narrow_only  # ... else normalized, or at least transcoded to UTF-8
    # case folding of ASCII is A-Z to a-z: while hashing (FNV-1a), else into a scratch copy
    lower_fnv = normalize and (fnv_only or hash_any)
    lower_copy = normalize and not fnv_only
    sorting = keys or not (collapse == 0)  # scratch for the features' radix sort

    # Each variant gets a name of its own: numba names a compiled function's environment (its
    # constants, such as the dtype of the keys it returns) after the function and a counter of
    # the compiling process, so two variants of one name compiled by two processes could share
    # an environment name when both are loaded, and one would read the other's constants
    # ("'descr' is NULL" when it returns its keys). Their cache entries are apart too.
    variant = "_".join(
        str(int(v)) for v in (tokens, hash_code, collapse, normalize, keys, utf8, utf16)
    )

    @njit(cache=True, nogil=True)
    @_named(f"_fingerprint_chunk_{variant.replace('-', 'm')}")
    def _fingerprint_chunk(chunk, classes, tables, opt, out, key_off):
        buf8 = chunk.buf8
        off8 = chunk.off8
        buf16 = chunk.buf16
        off16 = chunk.off16
        kind = chunk.kind
        if utf16:
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
        window = opt.window
        ring = np.zeros(max(window, 1), dtype=np.uint64)
        norm = np.empty(maxlen + 16, dtype=np.uint8)
        work = np.empty(64, dtype=np.int32)
        nkeys = max(1, off8[ndocs] + off16[ndocs]) // 4 + 16
        found = np.empty(nkeys if keys else 0, dtype=np.uint32)
        scratch = np.empty(cap if keys else 0, dtype=np.uint64)
        tmp = np.empty(cap if sorting else 0, dtype=np.uint64)
        counts = np.empty(2048 if sorting else 0, dtype=np.int64)
        nk = np.int64(0)  # not the literal 0: a call typed with a literal compiles twice
        key_off[0] = 0
        fold = (opt.norm & NORM_CASEFOLD) != 0
        split_chars = opt.tokenizer == TOK_UNICODE
        reverse = opt.reverse != 0
        for d in range(ndocs):
            a = off8[d]
            b = off8[d + 1]
            k = kind[d]
            src = buf8
            lower = False
            nb = np.int64(-1)  # the length of the document normalized into ``norm``
            if norm8:
                if k == KIND_UTF8 and _is_ascii(buf8, a, b):
                    k = KIND_ASCII
            if k == KIND_ASCII:
                if lower_fnv:
                    lower = fold and (fnv_only or opt.hash_code == HASH_FNV1A64)
                if lower_copy:
                    if fold and not lower:
                        _lower_ascii(buf8, a, b, norm)
                        src = norm
                        b -= a
                        a = 0
            elif k == KIND_UTF16:
                if narrow_only or (narrow_any and opt.tokenizer == TOK_ASCII_LETTERS):
                    b = _narrow_ascii(buf16, off16[d], off16[d + 1], norm)
                    src = norm
                    a = 0
                elif norm16:
                    norm, nb, work = _normalize_doc(
                        buf16, off16[d], off16[d + 1], opt.norm, tables, norm, work
                    )
            elif norm8:  # KIND_UTF8, not ASCII
                norm, nb, work = _normalize_doc(buf8, a, b, opt.norm, tables, norm, work)
            if nb >= 0:
                if nb + 1 > cap:
                    cap = 2 * (nb + 1)
                    starts = np.empty(cap, dtype=np.int64)
                    ends = np.empty(cap, dtype=np.int64)
                    toks = np.empty(cap, dtype=np.uint64)
                    feats = np.empty(cap, dtype=np.uint64)
                    weights = np.empty(cap, dtype=np.float64)
                    if keys:
                        scratch = np.empty(cap, dtype=np.uint64)
                    if sorting:
                        tmp = np.empty(cap, dtype=np.uint64)
                src = norm
                a = 0
                b = nb
            # tokens, their hashes
            if ascii_only or (tokens_any and opt.tokenizer == TOK_ASCII_LETTERS):
                ntok = _tokens_ascii(src, a, b, starts, ends)
            else:
                ntok = _tokens_unicode(src, a, b, classes, split_chars, starts, ends)
            if lower_fnv and lower:
                for t in range(ntok):
                    toks[t] = _fnv1a64_lower(src, starts[t], ends[t])
            elif fnv_only or (hash_any and opt.hash_code == HASH_FNV1A64):
                for t in range(ntok):
                    toks[t] = fnv1a64(src, starts[t], ends[t])
            else:
                for t in range(ntok):
                    toks[t] = jenkins64_bytes(src, starts[t], ends[t], _U0)
            # shingles
            m = np.int64(0)
            if opt.shingle == SHINGLE_CYCLIC:
                # moving-window cyclic polynomial: one value per token, from the first token on
                for q in range(window):
                    ring[q] = _U0
                cur = _U0
                pos = 0
                for t in range(ntok):
                    v = toks[t]
                    cur = _rotl64(cur, _ONE) ^ _rotl64(ring[pos], window) ^ v
                    ring[pos] = v
                    pos = (pos + 1) % window
                    feats[m] = cur
                    m += 1
            elif ntok > 0:
                width = min(window, ntok)
                for s in range(ntok - width + 1):
                    h = toks[s]
                    for q in range(1, width):
                        h = h * GOLDEN + toks[s + q]
                    feats[m] = fmix64(h)
                    m += 1
            if keys:
                found, nk = _append_keys(feats, m, scratch, tmp, counts, found, nk)
                key_off[d + 1] = nk
            # the tally (sorts the features unless counting every occurrence)
            if collapse_only or (weights_any and opt.weighting != WEIGHT_COUNT):
                u = _weigh_sorted(feats, m, opt.weighting, weights, tmp, counts)
                if opt.weighting == WEIGHT_UNIQUE:
                    out[d] = tally_unit(feats, u, reverse)
                else:
                    out[d] = tally_weighted(feats, weights, u, reverse)
            else:
                out[d] = tally_unit(feats, m, reverse)
        return found[:nk].copy()

    return _fingerprint_chunk

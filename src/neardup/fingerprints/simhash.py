"""Simhash of text: the ``Fingerprinter`` pipeline (normalize, tokenize, hash, shingle, tally).

A fingerprint is an unsigned 64-bit integer; bit 63 is the most significant. For every bit
position ``i`` the tally adds a feature's weight where bit ``i`` of its hash is 1 and subtracts it
where it is 0; the fingerprint has bit ``i`` set where the tally is > 0 ("natural" bit order). The
``reference`` preset reproduces seomoz/simhash-cpp, whose tally of feature bit ``i`` sets
fingerprint bit ``63 - i`` ("reversed" bit order).
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable, Iterable, Sequence
from typing import Any, NamedTuple

import numpy as np

from neardup.fingerprints import _kernels as K
from neardup.fingerprints import _normalize as N
from neardup.fingerprints import _pipeline as P
from neardup.fingerprints.batch import (
    decode_document,
    encode_chunk,
    encode_one,
    join_keys,
    plan_chunks,
    run_chunks,
    threads_for,
)
from neardup.fingerprints.hashes import resolve_hash
from neardup.fingerprints.tally import MASK64, compute, compute_batch, feature_hash
from neardup.fingerprints.tokenize import (
    NORMALIZATIONS,
    TOKENIZERS,
    ascii_char_classes,
    char_classes,
)
from neardup.fingerprints.unicode_tables import empty_tables, norm_tables
from neardup.fingerprints.utf8 import features_utf8

__all__ = ["PRESETS", "Features", "Fingerprinter", "compute", "compute_batch", "fingerprint"]

Document = str | bytes


class Features(NamedTuple):
    """Fingerprints and shingle keys of documents (see :meth:`Fingerprinter.features_many`)."""

    fingerprints: np.ndarray  # uint64[n]
    offsets: np.ndarray  # int64[n + 1]
    keys: np.ndarray  # uint32[offsets[-1]]


#: Named configurations. ``reference`` is bit-exact to seomoz/simhash-cpp's ``hash_text``;
#: ``default`` was chosen by the evaluation in ``bench/eval_fingerprint.py --grid`` (windows 1-5 x
#: count/unique/log weighting: 3-token shingles counted per occurrence scored best).
PRESETS: dict[str, dict[str, Any]] = {
    "reference": {
        "normalize": "none",
        "tokenizer": "ascii_letters",
        "window": 3,
        "hash": "jenkins",
        "shingle": "cyclic",
        "weighting": "count",
        "bit_order": "reversed",
    },
    "default": {
        "normalize": "nfkc_casefold",
        "tokenizer": "unicode",
        "window": 3,
        "hash": "fnv1a64",
        "shingle": "chain",
        "weighting": "count",
        "bit_order": "natural",
    },
}

_SHINGLES = {"cyclic": K.SHINGLE_CYCLIC, "chain": K.SHINGLE_CHAIN}
_WEIGHTINGS = {"count": K.WEIGHT_COUNT, "unique": K.WEIGHT_UNIQUE, "log": K.WEIGHT_LOG}
_BIT_ORDERS = ("natural", "reversed")
_NORMS = {
    "none": N.NORM_NONE,
    "casefold": N.NORM_CASEFOLD,
    "nfkc": N.NORM_NFKC,
    "nfkc_casefold": N.NORM_NFKC_CASEFOLD,
}


_NO_CLASSES = np.zeros(1, dtype=np.uint8)  # the ascii_letters tokenizer reads no table


@functools.cache
def _preset_families() -> set[tuple[int, int, int]]:
    """(tokenizer family, hash, collapsing weighting) of each preset's kernel."""
    return {
        (
            P.TOKENS_ASCII if p["tokenizer"] == "ascii_letters" else P.TOKENS_UNICODE,
            resolve_hash(p["hash"])[1],
            int(p["weighting"] != "count"),
        )
        for p in PRESETS.values()
    }


# ----------------------------------------------------------------------------------------------
# the pipeline


def _fmix64(h: int) -> int:
    h ^= h >> 33
    h = (h * 0xFF51AFD7ED558CCD) & MASK64
    h ^= h >> 33
    h = (h * 0xC4CEB9FE1A85EC53) & MASK64
    h ^= h >> 33
    return h


def _rotl64(x: int, k: int) -> int:
    k %= 64
    return ((x << k) | (x >> (64 - k))) & MASK64 if k else x


def _bit_reverse(x: int) -> int:
    return int(f"{x:064b}"[::-1], 2)


class Fingerprinter:
    """Text to 64-bit simhash, from a tokenizer, a window, a feature hash, a weighting and a
    normalization, each chosen by name or replaced by your own callable.

    Parameters
    ----------
    preset : str, default "default"
        A key of :data:`PRESETS` whose settings the keyword arguments override.
    **overrides
        Any of the settings below, by keyword.

    Other Parameters
    ----------------
    normalize : str or callable
        ``"none"``, ``"casefold"``, ``"nfkc"``, ``"nfkc_casefold"`` or ``str -> str``.
    tokenizer : str or callable
        ``"ascii_letters"``, ``"unicode"``, ``"unicode_words"`` or ``str -> iterable of str``.
    window : int
        Tokens per shingle (>= 1).
    hash : str or callable
        Token hash: ``"jenkins"`` (lookup3, 64-bit as simhash-cpp), ``"fnv1a64"`` or
        ``bytes -> int`` (the token's UTF-8 bytes to an unsigned 64-bit integer).
    shingle : str
        ``"chain"``: one feature per full window of tokens (a document shorter than the window
        gives one feature): ``h = t0; h = h * 0x9E3779B97F4A7C15 + t_k`` over the window's token
        hashes (mod 2**64), then MurmurHash3's 64-bit finalizer.
        ``"cyclic"``: simhash-cpp's moving-window cyclic hash (rotate-xor), one feature per token
        from the first token on.
    weighting : str or callable
        ``"count"`` (every occurrence weighs 1), ``"unique"`` (every distinct shingle weighs 1),
        ``"log"`` (1 + ln(count)) or ``(shingle_text, count) -> float`` called once per distinct
        shingle, where ``shingle_text`` is its tokens joined by single spaces (e.g. TF-IDF).
    bit_order : str
        ``"natural"`` (tally of feature bit i sets fingerprint bit i) or ``"reversed"`` (sets
        bit 63 - i, as simhash-cpp).

    Notes
    -----
    Built-in names run in numba kernels over UTF-8 bytes; a callable tokenizer, hash or weighting
    runs the same pipeline in Python (slower, same results for equivalent functions).

    Examples
    --------
    >>> fp = Fingerprinter("default", window=4)
    >>> fp.fingerprint("The quick brown fox") == fp.fingerprint("the QUICK brown fox")
    True
    """

    _KEYS = ("normalize", "tokenizer", "window", "hash", "shingle", "weighting", "bit_order")

    def __init__(self, preset: str = "default", **overrides: Any) -> None:
        if preset not in PRESETS:
            raise ValueError(f"unknown preset {preset!r}; use one of {sorted(PRESETS)}")
        unknown = sorted(set(overrides) - set(self._KEYS))
        if unknown:
            raise TypeError(f"unknown Fingerprinter option(s) {unknown}; use {list(self._KEYS)}")
        params = {**PRESETS[preset], **overrides}
        self.preset = preset
        self.params: dict[str, Any] = params
        self._choose_text_stages(params)

        window = params["window"]
        if isinstance(window, bool) or not isinstance(window, (int, np.integer)) or window < 1:
            raise ValueError(f"window must be an integer >= 1 (got {window!r})")
        self.window = int(window)

        self._hash, self._hash_code = resolve_hash(params["hash"])

        if params["shingle"] not in _SHINGLES:
            raise ValueError(f"unknown shingle {params['shingle']!r}; use one of {list(_SHINGLES)}")
        self._shingle_code = _SHINGLES[params["shingle"]]

        wt = params["weighting"]
        if callable(wt):
            self._weigh, self._weight_code = wt, None
        elif wt in _WEIGHTINGS:
            self._weigh, self._weight_code = None, _WEIGHTINGS[wt]
        else:
            raise ValueError(
                f"unknown weighting {wt!r}; use one of {list(_WEIGHTINGS)} or a callable"
            )

        if params["bit_order"] not in _BIT_ORDERS:
            raise ValueError(
                f"unknown bit_order {params['bit_order']!r}; use one of {list(_BIT_ORDERS)}"
            )
        self._reverse = params["bit_order"] == "reversed"
        self._prepare_kernels(params)

    def _choose_text_stages(self, params: dict[str, Any]) -> None:
        """The normalization and tokenizer of ``params``: a kernel's code, or a callable."""
        norm = params["normalize"]
        self._norm_code = N.NORM_NONE  # a callable runs in Python, the kernels take its output
        if callable(norm):
            self._normalize: Callable[[str], str] | None = norm
        elif norm in NORMALIZATIONS:
            self._normalize = None if norm == "none" else NORMALIZATIONS[norm]
            self._norm_code = _NORMS[norm]
        else:
            raise ValueError(
                f"unknown normalize {norm!r}; use one of {sorted(NORMALIZATIONS)} or a callable"
            )

        tok = params["tokenizer"]
        if callable(tok):
            self._tokenize, self._tok_code = tok, None
        elif tok in TOKENIZERS:
            self._tokenize, self._tok_code = TOKENIZERS[tok]
        else:
            raise ValueError(
                f"unknown tokenizer {tok!r}; use one of {sorted(TOKENIZERS)} or a callable"
            )

    def _prepare_kernels(self, params: dict[str, Any]) -> None:
        """The compiled kernels' options when every stage has a kernel (else the Python path)."""
        norm = params["normalize"]
        self._py_normalize = callable(norm)
        self._fast = (
            self._tok_code is not None
            and self._hash_code is not None
            and self._weight_code is not None
        )
        if self._fast:
            self._opt = P.KernelOptions(
                tokenizer=self._tok_code,
                hash_code=self._hash_code,
                shingle=self._shingle_code,
                window=self.window,
                weighting=self._weight_code,
                reverse=int(self._reverse),
                norm=self._norm_code,
            )
            families = (
                P.TOKENS_ASCII if self._tok_code == K.TOK_ASCII_LETTERS else P.TOKENS_UNICODE,
                self._hash_code,
                int(self._weight_code != K.WEIGHT_COUNT),
            )
            # the presets' stage families get kernels of their own; others choose at run time
            if families not in _preset_families():
                families = (P.ANY, P.ANY, P.ANY)
            self._spec = P.Spec(
                *families, self._norm_code != N.NORM_NONE, keys=False, utf8=False, utf16=False
            )
            self._kernels: dict[tuple[int, bool], tuple[Any, np.ndarray, Any]] = {}

    def __repr__(self) -> str:
        over = {k: v for k, v in self.params.items() if PRESETS[self.preset].get(k) != v}
        extra = "".join(f", {k}={v!r}" for k, v in over.items())
        return f"Fingerprinter({self.preset!r}{extra})"

    # -- preparing documents ------------------------------------------------------------------

    def _text(self, doc: Document, index: int) -> str:
        text = decode_document(doc, index)
        return self._normalize(text) if self._normalize is not None else text

    # -- the Python path (callables) ----------------------------------------------------------

    def _features_py(self, doc: Document, index: int) -> tuple[list[int], list[str]]:
        text = self._text(doc, index)
        tokens = [
            t if isinstance(t, str) else bytes(t).decode("utf-8") for t in self._tokenize(text)
        ]
        th = [feature_hash(t.encode("utf-8", "surrogatepass"), self._hash) for t in tokens]
        feats: list[int] = []
        names: list[str] = []
        w = self.window
        if self._shingle_code == K.SHINGLE_CYCLIC:
            ring = [0] * w
            cur = 0
            for t, v in enumerate(th):
                pos = t % w
                cur = _rotl64(cur, 1) ^ _rotl64(ring[pos], w) ^ v
                ring[pos] = v
                feats.append(cur)
                names.append(" ".join(tokens[max(0, t - w + 1) : t + 1]))
        elif th:
            width = min(w, len(th))
            for s in range(len(th) - width + 1):
                h = th[s]
                for k in range(1, width):
                    h = (h * 0x9E3779B97F4A7C15 + th[s + k]) & MASK64
                feats.append(_fmix64(h))
                names.append(" ".join(tokens[s : s + width]))
        return feats, names

    def _fingerprint_py(self, doc: Document, index: int) -> int:
        feats, names = self._features_py(doc, index)
        if self._weight_code == K.WEIGHT_COUNT:
            hashes, weights = feats, None
        else:
            counts: dict[int, int] = {}
            first_name: dict[int, str] = {}
            for h, name in zip(feats, names, strict=True):
                counts[h] = counts.get(h, 0) + 1
                first_name.setdefault(h, name)
            hashes = list(counts)
            if self._weight_code == K.WEIGHT_UNIQUE:
                weights = None
            elif self._weight_code == K.WEIGHT_LOG:
                weights = [1.0 + math.log(c) for c in counts.values()]
            else:
                weights = [float(self._weigh(first_name[h], c)) for h, c in counts.items()]
        arr = np.array(hashes, dtype=np.uint64)
        if weights is None:
            fp = int(K.tally_unit(arr, arr.shape[0], False))
        else:
            fp = int(K.tally_weighted(arr, np.array(weights, dtype=np.float64), len(arr), False))
        return _bit_reverse(fp) if self._reverse else fp

    # -- the kernel path ----------------------------------------------------------------------

    def _run_chunk(
        self, docs: Sequence[Document], first: int, want_keys: bool = False
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Fingerprints, key offsets and shingle keys of a chunk (empty keys unless asked)."""
        if self._py_normalize:
            docs = [self._text(d, first + i) for i, d in enumerate(docs)]
        chunk = encode_chunk(docs, first, self._norm_code != N.NORM_NONE)
        out = np.empty(len(docs), dtype=np.uint64)
        key_off = np.zeros(len(docs) + 1, dtype=np.int64)
        kernel, classes, tables = self._kernel(chunk, want_keys)
        keys = kernel(chunk, classes, tables, self._opt, out, key_off)
        return out, key_off, keys

    def _kernel(self, chunk: P.ChunkData, keys: bool) -> tuple[Any, np.ndarray, Any]:
        """The chunk kernel for this fingerprinter's options and the kinds of text in ``chunk``
        (compiled for those alone, so a run compiles only the stages it uses), with the
        tokenizer's and the normalization's tables it reads: for ASCII text only their ASCII
        part, which takes no time to build."""
        got = self._kernels.get((chunk.kinds, keys))
        if got is None:
            spec = self._spec._replace(
                keys=keys,
                utf8=self._spec.normalize and bool(chunk.kinds & (1 << P.KIND_UTF8)),
                utf16=bool(chunk.kinds & (1 << P.KIND_UTF16)),
            )
            ascii_only = not chunk.kinds & ~(1 << P.KIND_ASCII)
            if self._tok_code == K.TOK_ASCII_LETTERS:
                classes = _NO_CLASSES
            else:
                classes = ascii_char_classes() if ascii_only else char_classes()
            tables = norm_tables() if self._spec.normalize and not ascii_only else empty_tables()
            got = self._kernels[(chunk.kinds, keys)] = (P.chunk_kernel(spec), classes, tables)
        return got

    # -- public -------------------------------------------------------------------------------

    def fingerprint(self, text: Document) -> int:
        """The 64-bit simhash of one document (``str``, or UTF-8 ``bytes``) as an ``int``."""
        if self._fast:
            if self._py_normalize:
                text = self._text(text, 0)
            out = np.empty(1, dtype=np.uint64)
            chunk = encode_one(text, self._norm_code != N.NORM_NONE)
            key_off = np.zeros(2, dtype=np.int64)
            kernel, classes, tables = self._kernel(chunk, False)
            kernel(chunk, classes, tables, self._opt, out, key_off)
            return int(out[0])
        return self._fingerprint_py(text, 0)

    def fingerprint_many(self, texts: Iterable[Document], threads: int | None = None) -> np.ndarray:
        """Fingerprints of many documents as ``uint64[n]``, in input order, on all cores.

        Parameters
        ----------
        texts : iterable of str or bytes
            The documents.
        threads : int, optional
            Worker threads (default: ``NEARDUP_THREADS`` or the usable CPU count). With built-in
            options the whole pipeline, normalization included, runs in kernels that release
            the GIL: chunks of documents run in parallel, and other Python threads (a reader
            of the next batch, say) keep running meanwhile.

        Returns
        -------
        ndarray of uint64, shape (n,)
            ``[self.fingerprint(t) for t in texts]``.
        """
        docs = texts if isinstance(texts, Sequence) else list(texts)
        if not self._fast:
            return np.array([self._fingerprint_py(d, i) for i, d in enumerate(docs)], np.uint64)
        if len(docs) == 0:
            return np.zeros(0, dtype=np.uint64)
        nthreads = threads_for(threads)
        parts = run_chunks(
            lambda a, b: self._run_chunk(docs[a:b], a)[0], plan_chunks(docs, nthreads), nthreads
        )
        return np.concatenate(parts)

    def features_many(self, texts: Iterable[Document], threads: int | None = None) -> Features:
        """Fingerprints and the shingle keys they were computed from, for verification.

        Each document's keys are the distinct top 32 bits (bits 63..32, bit 63 the most
        significant) of the 64-bit feature hashes its fingerprint tallies: one per shingle, with
        the same normalization, tokenizer, window, hash and shingling, computed in the same
        kernel pass (no second tokenization, no GIL), sorted ascending. The exact Jaccard
        similarity of two documents' key sets estimates that of their shingle sets (two
        distinct shingles share a key with probability 2**-32).

        Parameters
        ----------
        texts : iterable of str or bytes
            The documents.
        threads : int, optional
            Worker threads, as for :meth:`fingerprint_many`.

        Returns
        -------
        Features
            ``fingerprints`` (uint64[n], as :meth:`fingerprint_many`), ``offsets``
            (int64[n + 1]) and ``keys`` (uint32): document ``i`` has
            ``keys[offsets[i]:offsets[i + 1]]`` (4 bytes per distinct shingle).

        Examples
        --------
        >>> f = Fingerprinter().features_many(["a b c d", "A B C D!", ""])
        >>> f.offsets.tolist(), bool(f.fingerprints[0] == f.fingerprints[1])
        ([0, 2, 4, 4], True)
        >>> bool((f.keys[0:2] == f.keys[2:4]).all())
        True
        """
        docs = texts if isinstance(texts, Sequence) else list(texts)
        n = len(docs)
        if not self._fast:
            fps = np.zeros(n, dtype=np.uint64)
            sets = []
            for i, d in enumerate(docs):
                fps[i] = self._fingerprint_py(d, i)
                feats, _ = self._features_py(d, i)
                sets.append(np.unique(np.array(feats, dtype=np.uint64) >> np.uint64(32)))
            offsets = np.zeros(n + 1, dtype=np.int64)
            np.cumsum([len(k) for k in sets], out=offsets[1:])
            keys = np.concatenate(sets).astype(np.uint32) if sets else np.zeros(0, np.uint32)
            return Features(fps, offsets, keys)
        nthreads = threads_for(threads)
        plan = plan_chunks(docs, nthreads)
        parts = run_chunks(lambda a, b: self._run_chunk(docs[a:b], a, True), plan, nthreads)
        fps = np.concatenate([p[0] for p in parts]) if parts else np.zeros(0, np.uint64)
        return Features(fps, *join_keys(plan, parts, n))

    def features_utf8(
        self,
        data: np.ndarray,
        offsets: np.ndarray,
        threads: int | None = None,
        *,
        keys: bool = True,
        validate: bool = True,
        ascii: np.ndarray | None = None,
    ) -> Features:
        """:meth:`features_many` (with ``keys=False``: the fingerprints alone, empty keys) of
        documents given as UTF-8 in one buffer, read in place: document ``i`` is
        ``data[offsets[i]:offsets[i + 1]]`` (uint8; int64 offsets). Bit for bit the results of
        the documents as ``str``. See :func:`neardup.fingerprints.utf8.features_utf8` for
        ``validate`` and ``ascii``."""
        return Features(*features_utf8(self, data, offsets, threads, keys, validate, ascii))

    def fingerprint_utf8(
        self,
        data: np.ndarray,
        offsets: np.ndarray,
        threads: int | None = None,
        *,
        validate: bool = True,
    ) -> np.ndarray:
        """:meth:`fingerprint_many` of documents given as UTF-8 in one buffer (see
        :meth:`features_utf8`): ``uint64[n]``."""
        return features_utf8(self, data, offsets, threads, False, validate, None)[0]


_CACHE: dict[str, Fingerprinter] = {}


def fingerprint(text: Document, preset: str = "default") -> int:
    """Shortcut for ``Fingerprinter(preset).fingerprint(text)`` (the Fingerprinter is cached).

    Examples
    --------
    >>> fingerprint("hello world") == fingerprint("Hello,  WORLD!")
    True
    """
    fp = _CACHE.get(preset)
    if fp is None:
        fp = _CACHE[preset] = Fingerprinter(preset)
    return fp.fingerprint(text)

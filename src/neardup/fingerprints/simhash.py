"""Simhash: weighted per-bit tallies of feature hashes, and the text-to-fingerprint pipeline.

A fingerprint is an unsigned 64-bit integer; bit 63 is the most significant. For every bit
position ``i`` the tally adds a feature's weight where bit ``i`` of its hash is 1 and subtracts it
where it is 0; the fingerprint has bit ``i`` set where the tally is > 0 ("natural" bit order). The
``reference`` preset reproduces seomoz/simhash-cpp, whose tally of feature bit ``i`` sets
fingerprint bit ``63 - i`` ("reversed" bit order).
"""

from __future__ import annotations

import math
import os
from collections.abc import Callable, Iterable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import numpy as np

from neardup.fingerprints import _kernels as K
from neardup.fingerprints.hashes import resolve_hash
from neardup.fingerprints.tokenize import NORMALIZATIONS, TOKENIZERS, char_classes

__all__ = ["PRESETS", "Fingerprinter", "compute", "compute_batch", "fingerprint"]

_MASK64 = (1 << 64) - 1

Feature = int | str | bytes
Document = str | bytes

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

#: Documents (or MB of text, whichever first) per chunk handed to one thread.
CHUNK_DOCS = 2048
CHUNK_BYTES = 4 << 20


# ----------------------------------------------------------------------------------------------
# low-level combine


def _to_hash(x: Any, hash_fn: Callable[[bytes], int]) -> int:
    if isinstance(x, (bool, np.bool_)):
        raise TypeError("feature hashes must be integers, str or bytes (got bool)")
    if isinstance(x, (int, np.integer)):
        v = int(x)
        if not 0 <= v <= _MASK64:
            raise ValueError(f"feature hash out of the unsigned 64-bit range: {v}")
        return v
    if isinstance(x, str):
        return hash_fn(x.encode("utf-8"))
    if isinstance(x, (bytes, bytearray, memoryview)):
        return hash_fn(bytes(x))
    raise TypeError(f"a feature must be an int hash, str or bytes (got {type(x).__name__})")


def compute(
    feature_hashes: Iterable[Any] | Mapping[Any, float] | np.ndarray,
    weights: Sequence[float] | np.ndarray | None = None,
    *,
    hash: str | Callable[[bytes], int] = "fnv1a64",  # noqa: A002 - mirrors Fingerprinter
) -> int:
    """Simhash of weighted features: one unsigned 64-bit integer.

    Parameters
    ----------
    feature_hashes : iterable, mapping or ndarray
        Feature hashes as unsigned 64-bit integers (any integer dtype is reinterpreted as
        ``uint64``), or features as ``str``/``bytes`` (hashed with ``hash``), or a mapping
        ``{feature: weight}``, or ``(feature, weight)`` pairs (e.g. TF-IDF weights).
    weights : sequence of float, optional
        One weight per feature (default 1 each). Not allowed with a mapping or pairs.
    hash : str or callable, default "fnv1a64"
        How ``str``/``bytes`` features are hashed: ``"fnv1a64"``, ``"jenkins"`` or ``bytes -> int``.

    Returns
    -------
    int
        Bit ``i`` (bit 63 most significant) is 1 where the tally of bit ``i`` -- the weights of
        features whose hash has bit ``i`` set minus the weights of the others -- is > 0. Empty
        input gives 0.

    Examples
    --------
    >>> compute([0b1100, 0b1010, 0b1001])
    8
    >>> compute({"apple": 2.0, "pear": 0.5}) == compute(["apple"])
    True
    """
    hash_fn, _ = resolve_hash(hash)
    if isinstance(feature_hashes, np.ndarray) and feature_hashes.dtype.kind in "iu":
        hashes = np.ascontiguousarray(feature_hashes.ravel()).view(
            feature_hashes.dtype.newbyteorder("=")
        )
        hashes = np.ascontiguousarray(hashes.astype(hashes.dtype.str[:-1] + "8", copy=False))
        hashes = hashes.view(np.uint64)
    else:
        items: Iterable[Any]
        pairs: list[tuple[Any, float]] | None = None
        if isinstance(feature_hashes, Mapping):
            pairs = list(feature_hashes.items())
        else:
            items = list(feature_hashes)
            if items and all(isinstance(x, tuple) for x in items):
                pairs = items  # type: ignore[assignment]
        if pairs is not None:
            if weights is not None:
                raise ValueError("pass weights either in (feature, weight) pairs or as weights=")
            for p in pairs:
                if len(p) != 2:
                    raise ValueError(f"expected (feature, weight) pairs, got {p!r}")
            items = [p[0] for p in pairs]
            weights = [float(p[1]) for p in pairs]
        hashes = np.array([_to_hash(x, hash_fn) for x in items], dtype=np.uint64)
    m = hashes.shape[0]
    if weights is None:
        return int(K._tally_unit(hashes, m, False))
    w = np.ascontiguousarray(weights, dtype=np.float64).ravel()
    if w.shape[0] != m:
        raise ValueError(f"got {m} features but {w.shape[0]} weights; pass one weight per feature")
    if not np.all(np.isfinite(w)):
        raise ValueError("weights must be finite numbers")
    return int(K._tally_weighted(hashes, w, m, False))


def compute_batch(
    hashes: np.ndarray, offsets: np.ndarray, weights: np.ndarray | None = None
) -> np.ndarray:
    """Simhash of many feature sets at once (CSR layout), natural bit order.

    Parameters
    ----------
    hashes : ndarray of uint64, shape (m,)
        All feature hashes, document after document.
    offsets : ndarray of int64, shape (n + 1,)
        Document ``i`` has ``hashes[offsets[i]:offsets[i + 1]]``; non-decreasing, from 0 to m.
    weights : ndarray of float64, shape (m,), optional
        One weight per feature (default 1).

    Returns
    -------
    ndarray of uint64, shape (n,)
        ``compute(hashes[offsets[i]:offsets[i + 1]], weights[...])`` for every ``i``.
    """
    h = np.ascontiguousarray(hashes, dtype=np.uint64).ravel()
    off = np.ascontiguousarray(offsets, dtype=np.int64).ravel()
    if off.shape[0] < 1 or off[0] != 0 or off[-1] != h.shape[0] or np.any(np.diff(off) < 0):
        raise ValueError(
            f"offsets must be non-decreasing from 0 to len(hashes)={h.shape[0]} "
            f"(got {off.shape[0]} offsets)"
        )
    if weights is None:
        w = np.zeros(0, dtype=np.float64)
    else:
        w = np.ascontiguousarray(weights, dtype=np.float64).ravel()
        if w.shape[0] != h.shape[0]:
            raise ValueError(f"got {h.shape[0]} hashes but {w.shape[0]} weights")
    out = np.empty(off.shape[0] - 1, dtype=np.uint64)
    K._compute_csr(h, off, w, weights is not None, out)
    return out


# ----------------------------------------------------------------------------------------------
# the pipeline


def _fmix64(h: int) -> int:
    h ^= h >> 33
    h = (h * 0xFF51AFD7ED558CCD) & _MASK64
    h ^= h >> 33
    h = (h * 0xC4CEB9FE1A85EC53) & _MASK64
    h ^= h >> 33
    return h


def _rotl64(x: int, k: int) -> int:
    k %= 64
    return ((x << k) | (x >> (64 - k))) & _MASK64 if k else x


def _bit_reverse(x: int) -> int:
    return int(f"{x:064b}"[::-1], 2)


class Fingerprinter:
    """Text to 64-bit simhash, from a tokenizer, a window, a feature hash, a weighting and a
    normalization, each chosen by name or replaced by your own callable.

    Parameters
    ----------
    preset : str, default "default"
        A key of :data:`PRESETS` whose settings the keyword arguments override.
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

        norm = params["normalize"]
        if callable(norm):
            self._normalize: Callable[[str], str] | None = norm
        elif norm in NORMALIZATIONS:
            self._normalize = None if norm == "none" else NORMALIZATIONS[norm]
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
        self._fast = (
            self._tok_code is not None
            and self._hash_code is not None
            and self._weight_code is not None
        )
        if self._fast and self._tok_code != K.TOK_ASCII_LETTERS:
            self._table = char_classes()
        else:
            self._table = np.zeros(1, dtype=np.uint8)

    def __repr__(self) -> str:
        over = {k: v for k, v in self.params.items() if PRESETS[self.preset].get(k) != v}
        extra = "".join(f", {k}={v!r}" for k, v in over.items())
        return f"Fingerprinter({self.preset!r}{extra})"

    # -- preparing documents ------------------------------------------------------------------

    def _text(self, doc: Document, index: int) -> str:
        if isinstance(doc, str):
            text = doc
        elif isinstance(doc, (bytes, bytearray, memoryview)):
            try:
                text = bytes(doc).decode("utf-8")
            except UnicodeDecodeError as e:
                raise ValueError(f"document {index} is not valid UTF-8: {e}") from None
        else:
            raise TypeError(f"document {index} must be str or bytes, got {type(doc).__name__}")
        return self._normalize(text) if self._normalize is not None else text

    def _bytes(self, doc: Document, index: int) -> bytes:
        if self._normalize is None and isinstance(doc, (bytes, bytearray)):
            return bytes(doc)  # passed to the kernel as is (C-string semantics for the reference)
        return self._text(doc, index).encode("utf-8", "surrogatepass")

    # -- the Python path (callables) ----------------------------------------------------------

    def _features_py(self, doc: Document, index: int) -> tuple[list[int], list[str]]:
        text = self._text(doc, index)
        tokens = [
            t if isinstance(t, str) else bytes(t).decode("utf-8") for t in self._tokenize(text)
        ]
        th = [_to_hash(t.encode("utf-8", "surrogatepass"), self._hash) for t in tokens]
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
                    h = (h * 0x9E3779B97F4A7C15 + th[s + k]) & _MASK64
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
            fp = int(K._tally_unit(arr, arr.shape[0], False))
        else:
            fp = int(K._tally_weighted(arr, np.array(weights, dtype=np.float64), len(arr), False))
        return _bit_reverse(fp) if self._reverse else fp

    # -- the kernel path ----------------------------------------------------------------------

    def _run_chunk(self, docs: Sequence[Document], first: int) -> np.ndarray:
        encoded = [self._bytes(d, first + i) for i, d in enumerate(docs)]
        lengths = np.fromiter((len(b) for b in encoded), dtype=np.int64, count=len(encoded))
        offsets = np.zeros(len(encoded) + 1, dtype=np.int64)
        np.cumsum(lengths, out=offsets[1:])
        buf = np.frombuffer(b"".join(encoded), dtype=np.uint8)
        if buf.shape[0] == 0:
            buf = np.zeros(1, dtype=np.uint8)
        out = np.empty(len(encoded), dtype=np.uint64)
        K._fingerprint_docs(
            buf,
            offsets,
            self._table,
            self._tok_code,
            self._hash_code,
            self._shingle_code,
            self.window,
            self._weight_code,
            self._reverse,
            out,
        )
        return out

    # -- public -------------------------------------------------------------------------------

    def fingerprint(self, text: Document) -> int:
        """The 64-bit simhash of one document (``str``, or UTF-8 ``bytes``) as an ``int``."""
        if self._fast:
            return int(self._run_chunk([text], 0)[0])
        return self._fingerprint_py(text, 0)

    def fingerprint_many(self, texts: Iterable[Document], threads: int | None = None) -> np.ndarray:
        """Fingerprints of many documents as ``uint64[n]``, in input order, on all cores.

        Parameters
        ----------
        texts : iterable of str or bytes
            The documents.
        threads : int, optional
            Worker threads (default: ``NEARDUP_THREADS`` or the usable CPU count). The kernels
            release the GIL, so chunks of documents run in parallel.

        Returns
        -------
        ndarray of uint64, shape (n,)
            ``[self.fingerprint(t) for t in texts]``.
        """
        docs = texts if isinstance(texts, Sequence) else list(texts)
        n = len(docs)
        if not self._fast:
            return np.array([self._fingerprint_py(d, i) for i, d in enumerate(docs)], np.uint64)
        if n == 0:
            return np.zeros(0, dtype=np.uint64)
        chunks: list[tuple[int, int]] = []
        start = size = 0
        for i, d in enumerate(docs):
            size += len(d) if isinstance(d, (str, bytes, bytearray)) else 0
            if i + 1 - start >= CHUNK_DOCS or size >= CHUNK_BYTES:
                chunks.append((start, i + 1))
                start, size = i + 1, 0
        if start < n:
            chunks.append((start, n))
        nthreads = _threads(threads)
        if nthreads <= 1 or len(chunks) == 1:
            parts = [self._run_chunk(docs[a:b], a) for a, b in chunks]
        else:
            with ThreadPoolExecutor(max_workers=nthreads) as pool:
                parts = list(
                    pool.map(lambda ab: self._run_chunk(docs[ab[0] : ab[1]], ab[0]), chunks)
                )
        return np.concatenate(parts)


def _threads(threads: int | None) -> int:
    if threads is not None:
        if threads < 1:
            raise ValueError(f"threads must be >= 1 (got {threads})")
        return threads
    try:
        from neardup.config import default_threads

        return default_threads()
    except ImportError:  # pragma: no cover - config is part of the package
        return os.cpu_count() or 1


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

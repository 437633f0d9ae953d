"""Brute-force reference implementations (numpy XOR + popcount) for every search, and the
pure-Python fingerprint pipeline."""

from __future__ import annotations

import re

import numpy as np
import scipy.sparse
import scipy.sparse.csgraph


def distances(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """All-pairs Hamming distances, shape (len(a), len(b))."""
    a = np.asarray(a, dtype=np.uint64)
    b = np.asarray(b, dtype=np.uint64)
    return np.bitwise_count(a[:, None] ^ b[None, :]).astype(np.int64)


def find_all(fp, distance: int) -> np.ndarray:
    fp = np.asarray(fp, dtype=np.uint64)
    d = distances(fp, fp)
    i, j = np.nonzero(np.triu(d <= distance, k=1))
    return np.stack([i, j], axis=1).astype(np.int64).reshape(-1, 2)


def find_all_values(fp, distance: int) -> np.ndarray:
    u = np.unique(np.asarray(fp, dtype=np.uint64))
    p = find_all(u, distance)
    return u[p].reshape(-1, 2)


def find_clusters(fp, distance: int) -> np.ndarray:
    """Label of each position = smallest position in its connected component."""
    n = len(fp)
    if n == 0:
        return np.empty(0, dtype=np.int64)
    p = find_all(fp, distance)
    g = scipy.sparse.coo_matrix((np.ones(len(p)), (p[:, 0], p[:, 1])), shape=(n, n))
    _, comp = scipy.sparse.csgraph.connected_components(g, directed=False)
    first = {}
    for i, c in enumerate(comp):
        first.setdefault(c, i)
    return np.array([first[c] for c in comp], dtype=np.int64)


def query(corpus, queries, distance: int):
    """(query_index, corpus_index, distance) sorted by query, distance, corpus index."""
    corpus = np.asarray(corpus, dtype=np.uint64)
    queries = np.asarray(queries, dtype=np.uint64)
    if len(corpus) == 0 or len(queries) == 0:
        e = np.empty(0, dtype=np.int64)
        return e, e, e
    d = distances(queries, corpus)
    qi, ci = np.nonzero(d <= distance)
    di = d[qi, ci]
    order = np.lexsort((ci, di, qi))
    return qi[order].astype(np.int64), ci[order].astype(np.int64), di[order].astype(np.int64)


# ---- fingerprints: the pure-Python pipeline ---------------------------------------------------
# Each stage as its documentation states it, from unicodedata and the published hashes:
# normalization, tokenizers, shingles, weighting, tally, bit order.

_MASK64 = (1 << 64) - 1


def naive_normalize(text: str, form: str) -> str:
    """``none``, ``casefold``, ``nfkc`` or ``nfkc_casefold`` (NFKC first) with unicodedata."""
    import unicodedata

    if form in ("nfkc", "nfkc_casefold"):
        text = unicodedata.normalize("NFKC", text)
    if form in ("casefold", "nfkc_casefold"):
        text = text.casefold()
    return text


def _token_class(ch: str) -> int:
    """0 separator, 1 word character, 2 letter/digit of a no-space script, 3 its mark."""
    import unicodedata

    from neardup.fingerprints.tokenize import NO_SPACE_RANGES

    major = unicodedata.category(ch)[0]
    if major not in "LNM":
        return 0
    cp = ord(ch)
    if any(lo <= cp <= hi for lo, hi in NO_SPACE_RANGES):
        return 3 if major == "M" else 2
    return 1


def naive_tokens(text: str, tokenizer: str) -> list[str]:
    """``ascii_letters`` (runs of A-Za-z before the first NUL), ``unicode_words`` (runs of
    word characters) or ``unicode`` (the same, cut before each letter/digit of a no-space
    script and after it and its marks)."""
    if tokenizer == "ascii_letters":
        text = text.split("\0", 1)[0]
        return re.findall(r"[A-Za-z]+", text)
    split = tokenizer == "unicode"
    classes = [_token_class(ch) for ch in text]
    tokens: list[str] = []
    cur = ""
    for k, ch in enumerate(text):
        c = classes[k]
        if c == 0 or (split and c == 2):
            if cur:
                tokens.append(cur)
            cur = ""
        if c == 0:
            continue
        cur += ch
        nxt = classes[k + 1] if k + 1 < len(text) else 0
        if split and c in (2, 3) and nxt != 3:
            tokens.append(cur)
            cur = ""
    if cur:
        tokens.append(cur)
    return tokens


def _fmix64(h: int) -> int:
    h ^= h >> 33
    h = (h * 0xFF51AFD7ED558CCD) & _MASK64
    h ^= h >> 33
    h = (h * 0xC4CEB9FE1A85EC53) & _MASK64
    return h ^ (h >> 33)


def _rotl(x: int, k: int) -> int:
    k %= 64
    return ((x << k) | (x >> (64 - k))) & _MASK64 if k else x


FINGERPRINT_DEFAULTS = {
    "normalize": "nfkc_casefold",
    "tokenizer": "unicode",
    "window": 3,
    "hash": "fnv1a64",
    "shingle": "chain",
    "weighting": "count",
    "bit_order": "natural",
}
FINGERPRINT_REFERENCE = {
    "normalize": "none",
    "tokenizer": "ascii_letters",
    "window": 3,
    "hash": "jenkins",
    "shingle": "cyclic",
    "weighting": "count",
    "bit_order": "reversed",
}


def naive_features(doc: str | bytes, **options) -> list[int]:
    """Feature hashes (one per shingle, in order) of a document under ``options`` (missing
    ones from the ``default`` preset)."""
    from neardup.fingerprints.hashes import fnv1a64, jenkins64

    o = {**FINGERPRINT_DEFAULTS, **options}
    text = doc.decode("utf-8") if isinstance(doc, bytes) else doc
    tokens = naive_tokens(naive_normalize(text, o["normalize"]), o["tokenizer"])
    hash_fn = jenkins64 if o["hash"] == "jenkins" else fnv1a64
    th = [hash_fn(t.encode("utf-8", "surrogatepass")) for t in tokens]
    w = o["window"]
    feats = []
    if o["shingle"] == "cyclic":  # simhash-cpp: rotate-xor over a moving window, from token 0
        ring = [0] * w
        cur = 0
        for t, v in enumerate(th):
            cur = _rotl(cur, 1) ^ _rotl(ring[t % w], w) ^ v
            ring[t % w] = v
            feats.append(cur)
    elif th:
        width = min(w, len(th))
        for s in range(len(th) - width + 1):
            h = th[s]
            for k in range(1, width):
                h = (h * 0x9E3779B97F4A7C15 + th[s + k]) & _MASK64
            feats.append(_fmix64(h))
    return feats


def naive_weighted_simhash(hashes, weights=None) -> int:
    """Bit i is 1 where the weights of hashes with bit i set exceed those without (tie: 0)."""
    out = 0
    w = [1.0] * len(hashes) if weights is None else list(weights)
    for i in range(64):
        tally = sum(wt if (h >> i) & 1 else -wt for h, wt in zip(hashes, w, strict=True))
        if tally > 0:
            out |= 1 << i
    return out


def naive_fingerprint(doc: str | bytes, **options) -> int:
    """The fingerprint of one document under ``options`` (missing ones from ``default``)."""
    import math

    o = {**FINGERPRINT_DEFAULTS, **options}
    feats = naive_features(doc, **options)
    if o["weighting"] == "count":
        fp = naive_weighted_simhash(feats)
    else:
        counts: dict[int, int] = {}
        for h in feats:
            counts[h] = counts.get(h, 0) + 1
        if o["weighting"] == "unique":
            fp = naive_weighted_simhash(list(counts))
        else:
            fp = naive_weighted_simhash(list(counts), [1.0 + math.log(c) for c in counts.values()])
    if o["bit_order"] == "reversed":
        fp = int(f"{fp:064b}"[::-1], 2)
    return fp


def naive_shingle_keys(doc: str | bytes, **options) -> list[int]:
    """The distinct top 32 bits of a document's feature hashes, ascending."""
    return sorted({h >> 32 for h in naive_features(doc, **options)})

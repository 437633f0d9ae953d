"""Brute-force reference implementations (numpy XOR + popcount) for every search, the
pure-Python fingerprint pipeline and exact Jaccard verification."""

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


def decide_fingerprints(fps, distance: int, order) -> list[int]:
    """The ``--no-verify`` rule, literally: kept_for per document (-1 when kept).

    Documents in ``order``; each is dropped for the first already kept document (in
    ``order``) within ``distance`` bits, else kept. No classes, no search: every kept
    document is compared with every later one.
    """
    fps = [int(x) for x in fps]
    kept_for = [-1] * len(fps)
    kept: list[int] = []
    for d in order:
        for e in kept:
            if popcount(fps[d] ^ fps[e]) <= distance:
                kept_for[d] = e
                break
        else:
            kept.append(d)
    return kept_for


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


def index_query(model: dict, queries, distance: int):
    """(query_index, id, distance) of an index holding ``model`` {int id: fingerprint}, sorted by
    query, distance, id (what ``Index.query_arrays`` answers)."""
    ids = np.array(sorted(model), dtype=np.int64)
    corpus = np.array([model[i] for i in ids.tolist()], dtype=np.uint64)
    qi, ci, di = query(corpus, queries, distance)
    return qi, ids[ci] if len(ci) else ci, di


# -- verification: exact Jaccard and the no-chaining decision rule ------------------------------


def jaccard(a: set, b: set) -> float:
    """Exact Jaccard of two sets; 0 when either is empty (no shingles: never similar)."""
    if not a or not b:
        return 0.0
    return len(a & b) / len(a | b)


def csr_to_sets(offsets, keys) -> list[set]:
    return [set(int(k) for k in keys[offsets[d] : offsets[d + 1]]) for d in range(len(offsets) - 1)]


def sets_to_csr(sets) -> tuple[np.ndarray, np.ndarray]:
    offsets = np.zeros(len(sets) + 1, dtype=np.int64)
    offsets[1:] = np.cumsum([len(s) for s in sets])
    keys = [k for s in sets for k in sorted(s)]
    return offsets, np.array(keys, dtype=np.uint32)


def without_common(sets: list[set], common) -> list[set]:
    """The sets without the keys held by more than ``common`` of them: a count (int), or a share
    (float) of ``len(sets)`` taken as written (0.07 of 100 sets is 7)."""
    from collections import Counter
    from decimal import Decimal

    n = len(sets)
    limit = common if isinstance(common, int) else int(Decimal(repr(common)) * n)
    held = Counter(k for s in sets for k in s)
    return [{k for k in s if held[k] <= limit} for s in sets]


def popcount(x: int) -> int:
    return bin(x).count("1")


def set_fingerprint(keys) -> int:
    """Simhash of a key set, every key weighing 1: bit i is set where more keys than not have
    bit i set in fmix64(key + 0x9E3779B97F4A7C15)."""
    tally = [0] * 64
    for k in set(keys):
        h = _fmix64((int(k) + 0x9E3779B97F4A7C15) & _M64)
        for b in range(64):
            tally[b] += 1 if (h >> b) & 1 else -1
    return sum(1 << b for b in range(64) if tally[b] > 0)


def set_minhash(keys) -> int:
    """One-permutation 1-bit MinHash of a key set (0 when empty): h = fmix64(key + golden); the
    top 6 bits of h pick bucket b, the low 58 bits rank keys there; bit b is the lowest bit of
    fmix64(h_min ^ b * 0xD6E8FEB86659FD93); an empty bucket b borrows the bucket
    fmix64(b * 0x100000001B3 + attempt) >> 58 for attempt = 1, 2, ... (then cyclic order)."""
    best: dict[int, tuple[int, int]] = {}
    for k in sorted(set(keys)):
        h = _fmix64((int(k) + 0x9E3779B97F4A7C15) & _M64)
        b, r = h >> 58, h & ((1 << 58) - 1)
        if b not in best or r < best[b][0]:
            best[b] = (r, h)
    if not best:
        return 0
    out = 0
    for b in range(64):
        src, tries = b, 0
        while src not in best:
            tries += 1
            if tries <= 4096:
                src = _fmix64((b * 0x100000001B3 + tries) & _M64) >> 58
            else:
                src = (src + 1) % 64
        bit = _fmix64(best[src][1] ^ ((b * 0xD6E8FEB86659FD93) & _M64)) & 1
        out |= bit << b
    return out


def set_sketch(keys, words: int) -> list[int]:
    """MinHash sketch of a key set, ``words`` words: word 0 is :func:`set_minhash`; words
    1..words-1 a one-permutation 1-bit MinHash over nb = 64 * (words - 1) buckets of
    g = fmix64(fmix64(key + golden) ^ 0x2545F4914F6CDD1D): bucket ((g >> 32) * nb) >> 32, the
    least g its minimum; bucket b is bit b % 64 of word 1 + b // 64, the lowest bit of
    fmix64(g_min ^ (b + 64) * 0xD6E8FEB86659FD93); an empty bucket b borrows the bucket
    ((fmix64((b + 64) * 0x100000001B3 + attempt) >> 32) * nb) >> 32 for attempt = 1, 2, ...
    (then cyclic order). All zeros for an empty set."""
    nb = 64 * (words - 1)
    best: dict[int, int] = {}
    for k in sorted(set(keys)):
        g = _fmix64(_fmix64((int(k) + 0x9E3779B97F4A7C15) & _M64) ^ 0x2545F4914F6CDD1D)
        b = ((g >> 32) * nb) >> 32
        if b not in best or g < best[b]:
            best[b] = g
    out = [set_minhash(keys)] + [0] * (words - 1)
    if not best:
        return out
    for b in range(nb):
        src, tries = b, 0
        while src not in best:
            tries += 1
            if tries <= 4096:
                src = ((_fmix64(((b + 64) * 0x100000001B3 + tries) & _M64) >> 32) * nb) >> 32
            else:
                src = (src + 1) % nb
        bit = _fmix64(best[src] ^ (((b + 64) * 0xD6E8FEB86659FD93) & _M64)) & 1
        out[1 + b // 64] |= bit << (b % 64)
    return out


def sketch_match(a: list[int], size_a: int, b: list[int], size_b: int, threshold: float):
    """(match, estimated Jaccard) of two sketches: both sets non-empty, min(size) / max(size)
    >= threshold, and 1 - 2 * D / (64 * (K - 1)) >= threshold, D the differing bits of words
    1..K-1 (estimate 0.0 when a set is empty)."""
    if size_a == 0 or size_b == 0:
        return False, 0.0
    d = sum(popcount(x ^ y) for x, y in zip(a[1:], b[1:], strict=True))
    est = 1.0 - 2.0 * d / (64 * (len(a) - 1))
    ok = min(size_a, size_b) / max(size_a, size_b) >= threshold and est >= threshold
    return ok, est


def verified_query(entries: dict, queries, threshold: float, distance: int):
    """Brute force of ``Index.verified_query``: ``entries`` maps id -> (sketch words, size),
    ``queries`` is a list of (sketch words, size). Every (query, id, distance, estimate) whose
    first words lie within ``distance`` bits and whose sketches match, sorted by query, then
    estimate (highest first), then distance, then id."""
    out = []
    for q, (qs, qz) in enumerate(queries):
        for i, (es, ez) in entries.items():
            d = popcount(int(qs[0]) ^ int(es[0]))
            if d <= distance:
                ok, est = sketch_match(qs, qz, es, ez, threshold)
                if ok:
                    out.append((q, i, d, est))
    return sorted(out, key=lambda r: (r[0], -r[3], r[2], r[1]))


def similar_pairs(sets, fps, threshold: float, distance: int):
    """Every pair i < j with Jaccard >= threshold whose fingerprints are within ``distance``
    bits or whose sets are identical."""
    fps = [int(x) for x in fps]
    out = []
    for i in range(len(sets)):
        for j in range(i + 1, len(sets)):
            near = popcount(fps[i] ^ fps[j]) <= distance or sets[i] == sets[j]
            if near and sets[i] and sets[j] and jaccard(sets[i], sets[j]) >= threshold:
                out.append((i, j, jaccard(sets[i], sets[j])))
    return out


def decide_verified(sets, fps, threshold: float, order, *, distance=None, pairs=None, exclude=None):
    """The decision rule, literally: (kept_for, jaccard) per document (-1 / None when kept).

    Identical non-empty sets form a class led by its first member in ``order``; the other
    members follow it. Leaders in ``order`` are dropped for the first already kept leader (in
    ``order``) that is a candidate with Jaccard >= threshold. Documents in ``exclude`` take no
    part (kept, as if absent).
    """
    n = len(sets)
    fps = [int(x) for x in fps]
    skip = set() if exclude is None else {int(i) for i in np.flatnonzero(exclude)}
    lead: dict[frozenset, int] = {}
    rep = [-1] * n
    for d in order:
        if sets[d] and d not in skip:
            rep[d] = lead.setdefault(frozenset(sets[d]), d)
    given = None if pairs is None else {(min(a, b), max(a, b)) for a, b in pairs}

    def candidate(a: int, b: int) -> bool:
        if given is None:
            return popcount(fps[a] ^ fps[b]) <= distance
        return (min(a, b), max(a, b)) in given

    kept_for = [-1] * n
    jac: list = [None] * n
    kept: list[int] = []
    for d in order:
        if rep[d] != d:
            continue
        for e in kept:
            if candidate(d, e) and jaccard(sets[d], sets[e]) >= threshold:
                kept_for[d], jac[d] = e, jaccard(sets[d], sets[e])
                break
        else:
            kept.append(d)
    for d in range(n):
        r = rep[d]
        if r >= 0 and r != d:
            kept_for[d] = r if kept_for[r] < 0 else kept_for[r]
            jac[d] = 1.0 if kept_for[r] < 0 else jac[r]
    return kept_for, jac


def near_misses(sets, fps, kept_for, order, *, distance=None, pairs=None, exclude=None):
    """(near_for, jaccard) per document: for a kept document with shingles, the kept document
    with shingles before it in ``order`` that is a candidate (within ``distance`` bits, or in
    ``pairs``) with the highest exact Jaccard, ties to the earliest in ``order``; (-1, None)
    for the others. Documents in ``exclude`` take no part."""
    n = len(sets)
    fps = [int(x) for x in fps]
    skip = set() if exclude is None else {int(i) for i in np.flatnonzero(exclude)}
    given = None if pairs is None else {(min(a, b), max(a, b)) for a, b in pairs}
    near_for, near_jac = [-1] * n, [None] * n
    seen: list[int] = []  # kept documents with shingles so far, in order
    for d in order:
        if kept_for[d] >= 0 or not sets[d] or d in skip:
            continue
        for e in seen:
            if (
                popcount(fps[d] ^ fps[e]) <= distance
                if given is None
                else ((min(d, e), max(d, e)) in given)
            ):
                j = jaccard(sets[d], sets[e])
                if near_for[d] < 0 or j > near_jac[d]:
                    near_for[d], near_jac[d] = e, j
        seen.append(d)
    return near_for, near_jac


# -- shingle keys of the default Fingerprinter, in pure Python ------------------------------------

_M64 = (1 << 64) - 1


def _fmix64(h: int) -> int:
    h ^= h >> 33
    h = (h * 0xFF51AFD7ED558CCD) & _M64
    h ^= h >> 33
    h = (h * 0xC4CEB9FE1A85EC53) & _M64
    h ^= h >> 33
    return h


def shingle_keys(text: str, window: int = 3) -> list[int]:
    """Sorted unique uint32 shingle keys of the ``default`` preset: NFKC + casefold, unicode
    tokens, FNV-1a 64 per token, chained windows of ``window`` tokens (a shorter document is one
    shingle), MurmurHash3's finalizer, low 32 bits."""
    from neardup.fingerprints import fnv1a64
    from neardup.fingerprints.tokenize import nfkc_casefold, unicode_tokens

    th = [fnv1a64(t.encode("utf-8", "surrogatepass")) for t in unicode_tokens(nfkc_casefold(text))]
    out = set()
    if th:
        width = min(window, len(th))
        for s in range(len(th) - width + 1):
            h = th[s]
            for k in range(1, width):
                h = (h * 0x9E3779B97F4A7C15 + th[s + k]) & _M64
            out.add(_fmix64(h) & 0xFFFFFFFF)
    return sorted(out)


def shingle_sets(texts) -> tuple[np.ndarray, np.ndarray]:
    """CSR (offsets int64[n + 1], keys uint32) of :func:`shingle_keys` for each text."""
    return sets_to_csr([shingle_keys(t) for t in texts])


class ShinglingFingerprinter:
    """The default Fingerprinter plus its shingle keys computed by :func:`shingle_keys`."""

    def __init__(self) -> None:
        from neardup.fingerprints import Fingerprinter

        self.fingerprinter = Fingerprinter("default")

    def features_many(self, texts, threads=None):
        from neardup.fingerprints.simhash import Features

        offsets, keys = shingle_sets(texts)
        return Features(self.fingerprinter.fingerprint_many(texts, threads=threads), offsets, keys)


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


def join(queries, corpus, distance: int) -> set[tuple[int, int]]:
    """{(query position, corpus position)} of every pair within ``distance`` bits."""
    queries = np.asarray(queries, dtype=np.uint64)
    corpus = np.asarray(corpus, dtype=np.uint64)
    if len(queries) == 0 or len(corpus) == 0:
        return set()
    qi, ci = np.nonzero(distances(queries, corpus) <= distance)
    return set(zip(qi.tolist(), ci.tolist(), strict=True))


def first_table(a: int, b: int, blocks: int, distance: int) -> int:
    """Position, in layout order, of the first table whose leading blocks ``a`` and ``b`` agree
    on (the combinations of ``blocks - distance`` blocks in lexicographic order), -1 if none."""
    import itertools

    q, r = divmod(64, blocks)
    widths = [q + 1 if i < r else q for i in range(blocks)]
    top, masks = 64, []
    for w in widths:
        top -= w
        masks.append(((1 << w) - 1) << top)
    x = int(a) ^ int(b)
    agree = [i for i in range(blocks) if x & masks[i] == 0]
    for t, lead in enumerate(itertools.combinations(range(blocks), blocks - distance)):
        if set(lead) <= set(agree):
            return t
    return -1


def text_families(
    n: int,
    seed: int,
    vocab: int = 300,
    words: tuple[int, int] = (15, 80),
    members: tuple[int, int] = (1, 5),
    edits: tuple[int, int] = (0, 4),
    wordless: float = 0.1,
) -> list[str]:
    """``n`` texts in families: a base of ``words`` (low, high) words from a ``vocab``-word
    vocabulary and ``members`` members each with ``edits`` words replaced (some exact copies);
    after a family, a text without words with probability ``wordless``."""
    rng = np.random.default_rng(seed)
    out: list[str] = []
    while len(out) < n:
        base = [f"w{k}" for k in rng.integers(0, vocab, int(rng.integers(*words)))]
        for _ in range(int(rng.integers(*members))):
            text = list(base)
            for p in rng.integers(0, len(text), int(rng.integers(*edits))):
                text[p] = f"x{rng.integers(0, 10**6)}"
            out.append(" ".join(text))
        if wordless and rng.random() < wordless:
            out.append("... !!")
    return out[:n]


def text_chain(n: int, seed: int, words: int = 300) -> list[str]:
    """``n`` texts in a chain: text ``k`` is one base of ``words`` words with its first ``k``
    words replaced, so neighbours are a few fingerprint bits apart and the ends many (at
    ``n=60``, one connected component at distance 6 whose ends are about 11 bits apart)."""
    rng = np.random.default_rng(seed)
    base = [f"w{k}" for k in rng.integers(0, 2000, words)]
    return [" ".join([f"x{p}" for p in range(k)] + base[k:]) for k in range(n)]


def families(n: int, seed: int, identical: float = 0.5, hot: int = 12, flips: int = 3):
    """``n`` fingerprints in a few families: each a random centre, members equal to it (share
    ``identical``) or with up to ``flips`` of the family's ``hot`` bits flipped."""
    rng = np.random.default_rng(seed)
    out = np.empty(n, dtype=np.uint64)
    i = 0
    while i < n:
        size = min(n - i, int(rng.integers(2, 40)))
        centre = int(rng.integers(0, 2**64, dtype=np.uint64))
        bits = rng.choice(64, hot, replace=False)
        for j in range(size):
            v = centre
            if rng.random() >= identical:
                for b in rng.choice(bits, int(rng.integers(1, flips + 1)), replace=False):
                    v ^= 1 << int(b)
            out[i + j] = v
        i += size
    return out


def read_lines_one_by_one(data: bytes, source: str, jsonl: bool, field="text", id_field="id"):
    """The Python readers line by line (``iter_lines`` and ``jsonl_record``/``line_record``):
    ``[(line, Record or InputError)]`` in order, blank JSONL lines left out."""
    import io

    from neardup.errors import InputError
    from neardup.io.readers import iter_lines, jsonl_record, line_record

    out = []
    for number, raw in iter_lines(io.BytesIO(data)):
        try:
            rec = (
                jsonl_record(raw, source, number, field, id_field)
                if jsonl
                else line_record(raw, source, number)
            )
        except InputError as e:
            out.append((number, e))
            continue
        if rec is not None:
            out.append((number, rec))
    return out


def scan_records(items, paths):
    """The first pass of dedup over ``(file index, Record or InputError)`` in input order, one
    record at a time with a dict of ids (keys as Python compares them): ``(kept, errors)``,
    kept as ``(file, line, id, text)`` and errors as messages, in order."""
    import json

    from neardup.errors import InputError

    def key(v):
        try:
            hash(v)
        except TypeError:
            return ("json", json.dumps(v, sort_keys=True, default=str))
        return (type(v) is str, v)

    first: dict = {}
    kept, errors = [], []
    for k, got in items:
        if isinstance(got, InputError):
            errors.append(str(got))
            continue
        where = first.setdefault(key(got.id), (paths[k], got.number))
        if where != (paths[k], got.number):
            errors.append(
                f"{paths[k]}:{got.number}: duplicate id {got.id!r} (first at "
                f"{where[0]}:{where[1]}); ids must be unique: choose another --id-field or "
                "use --skip-bad"
            )
            continue
        kept.append((k, got.number, got.id, got.text))
    return kept, errors


def kept_lines_one_by_one(data: bytes, numbers) -> bytes:
    """The lines of ``data`` (numbered from 1) whose numbers are in ``numbers``, each ending in a
    newline: what dedup's second pass writes for a line input."""
    keep = set(int(n) for n in numbers)
    lines = data.split(b"\n")
    if lines and lines[-1] == b"":
        lines.pop()
    return b"".join(line + b"\n" for k, line in enumerate(lines, 1) if k in keep)


def component_labels(edges) -> dict[int, int]:
    """Each node of ``edges`` (pairs of ints) and the smallest node of its connected component,
    by relaxing labels until nothing changes."""
    label = {x: x for e in edges for x in e}
    changed = True
    while changed:
        changed = False
        for a, b in edges:
            m = min(label[a], label[b])
            if label[a] != m or label[b] != m:
                label[a] = label[b] = m
                changed = True
    return label


def keep_order(keep: str, texts, values=None) -> list[int]:
    """Document positions in keep order, literally: ``"first"`` input order, ``"longest"``
    the most characters first, ``"max:F"`` / ``"min:F"`` the highest / lowest of ``values``
    first (Python numbers, or ``datetime`` s with a zone), ties to the earlier."""
    n = len(texts)
    if keep == "first":
        return list(range(n))
    if keep == "longest":
        return sorted(range(n), key=lambda i: (-len(texts[i]), i))
    if keep.startswith("max:"):
        # a stable sort by value, highest first, keeps equal values in input order
        return sorted(range(n), key=lambda i: values[i], reverse=True) if n else []
    return sorted(range(n), key=lambda i: values[i])


def dedup_kept(texts, threshold: float, keep: str, verify: bool, values=None) -> list[bool]:
    """Which documents a dedup keeps, by the brute-force rules here: verified, the decision
    rule of :func:`decide_verified` over the default fingerprinter's shingle sets in
    :func:`keep_order`; fingerprint-only, :func:`decide_fingerprints` at distance 6 in the same
    order."""
    from neardup.core.similarity import distance_for_threshold
    from neardup.fingerprints import Fingerprinter

    order = keep_order(keep, texts, values)
    if not verify:
        fps = Fingerprinter().fingerprint_many(list(texts))
        return [k < 0 for k in decide_fingerprints(fps, 6, order)]
    f = Fingerprinter().features_many(list(texts))
    sets = csr_to_sets(f.offsets, f.keys)
    fps = [set_minhash(x) for x in sets]
    d = distance_for_threshold(threshold)
    kept_for, _ = decide_verified(sets, fps, threshold, order, distance=d)
    return [k < 0 for k in kept_for]


# -- MinHash band keys, in pure Python -------------------------------------------------------------


def band_keys(keys, bands: int, rows: int) -> list[int]:
    """The ``bands`` MinHash band keys of a set of uint32 ``keys`` (none for an empty set), as
    neardup.core.band_kernels documents them: per band ``i`` each key mixed to
    ``fmix64(key) * a_i + c_i``, its row the top 32 bits' share, a row's value its least, an
    empty row borrowing by the probe sequence, the rows chained through fmix64."""
    if not keys:
        return []
    mixed = [_fmix64(int(k)) for k in keys]
    out = []
    for i in range(bands):
        mul = _fmix64(((i + 1) * 0x9E3779B97F4A7C15) & _M64) | 1
        add = _fmix64(mul)
        low: list = [None] * rows
        for h in mixed:
            v = (h * mul + add) & _M64
            j = ((v >> 32) * rows) >> 32
            if low[j] is None or v < low[j]:
                low[j] = v
        h = _fmix64(((i + 1) * 0x9E3779B97F4A7C15) & _M64)
        for j in range(rows):
            src, tries = j, 0
            while low[src] is None:
                tries += 1
                if tries <= 4096:
                    probe = (i << 32) | (j << 16) | tries
                    src = ((_fmix64(probe) >> 32) * rows) >> 32
                else:
                    src = (src + 1) % rows
            h = _fmix64(h ^ low[src])
        out.append(h)
    return out


def band_pairs(sets, bands: int, rows: int) -> set[tuple[int, int]]:
    """Every pair ``(i, j)``, ``i < j``, of non-empty sets that share a band key."""
    held: dict[int, list[int]] = {}
    for d, s in enumerate(sets):
        for k in band_keys(sorted(s), bands, rows):
            held.setdefault(k, []).append(d)
    return {(a, b) for ds in held.values() for x, a in enumerate(ds) for b in ds[x + 1 :] if a != b}

"""Brute-force reference implementations (numpy XOR + popcount) for every search."""

from __future__ import annotations

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

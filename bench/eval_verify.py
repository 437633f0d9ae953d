"""Verified near-duplicate pairs on real text: neardup.similar_pairs against fingerprints alone and
MinHash-LSH peers (datasketch, rensa), with exact truth, in one run.

Corpus: license texts and package copyright files, man pages of every installed language and
section, and docstrings of the Python modules on this machine (bench/verify_data.py);
byte-identical documents removed. Similarity: exact Jaccard of the documents' sets of shingle keys
(the 32-bit keys the default Fingerprinter hashes: 3-token shingles). Truth: every pair with
Jaccard >= 0.7, found exactly by prefix filtering, and checked against an all-pairs sparse product
on a subset. Reported, for J >= 0.9 and J >= 0.8:

- recall of the fingerprint candidates at distances 3..16, for the set fingerprints
  (``set_fingerprints``: the one-permutation 1-bit MinHash of the key set, the default of
  ``similar_pairs``, and the simhash of the key set) and for the default Fingerprinter's
  fingerprints (shingles weighted by occurrence count), with the number of candidate pairs: the
  measurements behind ``distance_for_threshold``;
- precision / recall / F1 and documents/s of ``similar_pairs`` (set fingerprints, candidates at
  the rule's distance, exact Jaccard), of the same on the default fingerprints, of fingerprints
  alone at distances 3 and 6 (what fingerprint-only dedup decides from), and of datasketch
  ``MinHashLSH`` and rensa ``RMinHashLSH`` (128 permutations in 16 bands of 8 rows, each
  candidate kept when its estimated Jaccard is >= J), all on ``--threads`` threads (default 1);
- the decisions of ``decide_verified`` (every drop checked) against fingerprint clusters;
- ``decide_verified`` on a synthetic family of ``--family`` near-identical documents and on its
  halves, quarters and eighths: the verification work (set intersections) per document.

Timing, median of ``--repeat`` runs, in two columns. From shingle keys: neardup's set fingerprints,
candidate search and verification (plus fingerprinting the texts where the default fingerprints
are used: fingerprints come from texts); the peers' MinHashes from the same keys, LSH and estimate
checks. From texts: the same plus making the shingle keys (today a stand-in, timed on its own
line, which the fingerprinter will do in its own pass) for every method that needs them.

Usage::

    python bench/eval_verify.py [--man 11000] [--doc 4000] [--threads 1] [--repeat 3]
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from collections import Counter

import numpy as np
import scipy.sparse as sp

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "..", "tests"))

import naive  # noqa: E402
from verify_data import (  # noqa: E402
    exact_similar_pairs,
    standin_shingle_sets,
    template_family,
    verify_documents,
)

import neardup  # noqa: E402
from neardup.core.verify import (  # noqa: E402
    decide_verified,
    distance_for_threshold,
    pair_jaccard,
    set_fingerprints,
)

THRESHOLDS = (0.9, 0.8)
RULE_THRESHOLDS = (0.95, 0.9, 0.85, 0.8, 0.75, 0.7)
DISTANCES = tuple(range(3, 17))
NUM_PERM = 128
#: LSH bands of both peers (8 rows each): rensa's README setting, which favours recall; the
#: estimated-Jaccard check then removes most false candidates.
BANDS = 16


def encode(i: np.ndarray, j: np.ndarray, n: int) -> np.ndarray:
    lo, hi = np.minimum(i, j), np.maximum(i, j)
    return np.unique(lo.astype(np.uint64) * np.uint64(n) + hi.astype(np.uint64))


def timed(fn, repeat: int):
    """(result of the last call, median seconds over ``repeat`` calls)."""
    secs = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        out = fn()
        secs.append(time.perf_counter() - t0)
    return out, float(np.median(secs))


def score(found: np.ndarray, truth: np.ndarray) -> tuple[float, float, float]:
    tp = len(np.intersect1d(found, truth, assume_unique=True))
    p = tp / len(found) if len(found) else 1.0
    r = tp / len(truth) if len(truth) else 1.0
    return p, r, 2 * p * r / (p + r) if p + r else 0.0


def brute_force_pairs(offsets: np.ndarray, keys: np.ndarray, t: float) -> np.ndarray:
    n = len(offsets) - 1
    uniq, inv = np.unique(keys, return_inverse=True)
    a = sp.csr_matrix((np.ones(len(keys), np.float64), inv.ravel(), offsets), (n, len(uniq)))
    inter = (a @ a.T).tocoo()
    sizes = np.diff(offsets)
    keep = inter.row < inter.col
    i, j, c = inter.row[keep], inter.col[keep], inter.data[keep].round().astype(np.int64)
    ok = c / (sizes[i] + sizes[j] - c) >= t
    return encode(i[ok], j[ok], n)


def run_datasketch(items: list[np.ndarray], t: float) -> np.ndarray:
    from datasketch import MinHash, MinHashLSH

    n = len(items)
    mhs = []
    for keys in items:
        m = MinHash(num_perm=NUM_PERM, seed=1, hashfunc=int)
        m.update_batch(keys.tolist())
        mhs.append(m)
    lsh = MinHashLSH(threshold=t, num_perm=NUM_PERM, params=(BANDS, NUM_PERM // BANDS))
    with lsh.insertion_session() as session:
        for d, m in enumerate(mhs):
            session.insert(d, m)
    found = []
    for d, m in enumerate(mhs):
        for e in lsh.query(m):
            if e > d and m.jaccard(mhs[e]) >= t:
                found.append((d, e))
    f = np.array(found, dtype=np.int64).reshape(-1, 2)
    return encode(f[:, 0], f[:, 1], n)


def run_rensa(items: list[list[str]], t: float) -> np.ndarray:
    from rensa import RMinHash, RMinHashLSH

    n = len(items)
    mhs = []
    for keys in items:
        m = RMinHash(num_perm=NUM_PERM, seed=1)
        m.update(keys)
        mhs.append(m)
    lsh = RMinHashLSH(threshold=t, num_perm=NUM_PERM, num_bands=BANDS)
    for d, m in enumerate(mhs):
        lsh.insert(d, m)
    found = []
    for d, m in enumerate(mhs):
        for e in lsh.query(m):
            if e > d and m.jaccard(mhs[e]) >= t:
                found.append((d, e))
    f = np.array(found, dtype=np.int64).reshape(-1, 2)
    return encode(f[:, 0], f[:, 1], n)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--man", type=int, default=11000, help="man pages sampled (default 11000)")
    ap.add_argument("--doc", type=int, default=4000, help="docstrings sampled (default 4000)")
    ap.add_argument("--threads", type=int, default=1, help="threads for every method (default 1)")
    ap.add_argument("--repeat", type=int, default=3, help="timed runs per method (median)")
    ap.add_argument("--family", type=int, default=100_000, help="family size (0: skip)")
    ap.add_argument("--check", type=int, default=2500, help="documents for the truth check")
    args = ap.parse_args()
    threads = args.threads
    rep = args.repeat
    t_start = time.perf_counter()

    docs = verify_documents(args.man, args.doc)
    texts = [t for _, t in docs]
    n = len(texts)
    kinds = Counter(
        "man" if "/man/" in p else "docstring" if p.endswith(".py") else "license" for p, _ in docs
    )
    mb = sum(len(t.encode("utf-8", "surrogatepass")) for t in texts) / 1e6
    print(f"corpus: {n} documents ({dict(kinds)}), {mb:.1f} MB")

    t0 = time.perf_counter()
    offsets, keys = standin_shingle_sets(texts)
    t_compile = time.perf_counter() - t0
    (offsets, keys), t_shingles = timed(lambda: standin_shingle_sets(texts), rep)
    sample = np.random.default_rng(0).choice(n, min(300, n), replace=False)
    for d in sample:
        got = keys[offsets[d] : offsets[d + 1]].tolist()
        assert got == naive.shingle_keys(texts[d]), f"stand-in shingle keys differ on {d}"
    sizes = np.diff(offsets)
    print(
        f"shingle keys (stand-in): {len(keys):,} keys, median {int(np.median(sizes))} per "
        f"document, {int((sizes == 0).sum())} documents without; {t_shingles:.1f} s "
        f"({t_compile:.1f} s first run) "
        f"(matches tests/naive.py on {len(sample)} sampled documents)"
    )

    t0 = time.perf_counter()
    ti, tj, tjac = exact_similar_pairs(offsets, keys, min(RULE_THRESHOLDS))
    t_truth = time.perf_counter() - t0
    m = min(args.check, n)
    sub = (ti < m) & (tj < m)
    want = brute_force_pairs(offsets[: m + 1], keys[: offsets[m]], min(RULE_THRESHOLDS))
    assert np.array_equal(encode(ti[sub], tj[sub], m), want), "truth differs from brute force"
    truth = {t: encode(ti[tjac >= t], tj[tjac >= t], n) for t in RULE_THRESHOLDS}
    print(
        "truth: "
        + ", ".join(f"{len(truth[t]):,} pairs with J >= {t}" for t in RULE_THRESHOLDS)
        + f" ({t_truth:.1f} s; equal to all-pairs brute force on the first {m} documents)"
    )

    fpr = neardup.Fingerprinter("default")
    w = min(300, n)  # compile every kernel before timing
    wsets = (offsets[: w + 1], keys[: offsets[w]])
    wfps = fpr.fingerprint_many(texts[:w], threads=threads)
    for t in THRESHOLDS:
        neardup.similar_pairs(wsets, t, threads=threads)
        neardup.similar_pairs((*wsets, wfps), t, threads=threads)
        decide_verified(wsets, None, t, threads=threads)
    fps, t_fp = timed(lambda: fpr.fingerprint_many(texts, threads=threads), rep)
    sfps, t_sfp = timed(lambda: set_fingerprints((offsets, keys), threads=threads), rep)
    hfps, t_hfp = timed(
        lambda: set_fingerprints((offsets, keys), method="simhash", threads=threads), rep
    )
    print(
        f"fingerprints: default Fingerprinter {t_fp:.2f} s from the texts; set fingerprints "
        f"from the shingle keys: MinHash {t_sfp:.2f} s, simhash {t_hfp:.2f} s"
    )

    # -- recall of the fingerprint candidates ---------------------------------------------------
    print("\nfingerprint candidates: share of the pairs at J >= t within d bits\n")
    print("| fingerprints | J >= | " + " | ".join(f"d={d}" for d in DISTANCES) + " |")
    print("|---|---|" + "---|" * len(DISTANCES))
    for name, f in (
        ("set MinHash (default of similar_pairs)", sfps),
        ("set simhash", hfps),
        ("default Fingerprinter", fps),
    ):
        for t in RULE_THRESHOLDS:
            sel = tjac >= t
            dist = np.bitwise_count(f[ti[sel]] ^ f[tj[sel]])
            cells = " | ".join(f"{np.mean(dist <= d):.4f}" for d in DISTANCES)
            print(f"| {name} | {t} | {cells} |")
        counts = [f"{len(neardup.find_all(f, d, threads=threads)):,}" for d in DISTANCES]
        print(f"| {name} | candidate pairs | " + " | ".join(counts) + " |")
    print(
        "\ndistance_for_threshold: "
        + ", ".join(f"J >= {t}: {distance_for_threshold(t)}" for t in RULE_THRESHOLDS)
    )

    # -- methods side by side -------------------------------------------------------------------
    rows = []
    for t in THRESHOLDS:
        d = distance_for_threshold(t)
        r, secs = timed(lambda t=t: neardup.similar_pairs((offsets, keys), t, threads=threads), rep)
        found = encode(r.i, r.j, n)
        rows.append((f"neardup similar_pairs (d={d})", t, score(found, truth[t]), secs, True))
        r, secs = timed(
            lambda t=t: neardup.similar_pairs((offsets, keys, fps), t, threads=threads), rep
        )
        found = encode(r.i, r.j, n)
        name = f"similar_pairs on default fingerprints (d={d})"
        rows.append((name, t, score(found, truth[t]), t_fp + secs, True))
        for d in (3, 6):
            p, secs = timed(lambda d=d: neardup.find_all(fps, d, threads=threads), rep)
            found = encode(p[:, 0], p[:, 1], n)
            rows.append(
                (f"fingerprints only (d={d})", t, score(found, truth[t]), t_fp + secs, False)
            )

    arrays = [keys[offsets[d] : offsets[d + 1]] for d in range(n)]
    strings = [a.astype(str).tolist() for a in arrays]
    for name, fn, items in (
        ("datasketch MinHashLSH", run_datasketch, arrays),
        ("rensa RMinHashLSH", run_rensa, strings),
    ):
        for t in THRESHOLDS:
            found, secs = timed(lambda fn=fn, items=items, t=t: fn(items, t), rep)
            rows.append((f"{name} ({NUM_PERM} perm)", t, score(found, truth[t]), secs, True))

    print(f"\n{n} documents, {threads} thread(s), median of {rep} timed runs\n")
    print(
        "| method | J >= | precision | recall | F1 | documents/s from shingle keys | "
        "documents/s from texts |"
    )
    print("|---|---|---|---|---|---|---|")
    for t in THRESHOLDS:
        for name, tt, (p, r, f1), secs, keyed in rows:
            if tt == t:
                total = secs + (t_shingles if keyed else 0.0)
                print(
                    f"| {name} | {t} | {p:.4f} | {r:.4f} | {f1:.4f} | {n / secs:,.0f} | "
                    f"{n / total:,.0f} |"
                )

    # -- decisions: verified (no chaining) against fingerprint clusters ------------------------
    print()
    for t in THRESHOLDS:
        dv, secs = timed(
            lambda t=t: decide_verified((offsets, keys), None, t, threads=threads), rep
        )
        drop = np.flatnonzero(dv.dropped)
        jac = pair_jaccard((offsets, keys), np.stack([drop, dv.kept_for[drop]], axis=1))
        assert np.all(jac >= t) and np.array_equal(jac, dv.jaccard[drop])
        other = decide_verified((offsets, keys), None, t, threads=threads % 4 + 1)
        assert np.array_equal(other.kept_for, dv.kept_for), "decisions depend on threads"
        fd = neardup.decide(fps, distance=6)
        fdrop = np.flatnonzero(~fd.kept)
        fj = pair_jaccard((offsets, keys), np.stack([fdrop, fd.survivor[fdrop]], axis=1))
        print(
            f"J >= {t}: decide_verified drops {len(drop):,} documents, each >= {t} to the "
            f"document kept for it ({dv.checks:,} set intersections, {secs:.2f} s from the "
            f"shingle keys); fingerprint clusters at d=6 drop {len(fdrop):,}, of which "
            f"{int((fj < t).sum()):,} are < {t} to their cluster's survivor"
        )
    if args.family:
        family_scaling(args.family, threads, rep)
    print(f"\n(total {time.perf_counter() - t_start:.0f} s)")


def family_scaling(n_max: int, threads: int, rep: int) -> None:
    """decide_verified on growing prefixes of one family of near-identical documents."""
    import tracemalloc

    texts = template_family(n_max)
    offsets, keys = standin_shingle_sets(texts)
    t = 0.9
    d = distance_for_threshold(t)
    fps = set_fingerprints((offsets, keys), threads=threads)
    print(
        f"\nfamily: {n_max:,} near-identical documents (template_family), J >= {t}, "
        f"candidates within d={d} bits of the set fingerprints\n"
    )
    print(
        "| documents | distinct fingerprints | candidate pairs within d (estimated) | pairs "
        "examined | set intersections | per document | kept | time | peak numpy memory |"
    )
    print("|---|---|---|---|---|---|---|---|---|")
    sample = np.random.default_rng(0).choice(n_max, min(2000, n_max), replace=False)
    within = len(neardup.find_all(fps[sample], d)) / (len(sample) * (len(sample) - 1) / 2)
    decide_verified((offsets[:101], keys[: offsets[100]]), fps[:100], t)  # compile
    sizes = [n_max >> k for k in (3, 2, 1, 0) if n_max >> k >= 1000]
    for n in sizes:
        sets = (offsets[: n + 1], keys[: offsets[n]])
        dv, secs = timed(
            lambda sets=sets, n=n: decide_verified(sets, fps[:n], t, threads=threads), rep
        )
        tracemalloc.start()
        decide_verified(sets, fps[:n], t, threads=threads)
        peak = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
        print(
            f"| {n:,} | {len(np.unique(fps[:n])):,} | {within * n * (n - 1) / 2:,.0f} | "
            f"{dv.candidates:,} | {dv.checks:,} | {dv.checks / n:.2f} | {int(dv.kept.sum())} | "
            f"{secs:.2f} s | {peak / 1e6:.0f} MB |"
        )


if __name__ == "__main__":
    main()

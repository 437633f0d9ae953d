"""Verified dedup against an index with sketches: how often the estimated-Jaccard decisions agree
with the exact Jaccard, by sketch size, on real text, with the bytes each entry costs.

Corpus: the real-text corpus of ``bench/eval_verify.py`` (licenses, copyright files, man pages,
docstrings; ``bench/verify_data.py``), shingle keys from the default Fingerprinter's
``features_many`` (the keys ``neardup dedup`` verifies with). A seeded random half is added to an
index created with ``threshold=0.8`` (``Index.add`` with ``set_sketches``), the other half is
checked against it with ``Index.verified_query`` (what ``neardup dedup --against`` asks). Truth:
the exact Jaccard of every pair (prefix filtering, ``verify_data.exact_similar_pairs``).

For J = 0.8 and 0.9, per sketch size (``--words``):

- pairs: precision and recall of the (new document, entry) pairs the sketches accept, against
  every cross pair with exact Jaccard >= J (recall includes the candidate search's misses);
- documents: what dedup decides, a new document dropped for its best match: precision (its
  entry really is >= J), recall (of the documents that have an entry >= J), F1;
- rows for comparison: the same candidates decided by exact Jaccard (what an index keeping the
  whole shingle sets would decide: the ceiling of any sketch) and an index without sketches
  (fingerprints of the default Fingerprinter within 6 bits, today's ``--against``);
- bytes per entry of the index (sketch + shingle count, and all files), and the time of
  ``verified_query`` for the whole half (median of ``--repeat``);
- with ``--scale N``: an index of N made-up entries (random 16-word sketches; half the queries
  one bit from an entry in every word) in the default layout of an index with sketches
  (``blocks = distance + 1``, 11 tables at 10 bits) and in the fastest layout for single queries
  (``choose_index_blocks``): bytes per entry, build time and verified queries per second in
  batches of 100, 1,000 and 100,000.

Usage::

    python bench/eval_against.py [--words 4,8,16,32] [--threads 1] [--repeat 3] [--scale 1000000]
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

from verify_data import exact_similar_pairs, verify_documents  # noqa: E402

import neardup  # noqa: E402
from neardup.core.similarity import distance_for_threshold, pair_jaccard  # noqa: E402
from neardup.core.sketch import SKETCH_WORDS, Sketches, set_sketches  # noqa: E402
from neardup.index import Index, choose_index_blocks  # noqa: E402

THRESHOLDS = (0.8, 0.9)


def f1(p: float, r: float) -> float:
    return 2 * p * r / (p + r) if p + r else 0.0


def decisions(qi, ci, keys, offsets, t, truth_pairs, truly):
    """(pair P, pair R, document P, document R) of accepted pairs (qi, ci) sorted by query,
    best first (the first pair of each query is the entry it is dropped for)."""
    n = len(offsets) - 1
    exact = pair_jaccard((offsets, keys), np.stack([qi, ci], axis=1)) if len(qi) else np.zeros(0)
    enc = np.unique(qi.astype(np.uint64) * np.uint64(n) + ci.astype(np.uint64))
    tp = len(np.intersect1d(enc, truth_pairs, assume_unique=True))
    pp = tp / len(enc) if len(enc) else 1.0
    pr = tp / len(truth_pairs) if len(truth_pairs) else 1.0
    head = np.ones(len(qi), dtype=bool)
    head[1:] = qi[1:] != qi[:-1]
    dropped, good = qi[head], exact[head] >= t
    dp = float(good.mean()) if len(good) else 1.0
    dr = len(np.intersect1d(dropped[good], truly)) / len(truly) if len(truly) else 1.0
    return pp, pr, dp, dr


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--man", type=int, default=11000, help="man pages sampled (default 11000)")
    ap.add_argument("--doc", type=int, default=4000, help="docstrings sampled (default 4000)")
    ap.add_argument("--words", default="4,8,16,32", help="sketch words to compare")
    ap.add_argument("--threads", type=int, default=1, help="threads (default 1)")
    ap.add_argument("--repeat", type=int, default=3, help="timed runs (median)")
    ap.add_argument("--seed", type=int, default=0, help="seed of the split")
    ap.add_argument("--scale", type=int, default=0, help="entries of the layout comparison")
    args = ap.parse_args()
    t_start = time.perf_counter()
    texts = [t for _, t in verify_documents(args.man, args.doc)]
    n = len(texts)
    feats = neardup.Fingerprinter("default").features_many(texts, threads=args.threads)
    offsets, keys = feats.offsets, feats.keys
    in_index = np.random.default_rng(args.seed).random(n) < 0.5
    entries = np.flatnonzero(in_index)
    queries = np.flatnonzero(~in_index)
    ti, tj, tjac = exact_similar_pairs(offsets, keys, min(THRESHOLDS))
    cross = in_index[ti] != in_index[tj]
    q_t = np.where(in_index[ti], tj, ti)[cross]
    e_t = np.where(in_index[ti], ti, tj)[cross]
    j_t = tjac[cross]
    print(
        f"corpus: {n} documents, {len(keys):,} shingle keys (median "
        f"{int(np.median(np.diff(offsets)))} per document); index: {len(entries)} of them, "
        f"checked: the other {len(queries)}; cross pairs with exact J >= 0.8: "
        f"{int((j_t >= 0.8).sum()):,}, >= 0.9: {int((j_t >= 0.9).sum()):,}"
    )
    truth = {
        t: np.unique(q_t[j_t >= t].astype(np.uint64) * np.uint64(n) + e_t[j_t >= t].astype(np.uint64))
        for t in THRESHOLDS
    }  # fmt: skip
    truly = {t: np.unique(q_t[j_t >= t]) for t in THRESHOLDS}

    rows = []
    sizes = []
    with tempfile.TemporaryDirectory() as tmp:
        for words in [int(w) for w in args.words.split(",")]:
            sk = set_sketches((offsets, keys), words, threads=args.threads)
            path = os.path.join(tmp, f"ix{words}")
            with Index.create(path, threshold=min(THRESHOLDS), sketch_words=words,
                              expected_size=len(entries)) as ix:  # fmt: skip
                ix.add(None, entries.tolist(), sketches=sk.take(entries))
                info = ix.info()
                seg = info["segments"][0]["name"]
                sketch_bytes = sum(
                    os.path.getsize(os.path.join(path, f"{seg}.{k}.npy"))
                    for k in ("sketch", "ssize")
                )
                sizes.append((words, sketch_bytes / len(entries), info["bytes"] / len(entries),
                              info["tables"], info["blocks"]))  # fmt: skip
                qs = sk.take(queries)
                ix.verified_query(qs.take(np.arange(50)), 0.9, threads=args.threads)  # compile
                for t in THRESHOLDS:
                    secs = []
                    for _ in range(args.repeat):
                        t0 = time.perf_counter()
                        m = ix.verified_query(qs, t, threads=args.threads)
                        secs.append(time.perf_counter() - t0)
                    qi = queries[m.query_index]
                    ci = np.asarray(m.ids, dtype=np.int64)
                    scores = decisions(qi, ci, keys, offsets, t, truth[t], truly[t])
                    name = f"sketch, {words} words ({8 * words + 4} bytes)"
                    rows.append((t, name, scores, len(queries) / float(np.median(secs))))
                    if words == SKETCH_WORDS:
                        # the same candidates decided by exact Jaccard: the ceiling of a sketch
                        cand = ix.query_arrays(qs.fingerprints, distance_for_threshold(t))
                        cq = queries[cand.query_index]
                        ce = np.asarray(cand.id, dtype=np.int64)
                        jac = pair_jaccard((offsets, keys), np.stack([cq, ce], axis=1))
                        ok = jac >= t
                        order = np.lexsort((ce[ok], -jac[ok], cq[ok]))
                        scores = decisions(cq[ok][order], ce[ok][order], keys, offsets, t,
                                           truth[t], truly[t])  # fmt: skip
                        rows.append((t, "exact Jaccard of the same candidates (whole sets)",
                                     scores, None))  # fmt: skip
        # an index without sketches: today's --against (default fingerprints within 6 bits)
        fps = feats.fingerprints
        path = os.path.join(tmp, "plain")
        with Index.create(path, 6, expected_size=len(entries)) as ix:
            ix.add(fps[entries], entries.tolist())
            m = ix.nearest(fps[queries], 6)
            qi = queries[m.query_index]
            ci = np.asarray(m.ids, dtype=np.int64)
            for t in THRESHOLDS:
                _, _, dp, dr = decisions(qi, ci, keys, offsets, t, truth[t], truly[t])
                # only each document's nearest entry is known: no pair figures
                rows.append((t, "index without sketches (fingerprints within 6 bits)",
                             (None, None, dp, dr), None))  # fmt: skip

    print(f"\n{args.threads} thread(s); verified_query of all {len(queries)} documents, median "
          f"of {args.repeat}\n")  # fmt: skip
    print("| J >= | decided by | pairs P | pairs R | documents P | documents R | documents F1 "
          "| documents/s |")  # fmt: skip
    print("|---|---|---|---|---|---|---|---|")
    for t in THRESHOLDS:
        for tt, name, (pp, pr, dp, dr), rate in rows:
            if tt == t:
                r = f"{rate:,.0f}" if rate else ""
                pairs = f"{pp:.3f} | {pr:.3f}" if pp is not None else "- | -"
                print(f"| {t} | {name} | {pairs} | {dp:.3f} | {dr:.3f} | "
                      f"{f1(dp, dr):.3f} | {r} |")  # fmt: skip
    print("\n| sketch words | sketch + count bytes per entry | index bytes per entry | tables "
          "(blocks) at distance 10 |")  # fmt: skip
    print("|---|---|---|---|")
    for words, sb, total, tables, blocks in sizes:
        print(f"| {words} | {sb:.1f} | {total:.1f} | {tables} ({blocks}) |")
    if args.scale:
        scale(args.scale, args.threads)
    print(f"\n(total {time.perf_counter() - t_start:.0f} s)")


def scale(n: int, threads: int) -> None:
    """Layouts of an index with sketches at ``n`` entries: disk against query speed."""
    rng = np.random.default_rng(1)
    words = rng.integers(0, 2**64, (n, SKETCH_WORDS), dtype=np.uint64)
    entries = Sketches(words, np.full(n, 300, dtype=np.uint32))
    m = 100_000
    flips = np.uint64(1) << rng.integers(0, 64, (m // 2, SKETCH_WORDS)).astype(np.uint64)
    q = rng.integers(0, 2**64, (m, SKETCH_WORDS), dtype=np.uint64)
    q[: m // 2] = words[: m // 2] ^ flips
    queries = Sketches(q, np.full(m, 300, dtype=np.uint32))
    print(f"\nan index of {n:,} made-up entries with {SKETCH_WORDS}-word sketches, J >= 0.8 "
          f"(candidates within 10 bits), {threads} thread(s)\n")  # fmt: skip
    print("| layout | tables | bytes per entry | build | verified queries/s in batches of "
          "100 | 1,000 | 100,000 |")  # fmt: skip
    print("|---|---|---|---|---|---|---|")
    for name, blocks in (("default with sketches", None),
                         ("fastest for single queries", choose_index_blocks(n, 10))):  # fmt: skip
        with tempfile.TemporaryDirectory() as tmp:
            t0 = time.perf_counter()
            with Index.create(os.path.join(tmp, "ix"), blocks=blocks, threshold=0.8) as ix:
                ix.add(None, np.arange(n), sketches=entries)
                build = time.perf_counter() - t0
                info = ix.info()
                ix.verified_query(queries.take(np.arange(300)), 0.8, threads=threads)
                rates = []
                for size in (100, 1000, m):
                    part = queries.take(np.arange(size))
                    t0 = time.perf_counter()
                    ix.verified_query(part, 0.8, threads=threads)
                    rates.append(size / (time.perf_counter() - t0))
            print(f"| {name} (blocks {info['blocks']}) | {info['tables']} | "
                  f"{info['bytes'] / n:,.0f} | {build:.1f} s | "
                  + " | ".join(f"{r:,.0f}" for r in rates) + " |")  # fmt: skip


if __name__ == "__main__":
    main()

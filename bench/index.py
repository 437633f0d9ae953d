"""Benchmark the persistent index against FAISS IndexBinaryMultiHash and PyPI simhash.

Builds a ``neardup.index.Index`` of N random 64-bit fingerprints and reports build time, bytes on
disk per fingerprint, open time, single-query latency (p50/p99), batch-query throughput, sustained
inserts (``--inserts`` in adds of ``--insert-batch``, merged by the writer's background thread, by
add itself, or by a compaction every ``--compact-every``: ``--merges``) and peak memory; then the
same figures of FAISS ``IndexBinaryMultiHash`` (exact at distance k with k+1 hash tables of
64/(k+1) bits, in memory) on the same data and queries, checking that both return the same
answers; then, at a size it can reach, the ``simhash`` package's ``SimhashIndex`` (pure Python),
also checked against ours.

Queries: half are indexed fingerprints with 1..k random bit flips, half random values.

Usage::

    python bench/index.py                       # N = 10M, distance 3
    python bench/index.py --n 1000000 --blocks 4
"""

from __future__ import annotations

import argparse
import os
import resource
import shutil
import tempfile
import time

import numpy as np

from neardup.index import Index


def peak_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0


def dir_bytes(path: str) -> int:
    return sum(os.path.getsize(os.path.join(path, f)) for f in os.listdir(path))


def make_queries(corpus: np.ndarray, m: int, k: int, rng: np.random.Generator) -> np.ndarray:
    near = corpus[rng.integers(0, len(corpus), m // 2)]
    for _ in range(k):
        flip = rng.random(len(near)) < 0.7
        bits = np.uint64(1) << rng.integers(0, 64, len(near)).astype(np.uint64)
        near = np.where(flip, near ^ bits, near)
    far = rng.integers(0, 2**64, m - m // 2, dtype=np.uint64, endpoint=False)
    q = np.concatenate([near, far])
    rng.shuffle(q)
    return q


def pairs_key(qi: np.ndarray, ci: np.ndarray) -> np.ndarray:
    out = qi.astype(np.uint64) << np.uint64(34) | ci.astype(np.uint64)
    out.sort()
    return out


def latency(fn, queries: np.ndarray) -> tuple[float, float]:
    times = np.empty(len(queries))
    for i, q in enumerate(queries):
        t0 = time.perf_counter()
        fn(q)
        times[i] = time.perf_counter() - t0
    return float(np.percentile(times, 50) * 1e6), float(np.percentile(times, 99) * 1e6)


def insert_figures(args, path: str, extra: np.ndarray) -> tuple[float, int, int]:
    """Add ``extra`` to the index at ``path`` in adds of ``--insert-batch``, merged as
    ``--merges`` says: (seconds, runs after, background merges)."""
    w = Index.open(path, "w")
    w.background_merges = args.merges == "background"
    t0 = time.perf_counter()
    since = 0
    for s in range(0, len(extra), args.insert_batch):
        w.add(extra[s : s + args.insert_batch])
        since += len(extra[s : s + args.insert_batch])
        if args.merges == "compact" and since >= args.compact_every:
            w.compact()
            since = 0
    w.wait_merges()
    ins = time.perf_counter() - t0
    segs = len(w.info()["segments"])
    merges = w.info().get("background_merges", 0)
    w.close()
    return ins, segs, merges


def our_figures(args, corpus, batch, single, extra, work: str) -> tuple[dict, np.ndarray, str]:
    """Build, open, query and add to a neardup Index: its figures, the batch's answers (pair
    keys) and a line describing it."""
    k = args.distance
    path = os.path.join(work, "ix")
    t0 = time.perf_counter()
    ix = Index.create(path, distance=k, blocks=args.blocks, expected_size=args.n)
    ix.add(corpus)
    build = time.perf_counter() - t0
    nbytes = dir_bytes(path)
    ix.close()
    t0 = time.perf_counter()
    ix = Index.open(path)
    open_s = time.perf_counter() - t0
    tables = ix.layout.n_tables
    ix.query_arrays(single[:10])  # compile / load kernels
    ix.query_arrays(batch[: len(batch) // 10])
    p50, p99 = latency(lambda q: ix.query_arrays(q[None]), single)
    t0 = time.perf_counter()
    ours = ix.query_arrays(batch)
    bq = time.perf_counter() - t0
    ix.close()
    rss_query = peak_rss_mb()
    ins, segs, merges = insert_figures(args, path, extra)
    how = {
        "background": "size-tiered merges in a background thread",
        "inline": "size-tiered merges inside add",
        "compact": f"compact every {args.compact_every:,}",
    }[args.merges]
    figures = {
        "build": f"{build:.1f}",
        "bytes": f"{nbytes / args.n:.1f} (tables x 8 + 8: {tables * 8 + 8})",
        "open": f"{open_s * 1e3:.1f}",
        "p50": f"{p50:.0f}",
        "p99": f"{p99:.0f}",
        "batch": f"{args.batch / bq:,.0f}",
        "matches": f"{len(ours.id)}",
        "inserts": f"{len(extra) / ins:,.0f} ({how}; {segs} segments after"
        + (f", {merges} background merges)" if merges else ")")
        if len(extra)
        else "-",
        "rss": f"{peak_rss_mb():.0f}",
    }
    line = (
        f"neardup Index: n={args.n:,} distance={k} blocks={ix.blocks} tables={tables}; "
        f"batch={args.batch:,} single={args.single:,}; {os.cpu_count()} CPUs; "
        f"peak RSS after queries {rss_query:.0f} MB"
    )
    return figures, pairs_key(ours.query_index, ours.id), line


def faiss_figures(args, corpus, batch, single, extra, ours_key: np.ndarray) -> dict:
    """The same figures of FAISS IndexBinaryMultiHash (exact at distance k with k+1 tables),
    in memory: its size is its serialized bytes."""
    import faiss

    k = args.distance
    codes = corpus.view(np.uint8).reshape(-1, 8)
    t0 = time.perf_counter()
    fx = faiss.IndexBinaryMultiHash(64, k + 1, 64 // (k + 1))
    fx.add(codes)
    fbuild = time.perf_counter() - t0
    fbytes = len(faiss.serialize_index_binary(fx)) / args.n
    faiss.omp_set_num_threads(1)  # a single query: OpenMP threads only add their wake-ups
    one = single.view(np.uint8).reshape(-1, 8)
    fx.range_search(one[:10], k + 1)
    fp50, fp99 = latency(lambda q: fx.range_search(q, k + 1), one[:, None, :])
    faiss.omp_set_num_threads(os.cpu_count() or 1)
    t0 = time.perf_counter()
    lims, _, idx = fx.range_search(batch.view(np.uint8).reshape(-1, 8), k + 1)
    fbq = time.perf_counter() - t0
    fqi = np.repeat(np.arange(len(batch)), np.diff(lims).astype(np.int64))
    same = np.array_equal(pairs_key(fqi, idx), ours_key)
    ecodes = extra.view(np.uint8).reshape(-1, 8)
    t0 = time.perf_counter()
    for s in range(0, len(extra), args.insert_batch):
        fx.add(ecodes[s : s + args.insert_batch])
    fins = time.perf_counter() - t0
    return {
        "build": f"{fbuild:.1f}",
        "bytes": f"{fbytes:.1f} (in memory, serialized)",
        "open": "",
        "p50": f"{fp50:.0f}",
        "p99": f"{fp99:.0f}",
        "batch": f"{args.batch / fbq:,.0f}",
        "matches": f"{len(idx)} ({'same' if same else 'DIFFERENT'} answers)",
        "inserts": f"{len(extra) / fins:,.0f} (in memory, not durable)" if len(extra) else "-",
        "rss": f"{peak_rss_mb():.0f} (process)",
    }


LABELS = {
    "build": "build (s)",
    "bytes": "bytes on disk / fingerprint",
    "open": "open (ms)",
    "p50": "single query p50 (us)",
    "p99": "single query p99 (us)",
    "batch": "batch queries / s",
    "matches": "matches in batch",
    "inserts": "inserts / s",
    "rss": "peak RSS (MB)",
}


def simhash_figures(args, corpus: np.ndarray, rng: np.random.Generator, work: str) -> None:
    """Build and query PyPI simhash's SimhashIndex and ours on the first ``--simhash-n``
    fingerprints, and print both."""
    k = args.distance
    try:
        from simhash import Simhash, SimhashIndex
    except ImportError:
        print("\n(simhash not installed: pip install simhash)")
        return
    m = args.simhash_n
    small = corpus[:m]
    sq = make_queries(small, 1000, k, rng)
    t0 = time.perf_counter()
    objs = [(str(i), Simhash(int(v))) for i, v in enumerate(small.tolist())]
    sx = SimhashIndex(objs, f=64, k=k)
    sbuild = time.perf_counter() - t0
    t0 = time.perf_counter()
    got = [sx.get_near_dups(Simhash(int(v))) for v in sq.tolist()]
    sqs = time.perf_counter() - t0
    spairs = pairs_key(
        np.repeat(np.arange(len(sq)), [len(g) for g in got]),
        np.array([int(i) for g in got for i in g], dtype=np.int64),
    )
    p2 = os.path.join(work, "small")
    t0 = time.perf_counter()
    with Index.create(p2, distance=k, expected_size=m) as s_ix:
        s_ix.add(small)
        obuild = time.perf_counter() - t0
        t0 = time.perf_counter()
        r = s_ix.query_arrays(sq)
        oqs = time.perf_counter() - t0
    same = np.array_equal(pairs_key(r.query_index, r.id), spairs)
    print()
    print(
        f"PyPI simhash SimhashIndex at n={m:,}, 1000 queries (answers {'same' if same else 'DIFFERENT'}):"
    )
    print("| measure | neardup Index | simhash.SimhashIndex |")
    print("|---|---|---|")
    print(f"| build (s) | {obuild:.2f} | {sbuild:.2f} |")
    print(f"| queries / s | {len(sq) / oqs:,.0f} | {len(sq) / sqs:,.0f} |")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--n", type=int, default=10_000_000, help="indexed fingerprints")
    ap.add_argument("--distance", type=int, default=3)
    ap.add_argument("--blocks", type=int, default=None, help="default: chosen for --n")
    ap.add_argument("--batch", type=int, default=200_000, help="queries in the batch test")
    ap.add_argument("--single", type=int, default=3_000, help="single queries timed")
    ap.add_argument("--inserts", type=int, default=1_000_000, help="fingerprints inserted")
    ap.add_argument("--insert-batch", type=int, default=10_000)
    ap.add_argument(
        "--merges",
        choices=["background", "inline", "compact"],
        default="background",
        help="how runs are merged during the inserts: by the writer's background thread, "
        "inside add, or by a compaction every --compact-every inserts (the former policy)",
    )
    ap.add_argument("--compact-every", type=int, default=250_000, help="with --merges compact")
    ap.add_argument("--simhash-n", type=int, default=20_000, help="size for PyPI simhash")
    ap.add_argument("--no-faiss", action="store_true")
    ap.add_argument("--dir", default=None, help="where to build (default: a temp dir)")
    args = ap.parse_args()
    k = args.distance
    rng = np.random.default_rng(42)
    corpus = rng.integers(0, 2**64, args.n, dtype=np.uint64, endpoint=False)
    batch = make_queries(corpus, args.batch, k, rng)
    single = make_queries(corpus, args.single, k, rng)
    extra = rng.integers(0, 2**64, args.inserts, dtype=np.uint64, endpoint=False)
    work = tempfile.mkdtemp(prefix="neardup-bench-", dir=args.dir)
    try:
        ours, ours_key, line = our_figures(args, corpus, batch, single, extra, work)
        shutil.rmtree(work, ignore_errors=True)
        os.makedirs(work, exist_ok=True)
        theirs = (
            {} if args.no_faiss else faiss_figures(args, corpus, batch, single, extra, ours_key)
        )
        print(line)
        print()
        print(f"| measure | neardup Index | FAISS IndexBinaryMultiHash(nhash={k + 1}) |")
        print("|---|---|---|")
        for key, label in LABELS.items():
            extra_label = f" ({args.insert_batch:,} per add)" if key == "inserts" else ""
            print(f"| {label}{extra_label} | {ours[key]} | {theirs.get(key, '')} |")

        if args.simhash_n:
            simhash_figures(args, corpus, rng, work)
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()

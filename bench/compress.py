"""Compressed index tables against plain ones, the information bound and the paper's coding.

For each size N: N random 64-bit fingerprints; a plain index and a compressed one
(``Index.create(compress=True)``) with the same layout; bytes per fingerprint per table against
the information bound ``log2(C(2**64, N)) / N``; build time; single-query p50/p99 (queries
alternate between the two indexes, so both see the same machine load); batch queries/s (median
of 3); the same answers from both. Then the paper's block coding (bench/paper_codec.py: Huffman
code of the highest differing bit, 1 KB blocks, last values in memory) on the same sorted table:
size and time per prefix lookup, against Elias-Fano doing the same lookups; and the conversion
of the plain index with ``compact(compress=True)``.

With ``--sequential`` (for sizes whose two indexes do not fit in the page cache together) the
plain index is measured, then converted and the compressed one measured; the compressed build is
then the conversion.

Usage::

    python bench/compress.py --sizes 1e7
    python bench/compress.py --sizes 1e8 --sequential --dir /tmp
"""

from __future__ import annotations

import argparse
import os
import resource
import shutil
import sys
import tempfile
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import paper_codec  # noqa: E402

from neardup.index import Index, choose_index_blocks  # noqa: E402
from neardup.index.codec import CompressedTable, information_bound_bits  # noqa: E402


def peak_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0


def make_queries(corpus: np.ndarray, m: int, k: int, rng: np.random.Generator) -> np.ndarray:
    near = corpus[rng.integers(0, len(corpus), m // 2)]
    for _ in range(k):
        flip = rng.random(len(near)) < 0.7
        bits = np.uint64(1) << rng.integers(0, 64, len(near)).astype(np.uint64)
        near = np.where(flip, near ^ bits, near)
    q = np.concatenate([near, rng.integers(0, 2**64, m - m // 2, dtype=np.uint64)])
    rng.shuffle(q)
    return q


def table_bytes(ix: Index) -> float:
    """Bytes per fingerprint per table: the table files (fp and t1..) over N * tables."""
    seg = ix._body["segments"][0]
    tables = [e for role, e in seg["files"].items() if role == "fp" or role[1:].isdigit()]
    return sum(e["bytes"] for e in tables) / (seg["rows"] * ix.layout.n_tables)


def warm(path: str) -> None:
    """Read every file once so both indexes are measured from the page cache."""
    for name in os.listdir(path):
        with open(os.path.join(path, name), "rb") as f:
            while f.read(16 << 20):
                pass


def latencies(indexes: list[Index], queries: np.ndarray) -> list[np.ndarray]:
    out = [np.empty(len(queries)) for _ in indexes]
    for i in range(len(queries)):
        q = queries[i : i + 1]
        for j in range(len(indexes)) if i % 2 == 0 else reversed(range(len(indexes))):
            t0 = time.perf_counter()
            indexes[j].query_arrays(q)
            out[j][i] = time.perf_counter() - t0
    return out


def batch_rate(ix: Index, queries: np.ndarray, reps: int = 3):
    times = []
    for _ in range(reps):
        t0 = time.perf_counter()
        m = ix.query_arrays(queries)
        times.append(time.perf_counter() - t0)
    return len(queries) / float(np.median(times)), m


def same(a, b) -> bool:
    return all(np.array_equal(x, y) for x, y in zip(a, b, strict=True))


def paper_peer(values: np.ndarray, shift: int, ef: CompressedTable, rng, block_bytes: int):
    t0 = time.perf_counter()
    t = paper_codec.encode(values, block_bytes)
    enc = time.perf_counter() - t0
    ok = bool(np.array_equal(paper_codec.decode(t), values))
    pre = values[rng.integers(0, len(values), 100_000)] >> np.uint64(shift)
    paper_codec.prefix_counts(t, pre[:10], shift)
    t0 = time.perf_counter()
    got = paper_codec.prefix_counts(t, pre, shift)
    paper_us = (time.perf_counter() - t0) / len(pre) * 1e6
    bounds = np.concatenate([pre << np.uint64(shift), (pre + np.uint64(1)) << np.uint64(shift)])
    ef.searchsorted(bounds[:10])
    t0 = time.perf_counter()
    pos = ef.searchsorted(bounds)
    ef_us = (time.perf_counter() - t0) / len(pre) * 1e6
    ok = ok and bool(np.array_equal(got, pos[len(pre) :] - pos[: len(pre)]))
    bits = (t.disk_bytes + t.memory_bytes) * 8 / len(values)
    return bits, enc, paper_us, ef_us, ok


def run(n: int, args: argparse.Namespace) -> None:
    rng = np.random.default_rng(args.seed)
    t0 = time.perf_counter()
    fps = rng.integers(0, 2**64, n, dtype=np.uint64)
    gen_s = time.perf_counter() - t0
    blocks = args.blocks or choose_index_blocks(n, args.distance)
    queries = make_queries(fps, args.queries, args.distance, rng)
    single = queries[: args.single]
    root = tempfile.mkdtemp(prefix="neardup-compress-", dir=args.dir)
    rows: dict[str, dict] = {}
    try:
        print(
            f"N = {n:,}, distance {args.distance}, blocks {blocks}; generated in {gen_s:.1f} s",
            flush=True,
        )
        plain_path = os.path.join(root, "plain")
        t0, c0 = time.perf_counter(), time.process_time()
        plain = Index.create(plain_path, args.distance, blocks)
        plain.add(fps)
        rows["plain"] = {
            "build": time.perf_counter() - t0,
            "cpu": time.process_time() - c0,
            "rss": peak_rss_mb(),
        }
        print(f"  plain built in {rows['plain']['build']:.1f} s", flush=True)
        comp = None
        if not args.sequential:
            comp_path = os.path.join(root, "ef")
            t0, c0 = time.perf_counter(), time.process_time()
            comp = Index.create(comp_path, args.distance, blocks, compress=True)
            comp.add(fps)
            rows["ef"] = {
                "build": time.perf_counter() - t0,
                "cpu": time.process_time() - c0,
                "rss": peak_rss_mb(),
            }
            print(f"  compressed built in {rows['ef']['build']:.1f} s", flush=True)
        del fps
        measured = [("plain", plain)] + ([("ef", comp)] if comp is not None else [])
        for _name, ix in measured:
            warm(ix.path)
            ix.query_arrays(queries[:1000])
        lats = latencies([ix for _, ix in measured], single)
        answers = {}
        for (name, ix), lat in zip(measured, lats, strict=True):
            rows[name]["lat"] = lat
            rows[name]["rate"], answers[name] = batch_rate(ix, queries)
            rows[name]["bytes"] = table_bytes(ix)
            rows[name]["total"] = ix.info()["bytes"] / n
        if args.sequential:
            t0, c0 = time.perf_counter(), time.process_time()
            plain.compact(compress=True)
            rows["ef"] = {
                "build": time.perf_counter() - t0,
                "cpu": time.process_time() - c0,
                "rss": peak_rss_mb(),
                "convert": True,
            }
            print(f"  converted in {rows['ef']['build']:.1f} s", flush=True)
            comp = plain
            warm(comp.path)
            comp.query_arrays(queries[:1000])
            rows["ef"]["lat"] = latencies([comp], single)[0]
            rows["ef"]["rate"], answers["ef"] = batch_rate(comp, queries)
            rows["ef"]["bytes"] = table_bytes(comp)
            rows["ef"]["total"] = comp.info()["bytes"] / n
        else:
            t0, c0 = time.perf_counter(), time.process_time()
            plain.compact(compress=True)
            rows["ef"]["convert_s"] = time.perf_counter() - t0
            rows["ef"]["convert_cpu"] = time.process_time() - c0
        agree = same(answers["plain"], answers["ef"])
        assert comp is not None
        table1 = comp._segs[0].tables[1 if comp.layout.n_tables > 1 else 0]
        values = table1.decode()
        shift = 64 - comp.layout.tables[1 if comp.layout.n_tables > 1 else 0].prefix_bits
        peer = paper_peer(values, shift, table1, rng, args.block_bytes)
        del values
        report(n, blocks, rows, peer, agree, args)
        for ix in (plain, comp):
            ix.close()
    finally:
        if not args.keep:
            shutil.rmtree(root, ignore_errors=True)


def report(n, blocks, rows, peer, agree, args) -> None:
    bound = information_bound_bits(n) / 8
    base = rows["plain"]
    print(f"\nN = {n:,}, distance {args.distance}, blocks {blocks}; answers identical: {agree}")
    print(f"information bound: {bound:.3f} bytes per fingerprint per table")
    print(
        "| index | bytes/fp/table | x bound | bytes/fp on disk | build s (CPU s) "
        "| single p50 / p99 µs | x plain p99 | batch queries/s | x plain | peak RSS MB |"
    )
    print("|---|---:|---:|---:|---:|---|---:|---:|---:|---:|")
    for name, label in (("plain", "plain (uint64 tables)"), ("ef", "compressed (Elias-Fano)")):
        r = rows[name]
        p50, p99 = np.percentile(r["lat"], [50, 99]) * 1e6
        bp99 = np.percentile(base["lat"], 99) * 1e6
        build = f"{r['build']:.1f} ({r['cpu']:.1f})" + (" conversion" if r.get("convert") else "")
        print(
            f"| {label} | {r['bytes']:.3f} | {r['bytes'] / bound:.3f} | {r['total']:.1f} | "
            f"{build} | {p50:.0f} / {p99:.0f} | {p99 / bp99:.2f} | {r['rate']:,.0f} | "
            f"{r['rate'] / base['rate']:.2f} | {r['rss']:,.0f} |"
        )
    if "convert_s" in rows["ef"]:
        print(
            f"conversion of the plain index (compact --compress): {rows['ef']['convert_s']:.1f} s "
            f"({rows['ef']['convert_cpu']:.1f} CPU s)"
        )
    bits, enc, paper_us, ef_us, ok = peer
    print(
        f"\nTable 1 ({n:,} values): paper's block coding ({args.block_bytes} B blocks, Huffman "
        f"of the highest differing bit, last values in memory) {bits / 8:.3f} bytes/value "
        f"({bits / 8 / bound:.3f} x bound), encoded in {enc:.1f} s, round trip and lookups "
        f"correct: {ok}; prefix lookup {paper_us:.2f} µs against {ef_us:.2f} µs for Elias-Fano "
        f"(same prefixes, in-kernel)."
    )
    print(
        f"peak RSS of the bench process: {peak_rss_mb():,.0f} MB (the peak RSS column is the "
        f"process's peak after that index was built and queried, memory-mapped pages included)",
        flush=True,
    )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--sizes", default="1e7")
    ap.add_argument("--distance", type=int, default=3)
    ap.add_argument("--blocks", type=int, default=None)
    ap.add_argument("--queries", type=int, default=200_000)
    ap.add_argument("--single", type=int, default=3000)
    ap.add_argument("--block-bytes", type=int, default=1024)
    ap.add_argument("--sequential", action="store_true")
    ap.add_argument("--dir", default=None, help="where the indexes are built (deleted after)")
    ap.add_argument("--keep", action="store_true")
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    for s in args.sizes.split(","):
        run(int(float(s)), args)


if __name__ == "__main__":
    main()

"""Load test of ``neardup serve``: HTTP against in-process, local index against Redis.

For each backend (a local index directory; Redis on one node; a 3-node Redis Cluster, all on
127.0.0.1 with ``appendonly yes``/``appendfsync always``) it indexes N random fingerprints, then
measures, in process (``Index.query_arrays``) and over HTTP (a real ``neardup serve`` process,
one keep-alive httpx client): single-query p50/p99 latency and batch throughput. Queries: half
are indexed fingerprints with up to k bit flips, half random. Answers over HTTP are checked
against the in-process ones.

Usage::

    python bench/serve.py                                  # N = 10M, distance 3, all backends
    python bench/serve.py --n 1000000 --backends redis --sweep   # bucket layouts on Redis
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
import time

import httpx
import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "tests"))
from servers import RedisCluster3, RedisNode, Service  # noqa: E402

from neardup.index import Index  # noqa: E402
from neardup.index.redis import RedisIndex  # noqa: E402


def make_queries(corpus, m, k, rng):
    near = corpus[rng.integers(0, len(corpus), m // 2)]
    for _ in range(k):
        flip = rng.random(len(near)) < 0.7
        bits = np.uint64(1) << rng.integers(0, 64, len(near)).astype(np.uint64)
        near = np.where(flip, near ^ bits, near)
    q = np.concatenate([near, rng.integers(0, 2**64, m - m // 2, dtype=np.uint64)])
    rng.shuffle(q)
    return q


def pct(times):
    t = np.array(times) * 1e3
    return float(np.percentile(t, 50)), float(np.percentile(t, 99))


def in_process(ix, singles, batches):
    for q in singles[:50]:
        ix.query_arrays([q])
    times = []
    for q in singles:
        t = time.perf_counter()
        ix.query_arrays([q])
        times.append(time.perf_counter() - t)
    t = time.perf_counter()
    answers = [ix.query_arrays(b) for b in batches]
    rate = sum(len(b) for b in batches) / (time.perf_counter() - t)
    return pct(times), rate, answers


def over_http(url, singles, batches, answers):
    with httpx.Client(base_url=url, timeout=120) as c:
        for q in singles[:50]:
            c.post("/query", json={"fingerprints": [int(q)]})
        times = []
        for q in singles:
            t = time.perf_counter()
            r = c.post("/query", json={"fingerprints": [int(q)]})
            times.append(time.perf_counter() - t)
            assert r.status_code == 200, r.text
        bodies = [{"fingerprints": b.tolist()} for b in batches]
        t = time.perf_counter()
        replies = [c.post("/query", json=body) for body in bodies]
        rate = sum(len(b) for b in batches) / (time.perf_counter() - t)
    for r, m in zip(replies, answers):
        got = [
            (i, x["id"], x["distance"])
            for i, res in enumerate(r.json()["results"])
            for x in res["matches"]
        ]
        want = list(zip(m.query_index.tolist(), m.id.tolist(), m.distance.tolist()))
        assert got == want, "HTTP answers differ from in-process answers"
    return pct(times), rate


def load_redis(url, corpus, chunk=500_000, **create):
    t = time.perf_counter()
    ix = RedisIndex.create(url, **create)
    for s in range(0, len(corpus), chunk):
        ix.add(corpus[s : s + chunk], ids=np.arange(s, min(len(corpus), s + chunk)))
    return ix, time.perf_counter() - t


def main() -> None:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--n", type=float, default=1e7)
    ap.add_argument("--distance", type=int, default=3)
    ap.add_argument("--singles", type=int, default=2000)
    ap.add_argument("--batch", type=int, default=10_000)
    ap.add_argument("--batches", type=int, default=10)
    ap.add_argument("--backends", default="local,redis,cluster")
    ap.add_argument("--workers", type=int, default=1)
    ap.add_argument(
        "--sweep", action="store_true", help="Redis: single-query latency per bucket layout"
    )
    args = ap.parse_args()
    n, k = int(args.n), args.distance
    rng = np.random.default_rng(0)
    corpus = rng.integers(0, 2**64, n, dtype=np.uint64)
    singles = make_queries(corpus, args.singles, k, rng)
    batches = [make_queries(corpus, args.batch, k, rng) for _ in range(args.batches)]
    tmp = tempfile.mkdtemp(prefix="neardup-serve-bench-")
    rows = []
    try:
        if args.sweep:
            node = RedisNode(os.path.join(tmp, "sweep"))
            try:
                for blocks, bits in [(4, 16), (4, 13), (4, 10), (5, 16), (5, 19)]:
                    node.cli("flushall")
                    ix, load = load_redis(
                        node.url, corpus, distance=k, blocks=blocks, bucket_bits=bits
                    )
                    (p50, p99), rate, _ = in_process(ix, singles, batches[:2])
                    mem = node.cli("info", "memory").split("used_memory:")[1].split()[0]
                    print(
                        f"blocks {blocks} bucket_bits {bits}: {n / 2**bits:.0f} records/bucket, "
                        f"p50 {p50:.3f} ms p99 {p99:.3f} ms, {rate:,.0f} q/s, "
                        f"{int(mem) / n:.0f} B/fp, load {load:.0f} s",
                        flush=True,
                    )
                    ix.close()
            finally:
                node.stop()
            return
        for backend in args.backends.split(","):
            stop = []
            if backend == "local":
                loc = os.path.join(tmp, "ix")
                t = time.perf_counter()
                with Index.create(loc, distance=k, expected_size=n) as ix:
                    ix.add(corpus)
                load = time.perf_counter() - t
                ix = Index.open(loc)
                layout = f"{ix.blocks} blocks"
            else:
                if backend == "redis":
                    node = RedisNode(os.path.join(tmp, "redis"))
                    stop.append(node.stop)
                    url, nodes = node.url + "?name=bench", [node]
                else:
                    cl = RedisCluster3(os.path.join(tmp, "cluster"))
                    stop.append(cl.stop)
                    url, nodes = cl.url + "?name=bench", cl.nodes
                # bulk load with fsync once a second, then measure with fsync on every write
                for x in nodes:
                    x.cli("config", "set", "appendfsync", "everysec")
                ix, load = load_redis(url, corpus, distance=k, expected_size=n)
                for x in nodes:
                    x.cli("config", "set", "appendfsync", "always")
                loc = url
                layout = f"{ix.blocks} blocks, {ix.bucket_bits} bucket bits"
            print(f"{backend}: loaded {n:,} in {load:.1f} s ({layout})", flush=True)
            try:
                (p50, p99), rate, answers = in_process(ix, singles, batches)
                rows.append((backend, "in process", p50, p99, rate))
                print(rows[-1], flush=True)
                s = Service(loc, "--workers", str(args.workers))
                try:
                    (h50, h99), hrate = over_http(s.url, singles, batches, answers)
                finally:
                    s.stop()
                rows.append((backend, f"HTTP ({args.workers} worker)", h50, h99, hrate))
                print(rows[-1], flush=True)
            finally:
                ix.close()
                for f in stop:
                    f()
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    print(
        f"\nN = {n:,}, distance {k}, {args.singles} single queries, {args.batches} batches of {args.batch}"
    )
    print("| backend | path | single p50 ms | single p99 ms | batch queries/s |")
    print("|---|---|---:|---:|---:|")
    for b, path, p50, p99, rate in rows:
        print(f"| {b} | {path} | {p50:.3f} | {p99:.3f} | {rate:,.0f} |")


if __name__ == "__main__":
    main()

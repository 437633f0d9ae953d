"""Distributed find_all on a LocalCluster beside the single-machine path, on the same data.

Prints wall time, peak RSS per worker process (sampled from the workers' own processes), the
shuffle volume (bytes of fingerprint + position moved into shards, counted from the shard sizes)
and per-element costs used for the scaling estimate in the README.

    python bench/distributed.py                 # 20M fingerprints, 2 workers
    python bench/distributed.py --n 2000000     # smaller
"""

from __future__ import annotations

import argparse
import os
import resource
import sys
import threading
import time

import numpy as np

# this file is named like the dask package: keep its folder off the import path (worker
# processes inherit the path)
_HERE = os.path.dirname(os.path.abspath(__file__))
sys.path[:] = [p for p in sys.path if os.path.abspath(p or os.curdir) != _HERE]


def corpus(n: int, seed: int = 0) -> np.ndarray:
    """Random fingerprints with 5% near copies (1-3 bits flipped), shuffled."""
    rng = np.random.default_rng(seed)
    m = n // 20
    fp = rng.integers(0, 2**64, n, dtype=np.uint64)
    src = rng.integers(0, n - m, m)
    flips = np.zeros(m, dtype=np.uint64)
    for _ in range(3):
        flips |= np.uint64(1) << rng.integers(0, 64, m).astype(np.uint64)
    fp[n - m :] = fp[src] ^ flips
    rng.shuffle(fp)
    return fp


def _rss() -> int:
    import psutil

    return psutil.Process().memory_info().rss


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=20_000_000, help="fingerprints (default 20M)")
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--distance", type=int, default=3)
    ap.add_argument("--shard-size", type=int, default=None, help="fingerprints per shard")
    args = ap.parse_args()

    from distributed import Client, LocalCluster

    import neardup
    import neardup.distributed as nd

    fp = corpus(args.n)
    print(f"n={args.n:,} distance={args.distance} workers={args.workers} cpus={os.cpu_count()}")

    opts = {} if args.shard_size is None else {"shard_size": args.shard_size}
    with (
        LocalCluster(
            n_workers=args.workers,
            threads_per_worker=1,
            dashboard_address=None,
            processes=True,
            memory_limit=0,
        ) as cluster,
        Client(cluster) as c,
    ):
        nd.find_all(fp[:1000], args.distance, client=c)  # load the numba kernels on the workers
        base = c.run(_rss)
        peak = dict(base)
        stop = threading.Event()

        def sample() -> None:
            while not stop.is_set():
                try:
                    for w, v in c.run(_rss).items():
                        peak[w] = max(peak[w], v)
                except Exception:  # noqa: BLE001 - a sample may race with shutdown
                    pass
                time.sleep(0.25)

        th = threading.Thread(target=sample, daemon=True)
        th.start()
        t0 = time.perf_counter()
        rep = nd.search(fp, args.distance, client=c, **opts)
        t_dist = time.perf_counter() - t0
        stop.set()
        th.join()

    neardup.find_all(fp[:1000], args.distance)
    rss0 = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    t0 = time.perf_counter()
    single = neardup.find_all(fp, args.distance)
    t_single = time.perf_counter() - t0
    rss1 = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024

    assert np.array_equal(single, rep.pairs), "distributed answer differs from find_all"
    mb = 1e6
    print(f"plan: {rep.plan.describe()}; tasks={rep.stats['tasks']}")
    print()
    print("| path | wall s | peak RSS per process (MB) | shuffle (MB) | pairs |")
    print("|---|---:|---|---:|---:|")
    peaks = ", ".join(f"{peak[w] / mb:,.0f}" for w in sorted(peak))
    print(
        f"| neardup.distributed, LocalCluster {args.workers}x1 thread | {t_dist:.1f} | "
        f"{peaks} | {rep.stats['shuffle_bytes'] / mb:,.0f} | {len(rep.pairs):,} |"
    )
    print(
        f"| neardup.find_all, {os.cpu_count()} threads | {t_single:.1f} | "
        f"{max(rss0, rss1) / mb:,.0f} (whole process) | 0 | {len(single):,} |"
    )
    print()
    groups = len(rep.plan.groups)
    print(
        f"identical answers: yes; distributed / single time ratio {t_dist / t_single:.2f}; "
        f"largest shard {rep.stats['largest_shard']:,} fingerprints"
    )
    ns_elem = t_dist * args.workers / (args.n * groups) * 1e9
    print(
        f"per element and table group: {ns_elem:.0f} ns of worker time "
        f"({groups} groups of tables, {rep.plan.n_shards} shards each)"
    )


if __name__ == "__main__":
    main()

"""Batch mode: a new batch of fingerprints against a stored corpus, local and on Dask.

Builds (or opens, ``--index``) an index of N stored random fingerprints, makes a batch of B new
ones (half near a stored fingerprint, half random) and answers "which stored fingerprints lie
within k bits of each new one" four ways, checking that all agree:

1. online: ``Index.query_arrays(batch)`` (the stored corpus's own tables, all threads);
2. batch mode on this process, one thread: the batch's tables built once, the index's
   segments streamed past them (``neardup.index.batch.batch_query``);
3. the same with all threads;
4. batch mode on a LocalCluster of ``--workers`` single-thread workers
   (``neardup.distributed.batch_search``), with the workers' peak memory.

Worker-seconds per stored fingerprint (reading plus probing, summed over tasks, measured inside
them) give the time for a corpus of ``--extrapolate`` fingerprints on ``--machines`` workers,
printed beside the paper's figure (1M new against 8B stored in about 100 s on 200 mappers).

Usage::

    python bench/batch.py --stored 1e8 --batch 1e6 --dir /tmp
    python bench/batch.py --index /tmp/ix --batch 1e6
"""

from __future__ import annotations

import argparse
import os
import resource
import shutil
import sys
import tempfile
import time

import dask
import numpy as np

# bench/distributed.py is named like the dask package: keep this folder off the import path
# (worker processes inherit the path)
_HERE = os.path.dirname(os.path.abspath(__file__))
sys.path[:] = [p for p in sys.path if os.path.abspath(p or os.curdir) != _HERE]

import neardup.distributed as nd  # noqa: E402
from neardup.index import Index  # noqa: E402
from neardup.index.batch import BatchTables, batch_query, index_parts, read_index_part  # noqa: E402


def peak_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0


def worker_peak_mb() -> float:
    """Peak RSS of this process's own address space (VmHWM; ru_maxrss would also count the
    parent's peak, which Linux carries across fork and exec)."""
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024.0
    return float("nan")


def build_index(path: str, n: int, distance: int, compress: bool, seed: int) -> float:
    rng = np.random.default_rng(seed)
    t0 = time.perf_counter()
    with Index.create(path, distance, expected_size=n, compress=compress) as ix:
        ix.add(rng.integers(0, 2**64, n, dtype=np.uint64))
    return time.perf_counter() - t0


def make_batch(ix: Index, b: int, k: int, rng: np.random.Generator) -> np.ndarray:
    """Half near stored fingerprints (1..k bits flipped), half random."""
    parts = index_parts(ix, 1 << 20)
    picks = []
    for p in rng.choice(len(parts), min(len(parts), 8), replace=False):
        fps = read_index_part(parts[p])[0]
        picks.append(fps[rng.integers(0, len(fps), b // 2 // min(len(parts), 8) + 1)])
    near = np.concatenate(picks)[: b // 2]
    for _ in range(k):
        flip = rng.random(len(near)) < 0.7
        near = np.where(
            flip, near ^ (np.uint64(1) << rng.integers(0, 64, len(near)).astype(np.uint64)), near
        )
    q = np.concatenate([near, rng.integers(0, 2**64, b - len(near), dtype=np.uint64)])
    rng.shuffle(q)
    return q


def flat(m) -> tuple:
    """(query index, ids, distances) of Matches or of the flat form query_arrays returns."""
    return (m.query_index, m.ids, m.distances) if hasattr(m, "offsets") else tuple(m)


def same(a, b) -> bool:
    return all(np.array_equal(x, y) for x, y in zip(flat(a), flat(b), strict=True))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--stored", type=float, default=1e8)
    ap.add_argument("--batch", type=float, default=1e6)
    ap.add_argument("--distance", type=int, default=3)
    ap.add_argument("--blocks", type=int, default=None, help="layout of the batch's tables")
    ap.add_argument("--index", default=None, help="an existing index to use as the corpus")
    ap.add_argument("--plain", action="store_true", help="build the stored index uncompressed")
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--part-rows", type=int, default=1 << 22)
    ap.add_argument("--extrapolate", type=float, default=8e9)
    ap.add_argument("--machines", type=int, default=200)
    ap.add_argument("--dir", default=None)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--skip-online", action="store_true")
    args = ap.parse_args()
    rng = np.random.default_rng(args.seed + 1)
    root = None
    path = args.index
    if path is None:
        root = tempfile.mkdtemp(prefix="neardup-batch-", dir=args.dir)
        path = os.path.join(root, "stored")
        built = build_index(path, int(args.stored), args.distance, not args.plain, args.seed)
        print(f"stored index of {int(args.stored):,} built in {built:.1f} s", flush=True)
    try:
        run(path, args, rng)
    finally:
        if root is not None:
            shutil.rmtree(root, ignore_errors=True)


def run(path: str, args: argparse.Namespace, rng: np.random.Generator) -> None:
    from distributed import Client, LocalCluster

    ix = Index.open(path)
    n = len(ix)
    k = args.distance
    batch = make_batch(ix, int(args.batch), k, rng)
    print(
        f"stored {n:,} ({'compressed' if ix.codec else 'plain'} index, distance {ix.distance}, "
        f"blocks {ix.blocks}), batch {len(batch):,}, distance {k}",
        flush=True,
    )
    rows = []
    answers = {}
    t0 = time.perf_counter()
    tables = BatchTables(batch, k, args.blocks)
    build = time.perf_counter() - t0
    print(
        f"batch tables: {tables.layout.n_tables} tables (blocks {tables.layout.blocks}), "
        f"{tables.nbytes / 1e6:.0f} MB, built in {build:.1f} s",
        flush=True,
    )
    # rows: (run, wall s, worker wall s, worker CPU s, note); worker figures sum over tasks
    if not args.skip_online:
        ix.query_arrays(batch[:1000])
        t0, c0 = time.perf_counter(), time.process_time()
        answers["online"] = ix.query_arrays(batch, k)
        wall, cpu = time.perf_counter() - t0, time.process_time() - c0
        rows.append(
            ("online: Index.query_arrays (the stored corpus's tables)", wall, None, cpu, "")
        )
        print(f"  online {wall:.1f} s", flush=True)
    for threads in (1, 2):
        t0, c0 = time.perf_counter(), time.process_time()
        answers[f"local{threads}"] = batch_query(
            ix, batch, k, args.blocks, part_rows=args.part_rows, threads=threads
        )
        wall, cpu = time.perf_counter() - t0, time.process_time() - c0
        name = f"batch mode, this process, {threads} thread{'s' if threads > 1 else ''}"
        rows.append((name, wall, wall * threads, cpu, ""))
        print(f"  local {threads} thread(s) {wall:.1f} s ({cpu:.1f} CPU s)", flush=True)
    # spawned workers: their peak RSS is their own, not inherited from this process
    with (
        dask.config.set({"distributed.worker.multiprocessing-method": "spawn"}),
        LocalCluster(
            n_workers=args.workers, threads_per_worker=1, dashboard_address=None, processes=True
        ) as cluster,
        Client(cluster) as c,
    ):
        before = c.run(worker_peak_mb)
        nd.query(path, batch[:10], k, client=c)  # load the workers' numba caches
        t0 = time.perf_counter()
        rep = nd.batch_search(path, batch, k, args.blocks, client=c, partition_size=args.part_rows)
        wall = time.perf_counter() - t0
        peaks = c.run(worker_peak_mb)
    answers["dask"] = rep.matches
    st = rep.stats
    note = (
        f"worker peak RSS {', '.join(f'{v:,.0f}' for v in peaks.values())} MB (at start: "
        f"{', '.join(f'{v:,.0f}' for v in before.values())})"
    )
    name = f"batch mode, LocalCluster {args.workers} workers x 1 thread"
    rows.append((name, wall, st["worker_seconds"], st["worker_cpu_seconds"], note))
    agree = all(same(answers[a], answers["dask"]) for a in answers)
    print(f"\nall answers identical: {agree}; {len(rep.matches.id):,} matches")
    print(
        "| run | wall s | worker wall s | worker CPU s | wall µs / stored fp | CPU µs / stored fp "
        "| notes |"
    )
    print("|---|---:|---:|---:|---:|---:|---|")
    for name, wall, ws, cpu, note in rows:
        per_w = f"{ws / n * 1e6:.3f}" if ws else ""
        per_c = f"{cpu / n * 1e6:.3f}" if ws else ""
        ws_s = f"{ws:.1f}" if ws else ""
        print(f"| {name} | {wall:.1f} | {ws_s} | {cpu:.1f} | {per_w} | {per_c} | {note} |")
    part_mb = args.part_rows * 16 / 1e6
    print(
        f"\nDask run: {st['partitions']} partitions of up to {args.part_rows:,} rows, tables "
        f"{st['table_bytes'] / 1e6:.0f} MB shipped to each worker (a partition: about "
        f"{part_mb:.0f} MB read), task wall time {st['read_seconds']:.1f} s reading + "
        f"{st['probe_seconds']:.1f} s probing, {st['worker_cpu_seconds']:.1f} CPU s"
    )
    for label, secs in (("CPU", st["worker_cpu_seconds"]), ("wall", st["worker_seconds"])):
        per_fp = secs / n
        total = per_fp * args.extrapolate
        print(
            f"Extrapolation from worker {label} time to {args.extrapolate:,.0f} stored on "
            f"{args.machines} workers: {per_fp * 1e6:.3f} µs per stored fingerprint x "
            f"{args.extrapolate:,.0f} = {total:,.0f} worker-s, {total / args.machines:,.1f} s "
            f"per worker, plus {build:.1f} s to build the tables once and the time to send "
            f"{st['table_bytes'] / 1e6:.0f} MB to each worker (the paper: about 100 s on 200 "
            f"mappers)",
            flush=True,
        )
    print(f"peak RSS of the bench process: {peak_rss_mb():,.0f} MB")
    ix.close()


if __name__ == "__main__":
    main()

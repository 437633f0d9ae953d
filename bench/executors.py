"""The staged dedup on each executor, on one generated corpus: threads of one process, a local
Dask cluster and a local Ray, the same shards for all.

Builds the corpus of bench/dedup.py (real text from this machine, a share of planted
near-duplicates), then runs ``neardup.dedup(corpus, output=..., shard_docs=N)`` once per
executor, each in its own process (the caller), and prints, per executor: the seconds its
cluster took to start, the seconds of the run, their sum (wall), documents per second of the
wall time and the caller's peak RSS (its VmHWM; the Dask and Ray workers are other processes).
The kept documents must be the same bytes on every executor (checked).

    python bench/executors.py                          # 200,000 documents, 2 workers
    python bench/executors.py --docs 20000 --paths threads,ray
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

# this folder holds bench/distributed.py, named like the dask package: keep it off the import
# path of the processes the executors start (they inherit it); bench/dedup.py is imported first
_HERE = os.path.dirname(os.path.abspath(__file__))
sys.path[:] = [p for p in sys.path if os.path.abspath(p or os.curdir) != _HERE]

PATHS = ("threads", "dask", "ray")


def child(args: argparse.Namespace) -> None:
    """One executor's run, in this process: its figures as one JSON line."""
    import contextlib

    from neardup import dedup

    out = os.path.join(args.workdir, f"kept-{args.child}.jsonl")
    options = {"output": out, "shard_docs": args.shard_docs, "collect": False}
    with contextlib.ExitStack() as stack:
        t0 = time.perf_counter()
        if args.child == "dask":
            from neardup.distributed import connect

            options["client"] = stack.enter_context(connect(None, args.workers))
        elif args.child == "ray":
            from neardup.pipeline.ray_executor import RayExecutor, ray_session

            stack.enter_context(ray_session("local", args.workers))
            options["executor"] = RayExecutor()
        else:
            options["threads"] = args.workers
        start = time.perf_counter() - t0
        t0 = time.perf_counter()
        summary = dedup(args.corpus, **options).summary()
        run = time.perf_counter() - t0
    sys.path.insert(0, _HERE)  # after the run: a Dask worker started by a process whose
    from dedup import _peak_rss  # main module imports dedup at its top could not start

    figures = {"start": start, "run": run, "rss": _peak_rss(), "shards": summary["shards"],
               "dropped": summary["dropped"], "documents": summary["documents"]}  # fmt: skip
    print(json.dumps(figures))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--docs", type=int, default=200_000, help="corpus size (default 200,000)")
    ap.add_argument("--workers", type=int, default=2, help="threads, Dask workers, Ray CPUs")
    ap.add_argument("--shard-docs", type=int, default=25_000, help="documents per shard")
    ap.add_argument("--paths", default=",".join(PATHS), help="executors to run, in order")
    ap.add_argument("--dup-rate", type=float, default=0.2, help="share of planted copies")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--workdir", default=None, help="where the corpus is written (default tmp)")
    ap.add_argument("--child", default=None, help=argparse.SUPPRESS)
    ap.add_argument("--corpus", default=None, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        child(args)
        return
    paths = [p for p in args.paths.split(",") if p]
    assert set(paths) <= set(PATHS), f"--paths: {paths} (known: {', '.join(PATHS)})"
    with tempfile.TemporaryDirectory(dir=args.workdir) as tmp:
        corpus = os.path.join(tmp, "corpus.jsonl")
        sys.path.insert(0, _HERE)  # bench/dedup.py, and bench/corpus.py that it imports to build
        import dedup as planted

        t0 = time.perf_counter()
        planted.build(corpus, args.docs, args.dup_rate, args.seed)
        sys.path.remove(_HERE)
        print(f"corpus: {args.docs:,} documents, {os.path.getsize(corpus) / 1e6:,.0f} MB, "
              f"built in {time.perf_counter() - t0:.0f} s; {args.workers} workers, "
              f"{os.cpu_count()} CPUs, shards of {args.shard_docs:,}")  # fmt: skip
        rows = {p: _measure(p, corpus, tmp, args) for p in paths}
        kept = {p: open(os.path.join(tmp, f"kept-{p}.jsonl"), "rb").read() for p in paths}
        assert len(set(kept.values())) == 1, "the executors kept different bytes"
    _table(rows, args)


def _measure(path: str, corpus: str, tmp: str, args: argparse.Namespace) -> dict:
    cmd = [sys.executable, os.path.abspath(__file__), "--child", path, "--corpus", corpus,
           "--workdir", tmp, "--workers", str(args.workers), "--shard-docs",
           str(args.shard_docs)]  # fmt: skip
    r = subprocess.run(cmd, capture_output=True, text=True, check=False)
    if r.returncode != 0:
        raise SystemExit(f"{path} failed:\n{r.stderr[-3000:]}")
    return json.loads(r.stdout.strip().splitlines()[-1])


def _table(rows: dict[str, dict], args: argparse.Namespace) -> None:
    print()
    print("| executor | start-up s | run s | wall s | documents/s (wall) | caller peak RSS MB |")
    print("|---|---:|---:|---:|---:|---:|")
    names = {"threads": f"threads ({args.workers})", "dask": f"Dask ({args.workers} workers)",
             "ray": f"Ray (local, {args.workers} CPUs)"}  # fmt: skip
    for p, r in rows.items():
        wall = r["start"] + r["run"]
        print(f"| {names[p]} | {r['start']:.1f} | {r['run']:.1f} | {wall:.1f} | "
              f"{r['documents'] / wall:,.0f} | {r['rss'] / 1e6:,.0f} |")  # fmt: skip
    first = next(iter(rows.values()))
    print()
    print(f"{first['shards']} shards; {first['dropped']:,} of {first['documents']:,} documents "
          "dropped; the same kept bytes on every executor")  # fmt: skip


if __name__ == "__main__":
    main()

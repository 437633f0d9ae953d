"""The staged dedup on each executor, on one generated corpus: threads of one process, a local
Dask cluster and a local Ray, the same shards for all.

Builds the corpus of bench/dedup.py (real text from this machine, a share of planted
near-duplicates), then runs ``neardup.dedup(corpus, output=..., shard_docs=N)`` once per
executor, each in its own process (the caller), and prints, per executor: the seconds its
cluster took to start, the seconds of the run, their sum (wall), documents per second of the
wall time, the caller's peak RSS (its VmHWM), the largest worker's peak RSS (the largest VmHWM
of the caller's descendant processes that run tasks: Dask's worker processes, Ray's
``default_worker`` processes; on threads, the caller itself) and the bytes the run left in its
work directory (``summary()["work_dir"]["bytes"]``: every task's files, written once each).
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
import threading
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
    work = os.path.join(args.workdir, f"work-{args.child}")
    options = {"output": out, "shard_docs": args.shard_docs, "collect": False, "work_dir": work}
    workers = _WorkerPeaks()
    with contextlib.ExitStack() as stack:
        stack.callback(workers.stop)  # last out: after the cluster is shut down
        t0 = time.perf_counter()
        if args.child == "dask":
            from neardup.distributed import connect

            options["client"] = stack.enter_context(connect(None, args.workers))
        elif args.child == "ray":
            from neardup.distributed.ray_executor import RayExecutor, ray_session

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

    rss = _peak_rss()
    figures = {"start": start, "run": run, "rss": rss, "worker": workers.peak or rss,
               "work_bytes": summary["work_dir"]["bytes"], "shards": summary["shards"],
               "dropped": summary["dropped"], "documents": summary["documents"]}  # fmt: skip
    print(json.dumps(figures))


class _WorkerPeaks:
    """The largest peak RSS (VmHWM) among this process's descendants that run tasks, polled
    every 0.2 s from a thread until ``stop`` (a worker's VmHWM is read while it is alive)."""

    _SERVICES = ("raylet", "gcs_server", "dashboard", "log_monitor", "monitor.py", "runtime_env")

    def __init__(self) -> None:
        self.peak = 0
        self._done = threading.Event()
        self._thread = threading.Thread(target=self._poll, daemon=True)
        self._thread.start()

    def _poll(self) -> None:
        import psutil

        me = psutil.Process()
        while not self._done.wait(0.2):
            for p in me.children(recursive=True):
                try:
                    if any(s in " ".join(p.cmdline()) for s in self._SERVICES):
                        continue
                    with open(f"/proc/{p.pid}/status") as f:
                        hwm = [ln for ln in f if ln.startswith("VmHWM:")]
                except (OSError, psutil.Error):
                    continue  # it ended between the listing and the read
                if hwm:
                    self.peak = max(self.peak, int(hwm[0].split()[1]) * 1024)

    def stop(self) -> None:
        self._done.set()
        self._thread.join()


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
    print(
        "| executor | start-up s | run s | wall s | documents/s (wall) | caller peak RSS MB "
        "| largest worker MB | work dir MB | work dir bytes/doc |"
    )
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|")
    names = {"threads": f"threads ({args.workers})", "dask": f"Dask ({args.workers} workers)",
             "ray": f"Ray (local, {args.workers} CPUs)"}  # fmt: skip
    for p, r in rows.items():
        wall = r["start"] + r["run"]
        print(f"| {names[p]} | {r['start']:.1f} | {r['run']:.1f} | {wall:.1f} | "
              f"{r['documents'] / wall:,.0f} | {r['rss'] / 1e6:,.0f} | {r['worker'] / 1e6:,.0f} | "
              f"{r['work_bytes'] / 1e6:,.0f} | {r['work_bytes'] / r['documents']:,.0f} |")  # fmt: skip
    first = next(iter(rows.values()))
    print()
    print(f"{first['shards']} shards; {first['dropped']:,} of {first['documents']:,} documents "
          "dropped; the same kept bytes on every executor")  # fmt: skip


if __name__ == "__main__":
    main()

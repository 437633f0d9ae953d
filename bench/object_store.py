"""The staged dedup with its work directory on the local disk, then on a local S3-compatible
server (moto in server mode, reached through AWS_ENDPOINT_URL as a user's store is): wall time
and the requests the server answered, per document.

Builds the corpus of bench/dedup.py, starts moto's server in this process (its requests counted
as it logs them, by HTTP method), then runs ``neardup.dedup(corpus, output=..., shard_docs=N,
work_dir=..., threads=W)`` once per path, each in its own process, after an untimed run that
compiles the kernels (cached for the others):

- ``local``: ``--work-dir`` on the local disk (no request);
- ``s3``: ``--work-dir s3://bench/work-s3``, the kept file local;
- ``s3-out``: the same, and ``-o s3://bench/kept/`` (one part per shard, copied by the store).

The kept documents must be the same bytes on every path (checked). moto keeps the objects in
this process's memory and answers in Python: its wall time is a server on the same machine,
not a remote store's latency.

    python bench/object_store.py                     # 50,000 documents, shards of 5,000
    python bench/object_store.py --docs 10000 --paths local,s3
"""

from __future__ import annotations

import argparse
import collections
import json
import logging
import os
import re
import socket
import subprocess
import sys
import tempfile
import threading
import time

_HERE = os.path.dirname(os.path.abspath(__file__))
sys.path[:] = [p for p in sys.path if os.path.abspath(p or os.curdir) != _HERE]

PATHS = ("local", "s3", "s3-out")
BUCKET = "bench"


_ANSI = re.compile(r"\x1b\[[0-9;]*m")  # werkzeug colours some lines


class _Requests(logging.Handler):
    """Counts the requests moto's server (werkzeug) logs, by HTTP method."""

    def __init__(self) -> None:
        super().__init__(logging.INFO)
        self.counts: collections.Counter[str] = collections.Counter()
        self.guard = threading.Lock()

    def emit(self, record: logging.LogRecord) -> None:
        args = record.args if isinstance(record.args, tuple) else ()
        line = _ANSI.sub("", args[0]) if args and isinstance(args[0], str) else ""
        if " " in line:  # "GET /bucket/key HTTP/1.1"; a listing counted as LIST
            method = "LIST" if "list-type=" in line else line.split(" ", 1)[0]
            with self.guard:
                self.counts[method] += 1

    def take(self) -> dict[str, int]:
        with self.guard:
            out, self.counts = dict(self.counts), collections.Counter()
        return out


def child(args: argparse.Namespace) -> None:
    """One path's run, in this process: its figures as one JSON line."""
    from neardup import dedup

    s3 = args.child.startswith("s3")
    work = (
        f"s3://{BUCKET}/work-{args.child}"
        if s3
        else os.path.join(args.workdir, f"work-{args.child}")
    )
    out = f"s3://{BUCKET}/kept/" if args.child == "s3-out" else None
    out = out or os.path.join(args.workdir, f"kept-{args.child}.jsonl")
    t0 = time.perf_counter()
    summary = dedup(args.corpus, output=out, shard_docs=args.shard_docs, work_dir=work,
                    threads=args.workers, collect=False).summary()  # fmt: skip
    wall = time.perf_counter() - t0
    tasks = sum(s["tasks"] for s in summary["stages"].values())
    print(json.dumps({"wall": wall, "documents": summary["documents"], "tasks": tasks,
                      "shards": summary["shards"], "dropped": summary["dropped"],
                      "work_bytes": summary["work_dir"]["bytes"]}))  # fmt: skip


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--docs", type=int, default=50_000, help="corpus size (default 50,000)")
    ap.add_argument("--workers", type=int, default=2, help="threads of the run")
    ap.add_argument("--shard-docs", type=int, default=5_000, help="documents per shard")
    ap.add_argument("--paths", default=",".join(PATHS), help="paths to run, in order")
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
    from moto.server import ThreadedMotoServer

    counter = _Requests()
    log = logging.getLogger("werkzeug")
    log.setLevel(logging.INFO)
    log.addHandler(counter)
    log.propagate = False
    port = _free_port()
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=port, verbose=False)
    server.start()
    env = {**os.environ, "AWS_ENDPOINT_URL": f"http://127.0.0.1:{port}",
           "AWS_ACCESS_KEY_ID": "bench", "AWS_SECRET_ACCESS_KEY": "bench",
           "AWS_DEFAULT_REGION": "us-east-1"}  # fmt: skip
    try:
        with tempfile.TemporaryDirectory(dir=args.workdir) as tmp:
            rows, kept = _run_all(paths, tmp, args, env, counter)
        assert len(set(kept.values())) == 1, "the paths kept different bytes"
    finally:
        server.stop()
    _table(rows, args)


def _run_all(paths: list[str], tmp: str, args: argparse.Namespace, env: dict[str, str],
             counter: _Requests) -> tuple[dict[str, dict], dict[str, bytes]]:  # fmt: skip
    import fsspec

    corpus = os.path.join(tmp, "corpus.jsonl")
    sys.path.insert(0, _HERE)
    import dedup as planted  # bench/dedup.py

    sys.path.remove(_HERE)
    t0 = time.perf_counter()
    planted.build(corpus, args.docs, args.dup_rate, args.seed)
    print(f"corpus: {args.docs:,} documents, {os.path.getsize(corpus) / 1e6:,.0f} MB, built in "
          f"{time.perf_counter() - t0:.0f} s; {args.workers} threads, {os.cpu_count()} CPUs, "
          f"shards of {args.shard_docs:,}")  # fmt: skip
    fs = fsspec.filesystem("s3", endpoint_url=env["AWS_ENDPOINT_URL"], key="bench",
                           secret="bench", use_listings_cache=False)  # fmt: skip
    fs.mkdir(BUCKET)
    rows, kept = {}, {}
    _measure("warm", corpus, tmp, args, env)  # untimed: the kernels compiled and cached first
    for p in paths:
        counter.take()
        rows[p] = _measure(p, corpus, tmp, args, env)
        rows[p]["requests"] = counter.take()
        if p == "s3-out":
            kept[p] = b"".join(fs.cat(k) for k in sorted(fs.find(f"{BUCKET}/kept")))
        else:
            kept[p] = open(os.path.join(tmp, f"kept-{p}.jsonl"), "rb").read()
    return rows, kept


def _measure(path: str, corpus: str, tmp: str, args: argparse.Namespace,
             env: dict[str, str]) -> dict:  # fmt: skip
    cmd = [sys.executable, os.path.abspath(__file__), "--child", path, "--corpus", corpus,
           "--workdir", tmp, "--workers", str(args.workers), "--shard-docs",
           str(args.shard_docs)]  # fmt: skip
    r = subprocess.run(cmd, capture_output=True, text=True, check=False, env=env)
    if r.returncode != 0:
        raise SystemExit(f"{path} failed:\n{r.stderr[-3000:]}")
    return json.loads(r.stdout.strip().splitlines()[-1])


def _table(rows: dict[str, dict], args: argparse.Namespace) -> None:
    print()
    print("| work dir | output | wall s | documents/s | requests | requests/document | "
          "by method | work dir MB |")  # fmt: skip
    print("|---|---|---:|---:|---:|---:|---|---:|")
    where = {"local": ("local disk", "local file"), "s3": ("S3 (moto)", "local file"),
             "s3-out": ("S3 (moto)", "S3, a part per shard")}  # fmt: skip
    for p, r in rows.items():
        n = sum(r["requests"].values())
        methods = ", ".join(f"{k} {v:,}" for k, v in sorted(r["requests"].items())) or "-"
        print(f"| {where[p][0]} | {where[p][1]} | {r['wall']:.1f} | "
              f"{r['documents'] / r['wall']:,.0f} | {n:,} | {n / r['documents']:.4f} | "
              f"{methods} | {r['work_bytes'] / 1e6:,.0f} |")  # fmt: skip
    first = next(iter(rows.values()))
    print()
    print(
        f"{first['shards']} shards, {first['tasks']} tasks; {first['dropped']:,} of "
        f"{first['documents']:,} documents dropped; the same kept bytes on every path"
    )


if __name__ == "__main__":
    main()

"""Dedup at scale: today's one-process ``neardup dedup`` against the staged run (``--shard-docs``)
on threads and on a local Dask cluster, on generated corpora of n documents.

Documents are JSONL lines of 60 random words out of 20,000 (about 420 bytes of text, string
ids, as ``bench/memory.py`` writes them); a share (``--dups``) are planted near-duplicates of an
earlier document with 1-3 words replaced. Each run is its own process; it reports wall time, the
peak RSS of the calling process and the largest peak RSS among its children (the Dask workers),
the temporary disk of each stage, the bytes its processes read from the storage device (not
from the page cache; Dask workers count once they have exited) and whether the kept documents
are byte-identical.

    python bench/scale.py --docs 1e6 [--docs 4e6] [--shard-docs 250000] [--workers 2]
        [--today-src OTHER_CHECKOUT/src]

At the end a table gives each run's search + verify per document, its ratio to the same run at
the smallest size (the cost per document as the corpus grows), and its wall, caller peak RSS and
temporary disk against the one-process run of the same generator and size (``today...``).

Each run's kept bytes are compared with those of the first run of the same candidates and size
(``today``, else ``local``, else ``dask``, else ``engine``). ``engine`` is this checkout's default
run (no ``--shard-docs``: a corpus that fits in memory is decided in one task, its candidates
and verification inside the ``decide`` stage); with ``--today-src`` of the commit before the one
engine, ``today`` is that commit's one-process run, so one command compares the two. ``today``, ``local`` and ``dask`` take ``--candidates fingerprint``;
runs named ``...-prefix`` (``today-prefix``, ``local-prefix``, ``dask-prefix``) take
``--candidates prefix`` (the default) and are compared with ``today-prefix``; runs named
``...-bands`` take ``--candidates bands`` and are compared with ``today-bands``.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

import numpy as np

WRAP = (
    "import json, resource, sys, time\n"
    "from neardup.cli.main import main\n"
    "t = time.perf_counter()\n"
    "code = 0\n"
    "try:\n"
    "    main(sys.argv[2:])\n"
    "except SystemExit as e:\n"
    "    code = e.code or 0\n"
    "wall = time.perf_counter() - t\n"
    "me = resource.getrusage(resource.RUSAGE_SELF)\n"
    "kids = resource.getrusage(resource.RUSAGE_CHILDREN)\n"
    "disk = (me.ru_inblock + kids.ru_inblock) * 512\n"
    "out = [code, wall, me.ru_maxrss, kids.ru_maxrss, disk]\n"
    "open(sys.argv[1], 'w').write(json.dumps(out))\n"
)


def write_docs(path: str, n: int, dups: float, seed: int = 0) -> None:
    """``n`` JSONL documents, a share ``dups`` of them near-copies of an earlier one."""
    rng = np.random.default_rng(seed)
    words = np.array([f"w{i}" for i in range(20000)])
    chunk = 100_000
    with open(path, "w") as f:
        for lo in range(0, n, chunk):
            m = min(chunk, n - lo)
            idx = rng.integers(0, len(words), (m, 60))
            copy = rng.random(m) < dups
            own = np.flatnonzero(~copy)  # copies are made of the chunk's earlier originals
            before = np.searchsorted(own, np.arange(m))
            copy &= before > 0
            rows = np.flatnonzero(copy)
            src = own[(rng.random(len(rows)) * before[rows]).astype(np.int64)]
            idx[rows] = idx[src]
            for p in (1.0, 0.3):  # one word replaced, a second in 30% of the copies
                r = rows[rng.random(len(rows)) < p]
                idx[r, rng.integers(0, 60, len(r))] = rng.integers(0, len(words), len(r))
            lines = [
                json.dumps({"id": f"doc-{lo + i}", "text": " ".join(words[idx[i]].tolist())})
                for i in range(m)
            ]
            f.write("\n".join(lines) + "\n")


def run(args: list[str], tmp: str, src: str | None = None) -> dict:
    """One ``neardup`` command in its own process (importing neardup from ``src``, a checkout's
    ``src`` directory, when given): exit code, wall, peak RSS (MB) of it and of its largest
    child."""
    stats = os.path.join(tmp, "stats.json")
    if os.path.exists(stats):
        os.remove(stats)  # a run that dies before writing its own is not read as the last one's
    env = dict(os.environ, PYTHONPATH=os.path.abspath(src)) if src else None
    p = subprocess.run([sys.executable, "-c", WRAP, stats, *args], check=False, env=env)
    if p.returncode or not os.path.exists(stats):
        raise SystemExit(f"neardup {' '.join(args)} failed ({p.returncode})")
    with open(stats) as f:
        code, wall, me, kids, disk = json.load(f)
    if code:
        raise SystemExit(f"neardup {' '.join(args)} failed ({code})")
    return {"wall": wall, "rss_mb": me / 1024, "children_rss_mb": kids / 1024,
            "disk_read_mb": disk / 1e6}  # fmt: skip


def measure(n: int, ns: argparse.Namespace, tmp: str) -> list[dict]:
    docs = os.path.join(ns.corpora or tmp, f"docs-{n}-{ns.dups}.jsonl")
    if not os.path.exists(docs):
        write_docs(docs + ".tmp", n, ns.dups)
        os.replace(docs + ".tmp", docs)
    rows = []
    runs = {
        "today": ["--memory", "1T"],  # the one-process run, whatever the size
        "local": ["--shard-docs", str(ns.shard_docs)],
        "dask": ["--shard-docs", str(ns.shard_docs), "--workers", str(ns.workers)],
        "engine": [],  # this checkout's default run (one task decides a corpus that fits)
    }
    prefix, bands = ["--candidates", "prefix"], ["--candidates", "bands"]
    base = list(runs.items())
    runs.update({f"{k}-prefix": v + prefix for k, v in base})
    runs.update({f"{k}-bands": v + bands for k, v in base})
    for k in ("today", "local", "dask", "engine"):  # the default is prefix: these name the other
        runs[k] = runs[k] + ["--candidates", "fingerprint"]
    for name, extra in runs.items():
        if name not in ns.runs.split(","):
            continue
        kind = next((f"-{c}" for c in ("prefix", "bands") if name.endswith(f"-{c}")), "")
        # the kept bytes are compared with the first run of the same generator (today's if run)
        first = next(f"{k}{kind}" for k in ("today", "local", "dask", "engine")
                     if f"{k}{kind}" in ns.runs.split(",") or k == "dask")  # fmt: skip
        ref = os.path.join(tmp, f"{first}-{n}.jsonl")  # what the run's kept bytes must equal
        out = ref if name == first else os.path.join(tmp, f"{name}.jsonl")
        summary = os.path.join(tmp, f"{name}.json")
        src = ns.today_src if name.startswith("today") else None
        r = run(["dedup", docs, "-q", "-o", out, "--json-summary", summary, *extra], tmp, src)
        with open(summary) as f:
            s = json.load(f)
        stages = s.get("stages", {})
        r.update(
            name=name,
            n=n,
            dropped=s["dropped"],
            temp_mb=s.get("temp_bytes", 0) / 1e6,
            stage_temp_mb={k: round(v["temp_bytes"] / 1e6, 1) for k, v in stages.items()},
            stage_rss_mb={k: round(v["caller_peak_rss"] / 1e6) for k, v in stages.items()},
            stage_cpu={k: v.get("caller_cpu_seconds", 0) for k, v in stages.items()},
            stage_read_mb={
                k: round(v.get("caller_disk_reads", 0) / 1e6) for k, v in stages.items()
            },  # fmt: skip
            shuffle_mb=s.get("shuffle_bytes", 0) / 1e6,
            seconds=s["seconds"],
            same=name == first or (_same(out, ref) if os.path.exists(ref) else "not run"),
        )
        if name != first:  # 16M outputs are gigabytes each: keep today's only
            os.remove(out)
        rows.append(r)
        print(_line(r), flush=True)
    return rows


def _same(a: str, b: str) -> bool:
    with open(a, "rb") as fa, open(b, "rb") as fb:
        while True:
            x, y = fa.read(1 << 22), fb.read(1 << 22)
            if x != y:
                return False
            if not x:
                return True


def _line(r: dict) -> str:
    return (
        f"{r['n']:>9,} {r['name']:<6} wall {r['wall']:7.1f} s  caller {r['rss_mb']:7.0f} MB  "
        f"largest child {r['children_rss_mb']:6.0f} MB  temp {r['temp_mb']:7.1f} MB  "
        f"shuffle {r['shuffle_mb']:6.1f} MB  read from disk {r['disk_read_mb']:7.1f} MB  "
        f"dropped {r['dropped']:,}  "
        f"same bytes as today: {r['same']}\n          stages {r['seconds']}\n"
        f"          temp per stage (MB) {r['stage_temp_mb']}\n"
        f"          caller peak RSS after each stage (MB) {r['stage_rss_mb']}\n"
        f"          caller's reads from disk in each stage (MB) {r['stage_read_mb']}\n"
        f"          caller's CPU seconds in each stage {r['stage_cpu']}"
    )


#: The stages of search + verify: the candidate stages of every generator and verify (a
#: one-process run reports them as one).
SEARCH = ("split", "search", "pairs", "prefix-count", "prefix-merge", "prefix", "prefix-pairs",
          "verify", "search+verify")  # fmt: skip


def table(rows: list[dict]) -> str:
    """The runs as one table: search + verify per document, its ratio to the same run at the
    smallest size, and wall, caller peak RSS and temporary disk against the one-process run
    (``today...``) of the same generator and size."""
    head = ("| documents | run | wall | caller RSS | largest child | temp | shuffle | search + "
            "verify | per document | vs smallest n | wall, RSS, temp vs one process |")  # fmt: skip
    out = [head, "|---:|---|" + "---:|" * 9]
    per = {}
    for r in rows:
        sv = sum(v for k, v in r["seconds"].items() if k in SEARCH)
        if not sv:  # one task decided every document: its candidates are in its decide stage
            sv = r["seconds"].get("decide", 0.0)
        per[r["name"], r["n"]] = sv / r["n"] * 1e6
    smallest = {}
    for r in rows:
        smallest.setdefault(r["name"], r["n"])
    for r in rows:
        us = per[r["name"], r["n"]]
        flat = us / per[r["name"], smallest[r["name"]]]
        kind = next((f"-{c}" for c in ("prefix", "bands") if r["name"].endswith(f"-{c}")), "")
        base = next((b for b in rows if b["name"] == f"today{kind}" and b["n"] == r["n"]), None)
        vs = ""
        if base is not None and base is not r:
            vs = (f"{r['wall'] / base['wall']:.2f}x, {r['rss_mb'] / base['rss_mb']:.2f}x, "
                  f"{r['temp_mb'] / max(base['temp_mb'], 1e-9):.2f}x")  # fmt: skip
        out.append(
            f"| {r['n']:,} | {r['name']} | {r['wall']:.1f} s | {r['rss_mb']:,.0f} MB | "
            f"{r['children_rss_mb']:,.0f} MB | {r['temp_mb']:,.0f} MB | {r['shuffle_mb']:,.0f} MB | "
            f"{us * r['n'] / 1e6:.2f} s | {us:.2f} µs | {flat:.2f}x | {vs} |"
        )
    return "\n".join(out)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--docs", action="append", type=float, help="corpus sizes (repeat)")
    ap.add_argument("--shard-docs", type=int, default=250_000)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--runs", default="today,local,dask", help="which runs (today first)")
    ap.add_argument("--dups", type=float, default=0.1, help="share of planted near-copies")
    ap.add_argument("--dir", default=None, help="where outputs go (default: TMPDIR)")
    ap.add_argument("--corpora", default=None, help="keep the generated corpora here, for reuse")
    ap.add_argument("--today-src", default=None,
                    help="the src directory of another checkout (say, the commit before a "
                    "change), which the today... runs import neardup from")  # fmt: skip
    ns = ap.parse_args()
    sizes = [int(x) for x in (ns.docs or [1e6])]
    with tempfile.TemporaryDirectory(dir=ns.dir) as tmp:
        t0 = time.perf_counter()
        rows = [r for n in sizes for r in measure(n, ns, tmp)]
        print(table(rows))
        print(f"total {time.perf_counter() - t0:.0f} s; load: {os.getloadavg()}")


if __name__ == "__main__":
    main()

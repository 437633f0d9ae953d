"""All pairs within a Hamming distance: neardup against its peers, side by side in one run.

Data (``--inputs``, see ``bench/fpdata.py``): ``uniform`` is N fingerprints, 90% uniformly random
and 10% in planted clusters of 2-4 members (1-3 bit flips of a centre); ``families`` puts 10% in
families of 1,000-100,000 near-identical members (half identical to the centre, the others 1-3
of 12 hot bits away). Generated from ``--seed``, cached as ``.npy`` under ``bench/out/``.

Engines, each in its own subprocess so that wall time, CPU time and peak RSS are its own:

``neardup``   ``neardup.find_all`` with the automatic choice, once per ``--threads`` count
              (``find_all_values`` on ``families``: identical values collapse before the search);
              efficiency = time at 1 thread / (threads x time)
``clusters``  ``neardup.find_clusters`` (identical values are one search entry)
``pybind``, ``faiss``, ``brute``, ``npsort``, ``binary``: the peers of ``bench/peers.py``; the
``npsort`` floor row is one ``np.sort`` of N values times neardup's passes over the whole input

Every engine's pairs are compared, as sets of distinct value pairs, with the oracle (brute force
where it ran, else neardup). ``--sweep`` also runs neardup over single layouts of ``blocks``
around the best single layout (and at N = 100..10k in one process) to check the automatic
choice against the best layout found. CPU seconds include every thread of the process; on a
shared machine they are steadier than wall seconds.

Usage::

    python bench/find_all.py --sizes 1e6 --distances 3,8 --engines neardup,npsort
    python bench/find_all.py --sizes 1e6,1e7 --distances 3,8,12 --engines neardup --threads 1,2
    python bench/find_all.py --sizes 1e6 --distances 8,10,12,14 --inputs uniform,families \
        --engines neardup,pybind,npsort --pybind-blocks 8:11,10:13,12:15,14:17 --sweep
"""

from __future__ import annotations

import argparse
import json
import math
import os
import signal
import subprocess
import sys
import tempfile
import time

import numpy as np
from fpdata import INPUTS, OUT, data_path, value_pairs
from fpdata import uniform as generate
from peers import (
    PYBIND_BLOCKS,
    faiss_config,
    run_binary,
    run_brute,
    run_faiss,
    run_npsort,
    run_pybind,
)

# ---------------------------------------------------------------------------------------------
# engines (run in the child process)


def _hwm_mb(pid: int | str = "self") -> float:
    """Peak resident set (VmHWM) of a live process in MB, 0.0 if it is gone.

    ``ru_maxrss`` is not used: Linux carries it over from the parent through fork and exec.
    """
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) / 1024.0
    except OSError:
        pass
    return 0.0


def _scheme(n: int, d: int, blocks: int | None) -> tuple[str, int, int]:
    """(description, tables, passes over the whole input) of neardup's search for ``n``."""
    try:
        from neardup.core.search import resolve_scheme
    except ImportError:  # a neardup from before schemes: one table per pass
        from neardup.core.search import resolve_layout

        layout = resolve_layout(n, d, blocks)
        return (
            f"{layout.blocks} blocks / {layout.n_tables} tables",
            layout.n_tables,
            layout.n_tables,
        )
    scheme = resolve_scheme(n, d, blocks)
    tables = sum(p.n_tables for p in scheme.parts)
    passes = sum(p.threshold + 1 for p in scheme.parts)  # first blocks: blocks - (blocks - t) + 1
    return scheme.describe(), tables, passes


def run_neardup(fp: np.ndarray, d: int, param: dict) -> tuple[np.ndarray, dict]:
    """``find_all`` (``find_all_values`` on inputs with families: identical values collapse)."""
    import neardup

    blocks, threads = param.get("blocks"), param.get("threads")
    layout, tables, passes = _scheme(len(fp), d, blocks)
    walls, cpus = [], []
    for _ in range(max(1, param.get("repeat", 1))):  # median of --repeat calls in this process
        t, c = time.perf_counter(), time.process_time()
        if param.get("values"):
            pairs = neardup.find_all_values(fp, d, blocks, threads=threads)
        else:
            pairs = neardup.find_all(fp, d, blocks, threads=threads)
        walls.append(time.perf_counter() - t)
        cpus.append(time.process_time() - c)
    wall, cpu = float(np.median(walls)), float(np.median(cpus))
    out = pairs if param.get("values") else value_pairs(fp, pairs)
    info = {"wall": wall, "cpu": cpu, "layout": layout, "tables": tables, "passes": passes}
    info["threads"] = threads or len(os.sched_getaffinity(0))
    return out, info


def run_clusters(fp: np.ndarray, d: int, param: dict) -> tuple[None, dict]:
    """``find_clusters``: identical values are one search entry."""
    import neardup

    threads = param.get("threads")
    layout, _, _ = _scheme(len(np.unique(fp)), d, None)
    t, c = time.perf_counter(), time.process_time()
    labels = neardup.find_clusters(fp, d, threads=threads)
    wall, cpu = time.perf_counter() - t, time.process_time() - c
    sizes = np.bincount(labels)
    info = {"wall": wall, "cpu": cpu, "layout": layout, "clusters": int((sizes >= 2).sum())}
    info["threads"] = threads or len(os.sched_getaffinity(0))
    return None, info


def run_tiny(_fp: object, d: int, spec: str) -> tuple[None, dict]:
    """neardup at small N over every usable ``blocks`` and its automatic choice, in-process:
    best-of-repeats seconds."""
    import neardup
    from neardup.core.layout import count_tables

    sizes = [int(float(x)) for x in spec.split(",")]
    rows = []
    for n in sizes:
        fp = generate(n, 7)
        times = {}
        for m in range(d + 1, 65):
            if count_tables(m, d) > 3000:
                break
            reps = max(1, min(50, int(2e6 // (n * count_tables(m, d) + 1))))
            best = math.inf
            for _ in range(reps):
                t = time.perf_counter()
                neardup.find_all(fp, d, m)
                best = min(best, time.perf_counter() - t)
            times[m] = best
            if best > 20 * min(times.values()) and best > 0.05:
                break
        best = math.inf
        for _ in range(max(1, min(50, int(2e6 // (n * 50 + 1))))):
            t = time.perf_counter()
            neardup.find_all(fp, d)
            best = min(best, time.perf_counter() - t)
        rows.append({"n": n, "auto": _scheme(n, d, None)[0], "auto_s": best, "times": times})
    return None, {"wall": 0.0, "layout": "", "threads": 0, "tiny": rows}


ENGINES = {
    "neardup": run_neardup,
    "clusters": run_clusters,
    "pybind": run_pybind,
    "faiss": run_faiss,
    "brute": run_brute,
    "npsort": run_npsort,
    "tiny": run_tiny,
}


_IMPORTS = {
    "neardup": "neardup",
    "clusters": "neardup",
    "pybind": "simhash._simhash",
    "faiss": "faiss",
    "tiny": "neardup",
}


def child(spec: dict) -> None:
    # the baseline is the interpreter with the engine's module imported, before any data
    if spec["engine"] in _IMPORTS:
        __import__(_IMPORTS[spec["engine"]])
    if spec["engine"] in ("neardup", "clusters", "tiny"):
        import neardup

        neardup.find_all(generate(3000, 2), 3)  # load the cached kernels: pair by pair
        neardup.find_all(generate(50_000, 2), 3)  # and the tree
    base = _hwm_mb()
    fp = np.load(spec["data"]) if spec.get("data") else None
    pairs, info = ENGINES[spec["engine"]](fp, spec["distance"], spec.get("param"))
    info["rss_mb"] = _hwm_mb()
    info["base_mb"] = base
    if pairs is not None:
        np.save(spec["pairs"], pairs)
        info["pairs"] = len(pairs)
    print("RESULT " + json.dumps(info), flush=True)


# ---------------------------------------------------------------------------------------------
# parent: spawn, time out, measure, compare


def _wait(proc: subprocess.Popen, timeout: float) -> tuple[int | None, float]:
    """Wait for ``proc`` up to ``timeout`` s; returns (status or None on timeout, peak RSS MB).

    The peak is polled from ``/proc`` while the process runs (the child's own report is used
    where it has one).
    """
    deadline = time.monotonic() + timeout
    peak = 0.0
    while True:
        peak = max(peak, _hwm_mb(proc.pid))
        if proc.poll() is not None:
            return proc.returncode, peak
        if time.monotonic() > deadline:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
            return None, peak
        time.sleep(0.02)


def spawn(spec: dict, timeout: float) -> dict:
    """Run one engine in a fresh interpreter; returns its info dict (or a note)."""
    with tempfile.TemporaryFile("w+") as out:
        proc = subprocess.Popen(
            [sys.executable, os.path.abspath(__file__), "--child", json.dumps(spec)],
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        status, rss = _wait(proc, timeout)
        out.seek(0)
        text = out.read()
    if status is None:
        return {"note": f"timeout > {timeout:.0f} s", "rss_mb": rss}
    lines = [ln for ln in text.splitlines() if ln.startswith("RESULT ")]
    if status != 0 or not lines:
        tail = text.strip().splitlines()[-1:] or ["?"]
        return {"note": f"failed ({status}): {tail[0][:80]}", "rss_mb": rss}
    info = json.loads(lines[-1][7:])
    info["rss_mb"] = max(info["rss_mb"], rss)
    return info


def fmt_row(cells: list[str]) -> str:
    return "| " + " | ".join(cells) + " |"


HEADER = [
    "input",
    "N",
    "distance",
    "engine",
    "layout",
    "threads",
    "wall s",
    "cpu s",
    "x neardup",
    "efficiency",
    "pairs",
    "peak RSS MB",
    "import MB",
    "B/fp",
    "agrees",
]


def _secs(x: float | None) -> str:
    if x is None:
        return ""
    return f"{x:.3g}" if x < 10 else f"{x:.1f}"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="2e4,1e6,1e7")
    ap.add_argument("--distances", default="3,6,8")
    ap.add_argument("--engines", default="neardup,pybind,faiss,brute,npsort")
    ap.add_argument("--inputs", default="uniform", help="uniform,families (see bench/fpdata.py)")
    ap.add_argument(
        "--threads",
        default="",
        help="thread counts for neardup, e.g. 1,2 (efficiency = t1 / (threads x t)); default: all",
    )
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--timeout", type=float, default=600.0, help="seconds per engine run")
    ap.add_argument("--peer-timeout", type=float, default=0.0, help="seconds per peer run")
    ap.add_argument("--brute-max", type=int, default=50_000, help="largest N for brute force")
    ap.add_argument(
        "--pybind-blocks",
        default="",
        help="distance:blocks[/blocks...] for simhash-pybind, e.g. 6:8/9,8:11 (default: best "
        "known per distance)",
    )
    ap.add_argument("--faiss", default="", help="nhash x bits, e.g. 2x32 (default: cheapest)")
    ap.add_argument("--repeat", type=int, default=1, help="neardup rows: median of this many calls")
    ap.add_argument("--sweep", action="store_true", help="neardup over a range of blocks")
    ap.add_argument("--tiny", default="100,1000,10000", help="sizes for the in-process sweep")
    ap.add_argument("--simhash-find-all", default="", help="path of a hand-built binary")
    ap.add_argument("--child", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.child:
        child(json.loads(args.child))
        return 0

    sizes = [int(float(s)) for s in args.sizes.split(",") if s]
    dists = [int(s) for s in args.distances.split(",") if s]
    engines = [e for e in args.engines.split(",") if e]
    inputs = [i for i in args.inputs.split(",") if i]
    for kind in inputs:
        if kind not in INPUTS:
            ap.error(f"--inputs: unknown input {kind!r}; use {', '.join(INPUTS)}")
    threads = [int(t) for t in args.threads.split(",") if t] or [None]
    pyb = {}
    for item in filter(None, args.pybind_blocks.split(",")):
        k, v = item.split(":")
        pyb[int(k)] = [int(x) for x in v.split("/")]
    os.makedirs(OUT, exist_ok=True)
    print(f"# neardup find_all bench: seed {args.seed}, {os.cpu_count()} CPUs")
    print("# command: python bench/find_all.py " + " ".join(sys.argv[1:]))
    print()
    print(fmt_row(HEADER))
    print(fmt_row(["---"] * len(HEADER)))
    sweeps = []

    def one(kind, n, d, engine, param, data, ref, base, t1=None):
        ours = engine in ("neardup", "clusters", "brute")
        timeout = args.timeout if ours or not args.peer_timeout else args.peer_timeout
        tag = f"{engine}_{kind}_{n}_{d}_{json.dumps(param, sort_keys=True)}"
        tag = "".join(ch if ch.isalnum() or ch in "_-" else "_" for ch in tag)
        spec = {
            "engine": engine,
            "distance": d,
            "param": param,
            "data": data,
            "pairs": os.path.join(OUT, f"pairs_{tag}.npy"),
        }
        info = spawn(spec, timeout)
        info.setdefault("pairs_file", spec["pairs"])
        report(kind, n, d, engine, info, ref, base, t1)
        return info

    def report(kind, n, d, engine, info, ref, base, t1=None):
        head = [kind, f"{n:,}", str(d), engine, str(info.get("layout", ""))]
        if "note" in info:
            cells = head + ["", info["note"]] + [""] * 4 + [f"{info['rss_mb']:.0f}"] + [""] * 3
            print(fmt_row(cells), flush=True)
            return
        agree = ""
        if "pairs" in info and ref is not None:
            mine = np.load(info["pairs_file"])
            agree = "yes" if np.array_equal(mine, ref[1]) else f"NO (vs {ref[0]})"
            if ref[0] != engine and agree == "yes":
                agree = f"= {ref[0]}"
        ratio = f"{info['wall'] / base:.2f}" if base else ""
        eff = ""
        if t1 and info.get("threads", 1) > 1:
            eff = f"{t1 / (info['threads'] * info['wall']):.2f}"
        above = info["rss_mb"] - info.get("base_mb", 0.0)
        count = info.get("pairs", info.get("clusters"))
        cells = head + [
            str(info["threads"]),
            _secs(info["wall"]),
            _secs(info.get("cpu")),
            ratio,
            eff,
            f"{count:,}" + (" clusters" if "clusters" in info else "") if count is not None else "",
            f"{info['rss_mb']:.0f}",
            f"{info.get('base_mb', 0.0):.0f}",
            f"{above * 2**20 / n:.1f}",
            agree,
        ]
        print(fmt_row(cells), flush=True)

    for kind in inputs:
        values = kind != "uniform"  # identical values collapse before the search
        for n in sizes:
            data = data_path(n, args.seed, kind)
            for d in dists:
                ref = None
                nd = None
                if "brute" in engines and n <= args.brute_max:
                    b = one(kind, n, d, "brute", None, data, None, None)
                    if "pairs" in b:
                        ref = ("brute", np.load(b["pairs_file"]))
                if "neardup" in engines:
                    t1 = None
                    for t in threads:
                        param = {"threads": t, "values": values, "repeat": args.repeat}
                        info = one(kind, n, d, "neardup", param, data, ref, None, t1)
                        if t == 1 and "wall" in info:
                            t1 = info["wall"]
                        if nd is None or "wall" not in nd:
                            nd = info
                        if ref is None and "pairs" in info:
                            ref = ("neardup", np.load(info["pairs_file"]))
                base = nd.get("wall") if nd else None
                if "clusters" in engines:
                    for t in threads:
                        one(kind, n, d, "clusters", {"threads": t}, data, None, base)
                if "npsort" in engines:
                    s = spawn({"engine": "npsort", "distance": d, "data": data}, args.timeout)
                    if nd and "passes" in nd and "wall" in s:
                        s["wall"] *= nd["passes"]
                        s["layout"] = f"np.sort x {nd['passes']} passes"
                    report(kind, n, d, "floor", s, None, base)
                if "pybind" in engines:
                    for b in pyb.get(d, [PYBIND_BLOCKS.get(d, d + 3)]):
                        one(kind, n, d, "pybind", b, data, ref, base)
                if "faiss" in engines:
                    if args.faiss:
                        specs = args.faiss.split("/")
                    elif d <= 3:
                        nh, nb = faiss_config(n, d)
                        specs = list(dict.fromkeys(["2x32", f"{nh}x{nb}"]))
                    else:
                        specs = []
                        note = "not run above distance 3 (too slow; pass --faiss NxB)"
                        print(fmt_row([kind, f"{n:,}", str(d), "faiss", "", "", note] + [""] * 8))
                    for f in specs:
                        one(kind, n, d, "faiss", f, data, ref, base)
                if args.simhash_find_all:
                    for b in pyb.get(d, [PYBIND_BLOCKS.get(d, d + 3)]):
                        info = run_binary(
                            args.simhash_find_all, n, args.seed, d, b, args.timeout, kind, _wait
                        )
                        report(kind, n, d, "simhash-find-all", info, ref, base)
                if args.sweep and nd and "wall" in nd:
                    sweeps.append([kind, *sweep(kind, n, d, nd, data, ref, one, values)])

    if args.sweep:
        print()
        print("## automatic choice against the best swept layout of blocks")
        print()
        cols = ["input", "N", "distance", "automatic", "auto s", "best blocks", "best s", "ratio"]
        print(fmt_row(cols))
        print(fmt_row(["---"] * len(cols)))
        for row in sweeps:
            print(fmt_row(row))
        for d in dists:
            tiny = spawn({"engine": "tiny", "distance": d, "param": args.tiny}, args.timeout)
            for r in tiny.get("tiny", []):
                times = {int(k): v for k, v in r["times"].items()}
                bm = min(times, key=times.get)
                auto_t = r["auto_s"]
                cells = ["uniform", f"{r['n']:,}", str(d), r["auto"], f"{auto_t:.3g}", str(bm)]
                cells += [f"{times[bm]:.3g}", f"{auto_t / times[bm]:.2f}"]
                print(fmt_row(cells), flush=True)
            if "note" in tiny:
                print(f"tiny sweep at distance {d}: {tiny['note']}")
    return 0


def sweep(kind, n, d, nd, data, ref, one, values) -> list[str]:
    """neardup over single layouts of ``blocks`` outward from the best single layout's estimate
    until 2.5x slower than the best found; against the automatic choice (``nd``)."""
    from neardup.core.cost import choose_blocks
    from neardup.core.layout import count_tables

    start = choose_blocks(n, d)
    times: dict[int, float] = {}
    for direction in (0, -1, 1):
        m = start + direction
        while d < m <= 64 and m not in times and count_tables(m, d) <= 20_000:
            info = one(
                kind, n, d, "neardup", {"blocks": m, "values": values}, data, ref, nd["wall"]
            )
            if "wall" not in info:
                break
            times[m] = info["wall"]
            if info["wall"] > 2.5 * min(times.values()) or direction == 0:
                break
            m += direction
    best = min(times, key=times.get) if times else start
    best_s = times.get(best, math.nan)
    return [
        f"{n:,}",
        str(d),
        nd["layout"],
        f"{nd['wall']:.3g}",
        str(best),
        f"{best_s:.3g}",
        f"{nd['wall'] / best_s:.2f}",
    ]


if __name__ == "__main__":
    sys.exit(main())

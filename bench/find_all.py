"""All pairs within a Hamming distance: neardup against its peers, side by side in one run.

Data: ``N`` 64-bit fingerprints, 90% uniformly random and 10% in planted clusters of 2-4 members
(a random centre plus members that differ from it in 1-3 bits), generated from ``--seed`` and
cached as ``.npy`` under ``bench/out/`` (git-ignored).

Engines, each in its own subprocess so that wall time and peak RSS are its own:

``neardup``   ``neardup.find_all`` with the automatic layout (all CPUs)
``pybind``    ``simhash.find_all`` from the PyPI package ``simhash-pybind`` (Python bindings of
              seomoz/simhash-cpp's own ``find_all``, one thread) on the Python set of values
``faiss``     ``faiss.IndexBinaryMultiHash`` (``faiss-cpu``) + ``range_search`` with radius
              ``distance + 1`` (binary range search keeps distances strictly below the radius);
              ``nflip = distance // nhash`` bit flips per sub-hash make it exact
``brute``     numpy XOR + popcount over all pairs, the oracle (only for N <= --brute-max)
``npsort``    ``np.sort`` of the N values once; printed times the number of tables of neardup's
              layout, the floor neardup should approach
``binary``    a hand-built ``simhash-find-all`` (``--simhash-find-all PATH``), fed the decimal
              file; its time includes parsing and writing its output

Every engine's pairs are compared, as sets of distinct value pairs, with the oracle (brute force
where it ran, else neardup). ``--sweep`` also runs neardup over a range of ``blocks`` around the
automatic choice (and at N = 100..10k in one process) to check the automatic layout against the
best one found.

Usage::

    python bench/find_all.py --sizes 2e4,1e6 --distances 3,6,8 --sweep
    python bench/find_all.py --sizes 1e7 --distances 3 --engines neardup,pybind,faiss,npsort
    python bench/find_all.py --sizes 1e7 --distances 6,8 --engines neardup,pybind,npsort \\
        --pybind-blocks 6:8,8:11 --timeout 900
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

HERE = os.path.dirname(os.path.abspath(__file__))
OUT = os.path.join(HERE, "out")

#: simhash-cpp block counts that were fastest at 1M (see the README): distance -> blocks
PYBIND_BLOCKS = {0: 2, 1: 3, 2: 4, 3: 6, 4: 6, 5: 7, 6: 8, 7: 10, 8: 11}


# ---------------------------------------------------------------------------------------------
# data


def generate(n: int, seed: int) -> np.ndarray:
    """``n`` fingerprints: 90% random, 10% planted clusters of 2-4 (1-3 bit flips of a centre)."""
    rng = np.random.default_rng(seed)
    fp = rng.integers(0, np.iinfo(np.uint64).max, n, dtype=np.uint64, endpoint=True)
    n_plant = n // 10
    if n_plant >= 2:
        sizes = rng.integers(2, 5, n_plant // 2 + 1)
        cluster = np.repeat(np.arange(len(sizes)), sizes)[:n_plant]
        first = np.r_[True, cluster[1:] != cluster[:-1]]
        centre = rng.integers(0, np.iinfo(np.uint64).max, len(sizes), dtype=np.uint64)
        k = rng.integers(1, 4, n_plant)
        pos = rng.integers(0, 64, (n_plant, 3)).astype(np.uint64)
        bit = np.left_shift(np.uint64(1), pos)
        bit[:, 1][k < 2] = 0
        bit[:, 2][k < 3] = 0
        flips = bit[:, 0] | bit[:, 1] | bit[:, 2]
        flips[first] = 0
        fp[rng.permutation(n)[:n_plant]] = centre[cluster] ^ flips
    return fp


def data_path(n: int, seed: int) -> str:
    path = os.path.join(OUT, f"fp_{n}_s{seed}.npy")
    if not os.path.exists(path):
        os.makedirs(OUT, exist_ok=True)
        tmp = path + ".tmp.npy"
        np.save(tmp, generate(n, seed))
        os.replace(tmp, path)
    return path


def decimal_path(n: int, seed: int) -> str:
    path = os.path.join(OUT, f"fp_{n}_s{seed}.txt")
    if not os.path.exists(path):
        fp = np.load(data_path(n, seed))
        tmp = path + ".tmp"
        with open(tmp, "w") as f:
            f.write("\n".join(map(str, fp.tolist())) + "\n")
        os.replace(tmp, path)
    return path


def value_pairs(fp: np.ndarray, pairs: np.ndarray) -> np.ndarray:
    """Index pairs -> sorted distinct pairs of distinct values ``(a < b)``, uint64 (p, 2)."""
    if len(pairs) == 0:
        return np.empty((0, 2), dtype=np.uint64)
    v = fp[np.asarray(pairs, dtype=np.int64)]
    v = np.sort(v, axis=1)
    v = v[v[:, 0] != v[:, 1]]
    return np.unique(v, axis=0)


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


def run_neardup(fp: np.ndarray, d: int, blocks: int | None) -> tuple[np.ndarray, dict]:
    import neardup
    from neardup.config import default_threads
    from neardup.core.search import resolve_layout

    layout = resolve_layout(len(fp), d, blocks)
    t = time.perf_counter()
    pairs = neardup.find_all(fp, d, layout.blocks)
    wall = time.perf_counter() - t
    info = {
        "wall": wall,
        "layout": f"{layout.blocks} blocks / {layout.n_tables} tables",
        "tables": layout.n_tables,
        "blocks": layout.blocks,
        "threads": default_threads(),
    }
    return value_pairs(fp, pairs), info


def run_pybind(fp: np.ndarray, d: int, blocks: int | None) -> tuple[np.ndarray, dict]:
    # the compiled binding itself: the package's Python wrapper only turns its input into a set,
    # and another PyPI package named ``simhash`` may have replaced that wrapper
    from simhash._simhash import find_all

    b = blocks or PYBIND_BLOCKS.get(d, d + 3)
    hashes = set(fp.tolist())
    t = time.perf_counter()
    res = find_all(hashes, b, d)
    wall = time.perf_counter() - t
    arr = np.array(sorted(res), dtype=np.uint64).reshape(-1, 2)
    info = {"wall": wall, "layout": f"{b} blocks / {math.comb(b, d)} tables", "threads": 1}
    return np.unique(np.sort(arr, axis=1), axis=0), info


def faiss_config(n: int, d: int) -> tuple[int, int]:
    """(nhash, bits per hash) with the least expected probes x candidates for exact search."""
    best, cost = (1, 64), math.inf
    for nhash in range(1, 9):
        b = 64 // nhash
        nflip = d // nhash
        probes = sum(math.comb(b, i) for i in range(nflip + 1))
        c = nhash * probes * (1.0 + n / 2.0**b)
        if c < cost:
            best, cost = (nhash, b), c
    return best


def run_faiss(fp: np.ndarray, d: int, spec: str | None) -> tuple[np.ndarray, dict]:
    import faiss

    nhash, b = (int(x) for x in spec.split("x")) if spec else faiss_config(len(fp), d)
    codes = fp.view(np.uint8).reshape(-1, 8)
    t = time.perf_counter()
    index = faiss.IndexBinaryMultiHash(64, nhash, b)
    index.nflip = d // nhash
    index.add(codes)
    parts = []
    step = 1 << 19
    for s in range(0, len(fp), step):
        lims, _, ids = index.range_search(codes[s : s + step], d + 1)
        counts = np.diff(lims.astype(np.int64))
        q = np.repeat(np.arange(s, s + len(counts), dtype=np.int64), counts)
        keep = ids > q
        parts.append(np.stack([q[keep], ids[keep]], axis=1))
    wall = time.perf_counter() - t
    pairs = np.concatenate(parts) if parts else np.empty((0, 2), dtype=np.int64)
    info = {
        "wall": wall,
        "layout": f"{nhash} x {b} bits, nflip {d // nhash}",
        "threads": faiss.omp_get_max_threads(),
    }
    return value_pairs(fp, pairs), info


def run_brute(fp: np.ndarray, d: int, _: object) -> tuple[np.ndarray, dict]:
    t = time.perf_counter()
    parts = []
    step = max(1, (1 << 24) // max(1, len(fp)))
    for s in range(0, len(fp), step):
        dist = np.bitwise_count(fp[s : s + step, None] ^ fp[None, :])
        i, j = np.nonzero(dist <= d)
        i = i + s
        keep = j > i
        parts.append(np.stack([i[keep], j[keep]], axis=1))
    wall = time.perf_counter() - t
    pairs = np.concatenate(parts) if parts else np.empty((0, 2), dtype=np.int64)
    return value_pairs(fp, pairs), {"wall": wall, "layout": "all pairs", "threads": 1}


def run_npsort(fp: np.ndarray, d: int, _: object) -> tuple[None, dict]:
    best = math.inf
    for _rep in range(3):
        t = time.perf_counter()
        np.sort(fp)
        best = min(best, time.perf_counter() - t)
    return None, {"wall": best, "layout": "one np.sort", "threads": 1}


def run_tiny(_fp: object, d: int, spec: str) -> tuple[None, dict]:
    """neardup at small N over every usable ``blocks``, in-process: best-of-repeats seconds."""
    import neardup
    from neardup.core.layout import choose_blocks, count_tables

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
        rows.append({"n": n, "auto": choose_blocks(n, d), "times": times})
    return None, {"wall": 0.0, "layout": "", "threads": 0, "tiny": rows}


ENGINES = {
    "neardup": run_neardup,
    "pybind": run_pybind,
    "faiss": run_faiss,
    "brute": run_brute,
    "npsort": run_npsort,
    "tiny": run_tiny,
}


_IMPORTS = {"neardup": "neardup", "pybind": "simhash._simhash", "faiss": "faiss", "tiny": "neardup"}


def child(spec: dict) -> None:
    # the baseline is the interpreter with the engine's module imported, before any data
    if spec["engine"] in _IMPORTS:
        __import__(_IMPORTS[spec["engine"]])
    if spec["engine"] in ("neardup", "tiny"):
        import neardup

        neardup.find_all(generate(3000, 2), 3)  # load the cached kernels
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


def run_binary(path: str, n: int, seed: int, d: int, blocks: int, timeout: float) -> dict:
    """The hand-built ``simhash-find-all``: wall time includes parsing and writing JSON rows."""
    src = decimal_path(n, seed)
    dst = os.path.join(OUT, f"binary_{n}_{d}.jsonl")
    cmd = [path, "--input", src, "--output", dst, "--blocks", str(blocks), "--distance", str(d)]
    t = time.perf_counter()
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, start_new_session=True)
    status, rss = _wait(proc, timeout)
    wall = time.perf_counter() - t
    if status is None:
        return {"note": f"timeout > {timeout:.0f} s", "rss_mb": rss}
    if status != 0:
        return {"note": f"failed ({status})", "rss_mb": rss}
    with open(dst) as f:
        txt = f.read().replace("[", " ").replace("]", " ").replace(",", " ")
    arr = np.array(txt.split(), dtype=np.uint64).reshape(-1, 2)
    pairs = np.unique(np.sort(arr, axis=1), axis=0)
    np.save(dst + ".npy", pairs)
    return {
        "wall": wall,
        "rss_mb": rss,
        "base_mb": 0.0,
        "layout": f"{blocks} blocks / {math.comb(blocks, d)} tables",
        "threads": 1,
        "pairs": len(pairs),
        "pairs_file": dst + ".npy",
    }


def fmt_row(cells: list[str]) -> str:
    return "| " + " | ".join(cells) + " |"


HEADER = [
    "N",
    "distance",
    "engine",
    "layout",
    "threads",
    "wall s",
    "x neardup",
    "pairs",
    "peak RSS MB",
    "import MB",
    "B/fp",
    "agrees",
]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="2e4,1e6,1e7")
    ap.add_argument("--distances", default="3,6,8")
    ap.add_argument("--engines", default="neardup,pybind,faiss,brute,npsort")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--timeout", type=float, default=600.0, help="seconds per engine run")
    ap.add_argument("--brute-max", type=int, default=50_000, help="largest N for brute force")
    ap.add_argument(
        "--pybind-blocks",
        default="",
        help="distance:blocks[/blocks...] for simhash-pybind, e.g. 6:8/9,8:11 (default: best "
        "known per distance)",
    )
    ap.add_argument("--faiss", default="", help="nhash x bits, e.g. 2x32 (default: cheapest)")
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

    def one(n, d, engine, param, data, ref, base_wall):
        tag = f"{engine}_{n}_{d}_{param}"
        spec = {
            "engine": engine,
            "distance": d,
            "param": param,
            "data": data,
            "pairs": os.path.join(OUT, f"pairs_{tag}.npy"),
        }
        info = spawn(spec, args.timeout)
        info.setdefault("pairs_file", spec["pairs"])
        report(n, d, engine, info, ref, base_wall)
        return info

    def report(n, d, engine, info, ref, base_wall):
        if "note" in info:
            cells = [f"{n:,}", str(d), engine, str(info.get("layout", "")), ""]
            cells += [info["note"], "", "", f"{info['rss_mb']:.0f}", "", "", ""]
            print(fmt_row(cells), flush=True)
            return
        agree = ""
        if "pairs" in info and ref is not None:
            mine = np.load(info["pairs_file"])
            agree = "yes" if np.array_equal(mine, ref[1]) else f"NO (vs {ref[0]})"
            if ref[0] != engine and agree == "yes":
                agree = f"= {ref[0]}"
        ratio = f"{info['wall'] / base_wall:.2f}" if base_wall else ""
        above = info["rss_mb"] - info.get("base_mb", 0.0)
        cells = [
            f"{n:,}",
            str(d),
            engine,
            info["layout"],
            str(info["threads"]),
            f"{info['wall']:.3g}" if info["wall"] < 10 else f"{info['wall']:.1f}",
            ratio,
            f"{info['pairs']:,}" if "pairs" in info else "",
            f"{info['rss_mb']:.0f}",
            f"{info.get('base_mb', 0.0):.0f}",
            f"{above * 2**20 / n:.1f}",
            agree,
        ]
        print(fmt_row(cells), flush=True)

    for n in sizes:
        data = data_path(n, args.seed)
        for d in dists:
            ref = None
            nd = None
            if "brute" in engines and n <= args.brute_max:
                b = one(n, d, "brute", None, data, None, None)
                if "pairs" in b:
                    ref = ("brute", np.load(b["pairs_file"]))
            if "neardup" in engines:
                nd = one(n, d, "neardup", None, data, ref, None)
                if ref is None and "pairs" in nd:
                    ref = ("neardup", np.load(nd["pairs_file"]))
            base = nd.get("wall") if nd else None
            if "npsort" in engines:
                s = spawn({"engine": "npsort", "distance": d, "data": data}, args.timeout)
                if nd and "tables" in nd and "wall" in s:
                    s["wall"] *= nd["tables"]
                    s["layout"] = f"np.sort x {nd['tables']} tables"
                report(n, d, "floor", s, None, base)
            if "pybind" in engines:
                for b in pyb.get(d, [PYBIND_BLOCKS.get(d, d + 3)]):
                    one(n, d, "pybind", b, data, ref, base)
            if "faiss" in engines:
                if args.faiss:
                    specs = args.faiss.split("/")
                elif d <= 3:
                    nh, nb = faiss_config(n, d)
                    specs = list(dict.fromkeys(["2x32", f"{nh}x{nb}"]))
                else:
                    specs = []
                    note = "not run above distance 3 (too slow; pass --faiss NxB)"
                    print(fmt_row([f"{n:,}", str(d), "faiss", "", "", note] + [""] * 6))
                for f in specs:
                    one(n, d, "faiss", f, data, ref, base)
            if args.simhash_find_all:
                for b in pyb.get(d, [PYBIND_BLOCKS.get(d, d + 3)]):
                    info = run_binary(args.simhash_find_all, n, args.seed, d, b, args.timeout)
                    report(n, d, "simhash-find-all", info, ref, base)
            if args.sweep and nd and "blocks" in nd:
                sweeps.append(sweep(n, d, nd, data, ref, one))

    if args.sweep:
        print()
        print("## automatic layout against the best swept layout")
        print()
        print(fmt_row(["N", "distance", "auto blocks", "auto s", "best blocks", "best s", "ratio"]))
        print(fmt_row(["---"] * 7))
        for row in sweeps:
            print(fmt_row(row))
        for d in dists:
            tiny = spawn({"engine": "tiny", "distance": d, "param": args.tiny}, args.timeout)
            for r in tiny.get("tiny", []):
                times = {int(k): v for k, v in r["times"].items()}
                bm = min(times, key=times.get)
                auto_t = times.get(r["auto"], math.nan)
                print(
                    fmt_row(
                        [
                            f"{r['n']:,}",
                            str(d),
                            str(r["auto"]),
                            f"{auto_t:.3g}",
                            str(bm),
                            f"{times[bm]:.3g}",
                            f"{auto_t / times[bm]:.2f}",
                        ]
                    ),
                    flush=True,
                )
            if "note" in tiny:
                print(f"tiny sweep at distance {d}: {tiny['note']}")
    return 0


def sweep(n, d, nd, data, ref, one) -> list[str]:
    """neardup over ``blocks`` outward from the automatic choice until 2.5x slower than best."""
    auto = nd["blocks"]
    times = {auto: nd["wall"]}
    for direction in (-1, 1):
        m = auto + direction
        while d < m <= 64:
            info = one(n, d, "neardup", m, data, ref, nd["wall"])
            if "wall" not in info:
                break
            times[m] = info["wall"]
            if info["wall"] > 2.5 * min(times.values()):
                break
            m += direction
    best = min(times, key=times.get)
    return [
        f"{n:,}",
        str(d),
        str(auto),
        f"{times[auto]:.3g}",
        str(best),
        f"{times[best]:.3g}",
        f"{times[auto] / times[best]:.2f}",
    ]


if __name__ == "__main__":
    sys.exit(main())

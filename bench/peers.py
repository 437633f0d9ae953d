"""Peers of neardup for bench/find_all.py, each run in the benchmark's child process.

``pybind``    ``simhash.find_all`` from the PyPI package ``simhash-pybind`` (Python bindings of
              seomoz/simhash-cpp's own ``find_all``, one thread) on the Python set of values
``faiss``     ``faiss.IndexBinaryMultiHash`` (``faiss-cpu``) + ``range_search`` with radius
              ``distance + 1`` (binary range search keeps distances strictly below the radius);
              ``nflip = distance // nhash`` bit flips per sub-hash make it exact
``brute``     numpy XOR + popcount over all pairs, the oracle
``npsort``    ``np.sort`` of the N values once (best of three)
``binary``    a hand-built ``simhash-find-all`` fed the decimal file; its time includes parsing
              and writing its output
"""

from __future__ import annotations

import math
import os
import subprocess
import time

import numpy as np
from fpdata import OUT, decimal_path, value_pairs

#: simhash-cpp block counts that were fastest at 1M (see the README): distance -> blocks
PYBIND_BLOCKS = {0: 2, 1: 3, 2: 4, 3: 6, 4: 6, 5: 7, 6: 8, 7: 10, 8: 11}


def run_pybind(fp: np.ndarray, d: int, blocks: int | None) -> tuple[np.ndarray, dict]:
    # the compiled binding itself: the package's Python wrapper only turns its input into a set,
    # and another PyPI package named ``simhash`` may have replaced that wrapper
    from simhash._simhash import find_all

    b = blocks or PYBIND_BLOCKS.get(d, d + 3)
    hashes = set(fp.tolist())
    t, c = time.perf_counter(), time.process_time()
    res = find_all(hashes, b, d)
    wall, cpu = time.perf_counter() - t, time.process_time() - c
    arr = np.array(sorted(res), dtype=np.uint64).reshape(-1, 2)
    info = {"wall": wall, "cpu": cpu, "layout": f"{b} blocks / {math.comb(b, d)} tables"}
    info["threads"] = 1
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


def run_binary(
    path: str, n: int, seed: int, d: int, blocks: int, timeout: float, kind: str, wait
) -> dict:
    """The hand-built ``simhash-find-all``: wall time includes parsing and writing JSON rows."""
    src = decimal_path(n, seed, kind)
    dst = os.path.join(OUT, f"binary_{n}_{d}.jsonl")
    cmd = [path, "--input", src, "--output", dst, "--blocks", str(blocks), "--distance", str(d)]
    t = time.perf_counter()
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, start_new_session=True)
    status, rss = wait(proc, timeout)
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

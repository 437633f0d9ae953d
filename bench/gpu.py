"""The GPU engine beside the CPU engine, same inputs, one run: the table of the GPU docs page.

Each row is N fingerprints of ``bench/fpdata.uniform`` (90% random, 10% planted clusters) at one
distance; the GPU column is the GPU engine's search, ``neardup.gpu.find_all_pairs`` with the
layout ``neardup.find_all(fp, d, device="cuda")`` uses (host to GPU, the search in passes if it
does not fit, pairs back in host memory, sorted), the CPU column ``neardup.find_all(fp, d)`` with
``--threads`` threads in the same process. Both answers are compared (``same``). The GPU kernels
are compiled on a small input before the first row.

Where the GPU's time goes, one column per phase of that same run (``neardup.gpu.PHASES``, the GPU
synchronized before each timestamp): ``split`` (cutting an input too large for one pass into
passes, on the host), ``to GPU`` (fingerprints and positions), ``keys`` (each table's permuted
keys), ``sort``, ``scan`` (count, offsets, write the pairs), ``back`` (pairs to host memory) and
``merge`` (all tables' pairs merged and sorted, on the GPU while they fit, else on the host). The
phases add up to at most the GPU column; the rest is planning the passes and the GPU's memory
query.

The default rows are those of the throwaway measurement (10M, 100M and 1B fingerprints at
distances 3, 6 and 8; its H100 times are printed beside them) and the large-distance layouts,
10M at distances 10, 12 and 14. ``--cpu-max-n`` leaves the CPU column out above a size (1B on
the CPU engine takes minutes per row).

``--quick`` (alias ``--smoke``) runs tiny rows, large distances included, under numba's CUDA
simulator (no GPU needed): it checks that the script and the engine run and agree; its GPU
times are the simulator's, not a GPU's.

Usage::

    python bench/gpu.py                                   # the issue's rows (needs a GPU)
    python bench/gpu.py --rows 1e7:3,1e7:6,1e7:8 --threads 16
    python bench/gpu.py --rows 1e9:3 --no-cpu --memory 60G
    python bench/gpu.py --quick
"""

from __future__ import annotations

import argparse
import os
import sys
import time

ROWS = "1e7:3,1e7:6,1e7:8,1e8:3,1e8:6,1e9:3,1e9:6,1e7:10,1e7:12,1e7:14"
QUICK_ROWS = "200:3,200:6,200:8,60:10,60:12,40:14"
#: the throwaway sort-and-scan's times on one H100 (N, distance): the targets of the GPU column
THROWAWAY = {
    (10**7, 3): "0.011 s",
    (10**7, 6): "0.105 s",
    (10**7, 8): "0.45 s",
    (10**8, 3): "0.20 s",
    (10**8, 6): "2.5 s",
    (10**9, 3): "2.05 s",
    (10**9, 6): "39.7 s",
}
#: the column heads of the phases that are not their own names
HEADS = {"to_device": "to GPU"}


def _rows(text: str) -> list[tuple[int, int]]:
    out = []
    for item in text.split(","):
        n, d = item.split(":")
        out.append((int(float(n)), int(d)))
    return out


def _timed(fn, *args, **kwargs):
    t0 = time.perf_counter()
    out = fn(*args, **kwargs)
    return out, time.perf_counter() - t0


def _phases(fp, d: int, memory: str | None) -> tuple:
    """The GPU engine's pairs, its seconds and the seconds of each of its phases (one run)."""
    from neardup.core.search import resolve_layout
    from neardup.gpu import find_all_pairs

    phases: dict[str, float] = {}
    layout = resolve_layout(len(fp), d, None)
    got, seconds = _timed(find_all_pairs, fp, layout, memory=memory, phases=phases)
    return got, seconds, phases


def _device_name(simulated: bool) -> str:
    if simulated:
        return "numba CUDA simulator (not a GPU)"
    import cupy

    props = cupy.cuda.runtime.getDeviceProperties(cupy.cuda.Device().id)
    return props["name"].decode()


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rows", default=None, help=f"N:distance,... (default {ROWS})")
    ap.add_argument("--threads", type=int, default=os.cpu_count(), help="CPU engine threads")
    ap.add_argument("--memory", default=None, help="GPU bytes a pass may use (e.g. 60G)")
    ap.add_argument("--no-cpu", action="store_true", help="GPU column only (large N)")
    ap.add_argument("--cpu-max-n", type=float, default=None, help="no CPU column above this N")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument(
        "--quick", "--smoke", action="store_true", help="tiny rows under the CUDA simulator"
    )
    args = ap.parse_args(argv)
    if args.quick:
        os.environ["NUMBA_ENABLE_CUDASIM"] = "1"  # before numba.cuda is first imported
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    import numpy as np
    from fpdata import uniform

    import neardup
    from neardup.gpu import PHASES, runtime

    rt = runtime.load()
    rows = _rows(args.rows or (QUICK_ROWS if args.quick else ROWS))
    neardup.find_all(uniform(64, 0), 3, device="cuda")  # compile the kernels
    print(f"GPU: {_device_name(rt.simulated)}; CPU engine: {args.threads} threads")
    heads = ["N", "distance", "pairs", "GPU", *(HEADS.get(p, p) for p in PHASES)]
    heads += ["CPU engine", "same", "throwaway, H100"]
    print("| " + " | ".join(heads) + " |")
    print("|" + "---|" * len(heads))
    for n, d in rows:
        fp = uniform(n, args.seed)
        got, t_gpu, phases = _phases(fp, d, args.memory)
        cpu, same = "", ""
        if not args.no_cpu and (args.cpu_max_n is None or n <= args.cpu_max_n):
            want, t_cpu = _timed(neardup.find_all, fp, d, threads=args.threads)
            cpu, same = f"{t_cpu:.3f} s", "yes" if np.array_equal(got, want) else "NO"
        cells = [f"{n:,}", str(d), f"{len(got):,}", f"{t_gpu:.3f} s"]
        cells += [f"{phases.get(p, 0.0):.3f} s" for p in PHASES]
        cells += [cpu, same, THROWAWAY.get((n, d), "")]
        print("| " + " | ".join(cells) + " |", flush=True)


if __name__ == "__main__":
    main()

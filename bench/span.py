"""How far the CPU engine's batch search can scale on threads, measured on a machine of few cores.

One search of N fingerprints of ``bench/fpdata.uniform`` (``neardup.core.engine.pairs`` with the
scheme ``find_all`` chooses) runs with ``--threads`` threads however many cores there are; every
call of a tree kernel (``neardup.core.tree_kernels``: a first-level histogram or scatter slice,
a chunk of first-level buckets searched) is timed in its own thread's CPU seconds, so the
figures do not depend on the cores the machine lends. From them:

- ``work``: the CPU seconds of all kernel calls (what one thread would spend in the kernels);
- ``span``: the longest chain no thread count shortens, the largest over the units of work
  (a part's first block) of its largest histogram slice + its largest scatter slice + its
  largest chunk of buckets (the engine runs every unit's slices and chunks on one shared pool);
- for each thread count T of ``--at``: the speed-up on T cores, from ``work / (work / T +
  span)``, what a greedy schedule reaches at worst (Graham's bound), to ``work / max(work / T,
  span)``, the best, memory bandwidth left out: only a machine with T cores measures that
  (``bench/find_all.py --threads 1,T``).

The units' one-thread seconds are printed too, heaviest first: when every unit ran on one
thread alone (the engine before it shared its pool), the largest of them was the span.

Usage::

    python bench/span.py --rows 1e7:8,1e6:10,1e6:12 --threads 16 --at 2,8,16
"""

from __future__ import annotations

import argparse
import os
import sys
import threading
import time
from collections import defaultdict

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

KERNELS = ("first_level_histogram", "first_level_scatter", "search_first_level")


class Recorder:
    """Wraps the tree kernels the engine calls: (kernel, unit, thread CPU seconds) per call."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, object, float]] = []
        self.lock = threading.Lock()

    def wrap(self, tk, name: str):
        fn = getattr(tk, name)

        def timed(*args):
            t = time.thread_time()
            out = fn(*args)
            dt = time.thread_time() - t
            # search_first_level(plan, DF, DI, ends, v_lo, v_hi, a, ...): its unit is (plan, a)
            unit = (id(args[0]), args[6]) if name == "search_first_level" else None
            with self.lock:
                self.calls.append((name, unit, dt))
            return out

        return fn, timed


def _span(calls: list[tuple[str, object, float]]) -> tuple[float, float, dict]:
    work = sum(dt for _, _, dt in calls)
    first = max((dt for name, _, dt in calls if name != "search_first_level"), default=0.0)
    chunk: dict = defaultdict(float)
    unit: dict = defaultdict(float)
    for name, u, dt in calls:
        if name == "search_first_level":
            chunk[u] = max(chunk[u], dt)
            unit[u] += dt
    # a unit's first pass: a histogram and a scatter slice, each at most the largest of any unit
    span = max((2 * first + c for c in chunk.values()), default=0.0)
    return work, span, unit


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rows", default="1e6:8,1e6:10,1e6:12", help="N:distance,...")
    ap.add_argument("--threads", type=int, default=16, help="threads of the measured search")
    ap.add_argument("--at", default="2,8,16", help="thread counts of the speed-up columns")
    ap.add_argument("--seed", type=int, default=1)
    args = ap.parse_args(argv)
    from fpdata import uniform

    import neardup
    from neardup.core import engine
    from neardup.core import tree_kernels as tk
    from neardup.core.search import resolve_scheme

    rec = Recorder()
    saved = {name: rec.wrap(tk, name) for name in KERNELS}
    neardup.find_all(uniform(20_000, 0), 8, threads=2)  # compile the kernels
    at = [int(x) for x in args.at.split(",")]
    print(f"# threads of the search: {args.threads}; cores: {len(os.sched_getaffinity(0))}")
    heads = ["N", "distance", "scheme", "units", "work", "span", "heaviest units (1 thread)"]
    heads += [f"x at {t}" for t in at]
    print("| " + " | ".join(heads) + " |")
    print("|" + "---|" * len(heads))
    for item in args.rows.split(","):
        n, d = int(float(item.split(":")[0])), int(item.split(":")[1])
        fp = uniform(n, args.seed)
        scheme = resolve_scheme(n, d, None)
        rec.calls.clear()
        for name, (_, timed) in saved.items():
            setattr(tk, name, timed)
        try:
            engine.pairs(fp, scheme, threads=args.threads)
        finally:
            for name, (fn, _) in saved.items():
                setattr(tk, name, fn)
        work, span, unit = _span(rec.calls)
        heavy = sorted(unit.values(), reverse=True)
        cells = [f"{n:,}", str(d), scheme.describe(), str(len(unit))]
        cells += [f"{work:.2f} s", f"{span:.3f} s", ", ".join(f"{x:.2f}" for x in heavy[:3])]
        cells += [f"{work / (work / t + span):.1f}-{work / max(work / t, span):.1f}" for t in at]
        print("| " + " | ".join(cells) + " |", flush=True)


if __name__ == "__main__":
    main()

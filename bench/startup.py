"""Start-up time of the console scripts: the first (cold) run that compiles the kernels, and warm runs.

Cold is a fresh environment for numba: an empty NUMBA_CACHE_DIR, so every kernel the command
needs is compiled (the in-tree caches are ignored while NUMBA_CACHE_DIR is set). Warm runs reuse
that cache. Each figure is wall time and CPU time (user + system) of the whole process, with the
interpreter's own floors beside it; on a shared machine CPU time is the steadier of the two.

    python bench/startup.py [--repeat 5]

Targets (issue: fit the tools users already have): cold `neardup dedup` on the shipped sample
under 10 s; warm `simhash-find-all` on 10 fingerprints under 0.6 s.
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SAMPLE = os.path.join(ROOT, "data", "sample", "corpus.jsonl")
FPS = os.path.join(ROOT, "data", "fingerprints.txt")
BIN = os.path.dirname(sys.executable)


def run(cmd: list[str], env: dict[str, str]) -> tuple[float, float, str]:
    """(wall s, cpu s, stderr) of one process."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    r = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=900)
    wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    if r.returncode != 0:
        raise SystemExit(f"{' '.join(cmd)} failed: {r.stderr}")
    return wall, cpu, r.stderr


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=5, help="warm runs per command (median shown)")
    args = ap.parse_args()
    tmp = tempfile.mkdtemp(prefix="neardup-startup-")
    ten = os.path.join(tmp, "fps10.txt")
    with open(FPS, encoding="ascii") as f, open(ten, "w", encoding="ascii") as g:
        g.writelines(f.readlines()[:10])
    env = dict(os.environ, NUMBA_CACHE_DIR=os.path.join(tmp, "numba-cache"))
    out = os.path.join(tmp, "kept.jsonl")
    dedup = [os.path.join(BIN, "neardup"), "dedup", SAMPLE, "-o", out]
    find_all = [os.path.join(BIN, "simhash-find-all"), "-i", ten, "-o", os.devnull, "-q"]
    py = sys.executable

    rows = []
    wall, cpu, err = run(dedup, env)
    notice = next((ln for ln in err.splitlines() if "compiling" in ln), "(no notice)")
    rows.append(("neardup dedup, sample (1,200 docs), cold", wall, cpu, 10.0))

    def warm(label: str, cmd: list[str], target: float | None) -> None:
        runs = [run(cmd, env) for _ in range(args.repeat)]
        rows.append((label, statistics.median(r[0] for r in runs),
                     statistics.median(r[1] for r in runs), target))  # fmt: skip

    warm("neardup dedup, sample, warm", dedup, None)
    warm("simhash-find-all, 10 fingerprints, warm", find_all, 0.6)
    warm("python -c 'import numpy, click' (floor)", [py, "-c", "import numpy, click"], None)
    warm("python -c 'import numba' (numba's import alone)", [py, "-c", "import numba"], None)

    print(f"first run says: {notice}")
    print(f"{'command':<52} {'wall s':>7} {'cpu s':>7}  target")
    for label, wall, cpu, target in rows:
        verdict = (
            "" if target is None else f"< {target:g} s wall: {'yes' if wall < target else 'NO'}"
        )
        print(f"{label:<52} {wall:7.2f} {cpu:7.2f}  {verdict}")
    print(f"load average: {' '.join(f'{x:.2f}' for x in os.getloadavg())} on {os.cpu_count()} cpus")


if __name__ == "__main__":
    main()

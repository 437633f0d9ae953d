"""Start-up time of the console scripts: the first (cold) run that compiles the kernels, and warm runs.

Cold is a fresh environment for numba: an empty NUMBA_CACHE_DIR, so every kernel the command
needs is compiled (the in-tree caches are ignored while NUMBA_CACHE_DIR is set). Warm runs reuse
that cache. Each figure is wall time and CPU time (user + system) of the whole process, with the
interpreter's own floors beside it; on a shared machine CPU time is the steadier of the two.

    python bench/startup.py [--repeat 5] [--breakdown] [--ahead] [--baseline SRC]

Targets (issue: fit the tools users already have): cold `neardup dedup` on the shipped sample
under 10 s; warm `simhash-find-all` on 10 fingerprints under 0.6 s.

With ``--ahead``, cold ``neardup dedup`` runs with the search kernels compiled ahead in a
second process (whatever the load) and without, interleaved (run it under ``nice -n -10`` to
see what a machine with idle CPUs gets).

With ``--breakdown``, one more cold ``neardup dedup`` runs in this interpreter's stead with
compiling ahead off (so that every kernel compiles in one process) and numba's compile events
(``numba.core.event``) timed: CPU seconds of each kernel's own compile (its callees' apart) and
of each top-level kernel with its callees, by group.
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


# Runs `neardup dedup` in process with numba's compile events timed; prints one JSON line.
_PROFILED = r"""
import json, sys, time
import numba.core.event as ev
from neardup import config
config.COMPILE_AHEAD = False
own, roots, stack = {}, [], []
class Timer(ev.Listener):
    def on_start(self, event):
        stack.append([time.process_time(), 0.0])
    def on_end(self, event):
        t0, inner = stack.pop()
        dt = time.process_time() - t0
        f = event.data["dispatcher"].py_func
        name = f"{f.__module__}.{f.__qualname__.replace('.<locals>', '')}"
        own[name] = own.get(name, 0.0) + dt - inner
        if stack:
            stack[-1][1] += dt
        else:
            roots.append((name, dt))
ev.register("numba:compile", Timer())
from neardup.cli.main import main
cpu = time.process_time()
sys.argv = ["neardup", *sys.argv[1:]]
try:
    main()
except SystemExit:
    pass
print(json.dumps({"own": own, "roots": roots, "cpu": time.process_time() - cpu}))
"""


# Runs `neardup dedup` with compiling ahead forced on (whatever the load) or off.
_AHEAD = r"""
import sys
from neardup import config
config.COMPILE_AHEAD = sys.argv[1] == "on"
from neardup.pipeline import ahead
ahead.COMPILE_AHEAD_SPARE_CPUS = float("-inf")
from neardup.cli.main import main
main(sys.argv[2:])
"""


def ahead(dedup_args: list[str], env: dict[str, str], repeat: int, tmp: str) -> None:
    """Cold dedup with and without the second process compiling ahead, interleaved."""
    runs: dict[str, list[tuple[float, float, str]]] = {"on": [], "off": []}
    for i in range(repeat):
        for mode, got in runs.items():
            fresh = dict(env, NUMBA_CACHE_DIR=os.path.join(tmp, f"ahead-{mode}-{i}"))
            got.append(run([sys.executable, "-c", _AHEAD, mode, *dedup_args, "-q"], fresh))
    print(f"\ncold dedup, median of {repeat}: wall s, cpu s")
    for mode, got in runs.items():
        print(f"  compiling ahead {mode:<3} {statistics.median(r[0] for r in got):7.2f} "
              f"{statistics.median(r[1] for r in got):7.2f}")  # fmt: skip
    print(f"load average: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")


def breakdown(dedup_args: list[str], env: dict[str, str]) -> None:
    """Print where a cold dedup's compile time goes (CPU seconds, one process)."""
    import json

    r = subprocess.run(
        [sys.executable, "-c", _PROFILED, *dedup_args, "-q"],
        env=env, capture_output=True, text=True, timeout=900, check=True,
    )  # fmt: skip
    data = json.loads(r.stdout.strip().splitlines()[-1])
    total = sum(data["own"].values())
    print(f"\ncold dedup in one process: {data['cpu']:.2f} CPU s after imports, compiling "
          f"{total:.2f} s")  # fmt: skip
    print("top-level kernels (with their callees):")
    for name, sec in data["roots"]:
        print(f"  {sec:6.2f}  {name}")
    print("each kernel's own compile (>= 0.05 s):")
    for name, sec in sorted(data["own"].items(), key=lambda kv: -kv[1]):
        if sec >= 0.05:
            print(f"  {sec:6.2f}  {name}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=5, help="runs per command (median shown)")
    ap.add_argument("--breakdown", action="store_true", help="compile seconds of each kernel")
    ap.add_argument(
        "--ahead", action="store_true", help="cold dedup with and without compiling ahead"
    )
    ap.add_argument(
        "--baseline",
        metavar="SRC",
        help="another checkout's src directory: its figures too, runs interleaved with ours",
    )
    args = ap.parse_args()
    tmp = tempfile.mkdtemp(prefix="neardup-startup-")
    ten = os.path.join(tmp, "fps10.txt")
    with open(FPS, encoding="ascii") as f, open(ten, "w", encoding="ascii") as g:
        g.writelines(f.readlines()[:10])
    out = os.path.join(tmp, "kept.jsonl")
    dedup = [os.path.join(BIN, "neardup"), "dedup", SAMPLE, "-o", out]
    find_all = [os.path.join(BIN, "simhash-find-all"), "-i", ten, "-o", os.devnull, "-q"]
    py = sys.executable
    # each version: its name and the environment its console scripts import it from
    versions = [("", dict(os.environ))]
    if args.baseline:
        pythonpath = os.pathsep.join(filter(None, [args.baseline, os.environ.get("PYTHONPATH")]))
        versions = [("before", dict(os.environ, PYTHONPATH=pythonpath)), ("after", versions[0][1])]

    def cache(env: dict[str, str], name: str) -> dict[str, str]:
        return dict(env, NUMBA_CACHE_DIR=os.path.join(tmp, name))

    rows = []
    notices = {}
    cold: dict[str, list[tuple[float, float, str]]] = {v: [] for v, _ in versions}
    for i in range(args.repeat):  # a fresh cache each time
        for v, env in versions:
            cold[v].append(run(dedup, cache(env, f"cold-{v}-{i}")))
    for v, _ in versions:
        err = cold[v][0][2]
        notices[v] = next((ln for ln in err.splitlines() if "compiling" in ln), "(no notice)")
        rows.append((f"neardup dedup, sample (1,200 docs), cold {v}".rstrip(),
                     statistics.median(r[0] for r in cold[v]),
                     statistics.median(r[1] for r in cold[v]), 10.0))  # fmt: skip

    def warm(label: str, cmd: list[str], target: float | None, each: bool = True) -> None:
        chosen = versions if each else versions[-1:]
        runs: dict[str, list[tuple[float, float, str]]] = {v: [] for v, _ in chosen}
        for _ in range(args.repeat):
            for v, env in chosen:
                runs[v].append(run(cmd, cache(env, f"cold-{v}-0")))
        for v, got in runs.items():
            name = f"{label} {v}".rstrip() if each else label
            rows.append((name, statistics.median(r[0] for r in got),
                         statistics.median(r[1] for r in got), target))  # fmt: skip

    warm("neardup dedup, sample, warm", dedup, None)
    warm("simhash-find-all, 10 fingerprints, warm", find_all, 0.6)
    floor = "python -c 'import numpy, click' (floor)"
    warm(floor, [py, "-c", "import numpy, click"], None, each=False)
    warm("python -c 'import numba' (numba's import alone)", [py, "-c", "import numba"], None, False)

    for v, notice in notices.items():
        print(f"first run says{f' ({v})' if v else ''}: {notice}")
    print(
        f"{'command (median of ' + str(args.repeat) + ')':<56} {'wall s':>7} {'cpu s':>7}  target"
    )
    for label, wall, cpu, target in rows:
        verdict = (
            "" if target is None else f"< {target:g} s wall: {'yes' if wall < target else 'NO'}"
        )
        print(f"{label:<56} {wall:7.2f} {cpu:7.2f}  {verdict}")
    print(f"load average: {' '.join(f'{x:.2f}' for x in os.getloadavg())} on {os.cpu_count()} cpus")
    if args.ahead:
        ahead(["dedup", SAMPLE, "-o", out], versions[-1][1], args.repeat, tmp)
    if args.breakdown:
        for v, env in versions:
            print(f"\n{v or 'compile time'}:", end="")
            breakdown(["dedup", SAMPLE, "-o", out], cache(env, f"breakdown-{v}"))


if __name__ == "__main__":
    main()

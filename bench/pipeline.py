"""End-to-end documents/s of the commands that read documents: ``neardup dedup`` (verified, the
default, and ``--no-verify``), ``neardup fingerprint`` and ``neardup index add``.

Each command runs in its own process on the same real-text JSONL corpus (bench/dedup.py's:
lines of man pages, license and copyright files, 5-20 lines a document, 20% planted
near-duplicates), at each ``--threads``; the time is the whole command (start-up, reading,
parsing JSON, fingerprinting, search, verification, writing). Repeats are interleaved across
settings and the median is reported, with the parallel efficiency ``T(1) / (t * T(t))`` and the
cores used (the child's CPU time / wall time).

``--baseline SRC`` runs the same commands with another checkout's ``src`` directory first on
``PYTHONPATH`` (A/B in one run: ``git archive main src | tar -x -C /tmp/base`` then
``--baseline /tmp/base/src``). ``--escaped`` writes the corpus with every non-ASCII character as a
``\\uXXXX`` escape (``json.dumps`` with its default ``ensure_ascii=True``, as many dumps are).

``--breakdown`` also runs each command once at 1 thread in process under a sampling profiler of
the main thread (a sample every millisecond) and prints where the main thread's time goes: the
innermost function of neardup or of the standard library it was in, or waiting for workers.

Usage::

    python bench/pipeline.py [--docs 100000] [--threads 1,2] [--repeat 3] [--baseline SRC]
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

HERE = os.path.dirname(os.path.abspath(__file__))
OWN_SRC = os.path.join(os.path.dirname(HERE), "src")
COMMANDS = ("dedup", "dedup-no-verify", "fingerprint", "index-add")


def corpus(workdir: str, docs: int, escaped: bool) -> str:
    """The JSONL corpus of ``docs`` documents (built once per size and escaping)."""
    from dedup import build

    path = os.path.join(workdir, f"corpus-{docs}{'-escaped' if escaped else ''}.jsonl")
    if not os.path.exists(path):
        tmp = path + ".tmp"
        build(tmp, docs, 0.2, 0)
        if escaped:
            with open(tmp, encoding="utf-8") as f, open(tmp + "2", "w", encoding="ascii") as g:
                for line in f:
                    g.write(json.dumps(json.loads(line)) + "\n")
            os.replace(tmp + "2", tmp)
        os.replace(tmp, path)
    return path


def argv_for(command: str, path: str, out: str, threads: int) -> tuple[list[str], list[str]]:
    """(setup argv or [], timed argv) of ``neardup`` for one command."""
    t = ["--threads", str(threads), "-q"]
    if command == "dedup":
        return [], ["dedup", path, "-o", os.path.join(out, "kept.jsonl"), *t]
    if command == "dedup-no-verify":
        return [], ["dedup", path, "--no-verify", "-o", os.path.join(out, "kept.jsonl"), *t]
    if command == "fingerprint":
        return [], ["fingerprint", path, "-o", os.path.join(out, "fp.txt"), *t]
    if command == "index-add":
        ix = os.path.join(out, "index")
        return ["index", "create", ix], ["index", "add", ix, path, *t]
    raise SystemExit(f"unknown command {command!r}; use {', '.join(COMMANDS)}")


def run_once(src: str, command: str, path: str, threads: int) -> tuple[float, float]:
    """(wall seconds, CPU seconds) of one run of ``command`` with ``src`` on PYTHONPATH."""
    env = {**os.environ, "PYTHONPATH": src, "NEARDUP_THREADS": str(threads)}
    with tempfile.TemporaryDirectory(prefix="neardup-bench-") as out:
        setup, timed = argv_for(command, path, out, threads)
        neardup = [sys.executable, "-m", "neardup"]
        if setup:
            subprocess.run([*neardup, *setup], env=env, check=True, capture_output=True)
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        t0 = time.perf_counter()
        proc = subprocess.run([*neardup, *timed], env=env, capture_output=True, text=True)
        wall = time.perf_counter() - t0
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if proc.returncode != 0:
        raise SystemExit(f"{' '.join(timed)} failed ({src}):\n{proc.stderr}")
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return wall, cpu


# ----------------------------------------------------------------------------------------------
# where the main thread's time goes


def _label(frame) -> str:
    """The innermost frame of neardup or the standard library, as ``module.function``."""
    waiting = ("threading.py", "_base.py", "thread.py", "queue.py")
    f = frame
    while f is not None:
        name = f.f_code.co_filename
        if name.endswith(waiting) and f.f_code.co_name in ("wait", "result", "get", "join"):
            return "(waiting for workers)"
        f = f.f_back
    f = frame
    while f is not None:
        name = f.f_code.co_filename
        if "neardup" in name or "/json/" in name or "python3" in name:
            mod = os.path.splitext(os.path.basename(name))[0]
            pkg = os.path.basename(os.path.dirname(name))
            return f"{pkg}/{mod}.{f.f_code.co_name}"
        f = f.f_back
    return "(other)"


def profile_child(argv: list[str]) -> None:
    """Run ``neardup argv`` in this process, sampling the main thread; print JSON counts."""
    from neardup.cli.main import cli

    sys.setswitchinterval(0.0005)
    main_id = threading.get_ident()
    counts: collections.Counter[str] = collections.Counter()
    stop = threading.Event()

    def sample() -> None:
        while not stop.wait(0.001):
            frame = sys._current_frames().get(main_id)
            if frame is not None:
                counts[_label(frame)] += 1

    sampler = threading.Thread(target=sample, daemon=True)
    t0 = time.perf_counter()
    sampler.start()
    try:
        cli.main(argv, standalone_mode=False)
    finally:
        stop.set()
        sampler.join()
    print(json.dumps({"wall": time.perf_counter() - t0, "counts": dict(counts)}))


def breakdown(src: str, command: str, path: str) -> None:
    env = {**os.environ, "PYTHONPATH": src}
    with tempfile.TemporaryDirectory(prefix="neardup-bench-") as out:
        setup, timed = argv_for(command, path, out, 1)
        if setup:
            subprocess.run(
                [sys.executable, "-m", "neardup", *setup], env=env, check=True, capture_output=True
            )
        proc = subprocess.run(
            [sys.executable, os.path.abspath(__file__), "--profile-child", json.dumps(timed)],
            env=env,
            capture_output=True,
            text=True,
        )
    if proc.returncode != 0:
        raise SystemExit(f"profiling {command} failed:\n{proc.stderr}")
    res = json.loads(proc.stdout.strip().splitlines()[-1])
    total = sum(res["counts"].values()) or 1
    top = sorted(res["counts"].items(), key=lambda kv: -kv[1])[:8]
    parts = ", ".join(f"{name} {n / total:.0%}" for name, n in top)
    print(f"  {command} ({res['wall']:.1f} s in process): {parts}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--docs", type=int, default=100_000, help="documents (default 100000)")
    ap.add_argument("--threads", default="1,2", help="thread counts (default 1,2)")
    ap.add_argument(
        "--commands", default=",".join(COMMANDS), help="subset of " + ",".join(COMMANDS)
    )
    ap.add_argument("--repeat", type=int, default=3, help="median of N timings (default 3)")
    ap.add_argument("--baseline", default=None, help="another checkout's src directory (A/B)")
    ap.add_argument("--escaped", action="store_true", help="non-ASCII text as \\u escapes")
    ap.add_argument("--breakdown", action="store_true", help="where the main thread's time goes")
    ap.add_argument("--workdir", default=None, help="where the corpus is kept (default tmp)")
    ap.add_argument("--profile-child", default=None, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.profile_child:
        profile_child(json.loads(args.profile_child))
        return

    workdir = args.workdir or os.path.join(tempfile.gettempdir(), "neardup-bench-pipeline")
    os.makedirs(workdir, exist_ok=True)
    t0 = time.perf_counter()
    path = corpus(workdir, args.docs, args.escaped)
    size = os.path.getsize(path)
    print(f"corpus: {args.docs} documents, {size / 1e6:.1f} MB of JSONL "
          f"({time.perf_counter() - t0:.0f} s to build or find)")  # fmt: skip
    versions = {"this": OWN_SRC}
    if args.baseline:
        versions = {"baseline": os.path.abspath(args.baseline), **versions}
    threads = [int(x) for x in args.threads.split(",")]
    commands = args.commands.split(",")
    for src in versions.values():  # compile / load the cached kernels of each version
        for command in commands:
            run_once(src, command, path, 1)
    runs: dict[tuple[str, str, int], list[tuple[float, float]]] = {}
    for _ in range(args.repeat):
        for command in commands:
            for t in threads:
                for name, src in versions.items():
                    runs.setdefault((name, command, t), []).append(run_once(src, command, path, t))
    print(f"{os.cpu_count()} cores; median of {args.repeat}; load average {os.getloadavg()[0]:.1f}")
    print()
    print("| command | version | threads | seconds | documents/s | MB/s | parallel efficiency "
          "| cores used | documents per CPU second | vs baseline |")  # fmt: skip
    print("|---|---|---:|---:|---:|---:|---:|---:|---:|---:|")
    for command in commands:
        for t in threads:
            for name in versions:
                walls = [w for w, _ in runs[name, command, t]]
                cpus = [c for _, c in runs[name, command, t]]
                wall = statistics.median(walls)
                one = statistics.median(w for w, _ in runs[name, command, threads[0]])
                eff = f"{one * threads[0] / (t * wall):.2f}" if t != threads[0] else ""
                used = statistics.median(c / w for w, c in zip(walls, cpus, strict=True))
                vs = ""
                if name != "baseline" and "baseline" in versions:
                    base = statistics.median(w for w, _ in runs["baseline", command, t])
                    vs = f"{base / wall:.2f}x"
                cpu = statistics.median(cpus)
                print(f"| {command} | {name} | {t} | {wall:.2f} | {args.docs / wall:,.0f} | "
                      f"{size / 1e6 / wall:.1f} | {eff} | {used:.2f} | {args.docs / cpu:,.0f} | "
                      f"{vs} |")  # fmt: skip
    if args.breakdown:
        for name, src in versions.items():
            print(f"\nmain thread at 1 thread, {name}:")
            for command in commands:
                breakdown(src, command, path)


if __name__ == "__main__":
    main()

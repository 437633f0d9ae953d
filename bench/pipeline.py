"""End-to-end documents/s of the commands that read documents: ``neardup dedup`` (verified, the
default, and ``--no-verify``), ``neardup fingerprint`` and ``neardup index add``.

Each command runs in its own process on the same real-text JSONL corpus (bench/dedup.py's:
lines of man pages, license and copyright files, 5-20 lines a document, 20% planted
near-duplicates), at each ``--threads``; the time is the whole command (start-up, reading,
parsing JSON, fingerprinting, search, verification, writing). Repeats are interleaved across
settings and the median is reported, with the parallel efficiency ``T(1) / (t * T(t))``, the
cores used (the child's CPU time / wall time), the start-up (the same command on one document)
and the documents/s beyond it. A GIL-free busy loop run at each thread count (``control``) shows
how far the machine itself let threads scale meanwhile (other processes share its cores).

``--baseline SRC`` runs the same commands with another checkout's ``src`` directory first on
``PYTHONPATH`` (A/B in one run: ``git archive main src | tar -x -C /tmp/base`` then
``--baseline /tmp/base/src``). ``--escaped`` writes the corpus with every non-ASCII character as a
``\\uXXXX`` escape (``json.dumps`` with its default ``ensure_ascii=True``, as many dumps are).
``--parquet`` runs the commands on the same documents as a Parquet file (``id``, ``text``;
row groups as pyarrow writes them, or of ``--row-group-rows N`` rows).

Last, the share of ``neardup fingerprint``'s per-document CPU time (beyond its run on the first
2,000 documents, which pays the one-time costs) spent outside the GIL-free read and fingerprint
kernels, which bounds the speed-up on any number of threads. ``--breakdown`` also runs each command once at 1 thread in process under a sampling profiler of
the main thread (a sample every millisecond) and prints where the main thread's time goes: the
innermost function of neardup or of the standard library it was in, or waiting for workers.

Usage::

    python bench/pipeline.py [--docs 300000] [--threads 1,2] [--repeat 3] [--baseline SRC]
"""

from __future__ import annotations

import argparse
import collections
import itertools
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


def as_parquet(path: str, rows: int | None = None) -> str:
    """The JSONL file ``path`` as a Parquet file beside it (row groups of ``rows`` rows)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    dest = path.removesuffix(".jsonl") + (f"-rg{rows}" if rows else "") + ".parquet"
    if not os.path.exists(dest):
        with open(path, encoding="utf-8") as f:
            docs = [json.loads(line) for line in f]
        table = pa.table({"id": [d["id"] for d in docs], "text": [d["text"] for d in docs]})
        pq.write_table(table, dest + ".tmp", row_group_size=rows)
        os.replace(dest + ".tmp", dest)
    return dest


def argv_for(command: str, path: str, out: str, threads: int) -> tuple[list[str], list[str]]:
    """(setup argv or [], timed argv) of ``neardup`` for one command."""
    t = ["--threads", str(threads), "-q"]
    kept = os.path.join(out, "kept" + os.path.splitext(path)[1])
    if command == "dedup":
        return [], ["dedup", path, "-o", kept, *t]
    if command == "dedup-no-verify":
        return [], ["dedup", path, "--no-verify", "-o", kept, *t]
    if command == "fingerprint":
        return [], ["fingerprint", path, "-o", os.path.join(out, "fp.txt"), *t]
    if command == "index-add":
        ix = os.path.join(out, "index")
        return ["index", "create", ix], ["index", "add", ix, path, *t]
    raise SystemExit(f"unknown command {command!r}; use {', '.join(COMMANDS)}")


def control(threads: int, n: int = 200_000_000) -> tuple[float, float]:
    """(wall, CPU) seconds of a fixed amount of GIL-free work split over ``threads`` threads,
    in a child process: how well this machine lets any code scale at the moment."""
    code = (
        "import sys, time\n"
        "from concurrent.futures import ThreadPoolExecutor\n"
        "from numba import njit\n"
        "@njit(nogil=True)\n"
        "def spin(n):\n"
        "    s = 0\n"
        "    for i in range(n):\n"
        "        s = (s * 31 + i) % 1000003\n"
        "    return s\n"
        "t, n = int(sys.argv[1]), int(sys.argv[2])\n"
        "spin(10)\n"
        "t0 = time.perf_counter()\n"
        "with ThreadPoolExecutor(t) as pool:\n"
        "    list(pool.map(spin, [n // t] * t))\n"
        "print(time.perf_counter() - t0)\n"
    )
    proc = subprocess.run(
        [sys.executable, "-c", code, str(threads), str(n)], capture_output=True, text=True
    )
    return float(proc.stdout.strip()), 0.0


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


def gil_child(argv: list[str]) -> None:
    """Run ``neardup argv`` in this process at 1 thread, timing the GIL-free kernels that read
    and fingerprint; print JSON (process CPU seconds, seconds in those kernels)."""
    import neardup.fingerprints.simhash as simhash
    from neardup import config
    from neardup.cli.main import cli

    config.READ_KERNEL_FROM = 0  # the block kernel however small the input

    spent = [0.0]

    def timed(kernel):
        def run(*a):
            t = time.perf_counter()
            try:
                return kernel(*a)
            finally:
                spent[0] += time.perf_counter() - t

        return run

    if hasattr(simhash, "_fingerprint_chunk"):  # one kernel for every kind of text
        simhash._fingerprint_chunk = timed(simhash._fingerprint_chunk)
    else:  # a kernel made for the kinds of text of each chunk
        import neardup.fingerprints._pipeline as pipeline

        make = pipeline.chunk_kernel
        pipeline.chunk_kernel = lambda spec: timed(make(spec))
    try:
        import neardup.io._line_kernels as lines

        name = "parse_lines" if hasattr(lines, "parse_lines") else "_parse_block"  # or older
        setattr(lines, name, timed(getattr(lines, name)))
    except ImportError:  # a version without the block kernel
        pass
    c0 = time.process_time()
    cli.main(argv, standalone_mode=False)
    print(json.dumps({"cpu": time.process_time() - c0, "kernels": spent[0]}))


def child(mode: str, argv: list[str], env: dict[str, str], what: str) -> dict:
    """The JSON object that this script run as ``mode`` (``--gil-child``, ``--profile-child``)
    on a ``neardup`` command line prints last."""
    proc = subprocess.run(
        [sys.executable, os.path.abspath(__file__), mode, json.dumps(argv)],
        env=env,
        capture_output=True,
        text=True,
    )
    if proc.returncode != 0:
        raise SystemExit(f"{what} failed:\n{proc.stderr}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def gil_share(src: str, path: str, head: str) -> float:
    """Share of the per-document CPU time of ``neardup fingerprint`` (beyond its run on the
    first documents, which pays the one-time costs: imports, loading kernels and tables) spent
    outside the read and fingerprint kernels, i.e. under the GIL."""
    env = {**os.environ, "PYTHONPATH": src}
    res = []
    for p in (path, head):
        with tempfile.TemporaryDirectory(prefix="neardup-bench-") as out:
            _, argv = argv_for("fingerprint", p, out, 1)
            res.append(child("--gil-child", argv, env, "measuring the GIL share"))
    work = res[0]["cpu"] - res[1]["cpu"]
    return (work - (res[0]["kernels"] - res[1]["kernels"])) / work


def breakdown(src: str, command: str, path: str) -> None:
    env = {**os.environ, "PYTHONPATH": src}
    with tempfile.TemporaryDirectory(prefix="neardup-bench-") as out:
        setup, timed = argv_for(command, path, out, 1)
        if setup:
            subprocess.run(
                [sys.executable, "-m", "neardup", *setup], env=env, check=True, capture_output=True
            )
        res = child("--profile-child", timed, env, f"profiling {command}")
    total = sum(res["counts"].values()) or 1
    top = sorted(res["counts"].items(), key=lambda kv: -kv[1])[:8]
    parts = ", ".join(f"{name} {n / total:.0%}" for name, n in top)
    print(f"  {command} ({res['wall']:.1f} s in process): {parts}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--docs", type=int, default=300_000, help="documents (default 300000)")
    ap.add_argument("--threads", default="1,2", help="thread counts (default 1,2)")
    ap.add_argument(
        "--commands", default=",".join(COMMANDS), help="subset of " + ",".join(COMMANDS)
    )
    ap.add_argument("--repeat", type=int, default=3, help="median of N timings (default 3)")
    ap.add_argument("--baseline", default=None, help="another checkout's src directory (A/B)")
    ap.add_argument("--escaped", action="store_true", help="non-ASCII text as \\u escapes")
    ap.add_argument("--parquet", action="store_true", help="the corpus as a Parquet file")
    ap.add_argument("--row-group-rows", type=int, default=None, help="Parquet row group size")
    ap.add_argument("--breakdown", action="store_true", help="where the main thread's time goes")
    ap.add_argument("--workdir", default=None, help="where the corpus is kept (default tmp)")
    ap.add_argument("--profile-child", default=None, help=argparse.SUPPRESS)
    ap.add_argument("--gil-child", default=None, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.profile_child:
        profile_child(json.loads(args.profile_child))
        return
    if args.gil_child:
        gil_child(json.loads(args.gil_child))
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
    one_doc = os.path.join(workdir, "one.jsonl")
    head = os.path.join(workdir, "head.jsonl")
    with open(path, "rb") as f, open(one_doc, "wb") as g, open(head, "wb") as h:
        g.write(f.readline())
        f.seek(0)
        h.writelines(itertools.islice(f, 2000))
    if args.parquet:
        path, one_doc = as_parquet(path, args.row_group_rows), as_parquet(one_doc)
    for src in versions.values():  # compile / load the cached kernels of each version
        for command in commands:
            run_once(src, command, one_doc, 1)
            run_once(src, command, path, 1)
    runs: dict[tuple[str, str, int], list[tuple[float, float]]] = {}
    for _ in range(args.repeat):
        for t in threads:
            runs.setdefault(("control", "", t), []).append(control(t))
        for command in commands:
            for name, src in versions.items():
                runs.setdefault((name, command, 0), []).append(run_once(src, command, one_doc, 1))
            for t in threads:
                for name, src in versions.items():
                    runs.setdefault((name, command, t), []).append(run_once(src, command, path, t))
    load = os.getloadavg()[0]
    print(f"{os.cpu_count()} cores; median of {args.repeat}; load average {load:.1f} at the end")
    print()
    print("| command | version | threads | seconds | documents/s | parallel efficiency "
          "| cores used | documents per CPU second | start-up s | documents/s after start-up "
          "| vs baseline |")  # fmt: skip
    print("|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    med = statistics.median
    for t in threads:
        walls = [w for w, _ in runs["control", "", t]]
        eff = med(w for w, _ in runs["control", "", threads[0]]) * threads[0] / (t * med(walls))
        print(f"| control: GIL-free busy loop | | {t} | {med(walls):.2f} | | "
              f"{eff:.2f} | | | | | |")  # fmt: skip
    for command in commands:
        for t in threads:
            for name in versions:
                walls = [w for w, _ in runs[name, command, t]]
                cpus = [c for _, c in runs[name, command, t]]
                wall = med(walls)
                one = med(w for w, _ in runs[name, command, threads[0]])
                eff = f"{one * threads[0] / (t * wall):.2f}" if t != threads[0] else ""
                used = med(c / w for w, c in zip(walls, cpus, strict=True))
                start = med(w for w, _ in runs[name, command, 0])
                vs = ""
                if name != "baseline" and "baseline" in versions:
                    vs = f"{med(w for w, _ in runs['baseline', command, t]) / wall:.2f}x"
                print(f"| {command} | {name} | {t} | {wall:.2f} | {args.docs / wall:,.0f} | "
                      f"{eff} | {used:.2f} | {args.docs / med(cpus):,.0f} | {start:.2f} | "
                      f"{args.docs / max(wall - start, 1e-9):,.0f} | {vs} |")  # fmt: skip
    print()
    for name, src in versions.items():
        if args.parquet:
            break  # the share is measured on JSONL only
        share = statistics.median(gil_share(src, path, head) for _ in range(args.repeat))
        print(f"{name}: {share:.1%} of the per-document CPU time of `neardup fingerprint` at 1 "
              f"thread is under the GIL (outside the read and fingerprint kernels): at most "
              f"{1 / share:.1f}x its 1-thread speed on any number of threads")  # fmt: skip
    if args.breakdown:
        for name, src in versions.items():
            print(f"\nmain thread at 1 thread, {name}:")
            for command in commands:
                breakdown(src, command, path)


if __name__ == "__main__":
    main()

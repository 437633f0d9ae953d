"""Fingerprint throughput: MB/s of UTF-8 text and documents/s, by preset, input and threads.

Two inputs of real text from this machine:

``ascii``
    Mostly ASCII: man pages, license and documentation files, Python sources (bench/corpus.py).
``multilingual``
    Mostly non-ASCII: the translated messages of the gettext catalogs installed here
    (``/usr/share/locale/*/LC_MESSAGES/*.mo`` and vim's), one document per catalog, keeping the
    catalogs whose characters are mostly non-ASCII (Cyrillic, CJK, Greek, Georgian, Indic,
    Thai, Arabic, Hebrew, ... scripts), then the translated man pages of such languages.

For each preset (``reference``, ``default``), input and thread count it reports the median of
``--repeat`` timings of ``Fingerprinter(preset).fingerprint_many(texts, threads=t)`` (repeats
interleaved across settings), the parallel efficiency ``T(1) / (t * T(t))`` and the cores used
(process CPU time / wall time: below ``t`` where threads wait, on the GIL or for a core another
process holds), and the share of the 1-thread time spent under the GIL. With ``--simhash-python`` (a Python with the PyPI
package ``simhash``, in an environment with numpy<2) the PyPI peer runs on a sample of the ASCII
input (one process per core; documents on which it fails are counted and left out).

With ``--keys`` it also times ``features_many`` (fingerprints and shingle keys, what a
verified dedup runs). With ``--baseline SRC`` (another checkout's ``src`` directory) it compares
the two versions instead: ``--repeat`` rounds, each running one process per version one after
the other (the whole input fingerprinted once before timing, so nothing compiles in a timing),
and prints the median 1-thread MB per CPU second of each with their ratio.

Usage::

    python bench/fingerprint.py [--mb 100] [--threads 1,2,4,8,16] [--inputs ascii,multilingual]
    python bench/fingerprint.py --baseline ../main/src --keys --mb 20 --repeat 5
"""

from __future__ import annotations

import argparse
import gettext
import glob
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor

from numba import njit

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from corpus import _read, bench_documents  # noqa: E402

from neardup.config import default_threads  # noqa: E402
from neardup.fingerprints import Fingerprinter  # noqa: E402

PEER = r"""
import json, sys, time
from simhash import Simhash
texts = [json.loads(l) for l in open(sys.argv[1], encoding="utf-8")]
failed = 0
t = time.perf_counter()
for x in texts:
    try:
        Simhash(x).value
    except Exception:
        failed += 1
print(json.dumps({"seconds": time.perf_counter() - t, "failed": failed}))
"""

# translated man pages in languages written mostly outside ASCII
_MAN_LANGS = ("ja", "ko", "ru", "uk", "zh_CN", "zh_TW", "sr")


def _non_ascii_share(text: str) -> float:
    letters = [c for c in text if c.isalpha()]
    return sum(1 for c in letters if ord(c) > 127) / max(1, len(letters))


def catalog_text(path: str) -> str | None:
    """The translated messages of a gettext ``.mo`` catalog, one per line."""
    try:
        with open(path, "rb") as f:
            catalog = gettext.GNUTranslations(f)._catalog  # type: ignore[attr-defined]
    except (OSError, UnicodeDecodeError, ValueError, LookupError):
        return None
    return "\n".join(v for v in catalog.values() if isinstance(v, str) and v)


def multilingual_documents(megabytes: float) -> list[str]:
    """Mostly non-ASCII real text: gettext catalogs, then translated man pages (in sorted order,
    cycling until ``megabytes`` MB of UTF-8)."""
    paths = sorted(glob.glob("/usr/share/locale/*/LC_MESSAGES/*.mo"))
    paths += sorted(glob.glob("/usr/share/vim/vim*/lang/*/LC_MESSAGES/*.mo"))
    docs = []
    for p in paths:
        text = catalog_text(p)
        if text and _non_ascii_share(text) >= 0.5:
            docs.append(text)
    for lang in _MAN_LANGS:
        for p in sorted(glob.glob(f"/usr/share/man/{lang}/**/*.gz", recursive=True)):
            text = _read(p)
            if text and _non_ascii_share(text) >= 0.5:
                docs.append(text)
    if not docs:
        raise SystemExit("no mostly non-ASCII text found (gettext catalogs, translated man pages)")
    out, total, need = [], 0, megabytes * 1e6
    while total < need:
        for d in docs:
            out.append(d)
            total += len(d.encode("utf-8"))
            if total >= need:
                break
    return out


def run_peer(python: str, texts: list[str], procs: int) -> tuple[float, int]:
    """Wall seconds for ``procs`` processes each fingerprinting its share; failed documents."""
    with tempfile.TemporaryDirectory() as tmp:
        files = []
        for k in range(procs):
            path = os.path.join(tmp, f"part{k}.jsonl")
            with open(path, "w", encoding="utf-8") as f:
                for t in texts[k::procs]:
                    f.write(json.dumps(t) + "\n")
            files.append(path)
        t0 = time.perf_counter()
        ps = [subprocess.Popen([python, "-c", PEER, p], stdout=subprocess.PIPE) for p in files]
        outs = [json.loads(p.communicate()[0]) for p in ps]
        wall = time.perf_counter() - t0
        # the interpreter start-up is not part of the work: use the slowest worker's own timing
        return max(o["seconds"] for o in outs) or wall, sum(o["failed"] for o in outs)


def gil_share(fp: Fingerprinter, texts: list[str], cpu_one_thread: float) -> float:
    """Share of the 1-thread CPU time spent under the GIL preparing the text: copying each
    chunk's text into the kernels' buffers, or for earlier versions (without
    ``batch.encode_chunk``) normalizing and encoding each document in Python."""
    t = time.process_time()
    try:
        from neardup.fingerprints.batch import encode_chunk, plan_chunks
    except ImportError:  # earlier versions: per-document Python preparation
        for i, d in enumerate(texts):
            fp._bytes(d, i)  # type: ignore[attr-defined]
    else:
        for a, b in plan_chunks(texts, 1):
            encode_chunk(texts[a:b], a, True)
    return (time.process_time() - t) / cpu_one_thread


@njit(nogil=True)
def _spin(n: int) -> int:
    s = 0
    for i in range(n):
        s = (s * 31 + i) % 1000003
    return s


def control(threads: int, n: int = 30_000_000) -> None:
    """A fixed amount of GIL-free work split over ``threads`` threads: how well this machine
    lets any code scale at the moment (other processes share its cores)."""
    with ThreadPoolExecutor(threads) as pool:
        list(pool.map(_spin, [n // threads] * threads))


def median_table(runs: dict, size_mb: float, name: str, threads: list[int]) -> list[tuple]:
    """Rows (what, input, threads, MB/s, MB per CPU s, efficiency, cores used) from
    ``runs[(what, t)] = [(wall, cpu), ...]``."""
    rows = []
    for what in dict.fromkeys(k[0] for k in runs):
        one = statistics.median(w for w, _ in runs[what, 1]) if (what, 1) in runs else None
        for t in threads:
            wall = statistics.median(w for w, _ in runs[what, t])
            cpu = statistics.median(c for _, c in runs[what, t])
            eff = f"{one / (t * wall):.2f}" if one else ""
            mbs = size_mb / wall if size_mb else 0.0
            per_cpu = size_mb / cpu if size_mb else 0.0
            rows.append((what, name, t, mbs, per_cpu, eff, cpu / wall))
    return rows


def _inputs(names: str, mb: float) -> dict[str, list[str]]:
    out = {}
    for name in names.split(","):
        if name not in ("ascii", "multilingual"):
            raise SystemExit(f"unknown input {name!r}; use ascii or multilingual")
        out[name] = list(bench_documents(mb)) if name == "ascii" else multilingual_documents(mb)
    return out


def ab_worker(args: argparse.Namespace) -> None:
    """One version's 1-thread MB per CPU second of every setting, as a JSON line."""
    figures = {}
    for name, texts in _inputs(args.inputs, args.mb).items():
        size = sum(len(t.encode("utf-8")) for t in texts) / 1e6
        for p in args.presets.split(","):
            fp = Fingerprinter(p)
            calls = ["fingerprint_many"] + (["features_many"] if args.keys else [])
            for call in calls:
                getattr(fp, call)(texts, threads=1)  # compile / load every kernel it needs
            for call in calls:
                c0 = time.process_time()
                getattr(fp, call)(texts, threads=1)
                figures[f"{name}, {p}, {call}"] = size / (time.process_time() - c0)
    print(json.dumps(figures))


def ab(args: argparse.Namespace) -> None:
    """Median 1-thread MB per CPU second of ``--baseline`` and of this checkout, interleaved."""
    here = [a for a in sys.argv[1:] if not a.startswith("--baseline") and a != args.baseline]
    pythonpath = os.pathsep.join(filter(None, [args.baseline, os.environ.get("PYTHONPATH")]))
    versions = {"baseline": dict(os.environ, PYTHONPATH=pythonpath), "this": dict(os.environ)}
    got: dict[str, list[dict[str, float]]] = {v: [] for v in versions}
    for _ in range(args.repeat):
        for v, env in versions.items():
            r = subprocess.run(
                [sys.executable, os.path.abspath(__file__), "--ab-worker", *here],
                env=env, capture_output=True, text=True, check=True,
            )  # fmt: skip
            got[v].append(json.loads(r.stdout.strip().splitlines()[-1]))
    print(f"1 thread, MB per CPU second, median of {args.repeat} rounds; baseline {args.baseline}")
    print("| setting | baseline | this | this / baseline |\n|---|---:|---:|---:|")
    for key in got["this"][0]:
        b = statistics.median(f[key] for f in got["baseline"])
        a = statistics.median(f[key] for f in got["this"])
        print(f"| {key} | {b:.1f} | {a:.1f} | {a / b:.3f} |")
    print(f"load average {' '.join(f'{x:.2f}' for x in os.getloadavg())}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--mb", type=float, default=100.0, help="MB of text per input (default 100)")
    ap.add_argument("--threads", default=None, help="thread counts, e.g. 1,2,4 (default 1,cores)")
    ap.add_argument("--inputs", default="ascii,multilingual", help="ascii and/or multilingual")
    ap.add_argument("--presets", default="reference,default")
    ap.add_argument("--repeat", type=int, default=3, help="median of N timings (default 3)")
    ap.add_argument("--simhash-python", default="/tmp/simhash-venv/bin/python")
    ap.add_argument("--simhash-mb", type=float, default=4.0, help="MB given to the PyPI peer")
    ap.add_argument("--keys", action="store_true", help="also time features_many")
    ap.add_argument("--baseline", metavar="SRC", help="compare with another checkout's src")
    ap.add_argument("--ab-worker", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.ab_worker:
        return ab_worker(args)
    if args.baseline:
        return ab(args)

    ncores = default_threads()
    threads = [int(x) for x in args.threads.split(",")] if args.threads else sorted({1, ncores})
    rows = []
    inputs: dict[str, list[str]] = {}
    _spin(10)
    for name in args.inputs.split(","):
        t0 = time.perf_counter()
        texts = list(bench_documents(args.mb)) if name == "ascii" else None
        if name == "multilingual":
            texts = multilingual_documents(args.mb)
        if texts is None:
            raise SystemExit(f"unknown input {name!r}; use ascii or multilingual")
        inputs[name] = texts
        size = sum(len(t.encode("utf-8")) for t in texts)
        ascii_chars = sum(len(t.encode("ascii", "ignore")) for t in texts)
        non_ascii = sum(not t.isascii() for t in texts)
        print(
            f"input {name}: {len(texts)} documents, {size / 1e6:.1f} MB of UTF-8, "
            f"{1 - ascii_chars / size:.0%} of the bytes in non-ASCII characters, "
            f"{non_ascii} documents not pure ASCII (loaded in {time.perf_counter() - t0:.0f} s)"
        )
        presets = args.presets.split(",")
        fps = {p: Fingerprinter(p) for p in presets}
        for fp in fps.values():
            fp.fingerprint_many(texts[:50])  # compile / load the cached kernels
            if args.keys:
                fp.features_many(texts[:50])
        # repeats interleaved across settings (a shared machine's load changes over time)
        runs: dict[tuple[str, int], list[tuple[float, float]]] = {}
        ctl: dict[tuple[str, int], list[tuple[float, float]]] = {}
        for _ in range(args.repeat):
            for p in presets:
                for t in threads:
                    c0, t0 = time.process_time(), time.perf_counter()
                    fps[p].fingerprint_many(texts, threads=t)
                    wall, cpu = time.perf_counter() - t0, time.process_time() - c0
                    runs.setdefault((f"neardup {p}", t), []).append((wall, cpu))
                    if args.keys:
                        c0, t0 = time.process_time(), time.perf_counter()
                        fps[p].features_many(texts, threads=t)
                        wall, cpu = time.perf_counter() - t0, time.process_time() - c0
                        runs.setdefault((f"neardup {p} + keys", t), []).append((wall, cpu))
            for t in threads:
                c0, t0 = time.process_time(), time.perf_counter()
                control(t)
                wall, cpu = time.perf_counter() - t0, time.process_time() - c0
                ctl.setdefault(("control: GIL-free busy loop", t), []).append((wall, cpu))
        rows += median_table(runs, size / 1e6, name, threads)
        rows += median_table(ctl, 0.0, name, threads)
        for p in presets:
            if (f"neardup {p}", 1) in runs:
                cpu_one = statistics.median(c for _, c in runs[f"neardup {p}", 1])
                share = gil_share(fps[p], texts, cpu_one)
                print(
                    f"  {p}: {share:.1%} of the 1-thread CPU time under the GIL (preparing "
                    f"text): at most {1 / share:.1f}x the 1-thread speed on any number of threads"
                )
    print(f"{ncores} cores usable; threads {threads}; median of {args.repeat}")

    python = args.simhash_python
    if python and os.path.exists(python) and "ascii" in inputs:
        sample, size = [], 0
        for t in inputs["ascii"]:
            sample.append(t)
            size += len(t.encode("utf-8"))
            if size >= args.simhash_mb * 1e6:
                break
        for procs in sorted({1, ncores}):
            secs, failed = run_peer(python, sample, procs)
            note = f"{size / 1e6:.1f} MB sample" + (f", {failed} docs failed" if failed else "")
            rows.append(("PyPI simhash 2.1.2", note, procs, size / 1e6 / secs, 0.0, "", 0.0))

    print()
    print(
        "| fingerprinter | input | threads | MB/s | MB per CPU second | parallel efficiency "
        "| cores used |"
    )
    print("|---|---|---:|---:|---:|---:|---:|")
    for what, inp, t, mbs, per_cpu, eff, used in rows:
        mbs_col = f"{mbs:.1f}" if mbs else ""
        cpu_col = f"{per_cpu:.1f}" if per_cpu else ""
        cores = f"{used:.2f}" if used else ""
        print(f"| {what} | {inp} | {t} | {mbs_col} | {cpu_col} | {eff} | {cores} |")


if __name__ == "__main__":
    main()

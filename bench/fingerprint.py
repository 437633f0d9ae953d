"""Fingerprint throughput: MB/s of UTF-8 text and documents/s, one core and all cores.

Runs, side by side on the same documents (real text from this machine, see bench/corpus.py):
neardup's ``reference`` and ``default`` presets with 1 thread and with all threads, and the PyPI
package ``simhash`` (defaults, one process per core) when ``--simhash-python`` names a Python
that has it (give that environment numpy<2; documents on which it fails are counted and left
out). The peer sees a sample (``--simhash-mb``) because it is ~50x slower.

Usage::

    python bench/fingerprint.py [--mb 100] [--simhash-python /tmp/simhash-venv/bin/python]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from corpus import bench_documents  # noqa: E402

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


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--mb", type=float, default=100.0, help="MB of text (default 100)")
    ap.add_argument("--simhash-python", default="/tmp/simhash-venv/bin/python")
    ap.add_argument("--simhash-mb", type=float, default=4.0, help="MB given to the PyPI peer")
    ap.add_argument("--repeat", type=int, default=1, help="best of N timings")
    args = ap.parse_args()

    t0 = time.perf_counter()
    texts = list(bench_documents(args.mb))
    mb = sum(len(t.encode("utf-8")) for t in texts) / 1e6
    ncores = default_threads()
    print(
        f"corpus: {len(texts)} documents, {mb:.1f} MB of UTF-8 text "
        f"(loaded in {time.perf_counter() - t0:.0f} s); {ncores} cores"
    )
    rows = []
    for preset in ("reference", "default"):
        fp = Fingerprinter(preset)
        fp.fingerprint_many(texts[:50])  # compile / load the cached kernels
        for threads in (1, ncores):
            best = float("inf")
            for _ in range(args.repeat):
                t = time.perf_counter()
                fp.fingerprint_many(texts, threads=threads)
                best = min(best, time.perf_counter() - t)
            rows.append((f"neardup {preset}", threads, mb / best, len(texts) / best, ""))

    python = args.simhash_python
    if python and os.path.exists(python):
        sample, size = [], 0
        for t in texts:
            sample.append(t)
            size += len(t.encode("utf-8"))
            if size >= args.simhash_mb * 1e6:
                break
        smb = size / 1e6
        for procs in (1, ncores):
            secs, failed = run_peer(python, sample, procs)
            note = f"{smb:.1f} MB sample" + (f", {failed} docs failed" if failed else "")
            rows.append(("PyPI simhash 2.1.2", procs, smb / secs, len(sample) / secs, note))
    else:
        print("PyPI simhash: skipped (no --simhash-python interpreter)")

    print()
    print("| fingerprinter | cores | MB/s | documents/s | note |")
    print("|---|---|---|---|---|")
    for name, cores, mbs, dps, note in rows:
        print(f"| {name} | {cores} | {mbs:.1f} | {dps:,.0f} | {note} |")
    peer1 = next((r[2] for r in rows if r[0].startswith("PyPI") and r[1] == 1), None)
    if peer1:
        for name, cores, mbs, _, _ in rows:
            if name.startswith("neardup") and cores == 1:
                print(f"{name}, 1 core: {mbs / peer1:.0f}x PyPI simhash (1 core)")


if __name__ == "__main__":
    main()

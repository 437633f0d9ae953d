"""Peak memory of each command per fingerprint or per document (the README's *Memory* table).

Each command runs twice in its own process, on a small and a large generated input; the
difference of the two peak RSS figures divided by the difference in size is the memory the
command needs per item, without the interpreter and the loaded libraries (which the small run's
peak shows). Fingerprints are random 64-bit values (few pairs); documents are JSONL lines of 60
random words (~420 bytes of text) with string ids.

    python bench/memory.py [--fps 1e6,4e6] [--docs 1e5,4e5]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile

import numpy as np

BIN = os.path.dirname(sys.executable)

PEAK = (
    "import resource, subprocess, sys; subprocess.run(sys.argv[1:], check=True, "
    "stdout=subprocess.DEVNULL); print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)"
)


def peak_mb(cmd: list[str]) -> float:
    """Peak RSS (MB) of one command run in its own process."""
    out = subprocess.run([sys.executable, "-c", PEAK, *cmd], capture_output=True, text=True)
    if out.returncode != 0:
        raise SystemExit(f"{' '.join(cmd)} failed: {out.stderr.strip()}")
    return int(out.stdout.strip()) / 1024


def write_fps(path: str, n: int) -> None:
    rng = np.random.default_rng(n)
    v = rng.integers(0, 2**64, n, dtype=np.uint64, endpoint=False)
    with open(path, "w") as f:
        f.write("\n".join(map(str, v.tolist())) + "\n")


def write_docs(path: str, n: int) -> None:
    rng = np.random.default_rng(n)
    words = np.array([f"w{i}" for i in range(20000)])
    with open(path, "w") as f:
        for i in range(n):
            text = " ".join(words[rng.integers(0, len(words), 60)].tolist())
            f.write(json.dumps({"id": f"doc-{i}", "text": text}) + "\n")


def commands(tmp: str, fps: str, docs: str) -> dict[str, list[str]]:
    ix = os.path.join(tmp, "ix")
    out = os.path.join(tmp, "out")
    nd = os.path.join(BIN, "neardup")
    return {
        "simhash-find-all": [os.path.join(BIN, "simhash-find-all"), "-q", "-i", fps, "-o", out],
        "simhash-find-clusters": [
            os.path.join(BIN, "simhash-find-clusters"), "-q", "-i", fps, "-o", out
        ],
        "neardup find-all": [nd, "find-all", fps, "-q", "-o", out],
        "neardup clusters": [nd, "clusters", fps, "-q", "-o", out],
        "neardup index add --fingerprints (distance 3)": [
            nd, "index", "add", ix, "--fingerprints", fps, "-q"
        ],
        "neardup index query --fingerprints": [
            nd, "index", "query", ix, "--fingerprints", fps, "-q", "-o", out
        ],
        "neardup fingerprint": [nd, "fingerprint", docs, "-q", "-o", out],
        "neardup dedup": [nd, "dedup", docs, "-q", "-o", out + ".jsonl"],
    }  # fmt: skip


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--fps", default="1e6,4e6", help="two fingerprint counts")
    ap.add_argument("--docs", default="1e5,4e5", help="two document counts")
    args = ap.parse_args()
    nf = [int(float(x)) for x in args.fps.split(",")]
    nds = [int(float(x)) for x in args.docs.split(",")]
    rows: dict[str, list[float]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        for k in range(2):
            fps, docs = os.path.join(tmp, f"fps{k}.txt"), os.path.join(tmp, f"docs{k}.jsonl")
            write_fps(fps, nf[k])
            write_docs(docs, nds[k])
            for name, cmd in commands(tmp, fps, docs).items():
                if name.startswith("neardup index add"):
                    shutil.rmtree(os.path.join(tmp, "ix"), ignore_errors=True)
                    subprocess.run(
                        [os.path.join(BIN, "neardup"), "index", "create", os.path.join(tmp, "ix"),
                         "--distance", "3", "--expected-size", str(nf[k])],
                        check=True, capture_output=True,
                    )  # fmt: skip
                rows.setdefault(name, []).append(peak_mb(cmd))
            os.unlink(fps)
            os.unlink(docs)
    print(f"| command | peak MB at {nf[0]:,} / {nf[1]:,} fps or {nds[0]:,} / {nds[1]:,} docs "
          "| bytes per item |")  # fmt: skip
    print("|---|---|---:|")
    for name, (a, b) in rows.items():
        n0, n1 = nds if name in ("neardup fingerprint", "neardup dedup") else nf
        per = (b - a) * 1024 * 1024 / (n1 - n0)
        print(f"| {name} | {a:,.0f} / {b:,.0f} | {per:,.0f} |")


if __name__ == "__main__":
    main()

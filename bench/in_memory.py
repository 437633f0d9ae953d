"""In-memory dedup (``neardup.dedup(list_of_texts)``, pandas, pyarrow): this checkout against
another (``--other-src``: the commit before in-memory data ran the stages), in one command.

Each run is its own process: it reads the generated corpus (:func:`scale.write_docs`: 60-word
documents, a share of them near-copies) into memory as ``--as`` (a list of ``str``, a pandas
DataFrame or a pyarrow Table), then times ``neardup.dedup(data)`` alone (verified, the
defaults; ``--no-verify`` too), and reports the wall of that call (of up to 1,000 texts: the
median of 51 calls), the process's peak RSS (texts included, the same in both) and whether
both checkouts kept the same documents. Ratios are this checkout's figure over the other's,
median of ``--repeat`` paired runs.

    python bench/in_memory.py --docs 5 --docs 1e5 --docs 1e6 --other-src OTHER_CHECKOUT/src
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from scale import write_docs  # noqa: E402

CHILD = r"""
import hashlib, json, resource, sys, time
import numpy as np
import neardup
path, kind, verify = sys.argv[1], sys.argv[2], sys.argv[3] == "1"
with open(path) as f:
    rows = [json.loads(line) for line in f]
texts = [r["text"] for r in rows]
if kind == "pandas":
    import pandas as pd
    data = pd.DataFrame({"text": texts})
elif kind == "arrow":
    import pyarrow as pa
    data = pa.table({"text": texts})
else:
    data = texts
neardup.dedup(data[:2] if kind == "list" else data.iloc[:2] if kind == "pandas" else data.slice(0, 2),
              verify=verify)  # kernels loaded (compiled on a first run): not timed
walls = []
for _ in range(1 if len(texts) > 1000 else 51):  # a small call: the median of 51
    t0 = time.perf_counter()
    r = neardup.dedup(data, verify=verify)
    walls.append(time.perf_counter() - t0)
wall = sorted(walls)[len(walls) // 2]
kept = hashlib.sha256(np.packbits(r.kept).tobytes()).hexdigest()
rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
print(json.dumps({"wall": wall, "rss_mb": rss, "kept": kept, "dropped": int(r.n_dropped)}))
"""


def child(path: str, kind: str, verify: bool, src: str | None) -> dict:
    """One timed call in its own process (``src``: import neardup from there)."""
    env = dict(os.environ, PYTHONPATH=os.path.abspath(src)) if src else None
    out = subprocess.run([sys.executable, "-c", CHILD, path, kind, "1" if verify else "0"],
                         check=True, env=env, capture_output=True, text=True)  # fmt: skip
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--docs", action="append", type=float, help="corpus sizes (repeatable)")
    ap.add_argument("--other-src", required=True, help="the other checkout's src directory")
    ap.add_argument("--as", dest="kind", default="list", choices=("list", "pandas", "arrow"))
    ap.add_argument("--dups", type=float, default=0.1)
    ap.add_argument("--repeat", type=int, default=3)
    ns = ap.parse_args()
    print(
        "| documents | as | verify | wall (this / other) | ratio | peak RSS MB | ratio | same kept |"
    )
    print("|---:|---|---|---:|---:|---:|---:|---|")
    with tempfile.TemporaryDirectory() as tmp:
        for n in [int(d) for d in ns.docs or [1e5]]:
            path = os.path.join(tmp, f"docs-{n}.jsonl")
            write_docs(path, n, ns.dups)
            for verify in (True, False):
                mine, other = [], []
                for _ in range(ns.repeat):  # paired, alternating
                    mine.append(child(path, ns.kind, verify, None))
                    other.append(child(path, ns.kind, verify, ns.other_src))
                w1, w2 = (statistics.median(x["wall"] for x in r) for r in (mine, other))
                m1, m2 = (statistics.median(x["rss_mb"] for x in r) for r in (mine, other))
                same = {x["kept"] for x in mine + other}
                unit, k = ("ms", 1e3) if w2 < 0.1 else ("s", 1)
                print(f"| {n:,} | {ns.kind} | {'yes' if verify else 'no'} | {w1 * k:.3g} {unit} / "
                      f"{w2 * k:.3g} {unit} | {w1 / w2:.2f}x | {m1:,.0f} / {m2:,.0f} | {m1 / m2:.2f}x | "
                      f"{'yes' if len(same) == 1 else 'NO'} |", flush=True)  # fmt: skip


if __name__ == "__main__":
    main()

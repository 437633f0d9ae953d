"""What each dedup drops on real text, against exact truth: neardup's two candidate generators
beside datatrove's MinHash dedup and rensa, in one run.

The corpus is real text from this machine (licence and copyright files, man pages, Python
docstrings: bench/verify_data.py), written as JSONL. The truth is every pair of documents whose
word-3-shingle sets (the keys neardup verifies with) have Jaccard >= the threshold, found
exactly (bench/verify_data.py's own prefix join, not neardup's). Each tool runs in its own
process on the same file and names the documents it keeps; for each the table shows:

* drops, and their precision: the share of dropped documents that have a kept document at
  Jaccard >= the threshold (a drop with none lost a document that had no near-duplicate kept);
* near-duplicate pairs left: pairs of kept documents at Jaccard >= the threshold (what the
  dedup should have resolved), and the share of the truth's pairs resolved;
* wall seconds and the process's peak RSS.

The peers run with their documented defaults in their own virtual environments, never the
project's: ``--datatrove PYTHON`` (bench/peer_datatrove.py: word 5-grams, 14 bands x 8) and
``--rensa PYTHON`` (``RMinHash(num_perm=128)`` of word 3-grams, ``RMinHashLSH`` of 16 bands,
each new document dropped when a kept one it meets in a band estimates Jaccard >= t, as
bench/dedup.py runs it). Without them their rows are left out, with a line saying so.

    python bench/recall.py                       # about 3,300 documents, J >= 0.8
    python bench/recall.py --datatrove bench/.peers-dt/bin/python \\
        --rensa bench/.peers-rensa/bin/python
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent


def child_neardup(corpus: str, result: str, candidates: str, threshold: float) -> None:
    from neardup import dedup

    t0 = time.perf_counter()
    r = dedup(corpus, output=os.path.join(os.path.dirname(result), f"kept-{candidates}.jsonl"),
              threshold=threshold, candidates=candidates)  # fmt: skip
    wall = time.perf_counter() - t0
    kept = [int(i) for i in r.kept_ids]
    Path(result).write_text(json.dumps({"kept": kept, "wall_s": wall}))


def child_rensa(corpus: str, result: str, threshold: float) -> None:
    sys.path.insert(0, str(HERE))
    from dedup import run_rensa  # bench/dedup.py's streaming RMinHashLSH dedup

    with open(corpus, encoding="utf-8") as f:
        rows = [json.loads(line) for line in f]
    t0 = time.perf_counter()
    dropped = set(run_rensa([r["text"] for r in rows], threshold, 128).tolist())
    wall = time.perf_counter() - t0
    kept = [r["id"] for i, r in enumerate(rows) if i not in dropped]
    Path(result).write_text(json.dumps({"kept": kept, "wall_s": wall}))


#: runs the command given and prints its peak RSS (bytes) last on stderr: a fresh process whose
#: only child is the tool, so that ru_maxrss of its children is the tool's alone
_WRAP = (
    "import resource, subprocess, sys; r = subprocess.run(sys.argv[1:]).returncode; "
    "print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss * 1024, file=sys.stderr); "
    "sys.exit(r)"
)


def _run(cmd: list[str], result: Path) -> dict:
    """One tool's run in a child process: its kept ids, wall and peak RSS."""
    p = subprocess.run([sys.executable, "-c", _WRAP, *cmd], capture_output=True, text=True,
                       check=False)  # fmt: skip
    if p.returncode != 0:
        raise SystemExit(f"{' '.join(cmd[:3])} failed:\n{p.stderr[-3000:]}")
    out = json.loads(result.read_text())
    out["rss"] = int(p.stderr.strip().splitlines()[-1])
    return out


def truth(texts: list[str], threshold: float) -> tuple[np.ndarray, np.ndarray]:
    """(i, j) of every pair at Jaccard >= threshold of the default Fingerprinter's shingles."""
    from verify_data import exact_similar_pairs

    from neardup import Fingerprinter

    f = Fingerprinter().features_many(texts)
    i, j, _ = exact_similar_pairs(f.offsets, f.keys.astype(np.int64), threshold)
    return i, j


def score(kept: np.ndarray, i: np.ndarray, j: np.ndarray) -> dict:
    """Drops' precision and the near-duplicate pairs a kept mask leaves."""
    dropped = ~kept
    covered = np.zeros(len(kept), dtype=bool)  # dropped with a kept near-duplicate
    covered[i[kept[j]]] = True
    covered[j[kept[i]]] = True
    n_drop = int(dropped.sum())
    left = int(np.sum(kept[i] & kept[j]))
    return {"dropped": n_drop, "precision": float((covered & dropped).sum() / n_drop) if n_drop
            else float("nan"), "left": left,
            "resolved": 1 - left / len(i) if len(i) else float("nan")}  # fmt: skip


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--man", type=int, default=2000, help="man pages taken (default 2,000)")
    ap.add_argument("--docstrings", type=int, default=1000, help="docstrings (about)")
    ap.add_argument("--threshold", type=float, default=0.8)
    ap.add_argument("--datatrove", metavar="PYTHON", default=None)
    ap.add_argument("--rensa", metavar="PYTHON", default=None)
    ap.add_argument("--child", nargs=3, default=None, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        tool, corpus, result = args.child
        if tool == "rensa":
            child_rensa(corpus, result, args.threshold)
        else:
            child_neardup(corpus, result, tool, args.threshold)
        return
    sys.path.insert(0, str(HERE))
    from verify_data import verify_documents

    docs = verify_documents(args.man, args.docstrings)
    texts = [t for _, t in docs]
    i, j = truth(texts, args.threshold)
    with tempfile.TemporaryDirectory() as tmp:
        corpus = Path(tmp) / "corpus.jsonl"
        with open(corpus, "w", encoding="utf-8") as f:
            f.writelines(json.dumps({"id": str(k), "text": t}) + "\n" for k, t in enumerate(texts))
        print(f"corpus: {len(texts):,} documents of real text, {corpus.stat().st_size / 1e6:.1f} "
              f"MB; {len(i):,} pairs at Jaccard >= {args.threshold:g} (exact truth)")  # fmt: skip
        rows = {}
        me = [sys.executable, str(Path(__file__).resolve()), "--threshold", str(args.threshold)]
        for tool in ("prefix", "bands", "fingerprint"):
            rows[f"neardup --candidates {tool}"] = _run(
                me + ["--child", tool, str(corpus), f"{tmp}/{tool}.json"],
                Path(f"{tmp}/{tool}.json"),
            )
        if args.rensa:
            rows["rensa RMinHashLSH (128 perm, 16 bands)"] = _run(
                [args.rensa, *me[1:], "--child", "rensa", str(corpus), f"{tmp}/rensa.json"],
                Path(f"{tmp}/rensa.json"),
            )
        if args.datatrove:
            rows["datatrove MinHash (defaults: 5-grams, 14 x 8)"] = _run(
                [args.datatrove, str(HERE / "peer_datatrove.py"), str(corpus), f"{tmp}/dt",
                 f"{tmp}/dt.json"], Path(f"{tmp}/dt.json"),
            )  # fmt: skip
    _table(rows, len(texts), i, j, args)


def _table(rows: dict, n: int, i: np.ndarray, j: np.ndarray, args: argparse.Namespace) -> None:
    print()
    print("| dedup | dropped | drops' precision | near-duplicate pairs left | pairs resolved "
          "| wall s | peak RSS MB |")  # fmt: skip
    print("|---|---:|---:|---:|---:|---:|---:|")
    for name, r in rows.items():
        kept = np.zeros(n, dtype=bool)
        kept[np.asarray(r["kept"], dtype=np.int64)] = True
        s = score(kept, i, j)
        rss = f"{r['rss'] / 1e6:,.0f}"
        print(f"| {name} | {s['dropped']:,} | {s['precision']:.3f} | {s['left']:,} | "
              f"{s['resolved']:.4f} | {r['wall_s']:.2f} | {rss} |")  # fmt: skip
    for peer in ("datatrove", "rensa"):
        if getattr(args, peer) is None:
            print(f"({peer} not run: give --{peer} PYTHON)")


if __name__ == "__main__":
    main()

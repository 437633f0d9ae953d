"""Near-copy families in a staged dedup: what a family of near copies of one page costs when
the run goes as stages over shards, beside the one-process run of the same command.

Corpus (generated, so the truth is known): ``--docs`` documents of 150 words drawn from 50,000
made-up words, every other one a near copy of one of ``--families`` pages (one word replaced, so
each family's copies have Jaccard >= 0.8 with each other), the rest distinct. Each run is
``neardup dedup`` in a process of its own, with the defaults (verified at 0.8, prefix
candidates); staged with ``--shard-docs`` and a work directory. It prints, per run: the wall of
the whole process, the candidate pairs the verify stage read, the family links, the work
directory's bytes, and whether the kept bytes are the one-process run's.

``--before SRC`` also runs the staged command with another checkout's ``src`` directory on
``PYTHONPATH`` (an older neardup, to show what a change did), in the same table.

    python bench/families.py                                   # 10,000 docs, one family
    python bench/families.py --docs 40000 --families 4 --before ../old/src
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent


def corpus(path: Path, docs: int, families: int, words: int = 150, seed: int = 1) -> None:
    """Write the corpus as JSONL (``id``, ``text``)."""
    rng = random.Random(seed)
    vocab = [f"w{i}" for i in range(50_000)]
    pages = [[rng.choice(vocab) for _ in range(words)] for _ in range(max(families, 1))]
    with path.open("w") as f:
        for i in range(docs):
            if i % 2 == 0 and families:
                text = list(pages[(i // 2) % families])
                text[rng.randrange(words)] = f"own{i}"
            else:
                text = [rng.choice(vocab) for _ in range(words)]
            f.write(json.dumps({"id": i, "text": " ".join(text)}) + "\n")


def _stage_rows(work: Path, stage: str, name: str) -> int:
    return sum(len(np.load(p, mmap_mode="r")) for p in work.glob(f"{stage}/*/{name}.npy"))


def _dir_bytes(path: Path) -> int:
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file())


def run(src: Path, out: Path, work: Path | None, shard_docs: int, pythonpath: str | None) -> dict:
    """One ``neardup dedup`` process; its wall and, staged, what its stages held."""
    cmd = [sys.executable, "-m", "neardup", "dedup", str(src), "-o", str(out), "-q"]
    if work is not None:
        cmd += ["--shard-docs", str(shard_docs), "--work-dir", str(work)]
    env = dict(os.environ)
    if pythonpath:
        env["PYTHONPATH"] = pythonpath
    t0 = time.perf_counter()
    subprocess.run(cmd, check=True, env=env)
    row = {"wall": time.perf_counter() - t0, "pairs": "", "links": "", "work": ""}
    if work is not None:
        row.update(pairs=_stage_rows(work, "pairs", "pairs"),
                   links=_stage_rows(work, "pairs", "fam"), work=_dir_bytes(work))  # fmt: skip
    return row


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--docs", type=int, default=10_000)
    ap.add_argument("--families", type=int, default=1, help="pages with near copies")
    ap.add_argument("--shard-docs", type=int, default=1_000)
    ap.add_argument("--before", default=None, help="another checkout's src directory")
    args = ap.parse_args(argv)
    tmp = Path(tempfile.mkdtemp(prefix="families-"))
    try:
        src = tmp / "in.jsonl"
        corpus(src, args.docs, args.families)
        runs = [("one process", None, None), ("staged", "w", str(ROOT / "src"))]
        if args.before:
            runs.append(("staged, --before", "wb", os.path.abspath(args.before)))
        print(f"{args.docs:,} documents, {args.families} famil{'y' if args.families == 1 else 'ies'}"
              f" of {args.docs // 2 // max(args.families, 1):,} near copies, shards of "
              f"{args.shard_docs:,}")  # fmt: skip
        print("| run | wall s | candidate pairs | family links | work dir MB | same bytes |")
        print("|---|---:|---:|---:|---:|---|")
        ref = None
        for name, work, path in runs:
            out = tmp / f"{name.split(',')[0].replace(' ', '-')}-{work}.jsonl"
            row = run(src, out, tmp / work if work else None, args.shard_docs,
                      path or str(ROOT / "src"))  # fmt: skip
            ref = ref or out.read_bytes()
            mb = f"{row['work'] / 1e6:,.0f}" if row["work"] != "" else ""
            print(f"| {name} | {row['wall']:.1f} | {row['pairs']} | {row['links']} | {mb} | "
                  f"{out.read_bytes() == ref} |", flush=True)  # fmt: skip
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()

"""Connected components of verified pairs: the staged dedup's rounds over ranges of positions
(large-star / small-star, ``neardup.pipeline.stage_components``) against one task that holds
every pair (scipy's components, as the staged dedup does where the pairs fit one task).

The graph is what a dedup verifies: ``--docs`` positions, a tenth of them near-copies of an
earlier document (clusters of 2-6, each copy paired with every earlier member), plus chains of
``--chain`` near-copies each (a long diameter, the rounds' hard case). Prints, for each, the
wall time, the rounds, and the most edges one task held (each edge 16 bytes, both ways in the
rounds).

    python bench/components.py --docs 16e6 --ranges 8 --ranges 64
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time

import numpy as np

from neardup.distributed.plan import indexed_components
from neardup.pipeline import staged
from neardup.pipeline.executors import LocalExecutor
from neardup.pipeline.runner import Runner
from neardup.pipeline.task_files import save


def graph(n: int, chain: int, seed: int = 0) -> np.ndarray:
    """Pairs (u < v) of near-copy clusters and chains among ``n`` positions."""
    rng = np.random.default_rng(seed)
    sizes = rng.integers(2, 7, size=n // 40)
    members = rng.permutation(n)[: int(sizes.sum())]
    cuts = np.r_[0, np.cumsum(sizes)]
    pairs = []
    for k in range(2, 7):  # every pair of members of the clusters of k
        at = np.flatnonzero(sizes == k)
        block = np.stack([members[cuts[i] : cuts[i] + k] for i in at]) if len(at) else None
        if block is None:
            continue
        for i in range(k):
            for j in range(i + 1, k):
                pairs.append(np.stack([block[:, i], block[:, j]], axis=1))
    if chain > 1:
        links = rng.permutation(n)[: (n // 100 // chain) * chain].reshape(-1, chain)
        pairs.append(np.stack([links[:, :-1].ravel(), links[:, 1:].ravel()], axis=1))
    e = np.concatenate(pairs).astype(np.int64)
    return np.sort(e, axis=1)


def rounds(work: str, pairs: np.ndarray, n: int, ranges: int, tasks: int) -> dict:
    names = []
    for i, chunk in enumerate(np.array_split(pairs, tasks)):
        os.makedirs(os.path.join(work, "pairs", str(i)))
        save(os.path.join(work, "pairs", str(i)), pairs=chunk)
        names.append(str(i))
    shards = max(ranges, 1)
    sizes = [len(c) for c in np.array_split(np.arange(n), shards)]
    run = staged.StagedRun(work, sizes, [1] * shards)

    class Plan:
        verify = False
        shard_docs = max(1, -(-len(pairs) // ranges))

    r = Runner(work, LocalExecutor(), None)
    t = time.perf_counter()
    staged._components(r, Plan, run, names, len(pairs))  # type: ignore[arg-type]
    wall = time.perf_counter() - t
    most = 0  # the most edges a task of the rounds read: its range's slices of every writer
    for stage in os.listdir(work):
        if stage.startswith(("cc-edges", "cc-large-", "cc-small-")):
            cuts = [np.load(os.path.join(work, stage, t, "c.npy"))
                    for t in os.listdir(os.path.join(work, stage))]  # fmt: skip
            most = max(most, int(np.sum([np.diff(c) for c in cuts], axis=0).max()))
    n_rounds = sum(s.startswith("cc-large-") for s in os.listdir(work))
    return {"wall": wall, "rounds": n_rounds, "most": most}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--docs", type=float, default=4e6)
    ap.add_argument("--ranges", type=int, action="append")
    ap.add_argument("--chain", type=int, default=50)
    ap.add_argument("--tasks", type=int, default=16, help="edge tasks (verify tasks)")
    a = ap.parse_args()
    n = int(a.docs)
    pairs = graph(n, a.chain)
    print(f"{n:,} positions, {len(pairs):,} pairs ({len(pairs) * 16 / 1e6:.0f} MB)")
    t = time.perf_counter()
    nodes, _, _ = indexed_components(pairs)
    one = time.perf_counter() - t
    print(
        f"  one task (scipy)      {one:7.2f} s   holds {len(pairs):,} pairs, {len(nodes):,} nodes"
    )
    for ranges in a.ranges or [8, 64]:
        with tempfile.TemporaryDirectory() as work:
            got = rounds(work, pairs, n, ranges, a.tasks)
        print(f"  {ranges:3d} ranges, rounds   {got['wall']:7.2f} s   {got['rounds']} rounds, "
              f"most edges a task read {got['most']:,} (both ways; {got['most'] / len(pairs):.3f}"
              f" x the pairs)")  # fmt: skip


if __name__ == "__main__":
    main()

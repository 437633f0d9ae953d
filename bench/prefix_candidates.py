"""Prefix candidates per document as the corpus grows, on sets with no near-duplicates at all:
every candidate pair is one that verification must reject.

Each document is a set of ``--keys`` random uint32 shingle keys (as the scan spills them). The
rank counters (``2**bits`` of them, :func:`neardup.core.prefix.rank_counts`) blur the counts
once the corpus holds many keys a counter, so the prefixes stop being the rarest keys; and two
distinct shingles share a uint32 key more often the more keys the corpus holds. With one
shared prefix key making a candidate, both make the random candidates per document grow with
n; with two (the default, ``SHARED_KEYS``), a random pair must collide twice.

    python bench/prefix_candidates.py --docs 1e6 --docs 4e6 --shared 1 --shared 2
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from neardup.core.prefix import COUNT_BITS, SHARED_KEYS, prefix_pairs, prefix_sets, rank_counts
from neardup.core.similarity import ShingleSets


def candidates(
    n: int, keys: int, bits: int, threshold: float, shared: int
) -> tuple[float, float, float]:
    """(prefix keys per document, candidate pairs per document, seconds) for ``n`` random
    sets of ``keys`` keys each, candidates sharing ``shared`` prefix keys."""
    rng = np.random.default_rng(1)
    flat = np.sort(rng.integers(0, 2**32, (n, keys), dtype=np.uint64).astype(np.uint32), axis=1)
    sets = ShingleSets(np.arange(0, n * keys + 1, keys, dtype=np.int64), flat.ravel())
    t0 = time.perf_counter()
    pre = prefix_sets(sets, threshold, rank_counts(sets.keys, bits=bits), shared=shared)
    lengths = np.diff(pre.offsets)
    doc = np.repeat(np.arange(n, dtype=np.int64), lengths)
    at = (np.arange(len(doc)) - pre.offsets[doc]).astype(np.int32)
    pairs = prefix_pairs(pre.keys, doc, at, sets.sizes[doc], threshold, 64, need=shared)
    return float(lengths.mean()), len(pairs) / n, time.perf_counter() - t0


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--docs", action="append", type=float, help="corpus sizes (repeat)")
    ap.add_argument("--bits", action="append", type=int, help="log2 of the rank counters")
    ap.add_argument("--keys", type=int, default=58, help="keys a document (60 words: 58)")
    ap.add_argument("--shared", action="append", type=int, help="shared keys (repeat)")
    ap.add_argument("--threshold", type=float, default=0.8)
    ns = ap.parse_args()
    print("| documents | counters | keys a counter | shared keys | prefix keys "
          "| candidates a document | seconds |")  # fmt: skip
    print("|---:|---:|---:|---:|---:|---:|---:|")
    for n in [int(x) for x in ns.docs or [1e6]]:
        for bits in ns.bits or [COUNT_BITS]:
            for k in ns.shared or [SHARED_KEYS]:
                p, c, sec = candidates(n, ns.keys, bits, ns.threshold, k)
                print(f"| {n:,} | 2^{bits} | {n * ns.keys / 2**bits:,.0f} | {k} | {p:.1f} "
                      f"| {c:.4f} | {sec:.1f} |")  # fmt: skip


if __name__ == "__main__":
    main()

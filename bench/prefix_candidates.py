"""Prefix candidates per document as the corpus grows, on sets with no near-duplicates at all:
every candidate pair is one that verification must reject.

Each document is a set of ``--keys`` random uint32 shingle keys (as the scan spills them). The
rank counters (``2**bits`` of them, :func:`neardup.core.prefix.rank_counts`) blur the counts
once the corpus holds many keys a counter, so the prefixes stop being the rarest keys; and two
distinct shingles share a uint32 key more often the more keys the corpus holds. Both make the
random candidates per document grow with n: the cost the prefix generator adds per document.

    python bench/prefix_candidates.py --docs 1e6 --docs 4e6 --bits 18 --bits 24
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from neardup.core.prefix import COUNT_BITS, prefix_pairs, prefix_sets, rank_counts
from neardup.core.similarity import ShingleSets


def candidates(n: int, keys: int, bits: int, threshold: float) -> tuple[float, float, float]:
    """(prefix keys per document, candidate pairs per document, seconds) for ``n`` random
    sets of ``keys`` keys each."""
    rng = np.random.default_rng(1)
    flat = np.sort(rng.integers(0, 2**32, (n, keys), dtype=np.uint64).astype(np.uint32), axis=1)
    sets = ShingleSets(np.arange(0, n * keys + 1, keys, dtype=np.int64), flat.ravel())
    t0 = time.perf_counter()
    pre = prefix_sets(sets, threshold, rank_counts(sets.keys, bits=bits))
    lengths = np.diff(pre.offsets)
    doc = np.repeat(np.arange(n, dtype=np.int64), lengths)
    at = (np.arange(len(doc)) - pre.offsets[doc]).astype(np.int32)
    pairs = prefix_pairs(pre.keys, doc, at, sets.sizes[doc], threshold, 64)
    return float(lengths.mean()), len(pairs) / n, time.perf_counter() - t0


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--docs", action="append", type=float, help="corpus sizes (repeat)")
    ap.add_argument("--bits", action="append", type=int, help="log2 of the rank counters")
    ap.add_argument("--keys", type=int, default=58, help="keys a document (60 words: 58)")
    ap.add_argument("--threshold", type=float, default=0.8)
    ns = ap.parse_args()
    print("| documents | counters | keys a counter | prefix keys | candidates a document |")
    print("|---:|---:|---:|---:|---:|")
    for n in [int(x) for x in ns.docs or [1e6]]:
        for bits in ns.bits or [COUNT_BITS]:
            p, c, _ = candidates(n, ns.keys, bits, ns.threshold)
            print(f"| {n:,} | 2^{bits} | {n * ns.keys / 2**bits:,.0f} | {p:.1f} | {c:.4f} |")


if __name__ == "__main__":
    main()

"""Every tunable of neardup, in one place (with :func:`_reset` for tests).

Nothing here changes numba's global state. Values are read at call time, so assigning
``neardup.config.NAME = value`` changes later calls; :func:`_reset` restores the defaults.
"""

from __future__ import annotations

import os

# -- search ---------------------------------------------------------------------------------------

#: Default Hamming distance (inclusive) for the search functions and the seed tools.
DEFAULT_DISTANCE = 3

#: Batch search: below this many fingerprints one thread is faster than starting several.
THREADS_FROM = 20_000

#: Largest number of permuted tables a layout may need before it is refused as unusable.
MAX_TABLES = 100_000

# The batch cost model (neardup.core.layout) in nanoseconds per operation of the engine's kernels
# on one core, measured with bench/find_all.py --calibrate on the 2-core benchmark machine (AMD
# EPYC with AVX-512): a counting-sort split of a bucket that fits in cache, the first split of the
# whole input (memory bound), each counter of a split, each tree node visited, each row and each
# pair of a bucket checked pair by pair (a vectorised XOR + popcount).

#: Batch search: fixed cost of one first block (its pass over the input started from Python) (ns).
GROUP_NS = 60_000.0

#: Batch search: split one fingerprint of a bucket that fits in cache (ns).
SPLIT_NS = 2.0

#: Batch search: split one fingerprint of a node larger than the cache (ns).
SPLIT_MEM_NS = 7.0

#: Batch search: one counter of a split (clear, prefix sum, visit the bucket) (ns).
COUNTER_NS = 1.2

#: Batch search: one node of the search tree (call and bookkeeping) (ns).
NODE_NS = 12.0

#: Batch search: one row of a bucket checked pair by pair (ns).
ROW_NS = 2.5

#: Batch search: one pair checked (ns).
PAIR_NS = 0.15

#: Batch search: a scheme of several parts is chosen over one part only when its estimated cost
#: is below this share of the one part's.
SCHEME_MARGIN = 0.9

#: Batch search: share of the available memory the partition buffers may use when neither
#: ``memory=`` nor ``NEARDUP_MEMORY`` says otherwise.
MEMORY_FRACTION = 0.5

# -- index ----------------------------------------------------------------------------------------

#: Most sorted runs (base + delta) an index keeps before an add merges runs.
MAX_SEGMENTS = 8

#: Cost of probing one table for one query, in candidate checks (binary search + call); the
#: index's layout choice weighs it against the candidates a longer prefix saves.
PROBE_COST = 32.0

#: Time of one unit of the query cost model (PROBE_COST units), measured with PermutedTables on
#: 1M fingerprints (batches of 1,000-100,000 queries at distances 3, 6, 8: 9-26 ns) (ns).
PROBE_NS = 15.0

#: Batches of at least this many queries are searched together with an index's fingerprints by
#: the batch engine when the cost model says that is cheaper than probing its tables.
JOIN_FROM = 256

#: Most tables an index layout may have (each costs 8 bytes per fingerprint on disk).
MAX_INDEX_TABLES = 5000

#: Queries per batch above which an index probes its tables on several threads.
PARALLEL_QUERIES = 2048

# -- documents ------------------------------------------------------------------------------------

#: Documents read before each fingerprinting round (the next batch is read meanwhile).
BATCH_DOCS = 16384

#: Rows per batch when copying Parquet rows in dedup's second pass.
PARQUET_BATCH_ROWS = 65536

#: ``neardup fingerprint``: inputs larger than this (bytes, all files) show a progress bar.
PROGRESS_BYTES = 16 << 20

_DEFAULTS = {k: v for k, v in dict(globals()).items() if k.isupper()}


def _reset() -> None:
    """Restore every tunable to its default (tests call this)."""
    globals().update(_DEFAULTS)


def default_threads() -> int:
    """Threads used by batch search: ``NEARDUP_THREADS`` if set, else the usable CPU count."""
    env = os.environ.get("NEARDUP_THREADS")
    if env:
        return max(1, int(env))
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # pragma: no cover - not on Linux
        return max(1, os.cpu_count() or 1)

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

#: Batch search: from this many fingerprints on, threads share each table (one 8-byte key per
#: fingerprint in all) instead of taking whole tables each (one key buffer per thread).
SPLIT_TABLES_FROM = 1 << 21

#: Largest number of permuted tables a layout may need before it is refused as unusable.
MAX_TABLES = 100_000

# The cost model (neardup.core.layout) counts work in candidate checks (xor + popcount + compare).
# Measured with bench/find_all.py --sweep (N = 1M and 10M, distances 3, 6, 8): one fingerprint
# costs about 60 checks per table (build key, sort, and the scan's random gather when runs are
# short), so 10M at distance 6 takes 8 blocks (25.6 s) rather than 9 (67.3 s) and 1M at
# distance 8 takes 10 (8.9 s) rather than 11 (16.1 s). The fixed cost per table keeps tiny
# inputs on ``distance + 1`` blocks, the fastest measured at N = 100..10k.

#: Batch search: cost of one fingerprint in one table (key, sort, scan), in candidate checks.
KEY_COST = 60.0

#: Batch search: fixed cost of one table (allocation, calls), in candidate checks.
TABLE_COST = 20_000.0

# -- index ----------------------------------------------------------------------------------------

#: Most sorted runs (base + delta) an index keeps before an add merges runs.
MAX_SEGMENTS = 8

#: Cost of probing one table for one query, in candidate checks (binary search + call); the
#: index's layout choice weighs it against the candidates a longer prefix saves.
PROBE_COST = 32.0

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

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

# -- service and Redis backend ---------------------------------------------------------------------

#: ``neardup serve``: most fingerprints or texts in one request (a larger batch gets a 413).
SERVE_MAX_BATCH = 100_000

#: ``neardup serve``: largest request body in bytes (a larger one gets a 413).
SERVE_MAX_BODY = 64 << 20

#: ``neardup serve``, local index: queries of at most this many fingerprints run on the event
#: loop itself (tens of microseconds) instead of hopping to the thread pool.
SERVE_INLINE = 64

#: ``neardup serve``, local index: a worker rereads the index's manifest at most this often
#: (seconds), so every worker answers from a commit at most this old (plus one request).
SERVE_REFRESH_S = 0.1

#: Seconds a write waits for the index's single writer (another process's write) before it
#: fails with 503.
SERVE_WRITE_WAIT_S = 30.0

#: Redis index: records per bucket the automatic layout aims at (see the README's measurements).
REDIS_BUCKET_RECORDS = 128

#: Redis index: cost of reading one more bucket in a query, in records scanned (layout choice).
REDIS_READ_COST = 1000.0

#: Redis index: id hashes per index (a power of two), spread over the cluster's nodes.
REDIS_ENTRY_SHARDS = 1024

#: Redis index: commands per pipeline round trip.
REDIS_PIPELINE = 10_000

#: Redis index: seconds a writer's lease lasts (a crashed writer blocks others this long).
REDIS_LOCK_LEASE_S = 60.0

#: Redis index: socket connect and read timeout in seconds.
REDIS_TIMEOUT_S = 5.0

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

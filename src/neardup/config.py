"""Defaults for threads and sizes, in one place. Nothing here changes numba's global state."""

from __future__ import annotations

import os

#: Default Hamming distance (inclusive) for the search functions and the seed tools.
DEFAULT_DISTANCE = 3

#: Batch search: below this many fingerprints one thread is faster than starting several.
THREADS_FROM = 20_000

#: Batch search: from this many fingerprints on, threads share each table (one 8-byte key per
#: fingerprint in all) instead of taking whole tables each (one key buffer per thread).
SPLIT_TABLES_FROM = 1 << 21

#: Largest number of permuted tables a layout may need before it is refused as unusable.
MAX_TABLES = 100_000

#: Fingerprinting: at most this many documents per chunk (one chunk is one kernel call on one
#: thread, after one join and one UTF-8 encoding of its text under the GIL).
FINGERPRINT_CHUNK_DOCS = 2048

#: Fingerprinting: at most this many characters (str) or bytes per chunk...
FINGERPRINT_CHUNK_BYTES = 4 << 20

#: ... but chunks small enough that every thread gets about this many of them, down to
#: FINGERPRINT_CHUNK_MIN_BYTES, so that threads end together.
FINGERPRINT_CHUNKS_PER_THREAD = 4
FINGERPRINT_CHUNK_MIN_BYTES = 256 << 10

#: Fingerprinting: a chunk whose documents average fewer characters than this is joined into
#: one string before it is encoded (one call); larger documents are encoded one by one (one
#: copy less).
FINGERPRINT_JOIN_BELOW = 512


def default_threads() -> int:
    """Threads used by batch search: ``NEARDUP_THREADS`` if set, else the usable CPU count."""
    env = os.environ.get("NEARDUP_THREADS")
    if env:
        return max(1, int(env))
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # pragma: no cover - not on Linux
        return max(1, os.cpu_count() or 1)

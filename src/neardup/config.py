"""What users of neardup tune, in one place (with :func:`_reset` for tests): limits, batch
sizes, the report, the service and the Redis backend. Constants that only the code's authors
adjust live beside the code that reads them (the cost model's calibration in
:mod:`neardup.core.cost`, chunk sizes in the modules that cut the chunks).

Nothing here changes numba's global state. Values are read at call time, so assigning
``neardup.config.NAME = value`` changes later calls; :func:`_reset` restores the defaults.
"""

from __future__ import annotations

import os

# -- search ---------------------------------------------------------------------------------------

#: The three default distances, one per meaning (Hamming distance in bits, inclusive):
#: a search for near matches (find_all, query, find-all, clusters, the seed tools) ...
DEFAULT_DISTANCE = 3
#: ... a fingerprint-only dedup (--no-verify) and an index's distance, for the dedup --against it
#: serves (recall 0.88 on Jaccard >= 0.9 pairs in the evaluation) ...
DEFAULT_DEDUP_DISTANCE = 6
#: ... and, for a verified dedup, the candidate distance of its threshold:
#: neardup.core.similarity.distance_for_threshold(threshold) (10 bits at the default 0.8).

#: Batch search: share of the available memory the partition buffers may use when neither
#: ``memory=`` nor ``NEARDUP_MEMORY`` says otherwise.
MEMORY_FRACTION = 0.5

# -- documents ------------------------------------------------------------------------------------

#: Documents read before each fingerprinting round (the next batch is read meanwhile).
BATCH_DOCS = 16384

#: JSONL and text-line inputs of at least this many bytes in all (stdin counts as large) are
#: read in blocks that a numba kernel parses on every thread; smaller ones line by line in
#: Python, which saves loading (and, on the first run, compiling) that kernel.
READ_KERNEL_FROM = 16 << 20

#: Inputs are read in blocks (JSONL, text lines) or groups of records (other formats) of at
#: most this many bytes, each parsed and fingerprinted by one thread...
READ_BLOCK_BYTES = 4 << 20

#: ... and of at least this many (fewer when that gives every thread several blocks).
READ_BLOCK_MIN_BYTES = 256 << 10

#: ``--progress log``: seconds between two progress lines.
PROGRESS_LOG_SECONDS = 5.0

#: ``neardup dedup``, first run on a machine: compile the search and verification kernels in a
#: second process while this one fingerprints, when threads >= 2 and a CPU is idle for it.
COMPILE_AHEAD = True

#: The Python API's first call on a machine says on stderr that it compiles kernels, and about
#: how long that takes (``neardup: compiling kernels for this machine (first run only, ~9 s)``);
#: False: silent. ``neardup warmup`` compiles them all ahead (for container images).
COMPILE_NOTICE = True

# -- report ---------------------------------------------------------------------------------------

#: Clusters whose kept and dropped texts the HTML report shows side by side (chosen at random).
REPORT_SAMPLE = 30

#: Dropped documents shown against the kept one in each sampled cluster.
REPORT_MEMBERS = 3

#: Characters of each document shown in the report's diffs (longer texts are cut).
REPORT_TEXT_CHARS = 20_000

#: Clusters listed in the report's search index (the page stays small for huge runs).
REPORT_MAX_CLUSTERS = 50_000

# -- service and Redis backend ---------------------------------------------------------------------

#: ``neardup serve``: most fingerprints or texts in one request (a larger batch gets a 413).
SERVE_MAX_BATCH = 100_000

#: ``neardup serve``: largest request body in bytes (a larger one gets a 413).
SERVE_MAX_BODY = 64 << 20

#: ``neardup serve``: seconds a connection may take to send a request's headers, and the idle
#: time after which a kept-alive connection is closed.
SERVE_HEADER_TIMEOUT_S = 10.0

#: ``neardup serve``: most open connections per worker; past it new ones get a 503 (``/health``
#: still answers).
SERVE_MAX_CONNECTIONS = 1000

#: Seconds a write waits for the index's single writer (another process's write) before it
#: fails with 503.
SERVE_WRITE_WAIT_S = 30.0

#: Redis index: id hashes per index (a power of two), spread over the cluster's nodes.
REDIS_ENTRY_SHARDS = 1024

#: Redis index: seconds a writer's lease lasts (a crashed writer blocks others this long).
REDIS_LOCK_LEASE_S = 60.0

#: Redis index: socket connect and read timeout in seconds.
REDIS_TIMEOUT_S = 5.0

#: Remote inputs (fsspec URLs): seconds a connection may take to open, or a read may wait for
#: its next bytes, before the read is retried (``--remote-timeout``; http(s) and s3).
REMOTE_TIMEOUT_S = 60.0


#: Largest record read (bytes): a JSONL or text line, or a whole text file. A larger one is a
#: bad record (reported, skippable with ``--skip-bad``) rather than a reason to run out of memory.
MAX_RECORD_BYTES = 256 << 20

#: Deepest nesting of JSON arrays and objects in one JSONL record; deeper is a bad record (the
#: JSON parser recurses once per level).
MAX_JSON_DEPTH = 256

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

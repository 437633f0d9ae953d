"""Every tunable of neardup, in one place (with :func:`_reset` for tests).

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

#: Batch search: below this many fingerprints one thread is faster than starting several.
THREADS_FROM = 20_000

#: Largest number of permuted tables a layout may need before it is refused as unusable.
MAX_TABLES = 100_000

#: The seed tools answer up to this many distinct fingerprints by numpy brute force
#: (:mod:`neardup.core.small`) and format their output in Python, without loading numba.
SMALL_INPUT = 2048

#: Decimal fingerprint inputs up to this many bytes are parsed in Python (no numba).
SMALL_PARSE_BYTES = 64 << 10

# The batch cost model (neardup.core.cost) in nanoseconds per operation of the engine's kernels
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

# -- fingerprints ---------------------------------------------------------------------------------

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

#: Queries searched at once by ``Index.verified_query`` (bounds the candidate pairs in memory).
VERIFY_QUERY_CHUNK = 65536

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

#: ... and of at least this many, fewer when that gives every thread this many blocks.
READ_BLOCK_MIN_BYTES = 256 << 10
READ_BLOCKS_PER_THREAD = 4

#: Rows per batch when copying Parquet rows in dedup's second pass.
PARQUET_BATCH_ROWS = 65536

#: Documents between two progress callbacks while reading or writing documents.
PROGRESS_EVERY = 256

#: ``--progress bar``: seconds before a bar appears (shorter runs never show one).
PROGRESS_BAR_DELAY = 0.5

#: ``--progress log``: seconds between two progress lines.
PROGRESS_LOG_SECONDS = 5.0

#: ``neardup dedup``, first run on a machine: compile the search and verification kernels in a
#: second process while this one fingerprints, when threads >= 2 and a CPU is idle for it.
COMPILE_AHEAD = True

#: ... and the usable CPUs minus the 1-minute load average is at least this. The second process
#: costs about 1.4 s of CPU (an interpreter, numpy and numba of its own): with a CPU idle it
#: gains more than that, with none the two processes take turns and it is a loss
#: (``bench/startup.py --ahead`` on a shared 2-core machine: a cold dedup of the sample took
#: 5.8 s instead of 6.6 s at load 1.3-2.1, 7.0 s instead of 5.8 s at load 2.7-2.9).
COMPILE_AHEAD_SPARE_CPUS = 1.5

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

#: Dropped documents the report shows nearest the threshold, each against its kept document
#: (lowest Jaccard of a verified run; most bits apart of a fingerprint-only one).
REPORT_BORDERLINE = 12

#: Runs with at most this many documents in clusters embed the texts of every cluster (the first
#: REPORT_EMBED_CHARS characters of each), shown on demand from the search; larger runs show
#: the sampled and borderline clusters' texts only (the page stays small).
REPORT_EMBED_DOCS = 5_000
REPORT_EMBED_CHARS = 2_000

#: Rows of the report's "largest clusters" table.
REPORT_LARGEST = 20

#: Rows of the report's table of documents dropped as seen in an index (``--against``; the
#: search covers them all).
REPORT_INDEX_ROWS = 200

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

#: Redis index: payload bytes per pipeline round trip of a write (bounds a bulk add's buffers).
REDIS_WRITE_BYTES = 16 << 20

#: Redis index: buckets appended by one script call in a write.
REDIS_SCRIPT_KEYS = 1000

#: Redis index: entries written or looked up by one script call in a write.
REDIS_SCRIPT_ITEMS = 20_000

#: Redis index: seconds a writer's lease lasts (a crashed writer blocks others this long).
REDIS_LOCK_LEASE_S = 60.0

#: Redis index: socket connect and read timeout in seconds.
REDIS_TIMEOUT_S = 5.0

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

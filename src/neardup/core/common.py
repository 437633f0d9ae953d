"""Common shingles: the keys in more than a given number of documents, and the shingle sets
without them (``--common-shingles``, ``common_shingles=``).

A template or boilerplate (a site's header and footer, a licence, a cookie notice) puts the same
shingles in a large share of a corpus. They say nothing about what a document is about, yet they
decide the Jaccard of two pages whose own words are few: distinct articles that share a template
of 260 words reach J >= 0.8 when their bodies are short. Leaving out the keys held by more than
``limit`` documents compares what is left of each set.

Layout. Shingle sets are CSR (:mod:`neardup.core.similarity`): int64 ``offsets[n + 1]`` and
sorted unique uint32 ``keys`` per document, so a key's count over all keys is its document
frequency. Counts are exact and the memory of a count is bounded whatever the corpus size: the
keys are read in chunks of :data:`CHUNK_KEYS` and put in 2**18 buckets by their top 18 bits (one
pass). A key in more than ``limit`` documents is in a bucket of more than ``limit`` keys, and
the keys are hash bits, spread evenly, so a template makes a few such buckets: each key of those
is counted exactly in a second pass, in a block of 2**14 counts per bucket (no sort). Where many
buckets are that full (a low ``limit``), and for every key's count (:func:`key_counts`), the keys
of a range of buckets are gathered, sorted and counted by run length, ranges of about
:data:`RANGE_KEYS` keys each, cut where the bucket counts say. Counts of parts (the shards of a
staged run) are merged by summing the counts of equal keys (:func:`merge_counts`), only those
of the buckets whose counts sum to more than ``limit`` where only the common keys are wanted
(:func:`common_in_parts`). The sets without the common keys are written in one pass over each
chunk of documents (:func:`iter_without_keys`), membership decided by a table that stays in
cache. The passes run on threads where asked, each over its own part of the keys.
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from fractions import Fraction
from typing import Any

import numpy as np

from neardup.core import common_kernels as K
from neardup.core.similarity import ShingleSets, page_out, resolve_threads

__all__ = [
    "CHUNK_KEYS",
    "RANGE_KEYS",
    "TEMPLATE_MIN_SIZE",
    "check_common",
    "cluster_templates",
    "common_in_parts",
    "common_keys",
    "common_limit",
    "iter_without_keys",
    "key_counts",
    "key_ranges",
    "largest_clusters",
    "merge_counts",
    "outside_sample",
    "template_hint",
    "template_share",
    "without_keys",
]

#: Keys read from the (memory-mapped) key array at once.
CHUNK_KEYS = 1 << 22
#: Keys sorted at once by a count: the key space is cut into ranges of about this many keys; also
#: the most counts (4 bytes each) that the exact count of the keys of full buckets holds.
RANGE_KEYS = 1 << 25
#: A key's bucket is its top 18 bits (``key >> _SHIFT``); its low 14 bits, its place in the
#: bucket's block of counts (a count's tables then stay in cache: 2 MB of bucket sizes, 64 KB
#: a block).
_SHIFT = 14
#: Clusters of at least this many documents are checked for a template (the run's hint).
TEMPLATE_MIN_SIZE = 50
#: The largest clusters checked for a template, at most (largest first, ties to the earlier
#: kept document).
TEMPLATE_CLUSTERS = 20
#: Members of a cluster whose shared keys make its core (evenly spaced, the kept one first).
TEMPLATE_MEMBERS = 64
#: Documents outside a cluster checked for its core (evenly spaced over the corpus).
TEMPLATE_OUTSIDE = 1000
#: A cluster looks like a template when its core is at least this share of its kept document's
#: keys ...
TEMPLATE_CORE_SHARE = 0.5
#: ... and more than this share of the documents outside it hold half of the core.
TEMPLATE_SPREAD = 0.01

_SPACE = 1 << 32


def check_common(common: Any) -> float | int:
    """``common`` checked: a float in (0, 1) (a share of the documents) or an integer >= 2 (a
    number of documents); else a ValueError saying what is allowed.

    Examples
    --------
    >>> check_common(0.05), check_common(100)
    (0.05, 100)
    """
    if isinstance(common, bool):
        raise ValueError(
            f"common_shingles must be a share in (0, 1) or a count >= 2 (got {common!r})"
        )
    if isinstance(common, (int, np.integer)):
        if common < 2:
            raise ValueError(
                f"common_shingles must be a share in (0, 1) or a count >= 2 (got {common}); a "
                "count of 1 would leave out every shingle two documents share"
            )
        return int(common)
    try:
        f = float(common)
    except (TypeError, ValueError):
        raise ValueError(
            f"common_shingles must be a share in (0, 1) or a count >= 2 (got {common!r})"
        ) from None
    if f.is_integer() and f >= 2:
        return int(f)
    if not 0.0 < f < 1.0:
        raise ValueError(
            f"common_shingles must be a share in (0, 1) or a count >= 2 (got {common!r}); "
            "e.g. 0.05 leaves out the shingles of more than 5% of the documents"
        )
    return f


def common_limit(common: float | int, n: int) -> int:
    """The most documents a key may be in and still count: ``common`` itself for a count, else
    ``floor(common * n)`` with ``common`` taken as written (0.07 of 100 documents is 7, not
    7.000000000000001); keys in more documents than this are common.

    Examples
    --------
    >>> common_limit(0.05, 1000), common_limit(0.29, 100), common_limit(10, 5)
    (50, 29, 10)
    """
    c = check_common(common)
    if isinstance(c, int):
        return c
    return math.floor(Fraction(repr(c)) * int(n))


def key_ranges(total: int, per: int | None = None) -> list[tuple[int, int]]:
    """``[lo, hi)`` ranges that cut the 32-bit key space into ``ceil(total / per)`` equal parts
    (``per`` default :data:`RANGE_KEYS`), in ascending order.

    Examples
    --------
    >>> key_ranges(10), key_ranges(3, 2)
    ([(0, 4294967296)], [(0, 2147483648), (2147483648, 4294967296)])
    """
    parts = max(1, -(-int(total) // int(per or RANGE_KEYS)))
    cuts = [(_SPACE * k) // parts for k in range(parts + 1)]
    return list(zip(cuts[:-1], cuts[1:], strict=True))


def _chunks(keys: np.ndarray) -> Iterator[np.ndarray]:
    """``keys`` (may be memory-mapped) as uint32, :data:`CHUNK_KEYS` at a time (the mapped pages
    dropped after each)."""
    for a in range(0, len(keys), CHUNK_KEYS):
        yield np.ascontiguousarray(keys[a : a + CHUNK_KEYS], dtype=np.uint32)
        page_out(keys)


def _on_parts(keys: np.ndarray, threads: int, count: Callable[[np.ndarray], np.ndarray]) -> Any:
    """The sum of ``count(part)`` over ``threads`` equal parts of ``keys``, one a thread (each
    part read :data:`CHUNK_KEYS` at a time); the counts' own dtype, wrapping around."""
    cuts = [len(keys) * i // threads for i in range(threads + 1)]
    parts = [keys[a:b] for a, b in zip(cuts[:-1], cuts[1:], strict=True)]
    if threads == 1:
        return count(parts[0])
    with ThreadPoolExecutor(threads) as pool:
        found = list(pool.map(count, parts))
    for other in found[1:]:
        found[0] += other
    return found[0]


def _bucket_sizes(keys: np.ndarray, threads: int = 1) -> np.ndarray:
    """How many of ``keys`` each bucket holds (int64[2**18], by the keys' top 18 bits), counted
    on ``threads`` threads."""

    def count(part: np.ndarray) -> np.ndarray:
        sizes = np.zeros(1 << (32 - _SHIFT), dtype=np.int64)
        for chunk in _chunks(part):
            K.bucket_counts(chunk, _SHIFT, sizes)
        return sizes

    return _on_parts(keys, threads, count)


def _all_runs(keys: np.ndarray, limit: int) -> tuple[np.ndarray, np.ndarray]:
    """The keys that occur more than ``limit`` times and their counts, from one sorted copy of
    ``keys``."""
    run = np.empty(len(keys), dtype=np.uint32)
    for a, chunk in zip(range(0, len(keys), CHUNK_KEYS), _chunks(keys), strict=True):
        run[a : a + len(chunk)] = chunk
    run.sort()
    return K.runs_over(run, limit)


def _bucket_runs(keys: np.ndarray, sizes: np.ndarray, limit: int) -> tuple[np.ndarray, np.ndarray]:
    """The keys that occur more than ``limit`` times and their counts, among the keys of the
    buckets where ``sizes`` (those buckets' exact sizes, the others 0) is positive: each range
    of buckets of about :data:`RANGE_KEYS` keys gathered (a pass over ``keys``), sorted and
    counted by run length."""
    total = int(sizes.sum())
    parts = max(1, -(-total // RANGE_KEYS))
    ends = np.searchsorted(np.cumsum(sizes), total * np.arange(1, parts) // parts) + 1
    cuts = np.unique(np.r_[0, np.minimum(ends, len(sizes)), len(sizes)])
    found: list[tuple[np.ndarray, np.ndarray]] = []
    for b0, b1 in zip(cuts[:-1].tolist(), cuts[1:].tolist(), strict=True):
        n = int(sizes[b0:b1].sum())
        if n == 0:
            continue
        take = np.zeros(len(sizes), dtype=np.uint8)
        take[b0:b1] = sizes[b0:b1] > 0
        run = np.empty(n + 1, dtype=np.uint32)  # a spare place: the gather writes every key
        at = 0
        for chunk in _chunks(keys):
            at = K.gather_buckets(chunk, _SHIFT, take, run, at)
        run = run[:n]
        run.sort()
        found.append(K.runs_over(run, limit))
    return _joined(found)


def _joined(parts: list[tuple[np.ndarray, np.ndarray]]) -> tuple[np.ndarray, np.ndarray]:
    """Keys and counts of ``parts`` (ranges of keys, ascending) end to end."""
    keys = [u for u, _ in parts] or [np.zeros(0, dtype=np.uint32)]
    counts = [c for _, c in parts] or [np.zeros(0, dtype=np.int64)]
    return np.concatenate(keys).astype(np.uint32, copy=False), np.concatenate(counts)


def key_counts(keys: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Each distinct key of ``keys`` (uint32, sorted) and how often it occurs (int64); over the
    keys of CSR shingle sets, its document frequency.

    Parameters
    ----------
    keys : ndarray of uint32
        Keys, in any order; may be memory-mapped (read :data:`CHUNK_KEYS` at a time, about
        :data:`RANGE_KEYS` of them sorted at once, 4 bytes each).

    Returns
    -------
    keys, counts : ndarray of uint32, ndarray of int64
        The distinct keys, ascending, and how many times each occurs.

    Examples
    --------
    >>> u, c = key_counts(np.array([5, 1, 5, 9, 5], dtype=np.uint32))
    >>> u.tolist(), c.tolist()
    ([1, 5, 9], [1, 3, 1])
    """
    if len(keys) <= RANGE_KEYS:  # one range: a plain copy, sorted
        return _all_runs(keys, 0)
    return _bucket_runs(keys, _bucket_sizes(keys), 0)


def merge_counts(parts: Sequence[tuple[np.ndarray, np.ndarray]]) -> tuple[np.ndarray, np.ndarray]:
    """Counts of several parts (each: its distinct keys, ascending, and their counts) as one:
    every distinct key, ascending, with the sum of its counts; the parts merged two at a time
    (a kernel's pass each), as in a merge sort.

    Parameters
    ----------
    parts : sequence of (ndarray, ndarray)
        Each part's distinct keys (uint32, ascending) and their counts (integers).

    Returns
    -------
    keys, counts : ndarray of uint32, ndarray of int64
        Every key of any part, ascending, and the sum of its counts.

    Examples
    --------
    >>> u, c = merge_counts([(np.array([1, 5]), np.array([2, 1])), (np.array([5]), np.array([4]))])
    >>> u.tolist(), c.tolist()
    ([1, 5], [2, 5])
    """
    runs = [
        (np.ascontiguousarray(u, dtype=np.uint32), np.ascontiguousarray(c, dtype=np.int64))
        for u, c in parts
    ] or [(np.zeros(0, np.uint32), np.zeros(0, np.int64))]
    while len(runs) > 1:
        pairs = zip(runs[0::2], runs[1::2], strict=False)
        merged = [K.merge_sums(a[0], a[1], b[0], b[1]) for a, b in pairs]
        runs = merged + ([runs[-1]] if len(runs) % 2 else [])
    return runs[0]


def common_in_parts(parts: Sequence[tuple[np.ndarray, np.ndarray]], limit: int) -> np.ndarray:
    """The keys whose counts over ``parts`` sum to more than ``limit``: the parts' counts summed
    by bucket first, then only the keys of the buckets over ``limit`` merged
    (:func:`merge_counts`).

    Parameters
    ----------
    parts : sequence of (ndarray, ndarray)
        Each part's distinct keys (uint32, ascending) and their counts (integers), such as each
        shard's :func:`key_counts`.
    limit : int
        The most times a key may occur in all and not be common (>= 0).

    Returns
    -------
    ndarray of uint32
        The common keys, ascending.

    Examples
    --------
    >>> parts = [(np.array([1, 5]), np.array([2, 1])), (np.array([5, 7]), np.array([4, 1]))]
    >>> common_in_parts(parts, 2).tolist()
    [5]
    """
    runs = [
        (np.ascontiguousarray(u, dtype=np.uint32), np.ascontiguousarray(c, dtype=np.int64))
        for u, c in parts
    ]
    sizes = np.zeros(1 << (32 - _SHIFT), dtype=np.int64)
    for u, c in runs:
        K.bucket_sums(u, c, _SHIFT, sizes)
    full = sizes > limit
    picked = []
    for u, c in runs:
        take = full[u >> _SHIFT]
        picked.append((u[take], c[take]))
    u, c = merge_counts(picked)
    return u[c > limit]


def common_keys(keys: np.ndarray, limit: int, threads: int | None = 1) -> np.ndarray:
    """The keys that occur more than ``limit`` times in ``keys`` (over the keys of shingle sets:
    those in more than ``limit`` documents), counted exactly; only the full buckets' keys are
    counted one by one (see the module's notes).

    Parameters
    ----------
    keys : ndarray of uint32
        Keys, in any order; may be memory-mapped (read :data:`CHUNK_KEYS` at a time).
    limit : int
        The most times a key may occur and not be common (>= 0).
    threads : int, optional
        Threads that count (default 1; None: every usable CPU), each its own part of ``keys``
        with its own counts (2 MB of bucket sizes, and at most :data:`RANGE_KEYS` counts of
        4 bytes in all for the full buckets).

    Returns
    -------
    ndarray of uint32
        The common keys, ascending.

    Examples
    --------
    >>> common_keys(np.array([5, 1, 5, 9, 5, 1], dtype=np.uint32), 1).tolist()
    [1, 5]
    """
    if len(keys) <= limit:  # no key can occur more often
        return np.zeros(0, dtype=np.uint32)
    nthreads = resolve_threads(threads)
    sizes = _bucket_sizes(keys, nthreads)
    full = np.flatnonzero(sizes > limit)
    counts = (len(full) + 1) << _SHIFT  # a block of counts per full bucket, and a spare
    if len(full) and counts <= min(RANGE_KEYS, int(sizes[full].sum())):
        return _counted_in_blocks(keys, full, limit, min(nthreads, RANGE_KEYS // counts))
    sizes[sizes <= limit] = 0
    return _bucket_runs(keys, sizes, limit)[0]


def _counted_in_blocks(keys: np.ndarray, full: np.ndarray, limit: int, threads: int) -> np.ndarray:
    """The keys of the buckets ``full`` (ascending) that occur more than ``limit`` times, each
    counted in its bucket's block of 2**14 counts (one pass; uint32 counts, exact up to 2**32 - 1
    documents); the keys of other buckets share a spare block. Each of ``threads`` threads
    counts a part of ``keys`` in blocks of its own."""
    slot = np.full(1 << (32 - _SHIFT), len(full), dtype=np.int32)
    slot[full] = np.arange(len(full), dtype=np.int32)

    def count(part: np.ndarray) -> np.ndarray:
        counts = np.zeros((len(full) + 1) << _SHIFT, dtype=np.uint32)
        for chunk in _chunks(part):
            K.slot_counts(chunk, _SHIFT, slot, counts)
        return counts

    counts = _on_parts(keys, threads, count)
    at = np.flatnonzero(counts[: len(full) << _SHIFT] > limit)
    return ((full[at >> _SHIFT] << _SHIFT) | (at & ((1 << _SHIFT) - 1))).astype(np.uint32)


def _in_sorted(keys: np.ndarray, sorted_keys: np.ndarray) -> np.ndarray:
    """Where ``keys`` are in ``sorted_keys`` (ascending), bool."""
    if len(sorted_keys) == 0:
        return np.zeros(len(keys), dtype=bool)
    at = np.searchsorted(sorted_keys, keys)
    at[at == len(sorted_keys)] = 0
    return sorted_keys[at] == keys


def _slot_table(drop: np.ndarray) -> tuple[np.ndarray, int]:
    """Membership in ``drop`` (sorted uint32, not empty) by a table of about 16 slots per key
    (2**8 to 2**22), by the keys' top bits: ``(table, shift)``, ``table[key >> shift]`` the
    place of the one key of ``drop`` in that slot (-1: none, -2: several, then a binary search
    decides). Keys are hash bits, so a lookup is one read from a table that stays in cache and
    one compare."""
    bits = min(22, max(8, int(len(drop)).bit_length() + 4))
    shift = 32 - bits
    slot = drop >> np.uint32(shift)
    table = np.full(1 << bits, -1, dtype=np.int32)
    table[slot] = np.arange(len(slot), dtype=np.int32)
    table[slot[1:][slot[1:] == slot[:-1]]] = -2
    return table, shift


def _doc_chunks(off: np.ndarray, per: int) -> Iterator[tuple[int, int]]:
    """``(first, stop)`` of consecutive runs of documents of about ``per`` keys each (at least
    one document), by their offsets ``off``."""
    n, at = len(off) - 1, 0
    while at < n:
        stop = int(np.searchsorted(off, off[at] + per, side="right")) - 1
        stop = min(n, max(stop, at + 1))
        yield at, stop
        at = stop


def iter_without_keys(
    sets: ShingleSets, drop: np.ndarray, chunk_keys: int | None = None, threads: int = 1
) -> Iterator[tuple[np.ndarray, np.ndarray]]:
    """The sets without the keys ``drop`` (sorted uint32), a chunk of documents at a time (about
    ``chunk_keys`` keys each, default :data:`CHUNK_KEYS`): ``(offsets, keys)`` of each chunk,
    offsets (int64) from 0, keys uint32, in document order; ``sets`` may be memory-mapped. Each
    chunk is one pass of a kernel that writes the kept keys and the new offsets; ``threads``
    chunks are worked on at once, on as many threads."""
    off = np.asarray(sets.offsets, dtype=np.int64)
    drop = np.ascontiguousarray(drop, dtype=np.uint32)
    table, shift = _slot_table(drop) if len(drop) else (np.zeros(0, dtype=np.int32), 0)

    def without(chunk: tuple[int, int]) -> tuple[np.ndarray, np.ndarray]:
        at, stop = chunk
        base = int(off[at])
        keys = np.ascontiguousarray(sets.keys[base : int(off[stop])], dtype=np.uint32)
        if len(drop) == 0:
            out = off[at : stop + 1] - base, np.array(keys)
        else:
            new_off = np.empty(stop - at + 1, dtype=np.int64)
            kept = np.empty(len(keys), dtype=np.uint32)
            k = K.sets_without(off[at : stop + 1], keys, table, shift, drop, new_off, kept)
            out = new_off, kept[:k]
        page_out(sets.keys)
        return out

    chunks = _doc_chunks(off, int(chunk_keys or CHUNK_KEYS))
    if len(off) == 1:
        yield np.zeros(1, dtype=np.int64), np.zeros(0, dtype=np.uint32)
    elif threads <= 1:
        yield from map(without, chunks)
    else:
        with ThreadPoolExecutor(threads) as pool:  # at most ``threads`` chunks at once
            ahead: deque[Any] = deque()
            for chunk in chunks:
                ahead.append(pool.submit(without, chunk))
                if len(ahead) >= threads:
                    yield ahead.popleft().result()
            while ahead:
                yield ahead.popleft().result()


def without_keys(sets: ShingleSets, drop: np.ndarray, threads: int = 1) -> ShingleSets:
    """``sets`` without the keys ``drop`` (sorted uint32), in memory (written a chunk at a time
    on ``threads`` threads, :func:`iter_without_keys`).

    Examples
    --------
    >>> s = without_keys(ShingleSets(np.array([0, 3, 4]), np.array([1, 2, 3, 2], np.uint32)),
    ...                  np.array([2], np.uint32))
    >>> s.offsets.tolist(), s.keys.tolist()
    ([0, 2, 2], [1, 3])
    """
    offs, keys, total = [np.zeros(1, dtype=np.int64)], [], 0
    for o, k in iter_without_keys(sets, drop, threads=threads):
        offs.append(o[1:] + total)
        keys.append(k)
        total += int(o[-1])
    return ShingleSets(np.concatenate(offs), np.concatenate(keys).astype(np.uint32, copy=False))


def _keys_of(sets: ShingleSets, d: int) -> np.ndarray:
    return np.asarray(sets.keys[int(sets.offsets[d]) : int(sets.offsets[d + 1])])


def template_share(
    sets: ShingleSets,
    members: np.ndarray,
    kept: int,
    outside: ShingleSets,
    skip: np.ndarray | None = None,
) -> float:
    """How much a cluster looks like pages that share a template: the share of the ``outside``
    documents (a sample of the corpus, :func:`outside_sample`; those where ``skip`` is True,
    the cluster's own, left out) that hold at least half of the cluster's core, the keys that
    the kept document and up to :data:`TEMPLATE_MEMBERS` evenly spaced ``members`` (positions
    in ``sets``, ascending) all hold; 0.0 when the core is under :data:`TEMPLATE_CORE_SHARE` of
    the kept document's keys (members that share little are no template). Copies of one text
    have a core that nothing outside their cluster holds; a template's core is also in the
    corpus around it."""
    base = _keys_of(sets, kept)
    step = max(1, -(-len(members) // TEMPLATE_MEMBERS))
    core = base
    for d in np.asarray(members)[::step].tolist():
        core = core[_in_sorted(core, _keys_of(sets, d))]
    if len(base) == 0 or len(core) < TEMPLATE_CORE_SHARE * len(base):
        return 0.0
    off = np.asarray(outside.offsets, dtype=np.int64)
    hits = np.r_[_in_sorted(np.asarray(outside.keys), core), False]
    held = np.add.reduceat(hits.astype(np.int64), off[:-1]) if len(off) > 1 else hits[:0]
    held[np.diff(off) == 0] = 0
    ok = held >= len(core) / 2
    if skip is not None:
        ok, held = ok[~skip], held[~skip]
    return float(np.count_nonzero(ok) / len(held)) if len(held) else 0.0


def outside_sample(n: int) -> np.ndarray:
    """:data:`TEMPLATE_OUTSIDE` evenly spaced positions in ``[0, n)`` (int64, ascending; all
    of them when fewer): the corpus around a cluster, its own members skipped."""
    return np.arange(0, n, max(1, n // TEMPLATE_OUTSIDE), dtype=np.int64)


def largest_clusters(survivor: np.ndarray) -> list[tuple[int, int]]:
    """``(size, kept)`` of the :data:`TEMPLATE_CLUSTERS` largest clusters of at least
    :data:`TEMPLATE_MIN_SIZE` documents (``survivor``: each document's kept one, itself when
    kept), largest first, ties to the earlier kept document."""
    s = np.asarray(survivor, dtype=np.int64)
    sizes = np.bincount(s, minlength=len(s)) if len(s) else np.zeros(0, np.int64)
    big = np.flatnonzero(sizes >= TEMPLATE_MIN_SIZE)
    big = big[np.lexsort((big, -sizes[big]))][:TEMPLATE_CLUSTERS]
    return [(int(sizes[k]), int(k)) for k in big]


def template_hint(checked: Sequence[tuple[int, int, float]]) -> dict[str, Any] | None:
    """The run's hint from its largest clusters' ``(size, kept, share)`` (:func:`template_share`;
    the :data:`TEMPLATE_CLUSTERS` largest of ``checked`` count, ties to the earlier kept): None when none looks like a template, else how many do, the
    largest of them, the highest share and the ``common_shingles`` to suggest (the largest of
    0.2 and 0.05 at most half that share, else 0.01)."""
    top = sorted(checked, key=lambda c: (-c[0], c[1]))[:TEMPLATE_CLUSTERS]
    found = [c for c in top if c[2] > TEMPLATE_SPREAD]
    if not found:
        return None
    share = max(c[2] for c in found)
    suggest = next((f for f in (0.2, 0.05) if f <= share / 2), 0.01)
    return {"clusters": len(found), "largest": found[0][0], "share": round(share, 4),
            "suggest": suggest}  # fmt: skip


def cluster_templates(
    sets: ShingleSets,
    survivor: np.ndarray,
    positions: np.ndarray,
    n: int,
    outside: Callable[[np.ndarray], ShingleSets],
) -> list[list[Any]]:
    """``[size, kept, share]`` of the largest clusters (:func:`largest_clusters`) among the
    documents of ``sets`` (``survivor``: each one's kept document, as a place in ``sets``;
    ``positions``: their places in the corpus of ``n`` documents, ascending), ``kept`` as a
    place in the corpus and ``share`` by :func:`template_share` against ``outside(pos)``, the
    sets of the corpus sample (:func:`outside_sample`)."""
    big = largest_clusters(survivor)
    if not big:
        return []
    sample = outside_sample(n)
    around = outside(sample)
    surv = np.asarray(survivor, dtype=np.int64)
    rows = []
    for size, k in big:
        members = np.flatnonzero(surv == k)
        skip = np.isin(sample, positions[members])
        share = template_share(sets, members, k, around, skip)
        rows.append([size, int(positions[k]), share])
    return rows

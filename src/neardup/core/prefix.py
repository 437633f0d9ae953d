"""Candidates by prefix filtering: every pair at or above the Jaccard threshold, none left to
chance, and templates that cost nothing.

Order the keys of all sets by how many documents hold them, rarest first (ties by key); a set of
``s`` keys has Jaccard ``>= t`` with another only if they share at least ``o(s)`` keys, the
smallest ``o`` with ``o / s >= t`` (float64, as the verification divides); so their
*prefixes*, each set's ``s - o(s) + 1`` keys of lowest rank, share a key (the prefix-filtering
lemma of exact set-similarity joins: Chaudhuri et al. 2006, Bayardo et al. 2007), and one key
longer, ``s - o(s) + 2``, they share two: the ``k``-th of the ``o`` or more common keys in the
corpus order has at most ``o - k`` common keys after it, so it sits at place ``s - o + k`` or
earlier in each set. Candidates are documents whose prefixes share two keys
(:data:`SHARED_KEYS`; one is enough where one common key can reach the threshold, as between
sets of one or two keys), each passing the positional filter: a superset of the pairs that
reach the threshold, so the keep/drop rule over them decides exactly as over all pairs.

Two keys, not one, keep the candidates of unrelated documents flat as the corpus grows: the
32-bit keys of distinct shingles collide more often the more shingles there are (about half a
rejected candidate a document at 16M documents with one key), and two collisions between the
same two documents are as rare at any size.

Keys that many documents hold (templates, boilerplate, common phrases) come last in the order
and stay out of the prefixes while a document has at least ``1 - t`` of its keys of its own, so
pages of one site are not candidates of each other for their template; rare keys are held by
few documents, so a document meets few candidates however large the corpus.

The counts come from ``2**COUNT_BITS`` counters, each key counted in the counter its hash picks:
keys that share a counter share a count. The order stays total (ties by key), so the lemma
holds whatever the counts; they only decide how selective the prefixes are.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from typing import Any

import numpy as np

from neardup.core import prefix_kernels as PK
from neardup.core.order import lexorder, row_counts
from neardup.core.similarity import ShingleSets, run_chunks

__all__ = [
    "COUNT_BITS",
    "SHARED_KEYS",
    "PrefixSets",
    "family_edges",
    "KeyGroups",
    "largest_family",
    "rank_counts",
    "min_overlap",
    "need_keys",
    "prefix_keep",
    "prefix_pairs",
    "prefix_sets",
    "clip_pairs",
    "shared_ids",
    "shared_keys",
    "unique_pairs",
]

#: log2 of the number of key counters (1 MiB of uint32, which the caches hold: a larger table
#: costs a cache miss a key). Keys share counters, which only blurs the counts of rare keys.
COUNT_BITS = 18

#: Prefix keys two documents must share to be candidates (where one common key cannot reach
#: the threshold); prefixes are ``SHARED_KEYS - 1`` keys longer than the one-key lemma's.
SHARED_KEYS = 2


def need_keys(positional: bool = True) -> int:
    """The shared keys that make two documents candidates: :data:`SHARED_KEYS` prefix keys,
    each at a place that passes the positional filter; one key where the places are not ranks
    (band keys, :mod:`neardup.core.bands`)."""
    return SHARED_KEYS if positional else 1


def min_overlap(sizes: np.ndarray, t: float) -> np.ndarray:
    """For each set size ``s``, the smallest ``o`` with ``o / s >= t`` in float64 (int64; 0 for
    an empty set): a set shares at least ``o`` keys with any set at Jaccard ``>= t``, since
    ``|A & B| >= t * |A | B| >= t * |A|``."""
    s = np.asarray(sizes, dtype=np.int64)
    safe = np.maximum(s, 1)
    o = np.minimum(np.ceil(t * s).astype(np.int64), s)
    down = (o > 0) & ((o - 1) / safe >= t)
    while np.any(down):  # the float product rounded up: step to the first that passes
        o[down] -= 1
        down = (o > 0) & ((o - 1) / safe >= t)
    up = (o < s) & (o / safe < t)
    while np.any(up):
        o[up] += 1
        up = (o < s) & (o / safe < t)
    return o


def rank_counts(keys: np.ndarray, threads: int = 1, bits: int = COUNT_BITS) -> np.ndarray:
    """How many of ``keys`` (uint32) fall in each of ``2**bits`` counters (uint32; a key's
    counter is the top ``bits`` bits of its product with a golden-ratio constant), counted on
    ``threads`` threads. Counting the keys of sets counts the documents that hold each key."""

    def count(lo: int, hi: int) -> np.ndarray:
        c = np.zeros(1 << bits, dtype=np.uint32)
        PK.count_keys(keys, 32 - bits, c, lo, hi)
        return c

    k = max(1, min(threads, len(keys) // 1_000_000))
    if k == 1 and len(keys) <= 0xFFFFFFFF:  # one counter array, which cannot overflow
        return count(0, len(keys))
    cuts = np.linspace(0, len(keys), k + 1).astype(np.int64).tolist()
    with ThreadPoolExecutor(k) as pool:
        parts = list(pool.map(count, cuts[:-1], cuts[1:]))
    return np.sum(parts, axis=0, dtype=np.uint64).clip(max=0xFFFFFFFF).astype(np.uint32)


class PrefixSets:
    """Each document's prefix: its keys of lowest rank in the corpus order (CSR, rank order).

    Attributes
    ----------
    offsets : ndarray of int64, shape (n + 1,)
    keys : ndarray of uint32
        Document ``d``'s prefix is ``keys[offsets[d]:offsets[d + 1]]``, rarest first.
    """

    def __init__(self, offsets: np.ndarray, keys: np.ndarray) -> None:
        self.offsets = offsets
        self.keys = keys


def prefix_sets(
    sets: ShingleSets,
    t: float,
    counts: np.ndarray,
    threads: int = 1,
    take: np.ndarray | None = None,
    shared: int = SHARED_KEYS,
) -> PrefixSets:
    """The prefixes of ``sets`` at threshold ``t`` under the order of ``counts``
    (:func:`rank_counts` of the whole corpus): ``s - o(s) + shared`` keys each, at most ``s``
    (:func:`min_overlap`), none for an empty set or one left out by ``take`` (bool, n); the
    prefixes in which candidates share ``shared`` keys (:func:`prefix_pairs`)."""
    sizes = sets.sizes
    p = np.where(sizes > 0, np.minimum(sizes, sizes - min_overlap(sizes, t) + shared), 0)
    if take is not None:
        p = np.where(take, p, 0)
    poff = np.zeros(len(sizes) + 1, dtype=np.int64)
    np.cumsum(p, out=poff[1:])
    pkeys = np.empty(int(poff[-1]), dtype=np.uint32)
    shift = 32 - (len(counts).bit_length() - 1)
    run_chunks(
        lambda lo, hi: PK.prefixes(sets.offsets, sets.keys, counts, shift, poff, pkeys, lo, hi),
        len(sizes),
        threads,
    )
    return PrefixSets(poff, pkeys)


class KeyGroups:
    """The prefix entries ``(keys[i], pos[i])`` of the keys that two or more entries hold,
    grouped by key, sorted once: ``order`` (the entries of shared keys, by key, then position)
    and each shared key's run in that order (``starts``, ``ends``). Most prefix keys are held
    by one entry (four in five at 1M generated documents); only the others' entries, found
    through :func:`shared_ids`' hash table, are sorted."""

    def __init__(self, keys: np.ndarray, pos: np.ndarray) -> None:
        self.pos = np.asarray(pos, dtype=np.int64)
        ids, _ = shared_ids(np.asarray(keys))  # a shared key's rank among the shared keys
        held = np.flatnonzero(ids >= 0)
        self.order = held[lexorder((self.pos[held], ids[held]))]
        k = ids[self.order]
        cut = np.flatnonzero(np.r_[True, k[1:] != k[:-1], True]) if len(k) else np.zeros(1, int)
        self.starts, self.ends = cut[:-1].astype(np.int64), cut[1:].astype(np.int64)

    def pairs(
        self,
        at: np.ndarray,
        size: np.ndarray,
        t: float,
        most: int | None = None,
        need: int = SHARED_KEYS,
        part: bool = False,
    ) -> np.ndarray:
        """The candidate pairs (:func:`prefix_pairs`) of the keys held by 2 to ``most``
        entries; with ``part`` (these keys are one range of the key space, whose weights the
        ranges sum), every pair the keys weigh for, each ``min(weight, need)`` times
        (:func:`clip_pairs`)."""
        m = self.ends - self.starts
        many = m >= 2
        if most is not None:
            many &= m <= most
        starts, ends, m = self.starts[many], self.ends[many], m[many]
        out = np.empty((need * int(np.sum(m * (m - 1) // 2)), 2), dtype=np.int64)
        got = PK.group_pairs(
            np.ascontiguousarray(self.pos[self.order]),
            np.ascontiguousarray(at[self.order], dtype=np.int64),
            np.ascontiguousarray(size[self.order], dtype=np.int64),
            starts, ends, float(t), int(need), out,
        )  # fmt: skip
        return clip_pairs(out[:got], need) if part else unique_pairs(out[:got], need)

    def links(self, most: int) -> np.ndarray:
        """The family links (:func:`family_edges`) of the keys held by more than ``most``
        entries."""
        p = self.pos[self.order]
        size = self.ends - self.starts
        group = np.repeat(np.arange(len(size)), size)  # each sorted entry's key run
        other = (size[group] > most) & (np.arange(len(p)) != self.starts[group])
        return unique_pairs(np.stack([p[self.starts[group[other]]], p[other]], axis=1))

    def largest(self) -> tuple[int, int]:
        """The most entries one key holds (ties to the smallest key) and its first position;
        ``(0, -1)`` when no key is held by two entries."""
        if len(self.starts) == 0:
            return 0, -1
        g = int(np.argmax(self.ends - self.starts))
        return int(self.ends[g] - self.starts[g]), int(self.pos[self.order[self.starts[g]]])


def prefix_pairs(
    keys: np.ndarray,
    pos: np.ndarray,
    at: np.ndarray,
    size: np.ndarray,
    t: float,
    most: int | None = None,
    need: int = SHARED_KEYS,
) -> np.ndarray:
    """The candidate pairs among the prefix entries ``(keys[i], pos[i])`` (any order; a
    position once per key; ``at[i]``: the key's place in the document's prefix, ``size[i]``:
    the document's set size): positions whose shared keys weigh ``need`` or more (one each
    that passes the positional filter there, ``need`` where one common key can reach ``t``;
    ``need`` 1 for band keys), as int64 rows ``(a, b)``, ``a < b``, each pair once, sorted:
    the pairs the pass over the whole corpus examines (:func:`prefix_keep`), kept or not. With
    ``most``, a key held by more than ``most`` entries makes no pairs here
    (:func:`family_edges` links them instead)."""
    return KeyGroups(keys, pos).pairs(at, size, t, most, need)


def family_edges(keys: np.ndarray, pos: np.ndarray, most: int) -> np.ndarray:
    """The families of the prefix entries ``(keys[i], pos[i])``: the positions of each key held
    by more than ``most`` entries, linked to the key's first position, as int64 rows ``(first,
    other)``, each once, sorted. Such a key would make about ``most**2 / 2`` pairs; a family is
    decided as a whole instead (its members are in one component), where a document is checked
    against the family's kept documents only, so that near copies of one page cost one check a
    member, not one a pair."""
    return KeyGroups(keys, pos).links(most)


def unique_pairs(pairs: np.ndarray, least: int = 1) -> np.ndarray:
    """The rows of ``pairs`` (int64, shape (k, 2)) that occur ``least`` times or more, sorted,
    each once."""
    rows, count = row_counts(pairs)
    return rows if least <= 1 else rows[count >= least]


def clip_pairs(pairs: np.ndarray, most: int) -> np.ndarray:
    """The rows of ``pairs`` (int64, shape (k, 2)) sorted, each ``min(count, most)`` times: a
    range of keys' part of the weights that :func:`unique_pairs` with ``least`` sums over all
    ranges."""
    rows, count = row_counts(pairs)
    return np.repeat(rows, np.minimum(count, most), axis=0)


def shared_keys(keys: np.ndarray) -> np.ndarray:
    """The keys (sorted, unique) that two or more of the prefix entries ``keys`` hold: the
    only keys that make candidates."""
    k = np.sort(keys)
    d = k[1:][k[1:] == k[:-1]]
    return d[np.r_[True, d[1:] != d[:-1]]] if len(d) else d


def prefix_keep(
    sets: ShingleSets,
    docs: np.ndarray,
    pre: PrefixSets,
    t: float,
    decided: tuple[np.ndarray, np.ndarray, np.ndarray],
    near: tuple[Any, ...],
    threads: int = 1,
    positional: bool = True,
) -> tuple[int, int, tuple[int, int]]:
    """Decide ``docs`` (representatives in priority order) with prefix candidates
    (:func:`neardup.core.prefix_kernels.prefix_keep`), filling ``decided`` (``kept_for``,
    ``inter``, ``union``) and ``near`` in place; returns (checks, candidates, the largest
    family: :func:`largest_family`). ``pre`` may hold any keys a document shares with its
    candidates: with ``positional`` False (band keys, :mod:`neardup.core.bands`) their places
    are not ranks, only the size filter applies and one shared key makes a candidate."""
    kept_for, inter, union = decided
    ids, n_shared = shared_ids(pre.keys, threads)
    # each shared key's slots, side by side: room for every prefix that holds it (most prefix
    # keys of distinct pages are held by no other prefix, so this is a fraction of them)
    base = np.zeros(n_shared + 1, dtype=np.int64)
    np.cumsum(np.bincount(ids[ids >= 0], minlength=n_shared), out=base[1:])
    checks, cands = PK.prefix_keep(
        sets.offsets, sets.keys, np.ascontiguousarray(docs, dtype=np.int64), pre.offsets, ids,
        base, t, positional, need_keys(positional), kept_for, inter, union, *near,
    )  # fmt: skip
    return int(checks), int(cands), largest_family(pre, ids)


def shared_ids(keys: np.ndarray, threads: int = 1) -> tuple[np.ndarray, int]:
    """Each entry's shared key as an index in the sorted shared keys (int32, -1 for a key no
    other entry holds) and the number of shared keys, through a hash table of the shared keys
    (uint32 or uint64)."""
    shared = shared_keys(keys)
    ids = np.empty(len(keys), dtype=np.int32)  # fewer than 2**31 shared keys
    if keys.dtype == np.uint32:
        table, shift = PK.key_table(shared)
        fill = lambda lo, hi: PK.key_ids(table, shift, keys, ids, lo, hi)  # noqa: E731
    else:
        tkeys, tidx, bits = PK.key_table64(shared)
        fill = lambda lo, hi: PK.key_ids64(tkeys, tidx, bits, keys, ids, lo, hi)  # noqa: E731
    run_chunks(fill, len(ids), threads)
    return ids, len(shared)


def largest_family(pre: PrefixSets, ids: np.ndarray) -> tuple[int, int]:
    """The most prefixes that hold one key (``ids``: each prefix entry's shared key, -1 for a
    key no other prefix holds), ties to the smallest key, and the first document that holds
    it; ``(0, -1)`` when no two prefixes share a key."""
    held = np.bincount(ids[ids >= 0])
    if len(held) == 0:
        return 0, -1
    g = int(np.argmax(held))
    first = int(np.argmax(ids == g))
    return int(held[g]), int(np.searchsorted(pre.offsets, first, side="right") - 1)

"""The candidate stages of a staged verified dedup with prefix candidates
(``candidates="prefix"``, :mod:`neardup.core.prefix`) or MinHash bands (``"bands"``,
:mod:`neardup.core.bands`), in place of the fingerprint search's split and pairs: the same
candidates as a pass over the whole corpus finds.

prefix-count (per shard: its keys counted in the rank counters) -> prefix-merge (one task: the
counters of every shard summed: the corpus order) -> prefix (per shard: the prefixes of its
documents that take part, as (key, position) entries cut by ranges of the key space; with
bands, their band keys, and no counts before) ->
prefix-pairs (per key range: the pairs of positions that share a key, each as many times as
the key weighs for it, cut by ranges of the first position) -> pairs (per position range: each
pair whose weights over all ranges reach what a candidate needs, once, as the verify stage reads
them).

A key that more than :data:`FAMILY_DOCS` prefixes hold (near copies of one page, or pages that
share rare words) makes no pairs: its documents are linked into one family (``fam``: each to
the key's first document), which the components stage keeps in one component, and the decide
stage decides such a component with prefix candidates over its documents, checking each only
against the component's kept documents (:func:`neardup.core.verify.decide_verified`). A family
of ``m`` near copies then costs about ``m`` checks instead of ``m**2 / 2`` verified pairs.
"""

from __future__ import annotations

import numpy as np

from neardup.core.bands import band_sets
from neardup.core.prefix import KeyGroups, need_keys, prefix_sets, rank_counts, unique_pairs
from neardup.pipeline.plan import DedupPlan
from neardup.pipeline.stages import copies_in
from neardup.pipeline.task_files import (
    gather_spans,
    inbox,
    key_stage,
    load,
    save,
    shard_sets,
    slices,
)

__all__ = [
    "FAMILY_DOCS",
    "count_task",
    "dedupe_task",
    "merge_task",
    "pairs_task",
    "prefix_task",
]

#: Keys held by more prefixes than this make a family, not pairs (about 2,000 pairs a key).
FAMILY_DOCS = 64


def count_task(out: str, work: str, plan: DedupPlan, s: int) -> dict[str, int]:
    """Shard ``s``'s shingle keys (of the key stage) counted in the rank counters."""
    counts = rank_counts(np.asarray(shard_sets(work, s, key_stage(plan)).keys))
    return {"bytes": save(out, counts=counts)}


def merge_task(out: str, work: str, n_shards: int) -> dict[str, int]:
    """The counters of every shard summed (saturating at 2**32 - 1): the corpus order."""
    total = np.zeros(len(load(work, "prefix-count", 0, "counts")), dtype=np.uint64)
    for s in range(n_shards):
        total += load(work, "prefix-count", s, "counts")
    return {"bytes": save(out, counts=np.minimum(total, 0xFFFFFFFF).astype(np.uint32))}


def prefix_task(out: str, work: str, plan: DedupPlan, s: int, offset: int, copies: int,
                ranges: int) -> dict[str, int]:  # fmt: skip
    """The prefix entries (with bands: the band keys) of shard ``s``'s documents with shingles
    that are not copies of an earlier set (the exact stage's ``copies`` tasks), as ``k``
    (key), ``p`` (the document's place in the shard, int32: the reader adds the shard's
    ``offset``), ``j`` (the key's place in the prefix; 0 for a band) and ``s`` (the set's size,
    int32), cut (``c``) into ``ranges`` ranges of the key space."""
    sets = shard_sets(work, s, key_stage(plan))
    if len(sets.sizes) >= 1 << 31:
        raise ValueError(f"shard {s} holds {len(sets.sizes):,} documents, more than 2**31 - 1")
    take = sets.sizes > 0
    if copies:
        take[copies_in(work, copies, s) - offset] = False
    if plan.scheme is not None:
        pre = band_sets(sets, *plan.scheme, take=take)
    else:
        counts = np.asarray(load(work, "prefix-merge", 0, "counts"))
        pre = prefix_sets(sets, plan.threshold, counts, take=take)
    lengths = np.diff(pre.offsets)
    doc = np.repeat(np.arange(len(take), dtype=np.int64), lengths)
    if plan.scheme is not None:  # a band's place says nothing of the overlap: size filter alone
        at = np.zeros(len(doc), dtype=np.int64)
    else:  # the key's place in its prefix
        at = np.arange(len(doc), dtype=np.int64) - pre.offsets[doc]
    part = key_range(pre.keys, ranges)
    narrow = part.astype(np.uint16) if ranges <= 1 << 16 else part  # numpy's radix sort
    order = np.argsort(narrow, kind="stable")
    cuts = np.searchsorted(part[order], np.arange(ranges + 1)).astype(np.int64)
    return {"bytes": save(out, k=pre.keys[order], p=doc[order].astype(np.int32),
                          j=at[order].astype(np.int32), s=sets.sizes[doc[order]].astype(np.int32),
                          c=cuts)}  # fmt: skip


def key_range(keys: np.ndarray, ranges: int) -> np.ndarray:
    """The range of ``ranges`` equal ranges of the key space (uint32 or uint64) that holds each
    key (uint64), by its top 32 bits: ranges ascend with the keys."""
    top = keys.astype(np.uint64)
    if keys.dtype == np.uint64:
        top = top >> np.uint64(32)
    return (top * np.uint64(ranges)) >> np.uint64(32)


def pairs_task(out: str, work: str, plan: DedupPlan, n_shards: int, b: int,
               bounds: list[int], most: int) -> dict[str, int]:  # fmt: skip
    """The pairs of positions that share a key of range ``b`` held by at most ``most``
    prefixes, each as many times as the key weighs for it, up to what a candidate needs (from
    every shard's prefix entries, :func:`~neardup.core.prefix.prefix_pairs`, whose sum over
    the ranges the dedupe stage takes) and the family links of the keys held by more
    (``f``, :func:`~neardup.core.prefix.family_edges`), each cut (``c``, ``cf``) by the range
    of ``bounds`` (ascending global positions) that holds its first position; the result's
    ``largest`` is the range's largest key's ``[documents, first position]``. ``bounds`` are
    also the shards' first positions: each shard's places become positions."""
    key = np.uint64 if plan.scheme is not None else np.uint32
    spans = list(slices(work, "prefix", range(n_shards), b))
    cols = gather_spans(work, "prefix", spans,
                        {"k": key, "p": np.int32, "j": np.int32, "s": np.int32})  # fmt: skip
    k, j, size = cols["k"], cols["j"], cols["s"]
    first = np.repeat([bounds[int(t)] for t, _, _ in spans], [hi - lo for _, lo, hi in spans])
    p = cols["p"] + first.astype(np.int64)
    moved = len(k) * (12 + k.itemsize)
    groups = KeyGroups(k, p)  # sorted once for the pairs, the links and the largest
    pairs = groups.pairs(j, size, plan.threshold, most, need_keys(plan.scheme is None), part=True)
    fam = groups.links(most)
    nbytes = save(out, pairs=pairs, c=np.searchsorted(pairs[:, 0], bounds).astype(np.int64),
                  f=fam, cf=np.searchsorted(fam[:, 0], bounds).astype(np.int64))  # fmt: skip
    return {"pairs": len(pairs), "family": len(fam), "moved": moved, "bytes": nbytes,
            "largest": list(groups.largest())}  # fmt: skip


def dedupe_task(out: str, work: str, plan: DedupPlan, tasks: list[str], r: int) -> dict[str, int]:
    """Range ``r``'s candidate pairs, each once (sorted): the pairs whose weights from every
    prefix-pairs task reach :func:`~neardup.core.prefix.need_keys`, which the verify stage
    reads; and its family links (``fam``), each once."""
    pairs = inbox(work, "prefix-pairs", tasks, r, "pairs")
    fam = unique_pairs(inbox(work, "prefix-pairs", tasks, r, "f", "cf"))
    moved = (len(pairs) + len(fam)) * 16
    pairs = unique_pairs(pairs, need_keys(plan.scheme is None))
    return {"pairs": len(pairs), "family": len(fam), "moved": moved,
            "bytes": save(out, pairs=pairs, fam=fam)}  # fmt: skip

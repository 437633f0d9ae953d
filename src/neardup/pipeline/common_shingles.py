"""Common shingles in a dedup run (``--common-shingles``, :mod:`neardup.core.common`), as
stages over shards (:mod:`neardup.pipeline.staged`): common-count (per shard: each distinct key
and its documents) -> common-merge (per range of the 32-bit key space: the counts of every
shard summed, the common keys kept) -> common (per shard: its sets without the common keys,
their offsets and set fingerprints and set digests, which the later stages read in place of
the scan's: the exact stage finds the copies among the sets without the common keys).

Without the option, the decide stage checks the largest clusters for a template (the run's
hint, :func:`neardup.core.common.template_hint`).
"""

from __future__ import annotations

import os

import numpy as np

from neardup.core.common import (
    common_in_parts,
    iter_without_keys,
    key_counts,
)
from neardup.core.similarity import ShingleSets, set_fingerprints
from neardup.pipeline import store
from neardup.pipeline.plan import DedupPlan
from neardup.pipeline.stages import by_digest, set_digests
from neardup.pipeline.task_files import load, save, shard_sets

__all__ = ["count_task", "filter_task", "merge_task"]


def count_task(out: str, work: str, s: int) -> dict[str, int]:
    """Shard ``s``'s distinct keys (``u``, ascending) and the documents holding each (``n``)."""
    u, c = key_counts(shard_sets(work, s).keys)
    return {"distinct": len(u), "bytes": save(out, u=u, n=c.astype(np.uint32))}


def merge_task(out: str, work: str, n_shards: int, lo: int, hi: int, limit: int) -> dict[str, int]:
    """The keys in ``[lo, hi)`` held by more than ``limit`` documents in all, from every
    shard's counts (``common``, ascending)."""
    parts = []
    for s in range(n_shards):
        u = load(work, "common-count", s, "u")
        a, b = np.searchsorted(u, [lo, hi])  # hi may be 2**32: compared as integers
        parts.append((np.asarray(u[a:b]), np.asarray(load(work, "common-count", s, "n")[a:b])))
    common = common_in_parts(parts, limit)
    return {"common": len(common), "bytes": save(out, common=common)}


def filter_task(out: str, work: str, plan: DedupPlan, s: int, merges: int) -> dict[str, int]:
    """Shard ``s``'s sets without the common keys (of the ``merges`` common-merge tasks): its
    ``keys.u32``, ``koff``, set fingerprints ``sfp`` (:attr:`DedupPlan.set_fps`) and set
    digests (:func:`by_digest`), as the scan spills them."""
    drop = np.concatenate(
        [np.asarray(load(work, "common-merge", r, "common")) for r in range(merges)]
        or [np.zeros(0, np.uint32)]
    ).astype(np.uint32)
    sets = shard_sets(work, s)
    sizes, sfp, digests = [], [], []
    with store.create(os.path.join(out, "keys.u32")) as f:
        for offsets, keys in iter_without_keys(sets, drop):
            store.write_values(f, keys)
            chunk = ShingleSets(offsets, keys)
            sizes.append(np.diff(offsets))
            if plan.set_fps:
                sfp.append(set_fingerprints(chunk, threads=1))
            digests.append(set_digests(chunk))
    size = np.concatenate(sizes) if sizes else np.zeros(0, np.int64)
    koff = np.zeros(len(size) + 1, dtype=np.int64)
    np.cumsum(size, out=koff[1:])
    digest = np.concatenate(digests) if digests else np.zeros((0, 2), np.uint64)
    more = {"sfp": np.concatenate(sfp).astype(np.uint64)} if plan.set_fps else {}
    nbytes = save(out, koff=koff, **more, **by_digest(digest, size))
    all_common = int(np.count_nonzero((sets.sizes > 0) & (size == 0)))
    return {"all_common": all_common, "bytes": nbytes + 4 * int(koff[-1])}

"""The near-miss stages of a staged dedup with a report (:mod:`neardup.pipeline.stages`): for
each kept document, its nearest kept candidate before it in keep order (the highest exact
Jaccard, ties to the earliest in keep order), as a search of the whole run finds it
(:func:`neardup.core.verify.decide_verified` with ``near_misses``), chosen in tasks so that the
calling process never holds the candidate pairs.

near-kept (per shard: which of its documents take part: kept, with shingles, and not found in
an index with sketches) -> near (per verify task: among its pairs whose documents both take
part, each later document's best, bucketed by the later document's shard) -> near-pick (per
shard: the best of every near task's for its documents, written for a result that asks for
them; the task's result is what the report shows, a few rows and counts per 0.01 of Jaccard).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from neardup.core.decide import keep_key
from neardup.distributed.plan import distinct_nodes
from neardup.pipeline.plan import DedupPlan
from neardup.pipeline.report import json_id, near_counts
from neardup.pipeline.shard_write import PositionLookup
from neardup.pipeline.stream import concat
from neardup.pipeline.task_files import gather, gather_array, keep_values, load, save

__all__ = ["near_kept_task", "near_pick_task", "near_task"]

_COLUMNS = ("d", "e", "jac", "ekey")


def near_kept_task(out: str, work: str, offsets: list[int], n_decide: int, s: int,
                   aside: bool, keys: str = "scan") -> dict[str, int]:  # fmt: skip
    """Shard ``s``'s documents that take part in the near misses (``part``, one bool each):
    not dropped by a decide task, with shingles (in the spills of stage ``keys``) and, with
    ``aside``, not found in the index (with sketches: no part in the input's decisions)."""
    lo, hi = offsets[s], offsets[s + 1]
    part = np.diff(np.asarray(load(work, keys, s, "koff"))) > 0
    for k in range(n_decide):
        drop = load(work, "decide", k, "drop")  # ascending: the shard's are one slice
        a, b = np.searchsorted(drop, [lo, hi])
        part[np.asarray(drop[a:b]) - lo] = False
    if aside and hi > lo:
        part &= ~np.asarray(load(work, "against", s, "found"), dtype=bool)
    return {"bytes": save(out, part=part)}


def _best(d: np.ndarray, e: np.ndarray, jac: np.ndarray, ekey: np.ndarray) -> tuple[Any, ...]:
    """For each distinct ``d``, its row with the highest ``jac``, ties to the ``e`` first in keep
    order (the smallest keep key, ``ekey`` (:func:`neardup.core.decide.keep_key`), then the
    earliest; ``ekey`` all 0 for ``keep="first"``); rows ``(d, e, jac, ekey)``, ``d``
    ascending."""
    order = np.lexsort((e, ekey, -jac, d))
    d = d[order]
    first = np.flatnonzero(np.r_[True, d[1:] != d[:-1]]) if len(d) else np.zeros(0, np.int64)
    head = order[first]
    return d[first], e[head], jac[head], ekey[head]


def near_task(out: str, work: str, plan: DedupPlan, offsets: list[int],
              task: str) -> dict[str, int]:  # fmt: skip
    """The pairs of verify task ``task`` (those that reach the threshold and those under it)
    whose documents both take part (stage near-kept), each turned to (later ``d``, earlier
    ``e``) in keep order; each ``d``'s best, with the cuts (``cuts``) between the shards of
    ``d``."""
    pairs = np.concatenate(
        [np.asarray(load(work, "verify", task, p)).reshape(-1, 2) for p in ("pairs", "mpairs")]
    ).astype(np.int64)
    jac = concat([np.asarray(load(work, "verify", task, j)) for j in ("jac", "mjac")], np.float64)
    off = np.asarray(offsets, dtype=np.int64)
    pos, at = distinct_nodes(pairs)
    live = gather_array(work, off, pos, "part", bool, stage="near-kept")
    ok = live[at[:, 0]] & live[at[:, 1]] if len(pairs) else np.zeros(0, dtype=bool)
    a, b, jac, at = pairs[ok, 0], pairs[ok, 1], jac[ok].astype(np.float64), at[ok]
    a_first = a < b
    ekey = np.zeros(len(a), dtype=np.float64)
    key = keep_key(plan.keep, keep_values(work, plan, off, pos), len(pos))
    if key is not None:  # the smaller key first (most characters, the field's max), ties earlier
        ka, kb = key[at[:, 0]].astype(np.float64), key[at[:, 1]].astype(np.float64)
        a_first = (ka < kb) | ((ka == kb) & a_first)
        ekey = np.where(a_first, ka, kb)
    d, e = np.where(a_first, b, a), np.where(a_first, a, b)
    d, e, jac, ekey = _best(d, e, jac, ekey)
    cuts = np.searchsorted(d, off).astype(np.int64)
    return {"docs": len(d), "bytes": save(out, d=d, e=e, jac=jac, ekey=ekey, cuts=cuts)}


def near_pick_task(out: str, work: str, plan: DedupPlan, offsets: list[int], tasks: list[str],
                   s: int, top: int, decide: int = 0) -> dict[str, Any]:  # fmt: skip
    """The nearest miss of each of shard ``s``'s kept documents, from every near task of
    ``tasks`` and the first ``decide`` decide tasks (those of prefix candidates find the near
    misses within families; ``d``, ``e``, ``jac``, ``d`` ascending); returns what the report
    shows of them: the ``top`` of highest Jaccard (ties in input order) as ``[jaccard, d, e, id
    of d, id of e]``, and their :func:`~neardup.pipeline.report.near_counts`."""
    types = {k: np.float64 if k in ("jac", "ekey") else np.int64 for k in _COLUMNS}
    cols = gather(work, "near", tasks, s, types, "cuts")
    more = gather(work, "decide", range(decide), s, {f"n{k}": t for k, t in types.items()},
                  "ncuts")  # fmt: skip
    d, e, jac, ekey = (np.concatenate([cols[k], more[f"n{k}"]]) for k in _COLUMNS)
    d, e, jac, _ = _best(d, e, jac, ekey)
    nbytes = save(out, d=d, e=e, jac=jac)
    rows = np.lexsort((d, -jac))[:top]
    look = PositionLookup(work, np.asarray(offsets, dtype=np.int64))
    ids = [json_id(i) for i in look.ids(np.concatenate([d[rows], e[rows]]))]
    shown = [[float(jac[i]), int(d[i]), int(e[i]), ids[k], ids[len(rows) + k]]
             for k, i in enumerate(rows.tolist())]  # fmt: skip
    return {"docs": len(d), "bytes": nbytes, "top": shown, **near_counts(jac, plan.threshold)}

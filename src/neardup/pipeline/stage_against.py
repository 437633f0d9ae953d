"""The stages of a staged dedup against an index (``against=``, ``--against INDEX``), each a
function of one shard as in :mod:`neardup.pipeline.stages`:

own (the shard's documents that the index already holds as themselves, same id and fingerprint,
and those entries' ids) -> against (each document checked against the index; the entries of
every shard's own documents set aside, as a check of every document at once sets them aside for the whole
input) -> ... -> index clusters (one line per entry that documents were dropped for, in the
order of its first such document).

Each task opens the index read-only by its path (:func:`neardup.pipeline.against.open_index`),
so the tasks run wherever the index can be read: threads of this process, or Dask workers that
see the same directory or Redis server; an index the caller opened is shared by the tasks of a
run on this process's threads (and closed by none of them)."""

from __future__ import annotations

import contextlib
import json
import os
from collections.abc import Iterator
from typing import Any

import numpy as np

from neardup.core.sketch import Sketches, set_sketches
from neardup.io.blocks import hash_ids
from neardup.pipeline import layout, store
from neardup.pipeline.against import (
    IndexCheck,
    check_index,
    entry_ids,
    open_index,
    own_entries,
    sketch_words,
)
from neardup.pipeline.plan import DedupPlan
from neardup.pipeline.stage_components import partition
from neardup.pipeline.task_files import (
    load,
    load_ids,
    read_records,
    save,
    save_records,
    shard_sets,
    slices,
)
from neardup.pipeline.workdir import read_json

__all__ = [
    "against_task",
    "index_check",
    "index_clusters_task",
    "index_distance",
    "index_split_task",
    "own_task",
    "shard_check",
    "shard_sketches",
]


def shard_sketches(work: str, s: int, words: int | None) -> Sketches | None:
    """Shard ``s``'s MinHash sketches of ``words`` words (None: the index keeps none)."""
    if words is None:
        return None
    return set_sketches(shard_sets(work, s), words, threads=1)


def _named_ids(work: str, plan: DedupPlan, s: int) -> list[Any] | None:
    """Shard ``s``'s ids where they name documents; None where they are positions (in-memory
    input without ids), which an index never holds as the document's own."""
    return None if plan.position_ids else load_ids(work, s)


def index_distance(plan: DedupPlan, words: int | None) -> int:
    """The distance of a run's check against an index: the run's search distance for an index
    with sketches of ``words`` words, else the fingerprint-only one (None: it keeps none)."""
    return plan.distance if words is not None else plan.fingerprint_distance


@contextlib.contextmanager
def _reading(against: Any) -> Iterator[Any]:
    """The index ``against`` open to read in this task: opened by its path and closed after,
    or, an index the caller opened (a run on this process's threads), used as it is."""
    index = open_index(against, False)
    try:
        yield index
    finally:
        if index is not against:
            index.close()


def own_task(out: str, work: str, plan: DedupPlan, s: int,
             checked: IndexCheck | None = None) -> dict[str, Any]:  # fmt: skip
    """Shard ``s``'s documents the index holds as themselves (saved as ``own``), and the ids
    of those entries as the index stores them; ``checked``: the shard's part of a check the
    caller made of every shard at once, whose own documents are saved (its entries were set
    aside there)."""
    if checked is not None:
        own = np.zeros(len(checked.found), bool) if checked.own is None else checked.own
        save(out, own=own)
        return {"own": int(own.sum()), "entries": []}
    with _reading(plan.against) as index:
        words = sketch_words(index)
        sk = shard_sketches(work, s, words)
        stored = sk.fingerprints if sk is not None else np.asarray(load(work, "scan", s, "fp"))
        ids = _named_ids(work, plan, s)
        own = own_entries(index, ids, stored)
        entries = entry_ids(index, ids, own).tolist() if own.any() else []
    save(out, own=own)
    return {"own": int(own.sum()), "entries": entries}


def shard_check(checked: IndexCheck, a: int, b: int) -> IndexCheck:
    """Documents ``a`` to ``b`` of a check of many shards at once (one shard's part)."""
    return IndexCheck(checked.found[a:b], checked.id[a:b], checked.distance[a:b],
                      checked.jaccard[a:b], checked.how, checked.path, checked.distance_limit,
                      None if checked.own is None else checked.own[a:b])  # fmt: skip


def against_task(out: str, work: str, plan: DedupPlan, s: int, aside: list[Any],
                 checked: IndexCheck | None = None) -> dict:  # fmt: skip
    """Shard ``s`` checked against the index (:func:`neardup.pipeline.against.check_index`),
    the entries ``aside`` (every shard's own) set aside: saves which documents were found, for
    which entry, at what distance and (sketches) estimated Jaccard. ``checked``: the shard's
    part of a batch query the caller made for every shard (a corpus checked on Dask), saved
    as it is."""
    if checked is None:
        checked = _check(work, plan, s, aside)
    found = checked.found
    at = np.flatnonzero(found)
    with store.create(os.path.join(out, "entries.json")) as f:
        f.write(json.dumps([checked.id[i] for i in at.tolist()]).encode())
    save(out, found=found, dist=checked.distance, jac=checked.jaccard)
    return {"found": int(found.sum()), "how": checked.how, "path": str(checked.path),
            "distance": checked.distance_limit}  # fmt: skip


def _check(work: str, plan: DedupPlan, s: int, aside: list[Any]) -> IndexCheck:
    """Shard ``s`` checked against the index by this task, the entries ``aside`` set aside."""
    with _reading(plan.against) as index:
        words = sketch_words(index)
        fps = np.asarray(load(work, "scan", s, "fp"))
        set_aside = np.empty(len(aside), dtype=object if index.id_type == "str" else np.int64)
        set_aside[:] = aside
        return check_index(index, fps, index_distance(plan, words),
                           sketches=shard_sketches(work, s, words), threshold=plan.threshold,
                           threads=1, ids=_named_ids(work, plan, s),
                           set_aside=set_aside)  # fmt: skip


def found_entries(work: str, s: int) -> list[Any]:
    """The entry each found document of shard ``s`` was dropped for, in shard order."""
    return read_json(layout.path(work, "against", s, "entries.json"), list)


def index_split_task(out: str, work: str, s: int, offset: int, parts: int) -> dict[str, int]:
    """Shard ``s``'s documents found in the index as records ``[entry, id, bits, jaccard,
    position]`` (ids in JSON form), cut by the range of their entry's hash (:func:`partition`
    of ``parts``), each range in input order."""
    from neardup.pipeline.write import json_id

    found = np.flatnonzero(load(work, "against", s, "found"))
    entries = found_entries(work, s) if len(found) else []
    ids = load_ids(work, s) if len(found) else []
    dist, jac = load(work, "against", s, "dist"), load(work, "against", s, "jac")
    key = hash_ids([json.dumps(e, sort_keys=True) for e in entries]).view(np.int64)
    part = partition(key, parts)
    order = np.argsort(part, kind="stable")
    cut = np.searchsorted(part[order], np.arange(parts + 1)).astype(np.int64)
    records = [[entries[k], json_id(ids[found[k]]), int(dist[found[k]]), float(jac[found[k]]),
                offset + int(found[k])] for k in order.tolist()]  # fmt: skip
    return {"bytes": save(out, c=cut) + save_records(out, "rec", records)}


def index_clusters_task(out: str, work: str, splits: list[str], p: int, how: str) -> int:
    """One JSON line per index entry of hash range ``p`` that documents were dropped for (read
    from the ``splits`` tasks of index-split), as a run writes them after the
    input's clusters, with ``first`` the position of each line's first document (the lines'
    order across ranges); returns how many."""
    from neardup.pipeline.write import json_id

    groups: dict[str, tuple[Any, int, list[tuple[Any, int, float]]]] = {}
    # shards in order, each in input order: first appearances in input order
    for t, lo, hi in slices(work, "index-split", splits, p):
        for entry, ident, bits, j, pos in read_records(work, "index-split", t, "rec", lo, hi):
            key = json.dumps(entry, sort_keys=True)
            groups.setdefault(key, (entry, pos, []))[2].append((ident, bits, j))
    first = np.asarray([g[1] for g in groups.values()], dtype=np.int64)
    with store.create(os.path.join(out, "clusters.jsonl")) as f:
        for entry, _, members in groups.values():
            row: dict[str, Any] = {
                "kept": json_id(entry),
                "size": 1 + len(members),
                "members": [json_id(entry)] + [m[0] for m in members],
                "distances": [0] + [m[1] for m in members],
            }
            if how == "sketch":
                row["jaccards"] = [1.0] + [m[2] for m in members]
            row["index"] = True
            row["verified"] = how
            f.write((json.dumps(row, ensure_ascii=False, allow_nan=False) + "\n").encode())
    save(out, first=first)
    return len(groups)


def index_check(work: str, sizes: list[int], info: dict[str, Any]) -> IndexCheck:
    """The whole run's :class:`~neardup.pipeline.against.IndexCheck` (arrays of every
    document: for a result asked for)."""
    parts = [s for s in range(len(sizes)) if sizes[s]]

    def cat(stage: str, name: str, dtype: Any) -> np.ndarray:
        arrays = [np.asarray(load(work, stage, s, name)) for s in parts]
        return np.concatenate(arrays).astype(dtype) if arrays else np.zeros(0, dtype)

    found = cat("against", "found", bool)
    ids: list[Any] = [None] * len(found)
    at = 0
    for s in parts:
        for i, entry in zip(np.flatnonzero(load(work, "against", s, "found")).tolist(),
                            found_entries(work, s), strict=True):  # fmt: skip
            ids[at + i] = entry
        at += sizes[s]
    return IndexCheck(found, ids, cat("against", "dist", np.int64),
                      cat("against", "jac", np.float64), info["how"], info["path"],
                      info["distance"], cat("own", "own", bool))  # fmt: skip

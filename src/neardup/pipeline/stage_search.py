"""The fingerprint search's stages of a staged dedup (``candidates="fingerprint"``, and every
fingerprint-only run) and the verify stage every verified run shares: split (each shard's
search fingerprints bucketed per table group) -> pairs (one bucket's candidate pairs,
:func:`neardup.distributed.plan.shard_pairs`; or one task for all, with the cost model's
scheme) -> verify (exact Jaccard of candidate pairs, whatever generator made them; only the
pairs that reach the threshold are kept)."""

from __future__ import annotations

from typing import Any

import numpy as np

from neardup.core.search import find_all
from neardup.core.similarity import pair_jaccard
from neardup.distributed.plan import ShardPlan, distinct_nodes, shard_edges, shard_ids, shard_pairs
from neardup.pipeline.plan import DedupPlan
from neardup.pipeline.stages import copies_in
from neardup.pipeline.stream import concat
from neardup.pipeline.task_files import gather_sets, key_stage, load, save

__all__ = ["check_search_device", "pairs_task", "search_task", "split_task", "verify_task"]


#: Slack below the threshold when the verify stage filters pairs: the decide stage compares
#: again exactly, so a pair at the threshold is never lost to rounding.
_SLACK = 1e-9


def split_task(out: str, work: str, plan: DedupPlan, s: int, offset: int, sp: ShardPlan,
               copies: int = 0) -> int:  # fmt: skip
    """Shard ``s``'s search fingerprints (verified: set fingerprints of documents with
    shingles, but for the copies the exact stage's ``copies`` tasks found) bucketed for each
    table group of ``sp``; returns the bytes written."""
    fp, pos = _search_fps(work, plan, s, offset, copies)
    nbytes = 0
    for g in range(len(sp.groups)):
        sid = shard_ids(fp, sp, g)
        order = np.argsort(sid, kind="stable")
        cuts = np.searchsorted(sid[order], np.arange(sp.n_shards + 1)).astype(np.int64)
        nbytes += save(out, **{f"v{g}": fp[order], f"p{g}": pos[order], f"c{g}": cuts})
    return nbytes


def _search_fps(work: str, plan: DedupPlan, s: int, offset: int,
                copies: int = 0) -> tuple[np.ndarray, np.ndarray]:  # fmt: skip
    """Shard ``s``'s search fingerprints and their global positions (verified: the set
    fingerprints of the documents with shingles, but for the copies of an earlier set that the
    exact stage's ``copies`` tasks found; else every document's fingerprint)."""
    if plan.verify:
        take = np.diff(load(work, key_stage(plan), s, "koff")) > 0
        if copies:
            take[copies_in(work, copies, s) - offset] = False
        pos = np.flatnonzero(take)
        fp = np.asarray(load(work, key_stage(plan), s, "sfp"))[pos]
    else:
        fp = np.asarray(load(work, "scan", s, "fp"))
        pos = np.arange(len(fp))
    return fp, pos.astype(np.int64) + np.int64(offset)


def check_search_device(device: str, client: Any = None) -> None:
    """Before any stage runs: ``device="cuda"`` needs a usable GPU here, or with a Dask
    ``client`` on every worker; else one line (:class:`~neardup.gpu.DeviceUnavailable`)."""
    if device == "cpu":
        return
    if client is not None:
        from neardup.distributed import check_workers

        check_workers(client, device)
    else:
        from neardup.gpu import use_gpu

        use_gpu(device)


def search_task(out: str, work: str, plan: DedupPlan, offsets: list[int], threads: int,
                copies: int = 0) -> dict:  # fmt: skip
    """Every candidate pair (fingerprint-only: cluster edges) in one task, by the search the
    search of a whole run uses (:func:`neardup.core.search.find_all`, its cost model's scheme): for
    corpora whose search fingerprints fit one task. The copies that the exact stage's
    ``copies`` tasks found are left out."""
    parts = [_search_fps(work, plan, s, offsets[s], copies) for s in range(len(offsets) - 1)]
    fp, pos = concat([p[0] for p in parts], np.uint64), concat([p[1] for p in parts], np.int64)
    if plan.verify:
        found = find_all(fp, plan.distance, plan.blocks, threads=threads, device=plan.device)
    else:
        found = _value_edges(fp, plan, threads)
    pairs = pos[found].reshape(-1, 2)
    return {"pairs": len(pairs), "bytes": save(out, pairs=pairs), "moved": 0}


def _value_edges(fp: np.ndarray, plan: DedupPlan, threads: int) -> np.ndarray:
    """Fingerprint-only candidate edges (positions into ``fp``), as
    :func:`neardup.distributed.plan.shard_edges` makes them: each distinct value searched once,
    by its first document, and every other copy of a value linked to that first one."""
    values, first, value = np.unique(fp, return_index=True, return_inverse=True)
    copies = np.flatnonzero(first[value] != np.arange(len(fp)))
    found = find_all(values, plan.distance, plan.blocks, threads=threads, device=plan.device)
    return np.concatenate([np.stack([first[value[copies]], copies], axis=1),
                           np.sort(first[found].reshape(-1, 2), axis=1)])  # fmt: skip


def pairs_task(out: str, work: str, plan: DedupPlan, n_shards: int, sp: ShardPlan, g: int,
               b: int) -> dict[str, int]:  # fmt: skip
    """Candidate pairs (fingerprint-only dedup: cluster edges) of bucket ``b`` of group ``g``,
    from every shard's split, as global positions."""
    pieces = []
    for s in range(n_shards):
        c = load(work, "split", s, f"c{g}")
        lo, hi = int(c[b]), int(c[b + 1])
        pieces.append(
            (load(work, "split", s, f"v{g}")[lo:hi], load(work, "split", s, f"p{g}")[lo:hi])
        )
    moved = sum(len(v) for v, _ in pieces) * 16
    search = shard_pairs if plan.verify else shard_edges
    pairs = search(pieces, sp, g, plan.device)
    return {"pairs": len(pairs), "bytes": save(out, pairs=pairs), "moved": moved}


def verify_task(
    out: str, work: str, plan: DedupPlan, offsets: list[int], task: str, lo: int, hi: int
) -> dict[str, int]:
    """Exact Jaccard of candidate pairs ``lo`` to ``hi`` of a search task, the keys read from
    both documents' shards; keeps the pairs that reach the threshold."""
    pairs = np.asarray(load(work, "pairs", task, "pairs")[lo:hi])
    if len(pairs) == 0:
        none = {"mpairs": pairs, "mjac": np.zeros(0)} if plan.near_misses else {}
        return {"pairs": 0, "bytes": save(out, pairs=pairs, jac=np.zeros(0), **none)}
    pos, local = distinct_nodes(pairs)
    sets = gather_sets(work, np.asarray(offsets, dtype=np.int64), pos, key_stage(plan))
    jac = pair_jaccard(sets, local, threads=1)
    ok = jac >= plan.threshold - _SLACK
    missed = {}
    if plan.near_misses:  # the report's near misses are chosen among these after the decisions
        missed = {"mpairs": pairs[~ok], "mjac": jac[~ok]}
    nbytes = save(out, pairs=pairs[ok], jac=jac[ok], **missed)
    return {"pairs": int(ok.sum()), "bytes": nbytes}

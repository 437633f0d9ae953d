"""The decide stage of a staged dedup (:mod:`neardup.pipeline.staged`): each group of whole
components (the cc-route tasks' edges, :mod:`neardup.pipeline.stage_components`) decided by the
one keep-order rule, :func:`neardup.core.verify.decide_verified` (verified) or
:func:`neardup.core.decide.keep_order` (fingerprints only), as the task that decides a whole run does.
"""

from __future__ import annotations

import warnings
from typing import Any

import numpy as np

from neardup.core.common import cluster_templates
from neardup.core.decide import keep_key, keep_order
from neardup.core.order import lexorder
from neardup.core.similarity import ShingleSets
from neardup.core.verify import decide_verified, priority_order
from neardup.distributed.plan import distinct_nodes
from neardup.pages import small_pages
from neardup.pipeline.plan import DedupPlan
from neardup.pipeline.task_files import (
    all_sets,
    gather_array,
    gather_sets,
    inbox,
    keep_values,
    key_stage,
    load,
    save,
    subset_sets,
)

__all__ = ["decide_all_task", "decide_task"]


def decide_task(out: str, work: str, plan: DedupPlan, offsets: list[int], routes: list[str],
                k: int) -> dict[str, int]:  # fmt: skip
    """The decisions for group ``k`` of components (its edges read from the cc-route tasks
    ``routes``; :mod:`neardup.pipeline.stage_components`): every member of a cluster of two or
    more as a row ``(label, pos, survivor, jaccard)`` sorted by label then position, and the
    dropped positions, ascending. With prefix candidates and a report, also the near misses
    within the components (:func:`_near_rows`)."""
    edges = inbox(work, "cc-route", routes, k)
    nodes, local = distinct_nodes(edges)  # every node of the group is in one of its edges
    off = np.asarray(offsets, dtype=np.int64)
    n = len(nodes)
    near = plan.verify and plan.near_misses and plan.candidates != "fingerprint"
    if n == 0:  # a group whose range of labels holds no component
        rows = _near_rows(off, nodes, None, None, None) if near else {}
        return {"dropped": 0, "bytes": save(out, label=nodes, pos=nodes, surv=nodes,
                                             jac=np.zeros(0), drop=nodes, **rows)}  # fmt: skip
    values = keep_values(work, plan, off, nodes)
    pos = np.arange(n, dtype=np.int64)
    templates: list = []
    rows: dict[str, np.ndarray] = {}
    counts: dict[str, int] = {}
    if plan.verify:
        sets = gather_sets(work, off, nodes, key_stage(plan))
        d = _decide_group(work, plan, off, nodes, sets, local, values)
        counts = {"checks": int(d.checks), "candidates": int(d.candidates)}
        surv = np.where(d.kept_for < 0, pos, d.kept_for)
        jac = np.where(d.kept_for < 0, 1.0, d.jaccard)
        if near:
            rows = _near_rows(off, nodes, d.near_for, d.near_jaccard,
                              keep_key(plan.keep, values, n))  # fmt: skip
        if plan.common_shingles is None:  # the run's hint: clusters that look like a template
            templates = cluster_templates(sets, surv, nodes, int(off[-1]),
                                          lambda p: gather_sets(work, off, p))  # fmt: skip
    else:  # the keep-order rule, over the group's whole components
        fp = gather_array(work, off, nodes, "fp", np.uint64)
        order = priority_order(n, plan.keep, values)
        kept_for = keep_order(fp, order, plan.distance, pairs=local)
        surv = np.where(kept_for < 0, pos, kept_for)
        jac = np.full(n, np.nan)
    return {**_save_rows(out, nodes, surv, jac, rows, templates), **counts}


def _save_rows(out: str, nodes: np.ndarray, surv: np.ndarray, jac: np.ndarray,
               rows: dict[str, np.ndarray], templates: list) -> dict[str, Any]:  # fmt: skip
    """The decide stage's files of documents ``nodes`` (global positions, ascending) and each
    one's survivor ``surv`` (a place in ``nodes``; itself when kept): every member of a
    cluster of two or more as a row ``(label, pos, survivor, jaccard)`` sorted by label then
    position, the dropped positions (``drop``), and ``rows`` (the near misses)."""
    n = len(nodes)
    pos = np.arange(n, dtype=np.int64)
    label = pos.copy()
    np.minimum.at(label, surv, pos)
    label = label[surv]
    size = np.bincount(label, minlength=n)
    member = size[label] >= 2
    at = np.flatnonzero(member)
    at = at[lexorder((at, label[at]))]
    nbytes = save(out, label=nodes[label[at]], pos=nodes[at], surv=nodes[surv[at]],
                   jac=jac[at], drop=nodes[surv != pos], **rows)  # fmt: skip
    return {"dropped": int(np.count_nonzero(surv != pos)), "bytes": nbytes,
            "templates": templates}  # fmt: skip


def decide_all_task(out: str, work: str, plan: DedupPlan, offsets: list[int], threads: int,
                    aside: bool) -> dict[str, Any]:  # fmt: skip
    """The decisions of every document of the run in one task, in the files of decide task
    ``0`` (:func:`decide_task`): a run whose documents fit in one process's memory
    (``plan.whole_docs``) finds its candidates and applies the rule over the whole corpus at
    once, on ``threads`` threads, as :func:`neardup.core.verify.decide_verified` (verified) or
    :func:`neardup.core.decide.keep_order` (fingerprints only) do, with no pairs, components
    or exact-copy links in files. With ``aside`` the documents found in the index (with
    sketches) take no part. Its near misses (a report) are rows of the decide files for every
    kind of candidates. Its arrays are not advised onto huge pages
    (:func:`neardup.pages.small_pages`: measured faster for this task)."""
    with small_pages():
        return _decide_everything(out, work, plan, offsets, threads, aside)


def _decide_everything(out: str, work: str, plan: DedupPlan, offsets: list[int], threads: int,
                       aside: bool) -> dict[str, Any]:  # fmt: skip
    """:func:`decide_all_task`'s work."""
    off = np.asarray(offsets, dtype=np.int64)
    n = int(off[-1])
    nodes = np.arange(n, dtype=np.int64)
    values = keep_values(work, plan, off, nodes)
    if not plan.verify:
        fp = gather_array(work, off, nodes, "fp", np.uint64)
        order = priority_order(n, plan.keep, values)
        kept_for = keep_order(fp, order, plan.distance, blocks=plan.blocks, threads=threads)
        surv = np.where(kept_for < 0, nodes, kept_for)
        return _save_rows(out, nodes, surv, np.full(n, np.nan), {}, [])
    stage = key_stage(plan)
    sets = all_sets(work, off, stage)
    sfp = gather_array(work, off, nodes, "sfp", np.uint64, stage) if plan.set_fps else None
    exclude = gather_array(work, off, nodes, "found", bool, "against") if aside else None
    how: dict[str, Any] = {"candidates": plan.candidates, "distance": plan.distance,
                           "blocks": plan.blocks}  # fmt: skip
    if plan.scheme is not None:
        how.update(bands=plan.scheme[0], rows=plan.scheme[1])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        d = decide_verified(sets, sfp, plan.threshold, keep=plan.keep, lengths=values,
                            threads=threads, exclude=exclude, near_misses=plan.near_misses,
                            distances=False, **how)  # fmt: skip
    surv = np.where(d.kept_for < 0, nodes, d.kept_for)
    jac = np.where(d.kept_for < 0, 1.0, d.jaccard)
    rows = {}
    if plan.near_misses:
        rows = _near_rows(off, nodes, d.near_for, d.near_jaccard,
                          keep_key(plan.keep, values, n))  # fmt: skip
    templates = []
    if plan.common_shingles is None:  # the run's hint: clusters that look like a template
        templates = cluster_templates(sets, surv, nodes, n, lambda p: subset_sets(sets, p))
    info = _save_rows(out, nodes, surv, jac, rows, templates)
    info.update(checks=int(d.checks), candidates=int(d.candidates))
    if d.family is not None:  # prefix candidates: the most documents sharing a prefix key
        info["family"] = [int(d.family[0]), int(d.family[1])]
    return info


def _decide_group(work: str, plan: DedupPlan, off: np.ndarray, nodes: np.ndarray,
                  sets: ShingleSets, local: np.ndarray, values: Any) -> Any:  # fmt: skip
    """The verified decisions of a group's documents ``nodes``: with prefix candidates, those
    of prefix filtering over the group in the corpus order (the prefix-merge stage), with
    bands those of the bands, so that a family (:mod:`neardup.pipeline.stage_prefix`) costs a
    check per member and kept document; else over the group's verified pairs ``local``."""
    stage = key_stage(plan)
    sfp = gather_array(work, off, nodes, "sfp", np.uint64, stage) if plan.set_fps else None
    how: dict[str, Any] = {"pairs": local}
    if plan.candidates == "prefix":
        counts = np.asarray(load(work, "prefix-merge", 0, "counts"))
        how = {"candidates": "prefix", "counts": counts, "near_misses": plan.near_misses}
    elif plan.scheme is not None:
        b, rows = plan.scheme
        how = {"candidates": "bands", "bands": b, "rows": rows, "near_misses": plan.near_misses}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        return decide_verified(sets, sfp, plan.threshold, keep=plan.keep, lengths=values,
                               threads=1, distances=False, **how)  # fmt: skip


def _near_rows(off: np.ndarray, nodes: np.ndarray, near_for: np.ndarray | None,
               near_jac: np.ndarray | None, key: np.ndarray | None) -> dict[str, np.ndarray]:  # fmt: skip
    """The near misses the decisions of a group found: each kept document ``nd`` with a kept
    candidate before it, its nearest ``ne``, their Jaccard ``njac`` and ``ne``'s keep key
    ``nekey`` (0 for ``keep="first"``), ``nd`` ascending, cut (``ncuts``) by shard, as the near
    stage's rows (:mod:`neardup.pipeline.stage_near`). ``near_for`` None: none."""
    if near_for is None or near_jac is None:
        near_for, near_jac = np.full(len(nodes), -1, np.int64), np.zeros(len(nodes))
    has = np.flatnonzero(near_for >= 0)
    e = near_for[has]
    ekey = np.zeros(len(has)) if key is None else np.asarray(key, np.float64)[e]
    d = nodes[has]
    return {"nd": d, "ne": nodes[e], "njac": np.asarray(near_jac, np.float64)[has],
            "nekey": ekey, "ncuts": np.searchsorted(d, off).astype(np.int64)}  # fmt: skip

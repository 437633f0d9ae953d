"""What a staged dedup gives back (:mod:`neardup.pipeline.staged`): its summary, and, where
asked for, a :class:`~neardup.pipeline.result.DedupResult` read back from the work directory,
or a view of its clusters one line at a time."""

from __future__ import annotations

import itertools
import os
from collections.abc import Iterator
from typing import Any

import numpy as np

from neardup.pipeline import layout
from neardup.pipeline import stage_against as A
from neardup.pipeline import task_files as F
from neardup.pipeline.parts import decoded, index_clusters, index_lines, part_lines
from neardup.pipeline.plan import DedupPlan
from neardup.pipeline.result import summary_head
from neardup.pipeline.staged_run import StagedRun

__all__ = ["StagedView", "build_result", "summary"]


class StagedView:
    """What an extra output that reads the shards' parts (``reads_parts``: the HTML report)
    needs of a staged run, without an array of every document: its summary, its near misses,
    and its clusters read from the write tasks' parts, one line at a time, in order."""

    def __init__(self, plan: DedupPlan, run: StagedRun) -> None:
        from types import SimpleNamespace

        self.plan, self.run = plan, run
        self.near = run.near
        self.scan = SimpleNamespace(files=list(plan.files))  #: the texts shown are read there

    def summary(self) -> dict[str, Any]:
        out = summary(self.plan, self.run)
        out["seconds"]["total"] = round(sum(self.run.seconds.values()), 3)
        return out

    def report_clusters(self) -> tuple[int, Iterator[dict[str, Any]], Iterator[dict[str, Any]]]:
        """The number of clusters, the clusters one at a time (as the ``--clusters`` file
        has them) and the index's rows (``--against``), one at a time."""
        work = self.run.work
        index: Iterator[dict[str, Any]] = iter(())
        if index_clusters(self.plan, self.run):
            where = os.path.join(work, "index-clusters")
            index = decoded(where, index_lines(work, self.run.index_parts))
        parts = [layout.path(work, "write", s, "clusters.jsonl")
                 for s in range(len(self.run.sizes))]  # fmt: skip
        clusters = itertools.chain.from_iterable(
            decoded(path, part_lines(path, n))
            for path, n in zip(parts, self.run.part_clusters, strict=True)
        )
        return self.run.clusters, clusters, index


def _scan_arrays(plan: DedupPlan, run: StagedRun) -> Any:
    """The first pass's :class:`~neardup.pipeline.scan.Scan` of every document, from the
    spills (arrays of every document: only where a result is asked for, or for Parquet and
    text-file outputs)."""
    from neardup.pipeline.scan import Scan
    from neardup.pipeline.stream import concat

    shards = [s for s in range(len(run.sizes)) if run.sizes[s]]

    def cat(name: str, dtype: Any) -> np.ndarray:
        return concat([np.asarray(F.load(run.work, "scan", s, name)) for s in shards], dtype)

    ids: list[Any] = []
    for s in shards:
        ids.extend(F.load_ids(run.work, s))
    return Scan(list(plan.files), ids, cat("src", np.int32), cat("rec", np.int64),
                cat("len", np.int64), cat("fp", np.uint64), run.skipped,
                run.bytes_in)  # fmt: skip


def build_result(plan: DedupPlan, run: StagedRun, near_arrays: bool = True) -> Any:
    """A :class:`~neardup.pipeline.result.DedupResult` of the run (arrays of every document,
    read back from the work directory); the near misses (a report asked for them) as the tasks found them, and with
    ``near_arrays`` each document's (``near_for``, ``near_jaccard``) too."""
    from neardup.core.bits import popcount
    from neardup.core.decide import Decisions
    from neardup.core.verify import VerifiedDecisions
    from neardup.pipeline.result import DedupResult

    scan = _scan_arrays(plan, run)
    n = run.n
    pos = np.arange(n, dtype=np.int64)
    labels, surv, jac = pos.copy(), pos.copy(), np.full(n, np.nan)
    for k in range(run.n_decide):
        p = np.asarray(F.load(run.work, "decide", k, "pos"))
        labels[p] = F.load(run.work, "decide", k, "label")
        surv[p] = F.load(run.work, "decide", k, "surv")
        jac[p] = F.load(run.work, "decide", k, "jac")
    fp = scan.fingerprints
    dist = popcount(fp ^ fp[surv]).astype(np.int64) if n else np.zeros(0, np.int64)
    kept = surv == pos
    against = None
    if run.against is not None:
        against = A.index_check(run.work, run.sizes, run.against)
    decisions = Decisions(labels, surv, dist, kept if against is None else kept & ~against.found)
    result = DedupResult(scan.ids, fp, scan.lengths, decisions, run.skipped, dict(run.seconds),
                         scan, bytes_in=run.bytes_in, bytes_out=run.bytes_out)  # fmt: skip
    result.against = against
    if plan.rows is not None:  # in-memory input: no files, each document's input position
        result.scan, result.positions = None, scan.record
    result.near = run.near
    result.common, result.template = run.common, run.template
    if plan.verify:
        result.candidates, result.scheme = plan.candidates, plan.scheme
        shards = [s for s in range(len(run.sizes)) if run.sizes[s]]
        sizes = np.concatenate(
            [np.diff(F.load(run.work, "scan", s, "koff")) for s in shards] or [np.zeros(0)]
        )
        jac[kept] = np.nan
        near_for = near_jac = None
        if run.near is not None and near_arrays:
            near_for, near_jac = _near_arrays(run)
        result.verified = VerifiedDecisions(kept, np.where(kept, -1, surv), jac,
                                            np.where(kept, -1, dist), sizes == 0,
                                            run.checks, run.candidates, near_for=near_for,
                                            near_jaccard=near_jac, family=_family(run))  # fmt: skip
        result.threshold = plan.threshold
    result.temp_bytes = sum(run.temp_bytes.values())
    result.run_summary = StagedView(plan, run).summary()  # dedup() gives the final one
    return result


def _family(run: StagedRun) -> tuple[int, int] | None:
    """The largest family as :class:`~neardup.core.verify.VerifiedDecisions` holds it."""
    return None if run.family is None else (int(run.family[0]), int(run.family[1]))


def _near_arrays(run: StagedRun) -> tuple[np.ndarray, np.ndarray]:
    """(near_for, near_jaccard) of every document, as the verified search of a whole run finds
    them (:func:`neardup.core.verify.decide_verified` with ``near_misses``), from the shards'
    near-pick tasks; -1 and NaN where a document has none."""
    near_for, near_jac = np.full(run.n, -1, dtype=np.int64), np.full(run.n, np.nan)
    for s in range(len(run.sizes)):
        d = np.asarray(F.load(run.work, "near-pick", s, "d"))
        near_for[d] = F.load(run.work, "near-pick", s, "e")
        near_jac[d] = F.load(run.work, "near-pick", s, "jac")
    return near_for, near_jac


def summary(plan: DedupPlan, run: StagedRun) -> dict[str, Any]:
    """The run's summary, the keys of :meth:`DedupResult.summary` and ``stages`` (seconds,
    tasks, tasks reused from the work directory and temporary bytes per stage), ``shards``
    and ``shard_docs`` (documents per shard, on average), ``executor`` and its ``workers``
    (Dask's workers, Ray's CPUs) or ``threads``, ``resumed`` (tasks were reused: ``documents_per_second`` is then
    None, the earlier runs' time unknown) and, with a work directory given, ``work_dir``:
    its ``path``, the ``bytes`` the run left there and whether it was ``removed``; and
    ``temp_in_memory`` (True) where the temporary work directory was on the memory file
    system (:func:`neardup.pipeline.plan.memory_work_dir`)."""
    sec = {k: round(v, 3) for k, v in run.seconds.items()}
    total = run.seconds.get("total", 0.0)
    a = run.against
    against = None if a is None else {
        "index": a["path"], "dropped": a["found"], "already_in_index": a["own"],
        "verified": a["how"], "distance": a["distance"]}  # fmt: skip
    family = None if run.family is None else (run.family[0], run.family[2])
    out = summary_head(
        documents=run.n, skipped=run.skipped, clusters=run.clusters, dropped=run.dropped,
        verified=plan.verify, threshold=plan.threshold, candidates=plan.candidates,
        no_shingles=run.no_shingles, temp_bytes=sum(run.temp_bytes.values()),
        scheme=plan.scheme, common=run.common, template=run.template, family=family,
        against=against, bytes_in=run.bytes_in, bytes_out=run.bytes_out,
    )  # fmt: skip
    out["seconds"] = sec
    resumed = any(run.reused.values())
    out["documents_per_second"] = round(run.n / total) if total > 0 and not resumed else None
    out["shards"] = len(plan.shards)
    out["shard_docs"] = round(run.n / max(1, len(plan.shards)))
    out["executor"] = run.executor
    out["threads" if run.executor == "local" else "workers"] = run.workers
    out["resumed"] = resumed
    out["stages"] = {
        k: {"tasks": run.tasks.get(k, 0), "reused": run.reused.get(k, 0),
            "temp_bytes": run.temp_bytes.get(k, 0), "caller_peak_rss": run.peak_rss.get(k, 0),
            "caller_disk_reads": run.disk_reads.get(k, 0),
            "caller_cpu_seconds": round(run.cpu.get(k, 0.0), 3)}
        for k in run.tasks
    }  # fmt: skip
    if plan.work_dir is not None:
        out["work_dir"] = {"path": plan.work_dir, "bytes": sum(run.temp_bytes.values()),
                           "removed": plan.clean_work_dir and not run.work_left}  # fmt: skip
        if run.work_left:
            out["work_dir"]["left"] = run.work_left
    out["shuffle_bytes"] = run.moved_bytes
    if plan.temp_in_memory:  # the work directory's bytes were pages of memory, not of a disk
        out["temp_in_memory"] = True
    return out

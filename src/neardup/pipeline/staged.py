"""A dedup run as stages over shards (:mod:`neardup.pipeline.stages`) on an executor.

The caller holds the plan and a few numbers per shard and per task (documents per shard, task
counts); documents, fingerprints, keys and decisions stay in the work directory, written by the
tasks. With a work directory given, each finished task's results are kept there with a manifest
(the plan's hash, the inputs' sizes and times), so a run stopped at any point (``kill -9``
included) resumes where it was when run again; a different run against the same directory is
refused. Without one, a temporary directory is used and removed. A run stopped by Ctrl-C
cancels the tasks not started and says what it kept; a resumed run says which tasks it reused;
with ``plan.clean_work_dir`` the work directory goes once the outputs are committed (only
what the run wrote there).
"""

from __future__ import annotations

import contextlib
import os
import time
import uuid
from collections.abc import Callable, Iterator, Sequence
from dataclasses import replace
from typing import Any

import numpy as np

from neardup.core.common import common_limit, key_ranges, template_hint
from neardup.distributed.executors import Progress
from neardup.distributed.plan import make_plan
from neardup.errors import InputError
from neardup.io.display import plural
from neardup.io.files import (
    check_unchanged,
    file_stamp,
    input_copies,
    is_url,
)
from neardup.io.rows import MemoryRows
from neardup.io.writers import OutputSet
from neardup.pipeline import layout
from neardup.pipeline import stage_components as C
from neardup.pipeline import stage_prefix as P
from neardup.pipeline import staged_index as I
from neardup.pipeline import stages as S
from neardup.pipeline import task_files as F
from neardup.pipeline.ahead import wait_ahead
from neardup.pipeline.executors import LocalExecutor
from neardup.pipeline.parts import commit_parts, index_clusters, place_records, placed_plan
from neardup.pipeline.plan import (
    ONE_PROCESS_BYTES_PER_DOC,
    SEARCH_BYTES_PER_DOC,
    TASK_BYTES_PER_DOC,
    DedupPlan,
)
from neardup.pipeline.read_cache import renew
from neardup.pipeline.report import json_id
from neardup.pipeline.result import report_no_shingles
from neardup.pipeline.runner import Runner
from neardup.pipeline.scan import check_key_kinds, check_parquet_schemas
from neardup.pipeline.shard_write import PositionLookup, beside_part, records_output
from neardup.pipeline.staged_result import StagedView, build_result, summary
from neardup.pipeline.staged_run import StagedRun
from neardup.pipeline.workdir import (
    clean_work_dir,
    interrupted_note,
    kept_tasks,
    open_work_dir,
    replace_files,
    stage_bytes,
)
from neardup.pipeline.write import is_directory_output, register_outputs, write_summary

__all__ = ["run_staged"]

#: Search fingerprints that one task searches at once (16 bytes each, with their positions;
#: at least 16 shards' worth): above, the search is split into buckets per table group.
ONE_TASK_SEARCH = 1 << 22
SEARCH_PER_SHARD_DOC = 16
#: Shards whose set digests one exact task reads (24 bytes a document with shingles, a small
#: share of what a scan task holds): fewer tasks, each reading fewer shards' digests.
EXACT_SHARDS = 4


def _scan(r: Runner, plan: DedupPlan, on_bad: Callable[[InputError], None] | None,
          memory: MemoryRows | None) -> StagedRun:  # fmt: skip
    shards = range(len(plan.shards))
    counts = [{"lines": 0}] * len(shards)  # in-memory rows: no lines to count
    if plan.rows is None:
        counts = r.map("lines", [(str(s), dict(plan=plan, s=s)) for s in shards])
    first_lines = _first_lines(plan, [c["lines"] for c in counts])
    per = max(1, r.executor.threads // len(shards))  # threads in each scan task
    rows = [None if memory is None else memory.rows(sh.start, sh.end) for sh in plan.shards]
    infos = r.map("scan", [(str(s), dict(plan=plan, s=s, first_line=first_lines[s], threads=per,
                                         rows=rows[s])) for s in shards],
                  memory=_shard_memory(plan))  # fmt: skip
    run = StagedRun(r.work, [i["n"] for i in infos], first_lines)
    k = S.id_buckets(len(run.sizes))
    found = [] if plan.position_ids else r.map(  # positions never repeat
        "ids", [(str(b), dict(work=r.work, plan=plan, sizes=run.sizes, b=b, buckets=k))
                for b in range(k)])  # fmt: skip
    order = _input_order(plan)
    if not plan.skip_bad:  # the input's first error (each scan stopped at its first)
        firsts = [(s, *i["first_bad"]) for s, i in enumerate(infos) if i["first_bad"]]
        firsts += [(f["first"][0], *f["first"][2:]) for f in found if f["first"]]
        if firsts:
            source, line, message = min(firsts, key=order)[1:]
            if memory is not None:  # in-memory input: its documents by position
                raise ValueError(f"document {line}: {message}")
            raise InputError(source, line, message)
    repeats = sorted({s for f in found for s in f["shards"]})
    shingleless = [i["no_shingles"] for i in infos]
    _drop_repeats(r, plan, run, repeats, k, shingleless)
    for s in range(len(run.sizes)):  # one shard's bad records at a time, in input order
        bad = F.read_records(r.work, "scan", s, "bad") if infos[s]["bad"] else []
        bad += S.shard_repeats(r.work, k, s)[1] if s in repeats else []
        for source, line, message in sorted(bad, key=lambda b: order((s, *b))):
            run.skipped += 1
            if on_bad is not None:
                on_bad(InputError(source, line, message))
    run.no_shingles = sum(shingleless)
    if plan.key_field is not None:  # a keep field of numbers or of dates, not both
        check_key_kinds([S.key_kinds(r.work, plan, s) for s in shards], plan.key_field)
    return run


def _first_lines(plan: DedupPlan, lines: list[int]) -> list[int]:
    """The number of each shard's first line in its file: 1 plus the line ends of the earlier
    byte ranges of the same file (``lines``, each shard's); 1 for whole files and rows."""
    first, seen = [], {}
    for s, shard in enumerate(plan.shards):
        n = seen.get(shard.first, 0) if shard.is_range and plan.rows is None else 0
        first.append(1 + n)
        seen[shard.first] = n + lines[s]
    return first


def _input_order(plan: DedupPlan) -> Callable[[tuple], tuple]:
    """The order of bad records ``(shard, source, line, ...)`` in the input: by shard, then
    file, then line."""
    file_at = {f.path: i for i, f in reversed(list(enumerate(plan.files)))}
    return lambda b: (b[0], file_at.get(b[1], 0), b[2])


def _drop_repeats(r: Runner, plan: DedupPlan, run: StagedRun, shards: list[int],
                  buckets: int, shingleless: list[int]) -> None:  # fmt: skip
    """The documents of repeated ids taken out of the spills of ``shards`` (and out of their
    counts of documents without shingles, ``shingleless``)."""
    if not shards:
        return
    tasks = [(str(s), dict(work=r.work, plan=plan, s=s, buckets=buckets)) for s in shards]
    infos = r.map("dedup-ids", tasks)
    for s, info in zip(shards, infos, strict=True):
        # the later stages read the spill without the repeats, in place of the scan's
        replace_files(layout.task_dir(r.work, "dedup-ids", s), layout.task_dir(r.work, "scan", s))
        run.sizes[s] = info["n"]
        shingleless[s] = info["no_shingles"]
    renew(r.work)  # the scan's spills changed: local copies of the old ones are not read


def _copies(r: Runner, plan: DedupPlan, run: StagedRun) -> None:
    """Verified: the documents whose shingle set is a copy of an earlier one's in keep order,
    in tasks by digest range (:func:`neardup.pipeline.stages.exact_copies`), so that the search
    sees each set once (the rule's classes of identical sets: n copies cost O(n),
    not n^2 / 2 pairs)."""
    if not plan.verify:
        return
    k = S.id_buckets(-(-len(run.sizes) // EXACT_SHARDS))
    off, aside = run.offsets, _sketch_aside(run)
    infos = r.map("exact", [(str(b), dict(work=r.work, plan=plan, offsets=off, b=b, buckets=k,
                                         aside=aside)) for b in range(k)])  # fmt: skip
    run.copies, run.copy_pairs = k, sum(i["pairs"] for i in infos)


def _search(r: Runner, plan: DedupPlan, run: StagedRun) -> tuple[list[str], int]:
    """Split, pairs and (verified) verify; returns the tasks holding the edges to decide on,
    and the number of edges."""
    if plan.candidates in ("prefix", "bands"):
        return _prefix_search(r, plan, run)
    n = run.n
    per_task = min(plan.search_docs, max(SEARCH_PER_SHARD_DOC * plan.shard_docs, ONE_TASK_SEARCH))
    sp = make_plan(max(n, 1), plan.distance, plan.blocks, shard_size=per_task, device=plan.device)
    off, copies = run.offsets, run.copies
    if sp.n_shards == 1:  # one task searches all, with the cost model's scheme
        found = r.map("search", [("all", dict(work=r.work, plan=plan, offsets=off,
                                              threads=r.executor.threads, copies=copies))],
                      memory=SEARCH_BYTES_PER_DOC * max(n, 1))  # fmt: skip
        return _verify(r, plan, off, ["all"], found)
    r.map("split", [(str(s), dict(work=r.work, plan=plan, s=s, offset=off[s], sp=sp, copies=copies))
                   for s in range(len(run.sizes))])  # fmt: skip
    buckets = [(g, b) for g in range(len(sp.groups)) for b in range(sp.n_shards)]
    names = [f"{g}-{b}" for g, b in buckets]
    found = r.map("search-buckets",
                  [(nm, dict(work=r.work, plan=plan, n_shards=len(run.sizes), sp=sp, g=g, b=b))
                   for nm, (g, b) in zip(names, buckets, strict=True)],
                  memory=SEARCH_BYTES_PER_DOC * per_task)  # fmt: skip
    run.moved_bytes = sum(f["moved"] for f in found)
    return _verify(r, plan, off, names, found)


def _prefix_search(r: Runner, plan: DedupPlan, run: StagedRun) -> tuple[list[str], int]:
    """The candidates of prefix filtering or of bands (:mod:`neardup.pipeline.stage_prefix`),
    then verify; returns the verify tasks and the number of pairs that reached the
    threshold."""
    shards = range(len(run.sizes))
    off = run.offsets
    if plan.candidates == "prefix":  # the corpus order of the keys
        r.map("prefix-count", [(str(s), dict(work=r.work, plan=plan, s=s)) for s in shards])
        r.map("prefix-merge", [("0", dict(work=r.work, n_shards=len(run.sizes)))])
    k = len(run.sizes)  # key ranges, and position ranges: about a shard's worth each
    r.map("prefix", [(str(s), dict(work=r.work, plan=plan, s=s, offset=off[s], copies=run.copies,
                                    ranges=k)) for s in shards])  # fmt: skip
    bounds = list(off)
    grouped = r.map("prefix-pairs",
                    [(str(b), dict(work=r.work, plan=plan, n_shards=len(run.sizes), b=b,
                                   bounds=bounds, most=P.FAMILY_DOCS))
                     for b in range(k)], memory=_shard_memory(plan))  # fmt: skip
    names = [str(p) for p in range(k)]
    found = r.map("prefix-dedupe",
                  [(nm, dict(work=r.work, plan=plan, tasks=[str(b) for b in range(k)], r=p))
                   for p, nm in enumerate(names)],
                  memory=_shard_memory(plan))  # fmt: skip
    run.moved_bytes = sum(f["moved"] for f in grouped) + sum(f["moved"] for f in found)
    run.family_links = sum(f["family"] for f in found)
    # the first max: ranges ascend by key, as the pass over the whole corpus breaks ties
    _largest_family(run, *max((g["largest"] for g in grouped), key=lambda x: x[0],
                              default=[0, -1]))  # fmt: skip
    run.family_tasks = [nm for nm, f in zip(names, found, strict=True) if f["family"]]
    return _verify(r, plan, off, names, found)


def _verify(
    r: Runner, plan: DedupPlan, off: list[int], names: list[str], found: list[dict]
) -> tuple[list[str], int]:
    """Verify tasks of at most ``shard_docs`` candidate pairs each (fingerprint-only: none);
    returns the tasks holding the edges to decide on, and the number of edges."""
    if not plan.verify:
        return names, sum(f["pairs"] for f in found)
    tasks = []
    for nm, f in zip(names, found, strict=True):
        for lo in range(0, max(1, f["pairs"]), plan.shard_docs):
            tasks.append(
                (
                    f"{nm}.{lo}",
                    dict(
                        work=r.work, plan=plan, offsets=off, task=nm, lo=lo, hi=lo + plan.shard_docs
                    ),
                )
            )
    kept = r.map("verify", tasks, memory=_shard_memory(plan))
    return [name for name, _ in tasks], sum(k["pairs"] for k in kept)


def _decide(r: Runner, plan: DedupPlan, run: StagedRun, names: list[str], pairs: int) -> None:
    routes, k = _components(r, plan, run, names, pairs)
    run.n_decide = k
    off = run.offsets  # one list that every task shares (sent to a cluster once)
    infos = r.map("decide", [(str(t), dict(work=r.work, plan=plan, offsets=off, routes=routes, k=t))
                           for t in range(k)])  # fmt: skip
    run.template = template_hint([row for i in infos for row in i.get("templates", [])])
    run.checks = sum(i.get("checks", 0) for i in infos)
    run.candidates = sum(i.get("candidates", 0) for i in infos)


def _decide_all(r: Runner, plan: DedupPlan, run: StagedRun) -> None:
    """Every document decided in one task (:func:`~neardup.pipeline.stage_decide.decide_all_task`),
    on all the executor's threads, its files those of decide task 0."""
    run.n_decide, run.whole = 1, True
    task = dict(work=r.work, plan=plan, offsets=run.offsets, threads=r.executor.threads,
                aside=_sketch_aside(run))  # fmt: skip
    info = r.map("decide-all", [("0", task)], memory=ONE_PROCESS_BYTES_PER_DOC * max(run.n, 1))
    run.template = template_hint(info[0].get("templates", []))
    run.checks, run.candidates = info[0].get("checks", 0), info[0].get("candidates", 0)
    _largest_family(run, *info[0].get("family", [0, -1]))


def _largest_family(run: StagedRun, m: int, first: int) -> None:
    """The run's largest family (prefix candidates): ``m`` documents whose prefixes share a
    key, the first at position ``first``, with its id; none below two documents."""
    if m >= 2:
        look = PositionLookup(run.work, np.asarray(run.offsets))
        run.family = [m, first, json_id(look.ids(np.array([first]))[0])]


def _common(r: Runner, plan: DedupPlan, run: StagedRun) -> None:
    """The shingle sets without the common shingles, for the later stages
    (:mod:`neardup.pipeline.common_shingles`): each shard's keys counted, the counts merged by
    ranges of the key space, each shard's sets filtered."""
    shards = range(len(run.sizes))
    counts = r.map("common-count", [(str(s), dict(work=r.work, s=s)) for s in shards])
    limit = common_limit(plan.common_shingles, run.n)  # type: ignore[arg-type]
    ranges = key_ranges(sum(c["distinct"] for c in counts))
    merged = r.map("common-merge",
                   [(str(i), dict(work=r.work, n_shards=len(run.sizes), lo=lo, hi=hi, limit=limit))
                    for i, (lo, hi) in enumerate(ranges)])  # fmt: skip
    infos = r.map("common", [(str(s), dict(work=r.work, plan=plan, s=s, merges=len(ranges)))
                           for s in shards])  # fmt: skip
    run.common = {"limit": limit, "keys": sum(m["common"] for m in merged),
                  "all_common": sum(i["all_common"] for i in infos)}  # fmt: skip


#: Most rounds of the components stages: they end in O(log^2 n) rounds, a few in practice.
MAX_ROUNDS = 200


def _components(r: Runner, plan: DedupPlan, run: StagedRun, names: list[str],
                pairs: int) -> tuple[list[str], int]:  # fmt: skip
    """The connected components of the ``pairs`` edges held by tasks ``names`` (of the verify
    stage, or of the pairs stage without verification), of the exact stage's links and of the
    prefix candidates' family links (:mod:`neardup.pipeline.stage_prefix`), in
    tasks of about ``shard_docs`` edges (:mod:`neardup.pipeline.stage_components`); returns the
    cc-route tasks and the number of decide groups, of about ``shard_docs`` documents each
    (whole components)."""
    pairs += run.copy_pairs + run.family_links
    if pairs == 0:
        return [], 0
    stage = "verify" if plan.verify else "pairs"
    aside = _sketch_aside(run)
    off = run.offsets
    parts = min(-(-pairs // plan.shard_docs), len(run.sizes))
    sources = [(t, stage, t, "pairs") for t in names]
    sources += [(f"exact-{b}", "exact", str(b), "pairs") for b in range(run.copies)]
    sources += [(f"family-{t}", "pairs", t, "fam") for t in run.family_tasks]
    names = [name for name, _, _, _ in sources]
    r.map("cc-edges", [(name, dict(work=r.work, stage=st, task=t, offsets=off, aside=aside,
                                    parts=parts, name=a)) for name, st, t, a in sources])  # fmt: skip
    if parts == 1:
        labels = "cc-labels"
        infos = r.map("cc-labels", [("0", dict(work=r.work, tasks=names))])
    else:
        labels, infos = _rounds(r, names, parts)
    nodes = sum(i["nodes"] for i in infos)
    if nodes == 0:  # every pair was set aside
        return [], 0
    k = -(-nodes // plan.shard_docs)
    routes = [str(p) for p in range(parts)]
    r.map("cc-route", [(t, dict(work=r.work, tasks=names, labels=labels, p=p, groups=k))
                       for p, t in enumerate(routes)])  # fmt: skip
    return routes, k


def _sketch_aside(run: StagedRun) -> bool:
    """Whether documents found in the index take no part in the input's own decisions (an
    index with sketches decided them)."""
    return run.against is not None and run.against["how"] == "sketch"


def _rounds(r: Runner, names: list[str], parts: int) -> tuple[str, list[dict]]:
    """Large-star and small-star rounds over ``parts`` partitions until the components are
    stars; returns the stage that holds each node's label, and its tasks' results."""
    stage, tasks = C.EDGES, names
    for i in range(MAX_ROUNDS):
        large = f"cc-large-{i}"
        infos = r.map("cc-large", [(str(p), dict(work=r.work, stage=stage, tasks=tasks, p=p,
                                                   parts=parts)) for p in range(parts)], round=i)  # fmt: skip
        if all(info["star"] for info in infos):
            return large, infos
        stage, tasks = f"cc-small-{i}", [str(p) for p in range(parts)]
        r.map("cc-small", [(str(p), dict(work=r.work, stage=large, tasks=tasks, p=p, parts=parts))
                           for p in range(parts)], round=i)  # fmt: skip
    raise RuntimeError(f"the components did not settle in {MAX_ROUNDS} rounds")


def _near(r: Runner, plan: DedupPlan, run: StagedRun) -> None:
    """Each kept document's nearest kept candidate before it (:mod:`neardup.pipeline.stage_near`),
    in tasks: this process gathers only what the report shows (a few rows and counts per 0.01 of
    Jaccard from each shard), never the pairs."""
    from neardup.pipeline.report import REPORT_NEAR

    off, shards = run.offsets, range(len(run.sizes))
    aside = _sketch_aside(run)
    r.map("near-kept",
          [(str(s), dict(work=r.work, offsets=off, n_decide=run.n_decide, s=s, aside=aside,
                         keys=F.key_stage(plan)))
           for s in shards])  # fmt: skip
    tasks = run.verify_tasks
    r.map("near", [(t, dict(work=r.work, plan=plan, offsets=off, task=t)) for t in tasks])
    # near misses in families (prefix, bands), or all of them (one task decided all)
    decide = run.n_decide if plan.candidates != "fingerprint" or run.whole else 0
    picks = r.map("near-pick",
                  [(str(s), dict(work=r.work, plan=plan, offsets=off, tasks=tasks, s=s,
                                 top=REPORT_NEAR, decide=decide))
                   for s in shards])  # fmt: skip
    rows = sorted((row for p in picks for row in p["top"]), key=lambda row: (-row[0], row[1]))
    pairs = [{"kept": row[3], "nearest": row[4], "jaccard": row[0]} for row in rows[:REPORT_NEAR]]
    counts = np.sum([p["counts"] for p in picks], axis=0, dtype=np.int64).tolist()
    reach = [[t, sum(p["reach"][i][1] for p in picks)]
             for i, (t, _) in enumerate(picks[0]["reach"])]  # fmt: skip
    run.near = {"threshold": float(plan.threshold), "pairs": pairs, "counts": counts,
                "reach": reach}  # fmt: skip


def _write(r: Runner, plan: DedupPlan, run: StagedRun, outputs: OutputSet) -> None:
    off = run.offsets
    place = place_records(r, plan, run, outputs) if plan.placed else [None] * len(run.sizes)
    tasks = [(str(s), dict(work=r.work, plan=plan, offsets=off, n_decide=run.n_decide, s=s,
                           first_line=run.first_lines[s], place=place[s]))
             for s in range(len(run.sizes))]  # fmt: skip
    results = r.map("write", tasks, memory=_shard_memory(plan))
    run.clusters = sum(x["clusters"] for x in results)
    run.dropped = sum(x["dropped"] for x in results)
    run.part_bytes = [x["kept_bytes"] for x in results]
    run.part_rows = [x["kept"] for x in results]
    run.part_clusters = [x["clusters"] for x in results]
    run.removed_bytes = [x.get("removed_bytes", 0) for x in results]
    run.removed_rows = [x.get("removed", 0) for x in results]
    if index_clusters(plan, run):
        I.index_groups(r, plan, run)


def _shard_memory(plan: DedupPlan) -> int:
    """The bytes a task of one shard (scan, verify, write) holds at its peak, as measured
    (:data:`~neardup.pipeline.plan.TASK_BYTES_PER_DOC` a document)."""
    return TASK_BYTES_PER_DOC * plan.shard_docs


def run_staged(
    plan: DedupPlan,
    *,
    executor: Any = None,
    progress: Progress | None = None,
    on_bad: Callable[[InputError], None] | None = None,
    log: Callable[[str], None] | None = None,
    collect: bool = False,
    extra_outputs: Sequence[Any] = (),
    memory: MemoryRows | None = None,
) -> tuple[StagedRun, Any]:
    """Run ``plan`` as stages over its shards on ``executor`` (default: threads of this
    process) and commit its outputs together.

    Parameters
    ----------
    plan : DedupPlan
        A staged plan (:func:`~neardup.pipeline.plan.build_plan`).
    executor : LocalExecutor, DaskExecutor or RayExecutor, optional
        What runs the tasks (default: threads of this process).
    progress : callable, optional
        ``progress(stage, tasks done, tasks)``; an object with a ``reused`` dict is told the
        tasks of each stage found finished in the work directory (a run resumed).
    on_bad, log : callable, optional
        Told each bad record skipped, and the run's messages (one line each).
    collect : bool
        Also return a :class:`~neardup.pipeline.result.DedupResult` (arrays of every document).
    extra_outputs : sequence
        :mod:`neardup.pipeline.extra` outputs (the HTML report), written from that result after
        the others and committed with them.
    memory : MemoryRows, optional
        The in-memory input of a plan of ``rows``: each scan task is given its shard's rows.

    Returns
    -------
    tuple
        The run's figures (:class:`StagedRun`) and the result (None without ``collect``).

    Raises
    ------
    KeyboardInterrupt
        Ctrl-C: the tasks not started are cancelled, nothing is committed, and the message
        says what the work directory kept (:func:`interrupted_note`).
    """
    try:
        run, result = _run_staged(plan, executor, progress, on_bad, log, collect, extra_outputs,
                                  memory)  # fmt: skip
    except KeyboardInterrupt:
        raise KeyboardInterrupt(interrupted_note(plan)) from None
    if plan.work_dir is not None and plan.clean_work_dir:  # once the outputs are committed
        run.work_left = clean_work_dir(plan.work_dir, run.tasks)
    return run, result


def _run_staged(
    plan: DedupPlan,
    executor: Any,
    progress: Progress | None,
    on_bad: Callable[[InputError], None] | None,
    log: Callable[[str], None] | None,
    collect: bool,
    extra_outputs: Sequence[Any],
    memory: MemoryRows | None,
) -> tuple[StagedRun, Any]:
    """:func:`run_staged`, up to its outputs committed."""
    executor = executor if executor is not None else LocalExecutor()
    if not plan.shards:
        raise ValueError("a dedup needs its input cut into shards (build_plan)")
    t_all = time.perf_counter()
    check_parquet_schemas(list(plan.files))  # one output file: one schema
    # an input rewritten while the stages read it is refused
    stamps = {f.path: file_stamp(f.path) for f in plan.files}
    plan = placed_plan(replace(plan, parts_beside=_beside(plan, executor)))
    with contextlib.ExitStack() as stack:
        outputs = stack.enter_context(OutputSet(plan.inputs))
        index, here, plan = I.open_index(stack, plan, outputs, executor)
        _register_outputs(plan, outputs, extra_outputs)
        stack.callback(_remove_beside, plan)  # what a failed run left of them
        work = stack.enter_context(open_work_dir(plan, stamps))
        if plan.work_dir is not None and log is not None and (kept := kept_tasks(work)):
            log(f"resuming from {work}: {plural(kept, 'finished task')} kept there")
        r = Runner(
            work,
            executor,
            progress,
            input_copies(f.path for f in plan.files),
            sums=plan.work_dir is not None,
            temp=os.path.dirname(work)
            if plan.work_dir is None and not plan.work_in_memory
            else None,
        )
        with _changed_first(stamps):
            run = _stages(r, plan, on_bad, progress, memory, here, outputs)
        run.reused, run.executor = r.reused, executor.name
        run.workers = executor.threads if executor.name == "local" else executor.workers
        if plan.verify:
            report_no_shingles(run.n, run.no_shingles, log)
        if index is not None:
            run.against["path"] = str(index.path)  # type: ignore[index]
        t0 = time.perf_counter()
        commit_parts(plan, run, outputs)
        parts = all(getattr(x, "reads_parts", False) for x in extra_outputs)
        result = build_result(plan, run, collect) if collect or not parts else None
        view = result if result is not None else StagedView(plan, run)
        for extra in extra_outputs:
            extra.write(view, outputs)
        run.seconds["commit"] = time.perf_counter() - t0
        run.seconds["total"] = time.perf_counter() - t_all
        if plan.json_summary is not None:
            write_summary(summary(plan, run), plan.json_summary, outputs=outputs)
        for path, stamp in stamps.items():
            check_unchanged(path, stamp)
        I.commit(plan, run, outputs, index, log)
        _say_done(log, plan, run, executor.name)
    return run, result


def _say_done(log: Callable[[str], None] | None, plan: DedupPlan, run: StagedRun,
              executor: str) -> None:  # fmt: skip
    """The run's line of what it found (its shards and executor where there is more than
    this process's one shard)."""
    if log is None:
        return
    where = f" ({plural(len(plan.shards), 'shard')}, {executor} executor)"
    many = len(plan.shards) > 1 or executor != "local"
    log(f"{plural(run.n, 'document')} fingerprinted, {plural(run.clusters, 'cluster')} "
        f"found{where if many else ''}")  # fmt: skip


def _beside(plan: DedupPlan, executor: Any) -> str | None:
    """A token for the parts of a run that writes them beside their output files
    (:attr:`DedupPlan.parts_beside`): its tasks run in this process (their parts are named
    as its temporary files), its work directory is temporary (a kept one holds them for a
    rerun), and its kept (and removed) lines go to local files (not a directory, standard
    output or object storage); else None."""
    if plan.work_dir is not None or executor.name != "local" or plan.kind not in ("jsonl", "lines"):
        return None
    outs = [o for o in (plan.output, plan.removed) if o is not None]
    if not outs or any(o == "-" or is_url(o) or is_directory_output(o, plan.kind) for o in outs):
        return None
    return uuid.uuid4().hex[:12]


def _remove_beside(plan: DedupPlan) -> None:
    """The parts beside the outputs that are still there (a run that failed before its
    commit joined them)."""
    if plan.parts_beside is None:
        return
    for name in ("kept", "removed"):
        if records_output(plan, name) is not None:
            for s in range(len(plan.shards)):
                with contextlib.suppress(FileNotFoundError):
                    os.remove(beside_part(plan, name, s))


def _register_outputs(plan: DedupPlan, outputs: OutputSet, extra_outputs: Sequence[Any]) -> None:
    """Every output of the run checked and registered, before the work directory is opened
    (none may be an input, or in a work directory on object storage)."""
    outputs.add_inputs(f.path for f in plan.files)
    if plan.work_dir is not None and is_url(plan.work_dir):
        outputs.add_inputs([plan.work_dir])
    register_outputs(outputs, list(plan.files), plan.output, plan.clusters, plan.drop_list,
                     plan.json_summary, plan.removed)  # fmt: skip
    for extra in extra_outputs:
        extra.register(outputs)


@contextlib.contextmanager
def _changed_first(stamps: dict[str, tuple]) -> Iterator[None]:
    """An input error of a task is reported as its cause, an input changed since the run
    began, where one did (a Parquet file rewritten while the write stage reads it again)."""
    try:
        yield
    except InputError:
        for path, stamp in stamps.items():
            check_unchanged(path, stamp)
        raise


def _stages(r: Runner, plan: DedupPlan, on_bad: Any, progress: Any,
            memory: MemoryRows | None, here: Any, outputs: OutputSet) -> StagedRun:  # fmt: skip
    """Every stage of the run, up to the outputs' parts in the work directory."""
    run = _scan(r, plan, on_bad, memory)
    if hasattr(progress, "documents"):  # documents/s in the later stages' progress
        progress.documents = run.n
    if plan.against is not None:
        I.check_against(r, plan, run, here)
    if plan.common_shingles is not None:
        _common(r, plan, run)
    wait_ahead()  # the candidates' kernels compiled in another process meanwhile (a first run)
    if run.n <= plan.whole_docs:  # the corpus fits in one process: one task decides all
        _decide_all(r, plan, run)
    else:
        _copies(r, plan, run)  # copies of one set (without the common shingles) searched once
        names, pairs = _search(r, plan, run)
        if plan.verify:
            run.verify_tasks = names
        _decide(r, plan, run, names, pairs)
    if plan.verify and plan.near_misses:
        _near(r, plan, run)
    _write(r, plan, run, outputs)
    run.seconds, run.tasks, run.peak_rss = r.seconds, r.tasks, r.peak_rss
    run.disk_reads, run.cpu = r.disk_reads, r.cpu
    run.temp_bytes = stage_bytes(r.work)
    run.bytes_in = S.input_bytes(plan)
    return run

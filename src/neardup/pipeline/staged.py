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
import heapq
import itertools
import json
import math
import os
import shutil
import tempfile
import time
import uuid
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from neardup.core.common import common_limit, key_ranges, template_hint
from neardup.distributed.plan import make_plan
from neardup.errors import InputError, damaged, reading_back
from neardup.io import objects
from neardup.io.display import plural, size
from neardup.io.files import (
    check_unchanged,
    file_stamp,
    input_copies,
    is_url,
    open_output_stream,
    reading_copies,
)
from neardup.io.leftovers import TEMP_SUFFIX, remove_leftovers, temp_prefix
from neardup.io.writers import OutputSet
from neardup.pipeline import common_shingles as T
from neardup.pipeline import stage_against as A
from neardup.pipeline import stage_components as C
from neardup.pipeline import stage_decide as D
from neardup.pipeline import stage_near as N
from neardup.pipeline import stage_prefix as P
from neardup.pipeline import stages as S
from neardup.pipeline.executors import LocalExecutor, Progress, run_task
from neardup.pipeline.plan import SEARCH_BYTES_PER_DOC, TASK_BYTES_PER_DOC, DedupPlan
from neardup.pipeline.read_cache import forget, local_file, renew
from neardup.pipeline.report import json_id
from neardup.pipeline.result import common_figures, family_figures, report_no_shingles
from neardup.pipeline.scan import check_key_kinds, check_parquet_schemas
from neardup.pipeline.shard_write import PositionLookup, write_task
from neardup.pipeline.workdir import DONE, LOCK, locked, read_json, replace_files, write_object
from neardup.pipeline.write import register_outputs, write_summary

__all__ = ["StagedRun", "open_work_dir", "run_staged"]

#: Search fingerprints that one task searches at once (16 bytes each, with their positions;
#: at least 16 shards' worth): above, the search is split into buckets per table group.
ONE_TASK_SEARCH = 1 << 22
SEARCH_PER_SHARD_DOC = 16
#: Shards whose set digests one exact task reads (24 bytes a document with shingles, a small
#: share of what a scan task holds): fewer tasks, each reading fewer shards' digests.
EXACT_SHARDS = 4
_MANIFEST = "manifest.json"
#: 2: the scan spills hold their id hashes sorted; 3: bad records in files; 4: each task records
#: its files' sizes and CRC-32, the inputs' stamps hold device, inode and status-change time, the
#: near tasks keep each pair's keep key (ekey), the scan its sets' digests (the exact stage); 5:
#: the common stage its sets' digests too (the exact stage on the sets without common shingles);
#: 6: the prefix candidates' stages; 7: their family links, decided with prefix candidates
_VERSION = 7


@dataclass
class StagedRun:
    """What a staged run did: per-shard document counts, totals and per-stage figures."""

    work: str
    sizes: list[int]  #: documents per shard (bad records excluded)
    first_lines: list[int]  #: first line number of each shard
    skipped: int = 0
    dropped: int = 0
    clusters: int = 0
    no_shingles: int = 0
    bytes_in: int = 0
    bytes_out: int = 0
    n_decide: int = 0
    verify_tasks: list[str] = field(default_factory=list)  #: the verify stage's task names
    seconds: dict[str, float] = field(default_factory=dict)
    temp_bytes: dict[str, int] = field(default_factory=dict)
    tasks: dict[str, int] = field(default_factory=dict)
    moved_bytes: int = 0
    peak_rss: dict[str, int] = field(default_factory=dict)
    against: dict[str, Any] | None = None  #: the index check: how, path, distance, found, own
    added: int = 0  #: documents added to the index (``update``)
    near: dict[str, Any] | None = None  #: the report's near misses (a report asked for them)
    part_bytes: list[int] = field(default_factory=list)  #: bytes of each shard's kept part
    part_rows: list[int] = field(default_factory=list)  #: documents each shard kept
    part_clusters: list[int] = field(default_factory=list)  #: clusters each shard leads
    removed_bytes: list[int] = field(default_factory=list)  #: bytes of each removed part
    removed_rows: list[int] = field(default_factory=list)  #: documents each shard removed
    index_parts: int = 0  #: tasks of the index's rows (``--against``)
    reused: dict[str, int] = field(default_factory=dict)  #: tasks found finished, by stage
    executor: str = "local"  #: the executor's name
    workers: int = 1  #: its Dask workers or Ray CPUs (local: its threads)
    work_left: list[str] = field(default_factory=list)  #: names neardup did not write there
    common: dict[str, Any] | None = None  #: the common shingles left out (``common_shingles``)
    template: dict[str, Any] | None = None  #: clusters that look like a template (the hint)
    copies: int = 0  #: tasks of the exact stage (verified), each of ``copy_pairs`` links
    copy_pairs: int = 0  #: documents linked to an earlier copy of their shingle set
    family_tasks: list[str] = field(default_factory=list)  #: pairs tasks with family links
    family_links: int = 0  #: links of documents to their family's first (prefix candidates)
    family: list[Any] | None = None  #: the largest family: documents, the first, its id

    @property
    def offsets(self) -> list[int]:
        return [0, *np.cumsum(self.sizes, dtype=np.int64).tolist()]

    @property
    def n(self) -> int:
        return int(sum(self.sizes))


@contextlib.contextmanager
def open_work_dir(plan: DedupPlan, stamps: Mapping[str, tuple] | None = None) -> Iterator[str]:
    """The run's work directory: ``plan.work_dir`` (made, or resumed when its manifest is this
    plan's and its inputs' ``stamps`` (:func:`~neardup.io.files.file_stamp`, taken here when
    not given) are those it recorded; refused in one line otherwise), locked for the run
    (:func:`~neardup.pipeline.workdir.locked`: a second run is refused), else a temporary one
    removed at the end (named as :mod:`neardup.io.leftovers` says, so that one left by a run
    killed outright is removed by the next run, or ``neardup clean``)."""
    if plan.work_dir is None:
        where = tempfile.gettempdir()
        remove_leftovers(where)  # the work directories of runs killed outright
        work = tempfile.mkdtemp(prefix=temp_prefix("neardup-work"), suffix=TEMP_SUFFIX, dir=where)
        try:
            yield work
        finally:
            shutil.rmtree(work, ignore_errors=True)
        return
    work = plan.work_dir
    if stamps is None:
        stamps = {f.path: file_stamp(f.path) for f in plan.files}
    inputs = json.loads(json.dumps([[p, stamp] for p, stamp in stamps.items()]))
    manifest = {"version": _VERSION, "plan": plan.key(), "inputs": inputs}
    if is_url(work):
        with _object_work_dir(work, manifest):
            yield work
        return
    path = os.path.join(work, _MANIFEST)
    if os.path.isdir(work) and not _ours(work):
        raise _not_ours(work)
    os.makedirs(work, exist_ok=True)
    with locked(work):
        if os.path.exists(path):
            _check_manifest(work, read_json(path), manifest)
            _remove_half_written(work)
        elif set(os.listdir(work)) - {LOCK, f"{_MANIFEST}.tmp"}:
            raise _not_ours(work)
        else:
            write_object(path, manifest)
        yield work


@contextlib.contextmanager
def _object_work_dir(work: str, manifest: dict[str, Any]) -> Iterator[None]:
    """:func:`open_work_dir` for a prefix of object storage (not locked: it has no lock), this
    process's local copies of its files removed at the end
    (:mod:`neardup.pipeline.read_cache`)."""
    objects.writable_root(work, "a work directory")
    names = _top_names(work)
    if _MANIFEST in names:
        _check_manifest(work, read_json(f"{work}/{_MANIFEST}"), manifest)
    elif names:
        raise _not_ours(work)
    else:
        write_object(f"{work}/{_MANIFEST}", manifest)
    renew(work)
    try:
        yield
    finally:
        forget(work)


def _top_names(work: str) -> set[str]:
    """The names right under the prefix ``work`` of object storage (files and prefixes)."""
    return {name.split("/", 1)[0] for name in objects.sizes(work)}


def _ours(work: str) -> bool:
    """Whether the directory ``work`` is empty or holds a work directory's manifest or lock."""
    names = set(os.listdir(work))
    return not names or _MANIFEST in names or LOCK in names


def _not_ours(work: str) -> InputError:
    return InputError(work, None, "is not empty and holds no neardup work: give a new or "
                      "empty --work-dir")  # fmt: skip


def _check_manifest(work: str, found: dict[str, Any], manifest: dict[str, Any]) -> None:
    """Refuse the work directory ``work`` whose manifest ``found`` is not ``manifest``: of
    another format version, of inputs changed since, or of another plan."""
    other = InputError(work, None, "holds the work of a different dedup command: give another "
                       "--work-dir, or remove this one to start over")  # fmt: skip
    if found.get("version") != _VERSION:  # an older neardup's, its stamps of another form
        raise other
    if found.get("inputs") != manifest["inputs"]:
        raise InputError(work, None, "holds work on inputs that changed since: give "
                         "another --work-dir, or remove this one to start over")  # fmt: skip
    if found.get("plan") != manifest["plan"]:
        raise other


def _remove_half_written(work: str) -> None:
    """The task directories a stopped run left half written (``<task>.tmp-<token>``)."""
    for name in os.listdir(work):
        stage = os.path.join(work, name)
        if os.path.isdir(stage):
            for t in os.listdir(stage):
                if ".tmp-" in t:
                    shutil.rmtree(os.path.join(stage, t), ignore_errors=True)


class _Runner:
    """Maps stage functions over tasks on the executor, each through :func:`run_task`, with
    ``copies``: the temporary copies of the piped inputs (:func:`neardup.io.files.spooled`),
    which a task reads in place of the pipe, in whatever process it runs."""

    def __init__(self, work: str, executor: Any, progress: Progress | None,
                 copies: tuple[tuple[str, str], ...] = (), sums: bool = False) -> None:  # fmt: skip
        self.work, self.executor, self.progress = work, executor, progress
        #: each piped input and its copy, which tasks read in its place
        self.copies = copies
        #: tasks record their files' CRC-32 (a work directory a later run may resume)
        self.sums = sums
        self.seconds: dict[str, float] = {}
        self.tasks: dict[str, int] = {}
        self.peak_rss: dict[str, int] = {}  #: this process's peak RSS (bytes) after each stage
        self.reused: dict[str, int] = {}  #: tasks found finished (a run resumed), by stage

    def map(self, stage: str, fn: Callable[..., Any], tasks: Sequence[tuple[str, tuple]],
            memory: int | None = None) -> list:  # fmt: skip
        """``fn`` over ``tasks`` (name, arguments) of ``stage``; ``memory``: the bytes a task
        holds at its peak (the plan's estimate, for an executor that places tasks by memory)."""
        t0 = time.perf_counter()
        finished = _finished_names(self.work, stage, [name for name, _ in tasks])
        done = len(finished)
        self.reused[stage] = self.reused.get(stage, 0) + done
        if hasattr(self.progress, "reused"):  # no rate from tasks reused
            self.progress.reused[stage] = done
        generation = uuid.uuid4().hex  # the local copies of object storage's files, renewed
        renew(self.work, generation)
        # on object storage a task the listing found unfinished does not look for its record
        fresh = is_url(self.work)
        args = [(self.copies, self.sums, generation, fresh and name not in finished, self.work,
                 stage, name, fn, *a) for name, a in tasks]  # fmt: skip
        out = self.executor.map(_run_task, args, stage, self.progress, memory=memory)
        self.seconds[stage] = self.seconds.get(stage, 0.0) + time.perf_counter() - t0
        self.tasks[stage] = self.tasks.get(stage, 0) + len(tasks)
        self.peak_rss[stage] = _peak_rss()
        return out


def _finished(work: str, stage: str, name: str) -> bool:
    """Whether task ``name`` of ``stage`` finished in ``work`` (by an earlier run: reused)."""
    return os.path.exists(os.path.join(work, stage, name, DONE))


def _finished_names(work: str, stage: str, names: Sequence[str]) -> set[str]:
    """The tasks of ``names`` of ``stage`` that finished in ``work`` (on object storage: by one
    listing)."""
    if not is_url(work):
        return {name for name in names if _finished(work, stage, name)}
    found = objects.sizes(f"{work}/{stage}")
    return {name for name in names if f"{name}/{DONE}" in found}


def _run_task(copies: tuple[tuple[str, str], ...], sums: bool, generation: str, fresh: bool,
              *args: Any) -> Any:  # fmt: skip
    """:func:`run_task` reading each piped input of ``copies`` from its copy; ``sums``: its
    files' CRC-32 recorded too; ``generation``: its stage's, for the local copies of a work
    directory on object storage (:mod:`neardup.pipeline.read_cache`); ``fresh``: not finished
    when the stage began (no record to look for)."""
    renew(args[0], generation)
    with reading_copies(copies):
        return run_task(*args, sums=sums, fresh=fresh)


def _scan(r: _Runner, plan: DedupPlan, on_bad: Callable[[InputError], None] | None) -> StagedRun:
    shards = range(len(plan.shards))
    counts = r.map("lines", S.count_lines, [(str(s), (plan, s)) for s in shards])
    first = np.concatenate([[1], 1 + np.cumsum([c["lines"] for c in counts])]).astype(np.int64)
    first_lines = [int(first[s]) if plan.shards[s].is_range else 1 for s in shards]
    per = max(1, r.executor.threads // len(shards))  # threads in each scan task
    infos = r.map("scan", S.scan_shard, [(str(s), (plan, s, first_lines[s], per)) for s in shards],
                  memory=_shard_memory(plan))  # fmt: skip
    run = StagedRun(r.work, [i["n"] for i in infos], first_lines)
    k = S.id_buckets(len(run.sizes))
    found = r.map("ids", S.repeated_ids,
                  [(str(b), (r.work, plan, run.sizes, b, k)) for b in range(k)])  # fmt: skip
    order = _input_order(plan)
    if not plan.skip_bad:  # the input's first error (each scan stopped at its first)
        firsts = [(s, *i["first_bad"]) for s, i in enumerate(infos) if i["first_bad"]]
        firsts += [(f["first"][0], *f["first"][2:]) for f in found if f["first"]]
        if firsts:
            raise InputError(*min(firsts, key=order)[1:])
    repeats = sorted({s for f in found for s in f["shards"]})
    shingleless = [i["no_shingles"] for i in infos]
    _drop_repeats(r, plan, run, repeats, k, shingleless)
    for s in range(len(run.sizes)):  # one shard's bad records at a time, in input order
        bad = S.read_records(r.work, "scan", s, "bad") if infos[s]["bad"] else []
        bad += S.shard_repeats(r.work, k, s)[1] if s in repeats else []
        for source, line, message in sorted(bad, key=lambda b: order((s, *b))):
            run.skipped += 1
            if on_bad is not None:
                on_bad(InputError(source, line, message))
    run.no_shingles = sum(shingleless)
    if plan.key_field is not None:  # a keep field of numbers or of dates, not both
        check_key_kinds([S.key_kinds(r.work, plan, s) for s in shards], plan.key_field)
    return run


def _input_order(plan: DedupPlan) -> Callable[[tuple], tuple]:
    """The order of bad records ``(shard, source, line, ...)`` in the input: by shard, then
    file, then line."""
    file_at = {f.path: i for i, f in reversed(list(enumerate(plan.files)))}
    return lambda b: (b[0], file_at.get(b[1], 0), b[2])


def _drop_repeats(r: _Runner, plan: DedupPlan, run: StagedRun, shards: list[int],
                  buckets: int, shingleless: list[int]) -> None:  # fmt: skip
    """The documents of repeated ids taken out of the spills of ``shards`` (and out of their
    counts of documents without shingles, ``shingleless``)."""
    if not shards:
        return
    tasks = [(str(s), (r.work, plan, s, buckets)) for s in shards]
    infos = r.map("dedup-ids", S.drop_docs, tasks)
    for s, info in zip(shards, infos, strict=True):
        # the later stages read the spill without the repeats, in place of the scan's
        replace_files(
            os.path.join(r.work, "dedup-ids", str(s)), os.path.join(r.work, "scan", str(s))
        )
        run.sizes[s] = info["n"]
        shingleless[s] = info["no_shingles"]
    renew(r.work)  # the scan's spills changed: local copies of the old ones are not read


def _copies(r: _Runner, plan: DedupPlan, run: StagedRun) -> None:
    """Verified: the documents whose shingle set is a copy of an earlier one's in keep order,
    in tasks by digest range (:func:`neardup.pipeline.stages.exact_copies`), so that the search
    sees each set once (the one-process rule's classes of identical sets: n copies cost O(n),
    not n^2 / 2 pairs)."""
    if not plan.verify:
        return
    k = S.id_buckets(-(-len(run.sizes) // EXACT_SHARDS))
    off, aside = run.offsets, _sketch_aside(run)
    infos = r.map("exact", S.exact_copies,
                  [(str(b), (r.work, plan, off, b, k, aside)) for b in range(k)])  # fmt: skip
    run.copies, run.copy_pairs = k, sum(i["pairs"] for i in infos)


def _search(r: _Runner, plan: DedupPlan, run: StagedRun) -> tuple[list[str], int]:
    """Split, pairs and (verified) verify; returns the tasks holding the edges to decide on,
    and the number of edges."""
    if plan.candidates in ("prefix", "bands"):
        return _prefix_search(r, plan, run)
    n = run.n
    per_task = min(plan.search_docs, max(SEARCH_PER_SHARD_DOC * plan.shard_docs, ONE_TASK_SEARCH))
    sp = make_plan(max(n, 1), plan.distance, plan.blocks, shard_size=per_task, device=plan.device)
    off, copies = run.offsets, run.copies
    if sp.n_shards == 1:  # one task searches all, with the cost model's scheme
        found = r.map("pairs", S.search_task,
                      [("all", (r.work, plan, off, r.executor.threads, copies))],
                      memory=SEARCH_BYTES_PER_DOC * max(n, 1))  # fmt: skip
        return _verify(r, plan, off, ["all"], found)
    r.map("split", S.split_task,
          [(str(s), (r.work, plan, s, off[s], sp, copies))
           for s in range(len(run.sizes))])  # fmt: skip
    buckets = [(g, b) for g in range(len(sp.groups)) for b in range(sp.n_shards)]
    names = [f"{g}-{b}" for g, b in buckets]
    found = r.map("pairs", S.pairs_task,
                  [(nm, (r.work, plan, len(run.sizes), sp, g, b))
                   for nm, (g, b) in zip(names, buckets, strict=True)],
                  memory=SEARCH_BYTES_PER_DOC * per_task)  # fmt: skip
    run.moved_bytes = sum(f["moved"] for f in found)
    return _verify(r, plan, off, names, found)


def _prefix_search(r: _Runner, plan: DedupPlan, run: StagedRun) -> tuple[list[str], int]:
    """The candidates of prefix filtering or of bands (:mod:`neardup.pipeline.stage_prefix`),
    then verify; returns the verify tasks and the number of pairs that reached the
    threshold."""
    shards = range(len(run.sizes))
    off = run.offsets
    if plan.candidates == "prefix":  # the corpus order of the keys
        r.map("prefix-count", P.count_task, [(str(s), (r.work, plan, s)) for s in shards])
        r.map("prefix-merge", P.merge_task, [("0", (r.work, len(run.sizes)))])
    k = len(run.sizes)  # key ranges, and position ranges: about a shard's worth each
    r.map("prefix", P.prefix_task,
          [(str(s), (r.work, plan, s, off[s], run.copies, k)) for s in shards])  # fmt: skip
    bounds = list(off)
    grouped = r.map("prefix-pairs", P.pairs_task,
                    [(str(b), (r.work, plan, len(run.sizes), b, bounds, P.FAMILY_DOCS))
                     for b in range(k)], memory=_shard_memory(plan))  # fmt: skip
    names = [str(p) for p in range(k)]
    found = r.map("pairs", P.dedupe_task,
                  [(nm, (r.work, [str(b) for b in range(k)], p)) for p, nm in enumerate(names)],
                  memory=_shard_memory(plan))  # fmt: skip
    run.moved_bytes = sum(f["moved"] for f in grouped) + sum(f["moved"] for f in found)
    run.family_links = sum(f["family"] for f in found)
    m, first = max((g["largest"] for g in grouped), key=lambda x: x[0], default=[0, -1])
    if m >= 2:  # the first max: ranges ascend by key, as the one-process pass breaks ties
        look = PositionLookup(r.work, np.asarray(off))
        run.family = [m, first, json_id(look.ids(np.array([first]))[0])]
    run.family_tasks = [nm for nm, f in zip(names, found, strict=True) if f["family"]]
    return _verify(r, plan, off, names, found)


def _verify(
    r: _Runner, plan: DedupPlan, off: list[int], names: list[str], found: list[dict]
) -> tuple[list[str], int]:
    """Verify tasks of at most ``shard_docs`` candidate pairs each (fingerprint-only: none);
    returns the tasks holding the edges to decide on, and the number of edges."""
    if not plan.verify:
        return names, sum(f["pairs"] for f in found)
    tasks = []
    for nm, f in zip(names, found, strict=True):
        for lo in range(0, max(1, f["pairs"]), plan.shard_docs):
            tasks.append((f"{nm}.{lo}", (r.work, plan, off, nm, lo, lo + plan.shard_docs)))
    kept = r.map("verify", S.verify_task, tasks, memory=_shard_memory(plan))
    return [name for name, _ in tasks], sum(k["pairs"] for k in kept)


def _decide(r: _Runner, plan: DedupPlan, run: StagedRun, names: list[str], pairs: int) -> None:
    routes, k = _components(r, plan, run, names, pairs)
    run.n_decide = k
    off = run.offsets  # one list that every task shares (sent to a cluster once)
    infos = r.map("decide", D.decide_task,
                  [(str(t), (r.work, plan, off, routes, t)) for t in range(k)])  # fmt: skip
    run.template = template_hint([row for i in infos for row in i.get("templates", [])])


def _common(r: _Runner, plan: DedupPlan, run: StagedRun) -> None:
    """The shingle sets without the common shingles, for the later stages
    (:mod:`neardup.pipeline.common_shingles`): each shard's keys counted, the counts merged by
    ranges of the key space, each shard's sets filtered."""
    shards = range(len(run.sizes))
    counts = r.map("common-count", T.count_task, [(str(s), (r.work, s)) for s in shards])
    limit = common_limit(plan.common_shingles, run.n)  # type: ignore[arg-type]
    ranges = key_ranges(sum(c["distinct"] for c in counts))
    merged = r.map("common-merge", T.merge_task,
                   [(str(i), (r.work, len(run.sizes), lo, hi, limit))
                    for i, (lo, hi) in enumerate(ranges)])  # fmt: skip
    infos = r.map("common", T.filter_task,
                  [(str(s), (r.work, plan, s, len(ranges))) for s in shards])  # fmt: skip
    run.common = {"limit": limit, "keys": sum(m["common"] for m in merged),
                  "all_common": sum(i["all_common"] for i in infos)}  # fmt: skip


#: Most rounds of the components stages: they end in O(log^2 n) rounds, a few in practice.
MAX_ROUNDS = 200


def _components(r: _Runner, plan: DedupPlan, run: StagedRun, names: list[str],
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
    r.map(C.EDGES, C.edges_task,
          [(name, (r.work, st, t, off, aside, parts, a)) for name, st, t, a in sources])  # fmt: skip
    if parts == 1:
        labels = "cc-labels"
        infos = r.map(labels, C.labels_task, [("0", (r.work, names))])
    else:
        labels, infos = _rounds(r, names, parts)
    nodes = sum(i["nodes"] for i in infos)
    if nodes == 0:  # every pair was set aside
        return [], 0
    k = -(-nodes // plan.shard_docs)
    routes = [str(p) for p in range(parts)]
    r.map("cc-route", C.route_task,
          [(t, (r.work, names, labels, p, k)) for p, t in enumerate(routes)])  # fmt: skip
    return routes, k


def _sketch_aside(run: StagedRun) -> bool:
    """Whether documents found in the index take no part in the input's own decisions (an
    index with sketches decided them)."""
    return run.against is not None and run.against["how"] == "sketch"


def _rounds(r: _Runner, names: list[str], parts: int) -> tuple[str, list[dict]]:
    """Large-star and small-star rounds over ``parts`` partitions until the components are
    stars; returns the stage that holds each node's label, and its tasks' results."""
    stage, tasks = C.EDGES, names
    for i in range(MAX_ROUNDS):
        large = f"cc-large-{i}"
        infos = r.map(large, C.large_star_task,
                      [(str(p), (r.work, stage, tasks, p, parts)) for p in range(parts)])  # fmt: skip
        if all(info["star"] for info in infos):
            return large, infos
        stage, tasks = f"cc-small-{i}", [str(p) for p in range(parts)]
        r.map(stage, C.small_star_task,
              [(str(p), (r.work, large, tasks, p, parts)) for p in range(parts)])  # fmt: skip
    raise RuntimeError(f"the components did not settle in {MAX_ROUNDS} rounds")


def _near(r: _Runner, plan: DedupPlan, run: StagedRun) -> None:
    """Each kept document's nearest kept candidate before it (:mod:`neardup.pipeline.stage_near`),
    in tasks: this process gathers only what the report shows (a few rows and counts per 0.01 of
    Jaccard from each shard), never the pairs."""
    from neardup.pipeline.report import REPORT_NEAR

    off, shards = run.offsets, range(len(run.sizes))
    aside = _sketch_aside(run)
    r.map("near-kept", N.near_kept_task,
          [(str(s), (r.work, off, run.n_decide, s, aside, S.key_stage(plan)))
           for s in shards])  # fmt: skip
    tasks = run.verify_tasks
    r.map("near", N.near_task, [(t, (r.work, plan, off, t)) for t in tasks])
    decide = run.n_decide if plan.candidates != "fingerprint" else 0  # near misses in families
    picks = r.map("near-pick", N.near_pick_task,
                  [(str(s), (r.work, plan, off, tasks, s, REPORT_NEAR, decide))
                   for s in shards])  # fmt: skip
    rows = sorted((row for p in picks for row in p["top"]), key=lambda row: (-row[0], row[1]))
    pairs = [{"kept": row[3], "nearest": row[4], "jaccard": row[0]} for row in rows[:REPORT_NEAR]]
    counts = np.sum([p["counts"] for p in picks], axis=0, dtype=np.int64).tolist()
    reach = [[t, sum(p["reach"][i][1] for p in picks)]
             for i, (t, _) in enumerate(picks[0]["reach"])]  # fmt: skip
    run.near = {"threshold": float(plan.threshold), "pairs": pairs, "counts": counts,
                "reach": reach}  # fmt: skip


def _write(r: _Runner, plan: DedupPlan, run: StagedRun) -> None:
    off = run.offsets
    tasks = [(str(s), (r.work, plan, off, run.n_decide, s, run.first_lines[s]))
             for s in range(len(run.sizes))]  # fmt: skip
    results = r.map("write", write_task, tasks, memory=_shard_memory(plan))
    run.clusters = sum(x["clusters"] for x in results)
    run.dropped = sum(x["dropped"] for x in results)
    run.part_bytes = [x["kept_bytes"] for x in results]
    run.part_rows = [x["kept"] for x in results]
    run.part_clusters = [x["clusters"] for x in results]
    run.removed_bytes = [x.get("removed_bytes", 0) for x in results]
    run.removed_rows = [x.get("removed", 0) for x in results]
    if _index_clusters(plan, run):
        _index_groups(r, plan, run)


def _shard_memory(plan: DedupPlan) -> int:
    """The bytes a task of one shard (scan, verify, write) holds at its peak, as measured
    (:data:`~neardup.pipeline.plan.TASK_BYTES_PER_DOC` a document)."""
    return TASK_BYTES_PER_DOC * plan.shard_docs


def _index_groups(r: _Runner, plan: DedupPlan, run: StagedRun) -> None:
    """The index's rows (one per entry documents were dropped for), in tasks by the entry's
    hash range, each about ``shard_docs`` found documents."""
    shards = [s for s in range(len(run.sizes)) if run.sizes[s]]
    found = run.against["found"]  # type: ignore[index]
    parts = max(1, min(len(shards), -(-found // plan.shard_docs)))
    off = run.offsets
    r.map("index-split", A.index_split_task,
          [(str(s), (r.work, s, off[s], parts)) for s in shards])  # fmt: skip
    splits = [str(s) for s in shards]
    how = run.against["how"]  # type: ignore[index]
    r.map("index-clusters", A.index_clusters_task,
          [(str(p), (r.work, splits, p, how)) for p in range(parts)])  # fmt: skip
    run.index_parts = parts


def _index_lines(work: str, parts: int) -> Iterator[bytes]:
    """The index's rows as the index-clusters tasks wrote them, merged in input order of
    their first documents (the one-process run's order)."""

    def lines(p: int) -> Iterator[tuple[bytes, int]]:
        path = os.path.join(work, "index-clusters", str(p), "clusters.jsonl")
        first = S.load(work, "index-clusters", p, "first").tolist()
        return zip(_part_lines(path, len(first)), first)  # the lines first: they are checked

    for line, _ in heapq.merge(*(lines(p) for p in range(parts)), key=lambda x: x[1]):
        yield line


def _index_clusters(plan: DedupPlan, run: StagedRun) -> bool:
    """Whether the clusters output gets the index's entries (a task writes them)."""
    wanted = plan.clusters is not None or plan.cluster_parts
    return run.against is not None and wanted and bool(run.against["found"])


def _against(r: _Runner, plan: DedupPlan, run: StagedRun) -> None:
    """Every shard checked against the index, the entries of the documents it holds as
    themselves (in any shard) set aside."""
    shards = [s for s in range(len(run.sizes)) if run.sizes[s]]
    owns = r.map("own", A.own_task, [(str(s), (r.work, plan, s)) for s in shards])
    aside = [e for o in owns for e in o["entries"]]
    infos = r.map("against", A.against_task, [(str(s), (r.work, plan, s, aside)) for s in shards])
    how = infos[0]["how"] if infos else "fingerprint"
    distance = infos[0]["distance"] if infos else plan.fingerprint_distance
    run.against = {"how": how, "path": "", "distance": distance,
                   "found": sum(i["found"] for i in infos), "own": sum(o["own"] for o in owns)}  # fmt: skip


def _check_survivors(plan: DedupPlan, run: StagedRun, index: Any) -> None:
    """Before anything is committed: every survivor's id free in the index (as in the
    one-process run, the document named otherwise)."""
    from types import SimpleNamespace

    from neardup.pipeline.against import check_survivors

    for s in range(len(run.sizes)):
        if run.sizes[s]:
            ids, fps, new = _survivors(run.work, s, run.sizes[s])
            where = SimpleNamespace(files=plan.files, source=S.load(run.work, "scan", s, "src"),
                                    record=S.load(run.work, "scan", s, "rec"))  # fmt: skip
            check_survivors(index, ids, fps, new, where)  # type: ignore[arg-type]


def _survivors(work: str, s: int, n: int) -> tuple[list[Any], np.ndarray, np.ndarray]:
    """Shard ``s``'s ids, fingerprints and the documents to add to the index (kept, and not
    held by it as themselves)."""
    new = np.zeros(n, dtype=bool)
    new[np.asarray(S.load(work, "write", s, "new"))] = True
    return S.load_ids(work, s), np.asarray(S.load(work, "scan", s, "fp")), new


def _add_parts(run: StagedRun, index: Any) -> None:
    """The survivors of every shard added to ``index`` (one commit where it can)."""
    from neardup.pipeline.against import add_parts

    words = A.sketch_words(index)

    def parts() -> Iterator[tuple[Any, ...]]:
        for s in range(len(run.sizes)):
            if run.sizes[s]:
                ids, fps, new = _survivors(run.work, s, run.sizes[s])
                yield ids, fps, new, A.shard_sketches(run.work, s, words)

    run.added = add_parts(index, parts())


def run_staged(
    plan: DedupPlan,
    *,
    executor: Any = None,
    progress: Progress | None = None,
    on_bad: Callable[[InputError], None] | None = None,
    log: Callable[[str], None] | None = None,
    collect: bool = False,
    extra_outputs: Sequence[Any] = (),
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
        run, result = _run_staged(plan, executor, progress, on_bad, log, collect, extra_outputs)
    except KeyboardInterrupt:
        raise KeyboardInterrupt(interrupted_note(plan)) from None
    if plan.work_dir is not None and plan.clean_work_dir:  # once the outputs are committed
        run.work_left = clean_work_dir(plan.work_dir, run.tasks)
    return run, result


def interrupted_note(plan: DedupPlan) -> str:
    """One line: what a run of ``plan`` stopped by Ctrl-C kept, and how to resume it."""
    work = plan.work_dir
    if work is None:
        return ("nothing is kept (its work directory was temporary); with --work-dir DIR a "
                "run stopped can resume")  # fmt: skip
    manifest = os.path.join(work, _MANIFEST)
    if not (objects.exists(manifest) if is_url(work) else os.path.exists(manifest)):
        return f"nothing is kept in {work} yet"
    return (f"the finished tasks are kept in {work} ({size(_dir_bytes(work))}): run the same "
            "command again, with the same --work-dir, to resume")  # fmt: skip


def clean_work_dir(work: str, stages: Iterable[str]) -> list[str]:
    """Remove what a run wrote in its work directory ``work``: its manifest, lock file and the
    directories of its ``stages``; then ``work`` itself, unless something else is left there
    (not neardup's: kept). Returns the names left, sorted."""
    if is_url(work):
        return _clean_object_work_dir(work, stages)
    for name in sorted(os.listdir(work)):
        path = os.path.join(work, name)
        if name in stages and os.path.isdir(path) and not os.path.islink(path):
            shutil.rmtree(path)
        elif name in (_MANIFEST, _MANIFEST + ".tmp", LOCK) and os.path.isfile(path):
            os.remove(path)
    left = sorted(os.listdir(work))
    if not left:
        os.rmdir(work)
    return left


def _clean_object_work_dir(work: str, stages: Iterable[str]) -> list[str]:
    """:func:`clean_work_dir` for a prefix of object storage."""
    stages, names = set(stages), _top_names(work)
    gone = [f"{work}/{name}" for name in sorted(names & stages)]
    objects.remove(gone, work, recursive=True)
    if _MANIFEST in names:
        objects.remove([f"{work}/{_MANIFEST}"], work)
    return sorted(names - stages - {_MANIFEST})


def _kept_tasks(work: str) -> int:
    """The tasks finished in ``work`` (a work directory: each stage a directory of tasks)."""
    if is_url(work):
        return sum(name.count("/") == 2 and name.endswith(f"/{DONE}")
                   for name in objects.sizes(work))  # fmt: skip
    return sum(
        _finished(work, stage, task)
        for stage in os.listdir(work)
        if os.path.isdir(os.path.join(work, stage))
        for task in os.listdir(os.path.join(work, stage))
        if ".tmp-" not in task
    )


def _dir_bytes(path: str) -> int:
    if is_url(path):
        return sum(objects.sizes(path).values())
    return sum(os.path.getsize(os.path.join(d, f)) for d, _, fs in os.walk(path) for f in fs)


def _run_staged(
    plan: DedupPlan,
    executor: Any,
    progress: Progress | None,
    on_bad: Callable[[InputError], None] | None,
    log: Callable[[str], None] | None,
    collect: bool,
    extra_outputs: Sequence[Any],
) -> tuple[StagedRun, Any]:
    """:func:`run_staged`, up to its outputs committed."""
    executor = executor if executor is not None else LocalExecutor()
    if not plan.staged or not plan.shards:
        raise ValueError("a staged dedup needs file input cut into shards (build_plan)")
    t_all = time.perf_counter()
    check_parquet_schemas(list(plan.files))  # one output file: one schema (as in one process)
    # an input rewritten while the stages read it is refused, as in the one-process run
    stamps = {f.path: file_stamp(f.path) for f in plan.files}
    with contextlib.ExitStack() as stack:
        outputs = stack.enter_context(OutputSet(plan.inputs))
        index = _open_index(stack, plan, outputs)
        _register_outputs(plan, outputs, extra_outputs)
        work = stack.enter_context(open_work_dir(plan, stamps))
        if plan.work_dir is not None and log is not None and (kept := _kept_tasks(work)):
            log(f"resuming from {work}: {plural(kept, 'finished task')} kept there")
        r = _Runner(
            work,
            executor,
            progress,
            input_copies(f.path for f in plan.files),
            sums=plan.work_dir is not None,
        )
        with _changed_first(stamps):
            run = _stages(r, plan, on_bad, progress)
        run.reused, run.executor = r.reused, executor.name
        run.workers = executor.threads if executor.name == "local" else executor.workers
        if plan.verify:
            report_no_shingles(run.n, run.no_shingles, log)
        if index is not None:
            run.against["path"] = str(index.path)  # type: ignore[index]
        t0 = time.perf_counter()
        _commit_parts(plan, run, outputs)
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
        _commit(plan, run, outputs, index, log)
        if log is not None:
            log(f"{plural(run.n, 'document')} in {plural(len(plan.shards), 'shard')}, "
                f"{plural(run.clusters, 'cluster')} found ({executor.name} executor)")  # fmt: skip
    return run, result


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
        if _index_clusters(self.plan, self.run):
            where = os.path.join(work, "index-clusters")
            index = _decoded(where, _index_lines(work, self.run.index_parts))
        parts = [os.path.join(work, "write", str(s), "clusters.jsonl")
                 for s in range(len(self.run.sizes))]  # fmt: skip
        clusters = itertools.chain.from_iterable(
            _decoded(path, _part_lines(path, n))
            for path, n in zip(parts, self.run.part_clusters, strict=True)
        )
        return self.run.clusters, clusters, index


def _part_lines(path: str, want: int) -> Iterator[bytes]:
    """The lines of a part a task wrote, which must be the ``want`` lines it wrote (checked
    when they run out)."""
    n = 0
    with _open_part(path, None) as f:
        for n, line in enumerate(f, 1):
            if n > want:
                break
            yield line
    if n != want:
        raise damaged(path, f"{n} lines where its task wrote {want}")


def _decoded(where: str, lines: Iterable[bytes]) -> Iterator[dict[str, Any]]:
    """JSON ``lines`` read back from ``where`` (a part, or the stage that wrote them)."""
    for number, line in enumerate(lines, 1):
        with reading_back(f"{where}:{number}"):
            yield json.loads(line)


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


def _stages(r: _Runner, plan: DedupPlan, on_bad: Any, progress: Any) -> StagedRun:
    """Every stage of the run, up to the outputs' parts in the work directory."""
    run = _scan(r, plan, on_bad)
    if hasattr(progress, "documents"):  # documents/s in the later stages' progress
        progress.documents = run.n
    if plan.against is not None:
        _against(r, plan, run)
    if plan.common_shingles is not None:
        _common(r, plan, run)
    _copies(r, plan, run)  # copies of one set (without the common shingles) searched once
    names, pairs = _search(r, plan, run)
    if plan.verify:
        run.verify_tasks = names
    _decide(r, plan, run, names, pairs)
    if plan.verify and plan.near_misses:
        _near(r, plan, run)
    _write(r, plan, run)
    run.seconds, run.tasks, run.peak_rss = r.seconds, r.tasks, r.peak_rss
    run.temp_bytes = _stage_bytes(r.work)
    run.bytes_in = S.input_bytes(plan)
    return run


def _open_index(stack: contextlib.ExitStack, plan: DedupPlan, outputs: OutputSet) -> Any:
    """The index of ``against`` open in this process (for writing with ``update``, other
    writers held off), its distance checked; the tasks open it again to read it."""
    if plan.against is None:
        return None
    from neardup.pipeline.against import check_distance, open_against

    index = open_against(stack, outputs, plan.against, plan.update, plan.verify)
    words = A.sketch_words(index)
    check_distance(index, plan.distance if words is not None else plan.fingerprint_distance)
    return index


def _commit(plan: DedupPlan, run: StagedRun, outputs: OutputSet, index: Any, log: Any) -> None:
    """Every output committed together; with ``update`` the index learns the survivors once
    their outputs exist, or neither changes (as in the one-process run)."""
    if index is None or not plan.update:
        outputs.commit()
        return
    from neardup.pipeline.against import commit_with_update

    _check_survivors(plan, run, index)
    commit_with_update(outputs, index, lambda: _add_parts(run, index))
    if log is not None:
        log(f"added {plural(run.added, 'document')} to {index.path}")


def _peak_rss() -> int:
    """Peak resident memory of this process so far, in bytes (0 where unknown)."""
    try:
        import resource
    except ImportError:  # not on Windows
        return 0
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


def _stage_bytes(work: str) -> dict[str, int]:
    if is_url(work):
        out: dict[str, int] = {}
        for name, n in objects.sizes(work).items():
            if "/" in name:
                stage = name.split("/", 1)[0]
                out[stage] = out.get(stage, 0) + n
        return dict(sorted(out.items()))
    out = {}
    for stage in sorted(os.listdir(work)):
        root = os.path.join(work, stage)
        if os.path.isdir(root):
            out[stage] = sum(
                os.path.getsize(os.path.join(d, f)) for d, _, fs in os.walk(root) for f in fs
            )
    return out


def _copy_parts(dest: Any, work: str, sizes: Sequence[int | None], name: str) -> int:
    """The shards' parts ``name`` end to end into ``dest``, each checked to hold the ``sizes``
    bytes its write task wrote (None: not checked); in the kernel (no copy through this
    process) where both are plain files of one file system."""
    total = 0
    for s, want in enumerate(sizes):
        path = os.path.join(work, "write", str(s), name)
        f = _open_part(path, want)
        with f:
            size = os.fstat(f.fileno()).st_size
            if size and _copy_in_kernel(f, dest, size):
                total += size
                continue
            while chunk := f.read(1 << 22):
                dest.write(chunk)
                total += len(chunk)
    return total


def _open_part(path: str, want: int | None) -> Any:
    """A part a task wrote, open for reading; missing, unreadable or not of the ``want`` bytes
    its task wrote: the work directory is damaged (never taken as empty)."""
    with reading_back(path):
        f = open(local_file(path), "rb")  # noqa: SIM115 (closed by the caller)
    size = os.fstat(f.fileno()).st_size
    if want is not None and size != want:
        f.close()
        raise damaged(path, f"{size} bytes where its task wrote {want}")
    return f


def _copy_in_kernel(src: Any, dest: Any, size: int) -> bool:
    """``size`` bytes of ``src`` appended to ``dest`` by ``os.copy_file_range``; False (nothing
    copied) where that cannot be used."""
    copy = getattr(os, "copy_file_range", None)
    try:
        fd = dest.fileno()
    except (AttributeError, OSError, ValueError):
        return False
    if copy is None or type(dest).__name__ not in ("BufferedWriter", "FileIO"):
        return False
    dest.flush()
    done = 0
    try:
        while done < size:
            k = copy(src.fileno(), fd, size - done)
            if k == 0:
                break
            done += k
    except OSError:
        if done:
            raise
        return False
    dest.seek(0, os.SEEK_END)
    return done == size


def _commit_parts(plan: DedupPlan, run: StagedRun, outputs: OutputSet) -> None:
    """Each output staged from the shards' parts, in shard order."""
    work, unchecked = run.work, [None] * len(run.sizes)
    for path, name in ((plan.clusters, "clusters.jsonl"), (plan.drop_list, "drop.txt")):
        if path is not None:
            with outputs.open(outputs.get(path), "wb") as f:
                _copy_parts(f, work, unchecked, name)
                if name == "clusters.jsonl" and _index_clusters(plan, run):
                    # the index's entries after the input's clusters
                    for line in _index_lines(work, run.index_parts):
                        f.write(line)
    if plan.output is not None:
        run.bytes_out = _commit_records(plan, run, outputs, outputs.get(plan.output), "kept")
    if plan.removed is not None:
        _commit_records(plan, run, outputs, outputs.get(plan.removed), "removed")


def _commit_records(plan: DedupPlan, run: StagedRun, outputs: OutputSet, out: Any,
                    name: str) -> int:  # fmt: skip
    """The output ``out`` staged from the shards' record parts ``name`` (``"kept"`` or
    ``"removed"``); returns its bytes."""
    sizes, rows = (run.part_bytes, run.part_rows) if name == "kept" else (
        run.removed_bytes, run.removed_rows)  # fmt: skip
    if plan.kind in ("jsonl", "lines") and out.kind == "directory":
        return _place_parts(plan, run, outputs, out, f"{name}.bin", sizes)
    if plan.kind in ("jsonl", "lines"):
        with outputs.open(out, "wb") as raw:
            with open_output_stream(raw, out.path) as w:
                written = _copy_parts(w, run.work, sizes, f"{name}.bin")
            if out.path != "-" and _compressed(out.path):
                written = raw.tell()
        return written
    if plan.kind == "parquet":
        return _join_parquet_parts(plan, run, outputs, out, f"{name}.parquet", sizes, rows)
    return _place_parts(plan, run, outputs, out, "files" if name == "kept" else name, sizes)


def _join_parquet_parts(plan: DedupPlan, run: StagedRun, outputs: OutputSet, out: Any,
                        name: str = "kept.parquet", sizes: Sequence[int] | None = None,
                        rows: Sequence[int] | None = None) -> int:  # fmt: skip
    """The shards' Parquet parts ``name`` (of ``sizes`` bytes and ``rows`` rows each; default
    the kept ones') as one Parquet file, a row group at a time (this process holds one), each
    row group as the part has it: the one-process run's row groups."""
    import pyarrow.parquet as pq

    from neardup.pipeline.write import parquet_schema

    schema = parquet_schema(plan.files[0].path)
    sizes = run.part_bytes if sizes is None else sizes
    rows = run.part_rows if rows is None else rows
    with outputs.open(out, "wb") as w:
        with pq.ParquetWriter(w, schema) as writer:
            for s in range(len(run.sizes)):
                path = os.path.join(run.work, "write", str(s), name)
                with _open_part(path, sizes[s]) as f:
                    for table in _row_groups(path, f, rows[s]):
                        writer.write_table(table)
        return w.tell()


def _row_groups(path: str, f: Any, rows: int) -> Iterator[Any]:
    """The row groups of the Parquet part ``path`` (open as ``f``), which must hold the
    ``rows`` its task wrote."""
    import pyarrow.parquet as pq

    with reading_back(path):
        part = pq.ParquetFile(f)
    if part.metadata.num_rows != rows:
        raise damaged(path, f"{part.metadata.num_rows} rows where its task wrote {rows}")
    for g in range(part.num_row_groups):
        with reading_back(path):
            table = part.read_row_group(g)
        yield table


def _place_parts(
    plan: DedupPlan,
    run: StagedRun,
    outputs: OutputSet,
    out: Any,
    name: str = "kept.bin",
    sizes: Sequence[int] | None = None,
) -> int:
    """Each shard's kept records into the output directory: JSONL and line inputs as a file
    ``part-NNNNN.jsonl`` (or ``.txt``) by shard number, shards that kept nothing left out
    (their concatenation in name order is the one-file output); text inputs as the kept
    files the shard's write task copied under ``name``. Moved from a temporary work
    directory (nothing goes through this process), copied from a kept one (a later run may
    reuse its parts, so they are not shared with files the user may edit) or across file
    systems."""
    ext = ".jsonl" if plan.kind == "jsonl" else ".txt"
    sizes = run.part_bytes if sizes is None else sizes
    if out.remote is not None:
        return _put_parts(run, outputs, out, name, sizes, ext)
    total = 0
    with outputs.open_directory(out) as tmp:
        for s in range(len(run.sizes)):
            part = os.path.join(run.work, "write", str(s), name)
            if not name.endswith(".bin"):
                moved = _move_tree(part, tmp, keep=plan.work_dir is not None)
                if moved != sizes[s]:
                    raise damaged(part, f"{moved} bytes where its task wrote {sizes[s]}")
                total += moved
                continue
            size = sizes[s]
            _open_part(part, size).close()  # there, with the bytes its task wrote
            if size:
                _move(part, os.path.join(tmp, f"part-{s:05d}{ext}"), plan.work_dir is not None)
                total += size
    return total


def _put_parts(run: StagedRun, outputs: OutputSet, out: Any, name: str, sizes: Sequence[int],
               ext: str) -> int:  # fmt: skip
    """Each shard's records part ``name`` (of the ``sizes`` bytes its task wrote) as the object
    ``part-NNNNN.jsonl`` (or ``.txt``) of the output directory ``out`` on object storage, put at
    commit (:mod:`neardup.io.object_outputs`); returns their bytes."""
    found = objects.sizes(f"{run.work}/write") if is_url(run.work) else None  # one listing
    total = 0
    with outputs.open_objects(out) as add:
        for s, size in enumerate(sizes):
            part = os.path.join(run.work, "write", str(s), name)
            if found is None:
                _open_part(part, size).close()
            elif found.get(f"{s}/{name}") != size:
                there = found.get(f"{s}/{name}")
                why = "missing" if there is None else f"{there} bytes where its task wrote {size}"
                raise damaged(part, why)
            if size:
                add(f"part-{s:05d}{ext}", part)
                total += size
    return total


def _move(src: str, dest: str, keep: bool) -> None:
    """``src`` to ``dest``: renamed, or copied where ``keep`` or across file systems (an
    object of object storage: downloaded)."""
    if is_url(src):
        objects.get_file(src, dest)
        return
    if not keep:
        with contextlib.suppress(OSError):
            os.replace(src, dest)
            return
    shutil.copyfile(src, dest)


def _move_tree(src: str, dest: str, keep: bool) -> int:
    """Every file under ``src`` to the same place under ``dest``; returns their bytes."""
    total = 0
    if is_url(src):
        found = objects.sizes(src)
        listed = [(f"{src}/{rel}", rel, n) for rel, n in found.items()]
    else:
        listed = [(os.path.join(root, n), os.path.relpath(os.path.join(root, n), src), None)
                  for root, _, names in os.walk(src) for n in names]  # fmt: skip
    for path, rel, n in listed:
        target = os.path.join(dest, *rel.split("/"))
        os.makedirs(os.path.dirname(target), exist_ok=True)
        total += os.path.getsize(path) if n is None else n
        _move(path, target, keep)
    return total


def _compressed(path: str) -> bool:
    from neardup.io.files import compression_of

    return compression_of(path) is not None


def _scan_arrays(plan: DedupPlan, run: StagedRun) -> Any:
    """The first pass's :class:`~neardup.pipeline.scan.Scan` of every document, from the
    spills (arrays of every document: only where a result is asked for, or for Parquet and
    text-file outputs)."""
    from neardup.pipeline.scan import Scan
    from neardup.pipeline.stream import concat

    shards = [s for s in range(len(run.sizes)) if run.sizes[s]]

    def cat(name: str, dtype: Any) -> np.ndarray:
        return concat([np.asarray(S.load(run.work, "scan", s, name)) for s in shards], dtype)

    ids: list[Any] = []
    for s in shards:
        ids.extend(S.load_ids(run.work, s))
    return Scan(list(plan.files), ids, cat("src", np.int32), cat("rec", np.int64),
                cat("len", np.int64), cat("fp", np.uint64), run.skipped,
                run.bytes_in)  # fmt: skip


def build_result(plan: DedupPlan, run: StagedRun, near_arrays: bool = True) -> Any:
    """A :class:`~neardup.pipeline.result.DedupResult` of the run, as the one-process job
    gives it; the near misses (a report asked for them) as the tasks found them, and with
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
        p = np.asarray(S.load(run.work, "decide", k, "pos"))
        labels[p] = S.load(run.work, "decide", k, "label")
        surv[p] = S.load(run.work, "decide", k, "surv")
        jac[p] = S.load(run.work, "decide", k, "jac")
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
    result.near = run.near
    result.common, result.template = run.common, run.template
    if plan.verify:
        result.candidates, result.scheme = plan.candidates, plan.scheme
        shards = [s for s in range(len(run.sizes)) if run.sizes[s]]
        sizes = np.concatenate(
            [np.diff(S.load(run.work, "scan", s, "koff")) for s in shards] or [np.zeros(0)]
        )
        jac[kept] = np.nan
        near_for = near_jac = None
        if run.near is not None and near_arrays:
            near_for, near_jac = _near_arrays(run)
        result.verified = VerifiedDecisions(kept, np.where(kept, -1, surv), jac,
                                            np.where(kept, -1, dist), sizes == 0,
                                            near_for=near_for, near_jaccard=near_jac,
                                            family=_family(run))  # fmt: skip
        result.threshold = plan.threshold
        result.temp_bytes = sum(run.temp_bytes.values())
    return result


def _family(run: StagedRun) -> tuple[int, int] | None:
    """The largest family as :class:`~neardup.core.verify.VerifiedDecisions` holds it."""
    return None if run.family is None else (int(run.family[0]), int(run.family[1]))


def _near_arrays(run: StagedRun) -> tuple[np.ndarray, np.ndarray]:
    """(near_for, near_jaccard) of every document, as the one-process verified search finds
    them (:func:`neardup.core.verify.decide_verified` with ``near_misses``), from the shards'
    near-pick tasks; -1 and NaN where a document has none."""
    near_for, near_jac = np.full(run.n, -1, dtype=np.int64), np.full(run.n, np.nan)
    for s in range(len(run.sizes)):
        d = np.asarray(S.load(run.work, "near-pick", s, "d"))
        near_for[d] = S.load(run.work, "near-pick", s, "e")
        near_jac[d] = S.load(run.work, "near-pick", s, "jac")
    return near_for, near_jac


def summary(plan: DedupPlan, run: StagedRun) -> dict[str, Any]:
    """The run's summary, the keys of :meth:`DedupResult.summary` and ``stages`` (seconds,
    tasks, tasks reused from the work directory and temporary bytes per stage), ``shards``
    and ``shard_docs`` (documents per shard, on average), ``executor`` and its ``workers``
    (Dask's workers, Ray's CPUs) or ``threads``, ``resumed`` (tasks were reused: ``documents_per_second`` is then
    None, the earlier runs' time unknown) and, with a work directory given, ``work_dir``:
    its ``path``, the ``bytes`` the run left there and whether it was ``removed``."""
    sec = {k: round(v, 3) for k, v in run.seconds.items()}
    total = run.seconds.get("total", 0.0)
    out: dict[str, Any] = {
        "documents": run.n,
        "skipped": run.skipped,
        "clusters": run.clusters,
        "dropped": run.dropped,
        "kept": run.n - run.dropped,
        "verified": plan.verify,
    }
    if plan.verify:
        out.update(threshold=plan.threshold, candidates=plan.candidates,
                   no_shingles=run.no_shingles,
                   temp_bytes=sum(run.temp_bytes.values()))  # fmt: skip
        if plan.scheme is not None:
            out["bands"] = list(plan.scheme)
        out.update(common_figures(run.common, run.template))
        if run.family is not None:
            out.update(family_figures(run.family[0], run.family[2]))
    if run.against is not None:
        a = run.against
        out["against"] = {"index": a["path"], "dropped": a["found"], "already_in_index": a["own"],
                          "verified": a["how"], "distance": a["distance"]}  # fmt: skip
    if run.bytes_in:
        out.update(bytes_in=run.bytes_in, bytes_out=run.bytes_out,
                   bytes_saved=run.bytes_in - run.bytes_out)  # fmt: skip
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
            "temp_bytes": run.temp_bytes.get(k, 0), "caller_peak_rss": run.peak_rss.get(k, 0)}
        for k in run.tasks
    }  # fmt: skip
    if plan.work_dir is not None:
        out["work_dir"] = {"path": plan.work_dir, "bytes": sum(run.temp_bytes.values()),
                           "removed": plan.clean_work_dir and not run.work_left}  # fmt: skip
        if run.work_left:
            out["work_dir"]["left"] = run.work_left
    out["shuffle_bytes"] = run.moved_bytes
    return out


def shard_count(n: int, per: int) -> int:
    return max(1, math.ceil(n / max(1, per)))

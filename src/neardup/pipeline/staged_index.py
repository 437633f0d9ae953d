"""What a dedup run does with the index it is checked against (``against=``,
``--against INDEX``): the index opened for the run, every shard checked against it (by the own
and against tasks of :mod:`neardup.pipeline.stage_against`, or at once by this process where
its tasks cannot check it: :func:`checked_here`), the index's rows of the report and the
clusters, and, with ``update``, the survivors added once the outputs are committed."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from dataclasses import replace
from typing import Any

import numpy as np

from neardup.io.display import plural
from neardup.io.writers import OutputSet
from neardup.pipeline import stage_against as A
from neardup.pipeline import task_files as F
from neardup.pipeline.plan import DedupPlan
from neardup.pipeline.runner import Runner
from neardup.pipeline.staged_run import StagedRun

__all__ = ["check_against", "checked_here", "commit", "index_groups", "open_index"]


def index_groups(r: Runner, plan: DedupPlan, run: StagedRun) -> None:
    """The index's rows (one per entry documents were dropped for), in tasks by the entry's
    hash range, each about ``shard_docs`` found documents."""
    shards = [s for s in range(len(run.sizes)) if run.sizes[s]]
    found = run.against["found"]  # type: ignore[index]
    parts = max(1, min(len(shards), -(-found // plan.shard_docs)))
    off = run.offsets
    r.map("index-split", [(str(s), dict(work=r.work, s=s, offset=off[s], parts=parts))
                          for s in shards])  # fmt: skip
    splits = [str(s) for s in shards]
    how = run.against["how"]  # type: ignore[index]
    r.map("index-clusters", [(str(p), dict(work=r.work, splits=splits, p=p, how=how))
                             for p in range(parts)])  # fmt: skip
    run.index_parts = parts


def check_against(r: Runner, plan: DedupPlan, run: StagedRun, here: Any) -> None:
    """Every shard checked against the index, the entries of the documents it holds as
    themselves (in any shard) set aside; ``here``: an index this process checks every
    document against at once (:func:`_check_here`), else None (each task checks its shard)."""
    shards = [s for s in range(len(run.sizes)) if run.sizes[s]]
    checked = [None] * len(shards) if here is None else _check_here(r, plan, run, shards, here)
    owns = r.map("own", [(str(s), dict(work=r.work, plan=plan, s=s, checked=checked[k]))
                         for k, s in enumerate(shards)])  # fmt: skip
    aside = [e for o in owns for e in o["entries"]]
    infos = r.map("against", [(str(s), dict(work=r.work, plan=plan, s=s, aside=aside,
                                            checked=checked[k]))
                              for k, s in enumerate(shards)])  # fmt: skip
    how = infos[0]["how"] if infos else "fingerprint"
    distance = infos[0]["distance"] if infos else plan.fingerprint_distance
    run.against = {"how": how, "path": "", "distance": distance,
                   "found": sum(i["found"] for i in infos), "own": sum(o["own"] for o in owns)}  # fmt: skip


def checked_here(index: Any, plan: DedupPlan, executor: Any) -> bool:
    """Whether this process checks every document against ``index`` at once, not each task
    its shard: a corpus checked in batch mode on Dask (Parquet files as ``against``), or an
    index the caller opened, on a cluster (whose tasks cannot share it)."""
    return index is not None and (
        index.needs_cluster or (index is plan.against and executor.name != "local")
    )


def _check_here(r: Runner, plan: DedupPlan, run: StagedRun, shards: list[int],
                index: Any) -> list[Any]:  # fmt: skip
    """Every document checked against ``index`` at once, here, as one process checks them
    (the fingerprints, ids and, for an index with sketches, the sketches of every shard; on
    a Dask executor, in batch mode on its cluster); each shard's part of the answer
    (:func:`neardup.pipeline.stage_against.shard_check`), for its own and against tasks to
    save."""
    from neardup.core.sketch import set_sketches
    from neardup.pipeline.against import check_index

    words = A.sketch_words(index)
    fps = np.concatenate([np.asarray(F.load(r.work, "scan", s, "fp")) for s in shards] or
                         [np.zeros(0, np.uint64)])  # fmt: skip
    sketches = None
    if words is not None:
        sketches = set_sketches(F.all_sets(r.work, np.asarray(run.offsets)), words,
                                threads=r.executor.threads)  # fmt: skip
    checked = check_index(
        index, fps, A.index_distance(plan, words),
        sketches=sketches, threshold=plan.threshold, client=getattr(r.executor, "client", None),
        threads=r.executor.threads, device=plan.device,
        ids=None if plan.position_ids else [i for s in shards for i in F.load_ids(r.work, s)],
    )  # fmt: skip
    cuts = np.cumsum([0] + [run.sizes[s] for s in shards])
    return [
        A.shard_check(checked, int(a), int(b)) for a, b in zip(cuts[:-1], cuts[1:], strict=True)
    ]


def _check_survivors(plan: DedupPlan, run: StagedRun, index: Any) -> None:
    """Before anything is committed: every survivor's id free in the index (as in the
    check of a whole run, the document named otherwise)."""
    from types import SimpleNamespace

    from neardup.pipeline.against import check_survivors

    for s in range(len(run.sizes)):
        if run.sizes[s]:
            ids, fps, new = _survivors(run.work, s, run.sizes[s])
            where = SimpleNamespace(files=plan.files, source=F.load(run.work, "scan", s, "src"),
                                    record=F.load(run.work, "scan", s, "rec"))  # fmt: skip
            check_survivors(index, ids, fps, new, where)  # type: ignore[arg-type]


def _survivors(work: str, s: int, n: int) -> tuple[list[Any], np.ndarray, np.ndarray]:
    """Shard ``s``'s ids, fingerprints and the documents to add to the index (kept, and not
    held by it as themselves)."""
    new = np.zeros(n, dtype=bool)
    new[np.asarray(F.load(work, "write", s, "new"))] = True
    return F.load_ids(work, s), np.asarray(F.load(work, "scan", s, "fp")), new


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


def open_index(stack: contextlib.ExitStack, plan: DedupPlan, outputs: OutputSet,
                executor: Any) -> tuple[Any, Any, DedupPlan]:  # fmt: skip
    """The index of ``against`` open in this process (for writing with ``update``, other
    writers held off), its distance checked; the tasks open it again to read it, unless this
    process checks every document against it (:func:`checked_here`: then it is the second
    value, and an index the caller opened is named to the tasks by its path in the plan
    returned)."""
    if plan.against is None:
        return None, None, plan
    from neardup.pipeline.against import check_distance, open_against

    index = open_against(stack, outputs, plan.against, plan.update, plan.verify)
    check_distance(index, A.index_distance(plan, A.sketch_words(index)))
    if not checked_here(index, plan, executor):
        return index, None, plan
    if index is plan.against:  # an object the tasks cannot share: they are given its path
        plan = replace(plan, against=str(index.path))
    return index, index, plan


def commit(plan: DedupPlan, run: StagedRun, outputs: OutputSet, index: Any, log: Any) -> None:
    """Every output committed together; with ``update`` the index learns the survivors once
    their outputs exist, or neither changes."""
    if index is None or not plan.update:
        outputs.commit()
        return
    from neardup.pipeline.against import commit_with_update

    _check_survivors(plan, run, index)
    commit_with_update(outputs, index, lambda: _add_parts(run, index))
    if log is not None:
        log(f"added {plural(run.added, 'document')} to {index.path}")

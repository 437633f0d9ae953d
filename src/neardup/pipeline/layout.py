"""The work directory of a staged dedup, in one place.

A work directory holds one directory per stage, one per task under it
(``WORK/STAGE/TASK/FILE``), and each task's files are declared here: :data:`FILES` names every
file a task of each stage may write (``NAME`` alone is ``NAME.npy``; ``*`` matches within a
name, as :mod:`fnmatch` does). Every path to a task's file is made by :func:`path`, which refuses
one the layout does not declare, and the runner refuses a task that wrote one
(:func:`check_written`): a stage that reads or writes outside this table fails the first test
that runs it, so the table stays the layout.

Stages numbered by round (``cc-large-0``, ``cc-large-1``, ...) share one entry
(``cc-large-*``). While a task runs, :func:`reading` holds the stages its step declares it
reads (:mod:`neardup.pipeline.stage_table`); with ``NEARDUP_CHECK_LAYOUT=1`` in the environment
(the test suite sets it) :func:`path` refuses a read of any other stage.
"""

from __future__ import annotations

import contextlib
import contextvars
import fnmatch
import functools
import os
import re
from collections.abc import Iterable, Iterator

__all__ = ["FILES", "check_written", "path", "reading", "stage_files", "task_dir"]

#: What a scan task writes of its shard (the dedup-ids stage writes the same, without the
#: documents of repeated ids, and its files then take the scan's place): fingerprints (fp),
#: characters (len), where each record is (src: file, rec: place), its line's bytes (nb: a run
#: that writes its kept lines into their output in place), id hashes (idh, sorted:
#: idh_sorted, idh_place), keep-field values (prio, pkind), shingle keys (keys.u32, koff: each
#: document's offsets), set fingerprints (sfp), set digests (dig_hi, dig_lo, dig_place), the
#: ids (ids.pkl) and bad records (bad.jsonl, bad: their offsets).
_SCAN = ("fp", "len", "rec", "src", "nb", "idh", "idh_sorted", "idh_place", "prio", "pkind",
         "keys.u32", "koff", "sfp", "dig_hi", "dig_lo", "dig_place", "ids.pkl",
         "bad", "bad.jsonl")  # fmt: skip

#: Each stage's files, as each of its tasks writes them.
FILES: dict[str, tuple[str, ...]] = {
    "lines": (),
    "scan": _SCAN,
    "ids": ("place", "c", "rep", "rep.jsonl"),
    "dedup-ids": _SCAN,
    "own": ("own",),
    "against": ("found", "dist", "jac", "entries.json"),
    "common-count": ("u", "n"),
    "common-merge": ("common",),
    "common": ("keys.u32", "koff", "sfp", "dig_hi", "dig_lo", "dig_place"),
    "exact": ("pairs", "jac", "c"),
    # candidates: the fingerprint search (split, then pairs) ...
    "split": ("v[0-9]*", "p[0-9]*", "c[0-9]*"),
    # ... or prefix filtering and bands (prefix-count and prefix-merge: prefix only)
    "prefix-count": ("counts",),
    "prefix-merge": ("counts",),
    "prefix": ("k", "p", "j", "s", "c"),
    "prefix-pairs": ("pairs", "c", "f", "cf"),
    # every generator's candidate pairs (and prefix families' links, fam)
    "pairs": ("pairs", "fam"),
    "verify": ("pairs", "jac", "mpairs", "mjac"),
    "cc-edges": ("e", "c", "u", "cu"),
    "cc-labels": ("node", "label"),
    "cc-large-*": ("e", "c", "node", "label"),
    "cc-small-*": ("e", "c"),
    "cc-route": ("e", "c"),
    "decide": ("label", "pos", "surv", "jac", "drop", "nd", "ne", "njac", "nekey", "ncuts"),
    "near-kept": ("part",),
    "kept-bytes": (),
    "near": ("d", "e", "jac", "ekey", "cuts"),
    "near-pick": ("d", "e", "jac"),
    "write": (
        "new",
        "kept.bin",
        "kept.parquet",
        "files/*",
        "removed.bin",
        "removed.parquet",
        "removed/*",
        "clusters.jsonl",
        "drop.txt",
    ),  # fmt: skip
    "index-split": ("c", "rec", "rec.jsonl"),
    "index-clusters": ("clusters.jsonl", "first"),
}

_ROUND = re.compile(r"-\d+$")
#: The step of the task running in this thread and the stages it may read (none: the caller)
_READS: contextvars.ContextVar[tuple[str, tuple[str, ...]] | None] = contextvars.ContextVar(
    "neardup_stage_reads", default=None
)


@contextlib.contextmanager
def reading(step: str, stages: tuple[str, ...]) -> Iterator[None]:
    """Within the block, the task of ``step`` runs: it may read the files of ``stages``."""
    token = _READS.set((step, stages))
    try:
        yield
    finally:
        _READS.reset(token)


def _check_read(stage: str) -> None:
    """Refuse a task's read of a stage its step does not declare (``NEARDUP_CHECK_LAYOUT``)."""
    held = _READS.get()
    if held is None or os.environ.get("NEARDUP_CHECK_LAYOUT") != "1":
        return
    step, stages = held
    if _ROUND.sub("-*", stage) not in stages:
        raise RuntimeError(f"a task of step {step!r} read stage {stage!r}, which its entry in "
                           "neardup.pipeline.stage_table does not declare")  # fmt: skip


def stage_files(stage: str) -> tuple[str, ...]:
    """The files a task of ``stage`` may write (file names; ``.npy`` added where a name has
    no extension). Raises ValueError for a stage the layout does not hold."""
    entry = FILES.get(stage, FILES.get(_ROUND.sub("-*", stage)))
    if entry is None:
        raise ValueError(f"no stage {stage!r} in the work directory's layout")
    return tuple(name if "." in name or "*" in name else f"{name}.npy" for name in entry)


@functools.lru_cache(maxsize=4096)
def _declared(stage: str, name: str) -> bool:
    return any(fnmatch.fnmatchcase(name, pattern) for pattern in stage_files(stage))


def task_dir(work: str, stage: str, task: str | int) -> str:
    """The directory of task ``task`` of ``stage`` (a stage of the layout)."""
    stage_files(stage)
    return os.path.join(work, stage, str(task))


def path(work: str, stage: str, task: str | int, name: str) -> str:
    """The path of file ``name`` (``NAME`` alone: ``NAME.npy``) of task ``task`` of ``stage``
    in the work directory ``work``, or of the directory ``name`` whose files it declares
    (``files/*``: ``files``); ValueError where the layout does not declare it."""
    _check_read(stage)
    return os.path.join(work, stage, str(task), _file_name(stage, name))


@functools.lru_cache(maxsize=4096)
def _file_name(stage: str, name: str) -> str:
    """What :func:`path` names in a task's directory (checked once per stage and name: a
    stage's tasks read thousands of slices)."""
    if any(pattern.startswith(f"{name}/") for pattern in stage_files(stage)):
        return name
    name = name if "." in name else f"{name}.npy"
    if not _declared(stage, name):
        raise ValueError(f"the work directory's layout has no file {name!r} in stage {stage!r}")
    return name


def check_written(stage: str, names: Iterable[str]) -> None:
    """Refuse (RuntimeError) a task of ``stage`` that wrote a file the layout does not
    declare (``names``: relative to the task's directory, ``/`` between parts)."""
    odd = sorted(n for n in names if not _declared(stage, n.replace(os.sep, "/")))
    if odd:
        raise RuntimeError(f"a task of stage {stage!r} wrote {', '.join(odd)}, which the work "
                           "directory's layout does not declare (neardup.pipeline.layout)")  # fmt: skip

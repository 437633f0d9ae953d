"""What runs a staged dedup's stages (:mod:`neardup.pipeline.staged`): each stage mapped over
its tasks on an executor, every task through :func:`~neardup.pipeline.executors.run_task`."""

from __future__ import annotations

import functools
import os
import time
import uuid
from collections.abc import Sequence
from typing import Any

from neardup.distributed.executors import Progress
from neardup.errors import disk_full, holding
from neardup.io.files import is_url, reading_copies
from neardup.pipeline import layout
from neardup.pipeline.executors import run_task
from neardup.pipeline.read_cache import renew
from neardup.pipeline.stage_table import STAGES
from neardup.pipeline.workdir import finished_names, stage_bytes, work_dir_full

__all__ = ["Runner", "disk_reads", "peak_rss"]


class Runner:
    """Maps stage functions over tasks on the executor, each through :func:`run_task`, with
    ``copies``: the temporary copies of the piped inputs (:func:`neardup.io.files.spooled`),
    which a task reads in place of the pipe, in whatever process it runs."""

    def __init__(self, work: str, executor: Any, progress: Progress | None,
                 copies: tuple[tuple[str, str], ...] = (), sums: bool = False,
                 temp: str | None = None) -> None:  # fmt: skip
        self.work, self.executor, self.progress = work, executor, progress
        #: the temporary directory that holds ``work`` (None: a work directory of the user's)
        self.temp = temp
        #: each piped input and its copy, which tasks read in its place
        self.copies = copies
        #: tasks record their files' CRC-32 (a work directory a later run may resume)
        self.sums = sums
        self.seconds: dict[str, float] = {}
        self.tasks: dict[str, int] = {}
        self.peak_rss: dict[str, int] = {}  #: this process's peak RSS (bytes) after each stage
        #: the bytes this process read from storage devices in each stage (page cache misses)
        self.disk_reads: dict[str, int] = {}
        #: the CPU seconds of this process's threads in each stage (with the local executor,
        #: the tasks' own: wall minus this is time spent waiting, on storage among others)
        self.cpu: dict[str, float] = {}
        self.reused: dict[str, int] = {}  #: tasks found finished (a run resumed), by stage

    def map(self, step: str, tasks: Sequence[tuple[str, dict[str, Any]]],
            memory: int | None = None, round: int | None = None) -> list:  # fmt: skip
        """The tasks (name, arguments by the function's parameter names) of ``step``
        (:data:`~neardup.pipeline.stage_table.STAGES`), each ``fn(out, **arguments)``;
        ``memory``: the bytes a task holds at its peak (the plan's estimate, for an executor that
        places tasks by memory); ``round``: a numbered stage's round (``cc-large-0``...)."""
        stage = STAGES[step].stage
        if round is not None:
            stage = stage.replace("*", str(round))
        t0, read0, cpu0 = time.perf_counter(), disk_reads(), time.process_time()
        finished = finished_names(self.work, stage, [name for name, _ in tasks])
        done = len(finished)
        self.reused[stage] = self.reused.get(stage, 0) + done
        if hasattr(self.progress, "reused"):  # no rate from tasks reused
            self.progress.reused[stage] = done
        generation = uuid.uuid4().hex  # the local copies of object storage's files, renewed
        renew(self.work, generation)
        # on object storage a task the listing found unfinished does not look for its record
        fresh = is_url(self.work)
        keys = tuple(tasks[0][1]) if tasks else ()
        odd = next((name for name, a in tasks if set(a) != set(keys)), None)
        if odd is not None:  # every task of a step names the same arguments
            raise TypeError(f"step {step!r}: task {odd!r} names other arguments than {keys}")
        # the arguments by place, the same for every task, so that an executor sends one that
        # every task shares (the plan, the shard offsets) once (neardup.distributed.executors.shared_args)
        args = [(self.copies, self.sums, generation, fresh and name not in finished, self.work,
                 step, stage, name, keys, *(a[k] for k in keys)) for name, a in tasks]  # fmt: skip
        try:
            with holding(f"the tasks of the {stage} stage ({len(tasks)} of them)", _FIX):
                out = self.executor.map(_run_task, args, stage, self.progress, memory=memory)
        except OSError as e:  # a task's files fill the temporary directory: named, with the way out
            elsewhere = e.filename is not None and not os.fspath(e.filename).startswith(self.work)
            if self.temp is None or not disk_full(e) or elsewhere:
                raise
            raise work_dir_full(e, self.temp, sum(stage_bytes(self.work).values())) from e
        self.seconds[stage] = self.seconds.get(stage, 0.0) + time.perf_counter() - t0
        self.tasks[stage] = self.tasks.get(stage, 0) + len(tasks)
        self.peak_rss[stage] = peak_rss()
        self.disk_reads[stage] = self.disk_reads.get(stage, 0) + disk_reads() - read0
        self.cpu[stage] = self.cpu.get(stage, 0.0) + time.process_time() - cpu0
        return out


#: What a run out of memory in a stage can do (docs/guides/memory.md).
_FIX = (
    "give the run a smaller memory budget (--memory, memory=: smaller shards and tasks, and "
    "no single task deciding the whole corpus), or run it on Dask (--workers, --scheduler)"
)


def _run_task(copies: tuple[tuple[str, str], ...], sums: bool, generation: str, fresh: bool,
              work: str, step: str, stage: str, name: str, keys: tuple[str, ...],
              *values: Any) -> Any:  # fmt: skip
    """Task ``name`` of ``step`` (writing ``stage``), :func:`run_task` of the step's function
    with its arguments ``keys`` = ``values``, reading each piped input of ``copies`` from its
    copy; ``sums``: its files' CRC-32 recorded too; ``generation``: its stage's, for the local
    copies of a work directory on object storage (:mod:`neardup.pipeline.read_cache`);
    ``fresh``: not finished when the stage began (no record to look for)."""
    entry = STAGES[step]
    if len(keys) != len(values):
        raise TypeError(f"step {step!r}: {len(values)} values for arguments {keys}")
    fn = functools.partial(entry.fn, **dict(zip(keys, values, strict=True)))
    renew(work, generation)
    with reading_copies(copies), layout.reading(step, entry.reads):
        return run_task(work, stage, name, fn, sums=sums, fresh=fresh,
                        check=layout.check_written)  # fmt: skip


def disk_reads() -> int:
    """The bytes this process has read from storage devices so far (``read_bytes`` of
    ``/proc/self/io``: reads the page cache answered are not counted; 0 where unknown)."""
    try:
        with open("/proc/self/io", "rb") as f:
            for line in f:
                if line.startswith(b"read_bytes:"):
                    return int(line.split()[1])
    except OSError:  # not on Linux
        pass
    return 0


def peak_rss() -> int:
    """Peak resident memory of this process so far, in bytes (0 where unknown)."""
    try:
        import resource
    except ImportError:  # not on Windows
        return 0
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024

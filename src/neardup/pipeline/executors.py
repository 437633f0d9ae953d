"""Executors: what maps a stage function over its tasks (threads of this process here; a Dask
cluster and Ray: :mod:`neardup.distributed.executors`, :mod:`neardup.distributed.ray_executor`),
and the task wrapper every executor runs (:func:`run_task`).

An executor only runs ``fn(*args)`` for each task and gives the results back in task order; it
knows nothing of dedup. Besides ``map`` it tells its ``name``, the ``threads`` each task may use,
its ``workers`` (a cluster's, for the summary), ``slots`` (the tasks it runs at once in all: 1
for this process, whose tasks share its threads) and ``parallel`` (the tasks that run at once
in one process or on one machine, sharing its memory budget). The stage functions of :mod:`neardup.pipeline.stages` are plain,
picklable module functions whose arguments are small (a plan, a few integers), and they read and
write files in the run's work directory, so any pool of workers that shares that directory can
run them.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import tempfile
import uuid
from collections.abc import Callable, Iterable, Iterator, Sequence
from concurrent.futures import FIRST_EXCEPTION, ThreadPoolExecutor, wait
from typing import Any

from neardup.distributed.executors import DaskExecutor, Progress
from neardup.errors import InputError
from neardup.io.files import is_url
from neardup.io.leftovers import TEMP_SUFFIX, temp_prefix
from neardup.pipeline import store
from neardup.pipeline.workdir import DONE, check_task, publish_task, read_done, record_files

__all__ = [
    "LocalExecutor",
    "TaskInputError",
    "open_executor",
    "run_task",
]


def run_task(work: str, stage: str, name: str, fn: Callable[..., Any], *args: Any,
             sums: bool = False, fresh: bool = False,
             check: Callable[[str, Iterable[str]], None] | None = None) -> Any:  # fmt: skip
    """``fn(out, *args)`` with ``out`` a fresh directory that becomes ``work/stage/name`` when
    ``fn`` returns, with its completion record beside its files: its (JSON) result and the
    size of each file it wrote, with ``sums`` (a work directory kept for a later run) their
    CRC-32 too (:mod:`neardup.pipeline.workdir`). A task already finished there (a run
    resumed) is not run again: its files are checked against its record
    (:func:`~neardup.pipeline.workdir.check_task`), its result read back. On object storage
    (``work`` a URL) ``out`` is a local temporary directory whose files are put in place, the
    completion record last (:func:`~neardup.pipeline.workdir.publish_task`). ``fresh``: the
    caller found the task unfinished (its record is not looked for: a request saved);
    ``check``: called with the stage and the names of the files the task wrote, before anything
    records it finished (:func:`neardup.pipeline.layout.check_written`)."""
    final = os.path.join(work, stage, name)
    if store.in_memory(work):
        return _run_in_memory(final, stage, fn, args, check)
    remote = is_url(work)
    if not fresh and _finished(final, remote):
        record = read_done(final)
        check_task(final, record)
        return record["result"]
    if remote:
        tmp = tempfile.mkdtemp(prefix=temp_prefix(f"neardup-{stage}"), suffix=TEMP_SUFFIX)
    else:
        tmp = f"{final}.tmp-{uuid.uuid4().hex[:12]}"
        os.makedirs(tmp)
    try:
        result = fn(tmp, *args)
        # on object storage the sizes are what a rerun checks (a listing), not the CRC-32
        record = {"result": result, "files": record_files(tmp, sums and not remote)}
        if check is not None:
            check(stage, record["files"])
        if remote:
            publish_task(tmp, final, record)
            shutil.rmtree(tmp, ignore_errors=True)
            return result
        with open(os.path.join(tmp, DONE), "w") as f:
            json.dump(record, f)
            f.flush()
            if sums:  # a work directory kept for a rerun: its records reach the disk
                os.fsync(f.fileno())
        try:
            os.rename(tmp, final)
        except OSError:  # the same task finished elsewhere meanwhile (a retried Dask task)
            if not os.path.exists(os.path.join(final, DONE)):
                raise
            shutil.rmtree(tmp, ignore_errors=True)
    except InputError as e:  # sent back from a worker process: it must pickle
        shutil.rmtree(tmp, ignore_errors=True)
        raise TaskInputError(e.source, e.line, e.message) from None
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return result


def _run_in_memory(final: str, stage: str, fn: Callable[..., Any], args: tuple[Any, ...],
                   check: Callable[[str, Iterable[str]], None] | None) -> Any:  # fmt: skip
    """:func:`run_task` in a memory store (:mod:`neardup.pipeline.store`): no record, since
    such a run is never resumed."""
    tmp = f"{final}.tmp-{uuid.uuid4().hex[:12]}"
    try:
        result = fn(tmp, *args)
        if check is not None:
            check(stage, store.sizes(tmp))
        store.move(tmp, final)
    except InputError as e:
        store.remove(tmp)
        raise TaskInputError(e.source, e.line, e.message) from None
    except BaseException:
        store.remove(tmp)
        raise
    return result


def _finished(final: str, remote: bool) -> bool:
    """Whether the task whose directory is ``final`` left its completion record there."""
    if remote:
        from neardup.io.objects import exists

        return exists(f"{final}/{DONE}")
    return os.path.exists(os.path.join(final, DONE))


class TaskInputError(InputError):
    """An :class:`InputError` raised by a task, as it travels back from a worker process."""

    def __reduce__(self) -> tuple[Any, ...]:
        return (TaskInputError, (self.source, self.line, self.message))


class LocalExecutor:
    """Tasks on ``threads`` threads of this process (the stage kernels release the GIL)."""

    name = "local"

    def __init__(self, threads: int | None = None) -> None:
        from neardup.fingerprints.batch import threads_for

        self.threads = threads_for(threads)
        self.workers = self.slots = 1
        self.parallel = self.threads

    def map(self, fn: Callable[..., Any], tasks: Sequence[tuple[Any, ...]], stage: str,
            progress: Progress | None = None, memory: int | None = None) -> list[Any]:  # fmt: skip
        """``fn(*args)`` of every task, in task order; the first failure in task order is
        raised. On a failure or an interrupt (Ctrl-C) the tasks not started are cancelled: only
        those running are waited for. ``memory``, the bytes a task may hold at its peak (an
        estimate), is for executors that place tasks by memory: threads share this process's.
        One task runs in the calling thread (a pool's start and hand-offs cost more than a
        small task: five texts' run took 4.3 ms with a pool a stage)."""
        total = len(tasks)
        if progress is not None:
            progress(stage, 0, total)
        if total <= 1:
            done = [fn(*args) for args in tasks]
            if progress is not None and done:
                progress(stage, 1, 1)
            return done
        pool = ThreadPoolExecutor(min(self.threads, total))
        try:
            futures = [pool.submit(fn, *args) for args in tasks]
            pending = set(futures)
            while pending:
                finished, pending = wait(pending, return_when=FIRST_EXCEPTION)
                if any(f.exception() is not None for f in finished):
                    for f in pending:
                        f.cancel()
                    break
                if progress is not None:
                    progress(stage, total - len(pending), total)
            return [f.result() for f in futures]
        finally:
            pool.shutdown(wait=True, cancel_futures=True)


@contextlib.contextmanager
def open_executor(executor: Any = None, client: Any = None, threads: int | None = None,
                  temp_dir: str | os.PathLike | None = None) -> Iterator[Any]:  # fmt: skip
    """The executor of a run, for the block.

    Parameters
    ----------
    executor : {"local", "ray"} or executor object, optional
        ``"local"`` (the default without ``client``): ``threads`` threads of this process;
        ``"ray"``: the Ray this process is connected to, else a local Ray of ``threads`` CPUs
        (default: all) started for the block, its session in ``temp_dir``, and shut down at its
        end (:func:`neardup.distributed.ray_executor.ray_session`); an object with ``map`` (a
        :class:`LocalExecutor`, a :class:`~neardup.distributed.ray_executor.RayExecutor`): itself.
    client : distributed.Client, optional
        A Dask cluster (not with ``executor``).
    """
    if executor is not None and client is not None:
        raise ValueError("give either client= (a Dask cluster) or executor=, not both")
    if executor is None or executor == "local":
        yield DaskExecutor(client) if client is not None else LocalExecutor(threads)
    elif executor == "ray":
        from neardup.distributed.ray_executor import RayExecutor, ray_session

        with ray_session("local", threads, temp_dir):
            yield RayExecutor()
    elif isinstance(executor, str) or not callable(getattr(executor, "map", None)):
        raise ValueError(f"executor= must be 'local', 'ray' or an executor object with a map "
                         f"method (got {executor!r})")  # fmt: skip
    else:
        yield executor

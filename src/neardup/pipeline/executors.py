"""Executors: what maps a stage function over its tasks (threads of this process, Dask, or Ray:
:mod:`neardup.pipeline.ray_executor`).

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
import types
import uuid
from collections.abc import Callable, Iterable, Iterator, Sequence
from concurrent.futures import FIRST_EXCEPTION, ThreadPoolExecutor, wait
from typing import Any

from neardup.errors import InputError
from neardup.io.files import is_url
from neardup.io.leftovers import TEMP_SUFFIX, temp_prefix
from neardup.pipeline.workdir import DONE, check_task, publish_task, read_done, record_files

__all__ = [
    "DaskExecutor",
    "LocalExecutor",
    "Progress",
    "TaskInputError",
    "open_executor",
    "run_task",
    "shared_args",
]

#: ``progress(stage, tasks done, tasks in the stage)``
Progress = Callable[[str, int, int], None]


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
        estimate), is for executors that place tasks by memory: threads share this process's."""
        total = len(tasks)
        if progress is not None:
            progress(stage, 0, total)
        if total == 0:
            return []
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


class DaskExecutor:
    """Tasks on a Dask cluster (``client``), named ``neardup-<stage>`` in its dashboard; a
    task lost with its worker is run again (:data:`neardup.distributed.RETRIES` times)."""

    name = "dask"

    def __init__(self, client: Any) -> None:
        self.client = client
        self.threads = 1
        self.workers = len(client.scheduler_info().get("workers", {})) or 1
        nthreads = client.nthreads().values()
        self.parallel, self.slots = max(nthreads, default=1), sum(nthreads) or 1

    def map(self, fn: Callable[..., Any], tasks: Sequence[tuple[Any, ...]], stage: str,
            progress: Progress | None = None, memory: int | None = None) -> list[Any]:  # fmt: skip
        """As :meth:`LocalExecutor.map`, on the cluster."""
        from distributed import as_completed

        from neardup.distributed import RETRIES

        total = len(tasks)
        if progress is not None:
            progress(stage, 0, total)
        if total == 0:
            return []
        token = uuid.uuid4().hex[:8]
        # an argument that every task shares (the plan, the shard offsets) goes to the cluster
        # once, as a task of its own, not in each task: the scheduler and its message logs,
        # in this process with a LocalCluster, keep each task's arguments
        shared = {
            i: self.client.submit(
                _value, a, key=f"neardup-{stage}-args-{token}-{i}", pure=False, retries=RETRIES
            )
            for i, a in shared_args(tasks).items()
        }
        futures = [
            self.client.submit(
                fn,
                *[shared.get(j, a) for j, a in enumerate(args)],
                key=f"neardup-{stage}-{token}-{i}",
                pure=False,
                retries=RETRIES,
            )  # fmt: skip
            for i, args in enumerate(tasks)
        ]
        try:
            done = 0
            for f in as_completed(futures):
                if f.status == "error":
                    break
                done += 1
                if progress is not None:
                    progress(stage, done, total)
            return [f.result() for f in futures]
        finally:
            self.client.cancel([*futures, *shared.values()])


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
        end (:func:`neardup.pipeline.ray_executor.ray_session`); an object with ``map`` (a
        :class:`LocalExecutor`, a :class:`~neardup.pipeline.ray_executor.RayExecutor`): itself.
    client : distributed.Client, optional
        A Dask cluster (not with ``executor``).
    """
    if executor is not None and client is not None:
        raise ValueError("give either client= (a Dask cluster) or executor=, not both")
    if executor is None or executor == "local":
        yield DaskExecutor(client) if client is not None else LocalExecutor(threads)
    elif executor == "ray":
        from neardup.pipeline.ray_executor import RayExecutor, ray_session

        with ray_session("local", threads, temp_dir):
            yield RayExecutor()
    elif isinstance(executor, str) or not callable(getattr(executor, "map", None)):
        raise ValueError(f"executor= must be 'local', 'ray' or an executor object with a map "
                         f"method (got {executor!r})")  # fmt: skip
    else:
        yield executor


#: Argument types sent with each task as they are (small, or pickled by reference).
_INLINE = (str, bytes, int, float, bool, type(None), types.FunctionType, types.BuiltinFunctionType)


def shared_args(tasks: Sequence[tuple[Any, ...]]) -> dict[int, Any]:
    """The arguments (by place) that every task of a stage holds as the same object, other than
    strings, numbers and functions: a cluster's executor sends each of them once, not with
    every task."""
    if len(tasks) < 2:
        return {}
    first = tasks[0]
    return {
        i: a
        for i, a in enumerate(first)
        if not isinstance(a, _INLINE) and all(len(t) > i and t[i] is a for t in tasks)
    }


def _value(x: Any) -> Any:
    """``x`` (a task whose result the tasks of a stage take as an argument)."""
    return x

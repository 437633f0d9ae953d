"""A staged dedup's tasks on Ray (``pip install "neardup[ray]"``): :class:`RayExecutor`, and
:func:`ray_session`, which connects this process to Ray for a run.

The tasks of :mod:`neardup.pipeline.stages` are plain module functions whose arguments are small
and which read and write the run's work directory, so the workers of any Ray cluster that share
that directory can run them. Each is a ``ray.remote`` call named ``neardup-<stage>`` (in Ray's
dashboard and ``ray list tasks``) that asks for one CPU and, where the plan estimates it, the
memory the task holds at its peak; a task lost with its worker or node is run again
(:data:`neardup.distributed.RETRIES` times). The arguments every task of a stage shares (the
plan, the shard offsets) go to the object store once (``ray.put``).
"""

from __future__ import annotations

import contextlib
import functools
import logging
import os
import shutil
import signal
import sys
import tempfile
import threading
from collections.abc import Callable, Iterator, Sequence
from typing import Any

from neardup._optional import require
from neardup.distributed.executors import Progress, shared_args
from neardup.errors import InputError, OutOfMemory
from neardup.io.display import plural
from neardup.io.leftovers import TEMP_SUFFIX, remove_leftovers, temp_prefix

__all__ = ["RayExecutor", "ray_session"]

#: What Ray adds to its temporary directory for its longest Unix socket path, less the digits
#: of the process id it ends with (``/session_<date>_<time>_<microseconds>_<pid>``, then
#: ``/sockets/plasma_store``).
_SOCKET_TAIL = 57
#: The longest Unix socket path, less its closing NUL (Linux 108 bytes; macOS 104).
_SOCKET_MAX = 103 if sys.platform == "darwin" else 107


def _ray() -> Any:
    return require("ray", "ray", "running on Ray")


class RayExecutor:
    """Tasks on the Ray cluster this process is connected to (``ray.init``, or
    :func:`ray_session`), one CPU each; a task lost with its worker is run again
    (:data:`neardup.distributed.RETRIES` times).

    Its ``workers`` and ``slots`` are the cluster's CPUs when it is made, ``parallel`` those of
    its largest node (the tasks that share one machine's memory).

    Examples
    --------
    >>> import ray  # doctest: +SKIP
    >>> ray.init(address="auto")  # doctest: +SKIP
    >>> neardup.dedup("corpus.jsonl", output="kept.jsonl", executor=RayExecutor())  # doctest: +SKIP
    """

    name = "ray"

    def __init__(self) -> None:
        ray = _ray()
        if not ray.is_initialized():
            raise ValueError(
                "RayExecutor runs on the Ray this process is connected to: call ray.init() "
                'first, or give executor="ray" (a local Ray for the run)'
            )
        nodes = [n for n in ray.nodes() if n.get("Alive")]
        cpus = [int(n.get("Resources", {}).get("CPU", 0)) for n in nodes]
        self.threads = 1
        self.workers = self.slots = sum(cpus) or 1
        self.parallel = max(cpus, default=0) or 1
        #: the most memory a node offers its tasks: no task asks for more (it could not run)
        self.largest = max((int(n.get("Resources", {}).get("memory", 0)) for n in nodes),
                           default=0)  # fmt: skip

    def map(self, fn: Callable[..., Any], tasks: Sequence[tuple[Any, ...]], stage: str,
            progress: Progress | None = None, memory: int | None = None) -> list[Any]:  # fmt: skip
        """As :meth:`~neardup.pipeline.executors.LocalExecutor.map`, on the cluster: progress as
        tasks finish, and the first failure (an :class:`~neardup.errors.InputError` as the
        same one line) raised once the other tasks are cancelled and those running stopped.
        ``memory``: the bytes a task holds at its peak, asked of Ray (at most a node's)."""
        from neardup.distributed import RETRIES

        ray = _ray()
        total = len(tasks)
        if progress is not None:
            progress(stage, 0, total)
        if total == 0:
            return []
        asks: dict[str, Any] = {"name": f"neardup-{stage}", "num_cpus": 1, "max_retries": RETRIES}
        if memory is not None and self.largest > 0:
            asks["memory"] = max(1, min(int(memory), self.largest))
        remote = _remote(ray).options(**asks)
        shared = {i: ray.put(a) for i, a in shared_args(tasks).items()}
        refs: list[Any] = []
        try:  # (a Ctrl-C while the tasks are sent cancels those sent)
            for args in tasks:
                refs.append(remote.remote(fn, *[shared.get(j, a) for j, a in enumerate(args)]))
            return _gather(ray, refs, stage, progress)
        finally:
            _stop(ray, refs)


def _call(fn: Callable[..., Any], *args: Any) -> Any:
    """``fn(*args)``, on a Ray worker."""
    return fn(*args)


@functools.cache
def _remote(ray: Any) -> Any:
    """:func:`_call` as a Ray remote function (made once: Ray exports it to each job)."""
    return ray.remote(_call)


def _gather(ray: Any, refs: list[Any], stage: str, progress: Progress | None) -> list[Any]:
    """The results of ``refs`` in their order, told to ``progress`` as they finish; the first
    failure to come back is raised."""
    at = {ref: i for i, ref in enumerate(refs)}
    results: list[Any] = [None] * len(refs)
    pending = list(refs)
    while pending:
        ready, pending = ray.wait(pending, num_returns=1)
        if pending:  # and all others finished meanwhile
            more, pending = ray.wait(pending, num_returns=len(pending), timeout=0)
            ready += more
        for ref in ready:
            results[at[ref]] = _result(ray, ref, stage)
        if progress is not None:
            progress(stage, len(refs) - len(pending), len(refs))
    return results


def _result(ray: Any, ref: Any, stage: str) -> Any:
    """The result of the finished task ``ref``, or its error: the task's own (raised from
    Ray's, whose text holds the worker's traceback; an input error as its one line), neardup's
    :class:`~neardup.errors.OutOfMemory` when Ray stopped it for want of memory, and
    :class:`~neardup.distributed.DistributedJobError` when its workers were lost each time."""
    from neardup.distributed import RETRIES, DistributedJobError

    try:
        return ray.get(ref)
    except ray.exceptions.RayTaskError as e:
        cause = getattr(e, "cause", None)
        if isinstance(cause, InputError):
            raise cause from None
        if isinstance(cause, Exception):
            raise cause from e
        raise
    except ray.exceptions.OutOfMemoryError:
        raise OutOfMemory(
            f"out of memory: Ray stopped a neardup-{stage} task {RETRIES + 1} times for want "
            "of memory on its node; give the run a smaller --memory (smaller shards) or its "
            "nodes more memory (docs/guides/memory.md)"
        ) from None
    except ray.exceptions.RayError as e:
        raise DistributedJobError(
            f"Ray lost a neardup-{stage} task ({RETRIES + 1} tries): {str(e).splitlines()[0]}"
        ) from e


def _stop(ray: Any, refs: list[Any]) -> None:
    """The tasks of ``refs`` not finished cancelled (one not started never starts; a running one
    is interrupted as by Ctrl-C, and its half-written task directory removed) and waited for,
    so that none writes to the work directory once the stage is over."""
    if not refs:
        return
    _, left = ray.wait(refs, num_returns=len(refs), timeout=0)
    for ref in left:
        with contextlib.suppress(Exception):
            ray.cancel(ref)
    if left:
        ray.wait(left, num_returns=len(left))


@contextlib.contextmanager
def ray_session(address: str = "local", cpus: int | None = None,
                temp_dir: str | os.PathLike | None = None) -> Iterator[str]:  # fmt: skip
    """This process connected to Ray for the block; yields where the tasks run, in words
    (``"local, 4 CPUs"``). Ray's log messages below ERROR, its workers' output and its
    dashboard are left out: a task that fails raises its own error.

    Parameters
    ----------
    address : str
        ``"local"``: a Ray of this machine started for the block, and shut down at its end (on
        an error or Ctrl-C too); ``"auto"`` (the cluster ``ray start`` runs here, or the one
        ``RAY_ADDRESS`` names) or an address (``"10.0.0.5:6379"``, ``"ray://head:10001"``):
        a running cluster, left running. A process already connected to Ray stays connected
        as it is, and the block runs there.
    cpus : int, optional
        The CPUs of a local Ray (default: all of this machine's).
    temp_dir : path, optional
        Where a local Ray keeps its session (sockets, logs, spilled objects): a directory of its
        own there (default: ``TMPDIR``), removed at the end; Ray's own default, ``/tmp/ray``,
        where that path would be too long for Ray's sockets.

    Raises
    ------
    ValueError
        ``cpus`` with a running cluster (it has its own).
    ImportError
        Ray is not installed: one line naming ``pip install "neardup[ray]"``.
    """
    ray = _ray()
    if ray.is_initialized():
        yield f"this process's connection, {_cpus(ray)}"
        return
    if address != "local" and cpus is not None:
        raise ValueError(
            "--workers N (cpus=) sets the CPUs of a local Ray (--ray local); a running "
            "cluster has its own"
        )
    quiet = {"logging_level": logging.ERROR, "log_to_driver": False}
    with contextlib.ExitStack() as stack:
        if address == "local":
            where = stack.enter_context(_scratch(temp_dir))
            with _own_sigterm():
                ray.init(num_cpus=cpus, include_dashboard=False, _temp_dir=where, **quiet)
            stack.callback(ray.shutdown)
            yield f"local, {_cpus(ray)}"
            return
        with _own_sigterm():
            ray.init(address=address, **quiet)
        stack.callback(ray.shutdown)
        yield f"the cluster at {address}, {_cpus(ray)}"


def _cpus(ray: Any) -> str:
    """The CPUs of the Ray cluster this process is connected to, in words."""
    return plural(int(ray.cluster_resources().get("CPU", 0)), "CPU")


@contextlib.contextmanager
def _scratch(temp_dir: str | os.PathLike | None) -> Iterator[str | None]:
    """A new directory for a local Ray's session in ``temp_dir`` (default ``TMPDIR``), removed
    on exit, named as :mod:`neardup.io.leftovers` says (one a run killed outright left is
    removed by the next, or ``neardup clean``); None (Ray's default) where the paths of Ray's
    sockets in it would be too long."""
    where = os.path.abspath(os.fspath(temp_dir) if temp_dir is not None else tempfile.gettempdir())
    room = _SOCKET_MAX - _SOCKET_TAIL - len(str(os.getpid()))
    # mkdtemp adds 8 characters to the prefix; a shorter name where the longer does not fit
    fits = [n for n in ("ray", "r") if len(os.path.join(where, temp_prefix(n)).encode()) + 8
            + len(TEMP_SUFFIX) <= room]  # fmt: skip
    if not fits:
        yield None
        return
    remove_leftovers(where)
    path = tempfile.mkdtemp(prefix=temp_prefix(fits[0]), suffix=TEMP_SUFFIX, dir=where)
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)


@contextlib.contextmanager
def _own_sigterm() -> Iterator[None]:
    """Keep this process's SIGTERM handler across ``ray.init``, which sets its own (exit at
    once): the command line's unwinds a run, removing its temporary files."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    handler = signal.getsignal(signal.SIGTERM)
    try:
        yield
    finally:
        if handler is not None:
            signal.signal(signal.SIGTERM, handler)

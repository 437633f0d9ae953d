"""The executors of a run's stages on a cluster: Dask (:class:`DaskExecutor`) here, Ray in
:mod:`neardup.distributed.ray_executor`. An executor only runs ``fn(*args)`` for each task and
gives the results back in task order; it knows nothing of dedup (the stage functions and the
task wrapper are :mod:`neardup.pipeline`'s, sent to the workers by reference)."""

from __future__ import annotations

import types
import uuid
from collections.abc import Callable, Sequence
from typing import Any

__all__ = ["DaskExecutor", "Progress", "shared_args"]

#: ``progress(stage, tasks done, tasks in the stage)``
Progress = Callable[[str, int, int], None]


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
        """As :meth:`neardup.pipeline.executors.LocalExecutor.map`, on the cluster."""
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

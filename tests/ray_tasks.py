"""Task functions that tests/test_ray.py runs on Ray's workers (which import them from here, the
tests' folder being on their PYTHONPATH): a task killed once, a task that fails on bad input,
a slow task."""

from __future__ import annotations

import glob
import os
import time
from typing import Any

from neardup.errors import InputError


def pauses_once(marks: str, fn: Any, *args: Any) -> Any:
    """``fn(*args)``; the first call of all, in whatever process, first writes its process id
    to ``marks/pid`` and sleeps, for the test to kill its worker."""
    try:
        fd = os.open(os.path.join(marks, "pid"), os.O_CREAT | os.O_EXCL | os.O_WRONLY)
    except FileExistsError:
        return fn(*args)
    os.write(fd, str(os.getpid()).encode())
    os.close(fd)
    time.sleep(300)
    return fn(*args)


def bad_line(out: str, i: int) -> int:
    """A task (for :func:`neardup.pipeline.executors.run_task`) whose third call meets a bad
    record."""
    if i == 2:
        raise InputError("in.jsonl", 7, "invalid JSON")
    return i


def sleepy(marks: str, i: int) -> int:
    """Marks ``marks/started-i``, then (the first task) waits for another task to start, or
    (the others) waits for ``marks/interrupted`` (the caller's Ctrl-C) and 3 s more (time
    for the executor to stop it, on a loaded machine too), then marks ``marks/done-i``: a task
    still running after the interrupt ends that way."""
    open(os.path.join(marks, f"started-{i}"), "w").close()
    deadline = time.monotonic() + 60
    if i == 0:
        while len(glob.glob(os.path.join(marks, "started-*"))) < 2 and time.monotonic() < deadline:
            time.sleep(0.02)
    else:
        while not os.path.exists(os.path.join(marks, "interrupted")):
            if time.monotonic() > deadline:
                break
            time.sleep(0.02)
        time.sleep(3)
    open(os.path.join(marks, f"done-{i}"), "w").close()
    return i

"""Compiling ahead: on a first run, the search and verification kernels are compiled in a second
process while this one compiles and runs the fingerprinting.

numba compiles a kernel at its first call and caches it on disk (:mod:`neardup.compiled`), so a
first dedup compiles the fingerprint kernels, fingerprints, then compiles the search and
verification kernels: seconds each, one after the other on one core. :func:`compile_ahead`
starts a child process (``python -m neardup.pipeline.ahead``) that runs the job's search and
verification on three made-up documents, which compiles the same kernels (same types) into
numba's cache on another core; the job waits for it (:func:`wait_ahead`) before its own search,
which then loads them from the cache. The outputs do not depend on it: without the child, or if
it fails, the job compiles what it needs itself. It starts only when a CPU is idle for it: on a
busy machine the two processes would take turns, and the child's own start-up (an interpreter,
numpy and numba) would be a loss.

The child ignores Ctrl-C and is always waited for (killed only if it outlives
:data:`WAIT_SECONDS`), so no process outlives the run, and numba never stops in the middle of
writing a cache file.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
from collections.abc import Callable, Iterator

from neardup import compiled, config

__all__ = [
    "WAIT_SECONDS",
    "ahead_groups",
    "announce",
    "compile_ahead",
    "dedup_groups",
    "wait_ahead",
]

#: Compile ahead (``config.COMPILE_AHEAD``) only when the usable CPUs minus the 1-minute load
#: average is at least this. The second process
#: costs about 1.4 s of CPU (an interpreter, numpy and numba of its own): with a CPU idle it
#: gains more than that, with none the two processes take turns and it is a loss
#: (``bench/startup.py --ahead`` on a shared 2-core machine: a cold dedup of the sample took
#: 5.8 s instead of 6.6 s at load 1.3-2.1, 7.0 s instead of 5.8 s at load 2.7-2.9).
COMPILE_AHEAD_SPARE_CPUS = 1.5

#: Longest wait for the child (seconds); a child still compiling then is killed.
WAIT_SECONDS = 300.0

#: kernel groups the child compiles, for a dedup verified with fingerprint candidates
#: ("verify"), with prefix candidates ("prefix"), with bands ("bands") or fingerprint-only
#: ("search")
_GROUPS = {"verify": ["search", "verify"], "prefix": ["prefix"], "bands": ["prefix", "bands"],
           "search": ["search"]}  # fmt: skip


def _mode(verify: bool, candidates: str = "fingerprint") -> str:
    """The kernels a dedup decides with: a key of :data:`_GROUPS`."""
    if not verify:
        return "search"
    return candidates if candidates in ("prefix", "bands") else "verify"


def ahead_groups(verify: bool, candidates: str = "fingerprint") -> list[str]:
    """The kernel groups :func:`compile_ahead` compiles in its child for such a dedup."""
    return list(_GROUPS[_mode(verify, candidates)])


_pending: list[subprocess.Popen] = []


def _usable_cpus() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # pragma: no cover - not on Linux
        return os.cpu_count() or 1


def _spare_cpus(cpus: int) -> float:
    """CPUs that other processes leave idle, by the 1-minute load average."""
    try:
        return cpus - os.getloadavg()[0]
    except (AttributeError, OSError):  # pragma: no cover - no load average on this system
        return float(cpus)


def _start(mode: str, threads: int | None) -> subprocess.Popen | None:
    """The child, when it helps: some of its groups are not compiled yet, and this run may use
    a second CPU (``threads`` and the CPUs usable) that is idle
    (:data:`COMPILE_AHEAD_SPARE_CPUS`); else None."""
    if not config.COMPILE_AHEAD:
        return None
    cpus = _usable_cpus() if threads is None else min(threads, _usable_cpus())
    groups = _GROUPS[mode]
    if cpus < 2 or all(compiled.is_compiled(g) for g in groups):
        return None
    if _spare_cpus(cpus) < COMPILE_AHEAD_SPARE_CPUS:
        return None  # no CPU idle: the child would only take turns with this process
    if any(compiled.cache_dir_for(compiled.GROUPS[g][0]) is None for g in groups):
        return None  # numba can cache nowhere: what the child compiled would be lost
    try:
        return subprocess.Popen(
            [sys.executable, "-m", __name__, mode],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
    except OSError:  # no interpreter to start: the job compiles everything itself
        return None


def _reap(proc: subprocess.Popen) -> None:
    try:
        proc.wait(WAIT_SECONDS)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
    finally:
        with contextlib.suppress(ValueError):
            _pending.remove(proc)


@contextlib.contextmanager
def compile_ahead(verify: bool = True, threads: int | None = None,
                  candidates: str = "fingerprint") -> Iterator[bool]:  # fmt: skip
    """Compile the kernels of a dedup's search (``verify``: and verification, with
    ``candidates``) in a child process while the body runs, on a first run with a second CPU
    to spare.

    Yields whether a child was started. The job waits for it before its search
    (:func:`wait_ahead`); on leaving the block it is waited for in any case.
    """
    proc = _start(_mode(verify, candidates), threads)
    if proc is None:
        yield False
        return
    _pending.append(proc)
    try:
        yield True
    finally:
        _reap(proc)


def wait_ahead() -> None:
    """Wait until the kernels compiled ahead are in numba's cache (at once when none are)."""
    for proc in list(_pending):
        _reap(proc)


def dedup_groups(files: list | None, verify: bool, against: bool,
                 candidates: str = "fingerprint") -> list[str]:  # fmt: skip
    """The kernel groups (:data:`neardup.compiled.GROUPS`) a dedup of ``files`` (None: data in
    memory) compiles on its first run."""
    from neardup.pipeline.stream import reads_in_blocks

    reader = files is not None and reads_in_blocks(files)
    return [
        "fingerprint",
        *(["reader"] if reader else []),
        *(["query", "index"] if against else []),
        *_GROUPS[_mode(verify, candidates)],
    ]


def announce(groups: list[str], log: Callable[[str], None] | None = None) -> None:
    """Say, before it happens, that this call compiles kernels (a first run) and about how long
    it takes, unless this process said so already: to ``log``, else on stderr
    (:data:`neardup.config.COMPILE_NOTICE`)."""
    notice = compiled.first_notice(groups)
    if notice is None:
        return
    if log is not None:
        log(notice)
    elif config.COMPILE_NOTICE:
        print(f"neardup: {notice}", file=sys.stderr, flush=True)


# -- the child ------------------------------------------------------------------------------------


def _compile(mode: str) -> None:
    """Run the decision of ``mode`` (a key of :data:`_GROUPS`) on three documents (two
    near-duplicates), as the task that decides a whole run calls it
    (:func:`neardup.pipeline.stage_decide.decide_all_task`), with the same types."""
    import numpy as np

    from neardup.core.decide import DEFAULT_DEDUP_DISTANCE, DEFAULT_DEDUP_THRESHOLD, keep_order
    from neardup.core.similarity import ShingleSets, set_fingerprints
    from neardup.core.verify import decide_verified, priority_order

    lengths = np.array([40, 40, 40], dtype=np.int64)
    if mode == "search":
        fps = np.array([0, 1, 1 << 63], dtype=np.uint64)
        keep_order(fps, priority_order(3, "first", lengths), DEFAULT_DEDUP_DISTANCE)
        return
    # sorted, unique keys; the second set differs from the first in one key of ten; read-only,
    # as the run's sets of every shard are (neardup.pipeline.task_files.all_sets)
    keys = np.r_[0:10, 0:9, 99, 50:60].astype(np.uint32)
    keys.setflags(write=False)
    sets = ShingleSets(np.array([0, 10, 20, 30], dtype=np.int64), keys)
    candidates = mode if mode in ("prefix", "bands") else "fingerprint"
    decide_verified(sets, set_fingerprints(sets), DEFAULT_DEDUP_THRESHOLD, lengths=lengths,
                    candidates=candidates)  # fmt: skip


def main(argv: list[str]) -> int:
    """``python -m neardup.pipeline.ahead verify|prefix|bands|search``."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the parent's Ctrl-C: finish, then exit
    if len(argv) != 1 or argv[0] not in _GROUPS:
        print("usage: python -m neardup.pipeline.ahead verify|prefix|search", file=sys.stderr)
        return 2
    _compile(argv[0])
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

"""Where the GPU engine runs: numba-cuda for the kernels and one array namespace for the rest.

On a CUDA GPU the namespace is CuPy; under numba's CUDA simulator (``NUMBA_ENABLE_CUDASIM=1``,
how the engine is tested without a GPU) it is NumPy, and the kernels run as Python on the CPU.
Nothing here is imported by the CPU engine until ``device`` asks for a GPU.
"""

from __future__ import annotations

import functools
import re
from importlib import metadata
from types import ModuleType
from typing import NamedTuple

import numpy as np

from neardup._optional import MissingDependency

__all__ = [
    "BYTES_PER_FINGERPRINT",
    "BYTES_PER_PAIR",
    "DeviceUnavailable",
    "Runtime",
    "load",
    "usable",
    "free_memory",
    "version_conflict",
    "installed_conflict",
]

#: GPU bytes per fingerprint of a pass: fingerprint, position, key, sort order and its scratch,
#: sorted key and position, count and offset (8 bytes each, some freed before the next).
BYTES_PER_FINGERPRINT = 80
#: GPU bytes per pair a pass finds (two int64 positions) until it is copied to host memory.
BYTES_PER_PAIR = 16

_FIX = 'pip install "neardup[gpu]"'

#: numba-cuda releases that call ``np.row_stack``, which numpy 2.5 removed, when they first
#: compile a kernel for a GPU (not under the simulator): 0.21.1, the first with its own copy of
#: numba's array functions, through 0.30.4, the newest whose source was checked. 0.20 and older
#: do not, but they do not import with numba 0.68, the first numba that accepts numpy 2.5.
ROW_STACK_NUMBA_CUDA = ((0, 21, 1), (0, 30, 4))
#: the numpy release that removed ``np.row_stack``
NUMPY_WITHOUT_ROW_STACK = (2, 5)
#: what ``neardup[gpu]`` pins while no numba-cuda release runs on a numpy without ``row_stack``
NUMPY_FOR_GPU = "numpy<2.5"


class DeviceUnavailable(MissingDependency):
    """``device="cuda"`` was asked for where no GPU or GPU library is usable (one line)."""


class Runtime(NamedTuple):
    """The GPU engine's tools: ``xp`` (cupy, or numpy when ``simulated``) and ``cuda``."""

    xp: ModuleType
    cuda: ModuleType
    simulated: bool


def _release(version: str) -> tuple[int, ...]:
    """The leading numbers of a version: ``"2.5.0rc1"`` -> ``(2, 5, 0)``."""
    m = re.match(r"\d+(?:\.\d+)*", version.strip())
    return tuple(int(x) for x in m.group().split(".")) if m else ()


def version_conflict(numba_cuda: str | None, numpy: str) -> str | None:
    """Why the GPU engine cannot compile its kernels with these releases, or None when it can.

    Parameters
    ----------
    numba_cuda : str or None
        The installed numba-cuda's version (``"0.30.4"``); None for numba's own ``numba.cuda``.
    numpy : str
        The installed numpy's version (``"2.5.2"``).

    Returns
    -------
    str or None
        One line naming both versions and the fix when the numba-cuda release is one of
        :data:`ROW_STACK_NUMBA_CUDA` and the numpy has no ``np.row_stack`` (2.5 and later), which
        would otherwise be an ``AttributeError`` inside numba-cuda at the first GPU search.

    Examples
    --------
    >>> version_conflict("0.30.4", "2.4.6") is None
    True
    >>> version_conflict("0.30.4", "2.5.2").endswith("pip install 'numpy<2.5'")
    True
    """
    lo, hi = ROW_STACK_NUMBA_CUDA
    if numba_cuda is None or not lo <= _release(numba_cuda) <= hi:
        return None
    if _release(numpy) < NUMPY_WITHOUT_ROW_STACK:
        return None
    first, last = (".".join(map(str, v)) for v in ROW_STACK_NUMBA_CUDA)
    return (
        f'device "cuda" cannot use numba-cuda {numba_cuda} with numpy {numpy} '
        f"(numba-cuda {first} to {last} call np.row_stack, which numpy 2.5 removed): "
        f"pip install '{NUMPY_FOR_GPU}'"
    )


def installed_conflict() -> str | None:
    """:func:`version_conflict` of the installed numba-cuda and numpy (None without numba-cuda)."""
    try:
        numba_cuda = metadata.version("numba-cuda")
    except metadata.PackageNotFoundError:
        numba_cuda = None
    return version_conflict(numba_cuda, np.__version__)


@functools.cache
def _load() -> Runtime | str:
    # the whole message as a string rather than an exception, so that a failure is cached too
    try:
        from numba import config as numba_config
        from numba import cuda
    except ImportError:
        return _needs("numba-cuda, which is not installed")
    if numba_config.ENABLE_CUDASIM:
        return Runtime(np, cuda, True)
    conflict = installed_conflict()
    if conflict is not None:
        return conflict
    try:
        import cupy
    except ImportError:
        return _needs("cupy, which is not installed")
    try:
        ok = bool(cuda.is_available()) and cupy.cuda.runtime.getDeviceCount() > 0
    except Exception:  # a driver that fails to load is "no GPU" here, not a crash
        ok = False
    if not ok:
        return _needs("a CUDA GPU with its driver, and none is usable here")
    return Runtime(cupy, cuda, False)


def _needs(what: str) -> str:
    return f'device "cuda" needs {what}: {_FIX}'


def load() -> Runtime:
    """The GPU runtime, or :class:`DeviceUnavailable`: one line saying what is missing or which
    installed releases do not work together, and how to fix it."""
    rt = _load()
    if isinstance(rt, str):
        raise DeviceUnavailable(rt)
    return rt


def usable() -> bool:
    """True when a real GPU is usable (``device="auto"`` never picks the simulator)."""
    rt = _load()
    return isinstance(rt, Runtime) and not rt.simulated


def free_memory(rt: Runtime) -> int | None:
    """Free bytes on the current GPU, or None under the simulator."""
    if rt.simulated:
        return None
    free, _ = rt.xp.cuda.runtime.memGetInfo()
    return int(free)

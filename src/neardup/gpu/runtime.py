"""Where the GPU engine runs: numba-cuda for the kernels and one array namespace for the rest.

On a CUDA GPU the namespace is CuPy; under numba's CUDA simulator (``NUMBA_ENABLE_CUDASIM=1``,
how the engine is tested without a GPU) it is NumPy, and the kernels run as Python on the CPU.
Nothing here is imported by the CPU engine until ``device`` asks for a GPU.
"""

from __future__ import annotations

import functools
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
]

#: GPU bytes per fingerprint of a pass: fingerprint, position, key, sort order and its scratch,
#: sorted key and position, count and offset (8 bytes each, some freed before the next).
BYTES_PER_FINGERPRINT = 80
#: GPU bytes per pair a pass finds (two int64 positions) until it is copied to host memory.
BYTES_PER_PAIR = 16

_FIX = 'pip install "neardup[gpu]"'


class DeviceUnavailable(MissingDependency):
    """``device="cuda"`` was asked for where no GPU or GPU library is usable (one line)."""


class Runtime(NamedTuple):
    """The GPU engine's tools: ``xp`` (cupy, or numpy when ``simulated``) and ``cuda``."""

    xp: ModuleType
    cuda: ModuleType
    simulated: bool


@functools.cache
def _load() -> Runtime | str:
    # the reason as a string rather than an exception, so that a failure is cached too
    try:
        from numba import config as numba_config
        from numba import cuda
    except ImportError:
        return "numba-cuda, which is not installed"
    if numba_config.ENABLE_CUDASIM:
        return Runtime(np, cuda, True)
    try:
        import cupy
    except ImportError:
        return "cupy, which is not installed"
    try:
        ok = bool(cuda.is_available()) and cupy.cuda.runtime.getDeviceCount() > 0
    except Exception:  # a driver that fails to load is "no GPU" here, not a crash
        ok = False
    if not ok:
        return "a CUDA GPU with its driver, and none is usable here"
    return Runtime(cupy, cuda, False)


def load() -> Runtime:
    """The GPU runtime, or :class:`DeviceUnavailable` saying what is missing and how to fix it."""
    rt = _load()
    if isinstance(rt, str):
        raise DeviceUnavailable(f'device "cuda" needs {rt}: {_FIX}')
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

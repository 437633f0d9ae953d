"""Where the GPU tests run: on a real GPU (CuPy installed and the driver counts one), else under
numba's CUDA simulator, switched on here for this process before ``numba.cuda`` is first
imported (it changes nothing for the CPU engine's numba kernels: only ``numba.cuda`` reads it).

Import this module before anything that imports ``numba.cuda``; ``REAL_GPU`` says which.
``NO_GPU`` and ``NO_GPU_FIX``: how the one line of ``device="cuda"`` without the simulator starts
and ends where there is no GPU (or where the installed numba-cuda cannot run on the installed
numpy, which it refuses first).
"""

from __future__ import annotations

import ctypes
import importlib.util
import os
import sys

import numba.core.config as numba_config
import pytest

from neardup.gpu.runtime import NUMPY_FOR_GPU, installed_conflict


def _real_gpu() -> bool:
    if os.environ.get("NUMBA_ENABLE_CUDASIM") == "1" or importlib.util.find_spec("cupy") is None:
        return False
    # the driver itself, asked without numba (importing numba.cuda would fix the mode)
    try:
        driver = ctypes.CDLL("libcuda.so.1")
    except OSError:
        return False
    count = ctypes.c_int(0)
    return (
        driver.cuInit(0) == 0
        and driver.cuDeviceGetCount(ctypes.byref(count)) == 0
        and count.value > 0
    )


REAL_GPU = _real_gpu()
if not REAL_GPU:
    if "numba.cuda" in sys.modules and not numba_config.ENABLE_CUDASIM:
        pytest.skip(
            "numba.cuda was imported before the simulator could be set", allow_module_level=True
        )
    numba_config.ENABLE_CUDASIM = 1

if installed_conflict() is None:
    NO_GPU, NO_GPU_FIX = 'device "cuda" needs ', 'pip install "neardup[gpu]"'
else:
    NO_GPU, NO_GPU_FIX = 'device "cuda" cannot use ', f"pip install '{NUMPY_FOR_GPU}'"

"""neardup's console scripts.

A console script is a program start: before any kernel module loads numba, make sure numba has a
writable place for its compiled kernels (see :func:`neardup.compiled.use_writable_cache`).
"""

from neardup.compiled import use_writable_cache

use_writable_cache()

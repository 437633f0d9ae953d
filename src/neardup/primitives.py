"""numba primitives that the kernels of several packages share: MurmurHash3's 64-bit finalizer
and the UTF-8 encoding of one code point.

Both are ``@njit(cache=True, nogil=True)`` functions of scalars (and an output array) that
validate nothing; a kernel that calls one gets it compiled into its own machine code (LLVM
inlines it), so calling it costs no more than repeating its lines.
"""

from __future__ import annotations

import numpy as np
from numba import njit

__all__ = ["fmix64", "put_utf8"]

_C1 = np.uint64(0xFF51AFD7ED558CCD)
_C2 = np.uint64(0xC4CEB9FE1A85EC53)
_S33 = np.uint64(33)


@njit(cache=True, nogil=True)
def fmix64(h):
    """MurmurHash3's 64-bit finalizer of the uint64 ``h``: every output bit depends on every
    input bit (a bijection of uint64)."""
    h ^= h >> _S33
    h *= _C1
    h ^= h >> _S33
    h *= _C2
    h ^= h >> _S33
    return h


@njit(cache=True, nogil=True)
def put_utf8(out, o, cp):
    """Write code point ``cp`` as UTF-8 at ``out[o]`` (1 to 4 bytes; surrogates as 3 bytes, as
    ``surrogatepass`` encodes them); returns the next position. ``out`` must have room."""
    if cp < 0x80:
        out[o] = cp
        return o + 1
    if cp < 0x800:
        out[o] = 0xC0 | (cp >> 6)
        out[o + 1] = 0x80 | (cp & 0x3F)
        return o + 2
    if cp < 0x10000:
        out[o] = 0xE0 | (cp >> 12)
        out[o + 1] = 0x80 | ((cp >> 6) & 0x3F)
        out[o + 2] = 0x80 | (cp & 0x3F)
        return o + 3
    out[o] = 0xF0 | (cp >> 18)
    out[o + 1] = 0x80 | ((cp >> 12) & 0x3F)
    out[o + 2] = 0x80 | ((cp >> 6) & 0x3F)
    out[o + 3] = 0x80 | (cp & 0x3F)
    return o + 4

"""numba primitives that the kernels of several packages share: the population count of a
uint64, MurmurHash3's 64-bit finalizer, FNV-1a 64 of bytes, the 64-bit key of a string id and
the UTF-8 encoding of one code point (and their constants, defined once).

Both are ``@njit(cache=True, nogil=True)`` functions of scalars (and an output array) that
validate nothing; a kernel that calls one gets it compiled into its own machine code (LLVM
inlines it), so calling it costs no more than repeating its lines.
"""

from __future__ import annotations

import numpy as np

from neardup.compiled import njit

__all__ = [
    "FNV_OFFSET",
    "FNV_PRIME",
    "GOLDEN",
    "fmix64",
    "fnv1a64",
    "popcount",
    "scaled_top",
    "put_utf8",
    "string_key",
]

#: FNV-1a 64: offset basis and prime
FNV_OFFSET = np.uint64(0xCBF29CE484222325)
FNV_PRIME = np.uint64(0x100000001B3)
#: 2**64 / golden ratio (Fibonacci hashing; also a tag and a polynomial base)
GOLDEN = np.uint64(0x9E3779B97F4A7C15)
_MIX1 = np.uint64(0xBF58476D1CE4E5B9)
_MIX2 = np.uint64(0x94D049BB133111EB)

_C1 = np.uint64(0xFF51AFD7ED558CCD)
_C2 = np.uint64(0xC4CEB9FE1A85EC53)
_S33 = np.uint64(33)
_U1 = np.uint64(1)
_M1 = np.uint64(0x5555555555555555)
_M2 = np.uint64(0x3333333333333333)
_M4 = np.uint64(0x0F0F0F0F0F0F0F0F)
_H01 = np.uint64(0x0101010101010101)
_S56 = np.uint64(56)


@njit(cache=True, nogil=True)
def popcount(x):
    """Number of set bits of the uint64 ``x`` (a uint64)."""
    # SWAR popcount; LLVM turns this idiom into the popcnt instruction on the host CPU.
    x = x - ((x >> _U1) & _M1)
    x = (x & _M2) + ((x >> np.uint64(2)) & _M2)
    x = (x + (x >> np.uint64(4))) & _M4
    return (x * _H01) >> _S56


@njit(cache=True, nogil=True, inline="always")
def scaled_top(h, n):
    """The uint64 ``h``'s top 32 bits scaled to ``[0, n)`` (multiply-shift, int64; ``n`` <
    2**32): a hash's bucket among ``n``."""
    return np.int64(((h >> np.uint64(32)) * np.uint64(n)) >> np.uint64(32))


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
def fnv1a64(buf, start, end):
    """FNV-1a, 64-bit, of the bytes ``buf[start:end]`` (a uint64)."""
    h = FNV_OFFSET
    for i in range(start, end):
        h ^= np.uint64(buf[i])
        h *= FNV_PRIME
    return h


@njit(cache=True, nogil=True)
def string_key(buf, start, end):
    """The 64-bit key of the UTF-8 string id ``buf[start:end]``: FNV-1a then splitmix64's
    finalizer. Indexes store it (the sort key of a str id): it must never change."""
    h = fnv1a64(buf, start, end)
    h ^= h >> np.uint64(30)
    h *= _MIX1
    h ^= h >> np.uint64(27)
    h *= _MIX2
    h ^= h >> np.uint64(31)
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

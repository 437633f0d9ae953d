"""numba kernels of document ids: 64-bit hashes of string and integer ids, and a hash table
that finds repeated ones, GIL-free.

Every function takes contiguous arrays and validates nothing. Kernels other modules call are public
(``__all__``), the rest ``_``-prefixed.
"""

from __future__ import annotations

import numpy as np

from neardup.compiled import njit
from neardup.primitives import GOLDEN, fmix64, string_key

__all__ = ["first_seen", "hash_ints", "hash_strings", "rehash"]

_TAG_INT = GOLDEN


@njit(cache=True, nogil=True)
def hash_strings(buf, ends):
    """64-bit hash of each newline-terminated string ``buf[ends[j-1]:ends[j] - 1]``: the key an
    index stores for that string id (:func:`neardup.primitives.string_key`)."""
    out = np.empty(ends.shape[0], dtype=np.uint64)
    a = 0
    for j in range(ends.shape[0]):
        out[j] = string_key(buf, a, ends[j] - 1)
        a = ends[j]
    return out


@njit(cache=True, nogil=True)
def hash_ints(values):
    """64-bit hash of each int64 (apart from the strings' hashes by a tag)."""
    out = np.empty(values.shape[0], dtype=np.uint64)
    for j in range(values.shape[0]):
        out[j] = fmix64(np.uint64(values[j]) ^ _TAG_INT)
    return out


@njit(cache=True, nogil=True)
def first_seen(keys, rows, used, hashes, base, found):
    """Look each of ``hashes`` up in the open-addressing table ``keys``/``rows`` (``used``
    slots taken, size a power of two), inserting it with row ``base + j`` when new; ``found[j]``
    is the row the hash was first inserted with, or -1. Returns the slots now used."""
    mask = keys.shape[0] - 1
    for j in range(hashes.shape[0]):
        h = hashes[j]
        slot = np.int64(h & np.uint64(mask))
        while True:
            r = rows[slot]
            if r < 0:
                keys[slot] = h
                rows[slot] = base + j
                used += 1
                found[j] = -1
                break
            if keys[slot] == h:
                found[j] = r
                break
            slot = (slot + 1) & mask
    return used


@njit(cache=True, nogil=True)
def rehash(keys, rows, new_keys, new_rows):
    """Move every taken slot of the table ``keys``/``rows`` (rows -1: free) into the larger
    empty table ``new_keys``/``new_rows`` (size a power of two, rows all -1), as
    :func:`first_seen` probes it."""
    mask = new_keys.shape[0] - 1
    for s in range(keys.shape[0]):
        r = rows[s]
        if r >= 0:
            slot = np.int64(keys[s] & np.uint64(mask))
            while new_rows[slot] >= 0:
                slot = (slot + 1) & mask
            new_keys[slot] = keys[s]
            new_rows[slot] = r

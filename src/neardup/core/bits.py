"""Fingerprint values: bit order, conversion, parsing and formatting, popcount.

A fingerprint is an unsigned 64-bit integer; bit 63 is the most significant and is written first
in the 64-character binary form.
"""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np

MAX_FINGERPRINT = 2**64 - 1


def as_fingerprints(values: Iterable[int] | np.ndarray, name: str = "fingerprints") -> np.ndarray:
    """Return ``values`` as a contiguous 1-D ``uint64`` array.

    Accepts any unsigned or non-negative signed integer array, or a sequence of Python ints in
    ``[0, 2**64)``. Raises ``ValueError`` for negative, too large, non-integer or non-1-D input.
    """
    if isinstance(values, np.ndarray):
        arr = values
    else:
        if not isinstance(values, (list, tuple)):
            values = list(values)
        if len(values) == 0:
            return np.empty(0, dtype=np.uint64)
        arr = np.asarray(values)
        if arr.dtype.kind not in "iub":
            # Python ints above 2**63 make numpy choose float64 or object: check them exactly
            flat = list(values)
            bad = [
                v
                for v in flat
                if isinstance(v, bool)
                or not isinstance(v, (int, np.integer))
                or not 0 <= v <= MAX_FINGERPRINT
            ]
            if bad:
                raise ValueError(f"{name} must be integers in [0, 2**64) (got {bad[0]!r})")
            arr = np.array([int(v) for v in flat], dtype=np.uint64)
    if arr.ndim != 1:
        raise ValueError(f"{name} must be one-dimensional (got shape {arr.shape})")
    if arr.dtype == np.uint64:
        return np.ascontiguousarray(arr)
    if arr.dtype.kind == "u":
        return np.ascontiguousarray(arr, dtype=np.uint64)
    if arr.dtype.kind == "i":
        if arr.size and arr.min() < 0:
            raise ValueError(f"{name} must be non-negative (got {int(arr.min())})")
        return np.ascontiguousarray(arr, dtype=np.uint64)
    if arr.dtype.kind == "b" or arr.size == 0:
        return np.ascontiguousarray(arr, dtype=np.uint64)
    raise ValueError(f"{name} must be integers (got dtype {arr.dtype})")


def popcount(x: np.ndarray) -> np.ndarray:
    """Number of set bits of each uint64, as uint8."""
    return np.bitwise_count(np.asarray(x, dtype=np.uint64)).astype(np.uint8)


def hamming(a: np.ndarray | int, b: np.ndarray | int) -> np.ndarray:
    """Hamming distance ``popcount(a ^ b)`` elementwise (broadcasting), as uint8."""
    return popcount(np.bitwise_xor(np.asarray(a, dtype=np.uint64), np.asarray(b, dtype=np.uint64)))


def to_binary(value: int) -> str:
    """64-character binary form, bit 63 first."""
    return format(int(value), "064b")


def from_binary(text: str) -> int:
    """Parse a binary form of at most 64 digits (bit 63 first)."""
    text = text.strip()
    if not text or len(text) > 64 or set(text) - {"0", "1"}:
        raise ValueError(f"not a binary fingerprint of at most 64 digits: {text!r}")
    return int(text, 2)


def to_hex(value: int) -> str:
    """16-digit lower-case hexadecimal form."""
    return format(int(value), "016x")

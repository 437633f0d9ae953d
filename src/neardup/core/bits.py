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

    Accepts any unsigned or non-negative signed integer array, or a sequence (or iterator) of
    Python/numpy ints in ``[0, 2**64)``. Raises ``ValueError`` for negative, too large,
    non-integer (bool, float, str) or non-1-D input, and for containers that are not sequences
    of fingerprints: ``str``, ``bytes``, ``dict``, ``set`` (no order) and scalars.
    """
    if isinstance(values, np.ndarray):
        arr = values
    else:
        if isinstance(values, _NOT_SEQUENCES) or not isinstance(values, Iterable):
            raise ValueError(
                f"{name} must be a sequence or 1-D array of integers "
                f"(got {type(values).__name__}); pass a list or a numpy array"
            )
        if not isinstance(values, (list, tuple)):
            values = list(values)
        if len(values) == 0:
            return np.empty(0, dtype=np.uint64)
        types = set(map(type, values))
        if not all(_is_int_type(t) for t in types):
            bad = next(v for v in values if not _is_int_type(type(v)))
            if isinstance(bad, (list, tuple, np.ndarray)):
                raise ValueError(
                    f"{name} must be one-dimensional (got a nested {type(bad).__name__})"
                )
            raise ValueError(f"{name} must be integers in [0, 2**64) (got {bad!r})")
        arr = np.asarray(values)
        if arr.dtype.kind not in "iu":
            # Python ints above 2**63 make numpy choose float64 or object: check them exactly
            bad = [v for v in values if not 0 <= v <= MAX_FINGERPRINT]
            if bad:
                raise ValueError(f"{name} must be integers in [0, 2**64) (got {bad[0]!r})")
            arr = np.array([int(v) for v in values], dtype=np.uint64)
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
    if arr.size == 0:
        return np.empty(0, dtype=np.uint64)
    raise ValueError(f"{name} must be integers (got dtype {arr.dtype})")


_NOT_SEQUENCES = (str, bytes, bytearray, memoryview, dict, set, frozenset)


def _is_int_type(t: type) -> bool:
    return issubclass(t, (int, np.integer)) and not issubclass(t, (bool, np.bool_))


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

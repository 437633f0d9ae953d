"""Feature hashes: Bob Jenkins' lookup3 (as the C++ simhash library used it) and FNV-1a 64.

Every function takes ``bytes`` (``str`` is encoded as UTF-8) and returns a Python ``int`` in
``[0, 2**64)`` (or ``[0, 2**32)`` for the 32-bit halves of lookup3). The hot paths call the same
numba kernels (``_kernels.jenkins64_bytes``, ``neardup.primitives.fnv1a64``) on whole batches.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from neardup import primitives
from neardup.fingerprints import _kernels as K

__all__ = ["HASHES", "fnv1a64", "hashlittle2", "jenkins64", "resolve_hash"]


def _as_bytes(data: bytes | bytearray | memoryview | str) -> np.ndarray:
    if isinstance(data, str):
        data = data.encode("utf-8")
    elif not isinstance(data, (bytes, bytearray, memoryview)):
        raise TypeError(f"expected bytes or str to hash, got {type(data).__name__}")
    return np.frombuffer(bytes(data), dtype=np.uint8)


def hashlittle2(data: bytes | str, pc: int = 0, pb: int = 0) -> tuple[int, int]:
    """Bob Jenkins' lookup3 ``hashlittle2``: two 32-bit hashes of ``data``.

    Parameters
    ----------
    data : bytes or str
        The key (``str`` is hashed as its UTF-8 bytes).
    pc, pb : int
        The primary and secondary 32-bit initial values.

    Returns
    -------
    (c, b) : tuple of int
        The primary hash ``c`` and the secondary hash ``b``, each in ``[0, 2**32)``.

    Examples
    --------
    >>> [hex(x) for x in hashlittle2(b"Four score and seven years ago")]
    ['0x17770551', '0xce7226e6']
    """
    if not (0 <= pc < 2**32 and 0 <= pb < 2**32):
        raise ValueError(f"pc and pb must be 32-bit unsigned (got pc={pc}, pb={pb})")
    buf = _as_bytes(data)
    c, b = K.lookup3_2(buf, 0, buf.shape[0], np.uint64(pc), np.uint64(pb))
    return int(c), int(b)


def jenkins64(data: bytes | str, seed: int = 0) -> int:
    """64-bit lookup3 hash as seomoz/simhash-cpp computed it: ``(c << 32) | b``.

    ``hashlittle2`` is called with ``pc = seed >> 32`` and ``pb = seed & 0xffffffff``; the primary
    hash ``c`` is the high 32 bits of the result (bit 63 is the most significant).

    Examples
    --------
    >>> hex(jenkins64(b""))
    '0xdeadbeefdeadbeef'
    """
    if not 0 <= seed < 2**64:
        raise ValueError(f"seed must be a 64-bit unsigned integer (got {seed})")
    buf = _as_bytes(data)
    return int(K.jenkins64_bytes(buf, 0, buf.shape[0], np.uint64(seed)))


def fnv1a64(data: bytes | str) -> int:
    """FNV-1a, 64-bit (offset basis 0xcbf29ce484222325, prime 0x100000001b3).

    Examples
    --------
    >>> hex(fnv1a64(b"foobar"))
    '0x85944171f73967e8'
    """
    buf = _as_bytes(data)
    return int(primitives.fnv1a64(buf, 0, buf.shape[0]))


#: Feature hashes by name, with their kernel codes.
HASHES: dict[str, tuple[Callable[[bytes], int], int]] = {
    "jenkins": (jenkins64, K.HASH_JENKINS),
    "fnv1a64": (fnv1a64, K.HASH_FNV1A64),
}


def resolve_hash(spec: str | Callable[[bytes], int]) -> tuple[Callable[[bytes], int], int | None]:
    """Return ``(function, kernel_code)`` for a hash name, or ``(callable, None)`` for a callable."""
    if callable(spec):
        return spec, None
    try:
        return HASHES[spec]
    except KeyError:
        raise ValueError(
            f"unknown hash {spec!r}; use one of {sorted(HASHES)} or a callable bytes -> int"
        ) from None

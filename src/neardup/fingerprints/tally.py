"""Simhash of weighted features: per-bit tallies of feature hashes (bit 63 most significant).

For every bit position ``i`` the tally adds a feature's weight where bit ``i`` of its hash is 1 and
subtracts it where it is 0; the fingerprint has bit ``i`` set where the tally is > 0 ("natural" bit
order).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

import numpy as np

from neardup.fingerprints import _kernels as K
from neardup.fingerprints.hashes import resolve_hash

__all__ = ["MASK64", "compute", "compute_batch", "feature_hash"]

#: The 64 low bits: a Python int ``& MASK64`` is that int modulo 2**64 (an unsigned 64-bit hash).
MASK64 = (1 << 64) - 1


def feature_hash(x: Any, hash_fn: Callable[[bytes], int]) -> int:
    """The 64-bit hash of one feature: an integer as it is, text and bytes hashed.

    Parameters
    ----------
    x : int, str or bytes-like
        A feature hash (an integer in ``[0, 2**64)``, numpy integers too), or a feature as
        ``str`` (hashed as UTF-8) or ``bytes``/``bytearray``/``memoryview``.
    hash_fn : callable
        ``bytes -> int``, the hash of text and bytes features (e.g.
        :func:`neardup.fingerprints.hashes.fnv1a64`).

    Returns
    -------
    int
        The feature's hash, an unsigned 64-bit value.

    Raises
    ------
    TypeError
        For a bool or any other type.
    ValueError
        For an integer outside the unsigned 64-bit range.
    """
    if isinstance(x, (bool, np.bool_)):
        raise TypeError("feature hashes must be integers, str or bytes (got bool)")
    if isinstance(x, (int, np.integer)):
        v = int(x)
        if not 0 <= v <= MASK64:
            raise ValueError(f"feature hash out of the unsigned 64-bit range: {v}")
        return v
    if isinstance(x, str):
        return hash_fn(x.encode("utf-8"))
    if isinstance(x, (bytes, bytearray, memoryview)):
        return hash_fn(bytes(x))
    raise TypeError(f"a feature must be an int hash, str or bytes (got {type(x).__name__})")


def compute(
    feature_hashes: Iterable[Any] | Mapping[Any, float] | np.ndarray,
    weights: Sequence[float] | np.ndarray | None = None,
    *,
    hash: str | Callable[[bytes], int] = "fnv1a64",  # noqa: A002 - mirrors Fingerprinter
) -> int:
    """Simhash of weighted features: one unsigned 64-bit integer.

    Parameters
    ----------
    feature_hashes : iterable, mapping or ndarray
        Feature hashes as unsigned 64-bit integers (any integer dtype is reinterpreted as
        ``uint64``), or features as ``str``/``bytes`` (hashed with ``hash``), or a mapping
        ``{feature: weight}``, or ``(feature, weight)`` pairs (e.g. TF-IDF weights).
    weights : sequence of float, optional
        One weight per feature (default 1 each). Not allowed with a mapping or pairs.
    hash : str or callable, default "fnv1a64"
        How ``str``/``bytes`` features are hashed: ``"fnv1a64"``, ``"jenkins"`` or ``bytes -> int``.

    Returns
    -------
    int
        Bit ``i`` (bit 63 most significant) is 1 where the tally of bit ``i`` -- the weights of
        features whose hash has bit ``i`` set minus the weights of the others -- is > 0. Empty
        input gives 0.

    Examples
    --------
    >>> compute([0b1100, 0b1010, 0b1001])
    8
    >>> compute({"apple": 2.0, "pear": 0.5}) == compute(["apple"])
    True
    """
    hash_fn, _ = resolve_hash(hash)
    if isinstance(feature_hashes, np.ndarray) and feature_hashes.dtype.kind in "iu":
        hashes = np.ascontiguousarray(feature_hashes.ravel()).view(
            feature_hashes.dtype.newbyteorder("=")
        )
        hashes = np.ascontiguousarray(hashes.astype(hashes.dtype.str[:-1] + "8", copy=False))
        hashes = hashes.view(np.uint64)
    else:
        items: Iterable[Any]
        pairs: list[tuple[Any, float]] | None = None
        if isinstance(feature_hashes, Mapping):
            pairs = list(feature_hashes.items())
        else:
            items = list(feature_hashes)
            if items and all(isinstance(x, tuple) for x in items):
                pairs = items  # type: ignore[assignment]
        if pairs is not None:
            if weights is not None:
                raise ValueError("pass weights either in (feature, weight) pairs or as weights=")
            for p in pairs:
                if len(p) != 2:
                    raise ValueError(f"expected (feature, weight) pairs, got {p!r}")
            items = [p[0] for p in pairs]
            weights = [float(p[1]) for p in pairs]
        hashes = np.array([feature_hash(x, hash_fn) for x in items], dtype=np.uint64)
    m = hashes.shape[0]
    if weights is None:
        return int(K.tally_unit(hashes, m, False))
    w = np.ascontiguousarray(weights, dtype=np.float64).ravel()
    if w.shape[0] != m:
        raise ValueError(f"got {m} features but {w.shape[0]} weights; pass one weight per feature")
    if not np.all(np.isfinite(w)):
        raise ValueError("weights must be finite numbers")
    return int(K.tally_weighted(hashes, w, m, False))


def compute_batch(
    hashes: np.ndarray, offsets: np.ndarray, weights: np.ndarray | None = None
) -> np.ndarray:
    """Simhash of many feature sets at once (CSR layout), natural bit order.

    Parameters
    ----------
    hashes : ndarray of uint64, shape (m,)
        All feature hashes, document after document.
    offsets : ndarray of int64, shape (n + 1,)
        Document ``i`` has ``hashes[offsets[i]:offsets[i + 1]]``; non-decreasing, from 0 to m.
    weights : ndarray of float64, shape (m,), optional
        One weight per feature (default 1).

    Returns
    -------
    ndarray of uint64, shape (n,)
        ``compute(hashes[offsets[i]:offsets[i + 1]], weights[...])`` for every ``i``.
    """
    h = np.ascontiguousarray(hashes, dtype=np.uint64).ravel()
    off = np.ascontiguousarray(offsets, dtype=np.int64).ravel()
    if off.shape[0] < 1 or off[0] != 0 or off[-1] != h.shape[0] or np.any(np.diff(off) < 0):
        raise ValueError(
            f"offsets must be non-decreasing from 0 to len(hashes)={h.shape[0]} "
            f"(got {off.shape[0]} offsets)"
        )
    if weights is None:
        w = np.zeros(0, dtype=np.float64)
    else:
        w = np.ascontiguousarray(weights, dtype=np.float64).ravel()
        if w.shape[0] != h.shape[0]:
            raise ValueError(f"got {h.shape[0]} hashes but {w.shape[0]} weights")
    out = np.empty(off.shape[0] - 1, dtype=np.uint64)
    K.compute_csr(h, off, w, weights is not None, out)
    return out

"""Fingerprints of documents given as UTF-8 in one buffer, read in place (no ``str`` made):
the body of ``Fingerprinter.features_utf8``."""

from __future__ import annotations

import itertools
from typing import Any

import numpy as np

from neardup.fingerprints import _normalize as N
from neardup.fingerprints._normalize import first_invalid_utf8
from neardup.fingerprints.batch import (
    decode_document,
    join_keys,
    plan_sizes,
    run_chunks,
    threads_for,
    utf8_chunk,
)

__all__ = ["features_utf8"]

_NOKEYS = np.zeros(0, dtype=np.uint32)
_NOOFFSETS = np.zeros(0, dtype=np.int64)


def features_utf8(
    fp: Any,
    data: np.ndarray,
    offsets: np.ndarray,
    threads: int | None,
    keys: bool,
    validate: bool,
    ascii_: np.ndarray | None,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(fingerprints, key offsets, keys)`` of documents as UTF-8 in one buffer, by the
    Fingerprinter ``fp`` (see ``Fingerprinter.features_many``; without ``keys`` the offsets and
    keys are empty).

    Parameters
    ----------
    fp : Fingerprinter
        Its options.
    data : ndarray of uint8
        The documents' UTF-8 bytes, one after another (copied first when read-only).
    offsets : ndarray of int64, shape (n + 1,)
        Document ``i`` is ``data[offsets[i]:offsets[i + 1]]``.
    threads : int or None
        Worker threads, as for ``Fingerprinter.fingerprint_many``.
    keys : bool
        Also the shingle keys.
    validate : bool
        Check that the bytes are UTF-8 where the normalization needs text, as for ``bytes``
        documents (ValueError naming the document). False promises they are: then lone
        surrogates as ``str.encode("utf-8", "surrogatepass")`` writes them fingerprint as in
        that ``str``.
    ascii_ : ndarray of bool, shape (n,), or None
        Which documents are pure ASCII, when the caller knows: they then take the kernel
        stages (and tables) of ASCII ``str`` documents.
    """
    offsets = np.ascontiguousarray(offsets, dtype=np.int64)
    n = len(offsets) - 1
    if not fp._fast or fp._py_normalize:  # the Python pipeline reads str
        raw = np.asarray(data, dtype=np.uint8).tobytes()
        parts = [raw[a:b] for a, b in itertools.pairwise(offsets.tolist())]
        if validate:
            docs = [decode_document(p, i) for i, p in enumerate(parts)]
        else:
            docs = [p.decode("utf-8", "surrogatepass") for p in parts]
        if keys:
            return tuple(fp.features_many(docs, threads))  # type: ignore[return-value]
        return fp.fingerprint_many(docs, threads), _NOOFFSETS, _NOKEYS
    data = np.ascontiguousarray(data, dtype=np.uint8)
    if not data.flags.writeable:
        data = data.copy()  # the kernels are compiled for writable buffers
    if validate and fp._norm_code != N.NORM_NONE and n > 0:
        bad = int(first_invalid_utf8(data, offsets))
        if bad >= 0:
            decode_document(data[offsets[bad] : offsets[bad + 1]].tobytes(), bad)
    nthreads = threads_for(threads)
    plan = plan_sizes(np.diff(offsets), nthreads)

    def run(a: int, b: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        out = np.empty(b - a, dtype=np.uint64)
        key_off = np.zeros(b - a + 1, dtype=np.int64)
        chunk = utf8_chunk(data, offsets, a, b, None if ascii_ is None else ascii_[a:b])
        kernel, classes, tables = fp._kernel(chunk, keys)
        return out, key_off, kernel(chunk, classes, tables, fp._opt, out, key_off)

    parts = run_chunks(run, plan, nthreads)
    fps = np.concatenate([p[0] for p in parts]) if parts else np.zeros(0, np.uint64)
    if not keys:
        return fps, _NOOFFSETS, _NOKEYS
    return (fps, *join_keys(plan, parts, n))

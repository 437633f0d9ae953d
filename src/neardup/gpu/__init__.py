"""The optional GPU engine behind ``device="cuda"``: the same answers as the CPU engine.

``pip install "neardup[gpu]"`` installs CuPy and numba-cuda. Nothing here imports either until
a search asks for a GPU; :func:`use_gpu` turns a ``device`` argument into a yes or no (or the
one-line :class:`DeviceUnavailable`), and :func:`find_all_pairs` runs the search.
"""

from __future__ import annotations

import threading

import numpy as np

from neardup.core.layout import Layout
from neardup.gpu.runtime import (
    BYTES_PER_FINGERPRINT,
    BYTES_PER_PAIR,
    DeviceUnavailable,
    load,
    usable,
)

__all__ = [
    "BYTES_PER_FINGERPRINT",
    "BYTES_PER_PAIR",
    "DEVICES",
    "DeviceUnavailable",
    "PHASES",
    "use_gpu",
    "check_device",
    "find_all_pairs",
]

#: one search at a time per process: a pass sizes itself to the GPU's free memory, so two at
#: once (threads of one Dask worker) would each plan for the whole of it
_ONE_AT_A_TIME = threading.Lock()

#: the phases :func:`find_all_pairs` times when given a ``phases`` dict (``bench/gpu.py``'s
#: columns), in order: cutting an input too large for one pass into passes (on the host),
#: fingerprints and positions to the GPU, each table's keys built (permuted), sorted, and scanned
#: for pairs (count, offsets, write), pairs copied back to host memory, and the pairs of all
#: tables merged and sorted (on the GPU while they fit, else in host memory)
PHASES = ("split", "to_device", "keys", "sort", "scan", "back", "merge")

#: the values ``device`` takes
DEVICES = ("cpu", "cuda", "auto")


def check_device(device: str) -> str:
    """``device`` if it is one of :data:`DEVICES`, else ``ValueError`` naming them."""
    if device not in DEVICES:
        raise ValueError(f'device must be "cpu", "cuda" or "auto" (got {device!r})')
    return device


def use_gpu(device: str) -> bool:
    """Whether a search with ``device`` runs on the GPU.

    ``"cpu"``: never. ``"cuda"``: always, or :class:`DeviceUnavailable` (one line naming what is
    missing and ``pip install "neardup[gpu]"``). ``"auto"``: when a real GPU is usable (never the
    simulator), else silently the CPU.
    """
    check_device(device)
    if device == "cpu":
        return False
    if device == "auto":
        return usable()
    load()
    return True


def find_all_pairs(
    fp: np.ndarray,
    layout: Layout,
    *,
    corpus_size: int | None = None,
    memory: int | str | None = None,
    tables: np.ndarray | None = None,
    phases: dict[str, float] | None = None,
) -> np.ndarray:
    """Sorted pairs ``(i, j)``, ``i < j``, of positions of ``fp`` within ``layout.distance``
    bits, each once, found on the GPU (:func:`neardup.gpu.engine.pairs`).

    With ``corpus_size`` given, only pairs of a corpus position (below it) and a query position
    (at or above it). ``memory``: GPU bytes a pass may use (inputs that do not fit run in
    passes, about 80 bytes per fingerprint of a pass plus 16 per pair it finds). ``tables``:
    only the pairs whose first table (in layout order) is among these table indices, as
    :func:`neardup.core.search.pairs_for_tables` (what one shard of the Dask path searches).
    ``phases``: a dict to which the seconds of each of :data:`PHASES` are added, the GPU
    synchronized before each timestamp (only then: without it the search waits for nothing).
    """
    from neardup.gpu import engine

    nc = -1 if corpus_size is None else int(corpus_size)
    with _ONE_AT_A_TIME:
        return engine.pairs(fp, layout, nc=nc, memory=memory, rows=tables, phases=phases)

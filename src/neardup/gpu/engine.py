"""The GPU engine: the CPU engine's permuted tables, sorted and scanned on a GPU, in passes.

For each table of the :class:`~neardup.core.layout.Layout` the fingerprints become the table's
keys (:func:`neardup.gpu.kernels.permute`), are sorted (``xp.argsort``) and scanned run by run
(:mod:`neardup.gpu.kernels`); a pair is kept by the first table whose leading blocks it agrees on
(``TableSpec.chk_key``), so every pair within the distance is found once. Array work is written
against one namespace, ``xp``: CuPy on a GPU, NumPy under numba's CUDA simulator.

Inputs larger than the memory budget run in passes: a table's fingerprints are split by the top
bits of their key (a prefix shard never splits a run, since a run shares the whole prefix), and
shards are grouped into passes of at most ``budget // BYTES_PER_FINGERPRINT`` fingerprints; each
pass's pairs go to host memory and are merged and sorted at the end.

Where the time goes: with a ``phases`` dict, :func:`pairs` adds the seconds of each of
:data:`neardup.gpu.PHASES` to it, synchronizing the GPU before each timestamp so that a phase's
time is its own, not its launch's; without one it synchronizes nothing and takes no timestamps.
"""

from __future__ import annotations

import time
from collections.abc import Iterator

import numpy as np

from neardup.core.engine import memory_budget
from neardup.core.layout import Layout
from neardup.core.search import sort_pairs
from neardup.core.tables import TableSpec
from neardup.gpu import PHASES, kernels
from neardup.gpu.runtime import BYTES_PER_FINGERPRINT, Runtime, free_memory, load

__all__ = ["pairs", "passes", "budget"]

#: GPU bytes per pair held and sorted on the GPU: the pair, its sort key, the sort's scratch and
#: the sorted pair
SORT_BYTES_PER_PAIR = 64
#: the most shard bits of a key used to cut a table into passes (a 65,536-bin histogram)
SHARD_BITS = 16

_EMPTY = np.empty((0, 2), dtype=np.int64)


class _Clock:
    """Adds the seconds since the last mark to a phase of ``phases``; nothing when it is None."""

    def __init__(self, rt: Runtime, phases: dict[str, float] | None) -> None:
        self.rt, self.phases = rt, phases
        if phases is not None:
            for name in PHASES:
                phases.setdefault(name, 0.0)
            self.last = time.perf_counter()

    def mark(self, phase: str) -> None:
        if self.phases is None:
            return
        self.rt.cuda.synchronize()  # the phase's kernels and copies, finished
        now = time.perf_counter()
        self.phases[phase] += now - self.last
        self.last = now


def budget(rt: Runtime, memory: int | str | None) -> int:
    """Bytes a pass may use: ``memory`` (bytes or ``"8G"``), else 80% of the GPU's free memory
    (under the simulator, the CPU engine's default budget)."""
    if memory is not None:
        return memory_budget(memory)
    free = free_memory(rt)
    return memory_budget(None) if free is None else int(free * 0.8)


def _grid(rt: Runtime, n: int) -> tuple[int, int]:
    # the simulator runs every thread of a block as a Python thread: keep blocks small there
    tpb = 16 if rt.simulated else 256
    return (n + tpb - 1) // tpb, tpb


def _row(rt: Runtime, a: np.ndarray, t: int) -> object:
    return rt.xp.asarray(np.ascontiguousarray(a[t]))


def _scan(rt: Runtime, fp, pos, spec: TableSpec, t: int, k: int, nc: int, clock: _Clock) -> tuple:
    """``(first, second)`` device arrays: the pairs of ``pos`` table ``t`` owns within ``k``."""
    xp = rt.xp
    n = int(fp.shape[0])
    grid = _grid(rt, n)
    keys = xp.empty(n, dtype=xp.uint64)
    nseg = int(spec.nseg[t])
    segs = [_row(rt, a, t) for a in (spec.seg_src, spec.seg_mask, spec.seg_dst)]
    kernels.permute[grid](fp, *segs, nseg, keys)
    clock.mark("keys")
    order = xp.argsort(keys)
    keys = keys[order]
    pos = pos[order]
    del order
    clock.mark("sort")
    sh = np.uint64(64 - int(spec.pbits[t]))
    chk, nchk = _row(rt, spec.chk_key, t), int(spec.nchk[t])
    counts = xp.empty(n, dtype=xp.int64)
    kernels.count_pairs[grid](keys, pos, sh, k, chk, nchk, nc, counts)
    offsets = xp.cumsum(counts)
    total = int(offsets[-1])
    offsets -= counts
    del counts
    first = xp.empty(total, dtype=xp.int64)
    second = xp.empty(total, dtype=xp.int64)
    if total:
        kernels.write_pairs[grid](keys, pos, sh, k, chk, nchk, nc, offsets, first, second)
    clock.mark("scan")
    return first, second


def passes(fp: np.ndarray, layout: Layout, t: int, capacity: int) -> Iterator[np.ndarray]:
    """Positions (ascending) of each pass of table ``t``, together every position once.

    The top (at most :data:`SHARD_BITS`) bits of the table's keys cut the input into prefix
    shards; consecutive shards are grouped into passes of at most ``capacity`` fingerprints, and
    a shard larger than that (many copies of one prefix, which cannot be split) is a pass alone.
    """
    sbits = min(int(layout.spec.pbits[t]), SHARD_BITS)
    top = (layout.apply(fp, t) >> np.uint64(64 - sbits)).astype(np.intp)
    cum = np.cumsum(np.bincount(top, minlength=1 << sbits))
    lo, done = 0, 0
    while lo < len(cum):
        # the bins up to `capacity` more fingerprints; one bin larger than that is a pass alone
        hi = max(int(np.searchsorted(cum, done + capacity, side="right")), lo + 1)
        if cum[hi - 1] > done:
            yield np.flatnonzero((top >= lo) & (top < hi))
        done, lo = int(cum[hi - 1]), hi


def _to_host(rt: Runtime, a) -> np.ndarray:
    return a if rt.simulated else a.get()


def _sorted_on_device(rt: Runtime, parts: list[tuple], n: int, clock: _Clock) -> np.ndarray:
    xp = rt.xp
    first = xp.concatenate([p[0] for p in parts])
    second = xp.concatenate([p[1] for p in parts])
    if len(first) == 0:
        return _EMPTY.copy()
    key = xp.sort(first.astype(xp.uint64) * np.uint64(n) + second.astype(xp.uint64))
    clock.mark("merge")
    out = np.empty((len(key), 2), dtype=np.int64)
    out[:, 0] = _to_host(rt, (key // np.uint64(n)).astype(xp.int64))
    out[:, 1] = _to_host(rt, (key % np.uint64(n)).astype(xp.int64))
    clock.mark("back")
    return out


def _host_pairs(rt: Runtime, parts: list[tuple], clock: _Clock) -> list[np.ndarray]:
    out = [np.stack([_to_host(rt, f), _to_host(rt, s)], axis=1) for f, s in parts]
    clock.mark("back")
    return out


def pairs(
    fp: np.ndarray,
    layout: Layout,
    *,
    nc: int = -1,
    memory: int | str | None = None,
    rows: np.ndarray | None = None,
    phases: dict[str, float] | None = None,
) -> np.ndarray:
    """Pairs ``(i, j)``, ``i < j``, of positions in ``fp`` within ``layout.distance`` bits, each
    once, sorted by ``i`` then ``j`` (the CPU engine's order).

    With ``rows`` (table indices) only the pairs whose first table is among them, as
    :func:`neardup.core.search.pairs_for_tables` (one shard of the Dask path).

    With ``nc >= 0`` only pairs of a position below ``nc`` and one at or above it are found (a
    query of ``fp[nc:]`` against the corpus ``fp[:nc]``). ``memory`` bounds the GPU bytes of a
    pass (:func:`budget`); inputs that do not fit run in passes. Pairs stay on the GPU, to be
    sorted there, while they and their sort fit beside the fingerprints (about
    ``SORT_BYTES_PER_PAIR`` each); past that, and after every pass of a split input, they are
    copied to host memory and sorted there.

    ``phases``: a dict to which the seconds of each of :data:`neardup.gpu.PHASES` are added (the
    GPU is synchronized before each timestamp, so only when one is given).
    """
    n = len(fp)
    if n < 2:
        return _EMPTY.copy()
    rt = load()
    xp = rt.xp
    spec, k = layout.spec, layout.distance
    room = budget(rt, memory)
    capacity = max(2, room // BYTES_PER_FINGERPRINT)
    whole = n <= capacity
    spare = room - n * BYTES_PER_FINGERPRINT if whole else 0
    clock = _Clock(rt, phases)
    if whole:
        fp_d, pos_d = xp.asarray(fp), xp.arange(n, dtype=xp.int64)
        clock.mark("to_device")
    held: list[tuple] = []  # pairs on the GPU
    host: list[np.ndarray] = []
    for t in range(layout.n_tables) if rows is None else (int(r) for r in rows):
        for sel in [None] if whole else passes(fp, layout, t, capacity):
            clock.mark("split")
            on = (fp_d, pos_d) if sel is None else (xp.asarray(fp[sel]), xp.asarray(sel))
            clock.mark("to_device")
            held.append(_scan(rt, *on, spec, t, k, nc, clock))
            if sum(len(f) for f, _ in held) * SORT_BYTES_PER_PAIR > spare:
                host += _host_pairs(rt, held, clock)
                held = []
    if not host:
        return _sorted_on_device(rt, held, n, clock)
    host += _host_pairs(rt, held, clock)
    out = sort_pairs(np.concatenate(host), n)
    clock.mark("merge")
    return out

"""numba kernels of the nested-partition pair search (see :mod:`neardup.core.engine`).

Every function here takes contiguous arrays, scalars and the engine's
:class:`~neardup.core.engine.TreePlan` (``tp``), validates nothing and never allocates Python
objects. Kernels other modules call are public (``__all__``), the rest ``_``-prefixed. Fingerprints
are uint64, bit 63 the most significant; all masks are in fingerprint bits.

A *node* of the search tree is a contiguous range of a buffer of fingerprints (``F``) with their
row numbers (``I``) whose members agree on the node's *path*: ``i`` completed blocks, plus the
leading bits of one more block while that block is being split digit by digit. A node is split
by a counting sort on its next digit into a scratch buffer; its children are the digit's buckets.
In a join (queries against a corpus) each bucket holds the queries first, then the corpus
members; a row's side is bit ``tp.fs`` of ``I``.
"""

from __future__ import annotations

import numpy as np

from neardup.compiled import njit
from neardup.primitives import popcount

__all__ = [
    "CSTRIDE",
    "DIGIT",
    "MIN_DIGIT",
    "first_level_histogram",
    "first_level_scatter",
    "root_pairs",
    "search_first_level",
]

_U0 = np.uint64(0)
_U1 = np.uint64(1)
_S63 = np.uint64(63)

#: Widest digit split at once (256 buckets): a node's histogram stays in L1.
DIGIT = 8
#: Narrower digits take lower bits as padding (their buckets are merged again): a histogram of
#: a few counters serialises on store-to-load forwarding (measured 4 bits: 8-13 ns per element,
#: 6 bits and more: 2 ns).
MIN_DIGIT = 6
#: Counters of one split: keys of up to ``DIGIT + 1`` bits (digit, padding, side).
CSTRIDE = (1 << (DIGIT + 1)) + 1


# Buffers are copied with loops: a slice assignment compiles numba's broadcasting and its
# error messages (string formatting), seconds of a cold start for a few lines.


@njit(cache=True, nogil=True)
def _grow_pairs(out, need):
    grown = np.empty((max(2 * out.shape[0], need) + 4096, 2), dtype=np.int64)
    for p in range(out.shape[0]):
        grown[p, 0] = out[p, 0]
        grown[p, 1] = out[p, 1]
    return grown


@njit(cache=True, nogil=True)
def _owned(x, need, chk):
    # x = a ^ b of a pair within k found in a bucket. It is reported here only if this part is
    # its first part within threshold and the bucket's path is its first agreeing blocks: every
    # block in ``need`` (blocks before the path's last block that are not on it) differs.
    # chk = [part mask, part threshold, P, P earlier part masks, their P thresholds, block masks]
    if popcount(x & chk[0]) > chk[1]:
        return False
    npri = np.int64(chk[2])
    for q in range(npri):
        if popcount(x & chk[3 + q]) <= chk[3 + npri + q]:
            return False
    base = 3 + 2 * npri
    b = 0
    while need != _U0:
        if (need & _U1) != _U0 and (x & chk[base + b]) == _U0:
            return False
        need >>= _U1
        b += 1
    return True


#: Buckets up to this size are checked with scalar code.
_SMALL = 8


@njit(cache=True, nogil=True)
def _next_hit(F, lo, mid, hi, a, join, k1):
    """The first rows from ``a`` on with a match within ``k1 - 1`` bits among the columns after
    them (join: the corpus side ``[mid:hi)``): ``(row, rows, hits)`` with the matches of row
    ``row + r`` in bits ``16 r`` up of ``hits`` (at most 65535 each), or ``(-1, 0, 0)``.

    Four rows at a time only count their matches: a branch-free reduction that LLVM vectorises
    (AVX-512 popcounts where the CPU has them), reading each column once for four rows. Only
    the fingerprints are passed: every array argument costs two atomic reference counts.
    """
    end = mid if join else hi - 1
    while a < end:
        if end - a >= 4:
            f0 = F[a]
            f1 = F[a + 1]
            f2 = F[a + 2]
            f3 = F[a + 3]
            h0 = _U0
            h1 = _U0
            h2 = _U0
            h3 = _U0
            for c in range(mid if join else a + 4, hi):
                x = F[c]
                h0 += (popcount(f0 ^ x) - k1) >> _S63
                h1 += (popcount(f1 ^ x) - k1) >> _S63
                h2 += (popcount(f2 ^ x) - k1) >> _S63
                h3 += (popcount(f3 ^ x) - k1) >> _S63
            if not join:  # the six pairs among the four rows
                h0 += (popcount(f0 ^ f1) - k1) >> _S63
                h0 += (popcount(f0 ^ f2) - k1) >> _S63
                h0 += (popcount(f0 ^ f3) - k1) >> _S63
                h1 += (popcount(f1 ^ f2) - k1) >> _S63
                h1 += (popcount(f1 ^ f3) - k1) >> _S63
                h2 += (popcount(f2 ^ f3) - k1) >> _S63
            if (h0 | h1 | h2 | h3) != _U0:
                cap = np.uint64(0xFFFF)
                return (
                    a,
                    4,
                    (
                        min(h0, cap)
                        | (min(h1, cap) << np.uint64(16))
                        | (min(h2, cap) << np.uint64(32))
                        | (min(h3, cap) << np.uint64(48))
                    ),
                )
            a += 4
        else:
            f0 = F[a]
            h = _U0
            for c in range(mid if join else a + 1, hi):
                h += (popcount(f0 ^ F[c]) - k1) >> _S63
            if h != _U0:
                return a, 1, min(h, np.uint64(0xFFFF))
            a += 1
    return -1, 0, _U0


@njit(cache=True, nogil=True)
def _emit_rows(F, R, mid, hi, a, rows, hits, join, kk, need, chk, imask, out, cnt):
    """Write the owned pairs within ``kk`` of rows ``a .. a+rows-1`` (against the columns after
    each row; join: ``[mid:hi)``) to ``out[cnt:]``, which has room for every pair of them.
    A row is walked until its count of matches (from ``hits``, as :func:`_next_hit` packs it)
    is found, 16 columns at a time skipped when none of them matches (a vectorised count)."""
    k1 = kk + _U1
    for r in range(a, a + rows):
        left = (hits >> np.uint64(16 * (r - a))) & np.uint64(0xFFFF)
        if left == np.uint64(0xFFFF):
            left = np.uint64(hi)  # the count saturated: walk the whole row
        fa = F[r]
        ia = np.int64(R[r] & imask)
        c = mid if join else r + 1
        while left > _U0 and c < hi:
            e = min(c + 16, hi)
            t = _U0
            for q in range(c, e):
                t += (popcount(fa ^ F[q]) - k1) >> _S63
            if t != _U0:
                left -= min(t, left)
                for q in range(c, e):
                    x = fa ^ F[q]
                    if popcount(x) <= kk and _owned(x, need, chk):
                        iq = np.int64(R[q] & imask)
                        if join or ia < iq:
                            out[cnt, 0] = ia
                            out[cnt, 1] = iq
                        else:
                            out[cnt, 0] = iq
                            out[cnt, 1] = ia
                        cnt += 1
            c = e
    return cnt


@njit(cache=True, nogil=True)
def _scan(F, R, lo, mid, hi, join, kk, need, chk, imask, out, cnt):
    """Every owned pair within ``kk`` bits among ``F[lo:hi]`` (rows ``R``; join: ``[lo:mid)``
    against ``[mid:hi)``) appended to ``out[cnt:]``; returns ``(out, cnt)``. For a root that is
    never split; the walk makes these calls itself to keep reference counting off its loop."""
    k1 = kk + _U1
    a = lo
    while True:
        a, rows, hits = _next_hit(F, lo, mid, hi, a, join, k1)
        if a < 0:
            return out, cnt
        if cnt + rows * (hi - lo) > out.shape[0]:
            out = _grow_pairs(out, cnt + rows * (hi - lo))
        cnt = _emit_rows(F, R, mid, hi, a, rows, hits, join, kk, need, chk, imask, out, cnt)
        a += rows


@njit(cache=True, nogil=True, inline="always")
def _key(f, ix, shift, pmask, padb, join, fs):
    # digit (with padding) of f; in a join the side bit sits between digit and padding
    raw = (f >> shift) & pmask
    if not join:
        return raw
    low = raw & ((_U1 << padb) - _U1)
    side = (np.uint64(ix) >> fs) & _U1
    return (((raw >> padb) << (padb + _U1)) | (side << padb)) | low


@njit(cache=True, nogil=True)
def _split(SF, SI, lo, hi, top, shift, pd, padb, join, fs, C):
    """Counting sort of ``SF/SI[lo:hi]`` by digit into ``SF/SI[top:]`` (``top >= hi``);
    ``C[key]`` ends as the end of bucket ``key`` (relative to ``top``). Returns False, moving
    nothing, when every member has the same digit."""
    nb = 1 << (pd + (1 if join else 0))
    pmask = (_U1 << np.uint64(pd)) - _U1
    sh = np.uint64(shift)
    pb = np.uint64(padb)
    for q in range(nb + 1):
        C[q] = 0
    for x in range(lo, hi):
        C[1 + np.int64(_key(SF[x], SI[x], sh, pmask, pb, join, fs))] += 1
    g = 1 << (padb + (1 if join else 0))
    r = hi - lo
    for v in range(nb >> (padb + (1 if join else 0))):
        t = 0
        for q in range(v * g, (v + 1) * g):
            t += C[1 + q]
        if t == r:
            return False
        if t > 0:
            break
    for q in range(nb):
        C[q + 1] += C[q]
    for x in range(lo, hi):
        key = np.int64(_key(SF[x], SI[x], sh, pmask, pb, join, fs))
        p = C[key]
        SF[top + p] = SF[x]
        SI[top + p] = SI[x]
        C[key] = p + 1
    return True


@njit(cache=True, nogil=True, inline="always")
def _end(C, q):
    return 0 if q < 0 else C[q]


# fields of a pending node on the walk's stack
_LO, _MID, _HI, _I, _PREV, _C, _S, _RANK, _TOP, _A = range(10)
_FIELDS = 10
#: Stack rows a node may push at once (a split's buckets or a branch's children).
_PUSH = (1 << (DIGIT + 1)) + 66


@njit(cache=True, nogil=True, inline="always")
def _put(st, need, sp, lo, mid, hi, i, prev, c, s, rank, top, nd):
    st[sp, _LO] = lo
    st[sp, _MID] = mid
    st[sp, _HI] = hi
    st[sp, _I] = i
    st[sp, _PREV] = prev
    st[sp, _C] = c
    st[sp, _S] = s
    st[sp, _RANK] = rank
    st[sp, _TOP] = top
    st[sp, _A] = lo
    need[sp] = nd


@njit(cache=True, nogil=True)
def _walk(tp, SF, SI, st, need, sp, C, join, out, cnt):
    """Search the nodes on the stack ``st[:sp]`` and every node below them, depth first.

    A node's members are ``SF/SI[lo:hi]`` (the queries of a join are ``[lo:mid)``). A branch
    node (``c < 0``) has ``i`` completed blocks and its children start block ``c >= prev``; a
    digit node agrees on the first ``s`` bits of block ``c``. ``rank`` is the layout position of
    the first table below the node and ``need`` the blocks that must differ for a pair to be
    owned there; ``a`` the next row of a bucket being checked pair by pair. A split writes its
    buckets to ``SF/SI[top:top+R]``; the walk is last in, first out, so a node's buckets are
    finished before anything that shares that scratch is touched.

    Returns ``(sp, cnt, what, size)``: ``what`` is 0 when the stack is empty, else the buffer
    that must first grow to ``size`` (1 the stack, 2 the scratch, 3 ``out``) before the walk is
    resumed with the same stack. No array is replaced inside the loop: every replacement (and
    every array passed to a call) costs atomic reference counts, which dominated small buckets.
    """
    # the plan's arrays, taken out of the tuple once (each access costs reference counts)
    chk = tp.chk
    stop = tp.stop
    leaves = tp.leaves
    sel = tp.sel
    between = tp.between
    blo = tp.blo
    bw = tp.bw
    m, j, imask, fs = tp.m, tp.j, tp.imask, tp.fs
    kk = np.uint64(tp.k)
    k1 = kk + _U1
    jb = 1 if join else 0
    while sp > 0:
        t = sp - 1
        lo = st[t, _LO]
        mid = st[t, _MID]
        hi = st[t, _HI]
        i = st[t, _I]
        prev = st[t, _PREV]
        c = st[t, _C]
        s = st[t, _S]
        rank = st[t, _RANK]
        top = st[t, _TOP]
        nd = need[t]
        R = hi - lo
        if R < 2 or (join and (mid == lo or mid == hi)):
            sp = t
            continue
        whole = True  # every table below a branch node is searched (no rows selection)
        if c < 0 and i < j and R <= stop[i, prev]:
            below = 0
            for cc in range(prev, m - j + i + 1):
                below += leaves[i + 1, cc]
            whole = sel[rank + below] - sel[rank] == below
        if c < 0 and (i == j or (R <= stop[i, prev] and whole)):
            # the bucket pair by pair; resumable after out has grown
            a = st[t, _A]
            while True:
                a, rows, hits = _next_hit(SF, lo, mid, hi, a, join, k1)
                if a < 0:
                    break
                if cnt + rows * R > out.shape[0]:
                    st[t, _A] = a
                    return sp, cnt, 3, cnt + rows * R
                cnt = _emit_rows(SF, SI, mid, hi, a, rows, hits, join, kk, nd, chk, imask, out,
                                 cnt)  # fmt: skip
                a += rows
            sp = t
            continue
        if sp + _PUSH > st.shape[0]:
            return sp, cnt, 1, sp + _PUSH
        if c < 0:
            # children pushed last block first, so the first block is searched first
            sp = t
            ranks = rank
            for cc in range(prev, m - j + i + 1):
                ranks += leaves[i + 1, cc]
            for cc in range(m - j + i, prev - 1, -1):
                nl = leaves[i + 1, cc]
                ranks -= nl
                if sel[ranks + nl] > sel[ranks]:
                    _put(st, need, sp, lo, mid, hi, i, prev, cc, 0, ranks, top,
                         nd | between[prev, cc])  # fmt: skip
                    sp += 1
            continue
        if top + R > SF.shape[0]:
            return sp, cnt, 2, top + R
        sp = t
        w = bw[c]
        split = False
        d = 0
        padb = 0
        while s < w:
            d = min(DIGIT, w - s)
            hb = blo[c] + w - s
            pd = min(max(d, MIN_DIGIT), hb)
            padb = pd - d
            split = _split(SF, SI, lo, hi, top, hb - pd, pd, padb, join, fs, C)
            s += d
            if split:
                break
        if not split:  # every member agrees on block c: the same range is the next branch node
            _put(st, need, sp, lo, mid, hi, i + 1, c + 1, -1, 0, rank, top, nd)
            sp += 1
            continue
        g = 1 << (padb + jb)
        if s == w:
            ci, cp, cc, cs = i + 1, c + 1, -1, 0
        else:
            ci, cp, cc, cs = i, prev, c, s
        for v in range((1 << d) - 1, -1, -1):
            blo_v = top + _end(C, v * g - 1)
            bhi_v = top + _end(C, (v + 1) * g - 1)
            if bhi_v - blo_v < 2:
                continue
            bmid_v = top + _end(C, v * g + (g >> 1) - 1) if join else blo_v
            _put(st, need, sp, blo_v, bmid_v, bhi_v, ci, cp, cc, cs, rank, top + R, nd)
            sp += 1
    return sp, cnt, 0, 0


@njit(cache=True, nogil=True)
def _grow_stack(st, need, size):
    st2 = np.empty((2 * size, _FIELDS), dtype=np.int64)
    for r in range(st.shape[0]):
        for f in range(_FIELDS):
            st2[r, f] = st[r, f]
    need2 = np.empty(2 * size, dtype=np.uint64)
    for r in range(need.shape[0]):
        need2[r] = need[r]
    return st2, need2


@njit(cache=True, nogil=True)
def _grow_scratch(SF, SI, size):
    nf = np.empty(2 * size, dtype=SF.dtype)
    ni = np.empty(2 * size, dtype=SI.dtype)
    for x in range(SF.shape[0]):
        nf[x] = SF[x]
        ni[x] = SI[x]
    return nf, ni


@njit(cache=True, nogil=True)
def _run(tp, SF, SI, st, need, sp, C, join, out, cnt):
    """:func:`_walk` until the stack is empty, growing its buffers when it asks."""
    while True:
        sp, cnt, what, size = _walk(tp, SF, SI, st, need, sp, C, join, out, cnt)
        if what == 0:
            return SF, SI, st, need, out, cnt
        if what == 1:
            st, need = _grow_stack(st, need, size)
        elif what == 2:
            SF, SI = _grow_scratch(SF, SI, size)
        else:
            out = _grow_pairs(out, size)


@njit(cache=True, nogil=True)
def first_level_histogram(F, lo, hi, shift, pd, padb, join, side, counts):
    """Add the digit histogram of ``F[lo:hi]`` (all on ``side`` in a join) to ``counts``."""
    pmask = (_U1 << np.uint64(pd)) - _U1
    sh = np.uint64(shift)
    pb = np.uint64(padb)
    tag = np.uint64(side) << np.uint64(62)
    for x in range(lo, hi):
        counts[np.int64(_key(F[x], tag, sh, pmask, pb, join, np.uint64(62)))] += 1


@njit(cache=True, nogil=True)
def first_level_scatter(F, lo, hi, side, shift, pd, padb, join, fs, pos, DF, DI):
    """Move ``F[lo:hi]`` with their rows (side bit ``fs`` set on side 1) to ``DF/DI`` at the
    running bucket positions ``pos`` (advanced)."""
    pmask = (_U1 << np.uint64(pd)) - _U1
    sh = np.uint64(shift)
    pb = np.uint64(padb)
    tag = np.uint64(side) << np.uint64(62)
    flag = np.uint64(side) << np.uint64(fs)
    for x in range(lo, hi):
        key = np.int64(_key(F[x], tag, sh, pmask, pb, join, np.uint64(62)))
        p = pos[key]
        DF[p] = F[x]
        DI[p] = np.uint64(x) | flag
        pos[key] = p + 1


@njit(cache=True, nogil=True)
def search_first_level(tp, DF, DI, ends, v_lo, v_hi, a, d1, padb1, join):
    """Search the first-level buckets ``v_lo..v_hi-1`` of block ``a``'s first digit (``d1``
    bits); ``ends[key]`` is the end of each key's range in ``DF/DI``. Returns ``(pairs, count)``.

    Each bucket is copied to the scratch buffer first, so the walk reads one pair of arrays.
    """
    g = 1 << (padb1 + (1 if join else 0))
    big = 0
    for v in range(v_lo, v_hi):
        big = max(big, _end(ends, (v + 1) * g - 1) - _end(ends, v * g - 1))
    SF = np.empty(3 * big + 64, dtype=DF.dtype)
    SI = np.empty(3 * big + 64, dtype=DI.dtype)
    C = np.empty(CSTRIDE, dtype=np.int64)
    st = np.empty((1024, _FIELDS), dtype=np.int64)
    need = np.empty(1024, dtype=np.uint64)
    out = np.empty((1024, 2), dtype=np.int64)
    cnt = np.int64(0)  # not the literal 0: a call typed with a literal compiles twice
    rank = 0
    for b in range(a):
        rank += tp.leaves[1, b]
    nd = tp.between[0, a]
    full = d1 == tp.bw[a]
    for v in range(v_lo, v_hi):
        lo = _end(ends, v * g - 1)
        hi = _end(ends, (v + 1) * g - 1)
        if hi - lo < 2:
            continue
        mid = _end(ends, v * g + (g >> 1) - 1) if join else lo
        r = hi - lo
        for x in range(r):
            SF[x] = DF[lo + x]
            SI[x] = DI[lo + x]
        if full:
            _put(st, need, 0, 0, mid - lo, r, 1, a + 1, -1, 0, rank, r, nd)
        else:
            _put(st, need, 0, 0, mid - lo, r, 0, a, a, d1, rank, r, nd)
        SF, SI, st, need, out, cnt = _run(tp, SF, SI, st, need, 1, C, join, out, cnt)
    return out, cnt


@njit(cache=True, nogil=True)
def root_pairs(tp, F, R, lo, mid, hi, join):
    """Every pair by brute force over ``F[lo:hi]`` (a root too small to split)."""
    return _scan(F, R, lo, mid, hi, join, np.uint64(tp.k), _U0, tp.chk, tp.imask,
                 np.empty((64, 2), dtype=np.int64), np.int64(0))  # fmt: skip

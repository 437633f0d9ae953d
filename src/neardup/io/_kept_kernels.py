"""numba kernel of dedup's second pass: the kept lines of a block copied out, GIL-free.

Every function takes contiguous arrays and validates nothing. Kernels other modules call are public
(``__all__``), the rest ``_``-prefixed.
"""

from __future__ import annotations

from neardup.compiled import njit

__all__ = ["gather_lines"]


@njit(cache=True, nogil=True)
def gather_lines(buf, ends, first, numbers, i, out):
    """Copy the lines of ``buf`` whose numbers are in ``numbers[i:]`` to ``out``, each ending
    in a newline.

    ``buf`` holds whole lines numbered from ``first``; line ``first + k`` ends at ``ends[k]``
    (its newline, or the end of ``buf``) and starts after line ``k - 1``'s end. ``numbers`` is
    ascending int64; ``out`` holds at least ``len(buf) + 1`` bytes.

    Returns ``(bytes written, numbers taken)``.
    """
    m = numbers.shape[0]
    lines = ends.shape[0]
    j = i
    o = 0
    while j < m:
        k = numbers[j] - first
        if k >= lines:
            break
        s = ends[k - 1] + 1 if k > 0 else 0
        e = ends[k]
        for t in range(s, e):  # a loop: a slice copy costs seconds more to compile
            out[o] = buf[t]
            o += 1
        out[o] = 10
        o += 1
        j += 1
    return o, j - i

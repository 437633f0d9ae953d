"""Packed sort orders (neardup.core.order) against numpy's lexsort and a counter."""

from __future__ import annotations

from collections import Counter

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from neardup.core.order import lexorder, row_counts

DTYPES = [np.int64, np.int32, np.uint32, np.uint64, np.uint8, np.bool_]


@st.composite
def columns(draw):
    n = draw(st.integers(0, 60))
    k = draw(st.integers(1, 4))
    cols = []
    for _ in range(k):
        dtype = draw(st.sampled_from(DTYPES))
        if dtype == np.bool_:
            cols.append(draw(hnp.arrays(np.bool_, n)))
            continue
        info = np.iinfo(dtype)
        lo = draw(st.sampled_from([int(info.min), 0, -5 if info.min < 0 else 0]))
        wide = [lo + 2**33, lo + 2**60] if info.max > 2**61 else [lo + 7]
        hi = draw(st.sampled_from([int(info.max), lo + 3, *wide]))
        vals = draw(st.lists(st.integers(lo, hi), min_size=n, max_size=n))
        cols.append(np.array(vals, dtype=dtype))
    return cols


@given(columns())
@settings(max_examples=300, deadline=None)
def test_lexorder_is_lexsort(cols):
    """Same order as np.lexsort, ties in row order, whether the columns pack or not."""
    assert lexorder(cols).tolist() == np.lexsort(cols).tolist()


def test_lexorder_packs_and_falls_back():
    """Columns that fit 64 bits with the row numbers pack; wide ones take lexsort: both exact."""
    rng = np.random.default_rng(1)
    narrow = [rng.integers(0, 1000, 5000), rng.integers(0, 2**32, 5000).astype(np.uint32)]
    wide = [rng.integers(0, 2**62, 5000), rng.integers(-(2**62), 2**62, 5000)]
    floats = [rng.random(5000)]
    tight = [rng.integers(0, 2**60, 5000)]  # no room for row numbers: distinct values
    tight_ties = [rng.integers(0, 2**60, 5000) // 2**58]  # ... and ties, sorted stably
    tight_ties[0][0] = 2**60 - 1
    for cols in (narrow, wide, floats, tight, tight_ties):
        assert np.array_equal(lexorder(cols), np.lexsort(cols))


@given(
    st.lists(st.tuples(st.integers(-3, 40), st.integers(-3, 40)), max_size=80),
    st.sampled_from([0, 2**31, 2**40, 2**62]),
)
@settings(max_examples=300, deadline=None)
def test_row_counts(rows, scale):
    """Distinct rows sorted, with their counts, narrow (packed) or wide (lexsort)."""
    a = np.array(rows, dtype=np.int64).reshape(-1, 2) * max(1, scale)
    got, count = row_counts(a)
    want = sorted(Counter(map(tuple, a.tolist())).items())
    assert [tuple(r) for r in got.tolist()] == [r for r, _ in want]
    assert count.tolist() == [c for _, c in want]
    assert got.dtype == np.int64 and got.shape == (len(want), 2)

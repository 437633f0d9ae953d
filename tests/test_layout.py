"""Block widths, table order, permutations, packed specs and schemes."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from neardup.core.bits import from_binary
from neardup.core.layout import (
    Layout,
    Part,
    Scheme,
    TableSpec,
    block_widths,
    pack_tables,
)

CORPUS = "0100101110111011001000101111101110111100001010011101100110110101"
QUERY = "0100101110111011011000101111101110011100001010011100100110110101"


def test_widths_follow_the_reference_picture():
    assert block_widths(6) == (11, 11, 11, 11, 10, 10)
    assert block_widths(64) == (1,) * 64
    assert block_widths(1) == (64,)
    for m in range(1, 65):
        w = block_widths(m)
        assert sum(w) == 64 and max(w) - min(w) <= 1 and list(w) == sorted(w, reverse=True)


def test_worked_example_from_the_reference():
    layout = Layout(6, 3)
    a, b = from_binary(CORPUS), from_binary(QUERY)
    x = a ^ b
    assert bin(x).count("1") == 3
    differing = [blk for blk in range(6) if x & layout.block_mask(blk)]
    assert differing == [1, 3, 4]  # B, D, E
    finders = [t for t in layout.tables if x & t.lead_mask == 0]
    assert [t.leading for t in finders] == [(0, 2, 5)]  # A C F
    t = finders[0].index
    pa, pb = layout.apply(np.array([a, b], dtype=np.uint64), t)
    assert int(pa) >> (64 - finders[0].prefix_bits) == int(pb) >> (64 - finders[0].prefix_bits)
    assert [format(m, "064b").index("1") for m in layout.table_masks(t)] == [0, 22, 54, 11, 33, 44]


def test_tables_are_combinations_in_lexicographic_order():
    layout = Layout(6, 3)
    assert layout.n_tables == 20
    assert [t.leading for t in layout.tables] == list(itertools.combinations(range(6), 3))
    assert layout.tables[0].order == (0, 1, 2, 3, 4, 5)
    assert layout.tables[-1].order == (3, 4, 5, 0, 1, 2)


@settings(max_examples=200, deadline=None)
@given(
    st.integers(1, 64).flatmap(lambda m: st.tuples(st.just(m), st.integers(0, m - 1))), st.data()
)
@pytest.mark.slow
def test_permutation_masks_and_round_trip(mk, data):
    m, k = mk
    if math.comb(m, k) > 5000:
        k = min(k, 2)
    layout = Layout(m, k)
    t = data.draw(st.integers(0, layout.n_tables - 1))
    masks = layout.table_masks(t)
    assert sum(bin(mask).count("1") for mask in masks) == 64
    union = 0
    for mask in masks:
        assert mask & union == 0
        low = (mask & -mask).bit_length() - 1
        assert mask >> low == (1 << bin(mask).count("1")) - 1  # contiguous
        union |= mask
    assert union == 2**64 - 1
    x = np.array(data.draw(st.lists(st.integers(0, 2**64 - 1), max_size=20)), dtype=np.uint64)
    y = layout.apply(x, t)
    np.testing.assert_array_equal(layout.reverse(y, t), x)
    np.testing.assert_array_equal(np.bitwise_count(y), np.bitwise_count(x))
    # the leading blocks land, in order, in the top bits
    table = layout.tables[t]
    for v, pv in zip(x.tolist(), y.tolist()):
        expect = 0
        for b in table.leading:
            expect = (expect << layout.widths[b]) | ((v & layout.block_mask(b)) >> layout.lows[b])
        assert pv >> (64 - table.prefix_bits) == expect


@pytest.mark.parametrize(
    "blocks, distance, message",
    [
        (3, 3, r"use blocks >= 4"),
        (0, 0, "blocks must be > distance"),
        (65, 3, "blocks must be <= 64"),
        (5, -1, "distance must be >= 0"),
        (64, 30, "tables"),
    ],
)
def test_invalid_layouts(blocks, distance, message):
    with pytest.raises(ValueError, match=message):
        Layout(blocks, distance)


@pytest.mark.parametrize("blocks, distance", [(1, 0), (4, 3), (6, 3), (10, 8), (7, 2), (64, 2)])
def test_spec_names_both_coordinate_systems(blocks, distance):
    layout = Layout(blocks, distance)
    spec = layout.spec
    assert layout.spec is spec  # packed once per layout
    assert isinstance(spec, TableSpec) and len(spec.pbits) == layout.n_tables
    x = np.random.default_rng(blocks).integers(0, 2**64, 50, dtype=np.uint64)
    for t, table in enumerate(layout.tables):
        p = table.prefix_bits
        assert spec.pbits[t] == p
        assert int(spec.lead_fp[t]) == table.lead_mask
        # key bits: the leading blocks are the top p bits of the key
        assert int(spec.lead_key[t]) == ((1 << p) - 1) << (64 - p)
        assert int(spec.lead_key[t]) == layout.apply_mask(table.lead_mask, t)
        nchk = int(spec.nchk[t])
        assert nchk == len(table.check_masks)
        for c, mask in enumerate(table.check_masks):
            assert int(spec.chk_fp[t, c]) == mask
            assert int(spec.chk_key[t, c]) == int(layout.apply(np.array([mask], np.uint64), t)[0])
        keys = layout.apply(x, t)
        assert bool(spec.identity[t]) == np.array_equal(keys, x)
        # a key-bit XOR under the key masks says what the fingerprint-bit XOR says
        y = np.roll(x, 1)
        fp_xor, key_xor = x ^ y, keys ^ np.roll(keys, 1)
        np.testing.assert_array_equal(
            fp_xor & spec.lead_fp[t] == 0, key_xor & spec.lead_key[t] == 0
        )
    assert bool(spec.identity[0])


def test_pack_tables_of_a_subset_matches_the_layout_rows():
    layout = Layout(7, 3)
    sub = pack_tables(layout.tables[5:9])
    full = layout.spec
    for r, t in enumerate(range(5, 9)):
        n = int(full.nseg[t])
        np.testing.assert_array_equal(sub.seg_src[r, :n], full.seg_src[t, :n])
        assert sub.pbits[r] == full.pbits[t] and sub.lead_key[r] == full.lead_key[t]
        np.testing.assert_array_equal(
            sub.chk_key[r, : sub.nchk[r]], full.chk_key[t, : full.nchk[t]]
        )


def test_scheme_validation():
    Scheme(8, (Part(36, 28, 6, 3), Part(0, 36, 7, 4)))
    with pytest.raises(ValueError, match="do not cover"):
        Scheme(8, (Part(36, 28, 6, 3), Part(0, 36, 7, 3)))
    with pytest.raises(ValueError, match="invalid part"):
        Scheme(8, (Part(30, 34, 6, 3), Part(0, 36, 7, 4)))  # overlapping bits
    with pytest.raises(ValueError, match="invalid part"):
        Scheme(3, (Part(0, 64, 3, 3),))  # threshold must be below blocks
    one = Scheme.of(Layout(6, 3))
    assert one.parts == (Part(0, 64, 6, 3),) and one.describe() == "6 blocks / 20 tables"
    assert Part(0, 64, 6, 3).widths == block_widths(6)
    assert Part(20, 24, 5, 2).widths == (5, 5, 5, 5, 4)
    assert Part(20, 24, 5, 2).lows == (39, 34, 29, 24, 20)

"""neardup.index.codec: Elias-Fano tables decode to the values coded, answer lookups like
numpy on the plain array, stay near the information bound and name corrupt files."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from strategies import fingerprints

from neardup.index import CorruptIndexError
from neardup.index.codec import (
    CompressedTable,
    encode,
    information_bound_bits,
    load_table,
    write_table,
)

EDGE = np.array([0, 1, 2, 2**63, 2**64 - 2, 2**64 - 1], dtype=np.uint64)


def sorted_sets(seed: int):
    rng = np.random.default_rng(seed)
    yield np.zeros(0, np.uint64)
    yield np.array([0], np.uint64)
    yield np.array([2**64 - 1], np.uint64)
    yield np.sort(EDGE)
    yield np.zeros(300, np.uint64)  # one value repeated
    yield np.full(5, 2**64 - 1, np.uint64)
    for n in (2, 33, 1023, 1024, 1025, 5000):
        yield np.sort(rng.integers(0, 2**64, n, dtype=np.uint64, endpoint=False))
    # dense runs (many values per bucket) and long empty stretches
    yield np.sort(rng.integers(0, 50, 4000).astype(np.uint64) << np.uint64(44))
    yield np.arange(3000, dtype=np.uint64)
    yield np.sort(np.concatenate([np.arange(100, dtype=np.uint64), EDGE]))


def queries_for(v: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    near = v[rng.integers(0, len(v), 20)] if len(v) else np.zeros(0, np.uint64)
    return np.concatenate(
        [near, near + np.uint64(1), rng.integers(0, 2**64, 40, dtype=np.uint64), EDGE]
    )


@pytest.mark.parametrize("seed", [0, 1])
@pytest.mark.slow
def test_round_trip_and_lookups_match_numpy(seed):
    rng = np.random.default_rng(seed + 10)
    for v in sorted_sets(seed):
        t = CompressedTable(encode(v))
        t.check()
        assert len(t) == len(v)
        np.testing.assert_array_equal(t.decode(), v)
        np.testing.assert_array_equal(t[:], v)
        if len(v):
            for a in {0, len(v) // 3, len(v) - 1}:
                np.testing.assert_array_equal(t.decode(a, a + 1500), v[a : a + 1500])
                assert t[a] == v[a]
            assert t[-1] == v[-1]
            idx = rng.integers(0, len(v), 30)
            np.testing.assert_array_equal(t[idx], v[idx])
        with pytest.raises(IndexError):
            t[len(v)]
        q = queries_for(v, rng)
        np.testing.assert_array_equal(t.searchsorted(q), np.searchsorted(v, q, "left"))
        np.testing.assert_array_equal(t.searchsorted(q, "right"), np.searchsorted(v, q, "right"))
        lo, hi = t.equal_range(q)
        np.testing.assert_array_equal(lo, np.searchsorted(v, q, "left"))
        np.testing.assert_array_equal(hi, np.searchsorted(v, q, "right"))
        for x in q[:25].tolist():
            for shift in (0, 1, 17, 40, 63):
                got, first = t.prefix_values(x >> shift, shift)
                sel = (v >> np.uint64(shift)) == np.uint64(x >> shift)
                np.testing.assert_array_equal(got, v[sel])
                assert first == np.searchsorted(v, np.uint64((x >> shift) << shift))


@settings(max_examples=60, deadline=None)
@given(values=fingerprints(max_size=300), shift=st.integers(0, 63))
@pytest.mark.slow
def test_property_matches_numpy(values, shift):
    v = np.sort(values)
    t = CompressedTable(encode(v))
    t.check()
    np.testing.assert_array_equal(t.decode(), v)
    q = np.concatenate([values, values ^ np.uint64(1), EDGE])
    np.testing.assert_array_equal(t.searchsorted(q), np.searchsorted(v, q, "left"))
    np.testing.assert_array_equal(t.searchsorted(q, "right"), np.searchsorted(v, q, "right"))
    for x in q[:10].tolist():
        got, _ = t.prefix_values(x >> shift, shift)
        np.testing.assert_array_equal(got, v[(v >> np.uint64(shift)) == np.uint64(x >> shift)])


@pytest.mark.parametrize("n", [1000, 100_000, 1_000_000])
def test_size_is_near_the_information_bound(n):
    v = np.sort(np.random.default_rng(n).integers(0, 2**64, n, dtype=np.uint64))
    bits = encode(v).nbytes * 8 / n
    bound = information_bound_bits(n)
    assert bound == pytest.approx(64 - math.log2(n) + 1.4427, abs=0.01)
    assert bound <= bits <= 1.05 * bound + 64 * 40 / n  # header and spare words at small n


def test_corrupt_files_are_named(tmp_path):
    v = np.sort(np.random.default_rng(3).integers(0, 2**64, 5000, dtype=np.uint64))
    entry = write_table(str(tmp_path), "s00000000.t1.npy", v, "ef")
    assert entry["codec"] == "ef" and entry["values"] == 5000
    t = load_table(str(tmp_path), entry)
    assert isinstance(t, CompressedTable)
    np.testing.assert_array_equal(t.decode(), v)
    assert isinstance(
        load_table(str(tmp_path), write_table(str(tmp_path), "p.npy", v, None)), np.ndarray
    )
    words = encode(v)
    for word, value in ((0, 12345), (2, 70), (6, 1)):
        bad = words.copy()
        bad[word] = value
        with pytest.raises(CorruptIndexError, match="t1.npy"):
            CompressedTable(bad, "s.t1.npy")
    with pytest.raises(CorruptIndexError, match="too short"):
        CompressedTable(words[:5], "x")
    flipped = words.copy()
    flipped[20] ^= np.uint64(1 << 7)  # a bit of the high-bit vector
    with pytest.raises(CorruptIndexError, match="s.t1.npy"):
        CompressedTable(flipped, "s.t1.npy").check()
    with pytest.raises(CorruptIndexError, match="manifest records"):
        load_table(str(tmp_path), dict(entry, values=4999))
    with pytest.raises(ValueError, match="unknown table codec"):
        write_table(str(tmp_path), "z.npy", v, "zstd")

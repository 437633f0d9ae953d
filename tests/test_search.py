"""find_all, find_clusters and query against brute force."""

from __future__ import annotations

import naive
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from strategies import fingerprints, layouts

import neardup
from neardup.core.search import cluster_groups, find_all_values

ALL_ONES = 2**64 - 1


def planted(n: int, seed: int = 0) -> np.ndarray:
    """90% random values, 10% within 1-3 bit flips of another value, some exact repeats."""
    rng = np.random.default_rng(seed)
    fp = rng.integers(0, ALL_ONES, n, dtype=np.uint64, endpoint=True)
    for i in rng.choice(n, n // 10, replace=False):
        v = fp[rng.integers(0, n)]
        for bit in rng.integers(0, 64, rng.integers(0, 4)):
            v ^= np.uint64(1) << np.uint64(bit)
        fp[i] = v
    return fp


@settings(max_examples=150, deadline=None)
@given(fingerprints(), layouts())
def test_find_all_matches_brute_force(fp, layout):
    distance, blocks = layout
    got = neardup.find_all(fp, distance, blocks)
    assert got.dtype == np.int64 and got.shape[1] == 2
    np.testing.assert_array_equal(got, naive.find_all(fp, distance))


@settings(max_examples=100, deadline=None)
@given(fingerprints(), layouts())
def test_find_clusters_matches_brute_force(fp, layout):
    distance, blocks = layout
    np.testing.assert_array_equal(
        neardup.find_clusters(fp, distance, blocks), naive.find_clusters(fp, distance)
    )


@settings(max_examples=100, deadline=None)
@given(fingerprints(), fingerprints(max_size=30), layouts())
def test_query_matches_brute_force(corpus, queries, layout):
    distance, blocks = layout
    got = neardup.query(corpus, queries, distance, blocks)
    for g, e in zip(got, naive.query(corpus, queries, distance)):
        np.testing.assert_array_equal(g, e)


@settings(max_examples=60, deadline=None)
@given(fingerprints(), layouts())
def test_find_all_values_is_the_set_form(fp, layout):
    distance, blocks = layout
    got = find_all_values(fp, distance, blocks)
    assert got.dtype == np.uint64
    np.testing.assert_array_equal(got, naive.find_all_values(fp, distance))


@pytest.mark.parametrize(
    "distance, blocks",
    [(0, 1), (0, 64), (1, 2), (1, 64), (2, 64), (3, 4), (3, 6), (7, 8), (3, None)],
)
def test_fixed_inputs_and_edge_layouts(distance, blocks):
    edge = np.array([0, 0, ALL_ONES, ALL_ONES, 1, 3], dtype=np.uint64)
    fp = np.concatenate([planted(3000, seed=distance), edge])
    np.testing.assert_array_equal(
        neardup.find_all(fp, distance, blocks), naive.find_all(fp, distance)
    )


@pytest.mark.parametrize("threads", [1, 2, 3])
def test_threads_give_identical_results(threads):
    fp = planted(30_000, seed=5)
    expected = naive.find_all(fp[:4000], 3)
    np.testing.assert_array_equal(neardup.find_all(fp[:4000], 3, threads=threads), expected)
    a = neardup.find_all(fp, 3, 5, threads=1)
    b = neardup.find_all(fp, 3, 5, threads=threads)
    np.testing.assert_array_equal(a, b)
    assert len(a) > 0


def test_identical_values_are_pairs_at_distance_zero():
    fp = [7, 7, 7, 2**64 - 1, 2**64 - 1]
    assert neardup.find_all(fp, 0).tolist() == [[0, 1], [0, 2], [1, 2], [3, 4]]
    assert neardup.find_clusters(fp, 0).tolist() == [0, 0, 0, 3, 3]
    assert find_all_values(fp, 0).tolist() == []


@pytest.mark.parametrize("fp", [[], [5], np.array([], dtype=np.uint64)])
def test_empty_and_single(fp):
    assert neardup.find_all(fp, 3).shape == (0, 2)
    assert neardup.find_clusters(fp, 3).tolist() == list(range(len(fp)))
    r = neardup.query(fp, [5, 4], 3)
    assert r.query_index.tolist() == ([0, 1] if len(fp) else [])
    assert r.distance.tolist() == ([0, 1] if len(fp) else [])


def test_input_types():
    as_list = [0, 1, 2**64 - 1, 2**64 - 2]
    expected = [[0, 1], [2, 3]]
    assert neardup.find_all(as_list, 1).tolist() == expected
    assert neardup.find_all(np.array(as_list, dtype=np.uint64), 1).tolist() == expected
    assert neardup.find_all(np.array([0, 1, 6], dtype=np.int64), 1).tolist() == [[0, 1]]
    assert neardup.find_all(np.array([0, 1], dtype=np.uint32), 1).tolist() == [[0, 1]]


@pytest.mark.parametrize(
    "bad, message",
    [
        ([-1, 2], "non-negative"),
        ([2**64], r"\[0, 2\*\*64\)"),
        ([1, 2**64], r"\[0, 2\*\*64\)"),
        ([1.5, 2.0], "integers"),
        ([[1, 2]], "one-dimensional"),
        (["12"], "integers"),
    ],
)
def test_bad_fingerprints(bad, message):
    with pytest.raises(ValueError, match=message):
        neardup.find_all(bad, 1)


@pytest.mark.parametrize(
    "distance, blocks, message",
    [
        (3, 3, r"blocks must be > distance \(got blocks=3, distance=3\); use blocks >= 4"),
        (3, 65, "blocks must be <= 64"),
        (-1, None, "distance must be >= 0"),
        (64, None, "distance must be < 64"),
        (10, 64, "tables"),
    ],
)
def test_bad_layout(distance, blocks, message):
    with pytest.raises(ValueError, match=message):
        neardup.find_all([1, 2, 3], distance, blocks)


def test_clusters_are_connected_components_not_cliques():
    # a ~ b ~ c with a and c 4 bits apart: one cluster at distance 2
    a, b, c = 0, 0b11, 0b1111
    labels = neardup.find_clusters([c, 0b111 << 40, a, b], 2)
    assert labels.tolist() == [0, 1, 0, 0]
    groups = cluster_groups(labels)
    assert [g.tolist() for g in groups] == [[0, 2, 3]]
    assert [g.tolist() for g in cluster_groups(labels, min_size=1)] == [[0, 2, 3], [1]]


def test_query_distance_order_and_limit():
    corpus = [0b1111, 0b0111, 0b0011, 0b0001, 0b111 << 50]
    r = neardup.query(corpus, [0b0001, 0b111 << 50], 3)
    assert r.query_index.tolist() == [0, 0, 0, 0, 1]
    assert r.corpus_index.tolist() == [3, 2, 1, 0, 4]
    assert r.distance.tolist() == [0, 1, 2, 3, 0]


@pytest.mark.scale
def test_scale_planted_against_brute_force_sample():
    fp = planted(300_000, seed=11)
    pairs = neardup.find_all(fp, 3)
    # every reported pair is a real match, none repeated
    assert (np.bitwise_count(fp[pairs[:, 0]] ^ fp[pairs[:, 1]]) <= 3).all()
    assert (pairs[:, 0] < pairs[:, 1]).all()
    assert len(np.unique(pairs, axis=0)) == len(pairs)
    # completeness on a sub-sample that brute force can check: a pair within the first 6000
    sub = fp[:6000]
    np.testing.assert_array_equal(neardup.find_all(sub, 3), naive.find_all(sub, 3))
    inside = pairs[(pairs[:, 1] < 6000)]
    np.testing.assert_array_equal(inside, naive.find_all(sub, 3))


def test_distance_must_be_int_not_bool():
    with pytest.raises(ValueError, match="integer"):
        neardup.find_all([1, 2], distance=True)
    with pytest.raises(ValueError, match="integer"):
        neardup.find_all([1, 2], distance=1.5)


@given(st.integers(0, 2**64 - 1), st.integers(0, 2**64 - 1))
def test_pair_of_two(a, b):
    d = int(np.bitwise_count(np.uint64(a) ^ np.uint64(b)))
    for k in (0, 3, 6):
        expected = [[0, 1]] if d <= k else []
        assert neardup.find_all([a, b], k).tolist() == expected


@pytest.mark.parametrize("threads", [2, 3, 4])
def test_threads_sharing_each_table_match_brute_force(monkeypatch, threads):
    from neardup import config

    monkeypatch.setattr(config, "SPLIT_TABLES_FROM", 0)
    monkeypatch.setattr(config, "THREADS_FROM", 0)
    fp = planted(25_000, seed=threads)
    fp[:50] = 0  # skewed top bits: one part of the in-place split gets far more keys
    fp[50:60] = 2**64 - 1
    sub = fp[:5000]
    for distance, blocks in [(3, None), (3, 4), (0, 1), (6, 7), (2, 64)]:
        np.testing.assert_array_equal(
            neardup.find_all(sub, distance, blocks, threads=threads), naive.find_all(sub, distance)
        )
    np.testing.assert_array_equal(
        neardup.find_all(fp, 3, 5, threads=threads), neardup.find_all(fp, 3, 5, threads=1)
    )

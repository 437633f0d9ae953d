"""find_all, find_clusters and query against brute force."""

from __future__ import annotations

import contextlib
import math

import naive
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from strategies import fingerprints, layouts

import neardup
from neardup.core import cost, engine, search
from neardup.core.cost import choose_scheme
from neardup.core.layout import Layout, Part, Scheme
from neardup.core.search import cluster_groups, find_all_values, pairs_for_tables, sort_pairs

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
@pytest.mark.slow
def test_find_all_matches_brute_force(fp, layout):
    distance, blocks = layout
    got = neardup.find_all(fp, distance, blocks)
    assert got.dtype == np.int64 and got.shape[1] == 2
    np.testing.assert_array_equal(got, naive.find_all(fp, distance))


@settings(max_examples=100, deadline=None)
@given(fingerprints(), layouts())
@pytest.mark.slow
def test_find_clusters_matches_brute_force(fp, layout):
    distance, blocks = layout
    np.testing.assert_array_equal(
        neardup.find_clusters(fp, distance, blocks), naive.find_clusters(fp, distance)
    )


@settings(max_examples=100, deadline=None)
@given(fingerprints(), fingerprints(max_size=30), layouts())
@pytest.mark.slow
def test_query_matches_brute_force(corpus, queries, layout):
    distance, blocks = layout
    got = neardup.query(corpus, queries, distance, blocks)
    assert len(got) == len(queries)
    flat = (got.query_index, got.ids, got.distances)
    for g, e in zip(flat, naive.query(corpus, queries, distance), strict=True):
        np.testing.assert_array_equal(g, e)


@pytest.mark.slow
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
    assert r.distances.tolist() == ([0, 1] if len(fp) else [])
    assert len(r) == 2 and r.offsets.tolist() == ([0, 1, 2] if len(fp) else [0, 0, 0])


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
    assert r.ids.tolist() == [3, 2, 1, 0, 4]
    assert r.distances.tolist() == [0, 1, 2, 3, 0]
    assert r.to_lists() == [[(3, 0), (2, 1), (1, 2), (0, 3)], [(4, 0)]]


@pytest.mark.slow
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


@pytest.mark.slow
@pytest.mark.parametrize("threads", [2, 3, 4])
def test_threads_sharing_each_table_match_brute_force(monkeypatch, threads):
    monkeypatch.setattr(search, "THREADS_FROM", 0)
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


# -- the nested-partition engine: schemes, deep trees, selections, joins, families -------------


@st.composite
def schemes(draw, max_distance: int = 14):
    """A distance and a Scheme: one layout, or two or three parts with their own thresholds."""
    k = draw(st.integers(0, max_distance))
    kind = draw(st.sampled_from(["layout", "parts", "parts"]))
    if kind == "layout" or k == 0:
        top = k + 1
        while top < 64 and math.comb(top + 1, k) <= 3000 and top < k + 5:
            top += 1
        return Scheme.of(Layout(draw(st.integers(k + 1, top)), k))
    nparts = draw(st.integers(2, 3))
    cuts = sorted(
        draw(st.lists(st.integers(8, 56), min_size=nparts - 1, max_size=nparts - 1, unique=True))
    )
    bounds = [0, *cuts, 64]
    spare = draw(st.integers(0, 1))
    left = max(0, k - nparts + 1 + spare)  # thresholds sum to at least k - parts + 1
    parts = []
    for i in range(nparts):
        width = bounds[i + 1] - bounds[i]
        t = left if i == nparts - 1 else draw(st.integers(0, left))
        t = min(t, width - 1)
        left -= t
        m = draw(st.integers(t + 1, min(width, t + 4)))
        parts.append(Part(bounds[i], width, m, t))
    if sum(p.threshold + 1 for p in parts) <= k:
        return Scheme.of(Layout(k + 1, k))
    return Scheme(k, tuple(parts))


@contextlib.contextmanager
def deep_trees():
    """Trees split down to single tables: no bucket is checked pair by pair before that."""
    old = cost.PAIR_NS
    cost.PAIR_NS = 1e9
    try:
        yield
    finally:
        cost.PAIR_NS = old


@pytest.fixture
def deep():
    with deep_trees():
        yield


@settings(max_examples=120, deadline=None)
@given(fingerprints(), schemes())
@pytest.mark.slow
def test_engine_schemes_match_brute_force(fp, scheme):
    k = scheme.distance
    with deep_trees():
        got = sort_pairs(engine.pairs(fp, scheme), len(fp))
    np.testing.assert_array_equal(got, naive.find_all(fp, k))
    shallow = sort_pairs(engine.pairs(fp, scheme), len(fp))  # small buckets checked at once
    np.testing.assert_array_equal(shallow, naive.find_all(fp, k))


@pytest.mark.slow
@settings(max_examples=60, deadline=None)
@given(fingerprints(max_size=60), fingerprints(max_size=60), schemes())
def test_engine_join_matches_brute_force(queries, corpus, scheme):
    k = scheme.distance
    with deep_trees():
        got = engine.join_pairs(queries, corpus, scheme, threads=2)
    pairs = list(zip(got[:, 0].tolist(), got[:, 1].tolist(), strict=True))
    assert len(pairs) == len(set(pairs))  # each match once
    assert set(pairs) == naive.join(queries, corpus, k)


@pytest.mark.parametrize("distance", [8, 10, 12, 14])
def test_large_distances_on_families_match_brute_force(distance):
    fp = np.concatenate([planted(2500, seed=distance), naive.families(900, seed=distance)])
    fp[:3] = [0, 2**64 - 1, 0]
    expected = naive.find_all(fp, distance)
    np.testing.assert_array_equal(neardup.find_all(fp, distance), expected)
    assert len(choose_scheme(len(fp), distance).parts) >= 1
    np.testing.assert_array_equal(
        neardup.find_clusters(fp, distance), naive.find_clusters(fp, distance)
    )


@pytest.mark.parametrize("threads", [1, 2, 3])
@pytest.mark.parametrize("memory", [None, 1])
@pytest.mark.slow
def test_deep_trees_threads_and_lanes_agree(deep, threads, memory):
    # memory=1 byte leaves room for one partition buffer: all threads share each first block
    fp = np.concatenate([planted(6000, seed=threads), naive.families(2000, seed=7)])
    for scheme in [
        Scheme.of(Layout(10, 8)),
        Scheme(12, (Part(40, 24, 8, 4), Part(0, 40, 11, 7))),
        Scheme(3, (Part(32, 32, 4, 1), Part(0, 32, 4, 1))),
        Scheme.of(Layout(2, 1)),
    ]:
        got = sort_pairs(engine.pairs(fp, scheme, threads=threads, memory=memory), len(fp))
        np.testing.assert_array_equal(got, naive.find_all(fp, scheme.distance))


@pytest.mark.parametrize("threads", [2, 5, 16])
@pytest.mark.parametrize("memory", [None, 1])
def test_units_cut_for_many_threads_agree(deep, threads, memory, monkeypatch):
    # slices and chunks of a few rows: every unit's first pass and buckets are cut into many
    # tasks on the shared pool, as 10M fingerprints are on 16 threads
    monkeypatch.setattr(engine, "SLICE_ROWS", 256)
    monkeypatch.setattr(engine, "CHUNK_ROWS", 64)
    fp = np.concatenate([planted(3000, seed=threads), naive.families(800, seed=3)])
    for scheme in [
        Scheme(8, (Part(36, 28, 6, 3), Part(0, 36, 7, 4))),
        Scheme(3, (Part(32, 32, 4, 1), Part(0, 32, 4, 1))),
        Scheme.of(Layout(5, 3)),
    ]:
        got = sort_pairs(engine.pairs(fp, scheme, threads=threads, memory=memory), len(fp))
        np.testing.assert_array_equal(got, naive.find_all(fp, scheme.distance))
    q, c = fp[:700], fp[700:]
    joined = engine.join_pairs(q, c, Scheme.of(Layout(6, 4)), threads=threads, memory=memory)
    assert set(map(tuple, joined.tolist())) == naive.join(q, c, 4)


@given(
    st.lists(st.floats(0, 1e12), min_size=1, max_size=40),
    st.integers(1, 64),
    st.data(),
)
def test_unit_threads_give_heavy_units_their_share(weights, threads, data):
    lanes = data.draw(st.integers(1, threads))
    got = engine.unit_threads(weights, threads, lanes)
    assert len(got) == len(weights)
    assert all(-(-threads // lanes) <= t <= threads for t in got)
    total = sum(weights)
    for w, t in zip(weights, got, strict=True):
        # a unit can use 8 t threads: never fewer than its share of the work needs
        assert total == 0 or t >= min(threads, threads * w / total - 1e-6)
    if lanes == threads:  # as many lanes as threads: a light unit runs alone on its lane
        assert all(t == 1 for w, t in zip(weights, got, strict=True) if 2 * w * threads <= total)


@settings(max_examples=40, deadline=None)
@given(fingerprints(), st.integers(0, 5), st.data())
def test_table_subsets_find_each_pair_once_by_its_first_table(fp, distance, data):
    blocks = data.draw(st.integers(distance + 1, distance + 4))
    layout = Layout(blocks, distance)
    groups = data.draw(st.integers(1, 3))
    owner = np.arange(layout.n_tables) % groups
    with deep_trees():
        found = [pairs_for_tables(fp, layout, np.flatnonzero(owner == g)) for g in range(groups)]
    allp = sort_pairs(np.concatenate(found), len(fp))
    np.testing.assert_array_equal(allp, naive.find_all(fp, distance))
    for g, p in enumerate(found):
        for a, b in p.tolist():
            assert owner[naive.first_table(fp[a], fp[b], blocks, distance)] == g


def test_identical_values_are_searched_once_for_clusters():
    # 100,000 copies of two values: one search entry each, not 5 billion pairs
    a, b = 0x0123_4567_89AB_CDEF, 0xFEDC_BA98_7654_3210
    fp = np.full(100_000, a, dtype=np.uint64)
    fp[1::1000] = b
    labels = neardup.find_clusters(fp, 14)
    assert labels.tolist() == [1 if v == b else 0 for v in fp.tolist()]
    assert find_all_values(fp, 14).tolist() == []
    near = fp.copy()
    near[1::1000] = a ^ 0b111  # three bits from a: one cluster
    assert (neardup.find_clusters(near, 3) == 0).all()
    assert (
        find_all_values(near, 3).tolist() == [[a ^ 0b111, a]] if a ^ 0b111 < a else [[a, a ^ 0b111]]
    )


@pytest.mark.parametrize(
    "memory, message", [("8X", "memory must be"), (0, "positive"), (-5, "positive")]
)
def test_bad_memory(memory, message):
    with pytest.raises(ValueError, match=message):
        neardup.find_all(planted(30_000), 3, memory=memory)


def test_memory_strings_and_environment(monkeypatch):
    assert engine.memory_budget("512M") == 512 << 20
    assert engine.memory_budget("8G") == 8 << 30
    assert engine.memory_budget(1000) == 1000
    monkeypatch.setenv("NEARDUP_MEMORY", "2g")
    assert engine.memory_budget(None) == 2 << 30
    monkeypatch.delenv("NEARDUP_MEMORY")
    assert 0 < engine.memory_budget(None) <= engine.available_memory()


def test_index_batches_search_with_the_engine(tmp_path, monkeypatch):
    from neardup import Index

    corpus = np.concatenate([planted(3000, seed=3), naive.families(500, seed=3)])
    queries = corpus[::7] ^ np.uint64(1 << 40)
    with Index.create(tmp_path / "ix", distance=6, blocks=8) as ix:
        ix.add(corpus[:2000])
        ix.add(corpus[2000:])
        ix.remove([5, 2500])
        probed = ix.query_arrays(queries)
        monkeypatch.setattr(cost, "JOIN_FROM", 0)
        monkeypatch.setattr(cost, "PROBE_NS", 1e9)  # the engine always wins
        joined = ix.query_arrays(queries)
    alive = np.ones(len(corpus), dtype=bool)
    alive[[5, 2500]] = False
    qi, ci, di = naive.query(corpus[alive], queries, 6)
    ids = np.flatnonzero(alive)[ci]
    for got in (probed, joined):
        np.testing.assert_array_equal(got.query_index, qi)
        np.testing.assert_array_equal(got.distance, di)
        np.testing.assert_array_equal(np.sort(got.id), np.sort(ids))


@pytest.mark.slow
def test_int64_rows_for_inputs_of_two_billion_give_the_same_pairs():
    # inputs of 2**31 fingerprints or more carry int64 rows (side bit 62 in a join)
    fp = np.concatenate([planted(3000, seed=9), naive.families(300, seed=9)])
    scheme = Scheme(8, (Part(36, 28, 6, 3), Part(0, 36, 7, 4)))
    with deep_trees():
        wide = engine.scheme_plans(scheme, wide=True)
        got = sort_pairs(engine._search(wide, [fp], False, 2, None), len(fp))
        joined = engine._search(wide, [fp[:500], fp[500:]], True, 2, None)
    np.testing.assert_array_equal(got, naive.find_all(fp, 8))
    assert set(map(tuple, joined.tolist())) == naive.join(fp[:500], fp[500:], 8)

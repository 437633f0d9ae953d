"""The sharded search's plan (neardup.distributed.plan) without Dask: every group of every part
of a scheme, every shard, against brute force (tests/naive.py)."""

from __future__ import annotations

import naive
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from strategies import fingerprints
from test_search import deep_trees, schemes

from neardup.core.layout import Layout, Part, Scheme
from neardup.core.search import choose_scheme, find_clusters, sort_pairs
from neardup.distributed.plan import (
    components,
    make_plan,
    shard_edges,
    shard_ids,
    shard_pairs,
    split_partition,
)


def sharded(fp: np.ndarray, plan, edges: bool = False, cut: int = 7) -> list[np.ndarray]:
    """Each group's pairs (or edges), the input cut into partitions of ``cut`` values."""
    search = shard_edges if edges else shard_pairs
    found = []
    for g in range(len(plan.groups)):
        parts = [split_partition(fp[lo : lo + cut], lo, plan, g) for lo in range(0, len(fp), cut)]
        for b in range(plan.n_shards):
            found.append(search([p[b] for p in parts], plan, g))
    return found


def first_part(a: int, b: int, scheme: Scheme) -> int:
    """The first part whose threshold the pair is within."""
    for i, p in enumerate(scheme.parts):
        if bin((a ^ b) & p.mask).count("1") <= p.threshold:
            return i
    raise AssertionError("a pair within the distance is within some part's threshold")


@pytest.mark.slow
@settings(max_examples=80, deadline=None)
@given(fingerprints(max_size=90), schemes(max_distance=12), st.integers(1, 40), st.booleans())
def test_scheme_shards_find_each_pair_once(fp, scheme, size, deep):
    plan = make_plan(len(fp), scheme.distance, shard_size=size, scheme=scheme)
    if deep:
        with deep_trees():
            found = sharded(fp, plan)
    else:
        found = sharded(fp, plan)
    got = np.concatenate(found) if found else np.empty((0, 2), np.int64)
    want = naive.find_all(fp, scheme.distance)
    np.testing.assert_array_equal(sort_pairs(got, len(fp)), want)  # each pair once
    per_group = len(found) // len(plan.groups)
    for i, p in enumerate(found):  # a pair is found in its first part's groups
        part = plan.group_info[i // per_group].part
        for a, b in p.tolist():
            assert first_part(int(fp[a]), int(fp[b]), scheme) == part


@settings(max_examples=40, deadline=None)
@given(fingerprints(max_size=90), schemes(max_distance=12), st.integers(1, 40))
def test_scheme_shard_edges_give_the_clusters(fp, scheme, size):
    plan = make_plan(len(fp), scheme.distance, shard_size=size, scheme=scheme)
    edges = np.concatenate(sharded(fp, plan, edges=True)).reshape(-1, 2)
    nodes, roots = components(edges)
    labels = np.arange(len(fp))
    labels[nodes] = roots
    np.testing.assert_array_equal(labels, naive.find_clusters(fp, scheme.distance))


def test_groups_cover_every_table_of_every_part_once():
    scheme = Scheme(10, (Part(28, 36, 10, 5), Part(0, 28, 10, 4)))
    plan = make_plan(1 << 24, 10, shard_size=1 << 20, scheme=scheme)
    tables = sorted(t for g in plan.groups for t in g)
    assert tables == list(range(sum(p.n_tables for p in scheme.parts)))
    assert plan.n_shards == 16 and {g.part for g in plan.group_info} == {0, 1}
    # a fingerprint's shard is the top bits of its group's leading blocks
    fp = np.random.default_rng(3).integers(0, 2**64, 1000, dtype=np.uint64)
    for g, info in enumerate(plan.group_info):
        part = scheme.parts[info.part]
        top = part.lows[info.prefix[0]] + part.widths[info.prefix[0]]
        want = fp >> np.uint64(top - plan.shard_bits) & np.uint64(plan.n_shards - 1)
        if sum(part.widths[b] for b in info.prefix[:1]) >= plan.shard_bits:
            np.testing.assert_array_equal(shard_ids(fp, plan, g), want.astype(np.int64))
    with pytest.raises(ValueError, match="no single layout"):
        _ = plan.layout


def test_cpu_plans_use_the_cost_models_scheme_and_gpu_plans_a_layout():
    n = 16_000_000
    assert make_plan(n, 10).scheme == choose_scheme(n, 10)
    assert len(make_plan(n, 10, device="cuda").scheme.parts) == 1
    assert make_plan(n, 10, 14).layout == Layout(14, 10)
    with pytest.raises(ValueError, match="distance"):
        make_plan(n, 9, scheme=choose_scheme(n, 10))


@pytest.mark.parametrize("distance", [8, 10])
def test_large_distances_on_families(distance):
    fp = np.concatenate(
        [naive.families(700, seed=distance), np.array([0, 2**64 - 1, 0], np.uint64)]
    )
    scheme = choose_scheme(1 << 24, distance)
    assert len(scheme.parts) >= 2
    plan = make_plan(len(fp), distance, shard_size=64, scheme=scheme)
    got = sort_pairs(np.concatenate(sharded(fp, plan, cut=101)), len(fp))
    np.testing.assert_array_equal(got, naive.find_all(fp, distance))
    edges = np.concatenate(sharded(fp, plan, edges=True, cut=101)).reshape(-1, 2)
    nodes, roots = components(edges)
    labels = np.arange(len(fp))
    labels[nodes] = roots
    np.testing.assert_array_equal(labels, find_clusters(fp, distance))

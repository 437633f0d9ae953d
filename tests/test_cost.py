"""The cost model: the automatic choice of blocks and schemes for batch search and for index
queries."""

from __future__ import annotations

import pytest

from neardup.core import cost, layout
from neardup.core.cost import (
    choose_blocks,
    choose_query_blocks,
    choose_scheme,
    estimated_cost,
    estimated_query_cost,
    scheme_cost,
    stop_sizes,
)
from neardup.core.layout import Layout, Scheme


@pytest.mark.parametrize("n", [0, 1, 100, 10_000, 1_000_000, 10_000_000, 1_000_000_000])
@pytest.mark.parametrize("k", [0, 1, 3, 6, 8])
def test_choose_blocks_is_valid_and_minimal(n, k):
    m = choose_blocks(n, k)
    assert k < m <= 64
    costs = {b: estimated_cost(n, b, k) for b in range(k + 1, min(64, k + 12) + 1)}
    assert estimated_cost(n, m, k) <= min(costs.values())


def test_tiny_inputs_take_one_layout_checked_pair_by_pair():
    for k in (0, 3, 8, 14):
        scheme = choose_scheme(100, k)
        assert len(scheme.parts) == 1
        part = scheme.parts[0]
        assert stop_sizes(part)[0, 0] >= 100  # the root is checked pair by pair


def test_large_distances_split_the_bits_into_parts():
    for n, k in [(10**6, 8), (10**6, 12), (10**7, 8), (10**6, 14)]:
        scheme = choose_scheme(n, k)
        assert len(scheme.parts) >= 2
        assert sum(p.threshold + 1 for p in scheme.parts) > k
        one = Scheme.of(Layout(choose_blocks(n, k), k))
        assert scheme_cost(n, scheme) < scheme_cost(n, one)


@pytest.mark.parametrize("n", [1, 1000, 10**6, 10**9])
@pytest.mark.parametrize("k", [0, 3, 6])
def test_query_blocks_minimise_the_query_cost(n, k):
    m = choose_query_blocks(n, k)
    assert k < m <= 64
    costs = [estimated_query_cost(n, b, k) for b in range(k + 1, min(64, k + 10) + 1)]
    assert estimated_query_cost(n, m, k) <= min(costs)


def test_the_cost_model_lives_in_cost_only():
    # imported explicitly from neardup.core.cost; layout re-exports nothing of it
    for name in cost.__all__:
        assert not hasattr(layout, name), name

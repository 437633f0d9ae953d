"""The components stages (large-star / small-star rounds over partitions of the positions)
against brute-force labels: every node labelled with its component's smallest position, every
pair routed once to the decide group of its component, whole components in one group."""

from __future__ import annotations

import os
import tempfile
from collections import Counter
from types import SimpleNamespace

import naive
import numpy as np
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from neardup.pipeline import staged
from neardup.pipeline.executors import LocalExecutor
from neardup.pipeline.runner import Runner
from neardup.pipeline.stage_components import partition
from neardup.pipeline.task_files import inbox, load


def _components(work: str, edges: list[tuple[int, int]], n: int, n_tasks: int,
                shard_docs: int, n_shards: int) -> tuple[list[str], int]:  # fmt: skip
    """The components stages run in ``work`` on ``edges`` held by ``n_tasks`` pairs tasks."""
    e = np.asarray(edges, dtype=np.int64).reshape(-1, 2)
    names = []
    for i, chunk in enumerate(np.array_split(e, n_tasks)):
        os.makedirs(os.path.join(work, "pairs", str(i)))
        np.save(os.path.join(work, "pairs", str(i), "pairs.npy"), chunk)
        names.append(str(i))
    sizes = [len(c) for c in np.array_split(np.arange(n), n_shards)]
    run = staged.StagedRun(work, sizes, [1] * n_shards)
    plan = SimpleNamespace(verify=False, shard_docs=shard_docs)
    r = Runner(work, LocalExecutor(2), None)
    return staged._components(r, plan, run, names, len(e))  # type: ignore[arg-type]


def _labels(work: str) -> dict[int, int]:
    stages = os.listdir(work)
    if "cc-labels" in stages:
        last, parts = "cc-labels", ["0"]
    else:
        rounds = [int(s.rsplit("-", 1)[1]) for s in stages if s.startswith("cc-large-")]
        last = f"cc-large-{max(rounds)}"
        parts = os.listdir(os.path.join(work, last))
    out = {}
    for p in parts:
        node, label = load(work, last, p, "node"), load(work, last, p, "label")
        out.update(zip(node.tolist(), label.tolist(), strict=True))
    return out


def _check(edges: list[tuple[int, int]], n: int, n_tasks: int, shard_docs: int,
           n_shards: int) -> None:  # fmt: skip
    with tempfile.TemporaryDirectory() as work:
        _check_in(work, edges, n, n_tasks, shard_docs, n_shards)


def _check_in(work: str, edges: list[tuple[int, int]], n: int, n_tasks: int, shard_docs: int,
              n_shards: int) -> None:  # fmt: skip
    routes, k = _components(work, edges, n, n_tasks, shard_docs, n_shards)
    if not edges:
        assert (routes, k) == ([], 0)
        return
    want = naive.component_labels(edges)
    assert _labels(work) == want
    assert k == -(-len(want) // shard_docs)
    group_of: dict[int, set[int]] = {}
    routed: Counter = Counter()
    for g in range(k):
        for a, b in inbox(work, "cc-route", routes, g).tolist():
            routed[(a, b)] += 1
            group_of.setdefault(want[a], set()).add(g)
    assert routed == Counter(edges)
    assert all(len(gs) == 1 for gs in group_of.values())  # whole components in one group


def _path(n: int) -> list[tuple[int, int]]:
    return [(i + 1, i) for i in reversed(range(n - 1))]


@pytest.mark.slow
@settings(max_examples=150, deadline=None)
@given(
    n=st.integers(1, 60),
    data=st.data(),
    n_tasks=st.integers(1, 5),
    shard_docs=st.integers(1, 12),
    n_shards=st.integers(1, 8),
)
@example(n=40, data=None, n_tasks=3, shard_docs=2, n_shards=8)  # a long path, reversed
def test_components_match_brute_force(n, data, n_tasks, shard_docs, n_shards):
    if data is None:
        edges = _path(n)
    else:
        node = st.integers(0, n - 1)
        pairs = st.tuples(node, node).filter(lambda e: e[0] != e[1])
        edges = data.draw(st.lists(pairs, max_size=80)) if n > 1 else []
    _check(edges, n, n_tasks, shard_docs, n_shards)


@pytest.mark.slow
def test_shapes_that_take_many_rounds():
    n = 64
    star_at_top = [(n - 1, i) for i in range(n - 1)]  # a star around the largest position
    comb = [(2 * i, 2 * i + 2) for i in range(31)] + [(2 * i + 1, 2 * i) for i in range(32)]
    family = [(a, b) for a in range(10) for b in range(a + 1, 10)]  # every pair of ten
    for edges in (_path(n), star_at_top, comb, family, _path(n) + star_at_top):
        _check(edges, n, 4, 3, 16)


def test_the_rounds_run_over_partitions(tmp_path):
    """More pairs than a task holds: the rounds, each of one task per partition."""
    work = str(tmp_path)
    _components(work, _path(64), 64, 4, 8, 16)
    stages = os.listdir(work)
    assert "cc-labels" not in stages and "cc-large-1" in stages
    assert sorted(os.listdir(os.path.join(work, "cc-large-0"))) == [str(p) for p in range(8)]


@given(st.lists(st.integers(0, 2**63 - 1), max_size=50), st.integers(1, 5000))
def test_partitions_are_in_range_and_spread(xs, parts):
    p = partition(np.asarray(xs, dtype=np.int64), parts)
    assert p.dtype == np.int64 and ((p >= 0) & (p < parts)).all()
    counts = np.bincount(partition(np.arange(100_000), 64), minlength=64)
    assert counts.min() > 0.9 * 100_000 / 64  # consecutive positions spread evenly

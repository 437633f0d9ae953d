"""The local index's write path: the size-tiered merge policy, merges in a background thread
(queried meanwhile from another thread, killed in the middle), the radix sort that orders a
segment's columns and the one-call probe of a few queries."""

from __future__ import annotations

import math
import threading
from types import SimpleNamespace
from unittest import mock

import naive
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from indexes import check, kill_writers, model_after

from neardup.index import Index, probe, writer


def _runs(sizes: list[int]) -> list[SimpleNamespace]:
    return [SimpleNamespace(live=n) for n in sizes]


@pytest.mark.parametrize("factor", [2, 4, 8])
def test_tiered_policy_keeps_log_runs_and_rewrites_each_row_log_times(factor):
    base, add, adds = 1_000_000, 1_000, 3_000
    sizes = [base]
    written = 0
    for _ in range(adds):
        start = writer.merge_start(_runs(sizes), add, 1000, factor)
        merged = sum(sizes[start:]) + add
        written += merged
        sizes = sizes[:start] + [merged]
        tiers = math.log(sum(sizes) / add, factor) + 1
        assert len(sizes) <= (factor - 1) * tiers + 1, sizes
    assert sum(sizes) == base + add * adds
    # each added row is written about log_factor(n / add) times, never once per add
    per_row = written / (add * adds)
    assert per_row <= math.log(base / add, factor) + 3, per_row
    assert sizes[0] >= base  # the base is merged too, once its tier fills


def test_policy_respects_max_segments_and_leaves_the_base():
    sizes = [100, 90, 80, 70]
    start = writer.merge_start(_runs(sizes), 60, 3, 8)
    assert start == 2  # two runs stay (base + one), the new one makes three
    assert writer.merge_start(_runs([100]), 1, 2, 8) == 1
    assert writer.merge_range(_runs([100, 10, 10, 10]), 100, 4) == 3  # none due
    assert writer.merge_range(_runs([100, 10, 10, 10, 10]), 100, 4) == 1


@pytest.mark.parametrize("background", [False, True], ids=["inline", "background"])
def test_many_adds_and_removes_stay_exact_with_few_runs(tmp_path, background):
    rng = np.random.default_rng(5)
    model: dict[int, int] = {}
    with mock.patch("os.fsync"), Index.create(tmp_path / "ix", distance=3, blocks=5) as ix:
        ix.merge_factor = 3
        ix.background_merges = background
        for step in range(60):
            fps = rng.integers(0, 2**64, 40, dtype=np.uint64, endpoint=False)
            fps[20:] = fps[:20] ^ np.uint64(1 << int(step % 64))
            ids = range(40 * step, 40 * step + 40)
            ix.add(fps, ids=list(ids))
            model.update(zip(ids, fps.tolist(), strict=True))
            if step % 9 == 8:
                gone = [int(i) for i in rng.choice(sorted(model), 15, replace=False)]
                assert ix.remove(gone) == 15
                for i in gone:
                    del model[i]
        ix.wait_merges()
        n = len(model)
        assert len(ix.info()["segments"]) <= 2 * (math.log(n / 40, 3) + 1) + 1
        if background:
            assert ix._merger is not None and ix._merger.merges > 0
        queries = np.array(list(model.values())[::7], dtype=np.uint64) ^ np.uint64(0b110)
        for k in (0, 3):
            check(ix, model, queries, k)
        ix.verify()
    with Index.open(tmp_path / "ix") as r:
        check(r, model, queries, 3)


def test_background_merges_while_another_thread_queries(tmp_path):
    """Queries from another thread, on the writer's object and on a reader that refreshes, get
    exact answers while merges switch the runs under them; an error there fails the test."""
    rng = np.random.default_rng(9)
    targets = rng.integers(0, 2**64, 200, dtype=np.uint64, endpoint=False)
    queries = targets ^ np.uint64(0b1001)
    few = queries[:3]
    errors: list[BaseException] = []
    stop = threading.Event()
    path = tmp_path / "ix"
    with mock.patch("os.fsync"):
        ix = Index.create(path, distance=3, blocks=5)
        ix.merge_factor = 2
        ix.background_merges = True
        ix.add(targets)  # ids 0..199; everything added later is far from the queries
        want = naive.index_query(dict(enumerate(targets.tolist())), queries, 3)
        want_few = naive.index_query(dict(enumerate(targets.tolist())), few, 3)
        reader = Index.open(path)
        passes = [0]

        def query() -> None:
            try:
                while not stop.is_set():
                    for src in (ix, reader):
                        got = src.query_arrays(queries)  # the batch path
                        for a, b in zip(got, want, strict=True):
                            np.testing.assert_array_equal(a, b)
                        got = src.query_arrays(few)  # the few-query path
                        for a, b in zip(got, want_few, strict=True):
                            np.testing.assert_array_equal(a, b)
                    reader.refresh()
                    passes[0] += 1
            except BaseException as e:
                errors.append(e)

        t = threading.Thread(target=query)
        t.start()
        try:
            for _ in range(40):
                ix.add(rng.integers(0, 2**64, 300, dtype=np.uint64, endpoint=False))
        finally:
            ix.wait_merges()
            stop.set()
            t.join()
        merges = ix._merger.merges if ix._merger is not None else 0
        ix.close()
        reader.close()
    assert not errors, errors[0]
    assert merges > 5 and passes[0] > 0
    with Index.open(path) as r:
        assert len(r) == 200 + 40 * 300
        r.verify()


@pytest.mark.slow
def test_sigkill_during_background_merges_loses_nothing(tmp_path):
    path = tmp_path / "ix"
    Index.create(path, distance=3, blocks=5).close()
    step = kill_writers(path, 4321, rounds=6, low=0.02, background=True)
    assert step > 3
    with Index.open(path, "w") as ix:
        ix.compact()
        assert len(ix) == len(model_after(step))


def test_merge_that_a_removal_overtakes_gives_up(tmp_path):
    with mock.patch("os.fsync"), Index.create(tmp_path / "ix", distance=2, blocks=3) as ix:
        for s in range(4):
            ix.add(np.arange(s * 10, s * 10 + 10, dtype=np.uint64) << np.uint64(8))
        segs = list(ix._segs)
        deleted = [s.entry.get("deleted") for s in segs[1:]]
        name = ix._reserve_name()
        rows = writer.gather(segs[1:], ix.id_type, None)
        entry = writer.write_segment(ix.path, ix.layout, name, rows)
        ix.remove([15])  # a run the merge read changes
        ix._replace_runs(segs[1:], deleted, entry)  # so the merge gives up
        ix._writing.discard(name)
        assert len(ix) == 39 and 15 not in ix
        assert len(ix.info()["segments"]) == len(segs)


_U64 = st.integers(0, 2**64 - 1)


@settings(max_examples=60, deadline=None)
@given(
    values=st.one_of(
        st.lists(_U64, max_size=300),
        st.lists(st.integers(0, 40), max_size=3000),  # many equal values
        st.lists(st.integers(0, 2**20).map(lambda v: v | 7 << 60), max_size=3000),  # one prefix
    )
)
def test_radix_sort_matches_numpy(values):
    x = np.array(values, dtype=np.uint64)
    v, order = writer.argsort_values(x)
    np.testing.assert_array_equal(order, np.argsort(x, kind="stable"))
    np.testing.assert_array_equal(v, np.sort(x))
    y = x.copy()
    np.testing.assert_array_equal(writer.sort_values(y), np.sort(x))


@pytest.mark.parametrize("ids", ["int", "str"])
def test_few_queries_probe_equals_the_batch_probe(tmp_path, ids):
    rng = np.random.default_rng(2)
    fps = rng.integers(0, 2**64, 600, dtype=np.uint64, endpoint=False)
    fps[:50] = fps[50:100]  # equal fingerprints under different ids
    names = [f"d{i}" for i in range(600)] if ids == "str" else list(range(600))
    with Index.create(tmp_path / "ix", distance=3, blocks=5) as ix:
        ix.merge_factor = 4
        for s in range(0, 600, 100):
            ix.add(fps[s : s + 100], ids=names[s : s + 100])
        ix.remove(names[::9])
        assert len(ix.info()["segments"]) > 1 and ix._few is not None
        q = fps[rng.integers(0, 600, probe.FEW_QUERIES)] ^ np.uint64(0b101)
        q[:4] = fps[50:54]
        for k in (0, 2, 3):
            fast = ix.search(q, k)
            plan, ix._few = ix._few, None
            slow = ix.search(q, k)
            ix._few = plan
            np.testing.assert_array_equal(fast.offsets, slow.offsets)
            assert fast.ids.tolist() == slow.ids.tolist()
            np.testing.assert_array_equal(fast.distances, slow.distances)
        assert ix.search(q[:1], 3).size >= 1

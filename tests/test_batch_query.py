"""neardup.index.batch: a batch's tables probed by stored fingerprints give brute force's
pairs, and batch mode over an index gives exactly Index.query_arrays."""

from __future__ import annotations

import naive
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from strategies import fingerprints

from neardup.index import Index
from neardup.index.batch import BatchTables, batch_query, index_parts, read_index_part


def pairs(qi, ci, di) -> list[tuple[int, int, int]]:
    return sorted(zip(qi.tolist(), ci.tolist(), di.tolist(), strict=True))


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    batch=fingerprints(max_size=80),
    stored=fingerprints(max_size=80),
    layout=st.sampled_from([(0, 1), (1, 2), (2, 3), (3, 4), (3, 5), (3, 7), (4, 9), (2, 64)]),
    k_less=st.integers(0, 2),
    threads=st.sampled_from([1, 3]),
)
@pytest.mark.slow
def test_probe_matches_brute_force(batch, stored, layout, k_less, threads):
    distance, blocks = layout
    k = max(0, distance - k_less)
    # stored values near the batch ones, so most examples have matches
    stored = np.concatenate([stored, batch[:10] ^ np.uint64(0b101), batch[:3]])
    tables = BatchTables(batch, distance, blocks)
    got = tables.probe(stored, k, threads=threads)
    qi, ci, di = naive.query(stored, batch, k)  # query = batch position, corpus = stored
    assert pairs(*got) == pairs(qi, ci, di)


@pytest.mark.slow
def test_probe_edges_and_errors():
    t = BatchTables([], 3)
    assert [len(a) for a in t.probe([1, 2])] == [0, 0, 0]
    t = BatchTables([0, 2**64 - 1, 0], 3, 4)
    b, s, d = t.probe([1, 2**64 - 2, 15 << 20, 0])  # 15 << 20 is 4 bits from 0
    assert pairs(b, s, d) == [(0, 0, 1), (0, 3, 0), (1, 1, 1), (2, 0, 1), (2, 3, 0)]
    assert [len(a) for a in t.probe([])] == [0, 0, 0]
    with pytest.raises(ValueError, match="between 0 and the batch tables' distance 3"):
        t.probe([1], 4)
    with pytest.raises(ValueError, match="blocks must be > distance"):
        BatchTables([1], 3, 3)
    assert t.nbytes > 0


@pytest.mark.slow
def test_many_matches_grow_the_buffers():
    # every stored value matches every batch value: more pairs than the first buffers hold
    batch = np.zeros(300, np.uint64)
    stored = np.zeros(5000, np.uint64)
    b, s, d = BatchTables(batch, 2).probe(stored, threads=2)
    assert len(b) == 300 * 5000 and not d.any()
    assert len(set(zip(b.tolist(), s.tolist(), strict=True))) == len(b)


def build(path, fps, ids, compress, removed):
    ix = Index.create(path, distance=3, blocks=5, compress=compress)
    ix.max_segments = 3
    for a in range(0, len(fps), 700):
        ix.add(fps[a : a + 700], ids[a : a + 700] if ids else None)
    ix.remove(removed)
    return ix


@pytest.mark.parametrize("compress", [False, True])
@pytest.mark.parametrize("id_kind", ["int", "str"])
@pytest.mark.slow
def test_batch_query_equals_the_index_query(tmp_path, compress, id_kind):
    rng = np.random.default_rng(5)
    base = rng.integers(0, 2**64, 2500, dtype=np.uint64)
    edge = np.array([0, 2**64 - 1], np.uint64)
    fps = np.concatenate([base, base[:600] ^ np.uint64(1 << 7), base[:40], edge])
    ids = [f"doc{i}" for i in range(len(fps))] if id_kind == "str" else None
    removed = ids[100:130] if ids else list(range(100, 130))
    ix = build(tmp_path / "ix", fps, ids, compress, removed)
    assert len(ix.info()["segments"]) > 1 and ix.info()["segments"][0]["removed"]
    batch = np.concatenate(
        [fps[:500] ^ np.uint64(0b11 << 30), fps[90:140], rng.integers(0, 2**64, 300, np.uint64)]
    )
    for k in (0, 2, 3):
        want = ix.query_arrays(batch, k)
        for blocks, part_rows in ((None, 1 << 20), (4, 333), (7, 1000)):
            got = batch_query(ix, batch, k, blocks, part_rows=part_rows, threads=2)
            np.testing.assert_array_equal(got.query_index, want.query_index)
            np.testing.assert_array_equal(got.ids, want.id)
            np.testing.assert_array_equal(got.distances, want.distance)
            assert len(got) == len(batch)
    ix.close()
    got = batch_query(tmp_path / "ix", batch)  # a path is opened read-only
    assert got.size == len(Index.open(tmp_path / "ix").query_arrays(batch).id)


@pytest.mark.slow
def test_index_parts_cover_live_rows_once(tmp_path):
    fps = np.arange(5000, dtype=np.uint64) * np.uint64(0x9E3779B97F4A7C15)
    ix = build(tmp_path / "ix", fps, None, True, list(range(0, 5000, 7)))
    parts = index_parts(ix, 999)
    got = np.concatenate([read_index_part(p)[1] for p in parts])
    np.testing.assert_array_equal(
        np.sort(got), np.setdiff1d(np.arange(5000), np.arange(0, 5000, 7))
    )
    fp_of = dict(zip(range(5000), fps.tolist(), strict=True))
    for p in parts:
        f, keys, ids = read_index_part(p)
        assert f.tolist() == [fp_of[i] for i in keys.tolist()] and ids is keys
    with pytest.raises(ValueError, match="rows per part must be >= 1"):
        index_parts(ix, 0)
    with pytest.raises(ValueError, match="between 0 and the index's distance 3"):
        batch_query(ix, [1], 4)
    ix.close()

"""The index backend protocol: the local index and the Redis index (a real redis-server) answer
the same operations the same way, through :func:`neardup.open_index`; a missing capability is
one clear error; :class:`neardup.Matches` round trips."""

from __future__ import annotations

import uuid

import naive
import numpy as np
import pytest
from servers import fresh_name, needs_redis

import neardup
from neardup import Matches
from neardup.errors import NeardupError, UnsupportedOperation
from neardup.index import CAPABILITIES, Index, IndexBackend

CORPUS = np.array([0b1011, 0b1000, 0xFFFF << 40, (0xFFFF << 40) ^ 0b111, 1 << 63], np.uint64)
QUERIES = np.array([0b1001, 0xFFFF << 40, 0x0F0F0F0F0F0F0F0F, 1 << 63], np.uint64)


@pytest.fixture(params=["local", pytest.param("redis", marks=needs_redis)])
def location(request, tmp_path, few_redis_shards):
    if request.param == "local":
        yield str(tmp_path / f"ix-{uuid.uuid4().hex}")
    else:
        node = request.getfixturevalue("node")
        yield fresh_name(node.url, "proto")


def brute(ids: list, fps: np.ndarray, queries: np.ndarray, k: int) -> list[list[tuple]]:
    """Per query, (id, distance) within k bits, nearest first then by id."""
    qi, ci, di = naive.query(fps, queries, k)
    out: list[list[tuple]] = [[] for _ in queries]
    for q, c, d in zip(qi.tolist(), ci.tolist(), di.tolist(), strict=True):
        out[q].append((ids[c], d))
    return [sorted(r, key=lambda t: (t[1], t[0])) for r in out]


@pytest.mark.slow
def test_every_backend_answers_the_protocol_alike(location):
    ids = [10, 11, 12, 13, 14]
    with Index.create(location, distance=3, blocks=4):
        pass
    ix = neardup.open_index(location, "w")
    try:
        assert isinstance(ix, IndexBackend) and ix.capabilities <= CAPABILITIES
        with ix.session() as s:  # queued adds commit once, on leaving the block
            s.add(CORPUS[:2], ids[:2])
            s.add(CORPUS[2:], ids[2:])
            assert len(s) == 5 and len(ix) == 0
        assert len(ix) == 5 and ix.generation == 1
        for k in (0, 2, 3):
            m = ix.search(QUERIES, k)
            assert isinstance(m, Matches) and len(m) == len(QUERIES)
            assert m.to_lists() == brute(ids, CORPUS, QUERIES, k) == ix.query(QUERIES, k)
            assert [m.for_query(i) for i in range(len(m))] == m.to_lists()
            near = ix.nearest(QUERIES, k)
            assert near.to_lists() == [r[:1] for r in m.to_lists()]
            assert ix.dedup_mask(QUERIES, k).tolist() == [bool(r) for r in m.to_lists()]
            flat = ix.query_arrays(QUERIES, k)  # the flat form the service reads
            assert flat.query_index.tolist() == m.query_index.tolist()
            assert flat.id.tolist() == m.ids.tolist()
        assert ix.contains([10, 99, 14]).tolist() == [True, False, True]
        assert 12 in ix and 99 not in ix
        with ix.lock() as held:
            assert held is ix
            assert ix.remove([12]) == 1
        assert ix.search(QUERIES[1:2], 0).to_lists() == [[]]
        ix.verify()
        info = ix.info()
        assert info["entries"] == 4 and info["distance"] == 3
    finally:
        ix.close()
    with neardup.open_index(location) as ro:  # read-only: a write is refused in one line
        assert len(ro) == 4
        with pytest.raises(ValueError, match="read-only"):
            ro.add([1], [1])


@pytest.mark.slow
def test_a_failed_session_writes_nothing(location):
    with Index.create(location, distance=2, blocks=3) as ix:
        ix.add(CORPUS[:1], [1])
        with pytest.raises(RuntimeError), ix.session() as s:
            s.add(CORPUS[1:3], [2, 3])
            raise RuntimeError("stop")
        assert len(ix) == 1
        with pytest.raises(ValueError, match="to every add of a session or to none"):
            with ix.session() as s:
                s.add(CORPUS[1:2], [2])
                s.add(CORPUS[2:3])
        with pytest.raises(ValueError, match="already in the index"), ix.session() as s:
            s.add(CORPUS[3:4], [1])  # checked at the commit
        assert len(ix) == 1 and ix.generation == 1


@pytest.mark.slow
@needs_redis
def test_a_missing_capability_is_one_clear_error(node, few_redis_shards, tmp_path):
    url = fresh_name(node.url, "cap")
    with Index.create(url, distance=3) as rix:
        assert "verified" not in rix.capabilities and "parts" not in rix.capabilities
        with pytest.raises(UnsupportedOperation) as e:
            rix.verified_query((np.zeros((1, 4), np.uint64), np.ones(1, np.uint32)), 0.8)
        assert isinstance(e.value, NeardupError) and e.value.capability == "verified"
        assert str(e.value) == (
            f"index {url}: the redis backend cannot do 'verified' (see IndexBackend.capabilities)"
        )
        from neardup.index.batch import batch_query

        with pytest.raises(UnsupportedOperation, match="cannot do 'parts'"):
            batch_query(rix, [1, 2])
        with pytest.raises(UnsupportedOperation, match="cannot do 'verified'"):
            with rix.session() as s:
                s.add(None, [1], sketches=(np.zeros((1, 4), np.uint64), np.ones(1, np.uint32)))
    with Index.create(tmp_path / "ix", distance=3) as lix:
        assert lix.capabilities == CAPABILITIES
        with pytest.raises(ValueError, match="unknown index capability"):
            lix.require("teleport")


def test_matches_round_trips():
    qi = np.array([0, 0, 2, 3, 3, 3])
    ids = np.array(["a", "b", "a", "c", "d", "e"], dtype=object)
    d = np.array([0, 2, 1, 0, 0, 3])
    jac = np.array([1.0, 0.81234567, 0.9, 1.0, 0.95, 0.8])
    m = Matches.from_sorted(qi, ids, d, 5, jac)
    assert m.offsets.tolist() == [0, 2, 2, 3, 6, 6] and len(m) == 5 and m.size == 6
    assert m.query_index.tolist() == qi.tolist() and m.counts.tolist() == [2, 0, 1, 3, 0]
    assert m.for_query(0, jaccard_digits=3) == [("a", 0, 1.0), ("b", 2, 0.812)]
    assert m.to_lists()[1] == [] and m.to_lists()[3][2] == ("e", 3, 0.8)
    assert m.first_positions().tolist() == [0, -1, 2, 3, -1]
    f = m.first()
    assert f.to_lists() == [[("a", 0, 1.0)], [], [("a", 1, 0.9)], [("c", 0, 1.0)], []]
    s = m.select(d > 0)
    assert s.to_lists() == [[("b", 2, 0.81234567)], [], [("a", 1, 0.9)], [("e", 3, 0.8)], []]
    again = Matches(m.offsets, m.ids, m.distances, m.jaccards)
    assert again.to_lists() == m.to_lists()
    e = Matches.empty(3, "str")
    assert e.to_lists() == [[], [], []] and e.ids.dtype == object
    with pytest.raises(ValueError, match="offsets of n \\+ 1 positions"):
        Matches(np.array([0, 2]), np.array([1]), np.array([0]))

"""The index on real redis-server processes (one node and a 3-node cluster) against brute force
and against the local index: same answers, same ids, same errors."""

from __future__ import annotations

import threading
import time
import uuid

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from indexes import LAYOUTS, Model, check, index_ops
from servers import RedisCluster3, fresh_name, needs_redis
from strategies import fingerprints

from neardup import config
from neardup.core.layout import Layout
from neardup.errors import IdError
from neardup.index import CorruptIndexError, Index, redis_store, redis_writer
from neardup.index.redis import IndexUnavailableError, RedisIndex, choose_redis_layout

pytestmark = [needs_redis, pytest.mark.usefixtures("few_redis_shards")]


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    c = RedisCluster3(tmp_path_factory.mktemp("cluster"))
    yield c
    c.stop()


def fresh(url: str) -> str:
    return fresh_name(url, "t")


def run_sequence(url, tmp_path, ops, layout, bucket_bits, queries):
    """Apply ``ops`` to a Redis index and a local one; both must match brute force."""
    distance, blocks = layout
    shortest = min(t.prefix_bits for t in Layout(blocks, distance).tables)
    bits = min(bucket_bits, shortest)
    rix = RedisIndex.create(fresh(url), distance, blocks, bucket_bits=bits)
    lix = Index.create(tmp_path / uuid.uuid4().hex, distance, blocks)
    model = Model()
    try:
        for op in ops:
            if op[0] == "add":
                rix.add(op[1])  # automatic ids, as the local index numbers them
                lix.add(op[1])
                model.add(op[1])
            elif op[0] == "remove":
                want = model.remove(op[1])
                assert rix.remove(op[1], missing="ignore") == want
                assert lix.remove(op[1], missing="ignore") == want
            else:
                rix.close()
                rix = RedisIndex.open(rix.path, "w")
            for k in sorted({0, distance}):
                check(rix, model.fps, queries, k)
            probe = list(range(model.next_id + 3))
            want = [i in model.fps for i in probe]
            assert rix.contains(probe).tolist() == lix.contains(probe).tolist() == want
        a, b = rix.query_arrays(queries), lix.query_arrays(queries)
        for x, y in zip(a, b):
            np.testing.assert_array_equal(x, y)
        rix.verify()
    finally:
        rix.close()
        lix.close()


@settings(max_examples=25, suppress_health_check=[HealthCheck.too_slow], deadline=None)
@given(
    ops=index_ops(compact=None, max_id=120, max_size=8),
    layout=LAYOUTS,
    bucket_bits=st.integers(1, 12),
    queries=fingerprints(30),
)
@pytest.mark.slow
def test_one_node_matches_brute_force_and_local(
    node, tmp_path_factory, ops, layout, bucket_bits, queries
):
    run_sequence(node.url, tmp_path_factory.mktemp("l"), ops, layout, bucket_bits, queries)


@settings(max_examples=6, suppress_health_check=[HealthCheck.too_slow], deadline=None)
@given(
    ops=index_ops(compact=None, max_id=120, max_size=8),
    layout=LAYOUTS,
    bucket_bits=st.integers(1, 12),
    queries=fingerprints(30),
)
@pytest.mark.slow
def test_cluster_matches_brute_force_and_local(
    cluster, tmp_path_factory, ops, layout, bucket_bits, queries
):
    run_sequence(cluster.url, tmp_path_factory.mktemp("l"), ops, layout, bucket_bits, queries)


@pytest.mark.slow
def test_larger_index_on_cluster_matches_brute_force(cluster):
    rng = np.random.default_rng(7)
    base = rng.integers(0, 2**64, 3000, dtype=np.uint64)
    near = base[:500] ^ (np.uint64(1) << rng.integers(0, 64, 500).astype(np.uint64))
    corpus = np.concatenate([base, near])
    with Index.create(fresh(cluster.url), distance=3, expected_size=len(corpus)) as ix:
        assert isinstance(ix, RedisIndex)
        ix.add(corpus, ids=np.arange(len(corpus)) * 3)
        queries = np.concatenate(
            [corpus[::7] ^ np.uint64(5), rng.integers(0, 2**64, 300, dtype=np.uint64)]
        )
        check(ix, {3 * i: int(v) for i, v in enumerate(corpus)}, queries, 3)
        keys = cluster.nodes[0].cli("dbsize"), cluster.nodes[1].cli("dbsize")
        assert all(int(k) > 0 for k in keys)  # the buckets are spread over the nodes


@pytest.mark.slow
def test_string_ids_same_order_as_local(node, tmp_path):
    fps = np.array([7, 7, 6, 2**64 - 1, 2**63], dtype=np.uint64)
    ids = ["https://a/1", "b", "ü", "c", "d"]
    rix = Index.create(fresh(node.url), distance=2, blocks=4)
    lix = Index.create(tmp_path / "l", distance=2, blocks=4)
    rix.add(fps, ids=ids)
    lix.add(fps, ids=ids)
    q = [7, 2**64 - 2, 12345]
    assert rix.query(q) == lix.query(q)
    assert rix.query(q)[0][2] == ("ü", 1)
    assert "ü" in rix and "x" not in rix and 1 not in rix
    probe = ["ü", "x", "b", "https://a/1", "https://a/2"]
    assert rix.contains(probe).tolist() == lix.contains(probe).tolist() == [1, 0, 1, 1, 0]
    assert rix.contains([]).tolist() == lix.contains([]).tolist() == []
    for bad in ([1, 2], ["a", 1], [b"x"]):  # the other kind, mixed kinds, not an id
        with pytest.raises(IdError) as r_err:
            rix.contains(bad)
        with pytest.raises(IdError) as l_err:
            lix.contains(bad)
        assert (str(r_err.value), r_err.value.position) == (str(l_err.value), l_err.value.position)
    assert rix.remove(["b", "zz"], missing="ignore") == 1
    assert rix.query([7]) == [[("https://a/1", 0), ("ü", 1)]]
    with pytest.raises(ValueError, match="string ids; pass ids"):
        rix.add([1])
    with pytest.raises(ValueError, match="integer ids"):
        rix.add([1], ids=[5])
    rix.close()
    lix.close()


def test_errors_are_one_line(node):
    url = fresh(node.url)
    with pytest.raises(FileNotFoundError, match="no index named"):
        Index.open(url)
    ix = Index.create(url, distance=3)
    with pytest.raises(FileExistsError, match="already exists"):
        Index.create(url, distance=3)
    ix.add([1, 2, 3], ids=[10, 11, 12])
    with pytest.raises(ValueError, match="id 11 is already in the index"):
        ix.add([9], ids=[11])
    with pytest.raises(ValueError, match="ids repeat"):
        ix.add([9, 8], ids=[20, 20])
    with pytest.raises(KeyError, match="id 99 is not in the index"):
        ix.remove([10, 99])
    assert len(ix) == 3 and 10 in ix
    with pytest.raises(ValueError, match="between 0 and the index's distance 3"):
        ix.query([1], distance=4)
    with pytest.raises(ValueError, match=r"in \[0, 2\*\*64\)"):
        ix.query([2**64])
    ro = Index.open(url)
    with pytest.raises(ValueError, match="read-only"):
        ro.add([5], ids=[50])
    with pytest.raises(ValueError, match="bucket_bits must be between 1 and 16"):
        RedisIndex.create(fresh(node.url), 3, 4, bucket_bits=17)
    with pytest.raises(ValueError, match="index name"):
        Index.open(node.url + "?name=a{b}")
    with pytest.raises(IndexUnavailableError, match="unavailable"):
        Index.open(f"redis://127.0.0.1:{node.port + 1 if node.port < 65535 else 1}/0")
    info = ix.info()
    assert info["entries"] == 3 and info["backend"] == "redis" and info["generation"] == 1
    ro.close()
    ix.close()


def test_unacknowledged_records_are_ignored_and_lost_records_reported(node):
    """A write cut off after its bucket records but before its entries leaves records that no
    query returns; a bucket Redis lost is reported by verify()."""
    import redis

    url = fresh(node.url)
    ix = Index.create(url, distance=3, blocks=4)
    ix.add([0b1011], ids=[1])
    client = redis.Redis(port=node.port)
    rec = np.array([(0b1111, 2)], dtype=[("fp", "<u8"), ("key", "<i8")]).tobytes()
    for t in range(ix.layout.n_tables):
        b = int(
            ix.layout.apply(np.array([0b1111], np.uint64), t)[0] >> np.uint64(64 - ix.bucket_bits)
        )
        client.append(f"{ix.name}:t{t}:{b:x}", rec)
    assert ix.query([0b1111]) == [[(1, 1)]]
    ix.verify()
    ix.add([0b1111], ids=[2])  # the retried write: its records appear twice, its match once
    assert ix.query([0b1111]) == [[(2, 0), (1, 1)]]
    assert ix.remove([2]) == 1 and ix.query([0b1111]) == [[(1, 1)]]
    client.delete(*client.keys(f"{ix.name}:t0:*"))
    with pytest.raises(CorruptIndexError, match="1 table records of 1 entries are missing"):
        ix.verify()
    ix.close()


def test_writers_in_threads_take_turns(node):
    url = fresh(node.url)
    RedisIndex.create(url, distance=3).close()
    writers = [RedisIndex.open(url, "w") for _ in range(4)]
    rng = np.random.default_rng(3)
    fps = rng.integers(0, 2**64, 400, dtype=np.uint64)

    def work(w: int) -> None:
        for b in range(5):
            sl = slice(w * 100 + b * 20, w * 100 + b * 20 + 20)
            writers[w].add(fps[sl], ids=np.arange(400)[sl])

    threads = [threading.Thread(target=work, args=(w,)) for w in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    ix = writers[0]
    ix.refresh()
    assert len(ix) == 400 and ix.generation == 20
    check(ix, dict(enumerate(fps.tolist())), fps[::5], 3)
    for w in writers:
        w.close()


def test_choose_redis_layout():
    for n, d in [(1, 3), (1000, 3), (10_000_000, 3), (10**9, 3), (10**6, 6), (10**8, 8)]:
        blocks, bits = choose_redis_layout(n, d)
        assert 1 <= bits <= min(t.prefix_bits for t in Layout(blocks, d).tables)
    assert choose_redis_layout(1000, 3) == (4, 3)
    assert choose_redis_layout(10_000_000, 3) == (4, 16)
    assert choose_redis_layout(10**9, 3) == (5, 23)


@pytest.mark.parametrize("where", ["node", "cluster"])
@pytest.mark.slow
def test_bulk_writes_in_many_small_rounds(request, where, monkeypatch):
    """Adds split into many pipelines, script calls and entry batches (tiny limits) give the
    same index as one round, and an id already stored in a late batch refuses the whole add."""
    url = fresh(request.getfixturevalue(where).url)
    monkeypatch.setattr(redis_writer, "REDIS_WRITE_BYTES", 100)
    monkeypatch.setattr(redis_writer, "REDIS_SCRIPT_KEYS", 3)
    monkeypatch.setattr(redis_writer, "REDIS_SCRIPT_ITEMS", 7)
    monkeypatch.setattr(redis_store, "REDIS_PIPELINE", 5)
    rng = np.random.default_rng(11)
    fps = rng.integers(0, 2**64, 1000, dtype=np.uint64)
    fps[600:650] = fps[:50] ^ np.uint64(1 << 40)  # near duplicates across the two adds
    with RedisIndex.create(url, distance=3, blocks=5, bucket_bits=6) as ix:
        ix.add(fps[:600], ids=np.arange(600))  # into an empty index
        late = np.arange(600, 1000)
        late[-1] = 599
        with pytest.raises(ValueError, match=r"id 599 is already in the index \(1 of"):
            ix.add(fps[600:], ids=late)
        assert len(ix) == 600 and ix.generation == 1
        ix.add(fps[600:], ids=np.arange(600, 1000))
        model = dict(enumerate(fps.tolist()))
        queries = np.concatenate([fps[::9] ^ np.uint64(6), rng.integers(0, 2**64, 50, np.uint64)])
        check(ix, model, queries, 3)
        ix.verify()
    with RedisIndex.create(fresh(url), distance=3, blocks=5, bucket_bits=6) as ix:
        names = [f"doc/{i}/é" for i in range(300)]
        ix.add(fps[:300], ids=names)
        assert ix.query(fps[:300:50]) == [[(names[i], 0)] for i in range(0, 300, 50)]
        with pytest.raises(ValueError, match="'doc/299/é' is already in the index"):
            ix.add(fps[300:310], ids=[f"new{i}" for i in range(9)] + [names[299]])
        assert len(ix) == 300


@pytest.mark.slow
def test_long_bulk_add_keeps_its_lease(node, monkeypatch):
    """A bulk add running longer than the writers' lease keeps renewing it, so no other writer
    can take the index midway."""
    import redis

    url = fresh(node.url)
    config.REDIS_LOCK_LEASE_S = 2.0
    monkeypatch.setattr(redis_writer, "REDIS_WRITE_BYTES", 2048)
    fps = np.random.default_rng(5).integers(0, 2**64, 200_000, dtype=np.uint64)
    client = redis.Redis(port=node.port)
    seen, done = [], threading.Event()
    with RedisIndex.create(url, distance=3, blocks=5, bucket_bits=8) as ix:

        def watch() -> None:
            while not done.is_set():
                seen.append(client.get(f"{ix.name}:lock"))
                time.sleep(0.01)

        w = threading.Thread(target=watch)
        start = time.monotonic()
        with ix.lock():
            w.start()
            ix.add(fps)
            elapsed = time.monotonic() - start
            done.set()  # watched while the lock is held: released after, the key goes
            w.join()
        assert elapsed > config.REDIS_LOCK_LEASE_S  # long enough to need renewing
        assert len(set(seen)) == 1 and seen[0] is not None
        assert len(ix) == len(fps)


def test_a_retried_lease_request_finds_its_own_lease(node):
    """redis-py resends a command whose reply was lost (a node restarting, a timeout): the
    resent request for the writers' lease finds this writer's own token there and takes it,
    rather than waiting for a lease nobody else holds."""
    url = fresh(node.url)
    config.SERVE_WRITE_WAIT_S = 1.0
    with RedisIndex.create(url, distance=3) as ix:
        lease = f"{ix.name}:lock".encode()
        real = ix._store.client.execute_command
        resent = []

        def reply_lost_once(*args, **kw):
            if not resent and any(a in (lease, lease.decode()) for a in args):
                resent.append(args[0])
                real(*args, **kw)  # applied by Redis; its reply never arrives
            return real(*args, **kw)

        ix._store.client.execute_command = reply_lost_once
        ix.add(np.array([1, 2], dtype=np.uint64), ids=[1, 2])
        assert resent and len(ix) == 2
        assert ix._store.client.get(lease) is None  # and given back after the write


def test_the_redis_index_holds_its_writer_rather_than_inheriting_it(node):
    """One class: the writes live in a writer object the index holds (no mixin reading the
    index's attributes), and both reach Redis through the one store they share."""
    from neardup.index.backend import IndexBackend

    assert RedisIndex.__mro__ == (RedisIndex, IndexBackend, object)
    with RedisIndex.create(fresh(node.url), distance=3) as ix:
        assert ix._writer.store is ix._store
        ix.add(np.array([5], dtype=np.uint64), ids=[9])
        assert ix._store.id_type == ix.id_type == "int64" and 9 in ix

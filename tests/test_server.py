"""``neardup serve`` as a real uvicorn process on a free localhost port, over a local index (two
worker processes) and over real redis-server processes, talked to with a real HTTP client."""

from __future__ import annotations

import concurrent.futures
import json
import threading
import time

import naive
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from servers import RedisCluster3, RedisNode, Service, needs_redis

from neardup import Index
from neardup.index.redis import RedisIndex

httpx = pytest.importorskip("httpx")
pytest.importorskip("fastapi")

TOKEN = "s3cret"
RNG = np.random.default_rng(11)
CORPUS = RNG.integers(0, 2**64, 2000, dtype=np.uint64)
CORPUS[:3] = [0, 2**64 - 1, 2**63]


@pytest.fixture(scope="module")
def local(tmp_path_factory):
    path = str(tmp_path_factory.mktemp("serve") / "ix")
    with Index.create(path, distance=3) as ix:
        ix.add(CORPUS, ids=np.arange(len(CORPUS)))
    s = Service(path, "--workers", "2", "--token", TOKEN)
    yield s
    s.stop()


def client(s: Service) -> httpx.Client:
    return httpx.Client(base_url=s.url, timeout=30, headers={"authorization": f"Bearer {TOKEN}"})


def as_lists(corpus_ids, corpus, queries, k):
    qi, ci, di = naive.query(corpus, queries, k)
    out = [[] for _ in queries]
    for q, c, d in zip(qi.tolist(), ci.tolist(), di.tolist()):
        out[q].append({"id": corpus_ids[c], "distance": d, "jaccard": None})
    return out


@pytest.mark.slow
def test_query_matches_brute_force(local):
    near = CORPUS[:200] ^ (np.uint64(1) << RNG.integers(0, 64, 200).astype(np.uint64))
    queries = np.concatenate([near, RNG.integers(0, 2**64, 100, dtype=np.uint64), CORPUS[:3]])
    body = [int(v) if i % 2 else str(v) for i, v in enumerate(queries.tolist())]
    with client(local) as c:
        for k in (None, 0, 2):
            r = c.post("/query", json={"fingerprints": body, "distance": k})
            assert r.status_code == 200, r.text
            want = as_lists(list(range(len(CORPUS))), CORPUS, queries, 3 if k is None else k)
            assert [x["matches"] for x in r.json()["results"]] == want
        r = c.post("/query", json={"texts": ["a b c d e f", "a b c d e f"]}).json()
        assert len(r["fingerprints"]) == 2 and r["fingerprints"][0] == r["fingerprints"][1]
        assert c.get("/health").json()["status"] == "ok"
        stats = c.get("/stats").json()
        assert stats["entries"] == len(CORPUS) and stats["backend"] == "local"
        assert c.get("/openapi.json").json()["paths"].keys() >= {"/query", "/add", "/dedup"}
        assert c.get("/docs").status_code == 200


@pytest.mark.parametrize(
    "body, status, message",
    [
        (b'{"fingerprints": [1,', 400, "malformed JSON"),
        (b'{"fingerprints": [-1]}', 422, "fingerprints[0]: -1 is not in [0, 2**64)"),
        (b'{"fingerprints": [18446744073709551616]}', 422, "is not in [0, 2**64)"),
        (b'{"fingerprints": [1, "18446744073709551616"]}', 422, "fingerprints[1]"),
        (b'{"fingerprints": ["12a"]}', 422, "not an unsigned decimal integer"),
        (b'{"fingerprints": [1.5]}', 422, "must be an integer or a string of decimal digits"),
        (b'{"fingerprints": [true]}', 422, "fingerprints[0]"),
        (b'{"fingerprints": "12"}', 422, "fingerprints: "),
        (b'{"fingerprints": [1], "texts": ["a"]}', 422, "exactly one of"),
        (b'{"fingerprints": [1], "extra": 1}', 422, "extra: Extra inputs"),
        (b"[]", 422, "body: "),
        (b'{"fingerprints": [1], "distance": 4}', 400, "index's distance 3"),
    ],
)
def test_bad_queries_get_one_line_4xx(local, body, status, message):
    with client(local) as c:
        r = c.post("/query", content=body, headers={"content-type": "application/json"})
    assert r.status_code == status, r.text
    err = r.json()["error"]
    assert message in err and "\n" not in err and "Traceback" not in r.text


@pytest.mark.parametrize(
    "body, plain",
    [
        (b'{"fingerprints": [1, 18446744073709551615]}', True),
        (b'{"distance": 2, "fingerprints": [0]}', True),
        (b'{"fingerprints": [1], "distance": null}', True),
        (b'{"fingerprints": ["1"]}', False),
        (b'{"fingerprints": [18446744073709551616]}', False),
        (b'{"fingerprints": [-1]}', False),
        (b'{"fingerprints": [true]}', False),
        (b'{"fingerprints": [1], "distance": true}', False),
        (b'{"fingerprints": [1], "distance": 1.0}', False),
        (b'{"fingerprints": []}', False),
        (b'{"fingerprints": [1], "texts": null}', False),
        (b'{"texts": ["a"]}', False),
        (b"[1]", False),
        (b"{", False),
    ],
)
def test_fast_lane_takes_only_plain_small_queries(body, plain):
    from neardup.server.app import _plain_query

    assert (_plain_query(body) is not None) == plain
    if plain:
        q, d = _plain_query(body)
        assert q.dtype == np.uint64 and d in (None, 0, 2)


@settings(max_examples=200, deadline=None)
@given(
    per_query=st.lists(
        st.lists(st.tuples(st.integers(-(2**63), 2**63 - 1), st.integers(0, 64)), max_size=4),
        max_size=12,
    )
)
def test_results_json_kernel_writes_what_json_dumps_writes(per_query):
    from neardup.index.index import IndexMatches
    from neardup.server.app import _results_body

    qi = [q for q, ms in enumerate(per_query) for _ in ms]
    flat = [m for ms in per_query for m in ms]
    m = IndexMatches(
        np.array(qi, dtype=np.int64),
        np.array([i for i, _ in flat], dtype=np.int64),
        np.array([d for _, d in flat], dtype=np.int64),
    )
    want = [
        {"matches": [{"id": i, "distance": d, "jaccard": None} for i, d in ms]} for ms in per_query
    ]
    assert _results_body(m, len(per_query)) == json.dumps(want, separators=(",", ":")).encode()


def test_fast_lane_answers_as_the_validating_route(local):
    """Integer fingerprints take the fast lane, the same ones as strings FastAPI's route: the
    bodies are identical, errors too; a body of unknown length (chunked) is read whole."""
    queries = np.concatenate([CORPUS[:20] ^ np.uint64(3), RNG.integers(0, 2**64, 20, np.uint64)])
    with client(local) as c:
        for q in queries.tolist():
            fast = c.post("/query", json={"fingerprints": [q, q], "distance": 2})
            slow = c.post("/query", json={"fingerprints": [str(q), q], "distance": 2})
            assert fast.status_code == slow.status_code == 200
            assert fast.content == slow.content
        for d in (-1, 4):
            fast = c.post("/query", json={"fingerprints": [1], "distance": d})
            slow = c.post("/query", json={"fingerprints": ["1"], "distance": d})
            assert fast.status_code == slow.status_code == 400
            assert fast.json() == slow.json() and "index's distance 3" in fast.json()["error"]
        chunks = iter([b'{"fingerprints"', b": [" + str(int(CORPUS[5])).encode() + b"]}"])
        r = c.post("/query", content=chunks, headers={"content-type": "application/json"})
        assert r.status_code == 200 and r.json()["results"][0]["matches"][0]["id"] == 5


def test_batch_limit_and_token(local):
    with client(local) as c:
        r = c.post("/query", json={"fingerprints": [1] * 100_001})
        assert r.status_code == 413 and "limit is 100000" in r.json()["error"]
        r = c.post("/add", json={"fingerprints": [1], "ids": [1, 2]})
        assert r.status_code == 422 and "one id per item" in r.json()["error"]
        r = c.post("/add", json={"fingerprints": [1], "ids": [2**63]})
        assert r.status_code == 422 and "does not fit in int64" in r.json()["error"]
    with httpx.Client(base_url=local.url) as anon:
        r = anon.post("/add", json={"fingerprints": [1], "ids": [10**6]})
        assert r.status_code == 401 and "Bearer" in r.json()["error"]
        assert anon.post("/query", json={"fingerprints": [1]}).status_code == 200


def test_writes_dedup_and_retries(local):
    base = 10**9
    with client(local) as c:
        fps = [0x5A5A5A5A12345678, 0x5A5A5A5A12345678 ^ 3, 0x0F0F0F0F87654321, int(CORPUS[5]) ^ 1]
        ids = [base, base + 1, base + 2, base + 3]
        r = c.post("/dedup", json={"fingerprints": fps, "ids": ids}).json()
        assert [x["new"] for x in r["results"]] == [True, False, True, False]
        assert r["results"][1]["matches"] == [
            {"id": base, "distance": 2, "jaccard": None, "in_batch": True}
        ]
        assert r["results"][3]["matches"][0] == {"id": 5, "distance": 1, "jaccard": None}
        assert r["added"] == 2
        again = c.post("/dedup", json={"fingerprints": fps, "ids": ids}).json()
        assert [x["new"] for x in again["results"]] == [True, False, True, False]
        assert again["added"] == 0
        r = c.post("/add", json={"fingerprints": [fps[0], 99], "ids": [base, base + 9]}).json()
        assert (r["added"], r["already"]) == (1, 1)
        r = c.post("/add", json={"fingerprints": [123], "ids": [base]})
        assert r.status_code == 400 and f"id {base} is already in the index" in r.json()["error"]
        r = c.post("/remove", json={"ids": [base + 9, base + 99]})
        assert r.status_code == 404 and f"id {base + 99} is not in the index" in r.json()["error"]
        r = c.post("/remove", json={"ids": [base + 9, base + 99], "missing": "ignore"}).json()
        assert r["removed"] == 1
        r = c.post("/remove", json={"ids": [base, base + 2]}).json()
        assert r["removed"] == 2


def test_concurrent_writes_serialize_and_become_visible(local):
    """Writes from many connections (spread over both workers) all land; each is answered by
    every worker within the documented refresh delay."""
    start = 2 * 10**9
    fps = RNG.integers(0, 2**64, 40, dtype=np.uint64)

    def write(i: int) -> float:
        with client(local) as c:
            r = c.post("/add", json={"fingerprints": [str(fps[i])], "ids": [start + i]})
            assert r.status_code == 200, r.text
            return time.monotonic()

    with concurrent.futures.ThreadPoolExecutor(8) as ex:
        acked = list(ex.map(write, range(len(fps))))
    time.sleep(max(0.0, max(acked) + 0.15 - time.monotonic()))
    for _ in range(6):  # new connections land on either worker
        with client(local) as c:
            r = c.post("/query", json={"fingerprints": [str(v) for v in fps], "distance": 0})
            got = [[m["id"] for m in x["matches"]] for x in r.json()["results"]]
            assert all(start + i in g for i, g in enumerate(got))
    with client(local) as c:
        r = c.post("/remove", json={"ids": list(range(start, start + len(fps)))}).json()
        assert r["removed"] == len(fps)


def test_missing_index_fails_at_start(tmp_path):
    with pytest.raises(RuntimeError, match="not a neardup index|no such index"):
        Service(str(tmp_path / "nothing"))


@needs_redis
@pytest.mark.slow
def test_redis_node_killed_during_writes(tmp_path):
    """Writes while the Redis node is killed get 503; once it is back (AOF, fsync always) the
    service answers again without a restart and every acknowledged write is there."""
    node = RedisNode(tmp_path / "r")
    url = node.url + "?name=crawl"
    RedisIndex.create(url, distance=3).close()
    s = Service(url)
    acked, failed, stop = [], [], threading.Event()
    fps = RNG.integers(0, 2**64, 100_000, dtype=np.uint64)

    def writer() -> None:
        with httpx.Client(base_url=s.url, timeout=30) as c:
            i = 0
            while not stop.is_set() and i < len(fps) - 20:
                body = {
                    "fingerprints": [int(v) for v in fps[i : i + 20]],
                    "ids": list(range(i, i + 20)),
                }
                r = c.post("/dedup", json=body)
                if r.status_code == 200:
                    acked.extend(range(i, i + 20))
                    i += 20
                else:
                    assert r.status_code == 503, r.text
                    assert "unavailable" in r.json()["error"]
                    failed.append(i)
                    time.sleep(0.05)

    t = threading.Thread(target=writer)
    try:
        t.start()
        time.sleep(1.0)
        node.kill()
        time.sleep(1.0)
        with httpx.Client(base_url=s.url, timeout=30) as c:
            assert c.get("/health").status_code == 503
        node.start()
        time.sleep(1.5)
        stop.set()
        t.join(60)
        assert failed and acked
        with httpx.Client(base_url=s.url, timeout=30) as c:
            assert c.get("/health").status_code == 200
            got = set()
            for a in range(0, len(acked), 5000):
                chunk = acked[a : a + 5000]
                r = c.post(
                    "/query", json={"fingerprints": [int(fps[i]) for i in chunk], "distance": 0}
                )
                assert r.status_code == 200
                for i, x in zip(chunk, r.json()["results"]):
                    if any(m["id"] == i for m in x["matches"]):
                        got.add(i)
            assert got == set(acked)
        with RedisIndex.open(url) as ix:
            ix.verify()
            assert len(ix) >= len(acked)
    finally:
        stop.set()
        t.join(60)
        s.stop()
        node.stop()


@needs_redis
@pytest.mark.slow
def test_replicas_over_a_redis_cluster(tmp_path):
    cluster = RedisCluster3(tmp_path / "c")
    url = cluster.url + "?name=web"
    try:
        RedisIndex.create(url, distance=3, expected_size=1000).close()
        a, b = Service(url, "--token", TOKEN), Service(url, "--token", TOKEN)
        try:
            with client(a) as ca, client(b) as cb:
                fps = [str(v) for v in CORPUS[3:503].tolist()]
                r = ca.post(
                    "/dedup", json={"fingerprints": fps, "ids": [f"u{i}" for i in range(500)]}
                )
                assert r.json()["added"] == 500
                r = cb.post("/query", json={"fingerprints": [str(int(CORPUS[10]) ^ 6)]}).json()
                assert r["results"][0]["matches"] == [{"id": "u7", "distance": 2, "jaccard": None}]
                assert cb.get("/stats").json()["entries"] == 500
                r = cb.post("/dedup", json={"fingerprints": fps[:2], "ids": ["v0", "v1"]}).json()
                assert [x["new"] for x in r["results"]] == [False, False] and r["added"] == 0
        finally:
            a.stop()
            b.stop()
    finally:
        cluster.stop()

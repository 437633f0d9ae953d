"""``neardup serve`` as a real uvicorn process on a free localhost port, over a local index (two
worker processes) and over real redis-server processes, talked to with a real HTTP client."""

from __future__ import annotations

import concurrent.futures
import json
import os
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time

import naive
import numpy as np
import pytest
from cli import invoke
from hypothesis import given, settings
from hypothesis import strategies as st
from servers import RedisCluster3, RedisNode, Service, needs_redis, small_tmpfs

from neardup import Index
from neardup.index.redis import RedisIndex

httpx = pytest.importorskip("httpx")
pytest.importorskip("fastapi")

TOKEN = "T"  # the README's examples use it
RNG = np.random.default_rng(11)
CORPUS = RNG.integers(0, 2**64, 2000, dtype=np.uint64)
CORPUS[:3] = [0, 2**64 - 1, 2**63]


@pytest.fixture(scope="module")
def local(tmp_path_factory):
    path = str(tmp_path_factory.mktemp("serve") / "ix")
    with Index.create(path, distance=3) as ix:
        ix.add(CORPUS, ids=np.arange(len(CORPUS)))
    s = Service(path, "--workers", "2", env={"NEARDUP_TOKEN": TOKEN})
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
    from neardup import Matches
    from neardup.server.app import _results_body

    qi = [q for q, ms in enumerate(per_query) for _ in ms]
    flat = [m for ms in per_query for m in ms]
    m = Matches.from_sorted(
        np.array(qi, dtype=np.int64),
        np.array([i for i, _ in flat], dtype=np.int64),
        np.array([d for _, d in flat], dtype=np.int64),
        len(per_query),
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


def test_dedup_of_fingerprints_follows_the_keep_order_rule(local):
    """A chain in one batch (each item one bit from the one before): /dedup keeps what
    :func:`neardup.decide` keeps, every fourth item at distance 3, never dropping one
    through a chain."""
    from neardup import decide

    base = 0x3C3C3C3C00000000
    fps = np.array([base ^ ((1 << k) - 1) for k in range(12)], dtype=np.uint64)
    assert len(naive.query(CORPUS, fps, 6)[0]) == 0  # nothing indexed near the chain
    with client(local) as c:
        body = {"fingerprints": [int(v) for v in fps], "ids": [10**10 + k for k in range(12)]}
        r = c.post("/dedup", json=body, timeout=300).json()  # the first write compiles
    new = [x["new"] for x in r["results"]]
    assert new == decide(fps, distance=3).kept.tolist() == [k % 4 == 0 for k in range(12)]
    for x in r["results"]:
        assert x["new"] or all(m["distance"] <= 3 and m["id"] % 4 == 0 for m in x["matches"])


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


@pytest.mark.slow
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


@pytest.mark.slow
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
                    # the node down, or the write lock of a write it lost still held after its
                    # restart (the AOF keeps the lock until its time runs out)
                    err = r.json()["error"]
                    assert "unavailable" in err or "another writer held the index" in err, err
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
        a, b = (
            Service(url, env={"NEARDUP_TOKEN": TOKEN}),
            Service(url, env={"NEARDUP_TOKEN": TOKEN}),
        )
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


# -- an index with sketches, served as the CLI answers ---------------------------------------------

WORDS = (
    "alpha beta gamma delta epsilon zeta eta theta iota kappa lambda mu nu xi omicron pi".split()
)


def doc(seed: int, n: int = 60) -> str:
    r = np.random.default_rng(seed)
    return " ".join(WORDS[i] for i in r.integers(0, len(WORDS), n)) + f" w{seed} x{seed} y{seed}"


def cli_query(path, tmp_path, texts, *extra):
    """``neardup index query`` of ``texts`` (ids q0, q1, ...): one list of matches per text."""
    src = tmp_path / f"q{len(os.listdir(tmp_path))}.jsonl"
    src.write_text(
        "".join(json.dumps({"id": f"q{i}", "text": t}) + "\n" for i, t in enumerate(texts))
    )
    out = tmp_path / f"out{len(os.listdir(tmp_path))}.jsonl"
    r = invoke("neardup", "index", "query", str(path), str(src), "-o", str(out), "-q", *extra)
    assert r.returncode == 0, r.stderr
    return [json.loads(line)["matches"] for line in out.read_text().splitlines()]


@pytest.fixture(scope="module")
def sketched(tmp_path_factory):
    """A ``neardup index create --threshold 0.8`` index of 30 documents, served with a read
    token, the access log and one worker."""
    tmp = tmp_path_factory.mktemp("sketched")
    path = tmp / "ix"
    r = invoke("neardup", "index", "create", str(path), "--threshold", "0.8")
    assert r.returncode == 0, r.stderr
    src = tmp / "docs.jsonl"
    src.write_text("".join(json.dumps({"id": i, "text": doc(i)}) + "\n" for i in range(30)))
    r = invoke("neardup", "index", "add", str(path), str(src), "-q")
    assert r.returncode == 0, r.stderr
    env = {"NEARDUP_TOKEN": TOKEN, "NEARDUP_READ_TOKEN": "R"}
    s = Service(str(path), "--access-log", env=env)
    yield s, path, tmp
    s.stop()


def test_sketch_index_answers_as_the_cli(sketched):
    s, path, tmp = sketched
    texts = [doc(3), doc(4).replace("alpha", "beta", 3), doc(999), ""]
    want_plain = cli_query(path, tmp, texts)
    want_verified = cli_query(path, tmp, texts, "--threshold", "0.8")
    assert want_plain[0] and want_verified[0]  # the document itself is found
    with httpx.Client(base_url=s.url, timeout=60, headers={"authorization": "Bearer R"}) as c:
        # texts: verified at the index's own threshold (0.8) without asking, or at the one asked
        for body in ({"texts": texts}, {"texts": texts, "threshold": 0.8}):
            r = c.post("/query", json=body)
            assert r.status_code == 200, r.text
            res = r.json()["results"]
            got = [[[m["id"], m["distance"], m["jaccard"]] for m in x["matches"]] for x in res]
            assert got == want_verified
        # their set fingerprints: matches by bits alone
        r = c.post("/query", json={"fingerprints": r.json()["fingerprints"]})
        got = [[[m["id"], m["distance"]] for m in x["matches"]] for x in r.json()["results"]]
        assert got == want_plain
        r = c.post("/query", json={"fingerprints": [1], "threshold": 0.8})
        assert r.status_code == 400 and "needs 'texts'" in r.json()["error"]


def test_sketch_index_add_and_dedup(sketched):
    s, path, tmp = sketched
    w = {"authorization": f"Bearer {TOKEN}"}
    with httpx.Client(base_url=s.url, timeout=60, headers=w) as c:
        r = c.post("/add", json={"fingerprints": [5], "ids": [500]})
        assert r.status_code == 400 and "send 'texts'" in r.json()["error"], r.text
        assert "\n" not in r.json()["error"]
        r = c.post("/add", json={"texts": [doc(100)], "ids": [100]})
        assert r.status_code == 200 and r.json()["added"] == 1, r.text
        assert cli_query(path, tmp, [doc(100)], "--threshold", "0.8")[0][0][0] == 100
        batch = [doc(5), doc(200), doc(200), doc(201)]
        r = c.post("/dedup", json={"texts": batch, "ids": [205, 200, 202, 201]})
        assert r.status_code == 200, r.text
        out = r.json()
        assert [x["new"] for x in out["results"]] == [False, True, False, True]
        assert out["results"][0]["matches"][0]["id"] == 5
        assert out["results"][0]["matches"][0]["jaccard"] >= 0.8
        assert out["results"][2]["matches"] == [
            {"id": 200, "distance": 0, "jaccard": None, "in_batch": True}
        ]
        assert out["added"] == 2
        want = cli_query(path, tmp, [doc(200), doc(201)], "--threshold", "0.8")
        assert [m[0][0] for m in want] == [200, 201]


def test_reads_and_writes_need_their_tokens(sketched):
    s, _, _ = sketched
    with httpx.Client(base_url=s.url, timeout=60) as c:
        assert c.get("/health").status_code == 200
        assert c.get("/docs").status_code == 200
        body = {"texts": ["a b c"]}
        assert c.post("/query", json=body).status_code == 401
        assert c.get("/stats").status_code == 401
        assert c.get("/metrics").status_code == 401
        read = {"authorization": "Bearer R"}
        assert c.post("/query", json=body, headers=read).status_code == 200
        r = c.post("/add", json={"texts": ["x y z"], "ids": [7000]}, headers=read)
        assert r.status_code == 401 and "write token" in r.json()["error"]
        write = {"authorization": f"Bearer {TOKEN}"}
        assert c.post("/query", json=body, headers=write).status_code == 200


def test_start_banner_and_access_log(sketched):
    s, path, _ = sketched
    with httpx.Client(base_url=s.url, timeout=60, headers={"authorization": "Bearer R"}) as c:
        assert c.get("/stats").status_code == 200
    out = s.stop()
    assert f"http://127.0.0.1:{s.port}" in out
    assert str(path) in out and "30 entries" in out and "POST /query" in out and "/metrics" in out
    lines = [json.loads(x) for x in out.splitlines() if x.startswith("{")]
    stats = [x for x in lines if x["path"] == "/stats"]
    assert stats and stats[-1]["status"] == 200 and stats[-1]["method"] == "GET"
    assert {"client", "ms", "bytes_in", "bytes_out", "time"} <= stats[-1].keys()


# -- a fresh index made as the README says, with tight limits on slow clients ------------------


def readme_service_section() -> str:
    """The README's service section and the service guide, where the ``curl`` examples are."""
    root = os.path.join(os.path.dirname(__file__), "..")
    text = open(os.path.join(root, "README.md")).read()
    section = text[text.index("## The service") :]
    guide = open(os.path.join(root, "docs", "guides", "service.md")).read()
    return section[: section.index("\n## ", 10)] + "\n" + guide


@pytest.fixture(scope="module")
def fresh(tmp_path_factory):
    """The index of the README's ``neardup index create`` example, served with the token
    ``T``, one worker, at most 20 connections and 1 s for headers."""
    create = re.search(r"^neardup index create (.*)$", readme_service_section(), flags=re.M)
    args = create.group(1).split()
    where = tmp_path_factory.mktemp("readme")
    args[0] = str(where / args[0])
    assert invoke("neardup", "index", "create", *args).returncode == 0
    env = {"NEARDUP_TOKEN": TOKEN}
    s = Service(args[0], "--max-connections", "20", "--header-timeout", "1", env=env)
    yield s
    s.stop()


@pytest.mark.skipif(shutil.which("curl") is None, reason="curl is not installed")
def test_readme_curl_examples_work_as_written(fresh):
    """Every ``curl`` example of the README's service section, run by a shell as written
    (only the port is this test service's): a 200 and a JSON answer."""
    text = readme_service_section()
    commands = re.findall(r"^(curl .*?(?:\\\n.*?)*)$", text, flags=re.M)
    assert commands, "no curl example found in the README's service section"
    answers = []
    for cmd in commands:
        cmd = cmd.replace("localhost:8080", f"localhost:{fresh.port}")
        cmd = cmd.replace("localhost:$PORT", f"localhost:{fresh.port}")
        cmd = cmd.replace("curl -s", "curl -s -w '\\n%{http_code}'", 1)
        out = subprocess.run(["bash", "-c", cmd], capture_output=True, text=True, timeout=60)
        body, status = out.stdout.rsplit("\n", 1)
        assert status == "200", (cmd, body)
        assert "results" in json.loads(body), (cmd, body)
        if "/query" in cmd and '"texts"' in cmd:
            answers.append(json.loads(body)["results"][0]["matches"])
    # the README's near-copy query finds the page, with the Jaccard the README shows
    shown = re.search(r'`\{"results":\[\{"matches":(\[.*?\])\}\]', text)
    assert shown and answers, "the README shows no answer of a /query of texts"
    assert answers[0] == json.loads(shown.group(1))
    assert answers[0][0]["jaccard"] >= 0.8


def test_readme_index_finds_a_copy_with_two_of_300_words_changed(fresh):
    """On the README's index (``--threshold 0.8``) a plain ``/query`` of texts finds a copy of
    a 300-word page with 2 words changed, with its Jaccard (old: the README's ``--distance 3``
    index found nothing, and ``jaccard`` was null unless the request named a threshold)."""
    rng = np.random.default_rng(37)
    vocab = [f"{a}{b}" for a in ("ka", "lo", "mi", "nu", "pe", "ro") for b in range(40)]
    words = [vocab[i] for i in rng.integers(0, len(vocab), 300)]
    copy = list(words)
    copy[100], copy[200] = "changed", "edited"
    with client(fresh) as c:
        r = c.post("/add", json={"texts": [" ".join(words)], "ids": ["page-300"]})
        assert r.status_code == 200 and r.json()["added"] == 1, r.text
        r = c.post("/query", json={"texts": [" ".join(copy)]})
        assert r.status_code == 200, r.text
        matches = r.json()["results"][0]["matches"]
        assert [m["id"] for m in matches] == ["page-300"], matches
        assert 0.8 <= matches[0]["jaccard"] <= 1


def test_query_of_texts_defaults_to_the_index_threshold(tmp_path):
    """The default is the threshold the index was made with, and its distance: on a 0.9 index
    (6 bits) a query of texts is neither refused (0.8's 10 bits) nor verified at 0.8."""
    from neardup.fingerprints import Fingerprinter
    from neardup.server.backends import LocalBackend
    from neardup.server.schemas import QueryRequest, to_fingerprints

    path = str(tmp_path / "ix")
    assert invoke("neardup", "index", "create", path, "--threshold", "0.9").returncode == 0
    backend = LocalBackend(path)
    fingerprinter = Fingerprinter()

    def batch(texts):
        return to_fingerprints(QueryRequest(texts=texts), fingerprinter, backend.sketch_words)

    page = batch([doc(1, 300)])
    backend.add(page.fingerprints, np.array([1]), page.sketches)
    # estimated Jaccards 1, 0.95 and 0.87 with the page: the last one only reaches 0.8
    q = batch([doc(1, 300).replace("alpha", "omega", k) for k in (0, 3, 8)])
    m, _ = backend.query(q.fingerprints, None, q.sketches)
    got = m.to_lists(jaccard_digits=6)
    assert [[i for i, _, _ in x] for x in got] == [[1], [1], []]
    assert got == backend.reader().verified_query(q.sketches, 0.9).to_lists(jaccard_digits=6)


@pytest.mark.slow
def test_docs_work_offline(local):
    """/docs loads only assets the service itself serves (no CDN), and they are there."""
    with client(local) as c:
        page = c.get("/docs")
        assert page.status_code == 200
        refs = re.findall(r"""(?:src|href)=["']([^"']+)["']""", page.text)
        refs += re.findall(r"""url: ?["']([^"']+)["']""", page.text)
        assert refs and not [u for u in refs if "://" in u or u.startswith("//")]
        for u in refs:
            r = c.get(u)
            assert r.status_code == 200 and len(r.content) > 100, u
        assert c.get("/redoc").status_code == 200
    browser = shutil.which("chromium") or shutil.which("chromium-browser")
    if browser is None:
        return
    # a real browser that can reach no other host renders every endpoint
    out = subprocess.run(
        [browser, "--headless", "--no-sandbox", "--disable-gpu", "--virtual-time-budget=15000",
         "--host-resolver-rules=MAP * ~NOTFOUND , EXCLUDE 127.0.0.1",
         "--dump-dom", f"{local.url}/docs"],
        capture_output=True, text=True, timeout=180,
    )  # fmt: skip
    for path in ("/query", "/add", "/remove", "/dedup", "/stats", "/health", "/metrics"):
        assert f'data-path="{path}"' in out.stdout, (path, out.stderr[-500:])


def test_missing_server_extra_is_one_line(tmp_path):
    """Without the server extra, ``neardup serve`` says which extra to install, on one line."""
    block = tmp_path / "block"
    block.mkdir()
    (block / "sitecustomize.py").write_text(
        "import sys\n"
        "class Block:\n"
        "    def find_spec(self, name, path=None, target=None):\n"
        "        if name.split('.')[0] in ('fastapi', 'pydantic', 'uvicorn', 'starlette'):\n"
        "            raise ModuleNotFoundError(f'No module named {name!r}', name=name)\n"
        "sys.meta_path.insert(0, Block())\n"
    )
    path = tmp_path / "ix"
    Index.create(str(path), distance=3).close()
    env = {**os.environ, "PYTHONPATH": f"{block}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"}
    code = "import sys; from neardup.cli.main import main; main(sys.argv[1:])"
    out = subprocess.run(
        [sys.executable, "-c", code, "serve", str(path)],
        capture_output=True, text=True, env=env, timeout=120,
    )  # fmt: skip
    assert out.returncode == 2, out.stderr
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1 and 'pip install "neardup[server]"' in lines[0], out.stderr


# -- what a hostile client tries -------------------------------------------------------------------


def raw_request(port: int, head: bytes, chunks=(), timeout: float = 60) -> tuple[int, bytes]:
    """Send ``head`` then each chunk of a chunked body (stopping when the server answers or
    closes); return (status, body) of the answer."""
    with socket.create_connection(("127.0.0.1", port), timeout=timeout) as sock:
        sock.sendall(head)
        try:
            for c in chunks:
                sock.sendall(b"%x\r\n%s\r\n" % (len(c), c))
            sock.sendall(b"0\r\n\r\n")
        except OSError:  # the server answered and closed while we were still sending
            pass
        data = b""
        while b"\r\n\r\n" not in data or len(data) < data.index(b"\r\n\r\n") + 20:
            got = sock.recv(65536)
            if not got:
                break
            data += got
    status = int(data.split(b" ", 2)[1])
    return status, data.split(b"\r\n\r\n", 1)[1]


def test_chunked_body_over_the_limit_is_refused_while_streaming(local):
    """A body without Content-Length (chunked) is counted as it arrives: past the limit the
    answer is 413 before the rest is read (old: read whole, then a 422)."""
    from neardup import config

    head = (
        b"POST /add HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer T\r\n"
        b"Content-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n"
    )
    chunk = b" " * (1 << 20)
    n = config.SERVE_MAX_BODY // len(chunk) + 8
    status, body = raw_request(local.port, head, [b'{"ids": [1], "fingerprints": [1'] + [chunk] * n)
    assert status == 413 and b"request body over" in body
    with client(local) as c:
        assert c.get("/health").status_code == 200


@pytest.mark.parametrize(
    "body",
    [b"[" * 100_000 + b"]" * 100_000, b'{"fingerprints": ' + b"[" * 5000 + b"]" * 5000 + b"}"],
)
def test_deeply_nested_json_is_a_400(local, body):
    with client(local) as c:
        for path in ("/query", "/add"):
            r = c.post(path, content=body, headers={"content-type": "application/json"})
            assert r.status_code == 400, r.text
            assert "nested deeper than" in r.json()["error"] and "\n" not in r.text


def test_json_depth_check():
    from neardup.server.guard import json_depth_over

    assert not json_depth_over(b'{"fingerprints": [1, 2], "texts": null}', 2)
    assert json_depth_over(b"[[[1]]]", 2)
    assert not json_depth_over(b'{"texts": ["[[[[[[[[[[ not nesting"]}', 3)  # in a string
    assert not json_depth_over(b"[[[[", 2)  # malformed: the route says so
    assert not json_depth_over(b"", 2)


def test_errors_do_not_echo_values_without_bound(fresh):
    """Errors naming a request's id show it cut (old: a 2 MB id gave a 2 MB error)."""
    huge = "u" * 2_000_000
    with client(fresh) as c:
        assert c.post("/add", json={"texts": [doc(7)], "ids": ["short"]}).status_code == 200
        r = c.post("/remove", json={"ids": [huge]})
        assert r.status_code == 404 and len(r.content) < 400, len(r.content)
        assert c.post("/add", json={"texts": [doc(8)], "ids": [huge]}).status_code == 200
        r = c.post("/add", json={"texts": [doc(9)], "ids": [huge]})
        assert r.status_code == 400 and len(r.content) < 400, len(r.content)
        assert "already in the index" in r.json()["error"]
        assert c.post("/remove", json={"ids": [huge, "short"]}).json()["removed"] == 2


@pytest.mark.slow
def test_dedup_of_many_identical_items_is_linear(local):
    """20,000 copies of one fingerprint in one /dedup (old: quadratic pairs, a MemoryError):
    the first is new and drops all the others."""
    fp = 0x1234_5678_9ABC_DEF0
    n = 20_000
    ids = list(range(5 * 10**9, 5 * 10**9 + n))
    with client(local) as c:
        t = time.monotonic()
        r = c.post("/dedup", json={"fingerprints": [fp] * n, "ids": ids}, timeout=120)
        took = time.monotonic() - t
        assert r.status_code == 200, r.text
        out = r.json()
        assert out["added"] == 1 and out["results"][0]["new"]
        assert all(not x["new"] and x["matches"][-1]["id"] == ids[0] for x in out["results"][1:])
        assert took < 60
        r = c.post("/remove", json={"ids": ids[:1]})
        assert r.json()["removed"] == 1


def naive_first_survivors(q, seen, k):
    new, by = [], []
    for j in range(len(q)):
        hit = next(
            (i for i in range(j) if new[i] and bin(int(q[i]) ^ int(q[j])).count("1") <= k), -1
        )
        new.append(not seen[j] and hit < 0)
        by.append(hit if not seen[j] else -1)
    return np.array(new), np.array(by)


@settings(max_examples=60, deadline=None)
@given(
    values=st.lists(st.sampled_from([0, 1, 3, 7, 2**63, 2**64 - 1, 0xF0]), max_size=40),
    seen_bits=st.integers(0, 2**40),
    k=st.integers(0, 3),
)
def test_grouped_first_survivors_match_the_pairwise_rule(values, seen_bits, k):
    from neardup.server.backends import batch_links

    q = np.array(values, dtype=np.uint64)
    seen = np.array([(seen_bits >> i) & 1 == 1 for i in range(len(q))], dtype=bool)
    new, by = batch_links(q, k).survivors(seen)
    want_new, want_by = naive_first_survivors(q, seen, k)
    assert new.tolist() == want_new.tolist()
    assert by.tolist() == want_by.tolist()


def test_batch_links_are_over_distinct_items():
    from neardup.server.backends import batch_links

    links = batch_links(np.zeros(50_000, dtype=np.uint64), 3)
    assert len(links.to) == 0 and len(links.self_link) == 1


def test_host_header_is_checked(fresh):
    """A page on another name (DNS rebinding) cannot reach a service bound to loopback."""
    with httpx.Client(base_url=fresh.url, timeout=30) as c:
        r = c.get("/stats", headers={"host": "evil.example"})
        assert r.status_code == 400 and "Host" in r.json()["error"]
        assert c.get("/stats", headers={"host": f"localhost:{fresh.port}"}).status_code == 200
        assert c.get("/stats").status_code == 200


def raw_answer(port: int, request: bytes) -> tuple[int, bytes]:
    """Send one whole request (it asks to close the connection); (status, body) of the answer,
    read until the server closes."""
    with socket.create_connection(("127.0.0.1", port), timeout=60) as sock:
        sock.sendall(request)
        data = b""
        while got := sock.recv(65536):
            data += got
    head, _, body = data.partition(b"\r\n\r\n")
    return int(head.split(b" ", 2)[1]), body


@pytest.mark.parametrize(
    ("target", "hosts", "status"),
    [
        ("/stats", ["[::1]evil.com"], 400),  # old: all after "]" ignored, a 200
        ("/stats", ["localhost:evil.com"], 400),  # old: all after ":" ignored, a 200
        ("/stats", ["127.0.0.1:80:90"], 400),
        ("/stats", ["evil.com", "localhost"], 400),  # old: the last one judged, a 200
        ("/stats", ["localhost", "localhost"], 400),  # RFC 9112: one Host line
        ("http://evil.com/stats", ["localhost"], 400),  # old: the target's host unseen, a 200
        ("http://evil.com:{port}/stats", [], 400),
        ("http://localhost:{port}/stats", ["evil.com"], 200),  # the target's host is the one
        ("/stats", ["[::1]:{port}"], 200),
        ("/stats", ["LOCALHOST"], 200),
    ],
)
def test_host_is_one_well_formed_served_name(fresh, target, hosts, status):
    """The Host check on the raw request (not what an HTTP client would let us send): one
    Host line, ``host[:port]`` and nothing after, and for a target in absolute form the
    target's host (RFC 9112, 3.2.2)."""
    lines = [f"GET {target} HTTP/1.1", *(f"Host: {h}" for h in hosts), "Connection: close"]
    request = "".join(x + "\r\n" for x in lines).format(port=fresh.port) + "\r\n"
    got, body = raw_answer(fresh.port, request.encode())
    assert got == status, body
    if status == 400:
        assert b"Host" in body and b"\n" not in body
    else:
        assert json.loads(body)["entries"] >= 0


@pytest.mark.slow
def test_slow_clients_are_cut_off_and_health_answers(fresh):
    """Connections that send half a request are closed after the header timeout, and past
    the connection cap the oldest idle one makes room: /health keeps answering."""
    socks = []
    try:
        for _ in range(60):
            s = socket.create_connection(("127.0.0.1", fresh.port), timeout=30)
            s.sendall(b"GET /health HTTP/1.1\r\nHost: local")
            socks.append(s)
        with httpx.Client(base_url=fresh.url, timeout=30) as c:
            assert c.get("/health").status_code == 200
        time.sleep(2.5)
        for s in socks:
            try:
                assert s.recv(10) == b""  # closed by the server
            except ConnectionResetError:  # closed by the server, our bytes unread
                pass
    finally:
        for s in socks:
            s.close()


def test_stats_reveal_no_path_or_pid(local):
    with client(local) as c:
        info = c.get("/stats").json()
    assert "path" not in info and "pid" not in info
    assert str(os.path.dirname(os.path.dirname(__file__))) not in json.dumps(info)


def test_token_must_not_be_empty(tmp_path):
    path = tmp_path / "ix"
    Index.create(str(path), distance=3).close()
    (tmp_path / "empty").write_text("\n")
    for args in (["--token", ""], ["--token-file", str(tmp_path / "empty")]):
        r = invoke("neardup", "serve", str(path), *args, text=True)
        assert r.returncode == 2 and "token is empty" in r.stderr, r.stderr


# -- consistency, storage, metrics -------------------------------------------------------------------


@pytest.mark.slow
def test_read_your_writes_across_workers(local):
    """An acknowledged /add is answered by the very next request, on either worker (new
    connections land on both; old: up to 100 ms stale)."""
    fps = RNG.integers(0, 2**64, 40, dtype=np.uint64)
    base = 7 * 10**9
    for i, fp in enumerate(fps.tolist()):
        with client(local) as c:
            r = c.post("/add", json={"fingerprints": [fp], "ids": [base + i]})
            assert r.status_code == 200
            gen = r.json()["generation"]
        with client(local) as c:
            r = c.post("/query", json={"fingerprints": [fp], "distance": 0}).json()
            assert r["generation"] >= gen
            assert base + i in [m["id"] for m in r["results"][0]["matches"]]
    with client(local) as c:
        assert c.post("/remove", json={"ids": [base + i for i in range(40)]}).status_code == 200


def test_metrics_count_every_worker(local):
    with client(local) as c:
        before = c.get("/metrics").text
        for _ in range(20):
            assert c.post("/query", json={"fingerprints": [1]}).status_code == 200
        c.post("/query", content=b"{", headers={"content-type": "application/json"})
        text = c.get("/metrics").text

    def count(t, pattern):
        return sum(float(v) for v in re.findall(pattern + r" ([0-9.e+]+)$", t, flags=re.M))

    q = r'neardup_requests_total\{endpoint="/query",status="200"\}'
    assert count(text, q) - count(before, q) == 20
    assert count(text, r'neardup_errors_total\{endpoint="/query",kind="bad_request"\}') >= 1
    assert count(text, r"neardup_index_entries") >= len(CORPUS)
    assert 'neardup_request_seconds_bucket{endpoint="/query",le="0.005"}' in text


@pytest.fixture
def small_disk(tmp_path):
    with small_tmpfs(tmp_path / "disk", "3m") as where:
        yield where


@pytest.mark.slow
def test_full_disk_is_a_503_naming_storage(small_disk):
    path = small_disk / "ix"
    with Index.create(str(path), distance=3) as ix:
        ix.add(CORPUS[:100], ids=np.arange(100))
    s = Service(str(path))
    try:
        filler = small_disk / "filler"
        with open(filler, "wb") as f:
            try:
                while True:
                    f.write(b"\0" * 65536)
                    f.flush()
            except OSError:
                pass
        fps = [str(v) for v in RNG.integers(0, 2**64, 20_000, dtype=np.uint64).tolist()]
        with httpx.Client(base_url=s.url, timeout=60) as c:
            r = c.post("/add", json={"fingerprints": fps, "ids": list(range(1000, 21000))})
            assert r.status_code == 503, r.text
            assert "storage is full" in r.json()["error"]
            os.remove(filler)
            r = c.post("/add", json={"fingerprints": fps, "ids": list(range(1000, 21000))})
            assert r.status_code == 200 and r.json()["added"] == 20_000
        with Index.open(str(path)) as ix:
            ix.verify()
            assert len(ix) == 20_100
    finally:
        s.stop()


@needs_redis
@pytest.mark.slow
def test_redis_password_never_shown_and_unix_urls(tmp_path):
    """A password in the Redis URL appears nowhere (CLI, start-up, /stats, 503s); unix://
    URLs work; ``index compact`` of a Redis index is one line."""
    short = tempfile.mkdtemp(prefix="nd", dir="/tmp")  # a socket path must be short
    sock = os.path.join(short, "r.sock")
    node = RedisNode(
        tmp_path / "r",
        extra=("--requirepass", "hunter2", "--unixsocket", sock, "--unixsocketperm", "700"),
        password="hunter2",
    )
    s = None
    try:
        url = f"redis://:hunter2@127.0.0.1:{node.port}/0?name=cred"
        r = invoke("neardup", "index", "create", url, "--distance", "3", text=True)
        assert r.returncode == 0 and "hunter2" not in r.stderr and ":***@" in r.stderr, r.stderr
        r = invoke("neardup", "index", "compact", url, text=True)
        assert r.returncode == 0 and "nothing to compact" in r.stderr, r.stderr
        assert len(r.stderr.strip().splitlines()) == 1 and "hunter2" not in r.stderr
        unix = f"unix://{sock}?name=cred&password=hunter2"
        with RedisIndex.open(unix, "w") as ix:
            ix.add([1, 2], ids=[1, 2])
        s = Service(unix, env={"NEARDUP_TOKEN": TOKEN})
        with client(s) as c:
            st = c.get("/stats")
            assert st.status_code == 200 and st.json()["entries"] == 2
            assert "hunter2" not in st.text and "path" not in st.json()
            node.kill()
            for r in (c.post("/add", json={"fingerprints": [3], "ids": [3]}), c.get("/stats")):
                assert r.status_code == 503 and "hunter2" not in r.text, r.text
        out = s.stop()
        assert "hunter2" not in out and "password=***" in out
    finally:
        if s is not None:
            s.stop()
        node.stop()
        shutil.rmtree(short, ignore_errors=True)

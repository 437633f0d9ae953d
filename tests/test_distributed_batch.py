"""neardup.distributed.query (batch mode) on a LocalCluster of two worker processes: a batch
against a stored corpus (array, index, Parquet) gives brute force's and the index's answers; the
CLI's --workers paths give the local output."""

from __future__ import annotations

import json
import os
import signal
import threading
import time

import numpy as np
import pytest

pytest.importorskip("distributed")
pa = pytest.importorskip("pyarrow")
pq = pytest.importorskip("pyarrow.parquet")

import naive  # noqa: E402
from cli import invoke  # noqa: E402
from distributed import Client, LocalCluster  # noqa: E402
from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402
from strategies import fingerprints  # noqa: E402

import neardup.distributed as nd  # noqa: E402
from neardup.index import Index  # noqa: E402

pytestmark = pytest.mark.slow  # a Dask cluster each: seconds to start


@pytest.fixture(scope="module")
def client():
    with (
        LocalCluster(
            n_workers=2, threads_per_worker=1, dashboard_address=None, processes=True
        ) as cluster,
        Client(cluster) as c,
    ):
        yield c


def assert_same(got, qi, ids, di) -> None:
    np.testing.assert_array_equal(got.query_index, qi)
    np.testing.assert_array_equal(got.ids, ids)
    np.testing.assert_array_equal(got.distances, di)


def stored_corpus(seed: int, n: int = 2000) -> np.ndarray:
    rng = np.random.default_rng(seed)
    base = rng.integers(0, 2**64, n, dtype=np.uint64)
    near = base[: n // 4] ^ np.uint64(0b1011 << 20)
    edge = np.array([0, 2**64 - 1, 0], dtype=np.uint64)
    return np.concatenate([base, near, base[:30], edge])


def new_batch(stored: np.ndarray, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    flips = np.uint64(1) << rng.integers(0, 64, (400, 2)).astype(np.uint64)
    near = stored[rng.integers(0, len(stored), 400)] ^ flips[:, 0] ^ flips[:, 1]
    return np.concatenate([near, rng.integers(0, 2**64, 200, dtype=np.uint64), stored[-3:]])


@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    stored=fingerprints(max_size=150),
    batch=fingerprints(max_size=60),
    layout=st.sampled_from([(0, 1), (2, 3), (3, 4), (3, 6), (2, 64)]),
    partition_size=st.integers(1, 90),
)
@pytest.mark.slow
def test_array_corpus_matches_brute_force(client, stored, batch, layout, partition_size):
    distance, blocks = layout
    stored = np.concatenate([stored, batch[:8] ^ np.uint64(0b11)])
    got = nd.query(stored, batch, distance, blocks, client=client, partition_size=partition_size)
    assert_same(got, *naive.query(stored, batch, distance))


@pytest.mark.parametrize("compress", [False, True])
@pytest.mark.parametrize("id_kind", ["int", "str"])
def test_index_corpus_equals_the_index_query(client, tmp_path, compress, id_kind):
    fps = stored_corpus(1)
    ids = [f"page/{i}" for i in range(len(fps))] if id_kind == "str" else None
    path = tmp_path / "ix"
    with Index.create(path, distance=4, blocks=6, compress=compress) as ix:
        ix.max_segments = 3
        for a in range(0, len(fps), 600):
            ix.add(fps[a : a + 600], ids[a : a + 600] if ids else None)
        ix.remove(ids[5:40] if ids else list(range(5, 40)))
    batch = new_batch(fps, 2)
    with Index.open(path) as ix:
        for k in (0, 2, 4):
            want = ix.query_arrays(batch, k)
            rep = nd.batch_search(ix, batch, k, client=client, partition_size=250)
            assert_same(rep.matches, *want)
            assert rep.stats["stored"] == len(ix)
            assert rep.stats["partitions"] == sum(
                -(-s["rows"] // 250) for s in ix.info()["segments"]
            )
        want = ix.query_arrays(batch)
    assert_same(nd.query(str(path), batch, 4, 5, client=client), *want)  # a path; other layout
    with pytest.raises(ValueError, match="between 0 and the index's distance 4"):
        nd.query(path, batch, 5, client=client)


def write_parquet(path, fps, ids=None, row_group_size=300) -> None:
    cols = {"fp": pa.array(fps, pa.uint64())}
    if ids is not None:
        cols["doc"] = pa.array(ids)
    pq.write_table(pa.table(cols), path, row_group_size=row_group_size)


def test_parquet_corpus_with_and_without_ids(client, tmp_path):
    fps = stored_corpus(3)
    batch = new_batch(fps, 4)
    cuts = [0, 900, 1700, len(fps)]
    for kind in ("str", "int", None):
        d = tmp_path / str(kind)
        d.mkdir()
        for i in range(3):
            part = fps[cuts[i] : cuts[i + 1]]
            rows = range(cuts[i], cuts[i + 1])
            ids = [f"u{j}" for j in rows] if kind == "str" else list(rows) if kind else None
            write_parquet(d / f"part-{i}.parquet", part, ids)
        got = nd.query(
            str(d / "part-*.parquet"), batch, 3, client=client, column="fp", id_column="doc"
        )
        with Index.create(d / "ix", distance=3) as ix:
            ix.add(fps, [f"u{j}" for j in range(len(fps))] if kind == "str" else None)
            assert_same(got, *ix.query_arrays(batch))
    with pytest.raises(ValueError, match=r"part-0.parquet: no column 'fingerprint'"):
        nd.query(str(tmp_path / "None" / "part-0.parquet"), batch, 3, client=client)
    with pytest.raises(FileNotFoundError):
        nd.query([str(tmp_path / "missing.parquet")], batch, 3, client=client)
    bad = tmp_path / "bad.parquet"
    pq.write_table(pa.table({"fingerprint": pa.array([1, None, 3], pa.uint64())}), bad)
    with pytest.raises(ValueError, match="bad.parquet, row group 0: missing fingerprint values"):
        nd.query(str(bad), batch, 3, client=client)
    pq.write_table(pa.table({"fingerprint": pa.array([1, 2], pa.uint64()), "id": ["a", None]}), bad)
    with pytest.raises(ValueError, match="bad.parquet, row group 0: missing values in the id"):
        nd.query(str(bad), batch, 3, client=client)


@pytest.mark.slow
def test_cli_index_query_and_dedup_against_on_workers(tmp_path):
    fps = stored_corpus(5, 800)
    src = tmp_path / "stored.txt"
    src.write_text("".join(f"{v}\n" for v in fps.tolist()))
    path = str(tmp_path / "ix")
    assert invoke("neardup", "index", "create", path, "--compress").returncode == 0
    assert invoke("neardup", "index", "add", path, "--fingerprints", str(src), "-q").returncode == 0
    q = tmp_path / "q.txt"
    q.write_text("".join(f"{v}\n" for v in new_batch(fps, 6).tolist()))
    local = invoke("neardup", "index", "query", path, "--fingerprints", str(q), "-q", text=True)
    dask = invoke(
        "neardup", "index", "query", path, "--fingerprints", str(q), "-q", "--workers", "2",
        text=True,
    )  # fmt: skip
    assert local.returncode == 0 and dask.returncode == 0, dask.stderr
    assert dask.stdout == local.stdout and any(
        json.loads(x)["matches"] for x in local.stdout.splitlines()
    )
    docs = tmp_path / "seen.jsonl"
    words = [f"w{i}" for i in range(400)]
    lines = [" ".join(words[i : i + 40]) for i in range(0, 300, 3)]
    docs.write_text("".join(json.dumps({"id": i, "text": t}) + "\n" for i, t in enumerate(lines)))
    seen = str(tmp_path / "seen.idx")
    assert (
        invoke("neardup", "index", "create", seen, "--distance", "6", "--compress").returncode == 0
    )
    assert invoke("neardup", "index", "add", seen, str(docs), "-q").returncode == 0
    new = tmp_path / "new.jsonl"
    edited = [t.replace("w5 ", "x5 ") for t in lines[:50]] + ["fresh words entirely " * 5]
    new.write_text(
        "".join(json.dumps({"id": 1000 + i, "text": t}) + "\n" for i, t in enumerate(edited))
    )
    outs = []
    for extra in ((), ("--workers", "2")):
        out = tmp_path / f"kept{len(extra)}.jsonl"
        r = invoke("neardup", "dedup", str(new), "-o", str(out), "--against", seen, "-q", *extra)
        assert r.returncode == 0
        outs.append(out.read_text())
    assert outs[0] == outs[1] and 0 < len(outs[0].splitlines()) < len(edited)
    # the stored corpus as Parquet (fingerprints and ids): the same decisions on the cluster
    from neardup.fingerprints import Fingerprinter

    stored = Fingerprinter("default").fingerprint_many(lines)
    write_parquet(tmp_path / "seen.parquet", stored, list(range(len(lines))))
    table = pq.read_table(tmp_path / "seen.parquet").rename_columns(["fingerprint", "id"])
    pq.write_table(table, tmp_path / "seen.parquet")
    out = tmp_path / "kept_pq.jsonl"
    glob_arg = str(tmp_path / "seen*.parquet")
    r = invoke(
        "neardup", "dedup", str(new), "-o", str(out), "--against", glob_arg, "-q", "--workers", "2"
    )
    assert r.returncode == 0 and out.read_text() == outs[0]
    r = invoke("neardup", "dedup", str(new), "-o", str(out), "--against", glob_arg, text=True)
    assert r.returncode == 2 and "batch mode on Dask" in r.stderr


@pytest.mark.filterwarnings("ignore:.*no shingles:UserWarning")
def test_dedup_against_an_index_with_sketches_on_dask(tmp_path, client):
    import neardup

    words = [f"w{i}" for i in range(500)]
    seen = [" ".join(words[i : i + 40]) for i in range(0, 400, 4)]
    new = [t.replace("w7 ", "x7 ").replace("w9 ", "x9 ") for t in seen[:60]]
    new += [" ".join(words[i : i + 30]) + " fresh" for i in range(3, 300, 17)]
    new = pa.table({"id": [f"n{i}" for i in range(len(new))], "text": new})
    with Index.create(tmp_path / "ix", threshold=0.8, sketch_words=8) as ix:
        neardup.dedup(seen, against=ix, update=True)
        local = neardup.dedup(new, against=ix, threshold=0.8)
        dask = neardup.dedup(new, against=ix, threshold=0.8, client=client)
    assert 0 < local.against.n_found < len(new) and local.against.how == "sketch"
    assert dask.kept.tolist() == local.kept.tolist()
    assert dask.against.id == local.against.id
    np.testing.assert_array_equal(dask.against.jaccard, local.against.jaccard)
    assert dask.verified.kept_for.tolist() == local.verified.kept_for.tolist()


@pytest.mark.parametrize("shard_docs", [None, 7])
def test_dedup_against_parquet_files_on_dask(tmp_path, client, shard_docs):
    """Parquet files as against: every document checked in one batch query on the cluster,
    whatever the shards; a document is dropped for a stored fingerprint within 6 bits (brute
    force), and the rest are decided as a local run against an index of the same entries
    decides them."""
    import neardup

    words = [f"w{i}" for i in range(400)]
    seen = [" ".join(words[i : i + 40]) for i in range(0, 200, 5)]
    new = [t.replace("w7 ", "x7 ") for t in seen[:20]] + [
        " ".join(words[i : i + 30]) + " fresh" for i in range(3, 300, 11)
    ]
    new += new[-3:]  # exact copies within the batch
    stored = neardup.Fingerprinter().fingerprint_many(seen)
    pq.write_table(pa.table({"fingerprint": stored, "id": [f"s{i}" for i in range(len(seen))]}),
                   tmp_path / "seen.parquet")  # fmt: skip
    with Index.create(tmp_path / "ix", distance=6) as ix:
        ix.add(stored, [f"s{i}" for i in range(len(seen))])
    local = neardup.dedup(new, against=str(tmp_path / "ix"))
    got = neardup.dedup(new, against=str(tmp_path / "seen.parquet"), client=client,
                        shard_docs=shard_docs)  # fmt: skip
    mine = neardup.Fingerprinter().fingerprint_many(new)
    near = [min(naive.popcount(int(f) ^ int(x)) for x in stored) <= 6 for f in mine]
    assert got.against.found.tolist() == near and 0 < sum(near) < len(new)
    assert got.kept.tolist() == local.kept.tolist() and got.against.id == local.against.id


@pytest.mark.slow
def test_worker_killed_mid_batch_query_gives_the_exact_answer(tmp_path):
    fps = stored_corpus(7, 60_000)
    with Index.create(tmp_path / "ix", distance=3, compress=True) as ix:
        ix.add(fps)
        batch = new_batch(fps, 8)
        want = ix.query_arrays(batch)
    with (
        LocalCluster(
            n_workers=2, threads_per_worker=1, dashboard_address=None, processes=True
        ) as cluster,
        Client(cluster) as c,
    ):
        nd.query(tmp_path / "ix", batch[:5], 3, client=c)  # warm the workers' numba caches
        pids = c.run(os.getpid)
        outcome: dict[str, object] = {}

        def job() -> None:
            try:
                outcome["m"] = nd.query(tmp_path / "ix", batch, 3, client=c, partition_size=500)
            except Exception as e:  # noqa: BLE001 - the test inspects it
                outcome["error"] = e

        th = threading.Thread(target=job)
        th.start()
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and not any(c.processing().values()):
            time.sleep(0.01)
        time.sleep(0.1)
        assert th.is_alive(), "the job ended before a worker could be killed"
        os.kill(next(iter(pids.values())), signal.SIGKILL)
        th.join(120)
        assert not th.is_alive()
    assert "error" not in outcome, outcome.get("error")
    assert_same(outcome["m"], *want)

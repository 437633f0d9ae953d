"""neardup.distributed on a LocalCluster of two worker processes, against tests/naive.py and the
single-machine path, with small partitions and shards so clusters span partitions and tables."""

from __future__ import annotations

import os
import signal
import threading
import time

import numpy as np
import pytest

pytest.importorskip("distributed")
pytest.importorskip("pandas")

import dask.array as da  # noqa: E402
import dask.dataframe as dd  # noqa: E402
import naive  # noqa: E402
import pandas as pd  # noqa: E402
from distributed import Client, LocalCluster  # noqa: E402
from hypothesis import given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

import neardup  # noqa: E402
import neardup.distributed as nd  # noqa: E402
from neardup.distributed.plan import make_plan, split_partition  # noqa: E402

pytestmark = pytest.mark.slow  # a Dask cluster each: seconds to start

SMALL = {"shard_size": 64, "partition_size": 97}


@pytest.fixture(scope="module")
def client():
    with (
        LocalCluster(
            n_workers=2, threads_per_worker=1, dashboard_address=None, processes=True
        ) as cluster,
        Client(cluster) as c,
    ):
        yield c


def clustered(seed: int, n_base: int = 300, k: int = 3) -> np.ndarray:
    """Chains of near values (A~B~C with A, C apart), exact repeats, and 0 / 2**64-1."""
    rng = np.random.default_rng(seed)
    base = rng.integers(0, 2**64, n_base, dtype=np.uint64)
    bit = [np.uint64(1) << np.uint64(b) for b in rng.integers(0, 64, (n_base, 2))[:, 0]]
    far = [np.uint64(1) << np.uint64(b) for b in rng.integers(0, 64, (n_base, 2))[:, 1]]
    step = np.array(bit, dtype=np.uint64)
    # flip a different set of k-1 bits twice: base ~ b1 ~ b2 but base, b2 may be 2k-2 apart
    b1 = base ^ step ^ np.array(far, dtype=np.uint64)
    b2 = b1 ^ (np.uint64(0b11) << np.uint64(30))
    fp = np.concatenate(
        [base, b1, b2, base[:20], np.array([0, 2**64 - 1, 1, 2**64 - 2], dtype=np.uint64)]
    )
    rng.shuffle(fp)
    return fp


def test_plan_groups_cover_tables_and_shards_hold_candidates():
    plan = make_plan(10_000, 3, 5, shard_size=100)
    assert sorted(t for g in plan.groups for t in g) == list(range(plan.layout.n_tables))
    assert len(plan.groups) == 4  # one per possible first leading block: A, B, C, D
    assert plan.n_shards == 128
    fp = np.random.default_rng(0).integers(0, 2**64, 1000, dtype=np.uint64)
    for g, tables in enumerate(plan.groups):
        pieces = split_partition(fp, 5, plan, g)
        assert sum(len(p[0]) for p in pieces) == len(fp)
        for t in tables:
            lead = np.uint64(plan.layout.tables[t].lead_mask)
            for vals, pos in pieces:
                assert np.all(np.diff(pos) > 0)
                assert np.array_equal(fp[pos - 5], vals)
                # values that agree on table t's leading blocks share this shard
                other = fp[~np.isin(fp, vals)]
                assert not np.isin(vals & lead, other & lead).any()


def test_plan_caps_shard_bits_at_prefix_width():
    plan = make_plan(100, 6, 7, shard_size=1)  # blocks of 9-10 bits, one leading block
    assert plan.shard_bits <= min(plan.layout.widths)
    assert plan.n_shards > 1


@pytest.mark.parametrize("distance,blocks", [(0, 1), (1, 2), (1, 64), (3, None), (3, 4), (6, 8)])
def test_find_all_matches_naive_and_single_machine(client, distance, blocks):
    fp = clustered(distance + 7)
    got = nd.find_all(fp, distance, blocks, client=client, **SMALL)
    assert np.array_equal(got, naive.find_all(fp, distance))
    assert np.array_equal(got, neardup.find_all(fp, distance, blocks))


@pytest.mark.parametrize("distance", [2, 3, 6])
def test_find_clusters_matches_naive(client, distance):
    fp = clustered(distance)
    got = nd.find_clusters(fp, distance, client=client, **SMALL)
    want = naive.find_clusters(fp, distance)
    assert np.array_equal(got, want)
    assert np.array_equal(got, neardup.find_clusters(fp, distance))
    # clusters span several partitions and shards
    sizes = np.bincount(got)
    assert sizes.max() >= 3
    big = np.flatnonzero(got == np.argmax(sizes))
    assert len(set(big // SMALL["partition_size"])) >= 2


@pytest.mark.parametrize("fp", [[], [5], [7, 7, 7], [0, 2**64 - 1], [3] * 40])
def test_edge_inputs(client, fp):
    fp = np.array(fp, dtype=np.uint64)
    assert np.array_equal(nd.find_all(fp, 3, client=client, **SMALL), naive.find_all(fp, 3))
    assert np.array_equal(
        nd.find_clusters(fp, 3, client=client, **SMALL), naive.find_clusters(fp, 3)
    )


@settings(max_examples=12, deadline=None)
@given(
    st.lists(st.integers(0, 2**64 - 1), max_size=60),
    st.integers(0, 4),
    st.integers(0, 3),
)
def test_property_matches_naive(client, values, distance, extra):
    fp = np.array(values, dtype=np.uint64)
    # near copies so matches exist
    fp = np.concatenate([fp, fp[: len(fp) // 2] ^ np.uint64(0b101)])
    blocks = distance + 1 + extra
    got = nd.find_all(fp, distance, blocks, client=client, shard_size=8, partition_size=13)
    assert np.array_equal(got, naive.find_all(fp, distance))
    lab = nd.find_clusters(fp, distance, blocks, client=client, shard_size=8, partition_size=13)
    assert np.array_equal(lab, naive.find_clusters(fp, distance))


def test_dask_array_dataframe_and_parquet_inputs(client, tmp_path):
    fp = clustered(11)
    want = naive.find_all(fp, 3)
    arr = da.from_array(fp, chunks=150)
    assert np.array_equal(nd.find_all(arr, 3, client=client, shard_size=64), want)
    pdf = pd.DataFrame({"id": np.arange(len(fp)) * 10, "fingerprint": fp})
    ddf = dd.from_pandas(pdf, npartitions=5)
    assert np.array_equal(nd.find_all(ddf, 3, client=client, shard_size=64), want)
    files = []
    for i, chunk in enumerate(np.array_split(np.arange(len(fp)), 3)):
        path = tmp_path / f"part-{i}.parquet"
        pdf.iloc[chunk].to_parquet(path, index=False)
        files.append(str(path))
    assert np.array_equal(nd.find_all(files, 3, client=client, shard_size=64), want)
    lab = nd.find_clusters(files, 3, client=client, shard_size=64)
    assert np.array_equal(lab, naive.find_clusters(fp, 3))


def test_dedup_and_dedup_frame(client, tmp_path):
    fp = clustered(5)
    labels = naive.find_clusters(fp, 6)
    keep = nd.dedup(fp, client=client, **SMALL)
    assert np.array_equal(keep, labels == np.arange(len(fp)))
    pdf = pd.DataFrame({"id": np.arange(len(fp)) * 10 + 1, "fingerprint": fp})
    ddf = dd.from_pandas(pdf, npartitions=4)
    kept = nd.dedup_frame(ddf, client=client, shard_size=64).compute()
    assert kept["id"].tolist() == pdf["id"][keep].tolist()
    path = tmp_path / "in.parquet"
    pdf.to_parquet(path, index=False)
    kept2 = nd.dedup_frame(str(path), client=client, shard_size=64).compute()
    assert kept2["id"].tolist() == pdf["id"][keep].tolist()


def test_verified_dedup_on_dask_gives_the_same_decisions(client):
    import json

    corpus = os.path.join(os.path.dirname(__file__), "..", "data", "sample", "corpus.jsonl")
    texts = [json.loads(x)["text"] for x in open(corpus)]
    texts += texts[:50]  # exact copies: classes of identical sets across the pairs
    for kw in ({}, {"threshold": 0.9, "keep": "longest"}, {"verify": False},
               {"candidates": "bands"}):  # fmt: skip
        here = neardup.dedup(texts, **kw)
        there = neardup.dedup(texts, client=client, **kw)
        assert here.n_dropped >= 150
        assert np.array_equal(here.kept, there.kept), kw
        assert np.array_equal(here.decisions.survivor, there.decisions.survivor), kw
        assert np.array_equal(here.jaccard, there.jaccard, equal_nan=True), kw


def test_text_column_is_fingerprinted_per_partition(client):
    from neardup.fingerprints import Fingerprinter

    texts = [f"document number {i % 37} about the quick brown fox" for i in range(200)]
    pdf = pd.DataFrame({"text": texts})
    ddf = dd.from_pandas(pdf, npartitions=3)
    fp = Fingerprinter("default").fingerprint_many(texts)
    got = nd.find_clusters(ddf, 3, client=client, text_column="text", shard_size=32)
    assert np.array_equal(got, naive.find_clusters(fp, 3))


def test_bad_input_names_partition(client):
    pdf = pd.DataFrame({"fingerprint": np.array([1, 2, -3, 4], dtype=np.int64)})
    ddf = dd.from_pandas(pdf, npartitions=2)
    with pytest.raises(ValueError, match="partition 1.*non-negative"):
        nd.find_all(ddf, 3, client=client)
    with pytest.raises(ValueError, match="no column 'fp'"):
        nd.find_all(ddf, 3, client=client, column="fp")
    with pytest.raises(ValueError, match="blocks must be > distance"):
        nd.find_all(np.arange(10, dtype=np.uint64), 3, 3, client=client)
    with pytest.raises(FileNotFoundError):
        nd.find_all(["/nonexistent/x.parquet"], 3, client=client)


@pytest.mark.slow
def test_worker_killed_mid_job_gives_the_exact_answer():
    # the input is a Dask array built from the graph, so Dask can recompute whatever the killed
    # worker held: the job must finish with the exact answer, not merely fail cleanly
    fp = clustered(3, n_base=8_000)
    want = neardup.find_all(fp, 3)
    with (
        LocalCluster(
            n_workers=2, threads_per_worker=1, dashboard_address=None, processes=True
        ) as cluster,
        Client(cluster) as c,
    ):
        # warm the workers' numba caches so the job below is short and predictable
        nd.find_all(fp[:100], 3, client=c)
        pids = c.run(os.getpid)
        outcome: dict[str, object] = {}

        def job() -> None:
            try:
                arr = da.from_array(fp, chunks=4000)
                outcome["pairs"] = nd.find_all(arr, 3, client=c, shard_size=512)
            except Exception as e:  # noqa: BLE001 - the test inspects it
                outcome["error"] = e

        th = threading.Thread(target=job)
        th.start()
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and not any(c.processing().values()):
            time.sleep(0.01)
        time.sleep(0.2)
        assert th.is_alive(), "the job ended before a worker could be killed"
        victim = next(iter(pids.values()))
        os.kill(victim, signal.SIGKILL)
        th.join(120)
        assert not th.is_alive()
    assert "error" not in outcome, outcome.get("error")
    assert np.array_equal(outcome["pairs"], want)

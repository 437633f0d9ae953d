"""``device=`` on the Dask path: every shard task searched by the GPU engine of its worker.

Under numba's CUDA simulator (``tests/gpusim.py``) on a LocalCluster of threads in this process
(the simulator is slow: inputs stay tiny), against ``tests/naive.py`` and the CPU engine. Worker
processes started without the simulator, and without CuPy or a GPU, show what a worker that
cannot run ``device="cuda"`` says.
"""

from __future__ import annotations

import json
import re

import numpy as np
import pytest

pytest.importorskip("distributed")
pytest.importorskip("pandas")

import naive  # noqa: E402
from cli import invoke  # noqa: E402
from distributed import Client, LocalCluster  # noqa: E402
from gpusim import NO_GPU, NO_GPU_FIX, REAL_GPU  # noqa: E402
from hypothesis import given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402
from strategies import fingerprints  # noqa: E402
from test_staged import _buckets  # noqa: E402

import neardup  # noqa: E402
import neardup.distributed as nd  # noqa: E402
from neardup.gpu import DeviceUnavailable  # noqa: E402
from neardup.io.sources import InputPath  # noqa: E402

pytestmark = [pytest.mark.gpu, pytest.mark.slow]

#: small partitions and shards: pairs span partitions, shards and table groups
SMALL = {"shard_size": 8, "partition_size": 13}
EDGES = [0, 2**64 - 1, 1, 2**63, 2**64 - 2]


@pytest.fixture(scope="module")
def client():
    with (
        LocalCluster(
            n_workers=2, threads_per_worker=2, dashboard_address=None, processes=False
        ) as cluster,
        Client(cluster) as c,
    ):
        yield c


def _rows(pairs: np.ndarray) -> list[tuple[int, int]]:
    return [tuple(p) for p in pairs.tolist()]


@settings(max_examples=8, deadline=None)
@given(fp=fingerprints(max_size=30), distance=st.integers(0, 6), tight=st.booleans())
def test_find_all_and_clusters_match_brute_force_and_cpu(client, fp, distance, tight):
    blocks = distance + 1 if tight else None
    got = nd.find_all(fp, distance, blocks, client, device="cuda", **SMALL)
    assert _rows(got) == _rows(naive.find_all(fp, distance))
    assert _rows(got) == _rows(neardup.find_all(fp, distance, blocks))
    labels = nd.find_clusters(fp, distance, blocks, client, device="cuda", **SMALL)
    np.testing.assert_array_equal(labels, naive.find_clusters(fp, distance))


@pytest.mark.parametrize(
    "fp, distance, blocks",
    [
        ([], 3, None),
        ([7], 3, None),
        ([5, 5], 0, 1),
        ([0, 2**64 - 1, 0, 2**64 - 1], 0, None),
        ([0, 2**64 - 1] * 3, 63, 64),
        ([2**64 - 1] * 6 + [2**64 - 2] * 3, 1, 2),
        (EDGES * 3, 1, 2),
    ],
)
def test_edge_cases(client, fp, distance, blocks):
    fp = np.array(fp, dtype=np.uint64)
    want = naive.find_all(fp, distance)
    for device in ("cuda", "auto"):
        got = nd.find_all(fp, distance, blocks, client, device=device, **SMALL)
        assert _rows(got) == _rows(want)
        assert got.dtype == np.int64 and got.shape == (len(want), 2)
    labels = nd.find_clusters(fp, distance, blocks, client, device="cuda", **SMALL)
    np.testing.assert_array_equal(labels, naive.find_clusters(fp, distance))


DOCS = [
    "the quick brown fox jumps over the lazy dog near the river bank today",
    "the quick brown fox jumps over the lazy dog near the river bank today!",
    "a completely different sentence about gardening and tomatoes in july",
    "The quick brown fox jumps over the lazy dog near the river bank, today",
    "a completely different sentence about gardening and tomatoes in july.",
    "nothing like the others at all",
]


@pytest.mark.parametrize("verify", [True, False])
def test_dedup_on_dask_device(client, verify):
    cpu = neardup.dedup(DOCS, verify=verify)
    gpu = neardup.dedup(DOCS, verify=verify, client=client, device="cuda")
    np.testing.assert_array_equal(gpu.kept, cpu.kept)
    np.testing.assert_array_equal(gpu.labels, cpu.labels)
    assert not cpu.kept.all()  # near-duplicates were found: the comparison means something


def test_a_bad_device_is_refused(client):
    with pytest.raises(ValueError, match='device must be "cpu", "cuda" or "auto"'):
        nd.find_all([1, 3], 1, client=client, device="gpu")
    with pytest.raises(ValueError, match='device must be "cpu", "cuda" or "auto"'):
        neardup.dedup(DOCS, client=client, device="gpu")


@pytest.fixture(scope="module")
def no_gpu_client():
    """One worker process without the simulator (and without CuPy or a GPU)."""
    if REAL_GPU:
        pytest.skip("the workers here have a GPU")
    mp = pytest.MonkeyPatch()
    mp.setenv("NUMBA_ENABLE_CUDASIM", "0")  # the worker processes inherit it
    try:
        with (
            LocalCluster(
                n_workers=1, threads_per_worker=1, dashboard_address=None, processes=True
            ) as cluster,
            Client(cluster) as c,
        ):
            yield c
    finally:
        mp.undo()


def test_cuda_on_a_worker_without_a_gpu_is_one_line_naming_it(no_gpu_client):
    (address,) = no_gpu_client.nthreads()
    fp = np.array([11, 9, 2**40, 11], dtype=np.uint64)
    with pytest.raises(DeviceUnavailable) as e:
        nd.find_all(fp, 1, client=no_gpu_client, device="cuda")
    msg = str(e.value)
    assert msg.startswith(f"worker {address}: {NO_GPU}") and "\n" not in msg
    assert msg.endswith(NO_GPU_FIX)
    # "auto" uses the CPU of a worker without a GPU: the CPU engine's answer
    got = nd.find_all(fp, 1, client=no_gpu_client, device="auto")
    assert _rows(got) == _rows(naive.find_all(fp, 1)) == [(0, 1), (0, 3), (1, 3)]


def test_a_task_on_a_worker_without_a_gpu_names_it(no_gpu_client):
    # a worker that joined after the check: the shard task itself says which worker it was
    from neardup.distributed import _dask
    from neardup.distributed.plan import make_plan, shard_pairs

    (address,) = no_gpu_client.nthreads()
    pieces = [(np.array([11, 9], dtype=np.uint64), np.array([0, 1], dtype=np.int64))]
    fut = no_gpu_client.submit(
        _dask._search_shard, shard_pairs, pieces, make_plan(2, 1), 0, "cuda", pure=False
    )
    with pytest.raises(DeviceUnavailable, match=f"^worker {address}: {re.escape(NO_GPU)}"):
        fut.result()


def test_cli_on_workers_with_device(tmp_path, monkeypatch):
    src = tmp_path / "fp.txt"
    fp = [11, 9, 2**40, 11, 0, 2**64 - 1, 2**40 + 1]
    src.write_text("".join(f"{v}\n" for v in fp))
    if not REAL_GPU:
        monkeypatch.setenv("NUMBA_ENABLE_CUDASIM", "1")  # the CLI's worker processes simulate
    outs = []
    for device in ("cpu", "cuda"):
        out = tmp_path / f"{device}.jsonl"
        r = invoke("neardup", "find-all", str(src), "-o", str(out), "-d", "1",
                   "--workers", "1", "--device", device, "-q")  # fmt: skip
        assert r.returncode == 0, r.stderr
        outs.append(out.read_text())
    want = "".join(f"[{i}, {j}]\n" for i, j in naive.find_all(fp, 1).tolist())
    assert outs[0] == outs[1] == want and want


@pytest.mark.skipif(REAL_GPU, reason="checks the message where there is no GPU")
def test_cli_on_workers_without_a_gpu_is_one_line(tmp_path, monkeypatch):
    src = tmp_path / "fp.txt"
    src.write_text("11\n9\n")
    monkeypatch.setenv("NUMBA_ENABLE_CUDASIM", "0")
    r = invoke("neardup", "clusters", str(src), "-d", "1", "--workers", "1", "--device", "cuda",
               "-q", text=True)  # fmt: skip
    assert r.returncode == 2
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("neardup: error: worker tcp://"), r.stderr
    assert NO_GPU in lines[0]


def _docs_file(path) -> list[str]:
    docs = DOCS * 2 + [f"{d} and some more words at the end" for d in DOCS[:3]]
    path.write_text("".join(json.dumps({"id": i, "text": t}) + "\n" for i, t in enumerate(docs)))
    return docs


@pytest.mark.parametrize("verify", [True, False])
@pytest.mark.parametrize("bucket", [None, 3])
def test_staged_dedup_device(client, tmp_path, verify, bucket):
    """A staged dedup (on Dask, and on this process's threads) with its search stage on the
    GPU: the one-process CPU run's outputs, byte for byte."""
    _docs_file(tmp_path / "in.jsonl")
    src = [InputPath(tmp_path / "in.jsonl")]
    ref = tmp_path / "cpu.jsonl"
    want = neardup.dedup(src, verify=verify, output=ref)
    assert not want.kept.all()
    runs = {"dask": {"client": client}, "threads": {"shard_docs": 4, "threads": 2}}
    with _buckets(bucket):
        for name, kw in runs.items():
            out = tmp_path / f"{name}.jsonl"
            got = neardup.dedup(src, verify=verify, output=out, device="cuda", **kw)
            assert out.read_bytes() == ref.read_bytes(), name
            assert got.kept.tolist() == want.kept.tolist()


def test_staged_dedup_cuda_without_a_gpu_is_one_line(no_gpu_client, tmp_path):
    _docs_file(tmp_path / "in.jsonl")
    out = tmp_path / "out.jsonl"
    with pytest.raises(DeviceUnavailable, match=r"^worker tcp://\S+: " + re.escape(NO_GPU)):
        neardup.dedup([InputPath(tmp_path / "in.jsonl")], output=out, client=no_gpu_client,
                      device="cuda")  # fmt: skip
    assert not out.exists()


def test_cli_dedup_on_workers_with_device(tmp_path, monkeypatch):
    _docs_file(tmp_path / "in.jsonl")
    if not REAL_GPU:
        monkeypatch.setenv("NUMBA_ENABLE_CUDASIM", "1")
    outs = []
    for device in ("cpu", "cuda"):
        out = tmp_path / f"{device}.jsonl"
        r = invoke("neardup", "dedup", str(tmp_path / "in.jsonl"), "-o", str(out),
                   "--workers", "1", "--device", device, "-q")  # fmt: skip
        assert r.returncode == 0, r.stderr
        outs.append(out.read_bytes())
    assert outs[0] == outs[1] and outs[0].count(b"\n") < len(DOCS) * 2


@pytest.mark.skipif(REAL_GPU, reason="checks the message where there is no GPU")
def test_cli_dedup_on_workers_without_a_gpu_is_one_line(tmp_path, monkeypatch):
    _docs_file(tmp_path / "in.jsonl")
    monkeypatch.setenv("NUMBA_ENABLE_CUDASIM", "0")
    out = tmp_path / "out.jsonl"
    r = invoke("neardup", "dedup", str(tmp_path / "in.jsonl"), "-o", str(out), "--workers", "1",
               "--device", "cuda", "-q", text=True)  # fmt: skip
    assert r.returncode == 2
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("neardup: error: worker tcp://"), r.stderr
    assert NO_GPU in lines[0] and not out.exists()


def _same_matches(got, qi, ids, d) -> None:
    np.testing.assert_array_equal(got.query_index, qi)
    np.testing.assert_array_equal(got.ids, ids)
    np.testing.assert_array_equal(got.distances, d)


@settings(max_examples=6, deadline=None)
@given(
    stored=fingerprints(max_size=30),
    batch=fingerprints(max_size=12),
    distance=st.integers(0, 6),
    partition_size=st.integers(1, 20),
)
def test_batch_query_matches_brute_force(client, stored, batch, distance, partition_size):
    stored = np.concatenate([stored, batch[:4] ^ np.uint64(0b11), batch[:2]])
    want = naive.query(stored, batch, distance)
    for device in ("cuda", "auto"):
        got = nd.query(
            stored, batch, distance, client=client, partition_size=partition_size, device=device
        )
        _same_matches(got, *want)
        assert len(got.offsets) == len(batch) + 1


def test_batch_query_of_an_index(client, tmp_path):
    rng = np.random.default_rng(3)
    fps = rng.integers(0, 2**64, 40, dtype=np.uint64)
    with neardup.Index.create(tmp_path / "ix", distance=4, blocks=6) as ix:
        ix.add(fps[:25])
        ix.add(fps[25:])
    edges = np.array([0, 2**64 - 1], dtype=np.uint64)
    batch = np.concatenate([fps[[0, 7, 30]] ^ np.uint64(0b101), edges])
    with neardup.Index.open(tmp_path / "ix") as ix:
        for k in (0, 2, 4):
            got = nd.query(ix, batch, k, client=client, partition_size=9, device="cuda")
            _same_matches(got, *ix.query_arrays(batch, k))
        assert len(got.ids) >= 3  # matches were found: the comparison means something


def test_batch_query_cuda_without_a_gpu_is_one_line(no_gpu_client):
    (address,) = no_gpu_client.nthreads()
    with pytest.raises(DeviceUnavailable, match=f"^worker {address}: {re.escape(NO_GPU)}"):
        nd.query([1, 2, 3], [1], 1, client=no_gpu_client, device="cuda")
    got = nd.query([1, 2, 3], [1], 1, client=no_gpu_client, device="auto")
    _same_matches(got, *naive.query([1, 2, 3], [1], 1))


@pytest.mark.parametrize("verify", [True, False])
def test_dedup_against_an_index_on_dask_device(client, tmp_path, verify):
    from neardup.fingerprints import Fingerprinter

    with neardup.Index.create(tmp_path / "ix", distance=6) as ix:
        ix.add(Fingerprinter().fingerprint_many(DOCS[:3]), ["a", "b", "c"])
    new = DOCS[3:] + DOCS[:1]
    cpu = neardup.dedup(new, verify=verify, against=tmp_path / "ix", client=client)
    gpu = neardup.dedup(new, verify=verify, against=tmp_path / "ix", client=client, device="cuda")
    np.testing.assert_array_equal(gpu.kept, cpu.kept)
    assert not cpu.kept.all()  # documents of the index were found: the comparison means something


def test_dedup_frame_device(client):
    import dask.dataframe as dd
    import pandas as pd

    fps = np.array([11, 9, 2**40, 11, 0, 2**64 - 1, 2**40 + 1, 7], dtype=np.uint64)
    frame = dd.from_pandas(pd.DataFrame({"fingerprint": fps, "n": range(len(fps))}), npartitions=3)
    labels = naive.find_clusters(fps, 1)
    want = [i for i in range(len(fps)) if labels[i] == i]  # the first row of each cluster
    for device in ("cuda", "auto"):
        got = nd.dedup_frame(frame, 1, client=client, device=device, **SMALL).compute()
        assert got["n"].tolist() == want and len(want) < len(fps)

"""``neardup find-all`` / ``neardup clusters`` run in process, single-machine and on a local
Dask cluster (``--workers``), over decimal and Parquet inputs split across files."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import naive
import numpy as np
import pytest
from cli import Result, invoke

pytestmark = pytest.mark.slow  # a Dask cluster each: seconds to start


def run(*args: str) -> Result:
    return invoke("neardup", *args, text=True)


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    pd = pytest.importorskip("pandas")
    pytest.importorskip("pyarrow")
    d = tmp_path_factory.mktemp("fp")
    rng = np.random.default_rng(4)
    base = rng.integers(0, 2**64, 400, dtype=np.uint64)
    fp = np.concatenate([base, base ^ np.uint64(0b101), base[:30] ^ np.uint64(1 << 50), base[:9]])
    rng.shuffle(fp)
    (d / "all.txt").write_text("".join(f"{v}\n" for v in fp))
    parquet = []
    for i, chunk in enumerate(np.array_split(fp, 3)):
        path = d / f"part-{i}.parquet"
        pd.DataFrame({"fp": chunk}).to_parquet(path, index=False)
        parquet.append(str(path))
    return fp, str(d / "all.txt"), parquet


def rows(text: str) -> list[list[int]]:
    return [json.loads(line) for line in text.splitlines()]


def test_find_all_local_and_on_workers_match_naive(data, tmp_path):
    fp, txt, parquet = data
    want = naive.find_all(fp, 3).tolist()
    r = run("find-all", txt, "-q")
    assert r.returncode == 0, r.stderr
    assert rows(r.stdout) == want
    out = tmp_path / "pairs.jsonl"
    r = run("find-all", *parquet, "--column", "fp", "--workers", "2", "-q", "-o", str(out))
    assert r.returncode == 0, r.stderr
    assert rows(out.read_text()) == want


def test_clusters_on_workers_match_naive(data):
    fp, txt, parquet = data
    labels = naive.find_clusters(fp, 3)
    want = [np.flatnonzero(labels == c).tolist() for c in np.unique(labels)]
    want = [g for g in want if len(g) > 1]
    r = run("clusters", *parquet, "--column", "fp", "--workers", "2", "-q")
    assert r.returncode == 0, r.stderr
    assert rows(r.stdout) == want
    r = run("clusters", txt, "-q")
    assert rows(r.stdout) == want


def test_errors_are_one_line(data, tmp_path):
    _, txt, parquet = data
    r = run("find-all", parquet[0], "--column", "nope", "--workers", "1", "-q")
    assert r.returncode == 2
    assert "no column 'nope'" in r.stderr and "Traceback" not in r.stderr
    r = run("find-all", txt, "--workers", "1", "--scheduler", "tcp://127.0.0.1:1", "-q")
    assert r.returncode == 2 and "either --scheduler or --workers" in r.stderr
    out = tmp_path / "never.jsonl"
    r = run("find-all", txt, "-d", "3", "-b", "2", "-o", str(out))
    assert r.returncode == 2 and "blocks must be > distance" in r.stderr
    assert not out.exists()


def test_dedup_on_local_dask_cluster_matches_single_machine(tmp_path):
    sample = str(Path(__file__).resolve().parents[1] / "data" / "sample" / "corpus.jsonl")
    local, dask = tmp_path / "local.jsonl", tmp_path / "dask.jsonl"
    r = run("dedup", sample, "-o", str(local), "-q", "--clusters", str(tmp_path / "c1.jsonl"))
    assert r.returncode == 0, r.stderr
    r = run(
        "dedup",
        sample,
        "-o",
        str(dask),
        "--workers",
        "2",
        "--clusters",
        str(tmp_path / "c2.jsonl"),
    )
    assert r.returncode == 0, r.stderr
    assert dask.read_bytes() == local.read_bytes()
    # the summary says where it ran, and its time counts the cluster's start-up
    time_line = next(ln for ln in r.stderr.splitlines() if "time     " in ln)
    assert "(on Dask (2 workers): cluster start-up " in time_line
    assert (tmp_path / "c2.jsonl").read_text() == (tmp_path / "c1.jsonl").read_text()
    assert len(local.read_text().splitlines()) < 1200  # something was dropped
    r = run(
        "dedup",
        sample,
        "-o",
        str(tmp_path / "x.jsonl"),
        "--workers",
        "2",
        "--scheduler",
        "tcp://127.0.0.1:1",
    )
    assert r.returncode == 2 and "either --scheduler or --workers" in r.stderr


_MAIN = [sys.executable, "-c", "from neardup.cli.main import main; main()"]


@pytest.mark.slow
def test_a_worker_killed_during_dedup_is_quiet_and_leaves_nothing_in_tmpdir(tmp_path):
    """A SIGKILLed worker printed Dask's warnings (a worker restarted, a slow shutdown) on
    stderr, and `--workers` left `dask-scratch-space/` in TMPDIR."""
    psutil = pytest.importorskip("psutil")
    rng = np.random.default_rng(8)
    words = [f"w{i}" for i in range(3000)]
    src = tmp_path / "in.jsonl"
    src.write_text("".join(json.dumps({"id": i, "text": " ".join(rng.choice(words, 60))}) + "\n"
                           for i in range(2000)))  # fmt: skip
    tmpdir = tmp_path / "tmp"
    tmpdir.mkdir()
    env = {**os.environ, "TMPDIR": str(tmpdir),
           "PYTHONPATH": str(Path(__file__).resolve().parents[1] / "src")}  # fmt: skip
    args = ["dedup", str(src), "--shard-docs", "250", "-q", "-o"]
    one = subprocess.run([*_MAIN, *args, str(tmp_path / "one.jsonl")], env=env)
    assert one.returncode == 0
    p = subprocess.Popen([*_MAIN, *args, str(tmp_path / "dask.jsonl"), "--workers", "2"],
                         env=env, stderr=subprocess.PIPE, text=True)  # fmt: skip
    killed, deadline = None, time.monotonic() + 300
    while killed is None and p.poll() is None and time.monotonic() < deadline:
        # once the scan has begun, a worker (not Python's resource tracker, also a child)
        if any((tmpdir / n / "scan").is_dir() for n in os.listdir(tmpdir)):
            kids = psutil.Process(p.pid).children()
            workers = [k for k in kids if "spawn_main" in " ".join(k.cmdline())]
            if workers:
                killed = workers[0].pid
                os.kill(killed, signal.SIGKILL)
        time.sleep(0.02)
    _, err = p.communicate(timeout=600)
    assert killed is not None, f"the run ended before a worker could be killed: {err}"
    assert p.returncode == 0 and err == "", err
    assert (tmp_path / "dask.jsonl").read_bytes() == (tmp_path / "one.jsonl").read_bytes()
    assert os.listdir(tmpdir) == []

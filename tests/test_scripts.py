"""One smoke test per installed console script, run as a real subprocess (the scripts are found
next to ``sys.executable``, so these run whether or not the environment is activated)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

import numpy as np
import pytest
from cli import run_script, script

SAMPLE = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "data", "sample")


@pytest.mark.parametrize("tool", ["neardup", "simhash-find-all", "simhash-find-clusters"])
def test_script_is_installed(tool):
    assert os.access(script(tool), os.X_OK), f"{script(tool)} is not an installed script"


def test_simhash_find_all_script():
    r = run_script("simhash-find-all", "-d", "1", "-q", input=b"5\n7\n1024\n")
    assert r.returncode == 0, r.stderr
    assert [json.loads(x) for x in r.stdout.decode().splitlines()] == [[5, 7]]


def test_simhash_find_clusters_script():
    r = run_script("simhash-find-clusters", "-d", "1", "-q", input=b"5\n7\n1024\n")
    assert r.returncode == 0, r.stderr
    assert [json.loads(x) for x in r.stdout.decode().splitlines()] == [[5, 7]]


@pytest.mark.slow
def test_neardup_dedup_script_on_the_sample(tmp_path):
    out = tmp_path / "kept.jsonl"
    r = run_script("neardup", "dedup", os.path.join(SAMPLE, "corpus.jsonl"), "-o", str(out), "-q")
    assert r.returncode == 0, r.stderr
    kept = out.read_text().splitlines()
    assert 900 < len(kept) < 1200
    assert r.stderr == b""


def test_bad_option_is_one_line_without_traceback():
    r = run_script("simhash-find-all", "--distance", "x", input=b"")
    assert r.returncode == 2
    assert r.stderr.decode().count("\n") == 1
    assert "Traceback" not in r.stderr.decode()


# -- SIGTERM: the run ends as on Ctrl-C, leaving nothing behind -----------------------------------


def _big_corpus(path, n: int) -> None:
    """``n`` JSONL documents of 50 words (every tenth a near-copy of another), written
    in blocks so that building a large input takes a moment."""
    rng = np.random.default_rng(0)
    vocab = np.array([f"w{k}" for k in range(5000)])
    with open(path, "w") as f:
        for start in range(0, n, 10_000):
            m = min(10_000, n - start)
            words = vocab[rng.integers(0, len(vocab), (m, 50))]
            texts = [" ".join(w) for w in words.tolist()]
            for k in range(9, m, 10):
                texts[k] = texts[k - 9] + " again"
            f.writelines(f'{{"id": {start + k}, "text": "{t}"}}\n' for k, t in enumerate(texts))


def _wait_for(check, timeout: float, proc: subprocess.Popen) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        assert proc.poll() is None, proc.communicate()[1].decode()
        assert time.monotonic() < deadline, "the run never reached the point to stop it at"
        time.sleep(0.02)


def _terminated(proc: subprocess.Popen) -> str:
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=300)
    stderr = err.decode()
    assert proc.returncode == 143, stderr
    assert stderr.splitlines()[-1] == "neardup: error: terminated" and "Traceback" not in stderr
    return stderr


@pytest.mark.slow
def test_sigterm_mid_run_removes_the_work_directory_and_writes_nothing(tmp_path):
    big = tmp_path / "big.jsonl"
    _big_corpus(big, 200_000)
    out, tmp = tmp_path / "out", tmp_path / "tmp"
    out.mkdir()
    tmp.mkdir()
    (out / "kept.jsonl").write_text("OLD\n")
    proc = subprocess.Popen(
        [script("neardup"), "dedup", str(big), "-o", str(out / "kept.jsonl"), "--clusters",
         str(out / "c.jsonl"), "--drop-list", str(out / "drop.txt"), "--progress", "none"],
        env=dict(os.environ, TMPDIR=str(tmp)), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
    )  # fmt: skip

    def spooling() -> bool:  # the scan is under way: shingle keys in the work directory
        return any(p.stat().st_size > 0 for p in tmp.glob(".neardup-work.neardup-*/scan/*/*.u32"))

    try:
        _wait_for(spooling, 300, proc)
        _terminated(proc)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        big.unlink()  # 63 MB
    assert list(tmp.iterdir()) == []  # the work directory is gone
    assert [p.name for p in out.iterdir()] == ["kept.jsonl"]  # no output, no temporary file
    assert (out / "kept.jsonl").read_text() == "OLD\n"  # the previous file as it was


# Stops a real `neardup dedup` process where its outputs are staged but not committed: the kept
# documents are written and the clusters too, then it says so and waits for the signal.
_PAUSE_AFTER_CLUSTERS = """
import sys, time
import neardup.pipeline.staged as staged
from neardup.cli.main import main

commit_parts = staged.commit_parts

def write_then_wait(*args, **kwargs):
    commit_parts(*args, **kwargs)
    open(sys.argv[1], "w").close()
    time.sleep(300)

staged.commit_parts = write_then_wait
main(sys.argv[2:])
"""


@pytest.mark.slow
def test_sigterm_while_outputs_are_staged_leaves_the_previous_files(tmp_path):
    out, tmp = tmp_path / "out", tmp_path / "tmp"
    out.mkdir()
    tmp.mkdir()
    for name in ("kept.jsonl", "c.jsonl"):
        (out / name).write_text("OLD\n")
    before = {p.name: p.read_bytes() for p in out.iterdir()}
    ready = tmp_path / "staged"
    proc = subprocess.Popen(
        [sys.executable, "-c", _PAUSE_AFTER_CLUSTERS, str(ready), "dedup",
         os.path.join(SAMPLE, "corpus.jsonl"), "-o", str(out / "kept.jsonl"),
         "--clusters", str(out / "c.jsonl"), "--json-summary", str(out / "s.json"), "-q"],
        env=dict(os.environ, TMPDIR=str(tmp)), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
    )  # fmt: skip
    try:
        _wait_for(ready.exists, 300, proc)
        # staged: the kept documents and the clusters are in temporary files beside them
        assert len([p for p in out.iterdir() if p.name.endswith(".tmp")]) == 2
        _terminated(proc)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert {p.name: p.read_bytes() for p in out.iterdir()} == before
    assert list(tmp.iterdir()) == []

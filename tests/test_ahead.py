"""Compiling the search and verification kernels in a second process on a first dedup
(neardup.pipeline.ahead)."""

from __future__ import annotations

import glob
import json
import os
import signal
import subprocess
import sys
import time

import pytest
from cli import interruptible

from neardup import compiled, config
from neardup.pipeline import ahead

DOCS = [
    "the cat sat on the mat and looked at the dog in the garden today",
    "the cat sat on the mat and looked at the dog in the garden today!",
    "an entirely different text about trains, timetables and the weather",
]


def _cache_lines(stdout: str, what: str) -> list[str]:
    """Names of the kernels numba reports as ``[cache] data <what>`` (NUMBA_DEBUG_CACHE)."""
    return [
        os.path.basename(line.rsplit("'", 2)[-2]).split("-")[0]
        for line in stdout.splitlines()
        if line.startswith(f"[cache] data {what}")
    ]


@pytest.mark.parametrize("verify", [True, False])
@pytest.mark.slow
def test_child_compiles_what_the_job_then_loads(tmp_path, verify):
    data = tmp_path / "docs.jsonl"
    data.write_text("".join(json.dumps({"id": i, "text": t}) + "\n" for i, t in enumerate(DOCS)))
    cache = tmp_path / "cache"
    env = dict(os.environ, NUMBA_CACHE_DIR=str(cache), NUMBA_DEBUG_CACHE="1")
    env.pop("NEARDUP_THREADS", None)
    args = ["dedup", str(data), "-o", str(tmp_path / "kept.jsonl")]
    args += [] if verify else ["--no-verify"]
    # neardup dedup, with a child whatever the machine's load
    run = (
        "import sys\nfrom neardup.pipeline import ahead\nahead.COMPILE_AHEAD_SPARE_CPUS = -1e9\n"
        "from neardup.cli.main import main\nmain(sys.argv[1:])\n"
    )
    r = subprocess.run(
        [sys.executable, "-c", run, *args], env=env, capture_output=True, text=True, timeout=600
    )
    assert r.returncode == 0, r.stderr
    saved, loaded = _cache_lines(r.stdout, "saved"), _cache_lines(r.stdout, "loaded")
    # a verified run decides with prefix candidates (the default), a fingerprint-only one
    # with the search
    decider = "prefix_kernels.prefix_keep" if verify else "tree_kernels.root_pairs"
    if len(os.sched_getaffinity(0)) < 2:  # pragma: no cover - no second CPU: no child
        assert decider in saved
        return
    # this process compiled the fingerprint kernels only (with the shared primitives they call,
    # unless the child had compiled those first), and loaded what the child compiled
    # (and the scan's id hashes, set fingerprints and set digests: verification kernels)
    fingerprinting = ("_kernels.", "_pipeline.", "primitives.", "_id_kernels.", "verify_kernels.")
    assert saved and all(name.startswith(fingerprinting) for name in saved), saved
    assert decider in loaded
    assert "verify_kernels.greedy_keep" not in loaded  # the fingerprint candidates' pass
    cost = {g: c for g, (_, _, c) in compiled.GROUPS.items()}
    ahead = cost["prefix"] if verify else cost["search"]  # the longer side
    want = max(cost["fingerprint"], ahead)
    assert f"compiling kernels for this machine (first run only, ~{want} s)" in r.stderr
    assert not glob.glob(str(cache / "**" / "*.tmp.*"), recursive=True)
    kept = (tmp_path / "kept.jsonl").read_text().splitlines()
    assert [json.loads(line)["id"] for line in kept] == [0, 2]


@pytest.mark.slow
def test_child_finishes_its_compile_through_ctrl_c(tmp_path):
    env = dict(os.environ, NUMBA_CACHE_DIR=str(tmp_path))
    child = subprocess.Popen(
        [sys.executable, "-m", "neardup.pipeline.ahead", "search"],
        env=env, stderr=subprocess.PIPE, text=True, preexec_fn=interruptible,
    )  # fmt: skip
    time.sleep(1.0)
    child.send_signal(signal.SIGINT)
    assert child.wait(600) == 0, child.stderr.read()
    assert glob.glob(str(tmp_path / "**" / "tree_kernels.root_pairs-*.nbc"), recursive=True)
    assert not glob.glob(str(tmp_path / "**" / "*.tmp.*"), recursive=True)


class FakeChild:
    def __init__(self, args, **kwargs):
        self.args, self.kwargs, self.waited = args, kwargs, False

    def wait(self, timeout=None):
        self.waited = True
        return 0


def test_started_only_when_it_helps(monkeypatch):
    started: list[FakeChild] = []

    def popen(args, **kwargs):
        started.append(FakeChild(args, **kwargs))
        return started[-1]

    monkeypatch.setattr(ahead.subprocess, "Popen", popen)
    monkeypatch.setattr(ahead, "_usable_cpus", lambda: 2)
    monkeypatch.setattr(ahead.os, "getloadavg", lambda: (0.3, 0.2, 0.1))
    monkeypatch.setattr(compiled, "is_compiled", lambda group: group == "search")
    with ahead.compile_ahead(verify=True) as yes:
        assert yes and ahead._pending == [started[0]]
        ahead.wait_ahead()  # the job, before its search
        assert started[0].waited and ahead._pending == []
    assert started[0].args[1:] == ["-m", "neardup.pipeline.ahead", "verify"]
    assert started[0].kwargs["stdin"] == subprocess.DEVNULL
    # nothing to do, or nothing to gain: no child
    with ahead.compile_ahead(verify=False) as yes:  # the search group is compiled
        assert not yes
    with ahead.compile_ahead(verify=True, threads=1) as yes:
        assert not yes
    monkeypatch.setattr(ahead, "_usable_cpus", lambda: 1)
    with ahead.compile_ahead(verify=True) as yes:
        assert not yes
    monkeypatch.setattr(ahead, "_usable_cpus", lambda: 2)
    monkeypatch.setattr(ahead.os, "getloadavg", lambda: (1.0, 0.2, 0.1))  # no CPU idle
    with ahead.compile_ahead(verify=True) as yes:
        assert not yes
    monkeypatch.setattr(ahead.os, "getloadavg", lambda: (0.3, 0.2, 0.1))
    monkeypatch.setattr(config, "COMPILE_AHEAD", False)
    with ahead.compile_ahead(verify=True) as yes:
        assert not yes
    monkeypatch.setattr(config, "COMPILE_AHEAD", True)
    monkeypatch.setattr(compiled, "cache_dir_for", lambda path: None)  # nothing can be cached
    with ahead.compile_ahead(verify=True) as yes:
        assert not yes
    assert len(started) == 1
    ahead.wait_ahead()  # nothing pending: returns at once


def test_waited_for_on_error_and_killed_when_stuck(monkeypatch):
    class Stuck(FakeChild):
        killed = False

        def wait(self, timeout=None):
            if timeout is not None and not self.killed:
                raise subprocess.TimeoutExpired("child", timeout)
            return -9

        def kill(self):
            self.killed = True

    child = Stuck([])
    monkeypatch.setattr(ahead, "_start", lambda verify, threads: child)
    with pytest.raises(RuntimeError, match="bad input"):
        with ahead.compile_ahead():
            raise RuntimeError("bad input")
    assert child.killed and ahead._pending == []


def test_child_usage():
    assert ahead.main(["what"]) == 2

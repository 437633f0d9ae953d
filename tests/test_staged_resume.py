"""A staged dedup stopped by Ctrl-C and resumed: it stops at once (the tasks not started are
cancelled), says what it kept; the rerun says what it reused, with no rate made up from reused
work; ``--clean-work-dir`` removes only what the run wrote, and only after a success. And the
shard size chosen for a cluster's workers, so that every worker has work."""

from __future__ import annotations

import glob
import json
import os
import signal
import subprocess
import time
from pathlib import Path

import naive
import pytest
from cli import interruptible, invoke
from test_staged import _MAIN, ROOT, _cli, _write

from neardup import dedup
from neardup.cli.progress import TaskProgress
from neardup.io.sources import InputPath
from neardup.pipeline.plan import MIN_SPREAD_DOCS, build_plan, spread

#: scan tasks of 50 documents, one at a time: a run of :data:`_DOCS` is mid-scan for seconds
_SLOW = ["--shard-docs", "50", "--threads", "1", "--progress", "none"]
#: documents of the interrupted runs: 60 scan tasks of :data:`_SLOW`'s 50
_DOCS = 3000


def _corpus(tmp_path: Path, n: int) -> str:
    docs = naive.text_families(n, seed=7, vocab=200, words=(20, 40))
    _write(tmp_path / "in.jsonl", docs)
    return str(tmp_path / "in.jsonl")


def _scanned(pattern: str) -> int:
    """Scan tasks finished (renamed into place) in the work directories ``pattern`` names."""
    return sum(".tmp-" not in p for p in glob.glob(os.path.join(pattern, "scan", "*", "done.json")))


def _interrupt(args: list[str], pattern: str, env: dict[str, str]) -> tuple[int, str, float, int]:
    """``neardup dedup args`` sent SIGINT once 3 scan tasks finished in ``pattern``; its exit
    status, stderr, the seconds from the signal to its exit and the scan tasks finished."""
    proc = subprocess.Popen([*_MAIN, "dedup", *args], env=env, stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, text=True, preexec_fn=interruptible)  # fmt: skip
    deadline = time.monotonic() + 180
    while time.monotonic() < deadline and proc.poll() is None and _scanned(pattern) < 3:
        time.sleep(0.02)
    assert proc.poll() is None, "the run ended before it could be interrupted"
    t0 = time.monotonic()
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=120)
    return proc.returncode, err, time.monotonic() - t0, _scanned(pattern)


def _one_line(err: str) -> str:
    """The only line of ``err`` (click ends a Ctrl-C with an empty line first)."""
    lines = [line for line in err.splitlines() if line.strip()]
    assert len(lines) == 1 and "Traceback" not in err, err
    return lines[0]


@pytest.mark.slow
def test_ctrl_c_stops_at_once_says_how_to_resume_and_the_rerun_says_what_it_reused(tmp_path):
    src = _corpus(tmp_path, _DOCS)
    work = tmp_path / "work"
    args = [src, *_SLOW, "--work-dir", str(work), "-o", str(tmp_path / "out.jsonl")]
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src")}
    code, err, seconds, scanned = _interrupt(args, str(work), env)
    assert code == 130
    line = _one_line(err)
    assert f"interrupted; the finished tasks are kept in {work} (" in line
    assert "run the same command again, with the same --work-dir, to resume" in line
    # the scan tasks not started were cancelled, not run first (old: all 60); the seconds
    # bound is loose for a loaded machine: the task count is what proves the cancel
    assert seconds < 15.0 and 3 <= scanned < 50, (seconds, scanned)
    assert not (tmp_path / "out.jsonl").exists()

    r = _cli(*args)
    assert r.returncode == 0, r.stderr
    assert f"resuming from {work}: " in r.stderr
    resumed = next(x for x in r.stderr.splitlines() if "resumed " in x)
    assert f"scan {scanned}/" in resumed and "ran the other" in resumed
    time_line = next(x for x in r.stderr.splitlines() if "time  " in x)
    assert "documents/s" not in time_line  # no rate from work an earlier run did
    assert f"work dir         {work} kept (" in r.stderr
    one = _cli(src, "-q", "-o", str(tmp_path / "one.jsonl"))
    assert one.returncode == 0, one.stderr
    assert (tmp_path / "out.jsonl").read_bytes() == (tmp_path / "one.jsonl").read_bytes()
    # a third run reuses every task, and says so
    (tmp_path / "out.jsonl").unlink()
    r = _cli(*args, "--json-summary", str(tmp_path / "s.json"))
    assert r.returncode == 0 and "reused all " in r.stderr
    summary = json.loads((tmp_path / "s.json").read_text())
    assert summary["resumed"] and summary["documents_per_second"] is None
    assert all(v["reused"] == v["tasks"] for v in summary["stages"].values())


@pytest.mark.slow
def test_ctrl_c_without_a_work_dir_says_nothing_is_kept(tmp_path):
    src = _corpus(tmp_path, _DOCS)
    temp = tmp_path / "temp"
    temp.mkdir()
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src"), "TMPDIR": str(temp)}
    args = [src, *_SLOW, "-o", str(tmp_path / "out.jsonl")]
    code, err, seconds, _ = _interrupt(args, str(temp / ".neardup-work.neardup-*"), env)
    assert code == 130 and seconds < 15.0, (code, seconds, err)
    assert "interrupted; nothing is kept (its work directory was temporary)" in _one_line(err)
    assert (
        not glob.glob(str(temp / ".neardup-work.neardup-*"))
        and not (tmp_path / "out.jsonl").exists()
    )


@pytest.mark.slow
def test_clean_work_dir_removes_only_what_the_run_wrote_and_only_after_a_success(tmp_path):
    src = _corpus(tmp_path, 300)
    work = tmp_path / "work"
    args = [src, "--shard-docs", "100", "--work-dir", str(work), "-o", str(tmp_path / "o.jsonl")]
    r = _cli(*args, "--clean-work-dir")
    assert r.returncode == 0, r.stderr
    assert not work.exists() and (tmp_path / "o.jsonl").exists()
    assert f"work dir         {work} removed (--clean-work-dir)" in r.stderr
    # a file of the user's in the work directory: it stays, and the directory with it
    r = _cli(*args)
    assert r.returncode == 0 and (work / "manifest.json").exists()
    (work / "notes.txt").write_text("mine\n")
    r = _cli(*args, "--clean-work-dir")
    assert r.returncode == 0, r.stderr
    assert [p.name for p in work.iterdir()] == ["notes.txt"]
    assert (work / "notes.txt").read_text() == "mine\n"
    assert "kept for what else it holds (notes.txt)" in r.stderr
    # a run that fails keeps its work directory
    (work / "notes.txt").unlink()
    work.rmdir()
    with open(src, "a") as f:
        f.write("{not json\n")
    r = _cli(*args, "--clean-work-dir")
    assert r.returncode == 2 and "in.jsonl:301" in r.stderr
    assert (work / "manifest.json").exists() and (work / "scan").is_dir()
    # without a work directory of its own, the option is refused in one line
    r = _cli(src, "--clean-work-dir", "-o", str(tmp_path / "x.jsonl"))
    assert r.returncode == 2 and "--clean-work-dir needs --work-dir DIR" in _one_line(r.stderr)


def test_resumed_stage_progress_rates_count_only_the_tasks_run():
    p = TaskProgress("neardup dedup", "none")
    p.documents = 1000
    p.reused["verify"] = 8
    p("verify", 0, 10)
    assert p.line(8, 10, 0.001) == "verify 8/10 tasks (8 reused)"  # no rate, no ETA
    assert p.line(9, 10, 1.0) == "verify 9/10 tasks (8 reused), 100 documents/s, ETA 0:01"
    p("scan", 0, 4)
    assert p.line(2, 4, 2.0) == "scan 2/4 tasks, 250 documents/s, ETA 0:02"


def test_shards_spread_over_a_cluster_s_slots_unless_given(tmp_path):
    src = InputPath(_corpus(tmp_path, 4000))
    assert len(build_plan(src, work_dir=tmp_path / "w").shards) == 1  # one process: as before
    spreads = build_plan(src, client=True, slots=2)
    assert 3 <= len(spreads.shards) <= 5 and spreads.shard_docs == 1000  # 2 a slot
    given = build_plan(src, client=True, slots=2, shard_docs=2500)
    assert len(given.shards) == 2 and given.shard_docs == 2500
    assert spread(250_000, 100_000, 2) == 25_000  # the budget's size bounds it above,
    assert spread(20_000, 100_000, 2) == 20_000
    assert spread(250_000, 10, 8) == MIN_SPREAD_DOCS  # and tiny inputs are not cut up


@pytest.mark.slow
def test_workers_run_several_shards_and_say_so(tmp_path):
    pytest.importorskip("distributed")
    src = _corpus(tmp_path, 4000)
    r = invoke("neardup", "dedup", src, "-o", str(tmp_path / "a.jsonl"), "--workers", "2",
               text=True)  # fmt: skip
    assert r.returncode == 0, r.stderr
    line = next(x for x in r.stderr.splitlines() if "shards  " in x)
    shards = int(line.split()[3])
    assert shards > 1 and line.endswith(f"{shards} of about {4000 // shards:,} documents, on 2 "
                                        "Dask workers")  # fmt: skip
    r = invoke("neardup", "dedup", src, "-o", str(tmp_path / "b.jsonl"), "--workers", "2",
               "--shard-docs", "2500", text=True)  # fmt: skip
    assert r.returncode == 0, r.stderr
    assert "shards           2 of about 2,000 documents, on 2 Dask workers" in r.stderr
    assert (tmp_path / "a.jsonl").read_bytes() == (tmp_path / "b.jsonl").read_bytes()


def test_a_read_only_url_work_dir_is_refused_in_one_line(tmp_path, monkeypatch):
    """A URL of a scheme fsspec only reads cannot hold a work directory: refused in one line
    before any work (object storage can: tests/test_object_store.py); a ``file://`` URL is the
    local path it names."""
    src = _corpus(tmp_path, 50)
    monkeypatch.chdir(tmp_path)
    r = invoke("neardup", "dedup", src, "-o", str(tmp_path / "o.jsonl"), "--work-dir",
               "https://example.com/w", text=True)  # fmt: skip
    assert r.returncode == 2 and r.stderr.count("\n") == 1, r.stderr
    assert "https://example.com/w: a work directory must be writable: https:// is read-only" in (
        r.stderr
    )
    assert not (tmp_path / "https:").exists() and not (tmp_path / "o.jsonl").exists()
    dedup([InputPath(src)], output=tmp_path / "o.jsonl", work_dir=f"file://{tmp_path}/w")
    assert (tmp_path / "w" / "manifest.json").exists()


def test_ray_options_that_do_not_fit_are_one_line(tmp_path):
    """--ray with Dask's options, or with what does not run on Ray, and executor= where it
    cannot run: refused in one line before anything starts (ray need not be installed)."""
    src = _corpus(tmp_path, 50)
    out = str(tmp_path / "o.jsonl")
    cases = {
        ("--ray", "local", "--scheduler", "tcp://127.0.0.1:1"): "either --ray or --scheduler",
        ("--ray", "auto", "--workers", "2"): "--workers N sets the CPUs of --ray local",
        ("--ray", "local", "--device", "cuda"): "--device cuda does not run on Ray yet",
        ("--ray", "local", "--against", "x.parquet"): "not on Ray: give an index",
    }
    for args, said in cases.items():
        r = invoke("neardup", "dedup", src, "-o", out, *args, text=True)
        assert r.returncode == 2 and r.stderr.count("\n") == 1 and said in r.stderr, r.stderr
    refused = {
        "does not run on executor='ray' yet": dict(data=[InputPath(src)], executor="ray",
                                                   device="cuda"),
        "either client=": dict(data=[InputPath(src)], executor="ray", client=object()),
        "executor= must be 'local', 'ray'": dict(data=[InputPath(src)], executor="spark"),
    }  # fmt: skip
    for said, kw in refused.items():
        with pytest.raises(ValueError, match=said):
            dedup(kw.pop("data"), **kw)
    assert not os.path.exists(out)

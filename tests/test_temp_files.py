"""Temporary files of a run: a full temporary directory is one line naming it and how to choose
another (--temp-dir); what a run killed outright (SIGKILL) staged or kept in its work directory
is recognised and removed by a later run or by `neardup clean`, and nothing else ever is."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

import numpy as np
import pytest
from cli import invoke
from servers import small_tmpfs

from neardup.io.leftovers import find_leftovers, temp_prefix


def _corpus(path, n: int = 1500) -> str:
    rng = np.random.default_rng(12)
    words = [f"w{i}" for i in range(5000)]
    with open(path, "w") as f:
        for i in range(n):
            text = " ".join(rng.choice(words, 80).tolist())
            f.write(json.dumps({"id": i, "text": text}) + "\n")
    return str(path)


@pytest.fixture
def tiny_tmpfs(tmp_path):
    """A 64 KiB tmpfs (root only): a real full disk."""
    with small_tmpfs(tmp_path / "tiny", "64k") as where:
        yield str(where)


def test_a_full_spool_disk_names_the_directory_and_temp_dir(tmp_path, tiny_tmpfs):
    """It was `neardup: error: 390702 requested and 249856 written`."""
    src = _corpus(tmp_path / "c.jsonl")
    out = tmp_path / "kept.jsonl"
    r = invoke("neardup", "dedup", src, "-o", str(out), "-q", "--temp-dir", tiny_tmpfs, text=True)
    assert r.returncode == 2, r.stderr
    assert r.stderr.count("\n") == 1 and "Traceback" not in r.stderr
    assert r.stderr.startswith(f"neardup: error: {tiny_tmpfs}: the temporary directory is full")
    assert "--temp-dir" in r.stderr and "TMPDIR" in r.stderr
    assert not out.exists() and os.listdir(tiny_tmpfs) == []
    # the same run with room: done
    room = tmp_path / "room"
    room.mkdir()
    r = invoke("neardup", "dedup", src, "-o", str(out), "-q", "--temp-dir", str(room), text=True)
    assert r.returncode == 0, r.stderr
    assert out.exists() and os.listdir(room) == []


_KILLED_DEDUP = """
import dataclasses, sys, time, neardup
import neardup.pipeline.staged as staged
from neardup.pipeline.stage_table import STAGES
where, src, out, spool = sys.argv[1:]
def stop(*a, **k):  # killed here: the work directory, or also a staged output, exists
    print("stopped", flush=True)
    time.sleep(600)
if where == "spool":
    STAGES["decide-all"] = dataclasses.replace(STAGES["decide-all"], fn=stop)
else:
    staged.build_result = stop
neardup.dedup(src, output=out + "/kept.jsonl", clusters=out + "/clusters.jsonl", temp_dir=spool)
"""


def _killed_runs(src, out_dir, spool_dir) -> set[int]:
    """Two dedups SIGKILLed, one while its work directory holds its shingle keys, one while it
    stages its outputs: their pids."""
    pids = set()
    for where in ("write", "spool"):  # (a spool removes the spools of killed runs)
        p = subprocess.Popen(
            [sys.executable, "-c", _KILLED_DEDUP, where, src, str(out_dir), str(spool_dir)],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        )  # fmt: skip
        line = p.stdout.readline()
        p.send_signal(signal.SIGKILL)
        _, err = p.communicate()
        assert line == b"stopped\n", err.decode()
        pids.add(p.pid)
    return pids


@pytest.mark.slow
def test_a_later_run_removes_what_a_killed_run_left_and_nothing_else(tmp_path):
    src = _corpus(tmp_path / "c.jsonl", 200)
    out_dir, spool_dir = tmp_path / "out", tmp_path / "spool"
    out_dir.mkdir()
    spool_dir.mkdir()
    # files a user named, some close to the pattern: never touched
    mine = [".kept.jsonl.tmp", ".x.neardup-abc-1-zz.tmp", "kept.jsonl.neardup-1-2.tmp",
            temp_prefix("alive") + "abc.tmp", ".y.neardup-000000-999999999-ab.tmp"]  # fmt: skip
    for name in mine:
        (out_dir / name).write_text("mine")
    pids = _killed_runs(src, out_dir, spool_dir)
    left = find_leftovers(out_dir) + find_leftovers(spool_dir)
    assert {x.name for x in left} == {"kept.jsonl", "clusters.jsonl", "neardup-work"}, left
    assert {x.pid for x in left} == pids
    # (the corpus has no near-duplicates: its clusters file is empty)
    assert all(x.size > 0 for x in left if x.name != "clusters.jsonl"), left
    # a later run in the same directories removes them, and only them
    r = invoke("neardup", "dedup", src, "-o", str(out_dir / "kept.jsonl"), "-q",
               "--temp-dir", str(spool_dir), text=True)  # fmt: skip
    assert r.returncode == 0, r.stderr
    assert sorted(os.listdir(out_dir)) == sorted([*mine, "kept.jsonl"])
    assert os.listdir(spool_dir) == []


@pytest.mark.slow
def test_neardup_clean_lists_and_removes_leftovers(tmp_path):
    src = _corpus(tmp_path / "c.jsonl", 200)
    out_dir, spool_dir = tmp_path / "out", tmp_path / "spool"
    out_dir.mkdir()
    spool_dir.mkdir()
    (out_dir / "notes.txt").write_text("mine")
    pids = _killed_runs(src, out_dir, spool_dir)
    before = sorted(os.listdir(out_dir))
    r = invoke("neardup", "clean", "--dry-run", str(out_dir), str(spool_dir), text=True)
    assert r.returncode == 0, r.stderr
    assert all(f"left by process {pid}" in r.stdout for pid in pids), r.stdout
    assert r.stdout.count("\n") == 3
    assert sorted(os.listdir(out_dir)) == before
    r = invoke("neardup", "clean", str(out_dir), str(spool_dir), text=True)
    assert r.returncode == 0, r.stderr
    assert "removed" in r.stdout
    assert os.listdir(out_dir) == ["notes.txt"] and os.listdir(spool_dir) == []
    r = invoke("neardup", "clean", str(out_dir), text=True)
    assert r.returncode == 0 and "nothing to remove" in r.stdout


def _pid_like_names() -> list[str]:
    """Names of the leftover pattern (this machine's) whose pid no process can have: over
    2**31 (``os.kill`` overflows), over 2**32, just over Linux's largest pid (2**22)."""
    host = temp_prefix("x").split("neardup-")[1].split("-")[0]
    return [f".k.neardup-{host}-{pid}-a.tmp" for pid in (2147483648, 9999999999, 4194305)]


def test_a_name_with_an_impossible_pid_is_left_alone_and_crashes_nothing(tmp_path):
    """It was `OverflowError: signed integer is greater than maximum`, exit 1, from every dedup
    writing there and from `neardup clean`."""
    src = _corpus(tmp_path / "c.jsonl", 50)
    out_dir, spool_dir = tmp_path / "out", tmp_path / "spool"
    out_dir.mkdir()
    spool_dir.mkdir()
    names = _pid_like_names()
    for d in (out_dir, spool_dir):
        for name in names:
            (d / name).write_text("mine")
    assert find_leftovers(out_dir) == []
    r = invoke("neardup", "dedup", src, "-o", str(out_dir / "kept.jsonl"), "-q",
               "--temp-dir", str(spool_dir), text=True)  # fmt: skip
    assert r.returncode == 0, r.stderr
    r = invoke("neardup", "clean", str(out_dir), str(spool_dir), text=True)
    assert r.returncode == 0, r.stderr
    assert "nothing to remove" in r.stdout
    assert sorted(os.listdir(out_dir)) == sorted([*names, "kept.jsonl"])
    assert sorted(os.listdir(spool_dir)) == sorted(names)


# -- the work directory of a staged run --------------------------------------------------------

_SRC = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "src")
_DEDUP = [sys.executable, "-c", "from neardup.cli.main import main; main()", "dedup"]


def _env(tmpdir) -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": _SRC, "TMPDIR": str(tmpdir)}


def _kill_staged_run(src: str, out: str, tmpdir) -> tuple[int, list[str]]:
    """A staged dedup (no --work-dir) SIGKILLed once its work directory in ``tmpdir`` holds a
    stage: its pid and the work directories it left."""
    p = subprocess.Popen([*_DEDUP, src, "-o", out, "--shard-docs", "200", "--threads", "1", "-q"],
                         env=_env(tmpdir), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)  # fmt: skip
    work: list[str] = []
    deadline = time.monotonic() + 300
    while not work and p.poll() is None and time.monotonic() < deadline:
        work = [n for n in os.listdir(tmpdir) if "neardup-work" in n
                and os.path.isdir(os.path.join(tmpdir, n, "scan"))]  # fmt: skip
        time.sleep(0.01)
    p.send_signal(signal.SIGKILL)
    _, err = p.communicate()
    assert work, f"the run ended before its work directory was made: {err.decode()}"
    assert not os.path.exists(out)
    return p.pid, work


@pytest.mark.slow
def test_the_work_directory_of_a_killed_staged_run_is_removed_later(tmp_path):
    """It stayed as `$TMPDIR/neardup-work-XXXX` (3.6 GB in one trial): no later run and no
    `neardup clean` knew it."""
    src = _corpus(tmp_path / "c.jsonl", 1000)
    tmpdir = tmp_path / "tmp"
    tmpdir.mkdir()
    # a user's look-alikes: the old name, another machine's, a process that runs (this one)
    mine = ["neardup-work-abc", ".neardup-work.neardup-000000-1-abc.tmp",
            temp_prefix("neardup-work") + "abc.tmp"]  # fmt: skip
    for name in mine:
        (tmpdir / name).mkdir()
        (tmpdir / name / "f").write_text("mine")
    pid, work = _kill_staged_run(src, str(tmp_path / "a.jsonl"), tmpdir)
    assert [(x.pid, x.name, x.is_dir) for x in find_leftovers(tmpdir)] == [
        (pid, "neardup-work", True)
    ]
    # the next staged run removes it, and only it
    r = subprocess.run([*_DEDUP, src, "-o", str(tmp_path / "b.jsonl"), "--shard-docs", "200",
                        "-q"], env=_env(tmpdir), capture_output=True, text=True)  # fmt: skip
    assert r.returncode == 0, r.stderr
    assert sorted(os.listdir(tmpdir)) == sorted(mine)
    # so does `neardup clean` (by default in TMPDIR)
    pid, work = _kill_staged_run(src, str(tmp_path / "c.jsonl.out"), tmpdir)
    clean = [sys.executable, "-c", "from neardup.cli.main import main; main()", "clean"]
    r = subprocess.run(clean, env=_env(tmpdir), cwd=tmp_path, capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    assert f"removed {tmpdir / work[0]} (directory" in r.stdout
    assert f"left by process {pid}: neardup-work" in r.stdout
    assert sorted(os.listdir(tmpdir)) == sorted(mine)
    assert all((tmpdir / name / "f").read_text() == "mine" for name in mine)


# -- the index's temporary files ---------------------------------------------------------------


def _index_files(path) -> tuple[list[str], set[str]]:
    """The files in the index directory ``path``, and those its manifest names (with MANIFEST
    and LOCK)."""
    from neardup.index.storage import read_manifest, referenced_files

    return sorted(os.listdir(path)), referenced_files(read_manifest(str(path))) | {
        "MANIFEST",
        "LOCK",
    }


def test_a_background_merge_on_a_full_disk_leaves_no_file(tmp_path):
    """It left its `.npy.tmp` file (and the merged run's files written before) in the index."""
    from neardup import Index

    rng = np.random.default_rng(5)
    with small_tmpfs(tmp_path / "disk", "2m") as disk:
        ix = Index.create(disk / "ix", distance=3, blocks=5)
        ix.merge_factor = 100  # no merge yet: three runs
        runs = [rng.integers(0, 2**64, 4000, dtype=np.uint64) for _ in range(3)]
        for fps in runs:
            ix.add(fps)
        free = os.statvfs(disk)
        (disk / "filler").write_bytes(b"\0" * (free.f_bavail * free.f_frsize - (640 << 10)))
        ix.merge_factor, ix.background_merges = 2, True
        ix.add(rng.integers(0, 2**64, 4000, dtype=np.uint64))  # a run fits; their merge not
        with pytest.raises(OSError, match="a background merge failed.*No space left"):
            ix.wait_merges()
        names, named = _index_files(disk / "ix")
        assert set(names) == named, sorted(set(names) - named)
        ix.close()
        with Index.open(disk / "ix") as r:
            assert len(r) == 16000
            r.verify()


_ADDING = """
import sys, numpy as np
from neardup import Index
ix = Index.open(sys.argv[1], mode="w")
rng = np.random.default_rng(3)
print("open", flush=True)
while True:
    ix.add(rng.integers(0, 2**64, 300_000, dtype=np.uint64))
"""


def _kill_writer(path, tmpdir) -> tuple[int, set[str]]:
    """A process adding to the index at ``path`` SIGKILLed while it writes a temporary file
    there: its pid and the leftovers it left (tried again, up to 3 times, when the file was
    renamed just before the kill)."""
    for _ in range(3):
        p = subprocess.Popen([sys.executable, "-c", _ADDING, str(path)], env=_env(tmpdir),
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE)  # fmt: skip
        assert p.stdout.readline() == b"open\n", p.stderr.read().decode()
        deadline, tmp = time.monotonic() + 120, []
        while not tmp and p.poll() is None and time.monotonic() < deadline:
            tmp = [n for n in os.listdir(path) if n.endswith(".tmp")]
        p.send_signal(signal.SIGKILL)
        _, err = p.communicate()
        assert tmp, f"no temporary file seen: {err.decode()}"
        left = {x.name for x in find_leftovers(path) if x.pid == p.pid}
        if left:
            return p.pid, left
    raise AssertionError(f"no leftover after 3 kills: {sorted(os.listdir(path))}")


@pytest.mark.slow
def test_the_temporary_files_of_a_killed_index_writer_are_known_as_leftovers(tmp_path):
    from neardup import Index

    path = tmp_path / "ix"
    Index.create(path, distance=3, blocks=5).close()
    pid, left = _kill_writer(path, tmp_path)
    assert all(n.startswith("s000") and n.endswith(".npy") for n in left), left
    r = invoke("neardup", "clean", "--dry-run", str(path), text=True)
    assert r.returncode == 0 and f"left by process {pid}" in r.stdout, r.stdout
    # the next writer removes them (and neardup clean would)
    with Index.open(path, mode="w") as ix:
        n = len(ix)
        names, named = _index_files(path)
        assert set(names) == named, sorted(set(names) - named)
    with Index.open(path) as r:
        assert len(r) == n and n % 300_000 == 0
        r.verify()


# -- a small run's work directory in memory ------------------------------------------------------


@pytest.mark.skipif(not os.path.isdir("/dev/shm"), reason="no memory file system here")
def test_a_small_run_keeps_its_work_directory_in_memory_unless_a_temp_dir_is_chosen(
    tmp_path, monkeypatch
):
    """A small run on this process's threads works in /dev/shm, and leaves nothing there; a
    run too large for its share, one on a cluster, or one given TMPDIR or temp_dir= does not."""
    import tempfile

    import neardup
    from neardup.io.rows import MemoryRows
    from neardup.pipeline import plan as plan_module
    from neardup.pipeline.plan import MEMORY_FS, build_plan

    for var in ("TMPDIR", "TEMP", "TMP"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setattr(tempfile, "tempdir", "/tmp")  # the platform's default
    texts = [f"text number {i} of a small run, some words {i % 7}" for i in range(300)]
    # in-memory data keeps its work in the process's memory (test_a_small_in_memory_run_...)
    assert build_plan(MemoryRows(texts)).work_in_memory
    assert build_plan(MemoryRows(texts)).temp_in_memory
    assert build_plan(MemoryRows(texts), temp_dir=tmp_path).temp_dir == str(tmp_path)
    monkeypatch.setattr(plan_module, "MEMORY_STORE_BYTES", 1000)  # larger: in /dev/shm
    larger = build_plan(MemoryRows(texts))
    assert not larger.work_in_memory and larger.temp_dir == MEMORY_FS and larger.temp_in_memory
    monkeypatch.setattr(plan_module, "MEMORY_STORE_BYTES", 8 << 20)
    src = tmp_path / "in.jsonl"
    src.write_text("".join(json.dumps({"id": i, "text": t}) + "\n" for i, t in enumerate(texts)))
    assert build_plan(src).temp_in_memory
    # too large for its share: of the budget (a 16th), or of the bytes allowed
    assert not build_plan(MemoryRows(texts), memory=16 * 1024).temp_in_memory
    monkeypatch.setattr(plan_module, "MEMORY_WORK_BYTES", 1000)
    assert not build_plan(src).temp_in_memory
    monkeypatch.undo()
    for var in ("TMPDIR", "TEMP", "TMP"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setattr(tempfile, "tempdir", "/tmp")
    assert not build_plan(MemoryRows(texts), client=True).temp_in_memory
    assert not build_plan(MemoryRows(texts), temp_dir=tmp_path).temp_in_memory
    before = set(os.listdir(MEMORY_FS))
    s = neardup.dedup(src, collect=False).summary()
    assert s["temp_in_memory"] and s["temp_bytes"] > 0
    assert set(os.listdir(MEMORY_FS)) <= before  # nothing of the run left there
    monkeypatch.setenv("TMPDIR", str(tmp_path))  # a temporary directory chosen: it is used
    assert not build_plan(src).temp_in_memory
    assert "temp_in_memory" not in neardup.dedup(src, collect=False).summary()
    clean = [sys.executable, "-c", "from neardup.cli.main import main; main()", "clean", "-n"]
    r = subprocess.run(clean, cwd=tmp_path, capture_output=True, text=True)  # (TMPDIR: tmp_path)
    # it looks in the memory file system too (a killed run's leftovers there are named)
    looked = f"{tmp_path}, {MEMORY_FS}, ." in r.stdout or f"would remove {MEMORY_FS}/" in r.stdout
    assert r.returncode == 0 and looked, r.stdout


def test_a_small_in_memory_run_keeps_its_work_in_the_process_memory(tmp_path, monkeypatch):
    """Five texts in a list (and a DataFrame with outputs) run their stages with no file made
    for their work: the temporary directory named does not even exist. The results, outputs
    and summary are those of the same run working in files (temp_dir=), verified and not;
    in-memory data too large for its share works in files."""
    import tempfile

    import pandas as pd

    import neardup
    from neardup.io.rows import MemoryRows
    from neardup.pipeline.plan import build_plan

    texts = ["the quick brown fox jumps over the lazy dog"] * 3 + [
        "hello world this is a small test of the work store",
        "hello world this is a small test of the work store!",
        "something else entirely, with no near copy at all",
    ]
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path / "missing"))  # no file can be made
    frame = pd.DataFrame({"text": texts, "id": list("abcdef")})
    for verify in (True, False):
        mem = neardup.dedup(texts, verify=verify)
        outs = {
            k: tmp_path / f"{k}-{verify}.out" for k in ("clusters", "drop_list", "json_summary")
        }
        neardup.dedup(frame, verify=verify, **outs)
        assert not (tmp_path / "missing").exists()
        files = neardup.dedup(texts, verify=verify, temp_dir=tmp_path)
        assert mem.kept.tolist() == files.kept.tolist() == [True, False, False, True, False, True]
        assert mem.clusters.to_pylist() == files.clusters.to_pylist() != []
        assert mem.n_dropped == 3 and mem.summary()["temp_in_memory"]
        assert mem.temp_bytes > 0 and mem.summary()["temp_bytes"] == mem.temp_bytes
        other = {k: tmp_path / f"{k}-{verify}.files" for k in outs}
        neardup.dedup(frame, verify=verify, temp_dir=tmp_path, **other)
        for k in ("clusters", "drop_list"):
            assert outs[k].read_bytes() == other[k].read_bytes() != b""
        assert json.loads(outs["json_summary"].read_text())["dropped"] == mem.n_dropped
    assert [n for n in os.listdir(tmp_path) if n.startswith("neardup")] == []
    # in-memory data estimated over its share works in files (test above: /dev/shm or TMPDIR)
    assert not build_plan(MemoryRows(texts), memory=16 * 1024).work_in_memory


def test_a_memory_store_holds_its_files_for_the_run_only():
    """A memory store's files are arrays and bytes for as long as the block lasts; its root
    names no file (a path of it reaching the file system fails), and once the block ends its
    paths are not found."""
    import numpy as np

    from neardup.pipeline import store

    with store.memory_store() as root:
        a = np.arange(10, dtype=np.int64)
        task = os.path.join(root, "scan", "0.tmp-x")
        assert store.save_array(os.path.join(task, "fp.npy"), a) == 80
        a[0] = 99  # the store kept its own copy
        with store.create(os.path.join(task, "ids.pkl")) as f:
            f.write(b"abc")
        assert store.sizes(task) == {"fp.npy": 80, "ids.pkl": 3}
        store.move(task, os.path.join(root, "scan", "0"))
        assert store.sizes(task) == {}
        got = store.load_array(os.path.join(root, "scan", "0", "fp.npy"))
        assert got.tolist() == list(range(10)) and not got.flags.writeable
        with store.open_bytes(os.path.join(root, "scan", "0", "ids.pkl")) as f:
            assert f.read() == b"abc" and store.file_size(f) == 3
        with pytest.raises(FileNotFoundError, match="no file 'bad.npy'"):
            store.load_array(os.path.join(root, "scan", "0", "bad.npy"))
        with pytest.raises(ValueError, match="null"):
            open(os.path.join(root, "scan", "0", "ids.pkl"), "rb")
        store.remove(os.path.join(root, "scan"))
        assert store.sizes(root) == {}
    with pytest.raises(FileNotFoundError, match="memory store has ended"):
        store.load_array(os.path.join(root, "scan", "0", "fp.npy"))

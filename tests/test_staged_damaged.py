"""A damaged work directory (a part missing, cut short, emptied, garbled or with a byte changed,
a task's result or the manifest unreadable) stops a resumed run with one line naming the file,
commits nothing and is never read as empty; an input rewritten since, even to the same size and
modification time, is refused; a second run on a busy work directory is refused."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import naive
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from neardup import dedup
from neardup.errors import InputError
from neardup.io.sources import InputPath

ROOT = Path(__file__).resolve().parents[1]


def _corpus(tmp_path: Path) -> Path:
    docs = naive.text_families(300, seed=3, vocab=120, words=(15, 30))
    path = tmp_path / "in.jsonl"
    path.write_text("".join(json.dumps({"id": f"d{i}", "text": t}) + "\n"
                            for i, t in enumerate(docs)))  # fmt: skip
    return path


def _run(src: Path, work: Path, out: Path, **kw) -> object:
    return dedup([InputPath(src)], shard_docs=60, threads=1, work_dir=work, output=out,
                 drop_list=out.with_suffix(".drop"), clusters=out.with_suffix(".cl"), **kw)  # fmt: skip


def _cut(path: Path, keep: int = 5) -> None:
    path.write_bytes(path.read_bytes()[:keep])


def _garble(path: Path) -> None:
    path.write_bytes(b"\x00garbage" * 3)


def _empty(path: Path) -> None:
    assert path.stat().st_size > 0, path
    path.write_bytes(b"")


def _flip(path: Path) -> None:
    """One byte near the end changed: the same size, other values."""
    data = bytearray(path.read_bytes())
    assert data, path
    data[-2] ^= 0x01
    path.write_bytes(bytes(data))


def _other_id(path: Path) -> None:
    """One id of a shard's id list changed to another of the same length."""
    data = path.read_bytes()
    assert b"d130" in data, path
    path.write_bytes(data.replace(b"d130", b"x130", 1))


def _json_list(path: Path) -> None:
    path.write_text("[]")


# (what to damage, how, the stage whose tasks are run again so that they read it)
CASES = [
    ("write/1/kept.bin", _cut, None),
    ("write/2/kept.bin", Path.unlink, None),
    ("write/0/drop.txt", Path.unlink, None),
    ("write/3/clusters.jsonl", Path.unlink, None),
    ("decide/0/done.json", _garble, None),
    ("scan/1/rec.npy", _cut, "write"),
    ("scan/2/ids.pkl", _garble, "write"),
    ("scan/0/keys.u32", _cut, "verify"),
    ("decide/0/drop.npy", Path.unlink, "write"),
    # the same size or emptied: found by the size and checksum each task records
    ("write/0/drop.txt", _empty, None),
    ("write/3/clusters.jsonl", _cut, None),
    ("write/1/kept.bin", _flip, None),
    ("write/4/clusters.jsonl", _flip, None),
    ("scan/1/rec.npy", _flip, "write"),
    ("scan/2/ids.pkl", _other_id, "write"),
    ("scan/0/keys.u32", _flip, "verify"),
    ("decide/0/surv.npy", _flip, "write"),
    ("decide/0/done.json", _json_list, None),
]


@pytest.mark.parametrize(
    ("name", "damage", "redo"), CASES, ids=[f"{c[0]}-{c[1].__name__}" for c in CASES]
)
def test_a_damaged_work_dir_is_named_and_nothing_is_committed(tmp_path, name, damage, redo):
    src, work, out = _corpus(tmp_path), tmp_path / "work", tmp_path / "out.jsonl"
    _run(src, work, out)
    outs = [out, out.with_suffix(".drop"), out.with_suffix(".cl")]
    ref = [p.read_bytes() for p in outs]
    for p in outs:
        p.unlink()
    damage(work / name)
    if redo is not None:
        shutil.rmtree(work / redo)
    with pytest.raises(InputError) as e:
        _run(src, work, out)
    assert str(work / name) in str(e.value)
    assert "the work directory is damaged" in str(e.value)
    assert not any(p.exists() for p in outs)
    _run(src, tmp_path / "work2", out)  # a new work directory gives the run its outputs
    assert [p.read_bytes() for p in outs] == ref


@pytest.mark.slow
def test_a_damaged_work_dir_is_one_line_on_the_command_line(tmp_path):
    src, work = _corpus(tmp_path), tmp_path / "work"
    args = [str(src), "--shard-docs", "60", "--work-dir", str(work), "-q"]
    cmd = [sys.executable, "-c", "from neardup.cli.main import main; main()", "dedup"]
    out = tmp_path / "out.jsonl"
    r = subprocess.run([*cmd, *args, "-o", str(out)], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    out.unlink()
    _cut(work / "write" / "0" / "kept.bin")
    r = subprocess.run([*cmd, *args, "-o", str(out)], capture_output=True, text=True)
    assert r.returncode != 0
    assert "Traceback" not in r.stderr
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and "kept.bin" in lines[0] and "damaged" in lines[0], r.stderr
    assert not out.exists()


@pytest.mark.parametrize("damage", [_cut, Path.unlink, "rows"])
def test_a_damaged_parquet_part_is_named(tmp_path, damage):
    n = 200
    table = pa.table({"id": [f"d{i}" for i in range(n)],
                      "text": [f"words {i % 40} and more words {i % 40}" for i in range(n)]})  # fmt: skip
    src = tmp_path / "in.parquet"
    pq.write_table(table, src, row_group_size=50)
    work, out = tmp_path / "work", tmp_path / "out.parquet"
    kw = dict(shard_docs=50, threads=1, work_dir=work)
    dedup([InputPath(src)], output=out, **kw)
    out.unlink()
    part = work / "write" / "0" / "kept.parquet"
    if damage == "rows":  # a whole Parquet file of the same size, with fewer rows
        kept = pq.read_table(part)
        size = part.stat().st_size
        pq.write_table(kept.slice(1), part)
        with part.open("ab") as f:
            f.write(b"\0" * max(0, size - part.stat().st_size))
        if part.stat().st_size != size:
            pytest.skip("the shorter part came out larger")
    else:
        damage(part)
    with pytest.raises(InputError, match="the work directory is damaged") as e:
        dedup([InputPath(src)], output=out, **kw)
    assert str(part) in str(e.value)
    assert not out.exists()


@pytest.mark.parametrize("damage", [_cut, Path.unlink])
def test_a_damaged_cluster_part_stops_the_report(tmp_path, damage):
    """The report reads the shards' cluster parts: one cut short or missing is named, and
    neither the report nor the other outputs are committed."""
    from neardup.pipeline.report import ReportOutput

    src, work, out = _corpus(tmp_path), tmp_path / "work", tmp_path / "out.jsonl"
    report = tmp_path / "r.html"

    def run() -> None:
        dedup([InputPath(src)], shard_docs=60, threads=1, work_dir=work, output=out,
              extra_outputs=[ReportOutput(report, str(src))], collect=False)  # fmt: skip

    run()
    out.unlink()
    report.unlink()
    part = next(p for p in sorted((work / "write").glob("*/clusters.jsonl")) if p.stat().st_size)
    damage(part)
    with pytest.raises(InputError, match="the work directory is damaged") as e:
        run()
    assert str(part) in str(e.value)
    assert not out.exists() and not report.exists()


def _cli(*args: str, **kw) -> subprocess.CompletedProcess:
    cmd = [sys.executable, "-c", "from neardup.cli.main import main; main()", "dedup", *args]
    return subprocess.run(cmd, capture_output=True, text=True, **kw)


@pytest.mark.parametrize("value", ["[]", '"work"', "3", "null"])
def test_a_manifest_that_is_no_json_object_is_one_line(tmp_path, value):
    src, work, out = _corpus(tmp_path), tmp_path / "work", tmp_path / "out.jsonl"
    work.mkdir()
    (work / "manifest.json").write_text(value + "\n")
    with pytest.raises(InputError, match="the work directory is damaged") as e:
        _run(src, work, out)
    assert str(work / "manifest.json") in str(e.value)
    assert not out.exists() and (work / "manifest.json").read_text() == value + "\n"
    if value == "[]":  # on the command line: one line, exit status 2
        r = _cli(str(src), "-o", str(out), "--work-dir", str(work), "-q")
        assert r.returncode == 2 and "Traceback" not in r.stderr, r.stderr
        lines = r.stderr.strip().splitlines()
        assert len(lines) == 1 and str(work / "manifest.json") in lines[0], r.stderr
        assert not out.exists()


def test_an_input_rewritten_to_the_same_size_and_time_is_refused(tmp_path):
    """A record rewritten to the same length, its modification time put back (``cp -p``,
    ``rsync -t``, ``touch -r``): the work directory's stamp of the input (device, inode, size,
    times, status-change time included) no longer matches."""
    import os

    src, work, out = _corpus(tmp_path), tmp_path / "work", tmp_path / "out.jsonl"
    _run(src, work, out)
    before = os.stat(src)
    lines = src.read_bytes().splitlines(keepends=True)
    lines[7] = lines[7].replace(b"d7", b"x7", 1)
    fresh = tmp_path / "fresh.jsonl"
    fresh.write_bytes(b"".join(lines))
    os.replace(fresh, src)  # as rsync does: another inode, the same size, the time put back
    os.utime(src, ns=(before.st_atime_ns, before.st_mtime_ns))
    assert src.stat().st_size == before.st_size
    assert src.stat().st_mtime_ns == before.st_mtime_ns
    out.unlink()
    with pytest.raises(InputError, match="inputs that changed"):
        _run(src, work, out)
    assert not out.exists()
    # rewritten in place (the same inode), the time put back: the status-change time differs
    work2 = tmp_path / "work2"
    _run(src, work2, out)
    out.unlink()
    stat = os.stat(src)
    with open(src, "r+b") as f:
        f.seek(lines[7].index(b"x7") + sum(map(len, lines[:7])))
        f.write(b"y")
    os.utime(src, ns=(stat.st_atime_ns, stat.st_mtime_ns))
    with pytest.raises(InputError, match="inputs that changed"):
        _run(src, work2, out)
    assert not out.exists()


@pytest.mark.slow
def test_a_second_run_on_a_busy_work_dir_is_refused(tmp_path):
    """Two runs on one fresh work directory: the second is refused in one line naming the
    first's pid, and the first ends as if alone."""
    import time

    docs = naive.text_families(2500, seed=4, vocab=150, words=(15, 30))
    src = tmp_path / "in.jsonl"
    src.write_text("".join(json.dumps({"id": f"d{i}", "text": t}) + "\n"
                           for i, t in enumerate(docs)))  # fmt: skip
    work = tmp_path / "work"
    cmd = [sys.executable, "-c", "from neardup.cli.main import main; main()", "dedup"]
    args = [str(src), "--shard-docs", "500", "--threads", "1", "--work-dir", str(work), "-q"]
    # the first writes its kept records to a pipe read only once the second has run: it
    # holds the work directory until then (its output is larger than a pipe holds)
    args += ["-o", "-"]  # the same command each time (its outputs are part of it)
    first = subprocess.Popen([*cmd, *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        deadline = time.monotonic() + 300
        while not (work / "manifest.json").exists() and first.poll() is None:
            assert time.monotonic() < deadline, "the first run made no work directory"
            time.sleep(0.05)
        second = _cli(*args)
    finally:
        kept, err = first.communicate(timeout=600)
    assert first.returncode == 0, err
    assert second.returncode == 2, second.stderr
    lines = second.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in second.stderr, second.stderr
    assert f"in use by another neardup run (pid {first.pid})" in lines[0], lines[0]
    assert str(work) in lines[0] and second.stdout == ""
    assert len(kept) > 1 << 17
    again = _cli(*args)  # then the directory is free, and the run resumes from it
    assert again.returncode == 0, again.stderr
    assert again.stdout.encode() == kept


def _files(out: str, names: list[str], byte: bytes) -> dict[str, int]:
    for name in names:
        Path(out, name).write_bytes(byte * 100)
    return {"n": len(names)}


def _never(out: str) -> None:
    raise AssertionError("a finished task was run again")


@pytest.mark.parametrize("stop_at", range(5))
def test_a_move_of_task_files_stopped_midway_is_completed(tmp_path, monkeypatch, stop_at):
    """The dedup-ids stage's files move over the scan's (:func:`replace_files`: two records
    rewritten, two files moved, a record rewritten, each step a rename): a run stopped before
    rename ``stop_at`` finds both tasks whole when run again (either version of a file accepted
    while they move) and completes the move; then only the new version is."""
    import os

    from neardup.pipeline import workdir
    from neardup.pipeline.executors import run_task

    work = str(tmp_path)
    run_task(work, "scan", "0", _files, ["a", "b", "c"], b"o", sums=True)
    run_task(work, "dedup-ids", "0", _files, ["a", "b"], b"n", sums=True)
    src, dest = tmp_path / "dedup-ids" / "0", tmp_path / "scan" / "0"
    real, renames = os.replace, []

    def stopping(a: str, b: str) -> None:
        if len(renames) == stop_at:
            raise KeyboardInterrupt
        renames.append(a)
        real(a, b)

    monkeypatch.setattr(workdir.os, "replace", stopping)
    with pytest.raises(KeyboardInterrupt):
        workdir.replace_files(str(src), str(dest))
    monkeypatch.setattr(workdir.os, "replace", real)
    assert run_task(work, "scan", "0", _never) == {"n": 3}  # trusted: its files as recorded
    assert run_task(work, "dedup-ids", "0", _never) == {"n": 2}
    workdir.replace_files(str(src), str(dest))
    assert [(dest / n).read_bytes()[:1] for n in "abc"] == [b"n", b"n", b"o"]
    assert sorted(p.name for p in src.iterdir()) == ["done.json"]
    assert "was" not in workdir.read_done(str(dest))
    workdir.replace_files(str(src), str(dest))  # once done, again changes nothing
    assert run_task(work, "scan", "0", _never) == {"n": 3}
    (dest / "a").write_bytes(b"o" * 100)  # the old version, no longer the scan's
    with pytest.raises(InputError, match="the work directory is damaged") as e:
        run_task(work, "scan", "0", _never)
    assert str(dest / "a") in str(e.value)


def test_a_resumed_run_with_repeated_ids_checks_the_moved_spill(tmp_path):
    """Repeated ids across shards: the spill without them replaces the scan's, its records
    with it; a rerun reuses it, and finds a byte changed in it."""
    docs = naive.text_families(300, seed=3, vocab=120, words=(15, 30))
    ids = [f"d{i % 250}" for i in range(300)]  # the last 50 repeat ids of the first shards
    src, work, out = tmp_path / "in.jsonl", tmp_path / "work", tmp_path / "out.jsonl"
    src.write_text("".join(json.dumps({"id": k, "text": t}) + "\n"
                           for k, t in zip(ids, docs, strict=True)))  # fmt: skip
    _run(src, work, out, skip_bad=True)
    outs = [out, out.with_suffix(".drop"), out.with_suffix(".cl")]
    ref = [p.read_bytes() for p in outs]
    fixed = sorted((work / "dedup-ids").glob("*/done.json"))
    assert fixed
    for p in outs:
        p.unlink()
    _run(src, work, out, skip_bad=True)
    assert [p.read_bytes() for p in outs] == ref
    for p in outs:
        p.unlink()
    part = work / "scan" / fixed[0].parent.name / "fp.npy"
    _flip(part)
    shutil.rmtree(work / "write")
    with pytest.raises(InputError, match="the work directory is damaged") as e:
        _run(src, work, out, skip_bad=True)
    assert str(part) in str(e.value) and not any(p.exists() for p in outs)

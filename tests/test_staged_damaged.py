"""A damaged work directory (a part missing, cut short or garbled, a task's result unreadable)
stops a resumed run with one line naming the file, commits nothing and is never read as
empty."""

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
]


@pytest.mark.parametrize(("name", "damage", "redo"), CASES, ids=[c[0] for c in CASES])
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

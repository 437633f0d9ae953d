"""A JSONL or line dedup to a directory output: one file per shard, moved or copied from the
work directory (not through the caller), whose concatenation is the one-file output."""

from __future__ import annotations

from pathlib import Path

import naive
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_staged import _cli, _write

from neardup import dedup
from neardup.io.sources import InputPath
from neardup.pipeline.plan import build_plan
from neardup.pipeline.write import is_directory_output


def _joined(d: Path) -> bytes:
    return b"".join(p.read_bytes() for p in sorted(d.iterdir()))


@pytest.mark.slow
@settings(
    max_examples=10, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(st.integers(1, 40), st.booleans(), st.sampled_from(["jsonl", "lines"]))
def test_directory_output_joins_to_the_one_file_output(
    tmp_path_factory, shard_docs, keep_work, kind
):
    tmp = tmp_path_factory.mktemp("dir")
    docs = naive.text_families(60, seed=shard_docs, vocab=60, words=(6, 14), wordless=0)
    if kind == "jsonl":
        _write(tmp / "in.jsonl", docs)
        src, fmt, ext = [InputPath(tmp / "in.jsonl")], "auto", ".jsonl"
    else:
        (tmp / "in.txt").write_text("\n".join(docs) + "\n")
        src, fmt, ext = [InputPath(tmp / "in.txt")], "lines", ".txt"
    one = dedup(src, fmt=fmt, output=tmp / "one", drop_list=tmp / "one.drop")
    work = {"work_dir": tmp / "work"} if keep_work else {}
    got = dedup(src, fmt=fmt, output=f"{tmp / 'out'}/", drop_list=tmp / "out.drop",
                shard_docs=shard_docs, **work)  # fmt: skip
    assert got.kept.tolist() == one.kept.tolist() and not all(one.kept)
    files = sorted(p.name for p in (tmp / "out").iterdir())
    assert files and all(f.startswith("part-") and f.endswith(ext) for f in files)
    assert _joined(tmp / "out") == (tmp / "one").read_bytes()
    assert (tmp / "out.drop").read_bytes() == (tmp / "one.drop").read_bytes()
    shards = len(build_plan(src, fmt=fmt, shard_docs=shard_docs).shards)
    assert len(files) <= shards  # shards that kept nothing give no file
    if keep_work:  # the parts stay in the work directory for a later run
        assert len(list((tmp / "work" / "write").glob("*/kept.bin"))) == shards


def test_directory_output_runs_staged_and_existing_directory_is_used(tmp_path):
    docs = naive.text_families(50, seed=3, vocab=40, words=(6, 14), wordless=0)
    _write(tmp_path / "in.jsonl", docs)
    src = [InputPath(tmp_path / "in.jsonl")]
    assert is_directory_output(f"{tmp_path / 'new'}/", "jsonl")
    (tmp_path / "empty").mkdir()
    assert is_directory_output(f"{tmp_path / 'empty'}/", "jsonl")
    assert not is_directory_output(tmp_path / "file.jsonl", "jsonl")
    assert not is_directory_output(tmp_path / "empty", "jsonl")  # a file was likely meant
    one = dedup(src, output=tmp_path / "one.jsonl")
    got = dedup(src, output=f"{tmp_path / 'empty'}/")
    assert got.kept.tolist() == one.kept.tolist()
    assert _joined(tmp_path / "empty") == (tmp_path / "one.jsonl").read_bytes()


@pytest.mark.slow
def test_directory_output_refusals_leave_everything_as_it_was(tmp_path):
    docs = naive.text_families(30, seed=4, vocab=40, words=(6, 14), wordless=0)
    _write(tmp_path / "in.jsonl", docs)
    (tmp_path / "full").mkdir()
    (tmp_path / "full" / "mine.txt").write_text("the user's file\n")
    r = _cli(str(tmp_path / "in.jsonl"), "-q", "-o", str(tmp_path / "full") + "/")
    assert r.returncode == 2 and "not empty" in r.stderr
    assert len(r.stderr.strip().splitlines()) == 1
    assert [p.name for p in (tmp_path / "full").iterdir()] == ["mine.txt"]
    r = _cli(str(tmp_path / "in.jsonl"), "-q", "-o", str(tmp_path / "no" / "such") + "/")
    assert r.returncode == 2 and "does not exist" in r.stderr
    # a failure before the commit writes nothing
    with open(tmp_path / "in.jsonl", "a") as f:
        f.write("{not json\n")
    r = _cli(str(tmp_path / "in.jsonl"), "-q", "-o", str(tmp_path / "out") + "/")
    assert r.returncode == 2 and "in.jsonl:31" in r.stderr
    assert not (tmp_path / "out").exists()

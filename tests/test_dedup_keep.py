"""``dedup`` keeping the highest (lowest) value of a field (``keep="max:FIELD"``), and writing
the removed records (``removed=``): one process, stages on threads and on Dask, against
tests/naive.py."""

from __future__ import annotations

import datetime
import json
import os
import warnings
from pathlib import Path

import naive
import pytest
from cli import Result, invoke
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from neardup import dedup
from neardup.errors import InputError
from neardup.io.readers import KEY_DATE, KEY_NUMBER, priority_value
from neardup.io.sources import InputPath

WORDS = ["apple", "berry", "cherry", "date", "elder", "fig", "grape"]
_BASE = datetime.datetime(2024, 3, 1, tzinfo=datetime.timezone.utc)


def _docs(max_docs: int = 24) -> st.SearchStrategy[list[str]]:
    """Documents of a few words of WORDS: near and exact copies likely."""
    doc = st.lists(st.sampled_from(WORDS), min_size=0, max_size=10).map(" ".join)
    return st.lists(doc, min_size=1, max_size=max_docs)


def _write(path: Path, rows: list[dict]) -> list[bytes]:
    lines = [json.dumps(r).encode() + b"\n" for r in rows]
    path.write_bytes(b"".join(lines))
    return lines


def _date(hours: int, zone: int) -> tuple[str, datetime.datetime]:
    """``hours`` after _BASE written in the zone UTC+``zone`` (ISO-8601), and the instant."""
    when = _BASE + datetime.timedelta(hours=hours)
    return when.astimezone(datetime.timezone(datetime.timedelta(hours=zone))).isoformat(), when


def _families(n: int, seed: int) -> list[str]:
    """``n`` texts in families of near and exact copies (tests/naive.py)."""
    return naive.text_families(n, seed, vocab=200, words=(20, 40), members=(2, 5), edits=(0, 2))


def _outs(where: Path, tag: str) -> dict:
    names = ("output", "clusters", "drop_list", "removed")
    return {k: where / f"{tag}.{k}" for k in names}


def _cli(cwd: Path, *args: str) -> Result:
    """``neardup`` run in this process (click's CliRunner) from directory ``cwd``."""
    before = os.getcwd()
    os.chdir(cwd)
    try:
        return invoke("neardup", *args, text=True)
    finally:
        os.chdir(before)


def _quiet_dedup(*args, **kw):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # documents without shingles
        return dedup(*args, **kw)


# ------------------------------------------------------------------------- keep a field
@settings(max_examples=8, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    docs=_docs(),
    data=st.data(),
    how=st.sampled_from(["max", "min"]),
    dates=st.booleans(),
    verify=st.booleans(),
    shard_docs=st.integers(1, 8),
    threads=st.integers(1, 2),
)
def test_keep_field_one_process_staged_and_naive(
    tmp_path_factory, docs, data, how, dates, verify, shard_docs, threads
):
    docs = docs + docs[:2]  # exact copies, whose field values decide
    n = len(docs)
    if dates:
        drawn = data.draw(st.lists(st.tuples(st.integers(0, 3), st.integers(-3, 3)),
                                   min_size=n, max_size=n))  # fmt: skip
        written, values = zip(*(_date(h, z) for h, z in drawn), strict=True)
    else:
        pick = st.sampled_from([0, 1, 1.5, 2, 2.0, -3])
        written = values = data.draw(st.lists(pick, min_size=n, max_size=n))
    where = tmp_path_factory.mktemp("keep")
    rows = [{"id": f"d{i}", "text": t, "when": v} for i, (t, v) in enumerate(zip(docs, written))]
    _write(where / "in.jsonl", rows)
    src = [InputPath(where / "in.jsonl")]
    keep = f"{how}:when"
    one, staged = _outs(where, "one"), _outs(where, "staged")
    ref = _quiet_dedup(src, keep=keep, verify=verify, **one)
    got = _quiet_dedup(src, keep=keep, verify=verify, shard_docs=shard_docs, threads=threads,
                       **staged)  # fmt: skip
    assert ref.kept.tolist() == naive.dedup_kept(docs, 0.8, keep, verify, list(values))
    assert got.kept.tolist() == ref.kept.tolist()
    for k in one:
        assert Path(staged[k]).read_bytes() == Path(one[k]).read_bytes(), k


def test_keep_field_keeps_the_highest_and_lowest(tmp_path):
    text = "the same words in the same order here, said twice or more"
    rows = [{"id": "a", "text": text, "score": 2}, {"id": "b", "text": text, "score": 7.5},
            {"id": "c", "text": text, "score": 7.5}, {"id": "d", "text": text, "score": -1}]  # fmt: skip
    _write(tmp_path / "in.jsonl", rows)
    src = [InputPath(tmp_path / "in.jsonl")]
    for verify in (True, False):
        for keep, kept in (("max:score", "b"), ("min:score", "d"), ("first", "a")):
            for extra in ({}, {"shard_docs": 1}):
                r = dedup(src, keep=keep, verify=verify, **extra)
                assert r.kept_ids.to_pylist() == [kept], (keep, verify, extra)


def test_keep_field_from_parquet_dates_and_numbers(tmp_path):
    pa = pytest.importorskip("pyarrow")
    pq = pytest.importorskip("pyarrow.parquet")
    docs = _families(40, 7)
    when = [_BASE + datetime.timedelta(days=(i * 7) % 5) for i in range(len(docs))]
    score = [(i * 5) % 3 for i in range(len(docs))]
    paths = []
    for part in (0, 1):  # two files: two shards of a staged run
        lo, hi = part * 20, part * 20 + 20
        table = pa.table({"id": [f"d{i}" for i in range(lo, hi)], "text": docs[lo:hi],
                          "when": pa.array(when[lo:hi], pa.timestamp("us", tz="UTC")),
                          "score": score[lo:hi]})  # fmt: skip
        pq.write_table(table, tmp_path / f"in{part}.parquet")
        paths.append(InputPath(tmp_path / f"in{part}.parquet"))
    for keep, values in (("max:when", when), ("min:score", score)):
        want = naive.dedup_kept(docs, 0.8, keep, True, values)
        assert sum(want) < len(docs)
        one = _quiet_dedup(paths, keep=keep, output=tmp_path / "one.parquet")
        staged = _quiet_dedup(paths, keep=keep, output=tmp_path / "st.parquet", shard_docs=20)
        assert one.kept.tolist() == want and staged.kept.tolist() == want
        assert (tmp_path / "one.parquet").read_bytes() == (tmp_path / "st.parquet").read_bytes()


def test_priority_value_numbers_and_dates():
    assert priority_value(3, "f", 1, "x") == (3.0, KEY_NUMBER)
    assert priority_value(-0.25, "f", 1, "x") == (-0.25, KEY_NUMBER)
    a, kind = priority_value("2024-03-01T02:00:00+02:00", "f", 1, "x")
    b, _ = priority_value("2024-03-01T00:00:00Z", "f", 1, "x")
    c, _ = priority_value("2024-03-01", "f", 1, "x")  # midnight UTC
    assert kind == KEY_DATE and a == b == c
    assert priority_value(datetime.date(2024, 3, 1), "f", 1, "x") == (c, KEY_DATE)
    for bad, shown in ((None, "null"), (True, "True"), (float("nan"), "nan"), ("soon", "'soon'"),
                       ([1], r"\[1\]")):  # fmt: skip
        with pytest.raises(InputError, match=rf"^f:9: --keep field 'x' is {shown}; it must be"):
            priority_value(bad, "f", 9, "x")


@pytest.mark.parametrize("shard_docs", [None, 1])
@pytest.mark.parametrize(
    ("value", "message"),
    [
        (None, "--keep field 'score' is null"),
        ("high", "--keep field 'score' is 'high'"),
        (False, "--keep field 'score' is False"),
        ("missing", "missing --keep field 'score'"),
    ],
)
def test_bad_field_value_is_named_or_skipped(tmp_path, shard_docs, value, message):
    text = "one two three four five six seven eight"
    rows = [{"id": "a", "text": text, "score": 1}, {"id": "b", "text": text, "score": value},
            {"id": "c", "text": text, "score": 3}]  # fmt: skip
    if value == "missing":
        del rows[1]["score"]
    lines = _write(tmp_path / "in.jsonl", rows)
    src = [InputPath(tmp_path / "in.jsonl")]
    out = tmp_path / "out.jsonl"
    with pytest.raises(InputError, match=rf"in\.jsonl:2: {message}"):
        dedup(src, keep="max:score", output=out, shard_docs=shard_docs)
    assert not out.exists()
    skipped: list[InputError] = []
    r = dedup(src, keep="max:score", output=out, removed=tmp_path / "rem.jsonl",
              shard_docs=shard_docs, skip_bad=True, on_bad=skipped.append)  # fmt: skip
    assert [e.line for e in skipped] == [2] and r.kept_ids.to_pylist() == ["c"]
    assert out.read_bytes() == lines[2] and (tmp_path / "rem.jsonl").read_bytes() == lines[0]


@pytest.mark.parametrize("shard_docs", [None, 2])
def test_field_of_numbers_and_dates_is_refused(tmp_path, shard_docs):
    rows = [{"id": f"d{i}", "text": f"doc {i}", "t": 5} for i in range(5)]
    rows[3]["t"] = "2024-01-01"
    _write(tmp_path / "in.jsonl", rows)
    out = tmp_path / "out.jsonl"
    with pytest.raises(
        InputError,
        match=r"in\.jsonl:4: --keep field 't' is a date here but a "
        r"number at .*in\.jsonl:1; it must hold numbers only or dates only",
    ):
        dedup([InputPath(tmp_path / "in.jsonl")], keep="min:t", output=out, shard_docs=shard_docs,
              skip_bad=True)  # fmt: skip
    assert not out.exists()


def test_keep_field_needs_records_with_fields(tmp_path):
    (tmp_path / "a.txt").write_text("one doc\n")
    with pytest.raises(InputError, match="--keep max:x needs JSONL or Parquet input"):
        dedup([InputPath(tmp_path / "a.txt")], keep="max:x")
    with pytest.raises(ValueError, match="needs file input"):
        dedup(["a text", "another"], keep="max:x")
    for bad in ("max", "max:", "top:x", "longest:x", ""):
        with pytest.raises(ValueError, match=r"^keep must be first, longest, max:FIELD or "
                           rf"min:FIELD \(got '{bad}'\)$"):  # fmt: skip
            dedup([InputPath(tmp_path / "a.txt")], keep=bad)


# ------------------------------------------------------------------------ removed records
def _check_split(lines: list, kept: list, removed: list, mask: list[bool]) -> None:
    """Kept and removed records are the input's, as multisets and each in input order."""
    assert sorted(kept + removed) == sorted(lines)
    assert kept == [x for x, k in zip(lines, mask, strict=True) if k]
    assert removed == [x for x, k in zip(lines, mask, strict=True) if not k]


@settings(max_examples=8, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(docs=_docs(30), shard_docs=st.sampled_from([None, 1, 4]), verify=st.booleans())
def test_kept_and_removed_lines_are_the_input(tmp_path_factory, docs, shard_docs, verify):
    docs = docs + docs[::3]
    where = tmp_path_factory.mktemp("removed")
    lines = _write(where / "in.jsonl", [{"id": i, "text": t} for i, t in enumerate(docs)])
    kept, removed = where / "kept.jsonl", where / "removed.jsonl"
    r = _quiet_dedup([InputPath(where / "in.jsonl")], verify=verify, output=kept,
                     removed=removed, shard_docs=shard_docs)  # fmt: skip
    split = [p.read_bytes().splitlines(keepends=True) for p in (kept, removed)]
    _check_split(lines, *split, r.kept.tolist())


@pytest.mark.parametrize("shard_docs", [None, 15])
def test_kept_and_removed_rows_of_parquet_are_the_input(tmp_path, shard_docs):
    pa = pytest.importorskip("pyarrow")
    pq = pytest.importorskip("pyarrow.parquet")
    docs = _families(30, 11)
    paths = []
    for part in (0, 1):
        rows = [{"id": f"d{i}", "text": docs[i], "n": i} for i in range(part * 15, part * 15 + 15)]
        pq.write_table(pa.Table.from_pylist(rows), tmp_path / f"in{part}.parquet")
        paths.append(InputPath(tmp_path / f"in{part}.parquet"))
    kept, removed = tmp_path / "kept.parquet", tmp_path / "removed.parquet"
    r = _quiet_dedup(paths, output=kept, removed=removed, shard_docs=shard_docs)
    assert 0 < r.n_dropped < len(docs)
    rows = [row for p in paths for row in pq.read_table(p).to_pylist()]
    split = [pq.read_table(p).to_pylist() for p in (kept, removed)]
    _check_split([json.dumps(x) for x in rows], *([json.dumps(x) for x in s] for s in split),
                 r.kept.tolist())  # fmt: skip
    assert pq.read_schema(removed).equals(pq.read_schema(paths[0]))


@pytest.mark.slow
def test_cli_removed_refused_as_an_input_or_another_output(tmp_path):
    lines = _write(
        tmp_path / "in.jsonl", [{"id": "a", "text": "x y z"}, {"id": "b", "text": "x y z"}]
    )
    for removed, said in (("in.jsonl", "--removed would overwrite an input"),
                          ("out.jsonl", "--removed and the output are the same file"),
                          ("drop.txt", "--drop-list and --removed are the same file")):  # fmt: skip
        r = _cli(tmp_path, "dedup", "in.jsonl", "-o", "out.jsonl", "--drop-list", "drop.txt",
                 "--removed", removed)  # fmt: skip
        assert r.returncode == 2 and said in r.stderr, r.stderr
        assert len(r.stderr.strip().splitlines()) == 1 and "Traceback" not in r.stderr
        assert (tmp_path / "in.jsonl").read_bytes() == b"".join(lines)
        assert not (tmp_path / "out.jsonl").exists() and not (tmp_path / "drop.txt").exists()
    r = _cli(tmp_path, "dedup", "in.jsonl", "-o", "out.jsonl", "--removed", "rem.jsonl",
             "--keep", "max:size")  # fmt: skip
    assert r.returncode == 2 and "in.jsonl:1: missing --keep field 'size'" in r.stderr, r.stderr
    assert not (tmp_path / "out.jsonl").exists() and not (tmp_path / "rem.jsonl").exists()
    r = _cli(tmp_path, "dedup", "in.jsonl", "-o", "-", "--keep", "biggest")
    assert r.returncode == 2 and r.stderr.strip().endswith(
        "--keep must be first, longest, max:FIELD or min:FIELD (got 'biggest')"
    )
    r = _cli(tmp_path, "dedup", "in.jsonl", "-o", "out.jsonl", "--removed", "rem.jsonl", "-q")
    assert r.returncode == 0, r.stderr
    assert (tmp_path / "out.jsonl").read_bytes() == lines[0]
    assert (tmp_path / "rem.jsonl").read_bytes() == lines[1]


# ------------------------------------------------------------------------------------ Dask
@pytest.fixture(scope="module")
def client():
    distributed = pytest.importorskip("distributed")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        cluster = distributed.LocalCluster(
            n_workers=2, threads_per_worker=1, dashboard_address=None, processes=True
        )
    with cluster, distributed.Client(cluster) as c:
        yield c


@pytest.mark.slow
@pytest.mark.parametrize("verify", [True, False])
def test_dask_keep_field_and_removed_same_bytes(client, tmp_path, verify):
    docs = _families(80, 4)
    scores = [(i * 7) % 5 for i in range(len(docs))]
    rows = [{"id": f"d{i}", "text": t, "score": s} for i, (t, s) in enumerate(zip(docs, scores))]
    _write(tmp_path / "in.jsonl", rows)
    src = [InputPath(tmp_path / "in.jsonl")]
    one, on_dask = _outs(tmp_path, "one"), _outs(tmp_path, "dask")
    ref = _quiet_dedup(src, keep="max:score", verify=verify, **one)
    got = _quiet_dedup(src, keep="max:score", verify=verify, client=client, shard_docs=20,
                       **on_dask)  # fmt: skip
    assert ref.kept.tolist() == naive.dedup_kept(docs, 0.8, "max:score", verify, scores)
    assert got.kept.tolist() == ref.kept.tolist() and ref.n_dropped > 0
    for k in one:
        assert Path(on_dask[k]).read_bytes() == Path(one[k]).read_bytes(), k

"""The write stage of a staged dedup for Parquet and text-file inputs: each shard writes its own
kept rows (a Parquet part) or copies its kept files, the caller puts the parts together without
any per-document array, and the outputs are the one-process run's, byte for byte."""

from __future__ import annotations

import dataclasses
import os
import warnings
from pathlib import Path

import naive
import numpy as np
import pytest

from neardup import dedup
from neardup.errors import InputError
from neardup.io.sources import InputPath
from neardup.pipeline import parts, shard_write, staged, staged_result, task_files, write
from neardup.pipeline.stage_table import STAGES

ROOT = Path(__file__).resolve().parents[1]

pa = pytest.importorskip("pyarrow")
pq = pytest.importorskip("pyarrow.parquet")


_SCHEMA = pa.schema([("id", pa.string()), ("text", pa.string()), ("score", pa.float64()),
                     ("tags", pa.list_(pa.string())),
                     ("cat", pa.dictionary(pa.int32(), pa.string())),
                     ("at", pa.timestamp("ms", tz="UTC")),
                     ("meta", pa.struct([("a", pa.int64()), ("b", pa.string())]))])  # fmt: skip


def _parquet_inputs(where: Path, sizes: tuple[int, ...] = (13, 1, 22, 9)) -> list[InputPath]:
    """Parquet files of near-duplicate texts (across files too) with more columns than id and
    text (nulls, lists, floats, dictionary, time zone, struct), several row groups each."""
    docs = naive.text_families(sum(sizes), seed=11, vocab=40, words=(6, 14), wordless=0)
    paths, at = [], 0
    for k, n in enumerate(sizes):
        part = docs[at : at + n]
        table = pa.table({
            "id": [f"p{k}-{i}" for i in range(n)],
            "text": part,
            "score": [None if i % 4 == 0 else i / 3 for i in range(n)],
            "tags": [[f"t{i % 3}"] * (i % 3) for i in range(n)],
            "cat": pa.array([f"c{i % 4}" for i in range(n)]).dictionary_encode(),
            "at": [1_600_000_000_000 + i for i in range(n)],
            "meta": [{"a": i, "b": None if i % 3 else "x"} for i in range(n)],
        }, schema=_SCHEMA)  # fmt: skip
        pq.write_table(table, where / f"in{k}.parquet", row_group_size=5)
        paths.append(InputPath(where / f"in{k}.parquet"))
        at += n
    return paths


def _text_inputs(where: Path, n: int = 40) -> list[InputPath]:
    """Text files in a directory with subdirectories, near duplicates among them."""
    docs = naive.text_families(n, seed=13, vocab=40, words=(6, 14), wordless=0)
    for i, t in enumerate(docs):
        sub = where / "dir" / ("" if i % 3 == 0 else f"s{i % 3}") / ("deep" if i % 5 == 0 else "")
        sub.mkdir(parents=True, exist_ok=True)
        (sub / f"{i:03d}.txt").write_text(t)
    return [InputPath(where / "dir")]


def _tree(path: Path) -> list[tuple[str, bytes | None]]:
    """Every directory and file under ``path`` (relative names; a file's bytes)."""
    out = []
    for d, dirs, files in os.walk(path):
        rel = os.path.relpath(d, path)
        out += [(os.path.join(rel, x), None) for x in dirs]
        out += [(os.path.join(rel, x), Path(d, x).read_bytes()) for x in files]
    return sorted(out)


def _outs(where: Path, tag: str, output: str) -> dict:
    return {"output": where / tag / output, "clusters": where / tag / "c.jsonl",
            "drop_list": where / tag / "drop.txt"}  # fmt: skip


def _same_as_one_process(
    where: Path, src, output: str, common: dict | None = None, **staged_kw
) -> list[bool]:
    """Runs the one-process and the staged dedup (both with ``common``); asserts every output
    the same, byte for byte (a directory output file by file); returns the kept flags."""
    kept, sizes = [], []
    for tag, extra in (("one", common or {}), ("staged", {**(common or {}), **staged_kw})):
        outs = _outs(where, tag, output)
        (where / tag).mkdir()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", UserWarning)
            r = dedup(src, **outs, **extra)
        kept.append(r.kept.tolist())
        sizes.append(r.summary()["bytes_out"])
    for name in _outs(where, "x", output):
        a, b = _outs(where, "one", output)[name], _outs(where, "staged", output)[name]
        assert (_tree(b) if b.is_dir() else b.read_bytes()) == (
            _tree(a) if a.is_dir() else a.read_bytes()
        ), name
    assert kept[0] == kept[1] and not all(kept[0]) and any(kept[0])
    assert sizes[0] == sizes[1] > 0  # the summary's bytes written
    return kept[0]


@pytest.mark.parametrize("shard_docs,threads", [(1, 1), (3, 2), (7, 3), (1000, 2)])
def test_parquet_same_bytes(tmp_path, monkeypatch, shard_docs, threads):
    # batches of 4 rows: several row groups per input file, a batch across its row groups
    monkeypatch.setattr(write, "PARQUET_BATCH_ROWS", 4)
    src = _parquet_inputs(tmp_path)
    _same_as_one_process(tmp_path, src, "kept.parquet", shard_docs=shard_docs, threads=threads)
    meta = pq.ParquetFile(tmp_path / "staged" / "kept.parquet").metadata
    assert meta.num_row_groups > len(src)
    assert max(meta.row_group(g).num_rows for g in range(meta.num_row_groups)) <= 4


def test_parquet_default_batches(tmp_path):
    src = _parquet_inputs(tmp_path)
    _same_as_one_process(tmp_path, src, "kept.parquet", shard_docs=2, threads=2)
    groups = [pq.ParquetFile(tmp_path / t / "kept.parquet").metadata.num_row_groups
              for t in ("one", "staged")]  # fmt: skip
    assert groups[0] == groups[1] > 1


@pytest.mark.slow
@pytest.mark.parametrize("shard_docs,threads", [(1, 2), (4, 1), (9, 3), (1000, 1)])
def test_text_files_same_tree(tmp_path, shard_docs, threads):
    src = _text_inputs(tmp_path)
    _same_as_one_process(tmp_path, src, "kept", shard_docs=shard_docs, threads=threads)
    assert any("deep" in name for name, _ in _tree(tmp_path / "staged" / "kept"))


@pytest.mark.slow
def test_dask_parquet_and_text_same_bytes(tmp_path):
    """Worker processes write the parts (the task functions and their results travel)."""
    distributed = pytest.importorskip("distributed")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        cluster = distributed.LocalCluster(n_workers=2, threads_per_worker=1,
                                           dashboard_address=None, processes=True)  # fmt: skip
    with cluster, distributed.Client(cluster) as client:
        (tmp_path / "pq").mkdir()
        src = _parquet_inputs(tmp_path / "pq")
        _same_as_one_process(tmp_path / "pq", src, "kept.parquet", shard_docs=5, client=client)
        (tmp_path / "txt").mkdir()
        src = _text_inputs(tmp_path / "txt")
        _same_as_one_process(tmp_path / "txt", src, "kept", shard_docs=6, client=client)


@pytest.mark.parametrize("kind", ["parquet", "text"])
def test_commit_reads_no_per_document_array(tmp_path, monkeypatch, kind):
    """The caller's commit reads the shards' parts only: no spill of the scan (ids, records,
    sources, fingerprints) and no decision array, and no ``_scan_arrays`` anywhere."""
    src = _parquet_inputs(tmp_path) if kind == "parquet" else _text_inputs(tmp_path)
    output = "kept.parquet" if kind == "parquet" else "kept"
    ref = tmp_path / "ref"
    ref.mkdir()
    (tmp_path / "out").mkdir()
    dedup(src, output=ref / output)

    def refuse(*a, **k):
        raise AssertionError("the commit read a per-document array")

    monkeypatch.setattr(staged_result, "_scan_arrays", refuse)
    commit = staged.commit_parts
    calls = []

    def guarded(*args):
        with monkeypatch.context() as m:  # no task runs now: the stages are done
            for mod, name in ((np, "load"), (task_files, "load"), (task_files, "load_ids")):
                m.setattr(mod, name, refuse)
            calls.append(commit(*args))

    monkeypatch.setattr(staged, "commit_parts", guarded)
    got = dedup(src, output=tmp_path / "out" / output, shard_docs=4, threads=2, collect=False)
    assert calls and got.summary()["kept"] < got.summary()["documents"]
    a, b = tmp_path / "out" / output, ref / output
    assert (_tree(a) if a.is_dir() else a.read_bytes()) == (
        _tree(b) if b.is_dir() else b.read_bytes()
    )


def _replace_step(monkeypatch, step: str, fn) -> None:
    """The tasks of ``step`` run ``fn`` in place of the step's function, for the test."""
    monkeypatch.setitem(STAGES, step, dataclasses.replace(STAGES[step], fn=fn))


def _leftovers(where: Path) -> list[str]:
    return sorted(p.name for p in where.iterdir() if p.name.startswith("."))


@pytest.mark.parametrize("kind", ["parquet", "text"])
def test_input_changed_during_the_run_is_refused(tmp_path, monkeypatch, kind):
    src = _parquet_inputs(tmp_path) if kind == "parquet" else _text_inputs(tmp_path)
    changed = tmp_path / ("in2.parquet" if kind == "parquet" else "dir/s1/001.txt")
    task = STAGES["write"].fn

    def rewrite_then_write(out, work, plan, offsets, n_decide, s, first_line, **kw):
        if s == 0:  # the input rewritten (same size) after it was scanned
            data = bytearray(changed.read_bytes())
            if kind == "text":
                data[0] ^= 1
            os.remove(changed)
            changed.write_bytes(bytes(data))
        return task(out, work, plan, offsets, n_decide, s, first_line, **kw)

    _replace_step(monkeypatch, "write", rewrite_then_write)
    (tmp_path / "out").mkdir()
    out = tmp_path / "out" / ("kept.parquet" if kind == "parquet" else "kept")
    with pytest.raises(InputError, match=f"{changed.name}: changed while dedup ran"):
        dedup(src, output=out, drop_list=tmp_path / "out" / "d.txt", shard_docs=5, threads=2)
    assert os.listdir(tmp_path / "out") == []


@pytest.mark.parametrize("how", ["cut", "damaged"])
def test_parquet_input_changed_before_written_is_named(tmp_path, monkeypatch, how):
    """A Parquet input with fewer rows than were scanned, or no longer Parquet, when the write
    stage reads it again: the error says it changed (not that its data is bad)."""
    src = _parquet_inputs(tmp_path)
    task = STAGES["write"].fn
    short = tmp_path / "in2.parquet"

    def cut_then_write(out, work, plan, offsets, n_decide, s, first_line, **kw):
        if s == 0 and how == "cut":
            pq.write_table(pq.read_table(short).slice(0, 3), short)
        elif s == 0:
            short.write_bytes(b"PAR1" + b"x" * 100)
        return task(out, work, plan, offsets, n_decide, s, first_line, **kw)

    _replace_step(monkeypatch, "write", cut_then_write)
    (tmp_path / "out").mkdir()
    with pytest.raises(InputError, match=r"in2.parquet: changed while dedup ran") as e:
        dedup(src, output=tmp_path / "out" / "k.parquet", shard_docs=5, threads=1)
    assert len(str(e.value).splitlines()) == 1 and os.listdir(tmp_path / "out") == []


def test_unreadable_parquet_part_of_input_is_named(tmp_path, monkeypatch):
    """An input whose data cannot be read in the write stage: named with the row, one line."""
    src = _parquet_inputs(tmp_path)
    target = os.fspath(src[2])
    rows = shard_write.write_parquet_rows

    def fail_reading(writer, schema, path, numbers):
        if os.fspath(path) == target:
            raise InputError(os.fspath(path), 6, "unreadable Parquet data (damaged page)")
        rows(writer, schema, path, numbers)

    monkeypatch.setattr(shard_write, "write_parquet_rows", fail_reading)
    (tmp_path / "out").mkdir()
    with pytest.raises(InputError, match=r"in2.parquet:6: unreadable Parquet data"):
        dedup(src, output=tmp_path / "out" / "k.parquet", shard_docs=5, threads=2)
    assert os.listdir(tmp_path / "out") == []


def test_failed_parquet_commit_leaves_nothing(tmp_path, monkeypatch):
    src = _parquet_inputs(tmp_path)
    join = parts._join_parquet_parts

    def half(*a):
        join(*a)
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(parts, "_join_parquet_parts", half)
    (tmp_path / "out").mkdir()
    with pytest.raises(OSError, match="No space left"):
        dedup(src, output=tmp_path / "out" / "k.parquet", clusters=tmp_path / "out" / "c.jsonl",
              shard_docs=5)  # fmt: skip
    assert os.listdir(tmp_path / "out") == []


def test_text_commit_stopped_halfway_resumes(tmp_path, monkeypatch):
    """A commit stopped after some files went into the staged directory: nothing appears, and
    the same run again with the work directory gives the whole output, every task reused (a
    kept work directory's files are copied out, never moved)."""
    src = _text_inputs(tmp_path)
    ref = tmp_path / "ref" / "kept"
    ref.parent.mkdir()
    dedup(src, output=ref)
    move, moved = parts._move, []

    def stop_after_two(a, b, keep, shown):
        if len(moved) == 2:
            raise KeyboardInterrupt
        moved.append(a)
        move(a, b, keep, shown)

    monkeypatch.setattr(parts, "_move", stop_after_two)
    (tmp_path / "out").mkdir()
    out, work = tmp_path / "out" / "kept", tmp_path / "work"
    with pytest.raises(KeyboardInterrupt):
        dedup(src, output=out, shard_docs=6, work_dir=work, collect=False)
    assert os.listdir(tmp_path / "out") == [] and len(moved) == 2
    monkeypatch.setattr(parts, "_move", move)
    task, again = STAGES["write"].fn, []
    _replace_step(monkeypatch, "write", lambda out, **k: again.append(k) or task(out, **k))
    dedup(src, output=out, shard_docs=6, work_dir=work, collect=False)
    assert _tree(out) == _tree(ref) and again == []
    assert _leftovers(tmp_path / "out") == []


def test_parquet_schemas_that_differ_are_refused_up_front(tmp_path):
    src = _parquet_inputs(tmp_path)
    table = pq.read_table(os.fspath(src[1]))
    table = table.set_column(2, "score", table["score"].cast(pa.float32()))
    pq.write_table(table, os.fspath(src[1]))
    (tmp_path / "out").mkdir()
    for extra in ({}, {"shard_docs": 5}):
        with pytest.raises(InputError, match=r"in1.parquet: Parquet schema differs from"):
            dedup(src, output=tmp_path / "out" / "k.parquet", **extra)
    assert os.listdir(tmp_path / "out") == []


@pytest.mark.parametrize("kind", ["parquet", "text"])
@pytest.mark.filterwarnings("ignore:.*no shingles:UserWarning")
def test_documents_found_in_an_index_are_not_written(tmp_path, kind):
    import json

    from neardup.index import Index

    src = _parquet_inputs(tmp_path) if kind == "parquet" else _text_inputs(tmp_path)
    output = "kept.parquet" if kind == "parquet" else "kept"
    ix = str(tmp_path / "ix")
    Index.create(ix, threshold=0.8, sketch_words=8).close()
    texts = naive.text_families(40, seed=11 if kind == "parquet" else 13, vocab=40,
                                words=(6, 14), wordless=0)  # fmt: skip
    old = tmp_path / "old.jsonl"
    old.write_text("".join(json.dumps({"id": f"o{i}", "text": t}) + "\n"
                           for i, t in enumerate(texts[5:12])))  # fmt: skip
    dedup([InputPath(old)], against=ix, update=True)
    kept = _same_as_one_process(tmp_path, src, output, {"against": ix}, shard_docs=6, threads=2)
    assert len(kept) - sum(kept) >= 6  # most found in the index


def test_work_dir_of_the_previous_format_is_refused(tmp_path):
    """A work directory whose write tasks wrote no Parquet parts (the format before) is not
    resumed into an output without their rows."""
    import json

    src = _parquet_inputs(tmp_path)
    (tmp_path / "out").mkdir()
    work, out = tmp_path / "work", tmp_path / "out" / "k.parquet"
    dedup(src, output=out, work_dir=work, collect=False)
    manifest = json.loads((work / "manifest.json").read_text())
    (work / "manifest.json").write_text(json.dumps({**manifest, "version": 1}))
    out.unlink()
    with pytest.raises(InputError, match="holds the work of a different dedup command"):
        dedup(src, output=out, work_dir=work, collect=False)
    assert not out.exists()


def test_kept_lines_lie_beside_the_output_until_joined_and_never_after(tmp_path, monkeypatch):
    """A run on this process's threads with a temporary work directory writes each shard's
    kept and removed lines beside their output files (no temporary disk for them), joins them
    into the outputs, and leaves none behind when it stops before its commit."""
    src = [InputPath(str(ROOT / "data" / "sample" / "corpus.jsonl"))]
    ref = tmp_path / "ref"
    ref.mkdir()
    dedup(src, output=ref / "k.jsonl", removed=ref / "r.jsonl", work_dir=tmp_path / "w")
    out = tmp_path / "out"
    out.mkdir()
    task, seen = STAGES["write"].fn, []

    def write_then_look(o, **k):  # each task's part is beside the output once it is done
        done = task(o, **k)
        seen.append(os.listdir(out))
        return done

    _replace_step(monkeypatch, "write", write_then_look)
    r = dedup(src, output=out / "k.jsonl", removed=out / "r.jsonl", threads=2)
    assert sorted(os.listdir(out)) == ["k.jsonl", "r.jsonl"]
    assert all((out / n).read_bytes() == (ref / n).read_bytes() for n in ("k.jsonl", "r.jsonl"))
    parts = set(os.listdir(out)) | {n for names in seen for n in names}
    assert len(seen) == 2 and any(".k.jsonl.part-00000.neardup-" in n for n in parts)
    kept = (ref / "k.jsonl").stat().st_size + (ref / "r.jsonl").stat().st_size
    assert r.summary()["temp_bytes"] < kept  # the parts are not in the work directory
    for name in ("k.jsonl", "r.jsonl"):
        (out / name).unlink()

    def stop(*a, **k):  # after the write stage, before the commit
        assert any(".part-" in n for n in os.listdir(out))
        raise KeyboardInterrupt

    monkeypatch.setattr(staged, "commit_parts", stop)
    with pytest.raises(KeyboardInterrupt):
        dedup(src, output=out / "k.jsonl", removed=out / "r.jsonl", threads=2)
    assert os.listdir(out) == []


def _messy_jsonl(docs: list[str], seed: int) -> bytes:
    """JSONL of ``docs`` with what a crawl's files hold: CRLF line ends, blank lines, bad
    records, escapes, text that is not ASCII, and no newline after the last line."""
    import json
    import random

    rng = random.Random(seed)
    lines = []
    for i, t in enumerate(docs):
        if rng.random() < 0.1:
            lines.append(b"")
        if rng.random() < 0.05:
            lines.append(b"{not json")
        text = t if rng.random() < 0.7 else t + ' \u00e9t\u00e9 \u4e16\u754c "q"'
        line = json.dumps({"id": i, "text": text}, ensure_ascii=rng.random() < 0.5).encode()
        lines.append(line + (b"\r" if rng.random() < 0.2 else b""))
    return b"\n".join(lines)


@pytest.mark.parametrize("shard_docs,threads", [(7, 2), (40, 1), (1000, 2)])
@pytest.mark.parametrize("seed", [0, 1])
def test_kept_lines_written_in_place_are_the_joined_parts(tmp_path, shard_docs, threads, seed):
    """Inputs read a block at a time write each shard's kept and removed lines straight into
    their output files at its offset (the scan measured each line): no part beside them, no
    join; the outputs are byte for byte those of the run that joins parts (a compressed
    output, decompressed), and are the kept and the dropped documents' lines of the input,
    each ending in one newline."""
    import gzip

    from neardup import config

    docs = naive.text_families(120, seed=seed, vocab=30, words=(4, 12), wordless=0)
    src = tmp_path / "in.jsonl"
    src.write_bytes(_messy_jsonl(docs, seed))
    config.READ_KERNEL_FROM = 0  # the block reader, whatever the size
    try:
        out = tmp_path / "out"
        out.mkdir()
        common = dict(shard_docs=shard_docs, threads=threads, skip_bad=True)
        r = dedup(src, output=out / "k.jsonl", removed=out / "r.jsonl", **common)
        assert "kept-bytes" in r.summary()["stages"]  # written in place
        assert sorted(os.listdir(out)) == ["k.jsonl", "r.jsonl"]
        dedup(src, output=tmp_path / "k.jsonl.gz", removed=tmp_path / "r.jsonl.gz", **common)
    finally:
        config._reset()
    for name in ("k", "r"):
        joined = gzip.decompress((tmp_path / f"{name}.jsonl.gz").read_bytes())
        assert (out / f"{name}.jsonl").read_bytes() == joined
    lines = {}  # each document's line, by id
    for raw in src.read_bytes().split(b"\n"):
        if raw.startswith(b'{"id"'):
            lines[int(raw.split(b",")[0].split(b":")[1])] = raw + b"\n"
    ids = r.ids.tolist() if hasattr(r.ids, "tolist") else list(r.ids)
    kept = [lines[i] for i, k in zip(ids, r.kept.tolist(), strict=True) if k]
    dropped = [lines[i] for i, k in zip(ids, r.kept.tolist(), strict=True) if not k]
    assert dropped and (out / "k.jsonl").read_bytes() == b"".join(kept)
    assert (out / "r.jsonl").read_bytes() == b"".join(dropped)


def test_a_run_that_fails_while_writing_in_place_leaves_no_output(tmp_path, monkeypatch):
    """A write task that fails after others filled their ranges: the output file written in
    place is removed with the run's other temporary files; what stood at the output path
    stays as it was."""
    from neardup import config

    src = tmp_path / "in.jsonl"
    docs = naive.text_families(60, seed=3, vocab=30, words=(4, 12), wordless=0)
    src.write_bytes(_messy_jsonl(docs, 3))
    out = tmp_path / "out"
    out.mkdir()
    (out / "k.jsonl").write_bytes(b"the user's file\n")
    copy, seen = shard_write._copy_lines, []

    def fail_last(w, plan, s, numbers, first_line):  # the disk fills up at the last shard
        seen.append(w.name)
        if s == len(plan.shards) - 1:
            raise OSError(28, "No space left on device")
        return copy(w, plan, s, numbers, first_line)

    monkeypatch.setattr(shard_write, "_copy_lines", fail_last)
    config.READ_KERNEL_FROM = 0
    try:
        with pytest.raises(OSError, match="No space left on device: '.*k.jsonl'") as e:
            dedup(src, output=out / "k.jsonl", shard_docs=10, threads=2, skip_bad=True)
    finally:
        config._reset()
    assert "temporary directory" not in str(e.value)  # the output's disk, not the work's
    assert len(set(seen)) == 1 and os.path.dirname(seen[0]) == str(out)  # one file, in place
    assert os.listdir(out) == ["k.jsonl"]
    assert (out / "k.jsonl").read_bytes() == b"the user's file\n"


def test_input_changed_before_its_lines_are_written_in_place_is_refused(tmp_path, monkeypatch):
    """An input rewritten between the scan and the write of a run that writes its lines in
    place: the error names it, and no output is left (nor a partial one)."""
    from neardup import config

    src = tmp_path / "in.jsonl"
    docs = naive.text_families(60, seed=4, vocab=30, words=(4, 12), wordless=0)
    src.write_bytes(_messy_jsonl(docs, 4))
    task = STAGES["write"].fn

    def rewrite_then_write(o, **k):
        if k["s"] == 0:  # each line one byte longer: the lines no longer fit their places
            data = src.read_bytes().replace(b'"text": "', b'"text": "x')
            os.remove(src)
            src.write_bytes(data)
        return task(o, **k)

    _replace_step(monkeypatch, "write", rewrite_then_write)
    out = tmp_path / "out"
    out.mkdir()
    config.READ_KERNEL_FROM = 0
    try:
        with pytest.raises(InputError, match="in.jsonl: changed while dedup ran"):
            dedup(src, output=out / "k.jsonl", shard_docs=10, threads=2, skip_bad=True)
    finally:
        config._reset()
    assert os.listdir(out) == []

"""pipeline/stream and the first pass of dedup on it: documents read in blocks on threads give
exactly what reading them one record at a time gives (tests/naive.py), errors in input order."""

from __future__ import annotations

import gzip
import json
import os
import re
import threading
from pathlib import Path

import numpy as np
import pytest
from cli import invoke
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from naive import read_lines_one_by_one, scan_records

import neardup
from neardup import config
from neardup.errors import InputError
from neardup.fingerprints import Fingerprinter
from neardup.io import _id_kernels
from neardup.io.sources import expand_inputs
from neardup.pipeline.stream import fingerprint_files
from neardup.pipeline.task_files import shard_sets

FP = Fingerprinter("default")


def _scan(paths, work=None, **kw):
    """What the engine's scan kept of every document (``neardup.dedup``'s result, whose
    ``scan`` holds each one's id, file, record, length and fingerprint), and, with a ``work``
    directory (kept), the shingle keys its scan tasks spilled there, shard by shard."""
    r = neardup.dedup([Path(p) for p in paths], fingerprinter=FP, work_dir=work, **kw)
    if work is None:
        return r, None
    shards = sorted(int(d) for d in os.listdir(os.path.join(work, "scan")) if d.isdigit())
    sets = [shard_sets(str(work), s) for s in shards]
    return r, [(np.diff(x.offsets).tolist(), np.asarray(x.keys).tolist()) for x in sets]


@pytest.fixture(autouse=True)
def _defaults():
    config.READ_KERNEL_FROM = 0  # the block kernel even for small inputs
    yield
    config._reset()


_IDS = st.sampled_from([1, 2, 1.0, True, "1", "a", "b", [1], None, 2**70, "in.jsonl:1"])
_TEXTS = st.sampled_from(["the quick brown fox", "Straße ﬁne", "a\nb", "", "日本語のテキスト"])


@st.composite
def _line(draw) -> bytes:
    kind = draw(st.integers(0, 9))
    if kind == 0:
        return draw(st.sampled_from([b"", b"[1]", b'{"text": 5}', b"{bad", b'{"text": "caf\xe9"}']))
    obj: dict = {"text": draw(_TEXTS)}
    if kind < 8:
        obj["id"] = draw(_IDS)
    raw = json.dumps(obj, ensure_ascii=draw(st.booleans()))
    if kind == 9:
        raw = raw.replace('"text"', '"t\\u0065xt"')  # the Python reader's line
    return raw.encode()


def _write(tmp_path, files: list[list[bytes]], gz: list[bool]) -> list[str]:
    paths = []
    for k, (lines, z) in enumerate(zip(files, gz, strict=True)):
        data = b"\n".join(lines) + b"\n"
        path = tmp_path / (f"f{k}.jsonl" + (".gz" if z else ""))
        path.write_bytes(gzip.compress(data) if z else data)
        paths.append(str(path))
    return paths


def _naive(paths: list[str], files: list[list[bytes]]):
    items = [
        (k, rec)
        for k, lines in enumerate(files)
        for _, rec in read_lines_one_by_one(b"\n".join(lines) + b"\n", paths[k], True)
    ]
    return scan_records(items, paths)


@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    files=st.lists(st.lists(_line(), max_size=25), min_size=1, max_size=3),
    gz=st.lists(st.booleans(), min_size=3, max_size=3),
    block=st.integers(1, 400),
    threads=st.integers(1, 3),
    keys=st.booleans(),
    kernel=st.booleans(),
)
def test_scan_reads_as_one_record_at_a_time(
    tmp_path_factory, files, gz, block, threads, keys, kernel
):
    tmp = tmp_path_factory.mktemp("scan")
    paths = _write(tmp, files, gz[: len(files)])
    kept, errors = _naive(paths, files)
    config.READ_BLOCK_BYTES = config.READ_BLOCK_MIN_BYTES = block
    config.READ_KERNEL_FROM = 0 if kernel else 1 << 40  # block kernel, or line by line
    bad: list[InputError] = []
    work = tmp / "work" if keys else None
    r, spilled = _scan(paths, work, threads=threads, verify=keys, skip_bad=True, on_bad=bad.append)
    scan = r.scan
    assert [str(e) for e in bad] == errors and r.skipped == len(errors)
    assert scan.ids == [k[2] for k in kept] and [type(i) for i in scan.ids] == [
        type(k[2]) for k in kept
    ]
    assert scan.source.tolist() == [k[0] for k in kept]
    assert scan.record.tolist() == [k[1] for k in kept]
    texts = [k[3] for k in kept]
    assert scan.lengths.tolist() == [len(t) for t in texts]
    assert scan.fingerprints.tolist() == FP.fingerprint_many(texts).tolist()
    if keys:
        want = FP.features_many(texts)
        got_keys = [k for _, ks in spilled for k in ks]
        sizes = [n for ns, _ in spilled for n in ns]
        assert got_keys == want.keys.tolist() and sizes == np.diff(want.offsets).tolist()
    if errors:
        with pytest.raises(InputError) as e:
            _scan(paths, threads=threads)
        assert str(e.value) == errors[0]


def test_repeated_ids_found_when_every_hash_collides(tmp_path, monkeypatch):
    zeros = lambda buf, ends: np.zeros(len(ends), dtype=np.uint64)  # noqa: E731
    monkeypatch.setattr(_id_kernels, "hash_strings", zeros)
    monkeypatch.setattr(_id_kernels, "hash_ints", lambda v: np.zeros(len(v), dtype=np.uint64))
    lines = [json.dumps({"text": "x", "id": i}).encode() for i in [0, "a", 1, "0", "a", 0, 1, "b"]]
    paths = _write(tmp_path, [lines], [False])
    bad: list[InputError] = []
    scan = _scan(paths, on_bad=bad.append, skip_bad=True, threads=2)[0].scan
    assert scan.ids == [0, "a", 1, "0", "b"]
    assert [(e.line, re.search(r"first at (.*?)\)", str(e)).group(1)) for e in bad] == [
        (5, f"{paths[0]}:2"),
        (6, f"{paths[0]}:1"),
        (7, f"{paths[0]}:3"),
    ]
    assert _naive(paths, [lines])[1] == [str(e) for e in bad]


def test_errors_before_a_broken_input_come_first(tmp_path):
    lines = [f'{{"text": "a {i}"}}' for i in range(6000)]
    lines[3000] = '{"text": 5}'
    path = tmp_path / "x.jsonl.gz"
    path.write_bytes(gzip.compress("\n".join(lines).encode())[:-600])  # the end is missing
    config.READ_BLOCK_BYTES = config.READ_BLOCK_MIN_BYTES = 4096
    threads = threading.active_count()
    with pytest.raises(InputError, match=r"x.jsonl.gz:3001: field 'text' is a number"):
        _scan([path], threads=2)
    assert threading.active_count() == threads  # the workers ended with the error
    bad: list[InputError] = []
    with pytest.raises(InputError, match="cannot decompress"):
        _scan([path], threads=2, skip_bad=True, on_bad=bad.append)
    assert bad == []  # skips are told once every shard is read: a run that fails tells none


def test_batches_of_every_format_in_order(tmp_path):
    pa = pytest.importorskip("pyarrow")
    pq = pytest.importorskip("pyarrow.parquet")
    (tmp_path / "a.txt").write_text("one doc\nof two lines")
    (tmp_path / "b.txt").write_bytes(b"bad \xff utf-8")
    pq.write_table(pa.table({"text": ["p1", "p2"], "id": [5, 6]}), tmp_path / "c.parquet")
    (tmp_path / "d.jsonl").write_text('{"text": "j1"}\n{"text": "j2", "id": "x"}\n')
    files = expand_inputs(
        [str(tmp_path / n) for n in ("a.txt", "b.txt", "c.parquet", "d.jsonl")], one_output=False
    )
    config.READ_BLOCK_BYTES = config.READ_BLOCK_MIN_BYTES = 8
    got = list(fingerprint_files(files, FP, threads=2))
    ids = [i for b in got for i in b.docs.ids]
    assert ids == [str(tmp_path / "a.txt"), 5, 6, f"{tmp_path / 'd.jsonl'}:1", "x"]
    assert [k for b in got for k in b.file.tolist()] == [0, 2, 2, 3, 3]
    assert [str(e) for b in got for e in b.docs.bad] == [
        f"{tmp_path / 'b.txt'}:1: not valid UTF-8 (byte 0xff at file offset 4); re-encode the "
        "input as UTF-8 or use --skip-bad"
    ]
    texts = ["one doc\nof two lines", "p1", "p2", "j1", "j2"]
    assert (
        np.concatenate([b.fingerprints for b in got]).tolist()
        == FP.fingerprint_many(texts).tolist()
    )


def test_a_fingerprinter_of_str_only(tmp_path):
    class Lengths:
        def fingerprint_many(self, texts, threads=None):
            return np.array([len(t) for t in texts], dtype=np.uint64)

    (tmp_path / "d.jsonl").write_text('{"text": "abc"}\n{"text": "\\ud800x"}\n')
    files = expand_inputs([str(tmp_path / "d.jsonl")])
    got = list(fingerprint_files(files, Lengths(), threads=1))
    assert got[0].fingerprints.tolist() == [3, 2]
    with pytest.raises(TypeError, match="does not emit shingle keys"):
        neardup.dedup(str(tmp_path / "d.jsonl"), fingerprinter=Lengths())
    r = neardup.dedup(str(tmp_path / "d.jsonl"), fingerprinter=Lengths(), verify=False)
    assert r.fingerprints.tolist() == [3, 2]


def _commands_output(tmp: Path, src: Path) -> dict:
    """What ``fingerprint``, ``dedup`` (verified and not) and ``index add``/``query`` write
    for ``src``, with --skip-bad (messages in order) and with the first error."""
    got = {}
    runs = {
        "fingerprint": ["fingerprint", str(src), "-o", str(tmp / "fp.jsonl"), "--skip-bad"],
        "dedup": ["dedup", str(src), "-o", str(tmp / "kept.jsonl"), "--skip-bad",
                  "--clusters", str(tmp / "c.jsonl"), "--threshold", "0.5"],
        "no-verify": ["dedup", str(src), "-o", str(tmp / "kept2.jsonl"), "--skip-bad",
                      "--no-verify", "-d", "10", "--clusters", str(tmp / "c2.jsonl")],
        "lines": ["fingerprint", "--lines", str(src), "-o", str(tmp / "lines.txt")],
        "strict": ["fingerprint", str(src), "-o", str(tmp / "x.txt")],
        "index create": ["index", "create", str(tmp / "ix")],
        "index add": ["index", "add", str(tmp / "ix"), str(src), "--skip-bad"],  # ids repeat
        "index add file:line": ["index", "add", str(tmp / "ix"), str(src), "--skip-bad",
                                "--id-field", ""],
        "index query": ["index", "query", str(tmp / "ix"), str(src), "--skip-bad", "-o",
                        str(tmp / "answers.jsonl")],
    }  # fmt: skip
    for name, args in runs.items():
        r = invoke(
            "neardup", *args, *([] if name == "index create" else ["--threads", "2"]), text=True
        )
        lines = [
            # the block reader's run also measures each line (it writes its output in place)
            re.sub(r"[\d.]+ [kMG]?B temporary", "B temporary", ln)
            for ln in r.stderr.replace(str(tmp), "TMP").splitlines()
            if ": time " not in ln and "compiling kernels" not in ln  # timings, first run
        ]
        got[name] = (r.returncode, lines)
    for out in sorted(tmp.glob("*.*")):
        got[out.name] = out.read_bytes()
    return got


def test_commands_give_the_same_outputs_with_the_block_kernel(tmp_path):
    texts = ["the quick brown fox jumps over the lazy dog", "Straße ﬁne ΣΊΣΥΦΟΣ", "日本語の文"]
    rows = []
    for i in range(400):
        t = texts[i % 3] + f" {i // 7} " + texts[(i // 3) % 3]
        row = json.dumps({"id": f"d{i % 390}", "text": t}, ensure_ascii=i % 2 == 0)
        rows.append(row if i % 50 else row.replace('"text"', '"t\\u0065xt"'))
    rows[10] = '{"text": 5}'
    rows[20] = '{"text": "lone \\ud800 surrogate", "id": "s"}'
    rows[30] = "   "
    src = tmp_path / "in.jsonl"
    src.write_text("\n".join(rows) + "\n", encoding="utf-8")
    outputs = []
    for kernel in (False, True):
        config.READ_KERNEL_FROM = 0 if kernel else 1 << 40
        config.READ_BLOCK_BYTES = config.READ_BLOCK_MIN_BYTES = 2000
        (tmp_path / str(kernel)).mkdir()
        outputs.append(_commands_output(tmp_path / str(kernel), src))
    assert outputs[0] == outputs[1]
    codes = {name: v[0] for name, v in outputs[1].items() if isinstance(v, tuple)}
    assert {name for name, code in codes.items() if code} == {"strict", "index add"}
    assert "in.jsonl:391: index TMP/ix: id 'd0' repeats" in outputs[1]["index add"][1][-1]
    assert {"answers.jsonl", "c.jsonl", "c2.jsonl", "fp.jsonl", "kept.jsonl"} <= set(outputs[1])
    assert "in.jsonl:11: field 'text' is a number" in outputs[1]["strict"][1][-1]
    assert any("in.jsonl:391: duplicate id 'd0'" in ln for ln in outputs[1]["dedup"][1])


_PQ_TEXTS = ["the quick brown fox", "Straße ﬁne ΣΊΣΥΦΟΣ", "", "日本語のテキスト", "a\nb"]


@st.composite
def _parquet_table(draw):
    n = draw(st.integers(0, 30))
    kind = draw(st.sampled_from(["string", "large_string", "binary"]))
    bad_rows = draw(st.booleans())
    texts: list = [draw(st.sampled_from(_PQ_TEXTS)) + f" {i % 7}" for i in range(n)]
    if bad_rows and n:
        for i in draw(st.lists(st.integers(0, n - 1), max_size=3)):
            texts[i] = None if kind != "binary" or i % 2 else b"caf\xe9"
    if kind == "binary":
        texts = [t.encode() if isinstance(t, str) else t for t in texts]
    id_kind = draw(st.sampled_from(["absent", "int", "str", "float"]))
    ids = {
        "absent": None,
        "int": [i % 25 for i in range(n)],
        "str": [f"d{i % 25}" for i in range(n)],
        "float": [float("nan") if bad_rows and i == n // 2 else i + 0.5 for i in range(n)],
    }[id_kind]
    return kind, texts, ids


@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    table=_parquet_table(),
    block=st.integers(1024, 20_000),
    threads=st.integers(1, 3),
    keys=st.booleans(),
    group_rows=st.sampled_from([None, 1, 4, 11]),
)
def test_parquet_batches_read_as_the_python_reader(
    tmp_path_factory, table, block, threads, keys, group_rows
):
    pa = pytest.importorskip("pyarrow")
    pq = pytest.importorskip("pyarrow.parquet")
    from neardup.io import arrow as blocks

    kind, texts, ids = table
    columns = {"text": pa.array(texts, type=getattr(pa, kind)())}
    if ids is not None:
        columns["id"] = pa.array(ids)
    path = str(tmp_path_factory.mktemp("pq") / "in.parquet")
    pq.write_table(pa.table(columns), path, row_group_size=group_rows)
    config.READ_BLOCK_BYTES = config.READ_BLOCK_MIN_BYTES = block  # batches of block // 1024 rows
    slow_rows = []
    real = blocks.parquet_records

    def counted(*a, **k):
        slow_rows.append(len(a[2]))
        return real(*a, **k)

    results = []
    for kernel in (False, True):
        config.READ_KERNEL_FROM = 0 if kernel else 1 << 40
        bad: list[InputError] = []
        work = tmp_path_factory.mktemp("work") / "w" if keys else None
        blocks.parquet_records = counted
        try:
            r, spilled = _scan([path], work, threads=threads, verify=keys, skip_bad=True,
                               on_bad=bad.append)  # fmt: skip
        finally:
            blocks.parquet_records = real
        scan = r.scan
        results.append(
            (
                [str(e) for e in bad],
                scan.ids,
                [type(i) for i in scan.ids],
                scan.record.tolist(),
                scan.lengths.tolist(),
                scan.fingerprints.tolist(),
                [k for _, ks in spilled for k in ks] if keys else None,
            )
        )
    assert results[0] == results[1]
    clean = all(isinstance(t, str) or (isinstance(t, bytes) and t != b"caf\xe9") for t in texts)
    if clean and ids is not None and not any(isinstance(v, float) and v != v for v in ids):
        assert not slow_rows  # every batch was read as stored
    if clean and ids is None:  # every row a document
        want = [t.decode() if isinstance(t, bytes) else t for t in texts]
        assert results[1][5] == FP.fingerprint_many(want).tolist()


@settings(max_examples=60, deadline=None)
@given(
    chunks=st.lists(
        st.lists(st.one_of(st.sampled_from(_PQ_TEXTS), st.none()), max_size=12), max_size=4
    ),
    large=st.booleans(),
    keys=st.booleans(),
    threads=st.integers(1, 2),
)
def test_arrow_texts_fingerprint_as_their_python_values(chunks, large, keys, threads):
    """In-memory Arrow texts are read as stored where a chunk holds no null, else value by
    value: the same documents, fingerprints, positions and bad records as a list of them."""
    pa = pytest.importorskip("pyarrow")
    from neardup.io import rows as rows_module

    kind = pa.large_string() if large else pa.string()
    column = pa.chunked_array([pa.array(c, type=kind) for c in chunks], type=kind)
    values = column.to_pylist()
    results = []
    as_stored = []
    real = rows_module.arrow_utf8

    def counted(chunk):
        got = real(chunk)
        as_stored.append(got is not None)
        return got

    for texts in (values, pa.table({"text": column})):
        bad: list[InputError] = []
        rows_module.arrow_utf8 = counted
        try:
            r = neardup.dedup(texts, fingerprinter=FP, threads=threads, verify=keys,
                              skip_bad=True, on_bad=bad.append, shard_docs=1000)  # fmt: skip
        finally:
            rows_module.arrow_utf8 = real
        results.append((r.fingerprints.tolist(), r.lengths.tolist(), r.positions.tolist(),
                        r.skipped, [str(e) for e in bad], r.kept.tolist()))  # fmt: skip
    assert results[0] == results[1]
    assert sorted(as_stored) == sorted(None not in c for c in chunks if c)  # no null: as stored
    good = [t for t in values if t is not None]
    assert results[1][0] == FP.fingerprint_many(good).tolist()
    assert results[1][2] == [i for i, t in enumerate(values) if t is not None]
    if any(t is None for t in values):
        with pytest.raises(ValueError, match="text is missing"):
            neardup.dedup(pa.table({"text": column}), fingerprinter=FP, threads=threads)


@pytest.mark.parametrize("threads", [1, 3])
def test_text_files_read_in_input_order(tmp_path, threads):
    texts = {f"d{k}.txt": f"document {k} Straße ﬁne {k % 3}".encode() for k in range(7)}
    texts["d3.txt"] = b"caf\xe9 au lait\nsecond line"
    texts["d5.txt"] = b""
    for name, data in texts.items():
        (tmp_path / name).write_bytes(data)
    paths = [str(tmp_path / name) for name in texts]
    bad: list[InputError] = []
    scan = _scan(paths, fmt="text", threads=threads, skip_bad=True, on_bad=bad.append)[0].scan
    good = [n for n in texts if n != "d3.txt"]
    assert [str(e) for e in bad] == [
        f"{paths[3]}:1: not valid UTF-8 (byte 0xe9 at file offset 3); re-encode the input as "
        "UTF-8 or use --skip-bad"
    ]
    assert [i.rsplit("/", 1)[-1] for i in map(str, scan.ids)] == good
    assert scan.source.tolist() == [paths.index(str(tmp_path / n)) for n in good]
    want = [texts[n].decode() for n in good]
    assert scan.fingerprints.tolist() == FP.fingerprint_many(want).tolist()
    assert scan.lengths.tolist() == [len(t) for t in want]
    with pytest.raises(InputError, match="d3.txt:1: not valid UTF-8"):
        _scan(paths, fmt="text", threads=threads)

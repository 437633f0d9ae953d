"""``neardup fingerprint``, run in process."""

from __future__ import annotations

import json

import pytest
from cli import Result, invoke

from neardup.fingerprints import fingerprint


def run(*args: str, input: bytes | None = None) -> Result:
    return invoke("neardup", "fingerprint", *args, input=input)


@pytest.mark.slow
def test_text_files_decimal_and_reference(tmp_path):
    a = tmp_path / "a.txt"
    b = tmp_path / "b.txt"
    a.write_text("Twas brillig, and the slithy toves")
    b.write_text("Did gyre and gimble in the wabe")
    r = run(str(a), str(b))
    assert r.returncode == 0, r.stderr
    assert r.stdout.decode().splitlines() == [
        str(fingerprint(a.read_text())),
        str(fingerprint(b.read_text())),
    ]
    r = run("--preset", "reference", str(a))
    assert r.stdout.decode().split() == [str(fingerprint(a.read_text(), preset="reference"))]


def test_lines_stdin_and_jsonl_output(tmp_path):
    out = tmp_path / "fp.jsonl"
    r = run("--lines", "-", "-o", str(out), input=b"one two three\nfour five\n")
    assert r.returncode == 0, r.stderr
    rows = [json.loads(x) for x in out.read_text().splitlines()]
    assert rows == [
        {"id": "<stdin>:1", "fingerprint": fingerprint("one two three")},
        {"id": "<stdin>:2", "fingerprint": fingerprint("four five")},
    ]


def test_jsonl_field_ids_and_errors(tmp_path):
    src = tmp_path / "docs.jsonl"
    src.write_text('{"id": "x", "body": "alpha beta"}\n\n{"id": 7, "body": 5}\n{"id": 8}\n')
    r = run("--field", "body", str(src))
    assert r.returncode == 2
    err = r.stderr.decode()
    assert f"{src}:3" in err and "'body' is a number" in err and "Traceback" not in err
    out = tmp_path / "fp.jsonl"
    r = run("--field", "body", "--skip-bad", str(src), "-o", str(out))
    assert r.returncode == 0, r.stderr
    assert [json.loads(x) for x in out.read_text().splitlines()] == [
        {"id": "x", "fingerprint": fingerprint("alpha beta")}
    ]
    err = r.stderr.decode()
    assert f"{src}:3" in err and f"{src}:4" in err and "missing field 'body'" in err
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"text": "ok"}\n{not json\n')
    r = run(str(bad))
    assert r.returncode == 2 and f"{bad}:2: not valid JSON" in r.stderr.decode()


def test_undecodable_bytes_leave_no_output(tmp_path):
    src = tmp_path / "doc.txt"
    src.write_bytes(b"first line\nsecond \xff line\n")
    out = tmp_path / "out.txt"
    out.write_text("previous\n")
    r = run(str(src), "-o", str(out))
    assert r.returncode == 2
    assert f"{src}:2: not valid UTF-8 (byte 0xff" in r.stderr.decode()
    assert out.read_text() == "previous\n"  # untouched: nothing half-written
    assert sorted(p.name for p in tmp_path.iterdir()) == ["doc.txt", "out.txt"]
    r = run("--lines", "--skip-bad", str(src), "-o", str(out))
    assert r.returncode == 0
    assert out.read_text() == f"{fingerprint('first line')}\n"
    assert "skipped" in r.stderr.decode()


def test_parquet_in_and_out(tmp_path):
    pa = pytest.importorskip("pyarrow")
    pq = pytest.importorskip("pyarrow.parquet")
    src = tmp_path / "docs.parquet"
    pq.write_table(pa.table({"id": [10, 11, 12], "content": ["a b c", None, "d e f"]}), src)
    r = run("--column", "content", str(src))
    assert r.returncode == 2 and f"{src}:2: column 'content' is null" in r.stderr.decode()
    out = tmp_path / "fp.parquet"
    r = run("--column", "content", "--skip-bad", str(src), "-o", str(out))
    assert r.returncode == 0, r.stderr
    t = pq.read_table(out)
    assert t.column("id").to_pylist() == ["10", "12"]
    assert t.column("fingerprint").to_pylist() == [fingerprint("a b c"), fingerprint("d e f")]
    r = run("--column", "nope", str(src))
    assert r.returncode == 2 and "no column 'nope'" in r.stderr.decode()


def test_usage_errors(tmp_path):
    r = run("--preset", "nope", "x")
    assert r.returncode == 2 and "unknown preset" in r.stderr.decode()
    r = run(str(tmp_path / "missing.txt"))
    assert r.returncode == 2 and "missing.txt: no such file" in r.stderr.decode()


def test_window_option_matches_the_python_api(tmp_path):
    from neardup import Fingerprinter

    docs = ["one two three four five six", "one two three four five seven", "alpha beta"]
    src = tmp_path / "docs.txt"
    src.write_text("\n".join(docs) + "\n")
    for window in (1, 2, 4):
        r = run("--lines", "--window", str(window), "-q", str(src))
        assert r.returncode == 0, r.stderr
        got = [int(x) for x in r.stdout.split()]
        assert got == Fingerprinter("default", window=window).fingerprint_many(docs).tolist()
    assert got != Fingerprinter("default").fingerprint_many(docs).tolist()
    r = run("--lines", "--window", "0", str(src))
    assert r.returncode == 2 and b"--window" in r.stderr

"""``neardup index ...`` and ``neardup dedup --against``, run in process."""

from __future__ import annotations

import json
import subprocess
import sys

import numpy as np
import pytest
from cli import Result, invoke

from neardup.errors import InputError
from neardup.index import Index

DOCS = [
    "the quick brown fox jumps over the lazy dog near the river bank today",
    "the quick brown fox jumps over the lazy dog near the river bank today!",
    "a completely different document about databases and sorted tables",
    "yet another text, this one on the weather in the mountains in spring",
]


def run(*args: str) -> Result:
    return invoke("neardup", *args, text=True)


def jsonl(path, rows) -> None:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))


def test_create_add_query_remove_compact_info(tmp_path):
    ix = str(tmp_path / "ix")
    r = run("index", "create", ix, "--distance", "3", "--blocks", "4")
    assert r.returncode == 0, r.stderr
    fps = tmp_path / "fps.txt"
    fps.write_text("1\n2\n3\n1099511627776\n")
    assert run("index", "add", ix, "--fingerprints", str(fps)).returncode == 0
    q = tmp_path / "q.txt"
    q.write_text("0\n\n7\n18446744073709551615\n")
    out = tmp_path / "out.jsonl"
    r = run("index", "query", ix, "--fingerprints", str(q), "-o", str(out), "--distance", "1")
    assert r.returncode == 0, r.stderr
    assert r.stderr.endswith(f"with matches, written to {out}\n")  # names what it wrote
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    assert rows == [
        {"id": 0, "matches": [[0, 1], [1, 1], [3, 1]]},
        {"id": 1, "matches": [[2, 1]]},
        {"id": 2, "matches": []},
    ]
    r = run("index", "remove", ix, "0", "5")
    assert r.returncode == 2 and "id 5 is not in the index" in r.stderr
    assert "Traceback" not in r.stderr
    ids = tmp_path / "ids.txt"
    ids.write_text("0\n5\n")
    assert run("index", "remove", ix, "--ids-file", str(ids), "--ignore-missing").returncode == 0
    r = run("index", "remove", ix, "x")
    assert r.returncode == 2 and "'x' is not an integer id" in r.stderr
    assert run("index", "compact", ix).returncode == 0
    r = run("index", "info", ix, "--verify")
    info = json.loads(r.stdout)
    assert info["entries"] == 3 and info["checksums_checked"] and len(info["segments"]) == 1
    assert info["blocks"] == 4 and info["tables"] == 4


def test_documents_with_ids_and_errors(tmp_path):
    ix = str(tmp_path / "ix")
    assert run("index", "create", ix, "--distance", "6").returncode == 0
    src = tmp_path / "docs.jsonl"
    jsonl(src, [{"id": f"d{i}", "text": t} for i, t in enumerate(DOCS)])
    assert run("index", "add", ix, str(src), "-q").returncode == 0
    q = tmp_path / "q.jsonl"
    jsonl(q, [{"id": "new", "text": DOCS[0] + " again"}, {"id": "other", "text": "zzz qqq"}])
    r = run("index", "query", ix, str(q))
    rows = [json.loads(line) for line in r.stdout.splitlines()]
    assert rows[0]["id"] == "new" and {m[0] for m in rows[0]["matches"]} >= {"d0", "d1"}
    assert rows[1] == {"id": "other", "matches": []}
    r = run("index", "add", ix, str(src))  # the same ids again
    assert r.returncode == 2 and "already in the index" in r.stderr
    r = run("index", "create", ix)
    assert r.returncode == 2 and "already exists" in r.stderr
    r = run("index", "query", str(tmp_path / "nope"), str(q))
    assert r.returncode == 2 and "nope" in r.stderr
    (tmp_path / "ix" / "MANIFEST").write_text("garbage")
    r = run("index", "info", ix)
    assert r.returncode == 2 and "MANIFEST" in r.stderr and "Traceback" not in r.stderr


@pytest.mark.slow
def test_locked_index_is_a_clear_error(tmp_path):
    path = tmp_path / "ix"
    with Index.create(path, distance=3) as w:
        w.add([1, 2])
    fps = tmp_path / "f.txt"
    fps.write_text("5\n")
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLD_WRITER, str(path)], stdout=subprocess.PIPE, text=True
    )
    try:
        assert holder.stdout.readline().strip() == "ready"
        r = run("index", "add", str(path), "--fingerprints", str(fps))
        assert r.returncode == 2
        assert f"open for writing by another process (pid {holder.pid})" in r.stderr
        assert "Traceback" not in r.stderr
        assert run("index", "query", str(path), "--fingerprints", str(fps)).returncode == 0
    finally:
        holder.kill()
        holder.wait()
    with Index.open(path, "w"):  # in this process: says so, not "another process"
        r = run("index", "add", str(path), "--fingerprints", str(fps))
        assert r.returncode == 2 and "already open for writing in this process" in r.stderr


HOLD_WRITER = """
import sys, time
from neardup.index import Index
ix = Index.open(sys.argv[1], "w")
print("ready", flush=True)
time.sleep(120)
"""


def test_dedup_against_index_one_dump_at_a_time(tmp_path):
    ix = tmp_path / "ix"
    assert run("index", "create", str(ix), "--distance", "6").returncode == 0
    dump1 = tmp_path / "dump1.jsonl"
    jsonl(dump1, [{"id": f"a{i}", "text": t} for i, t in enumerate(DOCS[:3])])
    out1 = tmp_path / "kept1.jsonl"
    r = run("dedup", str(dump1), "-o", str(out1), "--against", str(ix), "--update", "-q")
    assert r.returncode == 0, r.stderr
    kept1 = [json.loads(line)["id"] for line in out1.read_text().splitlines()]
    assert kept1 == ["a0", "a2"]  # a1 is a near-duplicate of a0 within the dump
    with Index.open(ix) as r_ix:
        assert len(r_ix) == 2 and "a0" in r_ix and "a1" not in r_ix
    dump2 = tmp_path / "dump2.jsonl"
    jsonl(
        dump2,
        [
            {"id": "b0", "text": DOCS[1]},  # seen before (near a0)
            {"id": "b1", "text": DOCS[3]},  # new
            {"id": "b2", "text": DOCS[2] + "."},  # near a2
        ],
    )
    out2 = tmp_path / "kept2.jsonl"
    r = run("dedup", str(dump2), "-o", str(out2), "--against", str(ix), "--update", "-q")
    assert r.returncode == 0, r.stderr
    assert [json.loads(line)["id"] for line in out2.read_text().splitlines()] == ["b1"]
    with Index.open(ix) as r_ix:
        assert len(r_ix) == 3 and "b1" in r_ix
    # without --update the index is only read; b1, which it holds as itself (same id, same
    # fingerprint), is kept again, not dropped as its own near-duplicate
    out3 = tmp_path / "kept3.jsonl"
    r = run("dedup", str(dump2), "-o", str(out3), "--against", str(ix), "-q")
    assert r.returncode == 0 and out3.read_text() == out2.read_text()
    with Index.open(ix) as r_ix:
        assert len(r_ix) == 3
    r = run("dedup", str(dump2), "-o", str(out3), "--update")
    assert r.returncode == 2 and "--against" in r.stderr
    small = tmp_path / "small"
    assert run("index", "create", str(small), "--distance", "3").returncode == 0
    r = run("dedup", str(dump2), "-o", str(out3), "--against", str(small))
    assert r.returncode == 2 and "up to 3 bits" in r.stderr


def test_dedup_python_api_against(tmp_path):
    from neardup import dedup

    with Index.create(tmp_path / "ix", distance=6) as ix:
        r1 = dedup(DOCS[:3], against=ix, update=True)
        assert r1.kept.tolist() == [True, False, True] and len(ix) == 2
        r2 = dedup([DOCS[1], DOCS[3]], against=ix, update=True)
        assert r2.kept.tolist() == [False, True] and len(ix) == 3
        assert sorted(ix.query_arrays(np.asarray(r2.fingerprints)).id.tolist()) == [0, 1]
        # a new text whose position is an id the index holds for another text: named, and
        # neither the index nor anything else changes
        with pytest.raises(InputError, match=r"^<input>:0: id 0 is already in index"):
            dedup(["entirely unrelated words about another subject", DOCS[3]], against=ix,
                  update=True)  # fmt: skip
        assert len(ix) == 3

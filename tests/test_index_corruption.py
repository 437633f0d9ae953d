"""Damage every kind of index file and check that neardup never crashes, hangs or strays.

Each file of an index (MANIFEST, fingerprints, tables, keys, key order, string blob and offsets,
sketches and shingle counts, tombstones) is flipped, truncated, extended, emptied, deleted, swapped with a sibling or, for the
manifest, edited with a matching checksum. A worker process (so a segfault fails the test rather
than killing pytest) then opens each damaged copy, queries it, checks ``in``, verifies it, writes
to it and runs ``neardup index query`` on it. Every case must end in a one-line
``CorruptIndexError`` (on open or from ``verify()``) or in the right answers, and nothing outside
the index directory may be read or written.
"""

from __future__ import annotations

import json
import os
import random
import shutil
import subprocess
import sys
from typing import Any

import numpy as np
import pytest

from neardup.core.sketch import Sketches
from neardup.index import Index, storage

DISTANCE = 3

WORKER = r"""
import contextlib, io, json, os, sys
import numpy as np
from neardup.index import CorruptIndexError, Index
from neardup.cli.main import main

cases, queries, probe_ids, sketches = json.load(open(sys.argv[1]))
q = np.array(queries, dtype=np.uint64)
if sketches is not None:
    from neardup.core.sketch import Sketches

    sk = Sketches(np.array(sketches[0], dtype=np.uint64), np.array(sketches[1], dtype=np.uint32))


def one_line(e):
    return {"type": type(e).__name__, "message": str(e)}


for case in cases:
    print("START", case["label"], flush=True)
    path = case["dir"]
    out = {"label": case["label"]}
    try:
        with Index.open(path) as ix:
            m = ix.query_arrays(q, 3)
            out["answer"] = [m.query_index.tolist(), [str(i) for i in m.id.tolist()],
                             m.distance.tolist(), len(ix), ix.contains(probe_ids).tolist(),
                             [i in ix for i in probe_ids]]
            if sketches is not None:
                v = ix.verified_query(sk, 0.5, 3)
                out["answer"].append([v.query_index.tolist(), [str(i) for i in v.ids.tolist()],
                                      v.distances.tolist(), v.jaccards.tolist()])
            try:
                ix.verify()
                out["verified"] = True
            except CorruptIndexError as e:
                out["verify_error"] = one_line(e)
    except Exception as e:
        out["open_error"] = one_line(e)
    try:
        with Index.open(path, "w") as w:
            new = [f"new{k}" for k in range(3)] if w.id_type == "str" else [10**9 + k for k in range(3)]
            if sketches is None:
                w.add(q[:3] ^ np.uint64(1 << 40), ids=new)
            else:
                w.add(None, ids=new, sketches=sk.take(np.arange(3)))
                w.verified_query(sk, 0.5, 3)
            w.remove(probe_ids[:2], missing="ignore")
            w.compact()
            w.query(q[:5])
        out["write"] = "ok"
    except Exception as e:
        out["write_error"] = one_line(e)
    err = io.StringIO()
    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
        try:
            main(["index", "query", path, "--fingerprints", case["queries"], "-q",
                  "-o", os.path.join(os.path.dirname(path), "cli.jsonl")])
            code = 0
        except SystemExit as e:
            code = e.code
    out["cli"] = [code, err.getvalue()]
    print("RESULT", json.dumps(out), flush=True)
print("DONE", flush=True)
"""


def _build(path, str_ids: bool, sketches: bool = False) -> tuple[np.ndarray, list, Any]:
    """An index of three runs (one with tombstones); returns the queries, some ids and, for an
    index with sketches, the queries' sketches."""
    rng = np.random.default_rng(7)
    base = rng.integers(0, 2**64, 120, dtype=np.uint64, endpoint=False)
    near = base ^ (np.uint64(1) << rng.integers(0, 64, 120).astype(np.uint64))
    fps = np.concatenate([base, near])
    ids: list = [f"doc-{i}-é" for i in range(len(fps))] if str_ids else list(range(len(fps)))
    queries = np.concatenate([base[:40], near[100:140], rng.integers(0, 2**64, 20,
                                                                      dtype=np.uint64)])  # fmt: skip
    sk = qsk = None
    if sketches:  # made up: word 0 the fingerprint, near rows a few bits from their base but
        # the last 40 unrelated to it (the sketches, not the fingerprints, tell them apart)
        words = rng.integers(0, 2**64, (240, 4), dtype=np.uint64)
        flips = np.uint64(1) << rng.integers(0, 64, (80, 3)).astype(np.uint64)
        words[120:200, 1:] = words[:80, 1:] ^ flips
        words[:, 0] = fps
        sk = Sketches(words, rng.integers(50, 60, 240).astype(np.uint32))
        qsk = Sketches(
            np.concatenate([words[:40], words[220:260], rng.integers(0, 2**64, (20, 4), dtype=np.uint64)]),
            np.concatenate([sk.sizes[:40], sk.sizes[220:260], np.full(20, 55, np.uint32)]),
        )  # fmt: skip
        qsk.words[:, 0] = queries

    def add(lo: int, hi: int) -> None:
        if sk is None:
            ix.add(fps[lo:hi], ids=ids[lo:hi])
        else:
            ix.add(None, ids=ids[lo:hi], sketches=sk.take(np.arange(lo, hi)))

    with Index.create(
        path, distance=DISTANCE, blocks=4, threshold=0.5 if sketches else None,
        sketch_words=4 if sketches else None,
    ) as ix:  # fmt: skip
        ix.max_segments = 8
        add(0, 150)
        add(150, 200)
        ix.remove(ids[10:20])
        add(200, 240)
    return queries, [ids[5], ids[15], ids[199], "nope" if str_ids else -1], qsk


def _flip(data: bytearray, lo: int, hi: int, rng: random.Random) -> bytearray:
    i = rng.randrange(lo, max(lo + 1, hi)) if hi > lo else lo
    data[min(i, len(data) - 1)] ^= 1 << rng.randrange(8)
    return data


def _mutations(name: str, data: bytes, siblings: list[str], rng: random.Random):
    """(label, new bytes or None to delete, or a sibling's name to copy) for one file."""
    header = 128 if name.endswith(".npy") else 0
    yield "delete", None
    yield "empty", b""
    yield "truncate-half", data[: len(data) // 2]
    yield "truncate-1", data[:-1]
    yield "extend", data + b"\x00" * 8
    for k in range(3):
        yield (
            f"flip-header-{k}",
            bytes(_flip(bytearray(data), 0, min(header or 64, len(data)), rng)),
        )
        yield f"flip-data-{k}", bytes(_flip(bytearray(data), header, len(data), rng))
    if name.endswith(".npy"):
        yield "flip-last", bytes(_flip(bytearray(data), len(data) - 1, len(data), rng))
        arr = np.load(__import__("io").BytesIO(data))
        if arr.size > 1:
            perm = np.random.default_rng(1).permutation(arr)  # same structure, wrong content
            buf = __import__("io").BytesIO()
            np.save(buf, perm)
            yield "shuffled", buf.getvalue()
            rev = arr[::-1].copy()
            buf = __import__("io").BytesIO()
            np.save(buf, rev)
            yield "reversed", buf.getvalue()
        for s in siblings:
            yield f"swap-{s}", s


def _manifest_edits(sketches: bool):
    """Edits with a matching checksum: a manifest that is consistent but lies."""
    seg = lambda d: d["segments"][0]  # noqa: E731
    if sketches:
        return {
            "sketch-words-lie": lambda d: d.update(sketch_words=8),
            "no-sketch-words": lambda d: d.pop("sketch_words"),
            "threshold-over-1": lambda d: d.update(threshold=2.0),
            "threshold-string": lambda d: d.update(threshold="0.8"),
            "drop-sketch": lambda d: seg(d)["files"].pop("sketch"),
            "drop-ssize": lambda d: seg(d)["files"].pop("ssize"),
            "sketch-shape-lie": lambda d: seg(d)["files"]["sketch"].update(shape=[seg(d)["rows"]]),
            "ssize-dtype-lie": lambda d: seg(d)["files"]["ssize"].update(dtype="<u8"),
            "sketch-outside": lambda d: seg(d)["files"]["sketch"].update(name="../outside.npy"),
            "version-1": lambda d: d.update(format_version=1),
            "rows-more": lambda d: seg(d).update(rows=seg(d)["rows"] + 1),
        }
    return {
        "outside": lambda d: seg(d)["files"]["fp"].update(name="../outside.npy"),
        "absolute-file": lambda d: seg(d)["files"]["t1"].update(name="/tmp/x.t1.npy"),
        "absolute-segment": lambda d: seg(d).update(name="/tmp/abs"),
        "dotdot-segment": lambda d: seg(d).update(name=".."),
        "other-segment-file": lambda d: seg(d)["files"]["fp"].update(
            name=d["segments"][1]["files"]["fp"]["name"]
        ),
        "missing-key": lambda d: d.pop("blocks"),
        "string-int": lambda d: d.update(distance="3"),
        "float": lambda d: d.update(generation=1.5),
        "null-segments": lambda d: d.update(segments=None),
        "id-type-swap": lambda d: d.update(id_type="int64" if d["id_type"] == "str" else "str"),
        "rows-more": lambda d: seg(d).update(rows=seg(d)["rows"] + 1),
        "rows-less": lambda d: seg(d).update(rows=seg(d)["rows"] - 1),
        "shape-lie": lambda d: seg(d)["files"]["key"].update(shape=[seg(d)["rows"] + 1]),
        "bytes-lie": lambda d: seg(d)["files"]["key"].update(
            bytes=seg(d)["files"]["key"]["bytes"] + 8
        ),
        "dtype-lie": lambda d: seg(d)["files"]["kord"].update(dtype="<i8"),
        "crc-lie": lambda d: seg(d)["files"]["fp"].update(crc32=0),
        "deep": lambda d: d.update(extra=[[[[[[]]]]]]),
        "layout": lambda d: d.update(blocks=64, tables=64),
        "tables-lie": lambda d: d.update(tables=3),
        "drop-table": lambda d: seg(d)["files"].pop("t3"),
        "tombstones-lie": lambda d: d["segments"][0].update(
            deleted=dict(seg(d)["files"]["key"], name=seg(d)["name"] + ".del9.npy")
        ),
        "duplicate-segment": lambda d: d["segments"].append(seg(d)),
        "empty-object": lambda d: d.update(segments=[{}]),
    }


def _cases(root: str, pristine: str, queries_file: str, sketches: bool) -> list[dict]:
    rng = random.Random(11)
    cases = []
    names = sorted(n for n in os.listdir(pristine) if n != "LOCK")
    for name in names:
        data = open(os.path.join(pristine, name), "rb").read()
        seg = name.split(".")[0]
        siblings = [n for n in names if n.startswith(seg + ".") and n != name][:2]
        for label, new in _mutations(name, data, siblings, rng):
            d = os.path.join(root, f"{len(cases):04d}", "ix")
            shutil.copytree(pristine, d)
            target = os.path.join(d, name)
            if new is None:
                os.unlink(target)
            elif isinstance(new, str):
                shutil.copyfile(os.path.join(pristine, new), target)
            else:
                with open(target, "wb") as f:
                    f.write(new)
            cases.append({"label": f"{name}:{label}", "dir": d, "queries": queries_file})
    for label, edit in _manifest_edits(sketches).items():
        d = os.path.join(root, f"{len(cases):04d}", "ix")
        shutil.copytree(pristine, d)
        doc = json.loads(open(os.path.join(d, "MANIFEST")).read())
        doc.pop("manifest_crc32")
        edit(doc)
        doc["manifest_crc32"] = storage._body_crc(doc)
        with open(os.path.join(d, "MANIFEST"), "w") as f:
            json.dump(doc, f)
        cases.append({"label": f"MANIFEST:edit-{label}", "dir": d, "queries": queries_file})
    return cases


def _outside_snapshot(root: str) -> dict[str, bytes]:
    """Every file under ``root`` that is not inside a case's index directory."""
    out = {}
    for dirpath, dirs, files in os.walk(root):
        if os.path.basename(dirpath) == "ix":
            dirs[:] = []
            continue
        for n in files:
            if n != "cli.jsonl":
                out[os.path.join(dirpath, n)] = open(os.path.join(dirpath, n), "rb").read()
    return out


@pytest.mark.parametrize(
    "str_ids, sketches", [(False, False), (True, False), (False, True)],
    ids=["int-ids", "str-ids", "sketches"],
)  # fmt: skip
@pytest.mark.slow
def test_damaged_index_files_give_a_clear_error_or_the_right_answer(tmp_path, str_ids, sketches):
    pristine = str(tmp_path / "pristine" / "ix")
    queries, probe, qsk = _build(pristine, str_ids, sketches)
    with Index.open(pristine) as ix:
        m = ix.query_arrays(queries, DISTANCE)
        expected = [m.query_index.tolist(), [str(i) for i in m.id.tolist()],
                    m.distance.tolist(), len(ix), ix.contains(probe).tolist(),
                    [i in ix for i in probe]]  # fmt: skip
        if qsk is not None:
            v = ix.verified_query(qsk, 0.5, DISTANCE)
            expected.append([v.query_index.tolist(), [str(i) for i in v.ids.tolist()],
                             v.distances.tolist(), v.jaccards.tolist()])  # fmt: skip
            assert v.size > 40 and v.size < len(m.id)  # the sketches decide
    assert len(m.id) > 40  # the queries do find things
    root = str(tmp_path / "cases")
    os.mkdir(root)
    qfile = os.path.join(root, "queries.txt")
    with open(qfile, "w") as f:
        f.write("".join(f"{v}\n" for v in queries.tolist()))
    # a file outside the index that a lying manifest could point at
    shutil.copyfile(os.path.join(pristine, "s00000000.fp.npy"), os.path.join(root, "outside.npy"))
    cases = _cases(root, pristine, qfile, sketches)
    spec = os.path.join(str(tmp_path), "cases.json")
    skjson = None if qsk is None else [qsk.words.tolist(), qsk.sizes.tolist()]
    with open(spec, "w") as f:
        json.dump([cases, queries.tolist(), probe, skjson], f)
    outside = _outside_snapshot(root)
    try:
        run = subprocess.run(
            [sys.executable, "-c", WORKER, spec], capture_output=True, text=True, timeout=600
        )
    except subprocess.TimeoutExpired as e:
        started = [ln for ln in (e.stdout or b"").decode().splitlines() if ln.startswith("START")]
        pytest.fail(f"hung on {started[-1] if started else 'the first case'}")
    lines = run.stdout.splitlines()
    started = [ln for ln in lines if ln.startswith("START")]
    assert run.returncode == 0 and lines[-1] == "DONE", (
        f"worker died (status {run.returncode}) on {started[-1] if started else '?'}: "
        f"{run.stderr[-2000:]}"
    )
    results = [json.loads(ln[7:]) for ln in lines if ln.startswith("RESULT")]
    assert len(results) == len(cases)
    kinds = {"open": 0, "verify": 0, "same": 0}
    for r in results:
        label = r["label"]
        if "open_error" in r:
            e = r["open_error"]
            assert e["type"] in ("CorruptIndexError", "FileNotFoundError"), (label, e)
            assert "\n" not in e["message"] and "ix" in e["message"], (label, e)
            kinds["open"] += 1
        elif "verify_error" in r:
            assert "\n" not in r["verify_error"]["message"], label
            kinds["verify"] += 1
        else:
            assert r["answer"] == expected, f"{label}: opened, verified, wrong answers"
            kinds["same"] += 1
        if "write_error" in r:
            e = r["write_error"]
            assert e["type"] in ("CorruptIndexError", "FileNotFoundError"), (label, e)
            assert "\n" not in e["message"], (label, e)
        code, err = r["cli"]
        assert code in (0, 2) and "Traceback" not in err, (label, err)
        if code == 2:
            assert err.count("\n") == 1, (label, err)
        case_dir = next(c["dir"] for c in cases if c["label"] == label)
        stray = [n for n in os.listdir(case_dir)
                 if n not in ("LOCK", "MANIFEST") and not n.startswith("s")]  # fmt: skip
        assert stray == [], (label, stray)
    assert _outside_snapshot(root) == outside  # nothing outside an index was written
    assert kinds["open"] > len(cases) // 2 and kinds["verify"] > 10, kinds

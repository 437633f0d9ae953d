"""Compressed indexes (``compress=True``): the same answers as brute force and as the plain
index, through add/remove/compact/convert/reopen sequences, crashes, corrupt files and the CLI."""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import time
import zlib
from unittest import mock

import naive
import numpy as np
import pytest
from cli import invoke
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from strategies import fingerprints
from test_index_crash import PLAN, model_after, same

from neardup.index import CorruptIndexError, Index
from neardup.index.codec import CompressedTable


def expected(model: dict, queries: np.ndarray, k: int):
    ids = np.array(sorted(model), dtype=np.int64)
    corpus = np.array([model[i] for i in ids.tolist()], dtype=np.uint64)
    qi, ci, di = naive.query(corpus, queries, k)
    return qi, ids[ci] if len(ci) else ci, di


def check(ix: Index, model: dict, queries: np.ndarray, k: int) -> None:
    got = ix.query_arrays(queries, distance=k)
    qi, ids, di = expected(model, queries, k)
    np.testing.assert_array_equal(got.query_index, qi)
    np.testing.assert_array_equal(got.id, ids)
    np.testing.assert_array_equal(got.distance, di)
    mask = ix.dedup_mask(queries, k)
    np.testing.assert_array_equal(mask, np.isin(np.arange(len(queries)), qi))
    assert len(ix) == len(model)


ops = st.lists(
    st.one_of(
        st.tuples(st.just("add"), fingerprints(max_size=40)),
        st.tuples(st.just("remove"), st.lists(st.integers(0, 200), max_size=15)),
        st.tuples(st.just("compact"), st.sampled_from([None, True, False])),
        st.tuples(st.just("reopen")),
    ),
    max_size=10,
)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    ops=ops,
    layout=st.sampled_from([(0, 1), (1, 2), (2, 3), (3, 4), (3, 5), (3, 6), (4, 9), (2, 64)]),
    max_segments=st.integers(2, 6),
    queries=fingerprints(max_size=30),
)
def test_compressed_sequences_match_brute_force(
    tmp_path_factory, ops, layout, max_segments, queries
):
    distance, blocks = layout
    path = tmp_path_factory.mktemp("ix") / "index"
    model: dict[int, int] = {}
    next_id = 0
    compressed = True
    with mock.patch("os.fsync"):  # durability is tested by the crash test below
        ix = Index.create(path, distance=distance, blocks=blocks, compress=True)
        ix.max_segments = max_segments
        try:
            for op in ops:
                if op[0] == "add":
                    ix.add(op[1])
                    for v in op[1].tolist():
                        model[next_id] = v
                        next_id += 1
                elif op[0] == "remove":
                    n = ix.remove(op[1], missing="ignore")
                    gone = {i for i in op[1] if i in model}
                    assert n == len(gone)
                    for i in gone:
                        del model[i]
                elif op[0] == "compact":
                    ix.compact(compress=op[1])
                    compressed = compressed if op[1] is None else op[1]
                    assert len(ix.info()["segments"]) <= 1
                else:
                    ix.close()
                    ix = Index.open(path, "w")
                    ix.max_segments = max_segments
                assert ix.codec == ("ef" if compressed else None)
                for seg in ix._segs:
                    assert isinstance(seg.fps, CompressedTable) == compressed
                probe = np.concatenate([queries, np.array(list(model.values())[:5], np.uint64)])
                for k in sorted({0, distance}):
                    check(ix, model, probe, k)
            ix.verify()
        finally:
            ix.close()
        with Index.open(path) as reader:
            check(reader, model, queries, distance)


def corpus(n: int, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    base = rng.integers(0, 2**64, n, dtype=np.uint64)
    flips = np.uint64(1) << rng.integers(0, 64, (n, 2)).astype(np.uint64)
    near = base[: n // 3] ^ flips[: n // 3, 0] ^ flips[: n // 3, 1]
    return np.concatenate([base, near, base[:50], np.array([0, 2**64 - 1], np.uint64)])


@pytest.mark.parametrize("ids", ["int", "str"])
def test_conversion_round_trip_gives_identical_answers(tmp_path, ids):
    fps = corpus(6000, 1)
    keys = [f"doc-{i}" for i in range(len(fps))] if ids == "str" else None
    queries = np.concatenate([fps[:400] ^ np.uint64(1 << 33), fps[-300:], corpus(200, 9)])
    path = tmp_path / "ix"
    with Index.create(path, distance=3, blocks=5) as ix:
        ix.add(fps[:4000], keys[:4000] if keys else None)
        ix.add(fps[4000:], keys[4000:] if keys else None)
        ix.remove(keys[10:30] if keys else list(range(10, 30)))
        plain = ix.query(queries)
        plain_bytes = ix.info()["bytes"]
        ix.compact(compress=True)
        assert ix.codec == "ef" and len(ix.info()["segments"]) == 1
        assert ix.query(queries) == plain
        assert ix.info()["bytes"] < 0.9 * plain_bytes  # 8k values: 54 bits of 64 per table
        ix.verify()
        extra = corpus(500, 5)
        ix.add(extra, [f"new-{i}" for i in range(len(extra))] if keys else None)
        after_add = ix.query(queries)
    manifest = json.loads((path / "MANIFEST").read_text())
    assert manifest["format_version"] == 2 and manifest["codec"] == "ef"
    assert all(s["codec"] == "ef" for s in manifest["segments"])
    with Index.open(path) as reader:
        assert reader.query(queries) == after_add
        assert reader.info()["codec"] == "ef"
    with Index.open(path, "w") as ix:
        ix.compact(compress=False)
        assert ix.codec is None and ix.query(queries) == after_add
        ix.compact(compress=False)  # nothing to do: no new generation
        gen = ix.generation
        ix.compact()
        assert ix.generation == gen
    assert json.loads((path / "MANIFEST").read_text())["format_version"] == 1


def test_empty_compressed_index_and_conversion(tmp_path):
    with Index.create(tmp_path / "ix", distance=2, compress=True) as ix:
        assert ix.query([1, 2]) == [[], []]
        ix.compact(compress=False)
        assert ix.codec is None and ix.info()["segments"] == []
        ix.add([5, 7])
        ix.compact(compress=True)
        assert ix.query([5]) == [[(0, 0), (1, 1)]]
        ix.remove([0, 1])
        assert ix.query([5]) == [[]] and len(ix) == 0


def _rewrite_manifest(path, change) -> None:
    doc = json.loads((path / "MANIFEST").read_text())
    doc.pop("manifest_crc32")
    change(doc)
    doc["manifest_crc32"] = zlib.crc32(
        json.dumps(doc, sort_keys=True, separators=(",", ":")).encode()
    )
    (path / "MANIFEST").write_text(json.dumps(doc))


def test_corrupt_compressed_tables_are_named(tmp_path):
    path = tmp_path / "ix"
    with Index.create(path, distance=3, blocks=4, compress=True) as ix:
        ix.add(corpus(3000, 2))
    name = "s00000000.t2.npy"
    f = path / name
    good = f.read_bytes()
    data = bytearray(good)
    data[-3] ^= 0x40
    f.write_bytes(bytes(data))
    with Index.open(path) as r, pytest.raises(CorruptIndexError, match=f"{name}: checksum"):
        r.verify()
    # a table whose checksum matches but whose high bits were changed: decoding finds it
    f.write_bytes(good)
    words = np.load(f)
    words[20] ^= np.uint64(1 << 5)  # a bit of the high-bit vector
    np.save(f, words)
    assert os.path.getsize(f) == len(good)
    crc = zlib.crc32(f.read_bytes())
    _rewrite_manifest(path, lambda d: d["segments"][0]["files"]["t2"].update(crc32=crc))
    with Index.open(path) as r, pytest.raises(CorruptIndexError, match=f"{name}: the high-bit"):
        r.verify()


def test_newer_format_and_unknown_codec_are_refused(tmp_path):
    path = tmp_path / "ix"
    with Index.create(path, distance=3, compress=True) as ix:
        ix.add([1, 2, 3])
    _rewrite_manifest(path, lambda d: d.update(format_version=4))
    with pytest.raises(CorruptIndexError, match="format version 4 is not supported"):
        Index.open(path)
    _rewrite_manifest(path, lambda d: d.update(format_version=3))  # the format with sketches
    with pytest.raises(CorruptIndexError, match="'sketch_words' is None in a version 3 index"):
        Index.open(path)
    _rewrite_manifest(path, lambda d: d.update(format_version=2))
    _rewrite_manifest(path, lambda d: d["segments"][0]["files"]["fp"].update(codec="zz"))
    with pytest.raises(CorruptIndexError, match="unknown table codec 'zz'"):
        Index.open(path)


WRITER = r"""
import sys
import numpy as np
from neardup.index import Index

path, start = sys.argv[1], int(sys.argv[2])
ix = Index.open(path, "w")
ix.max_segments = 4
step = start
print("ready", flush=True)
while True:
    kind, fps, ids = plan(step)
    if kind == "add":
        ix.add(fps, ids=ids)
    elif kind == "remove":
        ix.remove(ids, missing="ignore")
    else:
        ix.compact(compress=step % 2 == 0)
    print(f"committed {step}", flush=True)
    step += 1
"""


def test_sigkill_during_compressed_writes_reopens_committed_state(tmp_path):
    path = tmp_path / "ix"
    Index.create(path, distance=3, blocks=5, compress=True).close()
    rnd = random.Random(99)
    step = 0
    script = "import numpy as np\n" + PLAN + WRITER
    # at least 5 kills; on a loaded machine a writer may commit little before each kill, so go
    # on (waiting longer each time) until some writes have committed
    for _round in range(30):
        if _round >= 5 and step > 3:
            break
        proc = subprocess.Popen(
            [sys.executable, "-c", script, str(path), str(step)], stdout=subprocess.PIPE, text=True
        )
        assert proc.stdout is not None
        assert proc.stdout.readline().strip() == "ready"
        time.sleep(rnd.uniform(0.05, 0.5) * (1 + _round // 5))
        os.kill(proc.pid, signal.SIGKILL)
        out, _ = proc.communicate()
        done = [int(line.split()[1]) for line in out.splitlines() if line.startswith("committed")]
        last = done[-1] + 1 if done else step
        with Index.open(path) as ix:
            ix.verify()
            rng = np.random.default_rng(last)
            sample = list(model_after(last + 1).values())
            queries = np.array(
                rng.choice(sample, min(200, len(sample))) if sample else [], dtype=np.uint64
            )
            if same(ix, model_after(last), queries):
                step = last
            else:
                assert same(ix, model_after(last + 1), queries), f"round {_round}: lost state"
                step = last + 1
    assert step > 3


def test_cli_create_compress_and_compact_convert(tmp_path):
    path = str(tmp_path / "ix")
    fps = corpus(2000, 4)
    src = tmp_path / "fps.txt"
    src.write_text("\n".join(map(str, fps.tolist())) + "\n")
    r = invoke("neardup", "index", "create", path, "--distance", "3", "--compress", text=True)
    assert r.returncode == 0 and "compressed" in r.stderr
    assert invoke("neardup", "index", "add", path, "--fingerprints", str(src), "-q").returncode == 0
    info = json.loads(invoke("neardup", "index", "info", path, "--verify", text=True).stdout)
    assert info["codec"] == "ef" and info["verified"] and info["entries"] == len(fps)
    q = invoke("neardup", "index", "query", path, "--fingerprints", str(src), "-q", text=True)
    assert q.returncode == 0
    assert invoke("neardup", "index", "compact", path, "--no-compress").returncode == 0
    assert json.loads(invoke("neardup", "index", "info", path, text=True).stdout)["codec"] is None
    q2 = invoke("neardup", "index", "query", path, "--fingerprints", str(src), "-q", text=True)
    assert q2.stdout == q.stdout
    assert invoke("neardup", "index", "compact", path, "--compress").returncode == 0
    info = json.loads(invoke("neardup", "index", "info", path, text=True).stdout)
    assert info["codec"] == "ef"


@pytest.mark.parametrize("compress", [False, True])
def test_repeated_ids_in_a_batch_are_refused(tmp_path, compress):
    with Index.create(tmp_path / "ix", distance=2, compress=compress) as ix:
        with pytest.raises(ValueError, match="repeats; ids must be unique"):
            ix.add([1, 2, 3], ids=[7, 8, 7])
        with pytest.raises(ValueError, match="repeats; ids must be unique"):
            ix.add([1, 2], ids=["a", "a"])
        assert len(ix) == 0 and ix.generation == 0
        ix.add(np.arange(5000, dtype=np.uint64), ids=np.arange(5000)[::-1].copy())
        with pytest.raises(ValueError, match="id 4999 is already in the index"):
            ix.add([9], ids=[4999])
        assert len(ix) == 5000


def test_manifest_codec_fields_are_checked(tmp_path):
    path = tmp_path / "ix"
    with Index.create(path, distance=3, compress=True) as ix:
        ix.add([1, 2, 3])
    for edit, message in [
        (lambda d: d["segments"][0]["files"]["fp"].update(values=4), "holds 4 values for 3 rows"),
        (
            lambda d: d["segments"][0]["files"]["key"].update(codec="ef"),
            "file 'key' is a coded table",
        ),
        (lambda d: d["segments"][0]["files"]["t1"].pop("values"), "without a uint64 array"),
        (lambda d: d.pop("codec"), "'codec' is None in a version 2 index"),
    ]:
        good = (path / "MANIFEST").read_bytes()
        _rewrite_manifest(path, edit)
        with pytest.raises(CorruptIndexError, match=message):
            Index.open(path)
        (path / "MANIFEST").write_bytes(good)
    with Index.open(path) as r:
        assert r.codec == "ef" and len(r) == 3

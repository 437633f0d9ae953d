"""Compressed indexes (``compress=True``): the same answers as brute force and as the plain
index, through add/remove/compact/convert/reopen sequences, crashes, corrupt files and the CLI."""

from __future__ import annotations

import json
import os
import zlib
from unittest import mock

import numpy as np
import pytest
from cli import invoke
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from indexes import LAYOUTS, Model, apply, check, index_ops, kill_writers
from strategies import fingerprints

from neardup.index import CorruptIndexError, Index
from neardup.index.codec import CompressedTable


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    ops=index_ops(compact="codec"),
    layout=LAYOUTS,
    max_segments=st.integers(2, 6),
    queries=fingerprints(max_size=30),
)
@pytest.mark.slow
def test_compressed_sequences_match_brute_force(
    tmp_path_factory, ops, layout, max_segments, queries
):
    distance, blocks = layout
    path = tmp_path_factory.mktemp("ix") / "index"
    model = Model()
    compressed = True
    with mock.patch("os.fsync"):  # durability is tested by the crash test below
        ix = Index.create(path, distance=distance, blocks=blocks, compress=True)
        ix.max_segments = max_segments
        try:
            for op in ops:
                ix = apply(ix, op, model)
                if op[0] == "compact":
                    compressed = compressed if op[1] is None else op[1]
                assert ix.codec == ("ef" if compressed else None)
                for seg in ix._segs:
                    assert isinstance(seg.fps, CompressedTable) == compressed
                probe = np.concatenate([queries, np.array(list(model.fps.values())[:5], np.uint64)])
                for k in sorted({0, distance}):
                    check(ix, model.fps, probe, k)
            ix.verify()
        finally:
            ix.close()
        with Index.open(path) as reader:
            check(reader, model.fps, queries, distance)


def corpus(n: int, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    base = rng.integers(0, 2**64, n, dtype=np.uint64)
    flips = np.uint64(1) << rng.integers(0, 64, (n, 2)).astype(np.uint64)
    near = base[: n // 3] ^ flips[: n // 3, 0] ^ flips[: n // 3, 1]
    return np.concatenate([base, near, base[:50], np.array([0, 2**64 - 1], np.uint64)])


@pytest.mark.slow
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


@pytest.mark.slow
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


@pytest.mark.slow
def test_sigkill_during_compressed_writes_reopens_committed_state(tmp_path):
    path = tmp_path / "ix"
    Index.create(path, distance=3, blocks=5, compress=True).close()
    step = kill_writers(path, 99, alternate=True)
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
    assert info["codec"] == "ef" and info["checksums_checked"] and info["entries"] == len(fps)
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

"""neardup.index.Index against a brute-force model: add/remove/query/compact/reopen sequences,
string ids, locking, corrupt and truncated files."""

from __future__ import annotations

import json
import os
from unittest import mock

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from indexes import LAYOUTS, Model, apply, check, index_ops
from strategies import fingerprints

from neardup.index import CorruptIndexError, Index, IndexLockedError, choose_index_blocks


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    ops=index_ops(),
    layout=LAYOUTS,
    max_segments=st.integers(2, 6),
    queries=fingerprints(max_size=30),
)
@pytest.mark.slow
def test_sequences_match_brute_force(tmp_path_factory, ops, layout, max_segments, queries):
    distance, blocks = layout
    path = tmp_path_factory.mktemp("ix") / "index"
    model = Model()
    with mock.patch("os.fsync"):  # durability is tested by the crash tests; keep this fast
        ix = Index.create(path, distance=distance, blocks=blocks)
        ix.max_segments = max_segments
        try:
            for op in ops:
                ix = apply(ix, op, model)
                assert len(ix.info()["segments"]) <= max_segments
                probe = np.concatenate([queries, np.array(list(model.fps.values())[:5], np.uint64)])
                for k in sorted({0, distance}):
                    check(ix, model.fps, probe, k)
            for i in list(model.fps)[:3]:
                assert i in ix
            assert model.next_id not in ix
            ix.verify()
        finally:
            ix.close()
        reader = Index.open(path)
        check(reader, model.fps, queries, distance)
        reader.close()


def test_query_lists_and_examples(tmp_path):
    with Index.create(tmp_path / "ix", distance=3) as ix:
        ix.add([0b1011, 0b1001, 0b111 << 40], ids=[10, 11, 12])
        assert ix.query([0b1000, 0xFFFF << 20]) == [[(11, 1), (10, 2)], []]
        assert ix.query([0b1000], distance=1) == [[(11, 1)]]
        assert ix.dedup_mask([0b1000, 0xFFFF << 20]).tolist() == [True, False]
        ix.add([5, 6])  # automatic ids follow the largest
        assert 13 in ix and 14 in ix and 15 not in ix
        with pytest.raises(ValueError, match="distance"):
            ix.query([1], distance=4)
        with pytest.raises(ValueError, match="already in the index"):
            ix.add([1], ids=[11])
        with pytest.raises(ValueError, match="repeat"):
            ix.add([1, 2], ids=[20, 20])
        with pytest.raises(ValueError, match="string ids"):
            ix.add([1], ids=["a"])
        with pytest.raises(KeyError, match="99"):
            ix.remove([10, 99])
        assert 10 in ix  # nothing removed
        assert ix.remove([10, 99], missing="ignore") == 1
        assert len(ix) == 4


def test_string_ids(tmp_path):
    rng = np.random.default_rng(1)
    fps = rng.integers(0, 2**64, 300, dtype=np.uint64, endpoint=False)
    fps[150:] = fps[:150] ^ np.uint64(0b101)
    names = [f"doc-{i}-é" for i in range(300)]
    with Index.create(tmp_path / "ix", distance=2, blocks=4) as ix:
        ix.max_segments = 3
        for s in range(0, 300, 50):
            ix.add(fps[s : s + 50], ids=names[s : s + 50])
        assert ix.id_type == "str" and len(ix) == 300
        assert "doc-3-é" in ix and "doc-3" not in ix and 3 not in ix
        res = ix.query(fps[:150])
        for i, r in enumerate(res):
            assert {x for x, _ in r} == {names[i], names[i + 150]}
            assert r[0] == (names[i], 0) and r[1] == (names[i + 150], 2)
        assert ix.remove(names[:100]) == 100
        ix.compact()
    with Index.open(tmp_path / "ix") as r:
        got = r.query_arrays(fps[:150])
        assert got.id.dtype == object
        assert set(got.id.tolist()) == set(names[100:])
        assert "doc-0-é" not in r


def test_empty_index_and_empty_batches(tmp_path):
    with Index.create(tmp_path / "ix", distance=3) as ix:
        assert len(ix) == 0 and 1 not in ix and ix.query([1, 2]) == [[], []]
        ix.add([])
        assert ix.query([]) == []
        ix.add([2**64 - 1, 0])
        assert ix.remove([0, 1]) == 2
        assert len(ix) == 0 and ix.info()["segments"] == []
        ix.compact()
        assert ix.query([0]) == [[]]


def test_writer_lock_and_read_only(tmp_path):
    path = tmp_path / "ix"
    w = Index.create(path, distance=3)
    w.add([1, 2, 3])
    with pytest.raises(IndexLockedError, match="already open for writing in this process"):
        Index.open(path, "w")
    r = Index.open(path)  # readers are not locked out
    with pytest.raises(ValueError, match="read-only"):
        r.add([4])
    w.add([4])
    assert len(r) == 3  # snapshot
    w.compact()  # deletes files the reader still maps
    assert r.query([3], distance=0) == [[(2, 0)]]
    r.refresh()
    assert len(r) == 4
    w.close()
    with pytest.raises(ValueError, match="closed"):
        w.query([1])
    Index.open(path, "w").close()
    with pytest.raises(FileExistsError):
        Index.create(path)
    with pytest.raises(CorruptIndexError, match="not a neardup index"):
        Index.open(tmp_path)


def _damage(path, name: str, how: str) -> None:
    f = path / name
    if how == "truncate":
        with open(f, "r+b") as fh:
            fh.truncate(os.path.getsize(f) - 8)
    elif how == "flip":
        data = bytearray(f.read_bytes())
        data[-3] ^= 0x40
        f.write_bytes(bytes(data))
    else:
        f.unlink()


@pytest.mark.parametrize("how", ["truncate", "flip", "delete"])
@pytest.mark.parametrize("role", ["fp", "t1", "key", "kord"])
def test_corrupt_files_are_named(tmp_path, how, role):
    path = tmp_path / "ix"
    with Index.create(path, distance=3, blocks=4) as ix:
        ix.add(np.arange(1000, dtype=np.uint64) * np.uint64(0x9E3779B97F4A7C15))
    name = f"s00000000.{role}.npy"
    _damage(path, name, how)
    if how == "flip" and role == "kord":
        # the key order is checked on open (kernels index with it): named at once
        with pytest.raises(CorruptIndexError, match=rf"{name}: position \d+ holds"):
            Index.open(path)
    elif how == "flip":
        r = Index.open(path)  # sizes and headers agree: opens; the checksum finds it
        with pytest.raises(CorruptIndexError, match=rf"{name}: checksum mismatch"):
            r.verify()
    else:
        with pytest.raises(CorruptIndexError, match=name):
            Index.open(path)


def test_corrupt_manifest(tmp_path):
    path = tmp_path / "ix"
    Index.create(path, distance=3).close()
    doc = json.loads((path / "MANIFEST").read_text())
    doc["distance"] = 4
    (path / "MANIFEST").write_text(json.dumps(doc))
    with pytest.raises(CorruptIndexError, match="manifest checksum"):
        Index.open(path)
    (path / "MANIFEST").write_text("{not json")
    with pytest.raises(CorruptIndexError, match="corrupt manifest"):
        Index.open(path)


def test_leftover_files_are_cleaned(tmp_path):
    path = tmp_path / "ix"
    with Index.create(path, distance=3) as ix:
        ix.add([1, 2])
    (path / "s00000099.fp.npy").write_bytes(b"partial")
    (path / ".s00000099.t1.npy.tmp").write_bytes(b"partial")
    with Index.open(path, "w") as ix:
        assert ix.query([1], distance=0) == [[(0, 0)]]
    assert not (path / "s00000099.fp.npy").exists()
    assert not (path / ".s00000099.t1.npy.tmp").exists()


def test_choose_index_blocks():
    assert choose_index_blocks(1_000, 3) == 4
    assert choose_index_blocks(10_000_000, 3) == 5
    assert choose_index_blocks(10**10, 3) > 5
    assert choose_index_blocks(10, 0) == 1


@pytest.mark.scale
@pytest.mark.slow
def test_larger_index_matches_brute_force(tmp_path):
    rng = np.random.default_rng(7)
    base = rng.integers(0, 2**64, 20_000, dtype=np.uint64, endpoint=False)
    flips = np.uint64(1) << rng.integers(0, 64, (20_000, 3)).astype(np.uint64)
    near = base ^ flips[:, 0] ^ flips[:, 1]
    model = dict(enumerate(np.concatenate([base, near]).tolist()))
    with Index.create(tmp_path / "ix", distance=3) as ix:
        ix.add(base)
        for s in range(0, 20_000, 4_000):
            ix.add(near[s : s + 4_000])
        queries = np.concatenate([near[:3000] ^ np.uint64(1 << 60), base[:2000]])
        check(ix, model, queries, 3)
        ix.compact()
        check(ix, model, queries, 3)

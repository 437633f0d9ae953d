"""index/segments: ids are checked before anything is written; segments are checked on open."""

from __future__ import annotations

import os

import numpy as np
import pytest

from neardup.errors import IdError
from neardup.index import CorruptIndexError, Index
from neardup.index.segments import convert_ids

FPS = np.arange(40, dtype=np.uint64) * np.uint64(0x9E3779B97F4A7C15)


@pytest.mark.parametrize(
    "ids, message, position",
    [
        (np.array([[5000], [5001]]), "one-dimensional", None),
        (np.array([1.0, 2.0]), "dtype float64", None),
        (np.array([True, False]), "dtype bool", None),
        (np.array([b"a", b"b"]), "dtype", None),
        ([5, "x"], "all integers or all strings", 1),
        (["x", 5], "all integers or all strings", 1),
        ([True, 5], "bool True", 0),
        ([1, 2.5], "float 2.5", 1),
        ([1, None], "NoneType None", 1),
        ([1, [2]], "list", 1),
        ([1, 2**63], "does not fit in int64", 1),
        (np.array([1, 2**63], dtype=np.uint64), "does not fit in int64", 1),
        (["a", "\ud800"], "not valid Unicode", 1),
        ("ab", "sequence of ints or strings", None),
        (b"ab", "sequence of ints or strings", None),
        ({1: 2, 3: 4}, "sequence of ints or strings", None),
        ({1, 2}, "sequence of ints or strings", None),
        (5, "sequence of ints or strings", None),
        ([1], "got 2 fingerprints but 1 ids", None),
        ([7, 7], "repeats", 1),
        (["a", "a"], "repeats", 1),
    ],
)
def test_bad_ids_are_refused_before_anything_is_written(tmp_path, ids, message, position):
    path = tmp_path / "ix"
    strings = isinstance(ids, list) and all(isinstance(v, str) for v in ids)
    base = ["p", "q", "r"] if strings else [100, 101, 102]
    with Index.create(path, distance=3) as ix:
        ix.add(FPS[:3], ids=base)
        before = sorted(os.listdir(path)), ix.generation
        with pytest.raises(IdError, match=message) as e:
            ix.add(FPS[3:5], ids=ids)
        assert e.value.position == position
        assert (sorted(os.listdir(path)), ix.generation) == before
        assert ix.query(FPS[:1], distance=0) == [[(base[0], 0)]]
    with Index.open(path, "w") as ix:  # still opens for writing, queries and compacts
        ix.compact()
        assert len(ix) == 3


def test_ids_of_the_other_kind_or_already_present_name_their_position(tmp_path):
    with Index.create(tmp_path / "ix", distance=3) as ix:
        ix.add(FPS[:3], ids=["a", "b", "c"])
        with pytest.raises(IdError, match=r"already in the index.*\(position 1\)") as e:
            ix.add(FPS[3:5], ids=["z", "b"])
        assert e.value.position == 1
        with pytest.raises(IdError, match="string ids; got integer ids"):
            ix.add(FPS[3:5], ids=[1, 2])
        with pytest.raises(IdError, match="all integers or all strings"):
            ix.remove(["a", 1])
        assert ix.contains(["a", "q", "c"]).tolist() == [True, False, True]
        assert ix.contains([]).tolist() == []
        with pytest.raises(IdError, match="string ids"):
            ix.contains([1])
        assert 1 not in ix and True not in ix and "a" in ix


def test_convert_ids_keeps_good_ids():
    c = convert_ids(np.array([3, 1, 2], dtype=np.uint32), 3, None, unique=True)
    assert c.kind == "int64" and c.keys.tolist() == [3, 1, 2]
    c = convert_ids(np.array(["x", "é"]), None, None)
    assert c.kind == "str" and c.values == ["x", "é"] and c.off.tolist() == [0, 1, 3]
    assert convert_ids(iter([np.int16(4)]), 1, "int64").keys.tolist() == [4]
    assert convert_ids([], 0, "str").kind == "str"


def _rewrite(path, name: str, change) -> None:
    """Change an array file's values in place (same header, same size)."""
    f = path / name
    arr = np.load(f)
    change(arr)
    np.save(f, arr)


@pytest.mark.parametrize(
    "name, change, message",
    [
        ("s00000000.kord.npy", lambda a: a.__setitem__(0, a[1]), "not a permutation"),
        ("s00000000.kord.npy", lambda a: a.__setitem__(5, 10**6), "not a permutation"),
        ("s00000000.soff.npy", lambda a: a.__setitem__(3, a[2] - 1), "string offset 3"),
        ("s00000000.soff.npy", lambda a: a.__setitem__(-1, a[-1] + 1), "string offset"),
        ("s00000000.soff.npy", lambda a: a.__setitem__(0, -5), "string offset 0"),
        ("s00000000.del2.npy", lambda a: a.__setitem__(0, 999), "tombstones"),
        ("s00000000.del2.npy", lambda a: a.__setitem__(0, -1), "tombstones"),
    ],
)
def test_a_damaged_order_offset_or_tombstone_is_found_on_open(tmp_path, name, change, message):
    path = tmp_path / "ix"
    with Index.create(path, distance=3, blocks=4) as ix:
        ix.add(FPS, ids=[f"doc{i}" for i in range(len(FPS))])
        ix.remove(["doc3", "doc7"])
    _rewrite(path, name, change)
    for mode in ("r", "w"):
        with pytest.raises(CorruptIndexError, match=message) as e:
            Index.open(path, mode)
        assert name in str(e.value) and "\n" not in str(e.value)

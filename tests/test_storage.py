"""index/storage: creating an index directory, the manifest's checks, what clean-up deletes."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

import numpy as np
import pytest

from neardup.index import CorruptIndexError, Index, storage
from neardup.index.manifest import check_manifest
from neardup.index.storage import load_array


def _index(path, str_ids: bool = False) -> None:
    with Index.create(path, distance=3, blocks=4) as ix:
        ids = [f"d{i}" for i in range(50)] if str_ids else None
        ix.add(np.arange(50, dtype=np.uint64) * np.uint64(0x9E3779B97F4A7C15), ids=ids)
        ix.remove(["d3"] if str_ids else [3])


def _edit(path, change) -> None:
    """Change the manifest and give it a matching checksum (a consistent but hostile edit)."""
    doc = json.loads((path / "MANIFEST").read_text())
    doc.pop("manifest_crc32")
    change(doc)
    doc["manifest_crc32"] = storage._body_crc(doc)
    (path / "MANIFEST").write_text(json.dumps(doc))


def test_create_refuses_a_non_empty_directory_and_touches_nothing(tmp_path):
    d = tmp_path / "d"
    d.mkdir()
    for name in (".draft.tmp", "s12345678.mine.npy", "notes.txt"):
        (d / name).write_text(name)
    with pytest.raises(FileExistsError, match="not empty and holds no index"):
        Index.create(d)
    assert sorted(os.listdir(d)) == [".draft.tmp", "notes.txt", "s12345678.mine.npy"]
    (tmp_path / "f").write_text("x")
    with pytest.raises(FileExistsError, match="not a directory"):
        Index.create(tmp_path / "f")
    assert sorted(os.listdir(tmp_path)) == ["d", "f"]  # no temporary directory left


def test_create_in_an_empty_directory_keeps_its_permissions(tmp_path):
    d = tmp_path / "e"
    d.mkdir()
    os.chmod(d, 0o750)
    Index.create(d, distance=2).close()
    assert os.stat(d).st_mode & 0o777 == 0o750
    assert sorted(os.listdir(d)) == ["LOCK", "MANIFEST"]
    assert sorted(os.listdir(tmp_path)) == ["e"]


def test_an_interrupted_create_leaves_nothing_and_an_old_leftover_is_recognised(
    tmp_path, monkeypatch
):
    def boom(directory, body):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(storage, "write_manifest", boom)
    with pytest.raises(OSError, match="No space left") as e:
        Index.create(tmp_path / "ix")
    assert e.value.filename == str(tmp_path / "ix")
    assert os.listdir(tmp_path) == []
    monkeypatch.undo()
    # what an earlier version left when killed: a LOCK holding a pid, maybe .MANIFEST.tmp
    old = tmp_path / "old"
    old.mkdir()
    (old / "LOCK").write_text("12345\n")
    (old / ".MANIFEST.tmp").write_text("{")
    with pytest.raises(CorruptIndexError, match="was interrupted here: create the index again"):
        Index.open(old)
    Index.create(old, distance=3).close()
    assert sorted(os.listdir(old)) == ["LOCK", "MANIFEST"]


def test_create_removes_only_its_own_abandoned_temporary_directories(tmp_path):
    killed = tmp_path / ".ix.abcd1234.tmp"  # what a create killed before its rename leaves
    killed.mkdir()
    (killed / "LOCK").write_text("99\n")
    (killed / "MANIFEST").write_text("{}")
    users = tmp_path / ".ix.efgh5678.tmp"  # same pattern, but holds something else
    users.mkdir()
    (users / "LOCK").write_text("")
    (users / "notes.txt").write_text("mine")
    other = tmp_path / ".other.abcd1234.tmp"
    other.mkdir()
    (other / "LOCK").write_text("")
    Index.create(tmp_path / "ix", distance=3).close()
    assert sorted(os.listdir(tmp_path)) == [".ix.efgh5678.tmp", ".other.abcd1234.tmp", "ix"]


def test_clean_up_deletes_only_files_the_index_writes(tmp_path):
    path = tmp_path / "ix"
    _index(path)
    mine = ["s12345678.mine.npy", ".draft.tmp", "notes.txt", "s1.fp.npy", "xs00000001.fp.npy"]
    for name in mine:
        (path / name).write_text("user")
    ours = ["s00000099.fp.npy", ".s00000099.t1.npy.tmp", ".MANIFEST.tmp", "s00000099.del4.npy"]
    for name in ours:
        (path / name).write_text("partial")
    with Index.open(path, "w") as ix:
        ix.add([5, 6])
        ix.compact()
    names = set(os.listdir(path))
    assert set(mine) <= names and not set(ours) & names


@pytest.mark.parametrize(
    "change, message",
    [
        (lambda d: d["segments"][0]["files"]["fp"].update(name="../outside.npy"), "outside.npy"),
        (lambda d: d["segments"][0]["files"]["fp"].update(name="/tmp/abs.fp.npy"), "abs.fp.npy"),
        (lambda d: d["segments"][0].update(name="/tmp/abs"), "'/tmp/abs'"),
        (lambda d: d["segments"][0].update(name="s00000000/.."), "s00000000/.."),
        (lambda d: d["segments"][0]["files"]["key"].update(name="MANIFEST"), "MANIFEST"),
        (lambda d: d.pop("distance"), "'distance' is missing"),
        (lambda d: d.update(blocks="4"), "'blocks' is '4'"),
        (lambda d: d.update(blocks=True), "'blocks' is True"),
        (lambda d: d.update(id_type="str"), "do not fit ids str"),
        (lambda d: d.update(id_type="float"), "'id_type' is 'float'"),
        (lambda d: d.update(segments={}), "'segments'"),
        (lambda d: d["segments"][0].update(rows=-1), "-1 rows"),
        (lambda d: d["segments"][0]["files"]["kord"].update(dtype="<f8"), "'kord'"),
        (lambda d: d["segments"][0]["files"]["fp"].update(dtype="|O"), "dtype '|O'"),
        (lambda d: d["segments"][0]["files"]["fp"].update(shape=[10**12]), "'fp'"),
        (lambda d: d["segments"][0]["files"]["fp"].update(crc32=-1), "'crc32'"),
        (lambda d: d["segments"][0]["files"].pop("key"), "do not fit"),
        (lambda d: d["segments"][0]["files"].pop("t2"), "no table file t2"),
        (lambda d: d["segments"][0]["deleted"].update(shape=[10**6]), "tombstones"),
        (lambda d: d["segments"].append(d["segments"][0]), "expected a new s"),
        (lambda d: d.update(tables=5), "records 5 tables"),
        (lambda d: d.update(blocks=2), "layout is invalid"),
    ],
)
def test_a_consistent_but_hostile_manifest_is_a_one_line_error(tmp_path, change, message):
    path = tmp_path / "ix"
    _index(path)
    (tmp_path / "outside.npy").write_bytes((path / "s00000000.fp.npy").read_bytes())
    _edit(path, change)
    before = sorted(os.listdir(tmp_path))
    for mode in ("r", "w"):
        with pytest.raises(CorruptIndexError, match=message) as e:
            Index.open(path, mode)
        assert "\n" not in str(e.value)
    assert sorted(os.listdir(tmp_path)) == before


def test_check_manifest_accepts_what_the_index_writes(tmp_path):
    for str_ids in (False, True):
        path = tmp_path / f"ix{str_ids}"
        _index(path, str_ids)
        doc = json.loads((path / "MANIFEST").read_text())
        doc.pop("manifest_crc32")
        check_manifest(doc, str(path / "MANIFEST"))


@pytest.mark.parametrize(
    "damage",
    [
        lambda b: b[:6] + b"\x09" + b[7:],  # npy version byte
        lambda b: b[:10] + b"(" * 20 + b[30:],  # header text
        lambda b: b[:10] + b"{'descr': '|O', 'fortran_order': False, 'shape': (50,), }" + b[67:],
        lambda b: b"\x00" * len(b),
    ],
)
def test_a_damaged_array_header_is_a_one_line_error(tmp_path, damage):
    path = tmp_path / "ix"
    _index(path)
    f = path / "s00000000.key.npy"
    f.write_bytes(damage(f.read_bytes()))
    entry = json.loads((path / "MANIFEST").read_text())["segments"][0]["files"]["key"]
    with pytest.raises(CorruptIndexError, match="s00000000.key.npy") as e:
        load_array(str(path), entry)
    assert "\n" not in str(e.value)


CREATOR = r"""
import sys
from neardup.index import Index
root = sys.argv[1]
Index.create(root + "/warm", distance=3).close()
print("ready", flush=True)
for k in range(100000):
    Index.create(f"{root}/ix{k}", distance=3).close()
"""


@pytest.mark.slow
def test_a_killed_create_leaves_no_half_made_index(tmp_path):
    rng = np.random.default_rng(3)
    for round_ in range(4):
        root = tmp_path / f"r{round_}"
        root.mkdir()
        p = subprocess.Popen([sys.executable, "-c", CREATOR, str(root)], stdout=subprocess.PIPE)
        assert p.stdout.readline().strip() == b"ready"
        time.sleep(float(rng.uniform(0.01, 0.2)))
        p.send_signal(signal.SIGKILL)
        p.wait()
        made = [n for n in os.listdir(root) if not n.startswith(".")]
        assert made, "the creator made nothing before it was killed"
        for name in made:  # every index there is whole: it opens and takes writes
            with Index.open(root / name, "w") as ix:
                ix.add([1])
        for name in os.listdir(root):
            if name.startswith("."):  # an abandoned temporary directory: a new create clears it
                target = root / name.split(".")[1]
                assert not target.exists()
                Index.create(target, distance=3).close()
        assert all(not n.startswith(".") for n in os.listdir(root)), os.listdir(root)

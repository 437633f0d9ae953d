"""The stages of a staged dedup, declared once (neardup.pipeline.stage_table), and the work
directory's layout (neardup.pipeline.layout): a task that writes or reads outside them fails."""

from __future__ import annotations

import dataclasses
import inspect
import os

import numpy as np
import pytest

from neardup.errors import InputError
from neardup.pipeline import layout
from neardup.pipeline.executors import LocalExecutor
from neardup.pipeline.runner import Runner
from neardup.pipeline.stage_table import STAGES
from neardup.pipeline.task_files import gather, load, read_rows, save


def test_every_step_declares_its_stage_and_what_it_reads():
    stages = set(layout.FILES)
    for step in STAGES.values():
        assert step.stage in stages, step.name
        assert set(step.reads) <= stages, step.name
        assert list(inspect.signature(step.fn).parameters)[0] == "out", step.name
        assert all("." in f or f.endswith("*") for f in step.writes)
    # each generator's last step writes the one candidate interface
    assert {s.name for s in STAGES.values() if s.stage == "pairs"} == {
        "search",
        "search-buckets",
        "prefix-dedupe",
    }


def test_paths_outside_the_layout_are_refused(tmp_path):
    work = str(tmp_path)
    assert layout.path(work, "scan", 3, "fp") == os.path.join(work, "scan", "3", "fp.npy")
    assert layout.path(work, "cc-large-12", "0", "label").endswith("cc-large-12/0/label.npy")
    assert layout.path(work, "write", 0, "files") == os.path.join(work, "write", "0", "files")
    with pytest.raises(ValueError, match="no file 'fq.npy' in stage 'scan'"):
        layout.path(work, "scan", 3, "fq")
    with pytest.raises(ValueError, match="no stage 'scna'"):
        layout.path(work, "scna", 3, "fp")
    layout.check_written("write", ["kept.bin", "files/a/b.txt", "new.npy"])
    with pytest.raises(RuntimeError, match="wrote stray.npy"):
        layout.check_written("decide", ["label.npy", "stray.npy"])


def _swap(monkeypatch, step: str, **changes) -> None:
    monkeypatch.setitem(STAGES, step, dataclasses.replace(STAGES[step], **changes))


def test_a_task_that_writes_an_undeclared_file_is_not_recorded(tmp_path, monkeypatch):
    def stray(out, s):
        save(out, own=np.zeros(s), stray=np.zeros(1))
        return {}

    _swap(monkeypatch, "own", fn=stray)
    r = Runner(str(tmp_path), LocalExecutor(1), None)
    with pytest.raises(RuntimeError, match="'own' wrote stray.npy"):
        r.map("own", [("0", {"s": 2})])
    assert os.listdir(tmp_path / "own") == []  # nothing finished, nothing half-written

    def fine(out, s):
        return {"bytes": save(out, own=np.zeros(s))}

    _swap(monkeypatch, "own", fn=fine)
    assert r.map("own", [("0", {"s": 2}), ("1", {"s": 3})])[1]["bytes"] > 0
    assert len(load(str(tmp_path), "own", 1, "own")) == 3
    with pytest.raises(TypeError, match="task '3' names other arguments"):
        r.map("own", [("2", {"s": 1}), ("3", {"t": 1})])


def test_a_task_that_reads_an_undeclared_stage_fails(tmp_path, monkeypatch):
    assert os.environ.get("NEARDUP_CHECK_LAYOUT") == "1"  # set for the suite (conftest)
    work = str(tmp_path)

    def first(out):
        return {"bytes": save(out, own=np.arange(3))}

    def second(out, work):
        return {"sum": int(np.sum(load(work, "own", 0, "own")))}

    r = Runner(work, LocalExecutor(1), None)
    _swap(monkeypatch, "own", fn=first)
    r.map("own", [("0", {})])
    _swap(monkeypatch, "cc-labels", fn=second, reads=("own",))
    assert r.map("cc-labels", [("0", {"work": work})]) == [{"sum": 3}]
    _swap(monkeypatch, "cc-labels", fn=second, reads=("cc-edges",))
    with pytest.raises(RuntimeError, match="step 'cc-labels' read stage 'own'"):
        r.map("cc-labels", [("1", {"work": work})])
    assert int(np.sum(load(work, "own", 0, "own"))) == 3  # the caller reads any stage


def test_slices_are_read_as_written_and_a_rewritten_or_cut_file_is_read_anew(tmp_path):
    """read_rows (the slices every task of a stage reads) gives what the file holds: any rows
    of 1-d and 2-d arrays, an array rewritten in place (its header parsed again, not the one
    remembered), and a file cut short is a damaged file named in one line."""
    work = str(tmp_path)
    out = layout.task_dir(work, "prefix-pairs", 0)
    os.makedirs(out)
    pairs = np.arange(40, dtype=np.int64).reshape(20, 2)
    save(out, pairs=pairs, c=np.array([0, 7, 20]), f=np.zeros((0, 2), np.int64),
         cf=np.zeros(3, np.int64))  # fmt: skip
    for lo, hi in [(0, 20), (3, 9), (5, 5), (19, 20)]:
        assert np.array_equal(read_rows(work, "prefix-pairs", 0, "pairs", lo, hi), pairs[lo:hi])
    got = gather(work, "prefix-pairs", [0, 0], 1, {"pairs": np.int64})["pairs"]
    assert np.array_equal(got, np.concatenate([pairs[7:20], pairs[7:20]]))
    three = gather(work, "prefix-pairs", [0, 0, 0], 0, {"pairs": np.int64})["pairs"]  # in place
    assert np.array_equal(three, np.concatenate([pairs[:7]] * 3))
    narrow = gather(work, "prefix-pairs", [0, 0, 0], 1, {"pairs": np.int32})["pairs"]  # converted
    assert narrow.dtype == np.int32 and np.array_equal(narrow, np.concatenate([pairs[7:20]] * 3))
    with pytest.raises(InputError, match="rows 4 to 30 of an array of 20"):
        read_rows(work, "prefix-pairs", 0, "pairs", 4, 30)
    save(out, pairs=pairs[:5] * 3)  # rewritten: another shape and other values
    assert np.array_equal(read_rows(work, "prefix-pairs", 0, "pairs"), pairs[:5] * 3)
    path = os.path.join(out, "pairs.npy")
    os.truncate(path, os.path.getsize(path) - 8)
    with pytest.raises(InputError, match="pairs.npy.*cut short") as e:
        read_rows(work, "prefix-pairs", 0, "pairs")
    assert "\n" not in str(e.value)

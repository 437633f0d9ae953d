"""The staged dedup against an index (``--against INDEX --update``) and under a memory budget
(``--memory``): the same outputs, byte for byte, and the same index contents whether one task
decides every document or the candidate, component and decide stages do; and which runs do
which."""

from __future__ import annotations

import contextlib
import json
import re
import warnings
from pathlib import Path

import naive
import numpy as np
import pytest
from cli import Result, invoke

import neardup
from neardup.index import Index
from neardup.io.sources import InputPath
from neardup.pipeline import plan as plan_module
from neardup.pipeline.plan import build_plan, sizes_for


def _jsonl(path: Path, prefix: str, docs: list[str]) -> Path:
    path.write_text("".join(json.dumps({"id": f"{prefix}{i}", "text": t}) + "\n"
                            for i, t in enumerate(docs)))  # fmt: skip
    return path


def _cli(*args: str) -> Result:
    """``neardup dedup args`` in this process (the console script's entry point): a fresh
    process for each run only added its start-up (imports, kernels loaded from the cache)."""
    return invoke("neardup", "dedup", *args, text=True)


def _contents(ix: str, fps: np.ndarray) -> list[tuple]:
    """What the index holds near ``fps``: (query, id, distance) of every match, and its size."""
    with Index.open(ix) as opened:
        m = opened.search(fps, opened.distance)
        rows = sorted(zip(m.query_index.tolist(), m.ids.tolist(), m.distances.tolist()))
        return [len(opened), *rows]


def _one_task(summary: dict) -> bool:
    """Whether the run decided every document in one task (no candidate or exact stages)."""
    stages = summary["stages"]
    return "decide" in stages and not {"exact", "search", "split", "pairs", "prefix"} & set(stages)


def _index(kind: str, path: Path) -> str:
    if kind == "sketch":
        Index.create(path, threshold=0.8, sketch_words=8).close()
    else:
        Index.create(path, distance=10).close()
    return str(path)


def _run(src: Path, out: Path, ix: str, *extra: str) -> tuple[dict, dict]:
    out.mkdir()
    files = {n: out / n for n in ("kept.jsonl", "drop.txt", "c.jsonl")}
    r = _cli(str(src), "-q", "-o", str(files["kept.jsonl"]), "--drop-list",
             str(files["drop.txt"]), "--clusters", str(files["c.jsonl"]), "--json-summary",
             str(out / "s.json"), "--against", ix, "--update", *extra)  # fmt: skip
    assert r.returncode == 0, r.stderr
    summary = json.loads((out / "s.json").read_text())
    return {n: p.read_bytes() for n, p in files.items()}, summary


@pytest.mark.slow
@pytest.mark.filterwarnings("ignore:.*no shingles:UserWarning")
@pytest.mark.parametrize("kind, extra", [("plain", ()), ("plain", ("--no-verify",)),
                                         ("sketch", ())])  # fmt: skip
def test_against_update_same_outputs_and_index(tmp_path, kind, extra):
    docs = naive.text_families(60, 4)
    d1 = _jsonl(tmp_path / "d1.jsonl", "a", docs[:40])
    d2 = _jsonl(tmp_path / "d2.jsonl", "b", docs[25:])
    one, staged = _index(kind, tmp_path / "one"), _index(kind, tmp_path / "staged")
    probe = neardup.dedup(docs, verify=not extra).fingerprints
    found = 0
    for k, src in enumerate((d1, d1, d2)):  # a dump, its rerun, a dump that meets it
        want, s1 = _run(src, tmp_path / f"one{k}", one, *extra)
        got, s2 = _run(src, tmp_path / f"staged{k}", staged, *extra, "--shard-docs", "7",
                       "--threads", "2")  # fmt: skip
        assert got == want, k
        assert s2["against"].pop("index") == staged and s1["against"].pop("index") == one
        assert s2["against"] == s1["against"] and s2["dropped"] == s1["dropped"]
        assert s2["shards"] > 3 and s1["shards"] == 1 and _one_task(s1) and not _one_task(s2)
        assert _contents(staged, probe) == _contents(one, probe)
        found += s1["against"]["dropped"]
    assert s1["against"]["dropped"] > 0 and b'"index": true' in want["c.jsonl"]
    assert s1["against"]["already_in_index"] == 0 and found > 0


@pytest.mark.filterwarnings("ignore:.*no shingles:UserWarning")
def test_against_result_as_the_one_process_run(tmp_path):
    docs = naive.text_families(50, 7)
    d1 = _jsonl(tmp_path / "d1.jsonl", "a", docs[:30])
    d2 = _jsonl(tmp_path / "d2.jsonl", "b", docs[15:])
    ix = _index("sketch", tmp_path / "ix")
    neardup.dedup(InputPath(d1), against=ix, update=True)
    ref = neardup.dedup(InputPath(d2), against=ix)
    got = neardup.dedup(InputPath(d2), against=ix, shard_docs=6, threads=2)
    assert got.kept.tolist() == ref.kept.tolist() and ref.against.n_found > 0
    assert got.labels.tolist() == ref.labels.tolist()
    assert got.index_matches.to_pylist() == ref.index_matches.to_pylist()
    assert got.summary()["against"] == ref.summary()["against"]


@pytest.mark.slow
def test_a_taken_id_fails_before_any_output(tmp_path):
    docs = naive.text_families(30, 2)
    src = _jsonl(tmp_path / "d.jsonl", "a", docs)
    ix = _index("plain", tmp_path / "ix")
    with Index.open(ix, "w") as w:  # an unrelated document under the id of a survivor
        w.add(np.array([0x5555_5555_5555_5555], dtype=np.uint64), ["a0"])
    out = tmp_path / "out.jsonl"
    r = _cli(str(src), "-q", "-o", str(out), "--against", ix, "--update", "--shard-docs", "5")
    assert r.returncode == 2 and "d.jsonl:1: id 'a0' is already in index" in r.stderr, r.stderr
    assert not out.exists()
    with Index.open(ix) as opened:
        assert len(opened) == 1


def test_memory_budget_sets_shards_and_keeps_outputs(tmp_path, monkeypatch):
    docs = naive.text_families(300, 3)
    src = _jsonl(tmp_path / "d.jsonl", "a", docs)
    budget = "64K"  # 32K a task with 2 threads: 20 documents a shard, 341 a search task
    monkeypatch.setattr(plan_module, "MIN_SHARD_DOCS", 5)
    per, search = sizes_for(64 << 10, 2)
    assert (per, search) == (20, 341)
    plan = build_plan(InputPath(src), memory=budget, parallel=2)
    assert len(plan.shards) >= 300 // per - 1 and plan.search_docs == 341
    # fits in one process: one task decides every document
    assert build_plan(InputPath(src), memory="1G").whole_docs >= 300 > plan.whole_docs
    outs = {}
    for tag, mem in (("one", "1G"), ("budget", budget)):
        out = tmp_path / tag
        out.mkdir()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", UserWarning)
            r = neardup.dedup(InputPath(src), output=out / "k.jsonl", clusters=out / "c.jsonl",
                              drop_list=out / "d.txt", json_summary=out / "s.json", memory=mem,
                              threads=2, collect=False)  # fmt: skip
        outs[tag] = [(out / n).read_bytes() for n in ("k.jsonl", "c.jsonl", "d.txt")]
        if tag == "budget":
            assert r.summary()["shards"] == len(plan.shards)
    assert outs["budget"] == outs["one"] and outs["one"][2]


@pytest.mark.slow
def test_memory_option_on_the_command_line(tmp_path):
    docs = naive.text_families(40, 5)
    src = _jsonl(tmp_path / "d.jsonl", "a", docs)
    outs = {}
    for tag, extra in (("one", ()), ("staged", ("--memory", "8K"))):
        out = tmp_path / f"{tag}.jsonl"
        r = _cli(str(src), "-o", str(out), "--json-summary", str(tmp_path / f"{tag}.json"),
                 *extra)  # fmt: skip
        assert r.returncode == 0, r.stderr
        outs[tag] = out.read_bytes()
        summary = json.loads((tmp_path / f"{tag}.json").read_text())
        assert _one_task(summary) == (tag == "one")
    assert outs["staged"] == outs["one"]
    r = _cli(str(src), "-o", str(tmp_path / "x.jsonl"), "--memory", "lots")
    assert r.returncode == 2 and "memory must be a number of bytes" in r.stderr


def test_parquet_files_as_against_are_checked_on_a_cluster_whatever_the_shards(tmp_path):
    src = _jsonl(tmp_path / "d.jsonl", "a", ["one two three four", "five six seven eight"])
    pq = pytest.importorskip("pyarrow.parquet")
    pa = pytest.importorskip("pyarrow")
    pq.write_table(pa.table({"fingerprint": np.zeros(1, np.uint64), "id": [1]}),
                   tmp_path / "x.parquet")  # fmt: skip
    for shards in (None, 1):
        with pytest.raises(ValueError, match="checked in batch mode on Dask: pass a client"):
            neardup.dedup(InputPath(src), shard_docs=shards, against=str(tmp_path / "x.parquet"))
    with pytest.raises(TypeError, match="already_seen"):  # one engine: decide() has it
        neardup.dedup(InputPath(src), already_seen=np.zeros(2, bool))


_INDEX_JSON = re.compile(r'<script type="application/json" id="cluster-index">(.*?)</script>', re.S)


def _same_page(page: str) -> str:
    """A report page, its run time and its diffs' anchor numbers set aside."""
    page = re.sub(r"<td>[0-9.]+ s</td>", "<td>T</td>", page)
    return re.sub(r"(difflib_chg_to|from|to)\d+_", r"\1_", page)


@pytest.mark.slow
@pytest.mark.filterwarnings("ignore:.*no shingles:UserWarning")
def test_report_from_the_staged_run(tmp_path):
    pytest.importorskip("matplotlib")
    docs = naive.text_families(60, 8)
    d1 = _jsonl(tmp_path / "d1.jsonl", "a", docs[:35])
    d2 = _jsonl(tmp_path / "d2.jsonl", "b", docs[20:])
    ix = _index("plain", tmp_path / "ix")
    assert _cli(str(d1), "-q", "-o", str(tmp_path / "k1.jsonl"), "--against", ix,
                "--update").returncode == 0  # fmt: skip
    pages = {}
    for tag, extra in (("one", ()), ("staged", ("--shard-docs", "6"))):
        out = tmp_path / tag
        out.mkdir()
        r = _cli(str(d2), "-q", "-o", str(out / "k.jsonl"), "--clusters", str(out / "c.jsonl"),
                 "--against", ix, "--report", str(out / "r.html"), "--json-summary",
                 str(out / "s.json"), *extra)  # fmt: skip
        assert r.returncode == 0, r.stderr
        assert _one_task(json.loads((out / "s.json").read_text())) == (not extra)
        page = (out / "r.html").read_text()
        pages[tag] = (json.loads(_INDEX_JSON.search(page)[1]), (out / "k.jsonl").read_bytes(),
                      (out / "c.jsonl").read_bytes(), _same_page(page))  # fmt: skip
    assert pages["staged"] == pages["one"]
    assert "Dropped as seen in the index" in pages["one"][3]
    assert b'"index": true' in pages["one"][2] and len(pages["one"][0]) > 2


@pytest.mark.filterwarnings("ignore:.*no shingles:UserWarning")
def test_an_open_index_serves_the_stages_and_stays_open(tmp_path):
    """An index the caller opened, as ``against``, is checked by the stages of a file run on
    this process's threads (their tasks share it; none closes it), with the bytes and the
    index contents of a run given its path."""
    docs = naive.text_families(60, 9)
    d1 = _jsonl(tmp_path / "d1.jsonl", "a", docs[:40])
    d2 = _jsonl(tmp_path / "d2.jsonl", "b", docs[25:])
    by_path, opened = _index("sketch", tmp_path / "p"), _index("sketch", tmp_path / "o")
    got = {}
    for tag, ix in (("path", by_path), ("open", opened)):
        out = tmp_path / tag
        out.mkdir()
        with contextlib.ExitStack() as stack:
            target = ix if tag == "path" else stack.enter_context(Index.open(ix, "w"))
            for k, src in enumerate((d1, d2)):
                r = neardup.dedup(InputPath(src), output=out / f"k{k}.jsonl", against=target,
                                  update=True, threads=2, json_summary=out / f"s{k}.json")  # fmt: skip
                assert "decide" in json.loads((out / f"s{k}.json").read_text())["stages"]
            if tag == "open":
                with Index.open(by_path) as other:
                    assert len(target) == len(other) > 0  # still open, and usable
        got[tag] = [(out / f"k{k}.jsonl").read_bytes() for k in (0, 1)], r.against.n_found
    assert got["open"] == got["path"] and got["path"][1] > 0
    probe = neardup.dedup(docs).fingerprints
    assert _contents(opened, probe) == _contents(by_path, probe)

"""``dedup --against redis://... --update`` on a real redis-server: the same decisions, outputs,
added entries and errors as against a local index, through the command line (in process) and
the Python API."""

from __future__ import annotations

import json

import naive
import numpy as np
import pytest
from cli import invoke
from servers import fresh_name, needs_redis

import neardup
from neardup import config
from neardup.index import Index
from neardup.index.redis import IndexUnavailableError, RedisIndex

pytestmark = [
    needs_redis,
    pytest.mark.usefixtures("few_redis_shards"),
    pytest.mark.filterwarnings("ignore:.*no shingles:UserWarning"),
]


def fresh(url: str) -> str:
    return fresh_name(url, "d")


def texts(n: int, seed: int) -> list[str]:
    """``n`` texts in families of near-duplicates (a few words replaced) and exact copies."""
    return naive.text_families(n, seed, 400, (20, 60), (1, 4), (0, 3), wordless=0)


def dumps(tmp_path, int_ids: bool):
    """Two JSONL dumps sharing documents (the second repeats the end of the first)."""
    docs = texts(60, 11)
    paths = []
    for k, (lo, hi) in enumerate(((0, 35), (25, 60))):
        p = tmp_path / f"d{k + 1}.jsonl"
        rows = [
            {"id": (1000 * (k + 1) + i) if int_ids else f"{'ab'[k]}{i}", "text": docs[i]}
            for i in range(lo, hi)
        ]
        p.write_text("".join(json.dumps(r) + "\n" for r in rows))
        paths.append(p)
    return paths


def run(*args: str):
    return invoke("neardup", *args, text=True)


def entries(ix, ids: list) -> list:
    """The ids of ``ids`` that ``ix`` holds."""
    return [i for i, hit in zip(ids, ix.contains(ids).tolist(), strict=True) if hit]


@pytest.mark.parametrize("int_ids", [False, True])
@pytest.mark.parametrize("mode", [[], ["--no-verify"], ["--keep", "longest"]])
def test_command_line_update_matches_a_local_index(node, tmp_path, int_ids, mode):
    d1, d2 = dumps(tmp_path, int_ids)
    all_ids = [json.loads(x)["id"] for p in (d1, d2) for x in p.read_text().splitlines()]
    where = {"local": str(tmp_path / "ix"), "redis": fresh(node.url)}
    got = {}
    for name, ix in where.items():
        out = tmp_path / name
        out.mkdir()
        assert run("index", "create", ix, "--distance", "6").returncode == 0
        for k, d in enumerate((d1, d2), start=1):
            r = run("dedup", str(d), "-o", str(out / f"k{k}.jsonl"), "--against", ix, "--update",
                    "--clusters", str(out / f"c{k}.jsonl"), "--drop-list", str(out / f"x{k}.txt"),
                    "--json-summary", str(out / f"s{k}.json"), *mode)  # fmt: skip
            assert r.returncode == 0, r.stderr
        files = {p.name: p.read_bytes() for p in sorted(out.iterdir()) if p.suffix != ".json"}
        summaries = [json.loads((out / f"s{k}.json").read_text()) for k in (1, 2)]
        with Index.open(ix) as opened:
            got[name] = files, summaries, entries(opened, all_ids), len(opened)
    local, redis = got["local"], got["redis"]
    assert redis[0] == local[0]  # kept documents, clusters (with the index's), drop lists
    for s_local, s_redis in zip(local[1], redis[1], strict=True):
        for s in (s_local, s_redis):
            del s["seconds"], s["documents_per_second"], s["against"]["index"], s["stages"]
            s.pop("temp_bytes", None)  # (the work directory holds the index's name)
        assert s_redis == s_local
    # the second dump met the first in the index: some of it dropped against it
    assert local[1][1]["against"]["dropped"] > 0
    # the index holds exactly the survivors of both runs, with their ids
    kept = [json.loads(x)["id"] for k in (1, 2) for x in local[0][f"k{k}.jsonl"].splitlines()]
    assert redis[2] == local[2] == kept and redis[3] == local[3] == len(kept)
    # ... and their fingerprints: queries with the documents find the same entries
    answers = []
    for name, ix in where.items():
        q = tmp_path / f"q-{name}.jsonl"
        r = run("index", "query", ix, str(d1), str(d2), "--distance", "3", "-o", str(q))
        assert r.returncode == 0, r.stderr
        answers.append(q.read_text())
    assert answers[0] == answers[1] and f'"matches": [[{json.dumps(kept[0])}, 0]' in answers[0]


def test_ids_already_in_the_index_fail_as_for_a_local_index(node, tmp_path):
    d1, _ = dumps(tmp_path, False)
    first = json.loads(d1.read_text().splitlines()[3])["id"]
    url = fresh(node.url)
    errors = []
    for ix in (str(tmp_path / "ix"), url):
        with Index.create(ix, distance=6) as w:
            w.add(np.array([12345], dtype=np.uint64), ids=[first])  # same id, unrelated text
        out = tmp_path / "kept.jsonl"
        r = run("dedup", str(d1), "-o", str(out), "--against", ix, "--update", "-q")
        assert r.returncode == 2 and not out.exists()
        errors.append(r.stderr.splitlines()[-1].replace(ix, "INDEX"))
        with Index.open(ix) as opened:
            assert len(opened) == 1 and opened.generation == 1  # nothing added
    assert errors[0] == errors[1]
    assert f"{d1}:4: id '{first}' is already in index INDEX" in errors[1]
    # integer ids in an index of strings: the first document is named, as for a local index
    with Index.create(fresh(node.url), distance=6) as w:
        w.add(np.array([5], dtype=np.uint64), ids=[7])
        r = run("dedup", str(d1), "-o", str(tmp_path / "k.jsonl"), "--against", w.path,
                "--update", "-q")  # fmt: skip
    assert r.returncode == 2 and f"{d1}:1: index {w.path}: this index has integer ids" in r.stderr


def test_python_api_update_with_a_url_or_an_open_index(node, tmp_path):
    import pyarrow as pa

    docs = texts(50, 5)
    # ids: the position in docs, so a document in both dumps has one id
    first = pa.table({"id": list(range(30)), "text": docs[:30]})
    second = pa.table({"id": list(range(20, 50)), "text": docs[20:]})
    with Index.create(tmp_path / "ix", distance=6) as lix:
        want1 = neardup.dedup(first, against=lix, update=True)
        want2 = neardup.dedup(second, against=lix, update=True)
        want_ids = entries(lix, list(range(50)))
    url = fresh(node.url)
    Index.create(url, distance=6).close()
    got1 = neardup.dedup(first, against=url, update=True)
    with Index.open(url, "w") as rix:  # an open RedisIndex is used as it is
        got2 = neardup.dedup(second, against=rix, update=True)
        assert entries(rix, list(range(50))) == want_ids
    for got, want in ((got1, want1), (got2, want2)):
        assert got.kept.tolist() == want.kept.tolist()
        assert got.against.id == want.against.id
        assert got.against.distance.tolist() == want.against.distance.tolist()
    assert got2.against.n_found > 0
    with Index.open(url) as ro, pytest.raises(ValueError, match="read-only; update needs mode='w'"):
        neardup.dedup(second, against=ro, update=True)


def test_the_run_holds_other_writers_off(node, monkeypatch):
    from neardup.pipeline.against import hold_writes

    url = fresh(node.url)
    monkeypatch.setattr(config, "SERVE_WRITE_WAIT_S", 0.2)
    with Index.create(url, distance=6) as a, Index.open(url, "w") as b:
        assert isinstance(a, RedisIndex)
        with hold_writes(a):
            a.add([1], ids=[1])  # the holder writes
            with pytest.raises(IndexUnavailableError, match="another writer held the index"):
                b.add([2], ids=[2])
        b.add([2], ids=[2])  # released at the end
        assert a.contains([1, 2]).tolist() == [True, True]


def test_index_commands_take_a_redis_url(node, tmp_path):
    d1, d2 = dumps(tmp_path, False)
    answers = []
    for ix in (str(tmp_path / "ix"), fresh(node.url)):
        assert run("index", "create", ix).returncode == 0
        r = run("index", "add", ix, str(d1))
        assert r.returncode == 0 and "it holds 35 entries" in r.stderr, r.stderr
        q = tmp_path / "q.jsonl"
        assert run("index", "query", ix, str(d2), "-o", str(q)).returncode == 0
        answers.append(q.read_text())
    assert answers[0] == answers[1] and '"matches": [["a25", 0]' in answers[0]
    with Index.open(ix, "w") as w, pytest.raises(ValueError, match="keeps no sketches"):
        w.add(None, ["z"], sketches=(np.zeros((1, 8), np.uint64), np.ones(1, np.uint32)))


def test_a_redis_failure_at_the_update_changes_no_output_and_a_rerun_finishes(
    node, tmp_path, monkeypatch
):
    d1, _ = dumps(tmp_path, False)
    out, clean = tmp_path / "out", tmp_path / "clean"
    out.mkdir()
    clean.mkdir()
    outputs = ["--clusters", "c.jsonl", "--drop-list", "drop.txt"]

    def argv(where, ix):
        return ["dedup", str(d1), "-o", str(where / "kept.jsonl"), "--against", ix, "--update",
                *[str(where / a) if a.endswith(("jsonl", "txt")) else a for a in outputs]]  # fmt: skip

    # the lease the failed run cannot release (Redis refuses writes) expires soon
    monkeypatch.setattr(config, "REDIS_LOCK_LEASE_S", 1.0)
    want = fresh(node.url)
    Index.create(want, distance=6).close()
    assert run(*argv(clean, want)).returncode == 0
    (out / "kept.jsonl").write_text("OLD\n")
    url = fresh(node.url)
    Index.create(url, distance=6).close()
    add = RedisIndex.add

    def refused(self, *a, **k):  # Redis itself refuses the writes from now on
        node.cli("config", "set", "min-replicas-to-write", "1")
        return add(self, *a, **k)

    monkeypatch.setattr(RedisIndex, "add", refused)
    try:
        r = run(*argv(out, url), "-q")
    finally:
        node.cli("config", "set", "min-replicas-to-write", "0")
    lines = [ln for ln in r.stderr.splitlines() if "compiling kernels" not in ln]
    assert r.returncode == 2 and len(lines) == 1 and "Traceback" not in r.stderr, r.stderr
    assert f"{url}: index not updated (or only in part): " in lines[0]
    assert "no output was changed; run the same command again to finish" in lines[0]
    assert sorted(p.name for p in out.iterdir()) == ["kept.jsonl"]
    assert (out / "kept.jsonl").read_text() == "OLD\n"
    monkeypatch.setattr(RedisIndex, "add", add)
    assert run(*argv(out, url)).returncode == 0
    got = {p.name: p.read_bytes() for p in out.iterdir()}
    assert got == {p.name: p.read_bytes() for p in clean.iterdir()}
    with Index.open(url) as a, Index.open(want) as b:
        assert len(a) == len(b) > 0

"""``dedup --against`` an index with sketches: every decision against brute force (tests/naive.py)
from the index's contents, the update it makes, and the command line (in process)."""

from __future__ import annotations

import errno
import json
import os

import naive
import numpy as np
import pytest
from cli import invoke
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from servers import REDIS_CLI, REDIS_SERVER, RedisNode, fresh_name, needs_redis

import neardup
from neardup import Fingerprinter
from neardup.core.similarity import distance_for_threshold
from neardup.core.verify import priority_order
from neardup.index import Index, probe
from neardup.io.sources import InputPath

REDIS = REDIS_SERVER is not None and REDIS_CLI is not None

WORDS = 8


def texts(n: int, seed: int) -> list[str]:
    """``n`` texts in families: a base of 15-80 words from a 300-word vocabulary and members
    with a few words replaced, some exact copies, some without words."""
    return naive.text_families(n, seed)


def table(docs: list[str], prefix: str):
    import pyarrow as pa

    return pa.table({"id": [f"{prefix}{i}" for i in range(len(docs))], "text": docs})


def key_sets(docs: list[str]) -> list[set]:
    f = Fingerprinter().features_many(docs)
    return naive.csr_to_sets(f.offsets, f.keys)


def expected(entries: dict, docs: list[str], threshold: float, keep: str):
    """(found id or None per document, kept_for per document) by brute force: a document is
    found when an entry's sketch matches (naive.verified_query), for its best match; the others
    are decided by the verified rule among themselves (naive.decide_verified)."""
    sets = key_sets(docs)
    queries = [(naive.set_sketch(s, WORDS), len(s)) for s in sets]
    d = distance_for_threshold(threshold)
    matches = naive.verified_query(entries, queries, threshold, d)
    found: list = [None] * len(docs)  # the best matches of each document (ties: any of them)
    for q, i, dist, est in matches:
        if found[q] is None:
            found[q] = {"best": (est, dist), "ids": {i}}
        elif found[q]["best"] == (est, dist):
            found[q]["ids"].add(i)
    exclude = np.array([f is not None for f in found], dtype=bool)
    fps = [q[0][0] for q in queries]
    lengths = np.array([len(t) for t in docs])
    order = priority_order(len(docs), keep, lengths).tolist()
    # within the batch, the default candidates (prefix): every pair at the threshold
    kept_for, _ = naive.decide_verified(sets, fps, threshold, order, distance=64, exclude=exclude)
    return found, kept_for, queries


def contents(ix: Index) -> dict:
    """{id: (sketch words, size)} of every live entry, read back through the segments."""
    out = {}
    for si, seg in enumerate(ix._segs):
        rows = seg.live_rows()
        _, ids = probe.ids_of(ix.path, ix._segs, ix.id_type, np.full(len(rows), si, np.int64), rows)
        for i, r in zip(ids.tolist(), rows.tolist(), strict=True):
            out[i] = (seg.sketch[r].tolist(), int(seg.ssize[r]))
    return out


@pytest.mark.filterwarnings("ignore:.*no shingles:UserWarning")
@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    seed=st.integers(0, 2**16),
    threshold=st.sampled_from([0.7, 0.8, 0.9]),
    keep=st.sampled_from(["first", "longest"]),
    cut=st.integers(0, 40),
)
@pytest.mark.slow
def test_decisions_match_brute_force(tmp_path_factory, seed, threshold, keep, cut):
    docs = texts(80, seed)
    first, second = docs[:cut], docs[cut:]
    path = tmp_path_factory.mktemp("ix") / "ix"
    with Index.create(path, threshold=0.7, sketch_words=WORDS) as ix:
        r1 = neardup.dedup(table(first, "a"), against=ix, update=True, threshold=threshold,
                           keep=keep)  # fmt: skip
        entries = contents(ix)
        assert sorted(entries) == sorted(f"a{i}" for i in np.flatnonzero(r1.kept).tolist())
        found, kept_for, queries = expected(entries, second, threshold, keep)
        r2 = neardup.dedup(table(second, "b"), against=ix, update=True, threshold=threshold,
                           keep=keep)  # fmt: skip
        assert r2.against is not None and r2.against.how == "sketch"
        assert r2.against.found.tolist() == [f is not None for f in found]
        assert all(f is None or i in f["ids"] for i, f in zip(r2.against.id, found, strict=True))
        # found documents are dropped; the others follow the verified rule among themselves
        assert r2.verified.kept_for.tolist() == kept_for
        assert r2.kept.tolist() == [f is None and k < 0 for f, k in zip(found, kept_for)]
        # estimated Jaccard and distance of each drop against the index, by brute force
        for q, i in enumerate(r2.against.id):
            if i is None:
                assert np.isnan(r2.against.jaccard[q]) and r2.against.distance[q] == -1
                continue
            ok, est = naive.sketch_match(*queries[q], *entries[i], threshold)
            assert ok and r2.against.jaccard[q] == est
            assert r2.against.distance[q] == naive.popcount(queries[q][0][0] ^ entries[i][0][0])
        # the update added the kept documents with their own sketches
        after = contents(ix)
        added = {k: v for k, v in after.items() if k not in entries}
        assert sorted(added) == sorted(f"b{i}" for i in np.flatnonzero(r2.kept).tolist())
        for k, v in added.items():
            assert v == queries[int(k[1:])]


@pytest.mark.filterwarnings("ignore:.*no shingles:UserWarning")
def test_summary_clusters_and_index_matches(tmp_path):
    docs = texts(30, 1)
    with Index.create(tmp_path / "ix", threshold=0.8, sketch_words=WORDS) as ix:
        r1 = neardup.dedup(docs[:15], against=ix, update=True)
        r = neardup.dedup(table(docs[10:], "b"), against=ix)
        assert len(ix) == int(r1.kept.sum())
    a = r.against
    assert a.found[:5][r1.kept[10:]].all()  # the documents added from the first dump
    s = r.summary()
    assert s["against"] == {"index": str(tmp_path / "ix"), "dropped": a.n_found,
                            "already_in_index": 0, "verified": "sketch",
                            "distance": 10}  # fmt: skip
    t = r.index_matches
    assert t.column("index").to_pylist() == np.flatnonzero(a.found).tolist()
    assert t.column("verified").to_pylist() == ["sketch"] * a.n_found
    assert t.column("jaccard").to_pylist() == a.jaccard[a.found].tolist()
    rows = list(r.iter_index_clusters())
    assert sum(c["size"] - 1 for c in rows) == a.n_found
    for c in rows:
        assert c["index"] is True and c["verified"] == "sketch"
        assert c["members"][0] == c["kept"] and c["jaccards"][0] == 1.0
        assert all(j >= 0.8 for j in c["jaccards"])
    # documents found in the index are in no cluster of the input itself
    members = {m for c in r.iter_clusters() for m in c["members"]}
    assert not members & {f"b{i}" for i in np.flatnonzero(a.found).tolist()}


@pytest.mark.filterwarnings("ignore:.*no shingles:UserWarning")
def test_plain_index_keeps_todays_behaviour_and_says_so(tmp_path):
    docs = texts(20, 2)
    with Index.create(tmp_path / "ix", distance=6) as ix:
        r1 = neardup.dedup(docs[:10], against=ix, update=True)
        r = neardup.dedup(table(docs[5:], "b"), against=ix)
    a = r.against
    assert a.how == "fingerprint" and np.isnan(a.jaccard).all() and a.found[:5][r1.kept[5:]].all()
    assert r.summary()["against"]["verified"] == "fingerprint"
    assert all("jaccards" not in c and c["verified"] == "fingerprint"
               for c in r.iter_index_clusters())  # fmt: skip
    with (
        Index.create(tmp_path / "sk", threshold=0.8) as ix,
        pytest.raises(ValueError, match="keeps sketches for verified dedup"),
    ):
        neardup.dedup(docs, against=ix, verify=False)


def run(*args: str):
    return invoke("neardup", *args, text=True)


def jsonl(path, rows) -> None:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))


@pytest.mark.slow
@pytest.mark.filterwarnings("ignore:.*no shingles:UserWarning")
def test_command_line(tmp_path):
    docs = texts(40, 3)
    d1, d2 = tmp_path / "d1.jsonl", tmp_path / "d2.jsonl"
    jsonl(d1, [{"id": f"a{i}", "text": t} for i, t in enumerate(docs[:25])])
    jsonl(d2, [{"id": f"b{i}", "text": t} for i, t in enumerate(docs[20:])])
    ix = str(tmp_path / "ix")
    r = run("index", "create", ix, "--threshold", "0.8", "--sketch-words", str(WORDS))
    assert r.returncode == 0 and "distance 10" in r.stderr and "sketches of 8 words" in r.stderr
    r = run("dedup", str(d1), "-o", str(tmp_path / "k1.jsonl"), "--against", ix, "--update")
    assert r.returncode == 0, r.stderr
    assert "against index    0 documents dropped" in r.stderr and "estimated from" in r.stderr
    out, clusters, summary = (tmp_path / n for n in ("k2.jsonl", "c2.jsonl", "s2.json"))
    r = run("dedup", str(d2), "-o", str(out), "--against", ix, "--update", "--clusters",
            str(clusters), "--json-summary", str(summary))  # fmt: skip
    assert r.returncode == 0, r.stderr
    s = json.loads(summary.read_text())
    assert s["against"]["verified"] == "sketch" and s["against"]["dropped"] >= 5
    lines = [json.loads(x) for x in clusters.read_text().splitlines()]
    index_lines = [c for c in lines if c.get("index")]
    assert sum(c["size"] - 1 for c in index_lines) == s["against"]["dropped"]
    assert all(c["kept"].startswith("a") and c["verified"] == "sketch" for c in index_lines)
    # the same through the Python API
    with Index.create(tmp_path / "ix2", threshold=0.8, sketch_words=WORDS) as ix2:
        neardup.dedup(str(d1), against=ix2, update=True)
        want = neardup.dedup(str(d2), against=ix2)
    kept = [json.loads(x)["id"] for x in out.read_text().splitlines()]
    assert kept == [want.ids[i] for i in np.flatnonzero(want.kept)]
    # index add and query with documents: set fingerprints, sketches, estimated Jaccards
    ix3 = str(tmp_path / "ix3")
    assert run("index", "create", ix3, "--threshold", "0.9").returncode == 0
    r = run("index", "add", ix3, str(d1))
    assert r.returncode == 0, r.stderr
    q = tmp_path / "q.jsonl"
    r = run("index", "query", ix3, str(d2), "--threshold", "0.9", "-o", str(q))
    assert r.returncode == 0, r.stderr
    rows = [json.loads(x) for x in q.read_text().splitlines()]
    assert all(m[2] >= 0.9 and len(m) == 3 for row in rows for m in row["matches"])
    assert [m[0] for m in rows[0]["matches"]][:1] == ["a20"]  # docs[20] is in both dumps
    r = run("index", "query", ix3, str(d2), "-o", str(q))
    assert r.returncode == 0 and json.loads(q.read_text().splitlines()[0])["matches"][0] == [
        "a20",
        0,
    ]


def test_command_line_errors(tmp_path):
    d1 = tmp_path / "d1.jsonl"
    jsonl(d1, [{"id": "a", "text": "one two three four five"}])
    fps = tmp_path / "fps.txt"
    fps.write_text("1\n2\n")
    ix, plain = str(tmp_path / "ix"), str(tmp_path / "plain")
    assert run("index", "create", ix, "--threshold", "0.8").returncode == 0
    assert run("index", "create", plain).returncode == 0
    cases = [
        (("index", "add", ix, "--fingerprints", str(fps)), "add documents, not --fingerprints"),
        (("index", "create", str(tmp_path / "x"), "--sketch-words", "8"), "needs --threshold"),
        (("index", "query", plain, str(d1), "--threshold", "0.8"), "keeps no sketches"),
        (
            ("index", "query", ix, "--fingerprints", str(fps), "--threshold", "0.8"),
            "--threshold needs documents",
        ),  # fmt: skip
        (
            ("dedup", str(d1), "-o", str(tmp_path / "o.jsonl"), "--against", ix, "--no-verify"),
            "keeps sketches for verified dedup",
        ),  # fmt: skip
        (
            ("dedup", str(d1), "-o", str(tmp_path / "o.jsonl"), "--against", ix, "-t", "0.7"),
            "answers distances up to 10 bits but dedup uses 13",
        ),  # fmt: skip
        (
            ("index", "create", "redis://127.0.0.1:1/0?name=x", "--threshold", "0.8"),
            "the Redis backend keeps no sketches",
        ),  # fmt: skip
    ]
    for args, message in cases:
        r = run(*args)
        # one line (a first run may say before it that it compiles kernels)
        last = r.stderr.splitlines()[-1]
        assert r.returncode == 2 and message in last, (args, r.stderr)
        assert "Traceback" not in r.stderr and last.startswith("neardup"), (args, r.stderr)
    # with a plain index the summary says the drops are not Jaccard-verified
    r = run("dedup", str(d1), "-o", str(tmp_path / "o.jsonl"), "--against", plain)
    assert r.returncode == 0 and "not Jaccard-verified" in r.stderr


@needs_redis
@pytest.mark.filterwarnings("ignore:.*no shingles:UserWarning")
def test_redis_index_keeps_fingerprint_checks(tmp_path):
    # the Redis backend keeps no sketches: dedup against it is by fingerprint distance, as before
    node = RedisNode(tmp_path / "redis")
    try:
        url = f"{node.url}?name=against"
        docs = texts(30, 4)
        seen = Fingerprinter().fingerprint_many(docs[:15])
        with Index.create(url, distance=6) as ix:
            ix.add(seen, list(range(15)))
        r = neardup.dedup(table(docs[10:], "b"), against=url)
        with Index.create(tmp_path / "local", distance=6) as ix:
            ix.add(seen, list(range(15)))
            want = neardup.dedup(table(docs[10:], "b"), against=ix)
        assert r.against.how == "fingerprint" and r.against.found[:5].all()
        assert r.kept.tolist() == want.kept.tolist() and r.against.id == want.against.id
        assert r.against.distance.tolist() == want.against.distance.tolist()
    finally:
        node.stop()


def _index(kind: str, tmp_path, request) -> str:
    """A new empty index: local, local with sketches, or on a real Redis server."""
    if kind == "redis":
        if not REDIS:
            pytest.skip("redis-server is not installed")
        url = fresh_name(request.getfixturevalue("node").url, "retry")
        Index.create(url, distance=10).close()
        return url
    path = str(tmp_path / "ix")
    if kind == "sketch":
        Index.create(path, threshold=0.8, sketch_words=WORDS).close()
    else:
        Index.create(path, distance=10).close()
    return path


def _dedup_update(src, out, ix: str, *extra: str) -> dict:
    """``neardup dedup SRC --against IX --update``: what it wrote and the index's size after."""
    files = {n: out / n for n in ("kept.jsonl", "drop.txt", "c.jsonl", "s.json")}
    r = run("dedup", str(src), "-o", str(files["kept.jsonl"]), "--drop-list",
            str(files["drop.txt"]), "--clusters", str(files["c.jsonl"]), "--json-summary",
            str(files["s.json"]), "--against", ix, "--update", *extra)  # fmt: skip
    assert r.returncode == 0, r.stderr
    got = {n: p.read_text() for n, p in files.items() if n != "s.json"}
    summary = json.loads(files["s.json"].read_text())
    with Index.open(ix) as opened:
        return {"files": got, "summary": summary, "entries": len(opened), "stderr": r.stderr}


@pytest.mark.filterwarnings("ignore:.*no shingles:UserWarning")
@pytest.mark.parametrize(
    "kind, extra",
    [
        ("plain", ()),
        ("plain", ("--no-verify",)),
        ("sketch", ()),
        ("redis", ()),
        ("redis", ("--no-verify",)),
    ],  # fmt: skip
)
@pytest.mark.slow
def test_update_rerun_on_the_same_dump_changes_nothing(tmp_path, request, kind, extra):
    docs = texts(40, 9)
    d1, d2 = tmp_path / "d1.jsonl", tmp_path / "d2.jsonl"
    jsonl(d1, [{"id": f"a{i}", "text": t} for i, t in enumerate(docs[:28])])
    jsonl(d2, [{"id": f"b{i}", "text": t} for i, t in enumerate(docs[20:])])
    ix = _index(kind, tmp_path, request)
    runs = []
    for src in (d1, d1, d2, d2, d1):
        out = tmp_path / f"run{len(runs)}"
        out.mkdir()
        runs.append(_dedup_update(src, out, ix, *extra))
    first, again = runs[0], runs[1]
    kept = [json.loads(x)["id"] for x in first["files"]["kept.jsonl"].splitlines()]
    assert 0 < len(kept) < 28 and first["entries"] == len(kept)
    # a retry writes the same outputs and adds nothing: every kept document is in the index
    # as itself (same id, same fingerprint), not a near-duplicate of itself
    assert again["files"] == first["files"] and again["entries"] == first["entries"]
    assert again["summary"]["against"]["already_in_index"] == len(kept)
    assert again["summary"]["against"]["dropped"] == first["summary"]["against"]["dropped"] == 0
    assert f"{len(kept)} already in it as themselves" in again["stderr"]
    # the second dump meets the first in the index; its retry and the first dump's are unchanged
    assert runs[2]["summary"]["against"]["dropped"] > 0 and runs[2]["entries"] > len(kept)
    assert runs[3]["files"] == runs[2]["files"] and runs[3]["entries"] == runs[2]["entries"]
    assert runs[4]["files"] == first["files"] and runs[4]["entries"] == runs[2]["entries"]


@pytest.mark.filterwarnings("ignore:.*no shingles:UserWarning")
@pytest.mark.parametrize("kind", ["plain", "sketch"])
def test_a_retry_after_a_partial_update_finishes_it(tmp_path, request, kind):
    # what an interrupted run leaves (its outputs written, some survivors added or none),
    # then the same command again: the outputs of one clean run, every survivor added once
    docs = texts(40, 12)
    src = tmp_path / "d.jsonl"
    jsonl(src, [{"id": f"a{i}", "text": t} for i, t in enumerate(docs)])
    clean, out = tmp_path / "clean", tmp_path / "retry"
    clean.mkdir()
    out.mkdir()
    want = _dedup_update(src, clean, _index(kind, clean, request))
    ix = _index(kind, out, request)
    r = neardup.dedup(InputPath(str(src)), against=ix)  # the survivors and their fingerprints
    assert r.kept.sum() == want["entries"]
    half = np.flatnonzero(r.kept)[::2]
    with Index.open(ix, "w") as w:
        neardup.dedup(InputPath(str(src)), against=w, update=True)  # every survivor, then
        w.remove([r.ids[i] for i in np.flatnonzero(r.kept)[1::2]])  # all but half of them
        assert len(w) == len(half)
    got = _dedup_update(src, out, ix)
    assert got["files"] == want["files"] and got["entries"] == want["entries"]
    assert got["summary"]["against"]["already_in_index"] == len(half)


def _outputs(out) -> list[str]:
    """The argument list of a run's outputs, all in directory ``out``."""
    return ["-o", str(out / "kept.jsonl"), "--clusters", str(out / "c.jsonl"), "--drop-list",
            str(out / "drop.txt"), "--json-summary", str(out / "s.json")]  # fmt: skip


def _files(out) -> dict:
    return {p.name: p.read_bytes() for p in sorted(out.iterdir()) if p.name != "s.json"}


@pytest.mark.filterwarnings("ignore:.*no shingles:UserWarning")
@pytest.mark.slow
def test_a_failed_index_update_changes_no_output(tmp_path, monkeypatch):
    import neardup.index.index as index_module  # the module whose commits write the manifest

    src = tmp_path / "d.jsonl"
    jsonl(src, [{"id": f"a{i}", "text": t} for i, t in enumerate(texts(30, 5))])
    out, clean = tmp_path / "out", tmp_path / "clean"
    out.mkdir()
    clean.mkdir()
    Index.create(tmp_path / "ix0", distance=10).close()
    assert run("dedup", str(src), *_outputs(clean), "--against", str(tmp_path / "ix0"),
               "--update").returncode == 0  # fmt: skip
    (out / "kept.jsonl").write_text("OLD\n")
    (out / "drop.txt").write_text("OLD\n")
    before = _files(out)
    ix = str(tmp_path / "ix")
    Index.create(ix, distance=10).close()

    def full_disk(directory, body, *unsynced, **kw):  # (and the files it would fsync)
        raise OSError(errno.ENOSPC, "No space left on device", os.path.join(directory, "MANIFEST"))

    monkeypatch.setattr(index_module, "write_manifest", full_disk)
    r = run("dedup", str(src), *_outputs(out), "--against", ix, "--update", "-q")
    lines = [ln for ln in r.stderr.splitlines() if "compiling kernels" not in ln]
    assert r.returncode == 2 and len(lines) == 1 and "Traceback" not in r.stderr, r.stderr
    assert lines[0] == (
        f"neardup: error: {ix}: index not updated: {ix}/MANIFEST: No space left on device; "
        "no output was changed; run the same command again"
    )
    assert _files(out) == before  # the outputs put back, none added, no temporary file left
    with Index.open(ix) as opened:
        assert len(opened) == 0 and opened.generation == 0
    monkeypatch.undo()  # the disk has room again: the same command finishes the run
    assert run("dedup", str(src), *_outputs(out), "--against", ix, "--update").returncode == 0
    assert _files(out) == _files(clean)
    with Index.open(ix) as opened, Index.open(tmp_path / "ix0") as want:
        assert len(opened) == len(want) > 0

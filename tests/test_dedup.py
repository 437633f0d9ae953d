"""neardup.dedup and neardup.decide: decisions against brute force, the Python API, and the two file passes."""

from __future__ import annotations

import dataclasses
import json
import os
import tempfile
import warnings

import naive
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from strategies import fingerprints

from neardup import decide, dedup
from neardup.core.decide import keep_order
from neardup.core.similarity import ShingleSets, subset_sets
from neardup.core.verify import (
    pair_jaccard,
    priority_order,
)
from neardup.errors import InputError
from neardup.fingerprints import Fingerprinter
from neardup.pipeline.stage_table import STAGES

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SAMPLE = os.path.join(ROOT, "data", "sample")

BASE = (
    "the quick brown fox jumps over the lazy dog while the farmer counts his sheep in the rain "
    "and the miller grinds the wheat that the baker will turn into bread for the whole village "
    "before the market opens on saturday morning near the old stone bridge by the river"
)
DOCS = [
    BASE,
    "an entirely different sentence about compilers, caches and the price of coffee beans",
    BASE.replace("farmer", "farmer slowly"),  # near-duplicate of 0 (4 bits apart), longer
    BASE.upper() + "!",  # same fingerprint as 0 (case and punctuation are normalised)
    "yet another unrelated text: tides, moons, and the orbit of a small comet near Jupiter",
]


def check_against_naive(d, fp, lengths, keep: str, distance: int) -> None:
    """``d`` (Decisions) is the naive keep-order rule, and what the rule promises holds."""
    n = len(fp)
    pos = np.arange(n)
    kept_for = naive.decide_fingerprints(fp, distance, priority_order(n, keep, lengths).tolist())
    want = np.where(np.array(kept_for, dtype=np.int64) < 0, pos, kept_for).astype(np.int64)
    np.testing.assert_array_equal(d.survivor, want)
    np.testing.assert_array_equal(d.kept, want == pos)
    np.testing.assert_array_equal(d.distance, naive.distances(fp, fp)[pos, want].reshape(n))
    assert (d.distance <= distance).all()  # within d of the one it was dropped for
    assert d.kept[d.survivor].all()  # and that one is kept
    for i in range(n):  # label: the smallest position of the kept one and those dropped for it
        assert d.labels[i] == min(j for j in range(n) if want[j] == want[i])


@settings(max_examples=80, deadline=None)
@given(
    fingerprints(max_size=80),
    st.integers(0, 7),
    st.sampled_from(["first", "longest"]),
    st.integers(0, 2**32 - 1),
)
def test_decide_matches_naive_keep_order(fp, distance, keep, seed):
    lengths = np.random.default_rng(seed).integers(0, 4, size=len(fp))  # many ties
    d = decide(fp, lengths, keep=keep, distance=distance)
    check_against_naive(d, fp, lengths, keep, distance)
    sizes = np.bincount(d.labels, minlength=len(fp)) if len(fp) else np.zeros(0, int)
    assert d.n_clusters == int((sizes >= 2).sum())


@pytest.mark.parametrize("keep", ["first", "longest"])
@pytest.mark.parametrize("distance", [0, 1, 3, 6])
@pytest.mark.parametrize(
    "values",
    [
        [],
        [7],
        [0] * 5 + [2**64 - 1] * 4 + [1, 2**64 - 2, 3, 2**64 - 4],  # families of one value
        [0, 1, 3, 7, 15, 31, 63, 127, 255] * 2,  # a long chain, each link one bit, repeated
        [2**64 - 1, 0, 2**63, 2**63 - 1, 1, 2**64 - 2],
    ],
)
def test_decide_adversarial_inputs(values, distance, keep):
    fp = np.array(values, dtype=np.uint64)
    lengths = np.arange(len(fp)) % 3  # ties in every keep="longest" group
    d = decide(fp, lengths, keep=keep, distance=distance)
    check_against_naive(d, fp, lengths, keep, distance)


def test_no_verify_never_drops_through_a_chain():
    # A~B and B~C at distance 1, A and C two bits apart: B goes for A, C stays (it was dropped
    # for B, a dropped document, under connected components)
    a, b, c = 0b00, 0b01, 0b11
    d = decide([a, b, c], distance=1)
    assert d.kept.tolist() == [True, False, True]
    assert d.survivor.tolist() == [0, 0, 2]
    assert d.distance.tolist() == [0, 1, 0]
    assert d.labels.tolist() == [0, 0, 2]
    # a chain of 20 one-bit steps: every other link is kept, never one 2 bits from a kept one
    chain = [(1 << k) - 1 for k in range(20)]
    d = decide(chain, distance=1)
    assert d.kept.tolist() == [k % 2 == 0 for k in range(20)]
    assert (d.distance <= 1).all()


@settings(max_examples=40, deadline=None)
@given(fingerprints(max_size=60), st.integers(0, 6), st.sampled_from(["first", "longest"]))
def test_keep_order_from_given_pairs(fp, distance, keep):
    """Pairs found elsewhere (one document per distinct value, as the Dask and GPU paths send,
    or every pair of documents) give the searched decisions; pairs further apart count for
    nothing."""
    lengths = np.arange(len(fp)) % 2
    order = priority_order(len(fp), keep, lengths)
    searched = keep_order(fp, order, distance)
    u, first = np.unique(fp, return_index=True)
    by_value = first[naive.find_all(u, distance)].reshape(-1, 2)
    every = naive.find_all(fp, distance)
    far = naive.find_all(fp, 64)
    for pairs in (by_value, every, np.concatenate([every, far])):
        np.testing.assert_array_equal(keep_order(fp, order, distance, pairs=pairs), searched)


def test_decide_fixed_and_already_seen():
    fp = np.array([0b1111, 0b0111, 0b0011, 1 << 40, (1 << 40) | 1, 7 << 50], dtype=np.uint64)
    d = decide(fp, [1, 9, 3, 5, 5, 1], keep="longest", distance=1)
    assert d.labels.tolist() == [0, 0, 0, 3, 3, 5]
    assert d.survivor.tolist() == [1, 1, 1, 3, 3, 5]  # ties -> first
    assert d.distance.tolist() == [1, 0, 1, 0, 1, 0]
    assert d.kept.tolist() == [False, True, False, True, False, True]
    seen = np.array([False, False, False, False, False, True])
    d = decide(fp, keep="first", distance=1, already_seen=seen)
    # 0b0011 is 2 bits from the kept 0b1111 and near only the dropped 0b0111: kept
    assert d.kept.tolist() == [True, False, True, True, False, False]
    assert decide(fp[:3], distance=1).distance.tolist() == [0, 1, 0]
    with pytest.raises(
        ValueError, match=r"keep must be first, longest, max:FIELD or min:FIELD \(got "
    ):
        decide(fp, keep="last")
    with pytest.raises(ValueError, match="needs the document lengths"):
        decide(fp, keep="longest")
    with pytest.raises(ValueError, match="got 6 fingerprints but 2 lengths"):
        decide(fp, [1, 2])
    with pytest.raises(ValueError, match="pairs name positions outside"):
        keep_order(fp, np.arange(6), 1, pairs=np.array([[0, 6]]))
    assert decide(np.zeros(0, np.uint64)).kept.tolist() == []


def test_dedup_in_memory_list():
    r = dedup(DOCS, verify=False)
    assert r.labels.tolist() == [0, 1, 0, 0, 4]
    assert r.kept.tolist() == [True, True, False, False, True]
    assert r.kept_ids.to_pylist() == [0, 1, 4]
    assert r.dropped_ids.to_pylist() == [2, 3]
    t = r.clusters
    assert t.column_names == ["index", "id", "cluster", "kept_id", "kept", "distance", "jaccard"]
    assert t.column("jaccard").null_count == 3  # not verified
    assert t.column("id").to_pylist() == [0, 2, 3]
    assert t.column("kept_id").to_pylist() == [0, 0, 0]
    assert t.column("distance").to_pylist()[2] == 0
    assert list(r.iter_clusters()) == [
        {
            "kept": 0,
            "size": 3,
            "members": [0, 2, 3],
            "distances": r.decisions.distance[[0, 2, 3]].tolist(),
        }
    ]
    s = r.summary()
    assert (s["documents"], s["clusters"], s["dropped"], s["kept"]) == (5, 1, 2, 3)
    assert not s["verified"] and "threshold" not in s
    assert s["temp_bytes"] == sum(v["temp_bytes"] for v in s["stages"].values()) > 0
    longest = dedup(iter(DOCS), keep="longest", verify=False)
    assert longest.kept.tolist() == [False, True, True, False, True]


def test_dedup_verified_in_memory_list():
    r = dedup(DOCS)  # verified at Jaccard 0.8 by default
    assert r.kept.tolist() == [True, True, False, False, True]
    assert r.decisions.survivor.tolist() == [0, 1, 0, 0, 4]
    sets = Fingerprinter().features_many(DOCS)
    want = [1.0, 1.0, pair_jaccard((sets.offsets, sets.keys), [(0, 2)])[0], 1.0, 1.0]
    assert r.jaccard.tolist() == want
    t = r.clusters
    assert t.column("jaccard").to_pylist() == [want[0], want[2], want[3]]
    rows = list(r.iter_clusters())
    assert rows == [
        {
            "kept": 0,
            "size": 3,
            "members": [0, 2, 3],
            "distances": r.decisions.distance[[0, 2, 3]].tolist(),
            "jaccards": [1.0, want[2], 1.0],
        }
    ]
    s = r.summary()
    assert s["verified"] and s["threshold"] == 0.8 and s["no_shingles"] == 0
    # the work directory held the shingle keys (4 bytes each) among the stages' files
    assert s["temp_bytes"] >= 4 * len(sets.keys) and {"scan", "decide"} <= set(s["seconds"])
    # the edited copy is below 0.99: dropped only at the lower threshold
    assert dedup(DOCS, threshold=0.99).kept.tolist() == [True, True, True, False, True]
    longest = dedup(DOCS, keep="longest")
    assert longest.kept.tolist() == [False, True, True, False, True]
    assert longest.labels.tolist() == [0, 1, 0, 0, 4]  # the cluster's smallest position
    with pytest.raises(ValueError, match="threshold"):
        dedup(DOCS, threshold=0)


WORDS = [f"w{i}" for i in range(12)]


@settings(max_examples=40, deadline=None)
@given(
    st.lists(
        st.lists(st.sampled_from(WORDS), min_size=0, max_size=14).map(" ".join),
        min_size=0,
        max_size=40,
    ),
    st.sampled_from([0.5, 0.7, 0.8, 0.9, 1.0]),
    st.sampled_from(["first", "longest"]),
    st.sampled_from([None, 20]),
)
def test_dedup_verified_matches_naive(docs, threshold, keep, distance):
    # few words: many near-duplicates, identical sets, documents without shingles
    docs = docs + docs[:3]  # exact duplicates too
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        r = dedup(docs, threshold=threshold, keep=keep, distance=distance)
    f = Fingerprinter().features_many(docs)  # the keys dedup verifies with
    sets = naive.csr_to_sets(f.offsets, f.keys)
    fps = [naive.set_minhash(x) for x in sets]
    order = priority_order(len(docs), keep, [len(d) for d in docs])
    d = 64 if distance is None else distance  # by default (prefix) every pair is a candidate
    kept_for, jac = naive.decide_verified(sets, fps, threshold, order, distance=d)
    n = len(docs)
    assert r.kept.tolist() == [k < 0 for k in kept_for]
    assert r.decisions.survivor.tolist() == [i if k < 0 else k for i, k in enumerate(kept_for)]
    assert np.allclose(r.jaccard, [1.0 if j is None else j for j in jac])
    for i in np.flatnonzero(r.dropped).tolist():  # every drop verified against its kept one
        k = int(r.decisions.survivor[i])
        assert r.kept[k] and naive.jaccard(sets[i], sets[k]) >= threshold
    assert r.summary()["no_shingles"] == sum(not x for x in sets)
    assert all(r.kept[i] for i in range(n) if not sets[i])


def test_dedup_verified_keeps_documents_without_shingles():
    docs = ["", "", "!!! ...", BASE, BASE, "   "]
    with pytest.warns(UserWarning, match=r"4 of 6 documents \(66.7%\) have no shingles"):
        r = dedup(docs)
    assert r.kept.tolist() == [True, True, True, True, False, True]
    assert r.summary()["no_shingles"] == 4 and r.n_clusters == 1
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # 1 of 101 is under the 1% that warns
        assert dedup([""] + [f"{BASE} {i}" for i in range(100)]).kept[0]


def _shingle_files(directory) -> list[str]:
    """The temporary work directories (the shingle keys among their files) in ``directory``."""
    return [p for p in os.listdir(directory) if p.startswith(".neardup-work.neardup-")]


def test_dedup_temporary_file_removed_after_success_and_error(tmp_path, monkeypatch):
    temp = tmp_path / "tmp"
    temp.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(temp))
    src = tmp_path / "in.jsonl"
    _jsonl(src, [{"id": i, "text": DOCS[i % 5] + f" {i}"} for i in range(50)])
    r = dedup(src)
    assert r.temp_bytes > 0 and r.summary()["temp_bytes"] == r.temp_bytes
    assert _shingle_files(temp) == []
    with open(src, "a") as f:
        f.write("{not json\n")
    with pytest.raises(InputError, match="in.jsonl:51"):
        dedup(src, clusters=tmp_path / "c.jsonl")
    assert _shingle_files(temp) == [] and not (tmp_path / "c.jsonl").exists()
    with pytest.raises(ValueError, match="document 1: text is missing"):
        dedup([DOCS[0], None])
    assert _shingle_files(temp) == []

    def interrupt(*args, **kwargs):
        assert len(_shingle_files(temp)) == 1  # the keys are on disk while deciding
        raise KeyboardInterrupt

    step = STAGES["decide-all"]
    monkeypatch.setitem(STAGES, "decide-all", dataclasses.replace(step, fn=interrupt))
    with pytest.raises(KeyboardInterrupt):
        dedup(src, skip_bad=True)
    assert _shingle_files(temp) == []


@pytest.mark.slow
def test_dedup_pyarrow_and_pandas():
    pa = pytest.importorskip("pyarrow")
    table = pa.table({"key": ["a", "b", "c", "d", "e"], "body": DOCS})
    r = dedup(table, text_field="body", id_field="key")
    assert r.kept_ids.to_pylist() == ["a", "b", "e"]
    assert table.filter(pa.array(r.kept)).column("key").to_pylist() == ["a", "b", "e"]
    r = dedup(pa.array(DOCS))
    assert r.kept.tolist() == [True, True, False, False, True]
    with pytest.raises(ValueError, match="no column 'text'"):
        dedup(table)
    pd = pytest.importorskip("pandas")
    df = pd.DataFrame({"text": DOCS}, index=[10, 11, 12, 13, 14])
    r = dedup(df)
    assert r.kept_ids.to_pylist() == [10, 11, 14]
    assert df[r.kept].index.tolist() == [10, 11, 14]
    assert dedup(df["text"]).kept.tolist() == r.kept.tolist()


@pytest.mark.slow
def test_dedup_in_memory_bad_input():
    with pytest.raises(ValueError, match="document 1: text is missing"):
        dedup(["a b c", None, "d e f"])
    r = dedup(["a b c", None, "d e f", 5], skip_bad=True)
    assert (len(r), r.skipped, r.positions.tolist()) == (2, 2, [0, 2])
    pa = pytest.importorskip("pyarrow")
    t = pa.table({"id": [1, 2, 1], "text": ["x y", "y z", "z w"]})
    with pytest.raises(ValueError, match="document 2: duplicate id 1 .first at document 0"):
        dedup(t)
    r = dedup(t, skip_bad=True)
    assert r.ids == [1, 2] and r.skipped == 1


def _jsonl(path, rows):
    with open(path, "w", encoding="utf-8") as f:
        for row in rows:
            f.write((row if isinstance(row, str) else json.dumps(row)) + "\n")


def test_jsonl_pass_two_is_byte_exact(tmp_path):
    src = tmp_path / "docs.jsonl"
    rows = [{"id": f"d{i}", "text": t, "extra": [i, {"k": "é"}]} for i, t in enumerate(DOCS)]
    lines = [json.dumps(r, ensure_ascii=False) for r in rows]
    lines.insert(2, "")  # a blank line: not a record, not written
    lines[0] = lines[0].replace(", ", ",  ")  # odd spacing kept as is
    src.write_text("\n".join(lines), encoding="utf-8")  # no newline after the last line
    out = tmp_path / "kept.jsonl"
    r = dedup(src, output=out)
    assert r.kept_ids.to_pylist() == ["d0", "d1", "d4"]
    assert out.read_bytes() == (lines[0] + "\n" + lines[1] + "\n" + lines[-1] + "\n").encode()
    assert r.scan.record.tolist() == [1, 2, 4, 5, 6]
    assert r.bytes_out == out.stat().st_size and r.bytes_in == src.stat().st_size
    # several inputs: one output in input order; keep=longest keeps the longer copy
    src2 = tmp_path / "more.jsonl"
    _jsonl(src2, [{"id": "x", "text": DOCS[0] + " and more words here"}])
    r = dedup([src, src2], output=out, keep="longest")
    kept = [json.loads(x)["id"] for x in out.read_text().splitlines()]
    assert kept == ["d1", "d4", "x"]


def test_parquet_round_trip(tmp_path):
    pa = pytest.importorskip("pyarrow")
    pq = pytest.importorskip("pyarrow.parquet")
    n = len(DOCS)
    table = pa.table(
        {
            "id": pa.array(range(n), pa.int64()),
            "text": DOCS,
            "score": pa.array([0.5 * i for i in range(n)]),
            "tags": [["a"], [], ["b", "c"], None, ["d"]],
        }
    )
    src = tmp_path / "a.parquet"
    pq.write_table(table, src, row_group_size=2)
    src2 = tmp_path / "b.parquet"
    pq.write_table(table.slice(1, 1).set_column(0, "id", pa.array([99], pa.int64())), src2)
    out = tmp_path / "kept.parquet"
    r = dedup([src, src2], output=out)
    got = pq.read_table(out)
    assert got.schema.equals(table.schema, check_metadata=False)
    expected = pa.concat_tables([table.take([0, 1, 4])])
    assert got.slice(0, 3).equals(expected)
    assert got.column("id").to_pylist() == [0, 1, 4]  # row 99 is a copy of row 1: dropped
    assert r.dropped_ids.to_pylist() == [2, 3, 99]
    other = tmp_path / "c.parquet"
    pq.write_table(pa.table({"id": [1], "text": ["x"]}), other)
    with pytest.raises(InputError, match="Parquet schema differs"):
        dedup([src, other], output=tmp_path / "o.parquet")


def test_text_files_directory(tmp_path):
    d = tmp_path / "in"
    (d / "sub").mkdir(parents=True)
    for i, t in enumerate(DOCS):
        (d / ("sub" if i % 2 else "") / f"doc{i}.txt").write_text(t)
    (d / ".hidden").write_bytes(b"\xff")  # dot-files are skipped
    out = tmp_path / "out"
    r = dedup(d, output=out)
    assert len(r) == 5
    written = sorted(str(p.relative_to(out)) for p in out.rglob("*") if p.is_file())
    kept = [os.path.relpath(i, d) for i in r.kept_ids.to_pylist()]
    assert written == sorted(kept) and len(kept) == 3
    for name in written:
        assert (out / name).read_bytes() == (d / name).read_bytes()
    with pytest.raises(InputError, match="not empty"):
        dedup(d, output=out)
    r = dedup(str(d / "*.txt"), output=tmp_path / "glob")
    assert len(r) == 3


def test_errors_name_file_and_record_and_leave_no_output(tmp_path):
    src = tmp_path / "docs.jsonl"
    _jsonl(src, [{"id": 1, "text": "a b c"}, {"id": 2, "text": "d e f"}, {"id": 1, "text": "g"}])
    out = tmp_path / "out.jsonl"
    with pytest.raises(InputError, match=rf"{src}:3: duplicate id 1 \(first at {src}:1\)"):
        dedup(src, output=out)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["docs.jsonl"]
    skipped = []
    r = dedup(src, skip_bad=True, on_bad=skipped.append)
    assert r.ids == [1, 2] and r.skipped == 1 and "duplicate id" in str(skipped[0])
    _jsonl(
        src, [{"id": 1, "text": "a b c"}, "{broken", {"id": 3, "body": "x"}, {"id": 4, "text": 4}]
    )
    with pytest.raises(InputError, match=rf"{src}:2: not valid JSON"):
        dedup(src)
    r = dedup(src, skip_bad=True, output=out)
    assert r.skipped == 3 and out.read_text() == '{"id": 1, "text": "a b c"}\n'
    with pytest.raises(InputError, match="no such file"):
        dedup(tmp_path / "missing.jsonl")
    with pytest.raises(InputError, match="overwrite an input"):
        dedup(src, output=src)
    with pytest.raises(InputError, match="inputs mix formats"):
        dedup([src, tmp_path / "out.jsonl", tmp_path / ".."])
    with pytest.raises(ValueError, match="output= needs file input"):
        dedup(["a"], output=out)


def test_sample_corpus_finds_planted_duplicates():
    planted = {json.loads(x)["id"] for x in open(os.path.join(SAMPLE, "planted.jsonl"))}
    corpus = os.path.join(SAMPLE, "corpus.jsonl")
    r = dedup(corpus, verify=False)
    dropped = set(r.dropped_ids.to_pylist())
    assert len(r) == 1200 and os.path.getsize(corpus) < 2_000_000
    assert len(planted) == 174
    assert dropped <= planted  # no false positives
    assert len(dropped) >= 0.7 * len(planted)
    v = dedup(corpus)  # verified at 0.8: every planted copy, nothing else
    assert set(v.dropped_ids.to_pylist()) == planted
    texts = [json.loads(x)["text"] for x in open(corpus)]
    f = Fingerprinter().features_many(texts)
    drops = np.flatnonzero(v.dropped)
    pairs = np.stack([drops, v.decisions.survivor[drops]], axis=1)
    jac = pair_jaccard((f.offsets, f.keys), pairs)
    assert (jac >= 0.8).all() and np.allclose(jac, v.jaccard[drops])
    assert v.kept[v.decisions.survivor[drops]].all()  # no chaining


@pytest.mark.slow
def test_dedup_verified_skips_duplicate_ids_in_memory():
    pa = pytest.importorskip("pyarrow")
    texts = [BASE, DOCS[1], DOCS[4], BASE.upper() + "!", DOCS[2]]
    table = pa.table({"id": ["a", "b", "a", "c", "d"], "text": texts})
    r = dedup(table, skip_bad=True)
    assert r.skipped == 1 and r.ids == ["a", "b", "c", "d"]
    want = dedup([texts[i] for i in (0, 1, 3, 4)])
    assert r.kept.tolist() == want.kept.tolist() == [True, True, False, False]
    assert np.array_equal(r.jaccard, want.jaccard)


def test_subset_sets_copies_the_chosen_documents():
    sets = [{1, 2}, set(), {3}, {4, 5, 6}, {7}]
    offsets, keys = naive.sets_to_csr(sets)
    keep = np.array([True, True, False, True, False])
    got = subset_sets(ShingleSets(offsets, keys), np.flatnonzero(keep))
    assert naive.csr_to_sets(got.offsets, got.keys) == [s for s, k in zip(sets, keep) if k]


@pytest.mark.parametrize("verify", [True, False])
def test_collect_false_gives_the_same_result_type_with_its_counts_but_no_arrays(tmp_path, verify):
    """``dedup()`` gives one type: with ``collect=False`` a :class:`DedupResult` whose counts
    and summary are those of the collected run, and whose per-document fields say they were not
    collected (a clear error, not a wrong answer); the summary of either is what
    ``--json-summary`` writes."""
    from neardup import DedupResult
    from neardup.errors import NotCollectedError

    src = os.path.join(SAMPLE, "corpus.jsonl")
    full = dedup(src, verify=verify, json_summary=tmp_path / "s.json")
    lean = dedup(src, verify=verify, collect=False)
    assert type(full) is type(lean) is DedupResult
    assert full.collected and not lean.collected
    assert (len(lean), lean.n_clusters, lean.n_dropped) == (
        len(full), full.n_clusters, full.n_dropped) == (1200, full.summary()["clusters"],
                                                         int(full.dropped.sum()))  # fmt: skip
    assert full.n_dropped > 0 and full.n_clusters > 0
    drop = ("seconds", "documents_per_second", "stages")
    trim = lambda s: {k: v for k, v in s.items() if k not in drop}  # noqa: E731
    assert trim(lean.summary()) == trim(full.summary())
    assert full.summary() == json.loads((tmp_path / "s.json").read_text())
    assert lean.summary()["stages"].keys() == full.summary()["stages"].keys()
    figures = lambda r: (r.skipped, r.threshold, r.bytes_in, r.bytes_out, r.candidates)  # noqa: E731
    assert figures(lean) == figures(full)
    assert full.bytes_in == os.path.getsize(src) and full.bytes_out == 0  # nothing written
    assert "dropped=" in repr(lean)
    for use in (lambda r: r.kept, lambda r: r.ids[0], lambda r: len(r.fingerprints),
                lambda r: r.clusters, lambda r: r.filter([1]), lambda r: r.verified.jaccard):  # fmt: skip
        with pytest.raises(NotCollectedError, match=r"collect=False.*collect=True"):
            use(lean)

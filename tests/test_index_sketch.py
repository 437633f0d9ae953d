"""An index with sketches (created with ``threshold=``) against a brute-force model: verified
queries after add/remove/compact/reopen sequences, int and str ids, both codecs; its format
(manifest, files, version) and the errors of adding without, or with the wrong, sketches."""

from __future__ import annotations

import json
import os
import zlib
from unittest import mock

import naive
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from neardup import Matches
from neardup.core.sketch import Sketches, set_sketches
from neardup.index import CorruptIndexError, Index, storage

WORDS = 4


def documents(n: int, seed: int) -> list[set]:
    """``n`` key sets in families: a base of 20-200 keys and members with a few keys changed
    (Jaccard from about 0.7 to 1 within a family), some empty sets, some single keys."""
    rng = np.random.default_rng(seed)
    out: list[set] = []
    while len(out) < n:
        base = set(rng.choice(10**6, int(rng.integers(20, 200)), replace=False).tolist())
        for _ in range(int(rng.integers(1, 6))):
            s = set(base)
            for k in rng.choice(sorted(s), int(rng.integers(0, len(s) // 8 + 1)), replace=False):
                s.discard(int(k))
                s.add(int(rng.integers(10**6, 2 * 10**6)))
            out.append(s)
        if rng.random() < 0.1:
            out.append(set())
        if rng.random() < 0.1:
            out.append({int(rng.integers(0, 10))})
    return out[:n]


def sketches_of(sets: list[set], words: int = WORDS) -> Sketches:
    return set_sketches(naive.sets_to_csr(sets), words, threads=1)


def check(ix: Index, model: dict, queries: Sketches, threshold: float, distance: int) -> None:
    """verified_query and query_arrays of ``ix`` against brute force over ``model``
    {id: (sketch words, size)}."""
    got = ix.verified_query(queries, threshold, distance)
    qs = list(zip(queries.words.tolist(), queries.sizes.tolist(), strict=True))
    want = naive.verified_query(model, qs, threshold, distance)
    rows = list(zip(got.query_index.tolist(), got.ids.tolist(), got.distances.tolist(),
                    got.jaccards.tolist(), strict=True))  # fmt: skip
    if isinstance(next(iter(model), 0), str):  # ties of str ids come in the index's own order
        rows.sort(key=lambda r: (r[0], -r[3], r[2], r[1]))
    assert rows == want
    # the fingerprints an index with sketches searches are the sketches' first words
    plain = ix.query_arrays(queries.fingerprints, distance)
    ids = sorted(model)
    corpus = np.array([model[i][0][0] for i in ids], dtype=np.uint64)
    qi, ci, di = naive.query(corpus, queries.fingerprints, distance)
    want_plain = sorted(zip(qi.tolist(), di.tolist(), [ids[c] for c in ci.tolist()], strict=True))
    got_plain = sorted(zip(plain.query_index.tolist(), plain.distance.tolist(), plain.id.tolist(),
                           strict=True))  # fmt: skip
    assert got_plain == want_plain
    assert len(ix) == len(model)
    near = ix.nearest(queries.fingerprints, distance)
    first = np.unique(plain.query_index, return_index=True)[1]
    assert near.query_index.tolist() == plain.query_index[first].tolist()
    assert near.ids.tolist() == plain.id[first].tolist()


ops = st.lists(
    st.one_of(
        st.tuples(st.just("add"), st.integers(0, 100), st.integers(0, 30)),
        st.tuples(st.just("remove"), st.lists(st.integers(0, 120), max_size=15)),
        st.tuples(st.just("compact")),
        st.tuples(st.just("reopen")),
    ),
    max_size=8,
)


@pytest.mark.slow
@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    ops=ops,
    str_ids=st.booleans(),
    compress=st.booleans(),
    threshold=st.sampled_from([0.7, 0.8, 0.9]),
    max_segments=st.integers(2, 5),
    seed=st.integers(0, 2**16),
)
def test_sequences_match_brute_force(
    tmp_path_factory, ops, str_ids, compress, threshold, max_segments, seed
):
    path = tmp_path_factory.mktemp("ix") / "index"
    pool = sketches_of(documents(130, seed))  # entries and queries from the same families
    queries = pool.take(np.arange(0, 130, 2))
    distance = 12
    model: dict = {}
    next_id = 0
    with mock.patch("os.fsync"):  # durability is tested by the crash tests
        ix = Index.create(path, distance, 13, threshold=0.7, sketch_words=WORDS, compress=compress)
        ix.max_segments = max_segments
        try:
            for op in ops:
                if op[0] == "add":
                    sk = pool.take(np.arange(op[1], op[1] + op[2]))
                    ids = list(range(next_id, next_id + len(sk)))
                    ids = [f"d{i}" for i in ids] if str_ids else ids
                    ix.add(None, ids, sketches=sk)
                    for i, w, z in zip(ids, sk.words.tolist(), sk.sizes.tolist(), strict=True):
                        model[i] = (w, z)
                    next_id += len(sk)
                elif op[0] == "remove":
                    gone = [f"d{i}" if str_ids else i for i in op[1]]
                    n = ix.remove(gone, missing="ignore")
                    assert n == len({i for i in gone if i in model})
                    for i in gone:
                        model.pop(i, None)
                elif op[0] == "compact":
                    ix.compact()
                else:
                    ix.close()
                    ix = Index.open(path, "w")
                    ix.max_segments = max_segments
                check(ix, model, queries, threshold, distance)
            ix.verify()
        finally:
            ix.close()
    with Index.open(path) as r:
        check(r, model, queries, threshold, 10)


def test_format_on_disk(tmp_path):
    path = tmp_path / "ix"
    sets = documents(30, 1)
    sk = sketches_of(sets, 8)
    with Index.create(path, threshold=0.8, sketch_words=8, expected_size=100) as ix:
        assert ix.distance == 10 and ix.sketch_words == 8
        ix.add(None, list(range(30)), sketches=sk)
        assert ix.info()["sketch_words"] == 8
        assert ix.threshold == ix.info()["threshold"] == 0.8  # what the service defaults to
    doc = json.loads((path / "MANIFEST").read_text())
    assert doc["format_version"] == storage.SKETCH_FORMAT_VERSION == 3
    assert doc["sketch_words"] == 8 and doc["threshold"] == 0.8
    assert Index.open(path).threshold == 0.8
    files = doc["segments"][0]["files"]
    assert files["sketch"]["dtype"] == "<u8" and files["sketch"]["shape"] == [30, 8]
    assert files["ssize"]["dtype"] == "<u4" and files["ssize"]["shape"] == [30]
    fps = np.load(path / files["fp"]["name"])
    words = np.load(path / files["sketch"]["name"])
    sizes = np.load(path / files["ssize"]["name"])
    # rows in the segment's order (sorted fingerprints), each sketch starting with its fingerprint
    assert np.array_equal(words[:, 0], fps) and np.all(fps[1:] >= fps[:-1])
    order = np.argsort(sk.fingerprints, kind="stable")
    assert np.array_equal(words, sk.words[order]) and np.array_equal(sizes, sk.sizes[order])
    # a plain index keeps no sketch files and stays at version 1
    with Index.create(tmp_path / "plain", 3) as ix:
        ix.add([1, 2])
        assert ix.sketch_words is None and ix.info()["sketch_words"] is None
    doc = json.loads((tmp_path / "plain" / "MANIFEST").read_text())
    assert doc["format_version"] == 1 and "sketch_words" not in doc and "threshold" not in doc
    assert not {"sketch", "ssize"} & doc["segments"][0]["files"].keys()
    # compressed tables keep version 3 with sketches
    with Index.create(tmp_path / "ef", threshold=0.9, compress=True) as ix:
        assert ix.codec == "ef" and ix._body["format_version"] == 3 and ix.distance == 6
        ix.add(None, [1], sketches=sketches_of([{1, 2, 3}], 16))
        ix.compact(compress=False)
        assert ix.codec is None and ix._body["format_version"] == 3


def test_add_errors(tmp_path):
    sk = sketches_of(documents(4, 2))
    with Index.create(tmp_path / "ix", threshold=0.8, sketch_words=WORDS) as ix:
        with pytest.raises(ValueError, match="keeps a MinHash sketch per entry: pass sketches="):
            ix.add(sk.fingerprints, [1, 2, 3, 4])
        with pytest.raises(ValueError, match="have 8 words, the index keeps 4"):
            ix.add(None, [1, 2, 3, 4], sketches=sketches_of(documents(4, 2), 8))
        with pytest.raises(ValueError, match="searches the sketches' first words"):
            ix.add(sk.fingerprints ^ np.uint64(1), [1, 2, 3, 4], sketches=sk)
        with pytest.raises(ValueError, match="got 4 fingerprints but 3 ids"):
            ix.add(None, [1, 2, 3], sketches=sk)
        ix.add(sk.fingerprints, [1, 2, 3, 4], sketches=sk)  # the first words themselves: fine
        assert len(ix) == 4
        with pytest.raises(ValueError, match="keeps no sketches"):
            Index.create(tmp_path / "plain", 3).add([1], sketches=sk.take(np.array([0])))
    with pytest.raises(ValueError, match="sketch_words= needs threshold="):
        Index.create(tmp_path / "x", sketch_words=8)
    with pytest.raises(ValueError, match="2 to 64 words"):
        Index.create(tmp_path / "y", threshold=0.8, sketch_words=1)
    with pytest.raises(ValueError, match="threshold must be a Jaccard value"):
        Index.create(tmp_path / "z", threshold=1.5)
    with pytest.raises(ValueError, match="the Redis backend keeps no sketches"):
        Index.create("redis://127.0.0.1:1/0?name=nope", threshold=0.8)
    assert not (tmp_path / "x").exists() and not (tmp_path / "y").exists()


def test_verified_query_errors_and_given_candidates(tmp_path):
    sets = documents(60, 3)
    sk = sketches_of(sets)
    with Index.create(tmp_path / "ix", threshold=0.8, sketch_words=WORDS) as ix:
        ix.add(None, [f"e{i}" for i in range(30)], sketches=sk.take(np.arange(30)))
        ix.remove(["e3", "e4"])
        local = ix.verified_query(sk, 0.8)
        assert local.size > 30  # the first 30 find themselves, some others their family
        # candidates found elsewhere (e.g. on Dask) are decided the same way; removed ids and
        # ids unknown to the index are no candidates
        cand = ix.query_arrays(sk.fingerprints, 10)
        qi = np.concatenate([cand.query_index, [0, 1]])
        ids = np.concatenate([cand.id, np.array(["e3", "zz"], dtype=object)])
        d = np.concatenate([cand.distance, [0, 0]])
        order = np.argsort(qi, kind="stable")
        both = Matches.from_sorted(qi[order], ids[order], d[order], len(sk))
        given_ = ix.verified_query(sk, 0.8, candidates=both)
        for name in ("offsets", "ids", "distances", "jaccards"):
            assert getattr(local, name).tolist() == getattr(given_, name).tolist()
        first = local.first_positions()
        assert (first[local.query_index[first[first >= 0]]] == first[first >= 0]).all()
        assert local.first().ids.tolist() == local.ids[first[first >= 0]].tolist()
        with pytest.raises(ValueError, match="candidates are for 2 queries, not the 60"):
            ix.verified_query(sk, 0.8, candidates=Matches.empty(2, "str"))
        with pytest.raises(ValueError, match="between 0 and the index's distance 10"):
            ix.verified_query(sk, 0.7)  # 13 bits for 0.7
        with pytest.raises(ValueError, match="have 8 words, the index keeps 4"):
            ix.verified_query(sketches_of(sets, 8), 0.8)
    with Index.create(tmp_path / "plain", 6) as ix:
        with pytest.raises(ValueError, match="keeps no sketches; a verified query needs"):
            ix.verified_query(sk, 0.8)


def _rewrite(path, name: str, arr: np.ndarray, key: str) -> None:
    np.save(path / name, arr)
    doc = json.loads((path / "MANIFEST").read_text())
    doc.pop("manifest_crc32")
    entry = doc["segments"][0]["files"][key]
    entry["crc32"] = zlib.crc32((path / name).read_bytes())
    doc["manifest_crc32"] = storage._body_crc(doc)
    (path / "MANIFEST").write_text(json.dumps(doc))


def test_verify_finds_sketches_that_do_not_start_with_their_fingerprint(tmp_path):
    path = tmp_path / "ix"
    with Index.create(path, threshold=0.8, sketch_words=WORDS) as ix:
        ix.add(None, list(range(20)), sketches=sketches_of(documents(20, 4)))
    name = json.loads((path / "MANIFEST").read_text())["segments"][0]["files"]["sketch"]["name"]
    words = np.load(path / name)
    words[7, 0] ^= np.uint64(1 << 9)
    _rewrite(path, name, words, "sketch")  # a checksum that matches the damage
    with Index.open(path) as ix, pytest.raises(CorruptIndexError, match="row 7 does not start"):
        ix.verify()


def test_manifest_that_mixes_sketches_and_versions_is_refused(tmp_path):
    path = tmp_path / "ix"
    with Index.create(path, threshold=0.8, sketch_words=WORDS) as ix:
        ix.add(None, [1, 2], sketches=sketches_of(documents(2, 5)))

    def edit(fn, match: str) -> None:
        doc = json.loads((path / "MANIFEST").read_text())
        doc.pop("manifest_crc32")
        fn(doc)
        doc["manifest_crc32"] = storage._body_crc(doc)
        d = tmp_path / f"case{len(os.listdir(tmp_path))}"
        d.mkdir()
        for f in os.listdir(path):
            (d / f).write_bytes((path / f).read_bytes())
        (d / "MANIFEST").write_text(json.dumps(doc))
        with pytest.raises(CorruptIndexError, match=match):
            Index.open(d)

    seg = lambda d: d["segments"][0]  # noqa: E731
    edit(lambda d: d.update(format_version=1), "'sketch_words' is 4 in a version 1 index")
    edit(lambda d: d.pop("sketch_words"), "'sketch_words' is None in a version 3 index")
    edit(lambda d: d.update(sketch_words=1), "'sketch_words' is 1, expected null or an integer")
    edit(lambda d: d.update(sketch_words=8), r"'sketch' is <u8\[2, 4\] for 2 rows of 8")
    edit(lambda d: seg(d)["files"].pop("ssize"), "which do not fit sketch words 4")
    edit(lambda d: seg(d)["files"]["ssize"].update(dtype="<u8"), r"'ssize' is <u8\[2\]")

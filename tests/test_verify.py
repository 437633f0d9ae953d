"""Verified near-duplicates (core/similarity.py, core/verify.py) against naive.py."""

from __future__ import annotations

import math
import warnings

import naive
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from strategies import COPY, EDITED, EMPTY, UNRELATED, key_sets

import neardup
from neardup.core import similarity, verify
from neardup.core.verify import (
    ShingleSets,
    as_shingle_sets,
    decide_verified,
    distance_for_threshold,
    pair_jaccard,
    priority_order,
    set_fingerprints,
    similar_pairs,
)

THRESHOLDS = [0.5, 0.6, 2 / 3, 0.75, 0.8, 0.85, 0.9, 0.95, 1.0]


def families(max_docs: int = 40):
    """Sets drawn around a few bases: exact copies, a few keys removed or added, empty sets and
    unrelated sets, over a small key range (many overlaps) plus 0 and 2**32 - 1."""
    return key_sets(
        max_docs,
        universe=60,
        max_keys=30,
        max_bases=4,
        max_edits=3,
        kinds=(EMPTY, UNRELATED, COPY, EDITED, EDITED, EDITED),
    )


@st.composite
def fingerprints_for(draw, sets: list[set]) -> np.ndarray:
    """Simhash of each set's keys (similar sets, close fingerprints), some with flipped bits."""
    fps = []
    for s in sets:
        v = neardup.compute(np.array(sorted(s), dtype=np.uint64))
        if draw(st.integers(0, 4)) == 0:
            for bit in draw(st.lists(st.integers(0, 63), max_size=4)):
                v ^= 1 << bit
        fps.append(v)
    return np.array(fps, dtype=np.uint64)


@st.composite
def cases(draw):
    sets = draw(families())
    fps = draw(fingerprints_for(sets))
    threshold = draw(st.one_of(st.sampled_from(THRESHOLDS), st.floats(0.05, 1.0)))
    distance = draw(st.integers(0, 24))
    return sets, fps, threshold, distance


def _csr(sets: list[set]) -> ShingleSets:
    return as_shingle_sets(*naive.sets_to_csr(sets))


@pytest.fixture
def small_chunks(monkeypatch):
    """Chunks of 3 pairs/documents and probes of 5 documents, so that a handful of documents
    exercises the threaded paths."""
    monkeypatch.setattr(similarity, "CHUNK", 3)
    monkeypatch.setattr(verify, "PROBE_BATCH", 5)


class leaf_size:
    """Set ``LEAF_DOCS`` (and ``PAIRS_PER_DOC``: 0 divides every block that has a pair) for a
    block; hypothesis tests cannot take function-scoped fixtures."""

    def __init__(self, size: int, pairs_per_doc: int = 0) -> None:
        self.values = {"LEAF_DOCS": size, "PAIRS_PER_DOC": pairs_per_doc}

    def __enter__(self) -> None:
        self.saved = {k: getattr(verify, k) for k in self.values}
        for k, v in self.values.items():
            setattr(verify, k, v)

    def __exit__(self, *exc) -> None:
        for k, v in self.saved.items():
            setattr(verify, k, v)


# -- exact Jaccard ---------------------------------------------------------------------------


@settings(max_examples=150)
@given(sets=families(), data=st.data())
@pytest.mark.slow
def test_pair_jaccard_matches_python_sets(sets, data):
    n = len(sets)
    idx = st.integers(0, max(n - 1, 0))
    pairs = data.draw(st.lists(st.tuples(idx, idx), max_size=60))
    pairs = np.array(pairs if n else [], dtype=np.int64).reshape(-1, 2)
    got = pair_jaccard(_csr(sets), pairs, threads=1)
    want = [naive.jaccard(sets[a], sets[b]) for a, b in pairs]
    assert got.tolist() == want


def test_pair_jaccard_threads_and_chunks_agree(small_chunks):
    rng = np.random.default_rng(1)
    sets = [set(rng.integers(0, 40, rng.integers(0, 25)).tolist()) for _ in range(60)]
    pairs = rng.integers(0, 60, (500, 2))
    want = [naive.jaccard(sets[a], sets[b]) for a, b in pairs]
    for threads in (1, 2, 5):
        assert pair_jaccard(_csr(sets), pairs, threads=threads).tolist() == want


# -- similar_pairs ---------------------------------------------------------------------------


@settings(max_examples=150)
@given(case=cases())
@pytest.mark.slow
def test_similar_pairs_matches_brute_force(case):
    sets, fps, threshold, distance = case
    offsets, keys = naive.sets_to_csr(sets)
    r = similar_pairs((offsets, keys, fps), threshold, distance=distance, threads=1)
    want = naive.similar_pairs(sets, fps, threshold, distance)
    assert list(zip(r.i.tolist(), r.j.tolist(), r.jaccard.tolist())) == want
    assert r.i.dtype == r.j.dtype == np.int64 and r.jaccard.dtype == np.float64


@settings(max_examples=60)
@given(sets=families(), threshold=st.sampled_from(THRESHOLDS), distance=st.integers(0, 20))
@pytest.mark.slow
def test_similar_pairs_on_set_fingerprints(sets, threshold, distance):
    offsets, keys = naive.sets_to_csr(sets)
    fps = [naive.set_minhash(s) for s in sets]
    assert set_fingerprints((offsets, keys)).tolist() == fps
    simhashes = [naive.set_fingerprint(s) for s in sets]
    assert set_fingerprints((offsets, keys), method="simhash").tolist() == simhashes
    r = similar_pairs((offsets, keys), threshold, distance=distance)
    want = naive.similar_pairs(sets, fps, threshold, distance)
    assert list(zip(r.i.tolist(), r.j.tolist(), r.jaccard.tolist())) == want


def test_set_fingerprints_track_jaccard():
    rng = np.random.default_rng(6)
    base = set(rng.integers(0, 2**32, 400).tolist())
    near = set(list(base)[:380]) | set(rng.integers(0, 2**32, 20).tolist())
    far = set(rng.integers(0, 2**32, 400).tolist())
    for method, near_bits in (("minhash", 8), ("simhash", 12)):
        fp = set_fingerprints(_csr([base, near, far]), method=method)
        assert np.bitwise_count(fp[0] ^ fp[1]) <= near_bits < np.bitwise_count(fp[0] ^ fp[2])
        assert set_fingerprints(_csr([set()]), method=method).tolist() == [0]
    with pytest.raises(ValueError, match="method must be one of"):
        set_fingerprints(_csr([base]), method="bbit")


def test_set_minhash_distance_is_about_32_times_one_minus_jaccard():
    # (1 + J) / 2 agreement per bit: the mean distance over many pairs at J = 0.8 is 6.4 bits
    rng = np.random.default_rng(8)
    sets = []
    for _ in range(300):
        base = rng.choice(2**32, 180, replace=False)
        other = np.concatenate([base[:160], rng.choice(2**32, 20, replace=False)])
        sets += [set(base.tolist()), set(other.tolist())]  # Jaccard 160 / 200 = 0.8
    fp = set_fingerprints(_csr(sets))
    mean = float(np.mean(np.bitwise_count(fp[0::2] ^ fp[1::2])))
    assert 5.4 < mean < 7.4


def test_similar_pairs_any_thread_count(small_chunks):
    rng = np.random.default_rng(2)
    base = [set(rng.integers(0, 200, 40).tolist()) for _ in range(5)]
    sets = [
        {k for k in base[i % 5] if rng.random() > 0.05} | set(rng.integers(0, 200, 2).tolist())
        for i in range(120)
    ]
    offsets, keys = naive.sets_to_csr(sets)
    fps = np.array([neardup.compute(np.array(sorted(s), np.uint64)) for s in sets], np.uint64)
    runs = [similar_pairs((offsets, keys, fps), 0.8, distance=12, threads=t) for t in (1, 2, 4)]
    want = naive.similar_pairs(sets, fps, 0.8, 12)
    assert len(want) > 50
    for r in runs:
        assert list(zip(r.i.tolist(), r.j.tolist(), r.jaccard.tolist())) == want


def test_similar_pairs_from_texts_with_a_shingling_fingerprinter():
    texts = [
        "the quick brown fox jumps over the lazy dog near the river bank today",
        "The quick brown fox jumps over the lazy dog near the river bank today!",
        "the quick brown fox jumps over the lazy cat near the river bank today",
        "completely different words here about something else entirely",
        "",
        "...",
    ]
    fp = naive.ShinglingFingerprinter()
    r = similar_pairs(texts, 0.5, distance=20, fingerprinter=fp)
    sets = [set(naive.shingle_keys(t)) for t in texts]
    want = naive.similar_pairs(sets, [naive.set_minhash(s) for s in sets], 0.5, 20)
    assert list(zip(r.i.tolist(), r.j.tolist(), r.jaccard.tolist())) == want
    assert (0, 1, 1.0) in want and any(p[:2] == (0, 2) for p in want)
    # the default fingerprinter's own shingle keys (features_many) give the same pairs
    d = similar_pairs(texts, 0.5, distance=20)
    assert list(zip(d.i.tolist(), d.j.tolist(), d.jaccard.tolist())) == want


def test_similar_pairs_texts_need_a_fingerprinter_that_emits_shingles():
    with pytest.raises(TypeError, match="does not emit shingle keys"):
        similar_pairs(["a b c"], fingerprinter=object())


def test_similar_pairs_identical_family_is_all_pairs_at_one():
    sets = [{1, 2, 3, 4}] * 50 + [set()] * 5
    offsets, keys = naive.sets_to_csr(sets)
    r = similar_pairs((offsets, keys, np.zeros(55, np.uint64)), 1.0, distance=0)
    assert len(r.i) == 50 * 49 // 2 and np.all(r.jaccard == 1.0) and r.j.max() == 49


# -- the decision rule -----------------------------------------------------------------------


def _assert_decisions_equal(d, want_for, want_jac, fps):
    assert d.kept_for.tolist() == want_for
    assert d.kept.tolist() == [k < 0 for k in want_for]
    for got, want in zip(d.jaccard.tolist(), want_jac):
        assert (math.isnan(got) and want is None) or got == want
    dist = [
        -1 if k < 0 else bin(int(fps[i]) ^ int(fps[k])).count("1") for i, k in enumerate(want_for)
    ]
    assert d.distance.tolist() == dist


def check_invariants(d, sets, fps, threshold, distance, order):
    """What the rule promises, stated independently of how it is computed:

    - every dropped document names a kept document earlier in priority, and their exact Jaccard
      is >= threshold and equals the one reported (no chaining);
    - a document without shingles is kept;
    - two kept documents never have identical non-empty sets;
    - two kept documents whose fingerprints are within ``distance`` bits have Jaccard < threshold
      (kept documents can reach the threshold only when the fingerprint search did not pair them).
    """
    rank = {x: r for r, x in enumerate(order)}
    kept = [i for i in range(len(sets)) if d.kept[i]]
    for i in range(len(sets)):
        if not sets[i]:
            assert d.kept[i] and d.no_shingles[i]
        if d.kept[i]:
            continue
        k = int(d.kept_for[i])
        assert d.kept[k] and rank[k] < rank[i]
        assert naive.jaccard(sets[i], sets[k]) == d.jaccard[i] >= threshold
    for x in range(len(kept)):
        for y in range(x + 1, len(kept)):
            a, b = sets[kept[x]], sets[kept[y]]
            assert not (a and a == b)
            if bin(int(fps[kept[x]]) ^ int(fps[kept[y]])).count("1") <= distance:
                assert naive.jaccard(a, b) < threshold


@settings(max_examples=100)
@given(
    case=cases(),
    longest=st.booleans(),
    leaf=st.sampled_from([(1, 0), (2, 0), (3, 0), (5, 0), (4, 2), (2048, 64)]),
    data=st.data(),
)
@pytest.mark.slow
def test_decide_verified_matches_the_rule(case, longest, leaf, data):
    sets, fps, threshold, distance = case
    n = len(sets)
    lengths = data.draw(st.lists(st.integers(0, 5), min_size=n, max_size=n)) if longest else None
    keep = "longest" if longest else "first"
    order = priority_order(n, keep, lengths).tolist()
    with warnings.catch_warnings(), leaf_size(*leaf):
        warnings.simplefilter("ignore")
        d = decide_verified(
            _csr(sets), fps, threshold, distance=distance, keep=keep, lengths=lengths, threads=1
        )
    want_for, want_jac = naive.decide_verified(sets, fps, threshold, order, distance=distance)
    _assert_decisions_equal(d, want_for, want_jac, fps)
    check_invariants(d, sets, fps, threshold, distance, order)


@settings(max_examples=100)
@given(case=cases())
@pytest.mark.slow
def test_decide_verified_given_pairs_equals_the_search(case):
    sets, fps, threshold, distance = case
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        a = decide_verified(_csr(sets), fps, threshold, distance=distance, threads=1)
        pairs = neardup.find_all(fps, distance)
        b = decide_verified(_csr(sets), fps, threshold, pairs=pairs[::-1, ::-1], threads=1)
    want_for, want_jac = naive.decide_verified(
        sets, fps, threshold, list(range(len(sets))), pairs=pairs.tolist()
    )
    _assert_decisions_equal(b, want_for, want_jac, fps)
    assert a.kept_for.tolist() == b.kept_for.tolist()


@pytest.mark.slow
@settings(max_examples=40)
@given(sets=families(), threshold=st.sampled_from(THRESHOLDS), distance=st.integers(0, 20))
def test_decide_verified_on_set_fingerprints(sets, threshold, distance):
    fps = [naive.set_minhash(s) for s in sets]
    with warnings.catch_warnings(), leaf_size(4):
        warnings.simplefilter("ignore")
        d = decide_verified(_csr(sets), threshold=threshold, distance=distance)
    want_for, want_jac = naive.decide_verified(
        sets, fps, threshold, list(range(len(sets))), distance=distance
    )
    _assert_decisions_equal(d, want_for, want_jac, fps)


def test_decide_verified_any_thread_count(small_chunks):
    rng = np.random.default_rng(3)
    base = [set(rng.integers(0, 300, 60).tolist()) for _ in range(8)]
    sets = []
    for i in range(400):
        s = {k for k in base[i % 8] if rng.random() > 0.04} | set(rng.integers(0, 300, 3).tolist())
        sets.append(s if i % 37 else set())
    fps = np.array([neardup.compute(np.array(sorted(s), np.uint64)) for s in sets], np.uint64)
    lengths = rng.integers(0, 4, len(sets))
    with warnings.catch_warnings(), leaf_size(16):
        warnings.simplefilter("ignore")
        runs = [
            decide_verified(
                _csr(sets), fps, 0.85, distance=12, keep="longest", lengths=lengths, threads=t
            )
            for t in (1, 2, 3, 8)
        ]
    order = priority_order(len(sets), "longest", lengths).tolist()
    want_for, want_jac = naive.decide_verified(sets, fps, 0.85, order, distance=12)
    assert 50 < sum(k >= 0 for k in want_for) < 390
    for d in runs:
        _assert_decisions_equal(d, want_for, want_jac, fps)


def _assert_near_misses(d, want_for, want_jac):
    assert d.near_for.tolist() == want_for
    for got, want in zip(d.near_jaccard.tolist(), want_jac):
        assert (math.isnan(got) and want is None) or got == want


@pytest.mark.slow
@settings(max_examples=60)
@given(
    case=cases(),
    longest=st.booleans(),
    leaf=st.sampled_from([(1, 0), (3, 0), (4, 2), (2048, 64)]),
    data=st.data(),
)
def test_near_misses_match_brute_force(case, longest, leaf, data):
    """Each kept document's nearest kept candidate under the threshold, by the rule stated
    independently (every earlier kept candidate, exact Jaccard), for any block cut; the
    decisions are those made without them."""
    sets, fps, threshold, distance = case
    n = len(sets)
    lengths = data.draw(st.lists(st.integers(0, 5), min_size=n, max_size=n)) if longest else None
    keep = "longest" if longest else "first"
    order = priority_order(n, keep, lengths).tolist()
    with warnings.catch_warnings(), leaf_size(*leaf):
        warnings.simplefilter("ignore")
        kw = dict(distance=distance, keep=keep, lengths=lengths, threads=1)
        d = decide_verified(_csr(sets), fps, threshold, near_misses=True, **kw)
        plain = decide_verified(_csr(sets), fps, threshold, **kw)
    assert plain.near_for is None and plain.near_jaccard is None
    assert d.kept_for.tolist() == plain.kept_for.tolist() and d.checks == plain.checks
    want_for, want_jac = naive.near_misses(sets, fps, d.kept_for.tolist(), order, distance=distance)
    _assert_near_misses(d, want_for, want_jac)
    assert all(j is None or j < threshold for j in want_jac)


def test_near_misses_with_given_pairs_threads_and_exclusions(small_chunks):
    rng = np.random.default_rng(5)
    base = [set(rng.integers(0, 300, 60).tolist()) for _ in range(8)]
    sets = [{k for k in base[i % 8] if rng.random() > 0.1} for i in range(300)]
    fps = np.array([neardup.compute(np.array(sorted(s), np.uint64)) for s in sets], np.uint64)
    exclude = rng.random(len(sets)) < 0.1
    pairs = neardup.find_all(fps, 14)
    order = list(range(len(sets)))
    with leaf_size(16):
        runs = [
            decide_verified(
                _csr(sets), fps, 0.85, near_misses=True, threads=t, exclude=exclude, **kw
            )  # fmt: skip
            for t in (1, 3)
            for kw in ({"distance": 14}, {"pairs": pairs})
        ]
    want_for, want_jac = naive.near_misses(
        sets, fps, runs[0].kept_for.tolist(), order, distance=14, exclude=exclude
    )
    assert sum(k >= 0 for k in want_for) > 20  # near misses, and some reach 0.8
    assert any(j is not None and j >= 0.8 for j in want_jac)
    for d in runs:
        assert d.kept_for.tolist() == runs[0].kept_for.tolist()
        _assert_near_misses(d, want_for, want_jac)


def test_no_chaining():
    # A ~ B ~ C with J(A, C) < 0.5: B is dropped for A, C is kept (B was dropped, not kept)
    a, b, c = set(range(10)), set(range(3, 13)), set(range(6, 16))
    d = decide_verified(_csr([a, b, c]), [0, 0, 0], 0.5, distance=0)
    assert d.kept.tolist() == [True, False, True] and d.kept_for.tolist() == [-1, 0, -1]
    assert d.jaccard[1] == naive.jaccard(a, b) and naive.jaccard(a, c) < 0.5


def test_dropped_for_the_first_kept_match():
    a, b = set(range(20)), set(range(100, 120))
    c = set(range(19)) | set(range(100, 120))  # J(c, b) = 20/39 > J(c, a) = 19/40 >= 0.3
    d = decide_verified(_csr([a, b, c]), [0, 0, 0], 0.3, distance=0)
    assert d.kept_for.tolist() == [-1, -1, 0] and d.jaccard[2] == 19 / 40
    later = decide_verified(_csr([a, b, c]), [0, 0, 0], 0.5, distance=0)
    assert later.kept_for.tolist() == [-1, -1, 1]  # only b reaches 0.5


def test_edge_cases():
    empty = decide_verified(([0], []), [], 0.9)
    assert empty.kept.shape == (0,) and empty.checks == 0
    one = decide_verified(([0, 2], [1, 2]), [7], 0.9)
    assert one.kept.tolist() == [True] and one.kept_for.tolist() == [-1]
    # a family of identical sets: one kept, every other member dropped for it without a merge
    sets = [set(range(5, 50))] * 1000
    fam = decide_verified(_csr(sets), np.arange(1000, dtype=np.uint64), 1.0, distance=3)
    assert fam.kept.sum() == 1 and fam.checks == 0 and np.all(fam.jaccard[1:] == 1.0)
    assert np.all(fam.kept_for[1:] == 0) and fam.distance[3] == 2
    # J = 1.0 drops identical sets only
    only = decide_verified(_csr([{1, 2, 3}, {1, 2, 3, 4}, {1, 2, 3}]), [0, 0, 9], 1.0, distance=0)
    assert only.kept.tolist() == [True, True, False] and only.kept_for[2] == 0


def test_documents_without_shingles_are_kept_and_warned_about():
    sets = [set(), set(), {1, 2}, set(), {1, 2}]
    with pytest.warns(UserWarning, match="3 of 5 documents have no shingles"):
        d = decide_verified(_csr(sets), [0] * 5, 0.5, distance=0)
    assert d.kept.tolist() == [True, True, True, True, False] and d.n_no_shingles == 3
    assert similar_pairs((*naive.sets_to_csr(sets), [0] * 5), 0.1, distance=0).i.tolist() == [2]
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # 1 in 200 is not "many"
        decide_verified(_csr([set()] + [{i} for i in range(199)]), [0] * 200, 0.5, distance=0)


def test_family_work_is_linear():
    """A family of near-identical documents with distinct sets and scattered fingerprints: the
    checks and candidate pairs per document stay bounded as the family grows."""
    rng = np.random.default_rng(4)
    per_doc = []
    base = np.arange(300)
    for n in (1000, 4000):
        sets = []
        for _ in range(n):
            s = set(base.tolist())
            s.difference_update(rng.integers(0, 300, 3).tolist())
            s.update(rng.integers(1000, 10**6, 3).tolist())
            sets.append(s)
        fps = rng.integers(0, 2**8, n).astype(np.uint64)  # every pair a candidate at d=8
        with leaf_size(64, 64):
            d = decide_verified(_csr(sets), fps, 0.9, distance=8, threads=1)
        assert d.kept.sum() <= 3
        per_doc.append((d.checks / n, d.candidates / n))
    assert per_doc[1][0] <= 3 and per_doc[1][1] <= 64
    assert per_doc[1][0] <= per_doc[0][0] * 1.5 and per_doc[1][1] <= per_doc[0][1] * 1.5


def test_inputs_are_not_overwritten():
    rng = np.random.default_rng(5)
    sets = [set(rng.integers(0, 30, 10).tolist()) for _ in range(50)]
    offsets, keys = naive.sets_to_csr(sets)
    fps = rng.integers(0, 2**63, 50, dtype=np.uint64)
    pairs = neardup.find_all(fps, 40)
    saved = [x.copy() for x in (offsets, keys, fps, pairs)]
    decide_verified((offsets, keys), fps, 0.3, pairs=pairs)
    similar_pairs((offsets, keys, fps), 0.3, distance=40)
    pair_jaccard((offsets, keys), pairs)
    for a, b in zip(saved, (offsets, keys, fps, pairs)):
        assert np.array_equal(a, b)


@pytest.mark.parametrize(
    ("offsets", "keys", "message"),
    [
        ([0, 2, 1], [1, 2], "non-decreasing from 0 to len\\(keys\\)=2"),
        ([1, 2], [1, 2], "non-decreasing"),
        ([0, 3], [1, 2], "non-decreasing"),
        (
            [0, 2, 4],
            [1, 2, 5, 5],
            "keys of document 1 are not sorted and unique \\(key 5 after 5\\)",
        ),
        ([0, 2], [2, 1], "document 0"),
        ([0, 1], [2**32], "32-bit unsigned"),
        ([0, 1], [-1], "32-bit unsigned"),
        ([[0, 1]], [1], "1-D integer array of n \\+ 1"),
        ([0, 1], [1.5], "keys must be a 1-D integer array"),
    ],
)
def test_bad_shingle_sets(offsets, keys, message):
    with pytest.raises(ValueError, match=message):
        as_shingle_sets(offsets, keys)


def test_bad_arguments():
    sets = ([0, 1, 2], [1, 2])
    with pytest.raises(ValueError, match="got 2 shingle sets but 3 fingerprints"):
        decide_verified(sets, [1, 2, 3])
    with pytest.raises(ValueError, match="threshold must be a Jaccard value in \\(0, 1\\]"):
        decide_verified(sets, [1, 2], 0.0)
    with pytest.raises(ValueError, match="threshold"):
        similar_pairs((*sets, [1, 2]), 1.5)
    with pytest.raises(ValueError, match="needs the document lengths"):
        decide_verified(sets, [1, 2], keep="longest")
    with pytest.raises(
        ValueError, match=r"keep must be first, longest, max:FIELD or min:FIELD \(got "
    ):
        decide_verified(sets, [1, 2], keep="last")
    with pytest.raises(ValueError, match="distance"):
        decide_verified(sets, [1, 2], distance=-1)
    with pytest.raises(ValueError, match="pairs must index the 2 documents"):
        decide_verified(sets, [1, 2], pairs=[[0, 2]])
    with pytest.raises(ValueError, match="threads must be >= 1"):
        pair_jaccard(sets, [[0, 1]], threads=0)


def test_distance_rule_grows_as_the_threshold_falls():
    ds = [distance_for_threshold(t) for t in (1.0, 0.95, 0.9, 0.8, 0.7, 0.5, 0.01)]
    assert ds == sorted(ds) and 1 <= ds[0] and ds[-1] <= 16


def test_exported():
    assert neardup.similar_pairs is similar_pairs


def test_gather_sets_copies_wanted_documents_from_a_mapped_spool(tmp_path):
    from neardup.core.similarity import ShingleSets, gather_sets, page_out

    rng = np.random.default_rng(11)
    sets = [set(rng.integers(0, 2**32, rng.integers(0, 30)).tolist()) for _ in range(300)]
    offsets, keys = naive.sets_to_csr(sets)
    wanted = rng.random(300) < 0.3
    np.asarray(keys, dtype=np.uint32).tofile(tmp_path / "keys.u32")  # as the scan spills them
    mapped = ShingleSets(offsets, np.memmap(tmp_path / "keys.u32", np.uint32, mode="r"))
    assert isinstance(mapped.keys, np.memmap)
    got = gather_sets(mapped, wanted, threads=2)
    assert not isinstance(got.keys, np.memmap)
    for d in range(300):
        want = sorted(sets[d]) if wanted[d] else []
        assert got.keys[got.offsets[d] : got.offsets[d + 1]].tolist() == want
    page_out(mapped.keys)  # pages dropped, the data still there when touched again
    assert mapped.keys.tolist() == keys.tolist()
    # decisions on the mapped keys equal those on keys in memory
    a = decide_verified(mapped, threshold=0.5, distance=20, threads=2)
    b = decide_verified((offsets, keys), threshold=0.5, distance=20, threads=1)
    assert a.kept_for.tolist() == b.kept_for.tolist()
    in_memory = as_shingle_sets(offsets, keys)
    assert gather_sets(in_memory, wanted) is in_memory


@settings(max_examples=60, deadline=None)
@given(families(), st.sampled_from(["prefix", "bands"]), st.sampled_from(THRESHOLDS))
def test_candidates_other_than_the_search_fingerprint_only_the_drops(sets, candidates, t):
    """Prefix and band candidates compute set fingerprints only for the drops and their kept
    documents: the drops' distances are those of every set's fingerprints, given or not, and
    ``distances=False`` leaves them -1 with the same decisions."""
    csr = _csr(sets)
    given_fps = decide_verified(csr, set_fingerprints(csr), t, candidates=candidates)
    lazy = decide_verified(csr, None, t, candidates=candidates)
    bare = decide_verified(csr, None, t, candidates=candidates, distances=False)
    for d in (lazy, bare):
        assert np.array_equal(d.kept_for, given_fps.kept_for)
        assert np.array_equal(d.jaccard, given_fps.jaccard, equal_nan=True)
    assert np.array_equal(lazy.distance, given_fps.distance)
    assert (bare.distance == -1).all()
    fp = set_fingerprints(csr)
    drop = np.flatnonzero(~lazy.kept)
    want = [bin(int(fp[i]) ^ int(fp[lazy.kept_for[i]])).count("1") for i in drop]
    assert lazy.distance[drop].tolist() == want

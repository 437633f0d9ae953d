"""MinHash sketches (core/sketch.py) against naive.py: the kernel bit for bit, the decisions from
given sketches, the estimate's accuracy, and decide_verified's ``exclude``."""

from __future__ import annotations

import naive
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from strategies import key_sets

from neardup.core.similarity import set_fingerprints
from neardup.core.sketch import (
    SKETCH_WORDS,
    Sketches,
    as_sketches,
    estimated_jaccard,
    set_sketches,
    sketch_decide,
)
from neardup.core.verify import decide_verified, priority_order

THRESHOLDS = [0.5, 0.75, 0.8, 0.9, 0.95, 1.0]


@settings(max_examples=30, deadline=None)
@given(sets=key_sets(), words=st.sampled_from([2, 3, 4, 16]))
@pytest.mark.slow
def test_sketches_match_the_pure_python_version(sets, words):
    offsets, keys = naive.sets_to_csr(sets)
    sk = set_sketches((offsets, keys), words, threads=1)
    assert sk.words.dtype == np.uint64 and sk.words.shape == (len(sets), words)
    assert sk.sizes.dtype == np.uint32 and sk.sizes.tolist() == [len(s) for s in sets]
    assert sk.words.tolist() == [naive.set_sketch(s, words) for s in sets]
    assert sk.fingerprints.tolist() == set_fingerprints((offsets, keys)).tolist()


def test_sketches_do_not_depend_on_threads(monkeypatch):
    from neardup.core import similarity

    monkeypatch.setattr(similarity, "CHUNK", 7)  # many chunks on several threads
    rng = np.random.default_rng(3)
    sets = [set(rng.choice(5000, int(rng.integers(0, 400)), replace=False).tolist())
            for _ in range(100)]  # fmt: skip
    offsets, keys = naive.sets_to_csr(sets)
    one = set_sketches((offsets, keys), 8, threads=1)
    four = set_sketches((offsets, keys), 8, threads=4)
    assert np.array_equal(one.words, four.words) and np.array_equal(one.sizes, four.sizes)


@settings(max_examples=80, deadline=None)
@given(sets=key_sets(), words=st.sampled_from([2, 4, 16]), threshold=st.sampled_from(THRESHOLDS))
@pytest.mark.slow
def test_decisions_match_brute_force_given_the_sketches(sets, words, threshold):
    offsets, keys = naive.sets_to_csr(sets)
    sk = set_sketches((offsets, keys), words, threads=1)
    n = len(sets)
    qi, ci = np.meshgrid(np.arange(n), np.arange(n), indexing="ij")
    qi, ci = qi.ravel(), ci.ravel()
    match, jac = sketch_decide(sk, sk, qi, ci, threshold, threads=2)
    w = sk.words.tolist()
    z = sk.sizes.tolist()
    want = [naive.sketch_match(w[a], z[a], w[b], z[b], threshold) for a, b in zip(qi, ci)]
    assert match.tolist() == [m for m, _ in want]
    assert jac.tolist() == [e for _, e in want]


def test_identical_sets_estimate_one_and_empty_sets_never_match():
    sk = set_sketches(([0, 3, 6, 6, 6], [5, 6, 7, 5, 6, 7]), 4)
    m, j = sketch_decide(sk, sk, np.array([0, 2, 2]), np.array([1, 3, 0]), 0.9)
    assert m.tolist() == [True, False, False] and j.tolist() == [1.0, 0.0, 0.0]
    assert sk.words[2].tolist() == [0, 0, 0, 0] and sk.sizes.tolist() == [3, 3, 0, 0]


def test_the_size_bound_refuses_what_the_estimate_would_accept():
    # sketches equal by construction, sizes 10 and 20: J <= 0.5 whatever the estimate says
    words = np.full((2, 4), 7, dtype=np.uint64)
    sk = Sketches(words, np.array([10, 20], dtype=np.uint32))
    m, j = sketch_decide(sk, sk, np.array([0]), np.array([1]), 0.5)
    assert m.tolist() == [True] and j.tolist() == [1.0]
    m, _ = sketch_decide(sk, sk, np.array([0]), np.array([1]), 0.51)
    assert m.tolist() == [False]


@pytest.mark.parametrize("words, jaccard", [(16, 0.8), (16, 0.9), (4, 0.8)])
def test_the_estimate_is_unbiased_with_the_expected_spread(words, jaccard):
    # pairs of 400-key sets at an exact Jaccard: 1 - 2 D / B averages J, and its standard
    # deviation is about sqrt((1 - J^2) / B) (one-permutation sampling is a little tighter)
    rng = np.random.default_rng(int(words * 100 + jaccard * 10))
    size = 400
    common = round(2 * size * jaccard / (1 + jaccard))
    sets = []
    for _ in range(400):
        u = rng.choice(2**32, 2 * size - common, replace=False)
        sets += [set(u[:size].tolist()), set(u[size - common :].tolist())]
    assert naive.jaccard(sets[0], sets[1]) == pytest.approx(jaccard, abs=0.003)
    sk = set_sketches(naive.sets_to_csr(sets), words)
    pairs = np.arange(0, len(sets), 2)
    _, est = sketch_decide(sk, sk, pairs, pairs + 1, 0.5)
    bits = 64 * (words - 1)
    spread = np.sqrt((1 - jaccard**2) / bits)
    assert abs(est.mean() - jaccard) < 4 * spread / np.sqrt(len(pairs))
    assert 0.6 * spread < est.std() < 1.2 * spread


def test_estimated_jaccard():
    assert estimated_jaccard(np.array([0, 48, 96, 960]), 960).tolist() == [1.0, 0.9, 0.8, -1.0]


def test_as_sketches_refuses_what_an_index_must_not_store():
    sk = set_sketches(([0, 2, 2], [1, 2]), 4)
    assert as_sketches(sk, 4).words.tolist() == sk.words.tolist()
    assert as_sketches((sk.words, sk.sizes.astype(np.int64))).sizes.dtype == np.uint32
    with pytest.raises(ValueError, match="have 4 words, the index keeps 16"):
        as_sketches(sk, 16)
    with pytest.raises(ValueError, match=r"uint64 array of shape \(n, K\)"):
        as_sketches((sk.words.astype(np.int64), sk.sizes))
    with pytest.raises(ValueError, match="2 to 64 words"):
        as_sketches((sk.words[:, :1], sk.sizes))
    with pytest.raises(ValueError, match="one size per sketch"):
        as_sketches((sk.words, sk.sizes[:1]))
    with pytest.raises(ValueError, match=r"in \[0, 2\*\*32\)"):
        as_sketches((sk.words, np.array([-1, 0])))
    with pytest.raises(ValueError, match="sketch 1 has size 0 .* non-zero words"):
        as_sketches((sk.words[[0, 0]], np.array([2, 0])))
    with pytest.raises(TypeError, match="Sketches"):
        as_sketches(sk.words)
    with pytest.raises(ValueError, match="2 to 64 words"):
        set_sketches(([0, 1], [3]), 65)
    with pytest.raises(ValueError, match="same words"):
        sketch_decide(sk, set_sketches(([0, 1], [3]), 8), [0], [0], 0.8)
    assert SKETCH_WORDS == 16


@settings(max_examples=80, deadline=None)
@given(
    sets=key_sets(max_docs=25),
    threshold=st.sampled_from(THRESHOLDS),
    distance=st.integers(0, 20),
    keep=st.sampled_from(["first", "longest"]),
    data=st.data(),
)
def test_excluded_documents_take_no_part(sets, threshold, distance, keep, data):
    n = len(sets)
    exclude = np.array(data.draw(st.lists(st.booleans(), min_size=n, max_size=n)), dtype=bool)
    lengths = np.array(data.draw(st.lists(st.integers(0, 5), min_size=n, max_size=n)))
    offsets, keys = naive.sets_to_csr(sets)
    fps = set_fingerprints((offsets, keys))
    got = decide_verified(
        (offsets, keys), fps, threshold, distance=distance, keep=keep, lengths=lengths,
        exclude=exclude, threads=1,
    )  # fmt: skip
    order = priority_order(n, keep, lengths).tolist()
    kept_for, jac = naive.decide_verified(
        sets, fps, threshold, order, distance=distance, exclude=exclude
    )
    assert got.kept_for.tolist() == kept_for
    assert [None if np.isnan(j) else j for j in got.jaccard.tolist()] == jac
    assert (got.kept_for[exclude] == -1).all()
    assert not np.isin(got.kept_for, np.flatnonzero(exclude)).any()

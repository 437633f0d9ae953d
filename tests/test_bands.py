"""MinHash band candidates (core/bands.py): the keys against naive.py, the rule over the pairs
that share a band, the S-curve, the staged run against the one-process run, the CLI."""

from __future__ import annotations

import json
import math

import naive
import numpy as np
import pytest
from cli import invoke
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from strategies import BIG, COPY, EDITED, EMPTY, SINGLE, UNRELATED, key_sets
from test_staged import _copied
from test_staged_near import (
    RUN_CASES,
    _write,
    staged_is_one_process,
)

import neardup
from neardup.core import bands
from neardup.core.similarity import ShingleSets
from neardup.core.verify import as_shingle_sets, decide_verified, priority_order
from neardup.pipeline import stage_prefix

SCHEMES = st.tuples(st.integers(1, 6), st.integers(1, 5))


def _csr(sets) -> ShingleSets:
    return as_shingle_sets(*naive.sets_to_csr(sets))


@settings(max_examples=60, deadline=None)
@given(sets=key_sets(20, universe=60, max_keys=30), scheme=SCHEMES, take=st.data())
def test_band_keys_are_the_naive_keys(sets, scheme, take):
    """Every document's band keys, in band order, as naive.py computes them; none for an
    empty set or one left out (rows beyond the set's size borrow by the probe sequence)."""
    b, r = scheme
    keep = np.array(take.draw(st.lists(st.booleans(), min_size=len(sets), max_size=len(sets))),
                    dtype=bool)  # fmt: skip
    pre = bands.band_sets(_csr(sets), b, r, take=keep)
    for d, s in enumerate(sets):
        got = pre.keys[pre.offsets[d] : pre.offsets[d + 1]].tolist()
        assert got == (naive.band_keys(sorted(s), b, r) if keep[d] else [])


@pytest.mark.slow
@pytest.mark.filterwarnings("ignore:.*have no shingles:UserWarning")
@settings(max_examples=150, deadline=None)
@given(
    sets=key_sets(40, universe=60, max_keys=30, max_bases=4, max_edits=3,
                  kinds=(EMPTY, SINGLE, UNRELATED, BIG, COPY, EDITED, EDITED, EDITED)),
    threshold=st.one_of(st.sampled_from([0.3, 0.5, 0.8, 0.9, 1.0]), st.floats(0.05, 1.0)),
    scheme=SCHEMES,
    longest=st.booleans(),
    data=st.data(),
)  # fmt: skip
def test_band_decisions_are_the_rule_over_band_pairs(sets, threshold, scheme, longest, data):
    """The decisions are the rule's over the pairs that share a band (naive.py), with any
    scheme, keep order and excluded documents; every drop is exact."""
    n = len(sets)
    lengths = data.draw(st.lists(st.integers(0, 5), min_size=n, max_size=n)) if longest else None
    exclude = np.array(data.draw(st.lists(st.booleans(), min_size=n, max_size=n)), dtype=bool)
    b, r = scheme
    got = decide_verified(_csr(sets), threshold=threshold, keep="longest" if longest else "first",
                          lengths=lengths, threads=1, exclude=exclude, candidates="bands",
                          bands=b, rows=r)  # fmt: skip
    order = priority_order(n, "longest" if longest else "first", lengths).tolist()
    pairs = naive.band_pairs([s if not exclude[d] else set() for d, s in enumerate(sets)], b, r)
    kept_for, jac = naive.decide_verified(sets, [0] * n, threshold, order, pairs=sorted(pairs),
                                          exclude=exclude)  # fmt: skip
    assert got.kept_for.tolist() == kept_for
    for d in np.flatnonzero(~got.kept):
        assert math.isclose(got.jaccard[d], jac[d]) and jac[d] >= threshold


def _pairs_at(j: float, size: int, m: int, seed: int) -> ShingleSets:
    """``m`` pairs of random sets of ``size`` keys at Jaccard about ``j``, one after the other."""
    rng = np.random.default_rng(seed)
    own = round(size * (1 - j) / (1 + j))
    sets = []
    for _ in range(m):
        u = rng.choice(2**32, size + own, replace=False).astype(np.uint32)
        sets += [np.sort(u[:size]), np.sort(np.r_[u[: size - own], u[size:]])]
    offsets = np.r_[0, np.cumsum([len(s) for s in sets])].astype(np.int64)
    return ShingleSets(offsets, np.concatenate(sets))


@pytest.mark.parametrize(("j", "size"), [(0.8, 200), (0.7, 200), (0.53, 200), (0.8, 30)])
def test_pairs_become_candidates_at_the_rate_of_the_s_curve(j, size):
    """The default scheme at 0.8 (30 bands of 7 rows): a pair of Jaccard ``J`` shares a band at
    the rate ``1 - (1 - J**7)**30`` of the theory, within 4 standard errors over 4,000 pairs
    (one-permutation rows with densification behave as independent permutations)."""
    b, r = bands.band_scheme(0.8)
    assert (b, r) == (30, 7)
    m = 4000
    sets = _pairs_at(j, size, m, seed=int(j * 100) + size)
    own = round(size * (1 - j) / (1 + j))
    exact = (size - own) / (size + own)
    keys = bands.band_sets(sets, b, r, threads=2).keys.reshape(-1, b)
    rate = float(np.mean(np.any(keys[0::2] == keys[1::2], axis=1)))
    p = bands.candidate_probability(exact, b, r)
    assert abs(rate - p) <= 4 * math.sqrt(p * (1 - p) / m) + 1e-3, (rate, p)


@pytest.mark.parametrize("t", [0.05, 0.3, 0.5, 0.7, 0.8, 0.85, 0.9, 0.95, 1.0])
def test_the_default_scheme_finds_a_pair_at_the_threshold_with_probability_0_999(t):
    b, r = bands.band_scheme(t)
    assert bands.candidate_probability(t, b, r) >= bands.RECALL
    assert b * r <= bands.BUDGET or r == 1
    if r < bands.MAX_ROWS:  # one row more would not fit, or would miss the recall
        more = bands._bands_for(t, r + 1)
        assert more * (r + 1) > bands.BUDGET
    assert bands.band_scheme(t, rows=r) == (b, r) and bands.band_scheme(t, bands=b)[0] == b


def test_a_scheme_out_of_range_is_refused_in_one_line():
    for kw in ({"bands": 0}, {"rows": 0}, {"rows": bands.MAX_ROWS + 1}):
        with pytest.raises(ValueError, match="must be an integer from 1 to"):
            bands.band_scheme(0.8, **kw)
    assert bands.band_scheme(0.8, bands=5, rows=3) == (5, 3)
    assert bands.Bands(bands=5).scheme(0.8) == (5, bands.band_scheme(0.8, bands=5)[1])


def _site(n: int) -> list[str]:
    """Pages of one site: the same 140 words around 60 of each page's own (Jaccard about 0.5)."""
    template = " ".join(f"menu{k}" for k in range(140))
    return [template + " " + " ".join(f"p{i}w{k}" for k in range(60)) for i in range(n)]


def test_bands_from_python_and_what_a_template_costs():
    """``candidates="bands"`` or ``Bands(...)``: the same kept documents as prefix candidates
    on near copies; on a templated site nothing is dropped, but the bands make candidates of
    the pages at the S-curve's rate, where prefix filtering makes none."""
    texts = [f"the page number {i} " * 20 + " ".join(f"w{i}x{k}" for k in range(60))
             for i in range(40)]  # fmt: skip
    texts += [t + " one more word" for t in texts[:10]]
    got = neardup.dedup(texts, candidates="bands")
    assert got.summary()["candidates"] == "bands" and got.summary()["bands"] == [30, 7]
    assert got.kept.tolist() == neardup.dedup(texts).kept.tolist() and got.n_dropped == 10
    scheme = neardup.dedup(texts, candidates=neardup.Bands(bands=9, rows=2))
    assert scheme.summary()["bands"] == [9, 2] and scheme.kept.tolist() == got.kept.tolist()
    site = _site(300)
    b = neardup.dedup(site, candidates="bands")
    assert b.kept.all() and neardup.dedup(site).verified.candidates == 0
    pairs = 300 * 299 // 2
    assert 0.1 * pairs < b.verified.candidates < 0.6 * pairs  # J ~ 0.5: P = 0.24 at 30 x 7
    with pytest.raises(ValueError, match="candidates='bands'"):
        neardup.dedup(texts, candidates="bands", verify=False)


@pytest.mark.slow
@settings(max_examples=10, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(*RUN_CASES, st.sampled_from([1, 3, stage_prefix.FAMILY_DOCS]), SCHEMES)
def test_staged_band_run_is_the_one_process_run(docs, shard_docs, threads, threshold, keep,
                                                common, copies, family, scheme):  # fmt: skip
    """Kept bytes, labels, near misses and the report: the staged stages find the band
    candidates the one-process pass finds, for any shard size, thread count and scheme, and
    keys held by more than ``family`` documents (families, decided whole) change nothing."""
    kw = dict(
        threshold=threshold, keep=keep, common_shingles=common, candidates=neardup.Bands(*scheme)
    )
    staged_is_one_process(_copied(docs, copies) + docs[:2], family, kw, shard_docs, threads)


def test_a_near_copy_family_of_bands_is_decided_whole_in_a_staged_run(tmp_path):
    """300 near copies of a page share their bands: a staged run links them into one family
    (no pairs), decides it as the one-process pass does, and says how large it was."""
    base = " ".join(f"w{k}" for k in range(120))
    docs = [base + f" edit{i}" for i in range(300)] + [f"other page {i} " * 10 for i in range(30)]
    _write(tmp_path / "in.jsonl", docs)
    src = str(tmp_path / "in.jsonl")
    work = tmp_path / "work"
    one = neardup.dedup(src, output=str(tmp_path / "one.jsonl"), candidates="bands")
    neardup.dedup(src, output=str(tmp_path / "st.jsonl"), candidates="bands", shard_docs=50,
                  work_dir=str(work), json_summary=str(tmp_path / "s.json"))  # fmt: skip
    assert (tmp_path / "st.jsonl").read_bytes() == (tmp_path / "one.jsonl").read_bytes()
    s = json.loads((tmp_path / "s.json").read_text())
    assert s["dropped"] == 299 and s["bands"] == [30, 7]
    assert s["largest_family"] == one.summary()["largest_family"]
    assert s["largest_family"]["documents"] >= 250  # the copies whose edit left a band alone
    pairs = sum(len(np.load(f)) for f in (work / "pairs").glob("*/pairs.npy"))
    links = sum(len(np.load(f)) for f in (work / "pairs").glob("*/fam.npy"))
    assert pairs < 300 and 299 <= links  # 44,850 pairs if the family made them


def test_cli_bands_and_rows(tmp_path):
    src = tmp_path / "in.jsonl"
    lines = [json.dumps({"id": i, "text": f"page {i % 3} of the site with words " * 5})
             for i in range(9)]  # fmt: skip
    src.write_text("\n".join(lines) + "\n")
    out, summary = tmp_path / "out.jsonl", tmp_path / "s.json"
    r = invoke("neardup", "dedup", str(src), "-o", str(out), "--rows", "4", "--json-summary",
               str(summary), "-q", text=True)  # fmt: skip
    assert r.returncode == 0, r.stderr
    assert [json.loads(x)["id"] for x in out.read_text().splitlines()] == [0, 1, 2]
    s = json.loads(summary.read_text())
    assert s["candidates"] == "bands" and s["bands"] == list(bands.band_scheme(0.8, rows=4))
    for extra, says in ((("--candidates", "prefix"), "--candidates prefix"),
                        (("--no-verify",), "--no-verify")):  # fmt: skip
        bad = tmp_path / "bad.jsonl"
        r = invoke("neardup", "dedup", str(src), "-o", str(bad), "--bands", "9", *extra,
                   text=True)  # fmt: skip
        assert r.returncode == 2 and says in r.stderr and not bad.exists()
    r = invoke("neardup", "dedup", str(src), "-o", str(tmp_path / "x.jsonl"), "--rows", "0",
               text=True)  # fmt: skip
    assert r.returncode == 2 and "--rows" in r.stderr

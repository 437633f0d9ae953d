"""Prefix-filtering candidates (core/prefix.py): the verified rule over all pairs, against
naive.py, and what templates and families cost."""

from __future__ import annotations

import itertools
import json
import math
import shutil
import warnings

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
    _counts,
    _near_section,
    _run,
    _same_near_misses,
    _write,
    staged_is_one_process,
)

import neardup
from neardup.core import prefix
from neardup.core.verify import as_shingle_sets, decide_verified, priority_order
from neardup.errors import InputError
from neardup.pipeline import stage_prefix

THRESHOLDS = [0.05, 0.3, 0.5, 0.6, 2 / 3, 0.7, 0.75, 0.8, 0.85, 0.9, 0.95, 1.0]


def _csr(sets):
    return as_shingle_sets(*naive.sets_to_csr(sets))


def _all_pairs(sets, threshold, order, exclude=None):
    """naive.decide_verified with every pair a candidate (64 bits: any two fingerprints)."""
    return naive.decide_verified(sets, [0] * len(sets), threshold, order, distance=64,
                                 exclude=exclude)  # fmt: skip


@pytest.mark.slow
@settings(max_examples=300, deadline=None)
@given(
    sets=key_sets(40, universe=60, max_keys=30, max_bases=4, max_edits=3,
                  kinds=(EMPTY, SINGLE, UNRELATED, BIG, COPY, EDITED, EDITED, EDITED)),
    threshold=st.one_of(st.sampled_from(THRESHOLDS), st.floats(0.01, 1.0)),
    longest=st.booleans(),
    bits=st.sampled_from([1, 4, prefix.COUNT_BITS]),
    data=st.data(),
)  # fmt: skip
def test_prefix_decisions_are_the_rule_over_all_pairs(sets, threshold, longest, bits, data):
    """Whatever the counters (1 bit: every key shares a count with half the others), the
    decisions are those of the rule with every pair a candidate; each drop is exact, and no two
    kept documents reach the threshold."""
    n = len(sets)
    lengths = data.draw(st.lists(st.integers(0, 5), min_size=n, max_size=n)) if longest else None
    exclude = np.array(data.draw(st.lists(st.booleans(), min_size=n, max_size=n)), dtype=bool)
    keep = "longest" if longest else "first"
    order = priority_order(n, keep, lengths).tolist()
    saved = prefix.COUNT_BITS
    prefix.COUNT_BITS = bits
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            d = decide_verified(_csr(sets), threshold=threshold, keep=keep, lengths=lengths,
                                threads=1, exclude=exclude, candidates="prefix")  # fmt: skip
    finally:
        prefix.COUNT_BITS = saved
    want_for, want_jac = _all_pairs(sets, threshold, order, exclude)
    assert d.kept_for.tolist() == want_for
    for got, want in zip(d.jaccard.tolist(), want_jac, strict=True):
        assert (math.isnan(got) and want is None) or got == want
    kept = [i for i in range(n) if d.kept[i] and sets[i] and not exclude[i]]
    for x, a in enumerate(kept):
        for b in kept[x + 1 :]:
            assert naive.jaccard(sets[a], sets[b]) < threshold


@settings(max_examples=100, deadline=None)
@given(sets=key_sets(25, universe=40, max_keys=20), threshold=st.sampled_from(THRESHOLDS))
def test_prefix_near_misses_are_exact_and_earlier(sets, threshold):
    """A kept document's nearest miss is a kept document before it, under the threshold, with
    the Jaccard reported; with every pair a candidate of its prefix, none is better."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        d = decide_verified(_csr(sets), threshold=threshold, threads=1, near_misses=True,
                            candidates="prefix")  # fmt: skip
    for i in np.flatnonzero(d.near_for >= 0).tolist():
        e = int(d.near_for[i])
        assert d.kept[i] and d.kept[e] and e < i
        assert naive.jaccard(sets[i], sets[e]) == d.near_jaccard[i] < threshold


@settings(max_examples=200)
@given(size=st.integers(0, 5000), threshold=st.one_of(st.sampled_from(THRESHOLDS),
                                                       st.floats(0.001, 1.0)))  # fmt: skip
def test_min_overlap_is_the_smallest_count_that_passes(size, threshold):
    o = int(prefix.min_overlap(np.array([size]), threshold)[0])
    if size == 0:
        assert o == 0
        return
    assert o / size >= threshold
    assert o == 0 or (o - 1) / size < threshold


def test_key_counts_count_each_slot_on_any_thread_count():
    rng = np.random.default_rng(5)
    keys = rng.integers(0, 2**32, 2_500_000, dtype=np.uint64).astype(np.uint32)
    keys[:1000] = 7  # one key held a thousand times
    one = prefix.rank_counts(keys, threads=1, bits=12)
    assert one.sum() == len(keys) and one.dtype == np.uint32 and len(one) == 4096
    assert np.array_equal(one, prefix.rank_counts(keys, threads=2, bits=12))
    slot = ((keys.astype(np.uint64) * np.uint64(0x9E3779B1)) & np.uint64(0xFFFFFFFF)) >> 20
    assert np.array_equal(one, np.bincount(slot.astype(np.int64), minlength=4096))


def test_prefixes_hold_the_rarest_keys():
    """A key that every document holds is never in a prefix while a document has enough keys of
    its own; the prefix has s - o(s) + 2 keys (two shared keys make a candidate)."""
    common = list(range(1000, 1008))
    sets = [set(common) | {10 * i + j for j in range(40)} for i in range(50)]
    s = _csr(sets)
    pre = prefix.prefix_sets(s, 0.8, prefix.rank_counts(s.keys))
    sizes = s.sizes
    assert np.array_equal(np.diff(pre.offsets), sizes - prefix.min_overlap(sizes, 0.8) + 2)
    assert not np.isin(pre.keys, common).any()


def _templated(n: int, own: int, template: int, seed: int = 0) -> list[set]:
    """Pages of one site: a template of ``template`` keys and ``own`` keys of each page's own."""
    rng = np.random.default_rng(seed)
    base = set(range(template))
    own_keys = 10**6 + rng.permutation(n * own * 4)[: n * own].reshape(n, own)
    return [base | set(own_keys[i].tolist()) for i in range(n)]


def test_template_pages_are_not_candidates_of_each_other():
    """Pages that share a template of 140 keys and have 60 of their own (Jaccard about 0.54)
    meet no candidates, however many: the template's keys are the corpus's most common."""
    sets = _templated(3000, 60, 140)
    d = decide_verified(_csr(sets), threshold=0.8, threads=1, candidates="prefix")
    assert d.kept.all()
    assert d.candidates == 0 and d.checks == 0


def test_a_family_of_near_copies_costs_a_check_a_member():
    """2,000 near-copies of one page (each with one key of its own): the first is kept, every
    other is dropped for it after one check, not compared with every earlier member."""
    base = set(range(500))
    sets = [base | {10**6 + i} for i in range(2000)]
    d = decide_verified(_csr(sets), threshold=0.8, threads=1, candidates="prefix")
    assert d.kept_for.tolist() == [-1] + [0] * 1999
    assert d.checks == 1999


def test_prefix_finds_the_pairs_the_fingerprints_miss():
    """Pairs at the threshold whose set fingerprints lie further apart than the distance: the
    prefix candidates find every one (the rule over all pairs)."""
    rng = np.random.default_rng(2)
    sets = []
    for _ in range(300):
        a = set(rng.choice(2**31, 40, replace=False).tolist())
        b = set(list(a)[:33]) | set(rng.choice(2**31, 7, replace=False).tolist())
        sets += [a, b]  # Jaccard 33 / 47 = 0.70
    fp = decide_verified(_csr(sets), threshold=0.7, distance=2, threads=1)
    pre = decide_verified(_csr(sets), threshold=0.7, threads=1, candidates="prefix")
    assert pre.dropped.sum() == 300 > fp.dropped.sum()
    assert pre.kept_for.tolist() == _all_pairs(sets, 0.7, list(range(len(sets))))[0]


def test_dedup_with_prefix_candidates(tmp_path):
    texts = ["the quick brown fox jumps over the lazy dog near the river bank today",
             "the quick brown fox jumps over the lazy dog near the river bank today!",
             "an entirely different sentence about the weather in the mountains"]  # fmt: skip
    r = neardup.dedup(texts, candidates="prefix")
    assert r.kept.tolist() == [True, False, True] and r.jaccard[1] == 1.0
    with pytest.raises(ValueError, match="candidates must be one of"):
        neardup.dedup(texts, candidates="minhash")
    with pytest.raises(ValueError, match="verify=False"):
        neardup.dedup(texts, candidates="prefix", verify=False)


def _site(n: int) -> list[str]:
    """Pages of one site: the same 140 words around 60 of each page's own (Jaccard about 0.5)."""
    template = " ".join(f"menu{k}" for k in range(140))
    return [template + " " + " ".join(f"p{i}w{k}" for k in range(60)) for i in range(n)]


def test_prefix_is_the_default_of_a_verified_run():
    """A verified run takes prefix candidates unless the caller asks for what only the
    fingerprint search uses; a site's pages then make no candidates at all, where the
    fingerprint search verifies pairs of them."""
    texts = _site(600)
    r = neardup.dedup(texts)
    assert r.summary()["candidates"] == "prefix" and r.kept.all()
    assert r.verified.candidates == 0 and r.verified.checks == 0
    fp = neardup.dedup(texts, candidates="fingerprint")
    assert fp.summary()["candidates"] == "fingerprint" and fp.kept.all()
    assert fp.verified.checks > 1000  # the pairs of the template within the distance
    for opts in ({"distance": 10}, {"blocks": 12}):
        assert neardup.dedup(texts[:20], **opts).summary()["candidates"] == "fingerprint"
    assert "candidates" not in neardup.dedup(texts[:20], verify=False).summary()


def test_cli_default_candidates_in_the_summary(tmp_path):
    src = tmp_path / "in.jsonl"
    src.write_text("".join(json.dumps({"id": i, "text": t}) + "\n"
                           for i, t in enumerate(_site(30))))  # fmt: skip
    for extra, want in (((), "prefix"), (("--distance", "10"), "fingerprint")):
        summary = tmp_path / "s.json"
        r = invoke("neardup", "dedup", str(src), "-o", str(tmp_path / "o.jsonl"), "--json-summary",
                   str(summary), "-q", *extra, text=True)  # fmt: skip
        assert r.returncode == 0, r.stderr
        assert json.loads(summary.read_text())["candidates"] == want


def test_cli_candidates_prefix(tmp_path):
    src = tmp_path / "in.jsonl"
    lines = [json.dumps({"id": i, "text": f"page {i % 3} of the site with words " * 5})
             for i in range(9)]  # fmt: skip
    src.write_text("\n".join(lines) + "\n")
    out = tmp_path / "out.jsonl"
    r = invoke("neardup", "dedup", str(src), "-o", str(out), "--candidates", "prefix", "-q",
               text=True)  # fmt: skip
    assert r.returncode == 0, r.stderr
    assert [json.loads(x)["id"] for x in out.read_text().splitlines()] == [0, 1, 2]
    r = invoke("neardup", "dedup", str(src), "-o", str(tmp_path / "o2.jsonl"), "--candidates",
               "prefix", "--no-verify", text=True)  # fmt: skip
    assert r.returncode == 2 and "--candidates prefix" in r.stderr
    assert not (tmp_path / "o2.jsonl").exists()


# -- the staged run: the same candidates, the same bytes ---------------------------------------


@pytest.mark.slow
@settings(max_examples=10, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(*RUN_CASES, st.sampled_from([1, 2, 3, stage_prefix.FAMILY_DOCS]))
def test_staged_prefix_run_is_the_one_process_run(docs, shard_docs, threads, threshold, keep,
                                                  common, copies, family):  # fmt: skip
    """Kept bytes, decisions, near misses and the report's page: the staged stages find the
    candidates the one-process kernel finds, for any shard size and thread count, and keys
    held by more than ``family`` prefixes (families: no pairs, decided whole) change nothing."""
    kw = dict(threshold=threshold, keep=keep, common_shingles=common, candidates="prefix")
    staged_is_one_process(_copied(docs, copies) + docs[:2], family, kw, shard_docs, threads)


def _pages(n: int, seed: int = 3) -> list[str]:
    """Pages of one site (a template of 140 words) with 20-80 words of their own, a tenth of
    them followed by a copy with one word changed."""
    rng = np.random.default_rng(seed)
    vocab = [f"w{i}" for i in range(20000)]
    template = rng.choice(vocab, 140).tolist()
    out = []
    for _ in range(n):
        own = rng.choice(vocab, int(rng.integers(20, 80))).tolist()
        out.append(" ".join(template[:70] + own + template[70:]))
        if rng.random() < 0.1:
            own[0] = "changed"
            out.append(" ".join(template[:70] + own + template[70:]))
    return out


def test_staged_prefix_resumes_and_equals_one_process(tmp_path):
    docs = _pages(600)
    _write(tmp_path / "in.jsonl", docs)
    src = str(tmp_path / "in.jsonl")
    one = neardup.dedup(src, output=str(tmp_path / "one.jsonl"), candidates="prefix")
    assert 0 < one.summary()["dropped"] < len(docs)
    work = tmp_path / "work"
    summary = tmp_path / "s.json"
    kw = dict(candidates="prefix", shard_docs=150, work_dir=str(work), json_summary=str(summary))
    neardup.dedup(src, output=str(tmp_path / "a.jsonl"), **kw)
    assert (tmp_path / "a.jsonl").read_bytes() == (tmp_path / "one.jsonl").read_bytes()
    for stage in ("prefix-pairs", "pairs"):  # a task of each lost
        assert (work / stage / "1" / "done.json").exists()
        shutil.rmtree(work / stage / "1")
    (tmp_path / "a.jsonl").unlink()
    neardup.dedup(src, output=str(tmp_path / "a.jsonl"), **kw)  # resumed: one task each to run
    stages = json.loads(summary.read_text())["stages"]
    for stage in ("prefix-pairs", "pairs"):
        assert stages[stage]["reused"] == stages[stage]["tasks"] - 1 >= 1
    assert (tmp_path / "a.jsonl").read_bytes() == (tmp_path / "one.jsonl").read_bytes()
    with pytest.raises(InputError, match="work of a different dedup command"):
        neardup.dedup(src, output=str(tmp_path / "fp.jsonl"), shard_docs=150, work_dir=str(work))
    assert not (tmp_path / "fp.jsonl").exists()  # fingerprint candidates: another plan


def _need(sa: int, sb: int, t: float) -> int:
    """The fewest common keys for Jaccard >= t (float64, as the kernels divide)."""
    return next((c for c in range(min(sa, sb) + 1) if c / (sa + sb - c) >= t), min(sa, sb) + 1)


@pytest.mark.slow
@settings(max_examples=150, deadline=None)
@given(sets=key_sets(30, universe=50, max_keys=25), threshold=st.sampled_from(THRESHOLDS))
def test_prefix_pairs_are_two_shared_keys_that_pass_the_positional_filter(sets, threshold):
    """The staged stage's pairs, by brute force over every pair of prefixes (rank order): two
    shared keys, each passing the positional filter there, or one where one common key can
    reach the threshold; every pair at the threshold among them."""
    s = _csr(sets)
    pre = prefix.prefix_sets(s, threshold, prefix.rank_counts(s.keys))
    lists = [pre.keys[pre.offsets[d] : pre.offsets[d + 1]].tolist() for d in range(len(sets))]
    want = []
    for a in range(len(sets)):
        for b in range(a + 1, len(sets)):
            common = [k for k in lists[a] if k in lists[b]]
            if not common:
                continue
            sa, sb = len(sets[a]), len(sets[b])
            need = _need(sa, sb, threshold)
            weight = 0
            for k in common:
                i, j = lists[a].index(k), lists[b].index(k)
                if min(i, j) + 1 + min(sa - i - 1, sb - j - 1) >= need:
                    weight += 2 if need <= 1 else 1
            if weight >= 2:
                want.append((a, b))
    doc = np.repeat(np.arange(len(sets)), np.diff(pre.offsets))
    at = np.arange(len(doc)) - pre.offsets[doc]
    got = prefix.prefix_pairs(pre.keys, doc, at, s.sizes[doc], threshold)
    assert [tuple(p) for p in got.tolist()] == want
    for a, b in itertools.combinations(range(len(sets)), 2):  # every pair at the threshold
        if sets[a] and sets[b] and naive.jaccard(sets[a], sets[b]) >= threshold:
            assert (a, b) in want


@settings(max_examples=100, deadline=None)
@given(sets=key_sets(30, universe=50, max_keys=25), threshold=st.sampled_from(THRESHOLDS),
       ranges=st.integers(1, 5))  # fmt: skip
def test_pairs_summed_over_key_ranges_are_the_pairs_of_all_keys(sets, threshold, ranges):
    """The staged split: each range of the key space gives its pairs, each as many times as
    its keys weigh for it up to two (clip_pairs); the pairs whose rows over all ranges reach
    two are the pairs of all keys at once, so a pair whose two shared keys fall in different
    ranges is found."""
    s = _csr(sets)
    pre = prefix.prefix_sets(s, threshold, prefix.rank_counts(s.keys))
    doc = np.repeat(np.arange(len(sets)), np.diff(pre.offsets))
    at = np.arange(len(doc)) - pre.offsets[doc]
    size = s.sizes[doc]
    part = stage_prefix.key_range(pre.keys, ranges)
    rows = [prefix.KeyGroups(pre.keys[part == r], doc[part == r])
            .pairs(at[part == r], size[part == r], threshold, part=True) for r in range(ranges)]  # fmt: skip
    summed = prefix.unique_pairs(np.concatenate(rows), prefix.SHARED_KEYS)
    whole = prefix.prefix_pairs(pre.keys, doc, at, size, threshold)
    assert np.array_equal(summed.reshape(-1, 2), whole.reshape(-1, 2))


@pytest.mark.slow
@settings(max_examples=150, deadline=None)
@given(sets=key_sets(30, universe=50, max_keys=25), threshold=st.sampled_from(THRESHOLDS),
       most=st.integers(1, 6))  # fmt: skip
def test_families_and_pairs_cover_every_pair_at_the_threshold(sets, threshold, most):
    """Keys held by more than ``most`` prefixes make no pairs but link their documents to the
    key's first (a star each, by brute force over the prefixes); every pair at the threshold is
    a pair or has both documents in one component of the links."""
    s = _csr(sets)
    pre = prefix.prefix_sets(s, threshold, prefix.rank_counts(s.keys))
    doc = np.repeat(np.arange(len(sets)), np.diff(pre.offsets))
    at = np.arange(len(doc)) - pre.offsets[doc]
    pairs = prefix.prefix_pairs(pre.keys, doc, at, s.sizes[doc], threshold, most)
    links = prefix.family_edges(pre.keys, doc, most)
    want = set()
    for k in np.unique(pre.keys).tolist():
        held = sorted(doc[pre.keys == k].tolist())
        if len(held) > most:
            want |= {(held[0], d) for d in held[1:]}
    assert [tuple(e) for e in links.tolist()] == sorted(want)
    label = list(range(len(sets)))
    for a, b in links.tolist():  # one component of each chain of links
        ra, rb = _root(label, a), _root(label, b)
        label[max(ra, rb)] = min(ra, rb)
    found = {tuple(p) for p in pairs.tolist()}
    for a, b in itertools.combinations(range(len(sets)), 2):
        if sets[a] and sets[b] and naive.jaccard(sets[a], sets[b]) >= threshold:
            assert (a, b) in found or _root(label, a) == _root(label, b)


def _root(label: list[int], x: int) -> int:
    while label[x] != x:
        x = label[x]
    return x


@pytest.mark.slow
def test_a_near_copy_family_costs_a_check_a_member_in_a_staged_run(tmp_path):
    """300 near copies of one page (and 300 other pages) in shards of 50: the family makes no
    candidate pairs (44,850 before families), each copy is checked against the one kept page,
    and the bytes are the one-process run's."""
    rng = np.random.default_rng(5)
    vocab = [f"w{i}" for i in range(20000)]
    page = rng.choice(vocab, 120).tolist()
    docs = []
    for i in range(300):
        near = list(page)
        near[int(rng.integers(120))] = f"own{i}"
        docs += [" ".join(near), " ".join(rng.choice(vocab, 120).tolist())]
    _write(tmp_path / "in.jsonl", docs)
    work = tmp_path / "work"
    ref = _run(tmp_path, "one", json_summary=tmp_path / "one.json")
    got = _run(tmp_path, "staged", shard_docs=50, work_dir=work, threads=2,
               json_summary=tmp_path / "staged.json")  # fmt: skip
    assert (tmp_path / "staged.jsonl").read_bytes() == (tmp_path / "one.jsonl").read_bytes()
    assert int((~ref.kept).sum()) == 299
    _same_near_misses(got, ref)
    one, staged = (tmp_path / "one.html").read_text(), (tmp_path / "staged.html").read_text()
    assert _near_section(staged) == _near_section(one) and _counts(staged) == _counts(one)
    family = [json.loads((tmp_path / f"{t}.json").read_text())["largest_family"]
              for t in ("one", "staged")]  # fmt: skip
    assert family[0] == family[1] and family[0]["first"] == "d0"
    assert 290 <= family[0]["documents"] <= 300  # the copies that kept the rarest shingle
    assert family[0]["pairs"] == family[0]["documents"] * (family[0]["documents"] - 1) // 2
    assert "largest family" in one and "largest family" in staged
    pairs = sum(len(np.load(f)) for f in (work / "pairs").glob("*/pairs.npy"))
    links = sum(len(np.load(f)) for f in (work / "pairs").glob("*/fam.npy"))
    assert pairs < 300 and 299 <= links < 600


def test_no_prefix_entries_make_no_pairs_and_no_family():
    none = np.zeros(0, dtype=np.uint32), np.zeros(0, dtype=np.int64)
    assert prefix.family_edges(*none, 1).shape == (0, 2)
    assert (
        prefix.prefix_pairs(*none, np.zeros(0, np.int64), np.zeros(0, np.int64), 0.8, 1).shape[0]
        == 0
    )
    groups = prefix.KeyGroups(*none)
    assert len(groups.order) == len(groups.starts) == len(groups.ends) == 0
    assert groups.largest() == (0, -1)


@settings(max_examples=200, deadline=None)
@given(
    entries=st.lists(st.tuples(st.integers(0, 12), st.integers(0, 40)), max_size=60),
    wide=st.booleans(),
)
def test_key_groups_are_the_shared_keys_by_key_then_position(entries, wide):
    """KeyGroups holds the entries of the keys held twice or more (32-bit prefix keys or 64-bit
    band keys), sorted by key then position, one run a key, and the largest run (ties to the
    smallest key) with its first position: as brute force over the entries."""
    entries = list(dict.fromkeys(entries))  # a position once per key
    keys = np.array([k for k, _ in entries], dtype=np.uint64 if wide else np.uint32)
    if wide:
        keys = keys * np.uint64(0x9E3779B97F4A7C15)  # spread over 64 bits, distinct still
    pos = np.array([p for _, p in entries], dtype=np.int64).reshape(-1)
    g = prefix.KeyGroups(keys, pos)
    held = {}
    for k, p in zip(keys.tolist(), pos.tolist(), strict=True):
        held.setdefault(k, []).append(p)
    runs = sorted((k, sorted(ps)) for k, ps in held.items() if len(ps) >= 2)
    got = [(int(keys[g.order[a]]), pos[g.order[a:z]].tolist())
           for a, z in zip(g.starts.tolist(), g.ends.tolist(), strict=True)]  # fmt: skip
    assert got == runs
    best = max(runs, key=lambda r: len(r[1]), default=None)  # the first of the largest
    assert g.largest() == ((len(best[1]), best[1][0]) if best else (0, -1))

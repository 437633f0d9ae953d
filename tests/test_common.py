"""Common shingles (``common_shingles=``, ``--common-shingles``): exact document frequencies,
the sets without the common keys, the dedup on what is left against the naive rule, the
template hint, and the command line."""

from __future__ import annotations

import json
import os
import random
import warnings
from decimal import Decimal

import naive
import numpy as np
import pytest
from cli import Result, invoke
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import neardup
from neardup.core import common as C
from neardup.core.similarity import ShingleSets
from neardup.core.verify import priority_order
from neardup.fingerprints import Fingerprinter

WORDS = ["apple", "berry", "cherry", "date", "elder", "fig", "grape", "hazel"]


@pytest.fixture
def small_chunks(monkeypatch):
    """Counts in many key ranges and chunks, as for a corpus much larger than memory."""
    monkeypatch.setattr(C, "RANGE_KEYS", 7)
    monkeypatch.setattr(C, "CHUNK_KEYS", 5)


key_lists = st.lists(st.integers(0, 2**32 - 1) | st.integers(0, 40), max_size=80)


@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(key_lists, st.integers(0, 4), st.integers(1, 3))
def test_counts_and_common_keys_exact_in_any_range_cut(small_chunks, keys, limit, threads):
    k = np.array(keys, dtype=np.uint32)
    u, c = C.key_counts(k)
    want_u, want_c = np.unique(k, return_counts=True)
    assert u.tolist() == want_u.tolist() and c.tolist() == want_c.tolist()
    assert C.common_keys(k, limit, threads).tolist() == want_u[want_c > limit].tolist()
    half = len(k) // 2
    parts = [C.key_counts(k[:half]), C.key_counts(k[half:])]
    mu, mc = C.merge_counts(parts)
    assert mu.tolist() == want_u.tolist() and mc.tolist() == want_c.tolist()
    assert C.common_in_parts(parts, limit).tolist() == want_u[want_c > limit].tolist()


@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("in_blocks", [True, False])
def test_common_keys_of_full_buckets_exact(monkeypatch, in_blocks, threads):
    """A few buckets (by the keys' top 18 bits) hold more than ``limit`` keys: their keys are
    counted in a block of counts each, or (with less room) gathered and sorted in several
    ranges; keys at the limit, just over it and at a bucket's first and last place."""
    limit = 100_000
    hot = np.array([0, 0x3FFF, 0x1234_C000, 0x1234_FFFF, 0xFFFF_FFFF, 0x8000_0001], np.uint32)
    reps = [limit + 1, limit, 3 * limit // 2, limit - 1, 3 * limit, limit + 1]
    rng = np.random.default_rng(5)
    keys = np.concatenate([np.repeat(hot, reps), rng.integers(0, 2**32, 300_000, np.uint32)])
    rng.shuffle(keys)
    monkeypatch.setattr(C, "CHUNK_KEYS", 1 << 16)
    if not in_blocks:
        monkeypatch.setattr(C, "RANGE_KEYS", 1 << 16)
    blocks = []
    counted = C._counted_in_blocks
    monkeypatch.setattr(C, "_counted_in_blocks", lambda *a: blocks.append(1) or counted(*a))
    u, c = np.unique(keys, return_counts=True)
    assert C.common_keys(keys, limit, threads).tolist() == u[c > limit].tolist()
    assert C.common_keys(keys, limit).tolist() == [0, 0x1234_C000, 0x8000_0001, 0xFFFF_FFFF]
    assert bool(blocks) == in_blocks
    got_u, got_c = C.key_counts(keys)
    assert got_u.tolist() == u.tolist() and got_c.tolist() == c.tolist()


@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(st.data())
def test_sets_without_keys_as_naive(small_chunks, data):
    """Keys small (all in one slot of the membership table) or anywhere in 32 bits; chunks
    written on 1 to 3 threads."""
    key = data.draw(st.sampled_from([st.integers(0, 30), st.integers(0, 2**32 - 1)]))
    sets = data.draw(st.lists(st.sets(key, max_size=8), max_size=12))
    every = sorted(set().union(*sets)) if sets else []
    drop = data.draw(st.sets(st.sampled_from(every) if every else key) | st.sets(key))
    csr, threads = ShingleSets(*naive.sets_to_csr(sets)), data.draw(st.integers(1, 3))
    got = C.without_keys(csr, np.array(sorted(drop), np.uint32), threads)
    assert naive.csr_to_sets(got.offsets, got.keys) == [s - drop for s in sets]


@pytest.mark.parametrize("f", [0.01, 0.05, 0.07, 0.1, 0.29, 0.3, 0.57, 0.99])
@pytest.mark.parametrize("n", [1, 7, 100, 1000, 12345])
def test_share_limit_is_the_share_as_written(f, n):
    assert C.common_limit(f, n) == int(Decimal(repr(f)) * n)


@pytest.mark.parametrize("bad", [0, 1, -3, 0.0, 1.0, 1.5, -0.1, True, "x", float("nan")])
def test_common_shingles_refused_in_one_line(bad):
    with pytest.raises(ValueError, match="a share in \\(0, 1\\) or a count >= 2") as e:
        neardup.dedup(["a b c d"], common_shingles=bad)
    assert "\n" not in str(e.value)


def test_common_shingles_needs_verification():
    with pytest.raises(ValueError, match="verify=False"):
        neardup.dedup(["a b c d"], verify=False, common_shingles=0.1)


@pytest.mark.slow
@settings(max_examples=20, deadline=None)
@given(
    st.lists(st.lists(st.sampled_from(WORDS), max_size=10).map(" ".join), min_size=1, max_size=25),
    st.sampled_from([0.2, 0.5, 0.9, 2, 3, 6]),
    st.sampled_from([0.5, 0.8, 1.0]),
    st.sampled_from(["first", "longest"]),
)
def test_dedup_matches_the_naive_rule_on_what_is_left(docs, common, threshold, keep):
    docs = docs + docs[:2]
    f = Fingerprinter().features_many(docs)
    full = naive.csr_to_sets(f.offsets, f.keys)
    sets = naive.without_common(full, common)
    fps = [naive.set_minhash(x) for x in sets]
    order = priority_order(len(docs), keep, [len(d) for d in docs])
    d = 64  # the default candidates (prefix): every pair at the threshold
    kept_for, jac = naive.decide_verified(sets, fps, threshold, order, distance=d)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        r = neardup.dedup(docs, threshold=threshold, keep=keep, common_shingles=common)
    assert r.verified.kept_for.tolist() == kept_for
    got = r.verified.jaccard
    assert [None if np.isnan(x) else float(x) for x in got] == pytest.approx(jac)
    all_common = sum(1 for a, b in zip(full, sets, strict=True) if a and not b)
    assert r.summary()["common_shingles"]["all_common"] == all_common
    assert r.summary()["no_shingles"] == sum(1 for a in full if not a)


def _templated(n_pages: int, seed: int = 3) -> tuple[list[str], list[int]]:
    """Pages of one site: a template of 200 words around bodies of 8-40 words of their own
    (so that at J >= 0.8 the short ones would be near-duplicates of each other), every tenth
    page with a body of 60-100 words and followed by a copy of itself with one word changed
    (J >= 0.9 by their own words); with 400 other pages. Returns the texts and, for each
    copy, the page it copies (-1 for the others)."""
    rng = random.Random(seed)
    vocab = [f"w{i}" for i in range(50_000)]
    template = [rng.choice(vocab) for _ in range(200)]
    docs, copy_of = [], []
    for i in range(n_pages):
        words = rng.randint(60, 100) if i % 10 == 0 else rng.randint(8, 40)
        body = [rng.choice(vocab) for _ in range(words)]
        docs.append(" ".join(template[:120] + body + template[120:]))
        copy_of.append(-1)
        if i % 10 == 0:
            edited = list(body)
            edited[len(edited) // 2] = "changed"
            docs.append(" ".join(template[:120] + edited + template[120:]))
            copy_of.append(len(docs) - 2)
    others = [" ".join(rng.choice(vocab) for _ in range(rng.randint(40, 120))) for _ in range(400)]
    return docs + others, copy_of + [-1] * len(others)


def test_template_no_longer_makes_distinct_pages_duplicates():
    docs, copy_of = _templated(150)
    copies = {i for i, c in enumerate(copy_of) if c >= 0}
    off = neardup.dedup(docs)
    distinct_dropped = int(np.count_nonzero(off.dropped)) - len(
        copies & set(np.flatnonzero(off.dropped).tolist())
    )
    assert distinct_dropped > 50  # the template outweighs the short bodies
    on = neardup.dedup(docs, common_shingles=0.05)
    dropped = set(np.flatnonzero(on.dropped).tolist())
    assert dropped == copies  # only the true near-copies, each for the page it copies
    assert all(on.verified.kept_for[i] == copy_of[i] for i in copies)
    s = on.summary()["common_shingles"]
    assert s["limit"] == int(0.05 * len(docs)) and s["keys"] >= 190 and s["all_common"] == 0


def test_pages_of_only_common_shingles_kept_and_counted():
    template = " ".join(f"t{i}" for i in range(40))
    docs = [template] * 5 + [f"{template} own words of page {i} here" for i in range(5)]
    docs += [" ".join(f"x{i}{j}" for j in range(10)) for i in range(10)] + [""]
    r = neardup.dedup(docs, common_shingles=0.3)
    assert r.kept[:5].all()  # nothing of their own left to compare: kept, like empty ones
    s = r.summary()
    assert s["common_shingles"]["all_common"] == 5 and s["no_shingles"] == 1
    assert neardup.dedup(docs).kept[:5].tolist() == [True, False, False, False, False]


def test_hint_names_a_template_not_copies():
    docs, _ = _templated(150)
    hint = neardup.dedup(docs).summary()["template_hint"]
    assert hint["clusters"] >= 1 and hint["largest"] >= C.TEMPLATE_MIN_SIZE
    assert hint["suggest"] == 0.05 and hint["share"] >= 2 * hint["suggest"]
    assert "template_hint" not in neardup.dedup(docs, common_shingles=0.05).summary()
    rng = random.Random(5)
    article = [f"a{rng.randrange(10**6)}" for _ in range(300)]
    copies = [" ".join(article[:k] + ["x"] + article[k + 1 :]) for k in range(0, 240, 3)]
    others = [" ".join(f"o{rng.randrange(10**6)}" for _ in range(80)) for _ in range(300)]
    r = neardup.dedup(copies + others)
    assert r.summary()["clusters"] == 1 and "template_hint" not in r.summary()


def _cli(*args: str, cwd) -> Result:
    """``neardup dedup`` run in this process (click's CliRunner) from directory ``cwd``."""
    before = os.getcwd()
    os.chdir(cwd)
    try:
        return invoke("neardup", "dedup", *args, text=True)
    finally:
        os.chdir(before)


@pytest.mark.slow
def test_command_line_option_summary_and_hint(tmp_path):
    docs, copy_of = _templated(150)
    src = tmp_path / "pages.jsonl"
    src.write_text("".join(json.dumps({"id": i, "text": t}) + "\n" for i, t in enumerate(docs)))
    r = _cli("pages.jsonl", "-o", "off.jsonl", "--progress", "none", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert "--common-shingles 0.05 leaves such shingles out" in r.stderr
    r = _cli("pages.jsonl", "-o", "on.jsonl", "--common-shingles", "0.05", "--json-summary",
             "s.json", "--progress", "none", cwd=tmp_path)  # fmt: skip
    assert r.returncode == 0, r.stderr
    limit = int(0.05 * len(docs))
    assert f"shingles in more than {limit} documents left out; 0 documents with only" in r.stderr
    kept = [json.loads(x)["id"] for x in (tmp_path / "on.jsonl").read_text().splitlines()]
    assert kept == [i for i, c in enumerate(copy_of) if c < 0]
    assert json.loads((tmp_path / "s.json").read_text())["common_shingles"]["limit"] == limit


@pytest.mark.slow
@pytest.mark.parametrize("value", ["1", "0", "1.5", "-2", "five"])
def test_command_line_bad_value_one_line_nothing_written(tmp_path, value):
    (tmp_path / "in.jsonl").write_text('{"id": 1, "text": "a b c d"}\n')
    r = _cli("in.jsonl", "-o", "out.jsonl", "--common-shingles", value, cwd=tmp_path)
    assert r.returncode == 2 and "Traceback" not in r.stderr
    assert "--common-shingles" in r.stderr and "a share in (0, 1)" in r.stderr
    assert not (tmp_path / "out.jsonl").exists()
    r = _cli("in.jsonl", "-o", "out.jsonl", "--common-shingles", "0.1", "--no-verify",
             cwd=tmp_path)  # fmt: skip
    assert r.returncode == 2 and "--no-verify" in r.stderr and "Traceback" not in r.stderr


@pytest.mark.slow
def test_report_summary_says_what_was_left_out_or_hints(tmp_path):
    pytest.importorskip("matplotlib")
    from neardup.io.sources import InputPath
    from neardup.pipeline.report import ReportOutput

    docs, _ = _templated(150)
    src = tmp_path / "pages.jsonl"
    src.write_text("".join(json.dumps({"id": i, "text": t}) + "\n" for i, t in enumerate(docs)))
    pages = {}
    for tag, common in (("off", None), ("on", 0.05)):
        report = ReportOutput(tmp_path / f"{tag}.html", str(src))
        neardup.dedup([InputPath(src)], output=tmp_path / f"{tag}.jsonl", extra_outputs=[report],
                      common_shingles=common)  # fmt: skip
        pages[tag] = (tmp_path / f"{tag}.html").read_text()
    assert "look like pages sharing a template" in pages["off"]
    assert "try --common-shingles 0.05" in pages["off"]
    assert "common shingles left out" in pages["on"] and "sharing a template" not in pages["on"]

"""The staged dedup's report finds the same near misses as the one-process run: each kept
document's kept candidate before it with the highest exact Jaccard under the threshold."""

from __future__ import annotations

import json
import re
import tempfile
import warnings
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from neardup import dedup
from neardup.io.sources import InputPath
from neardup.pipeline.report import ReportOutput

WORDS = ["apple", "berry", "cherry", "date", "elder", "fig", "grape", "hazel", "iris"]


def _write(path: Path, docs: list[str]) -> None:
    path.write_text(
        "".join(json.dumps({"id": f"d{i}", "text": t}) + "\n" for i, t in enumerate(docs))
    )


def _run(where: Path, tag: str, **kw):
    src = [InputPath(where / "in.jsonl")]
    report = ReportOutput(where / f"{tag}.html", str(where / "in.jsonl"))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        return dedup(src, output=where / f"{tag}.jsonl", extra_outputs=[report], **kw)


def _near_section(page: str) -> str:
    """The near-miss section, its diffs' anchor numbers (a per-process counter) set aside."""
    section = page[page.index('<section id="near-misses">') :].split("</section>")[0]
    return re.sub(r"(difflib_chg_to|from|to)\d+_", r"\1_", section)


def _same_near_misses(got, ref) -> None:
    g, r = got.verified, ref.verified
    assert g.near_for is not None and r.near_for is not None
    assert g.near_for.tolist() == r.near_for.tolist()
    assert np.array_equal(g.near_jaccard, r.near_jaccard, equal_nan=True)
    assert got.kept.tolist() == ref.kept.tolist()


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.lists(
        st.lists(st.sampled_from(WORDS), min_size=0, max_size=14).map(" ".join),
        min_size=1,
        max_size=30,
    ),
    st.integers(1, 12),
    st.integers(1, 2),
    st.sampled_from([0.5, 0.8]),
    st.sampled_from(["first", "longest"]),
)
def test_staged_near_misses_equal_the_one_process_run(docs, shard_docs, threads, threshold, keep):
    docs = docs + docs[:2]  # exact copies too
    with tempfile.TemporaryDirectory() as tmp:
        where = Path(tmp)
        _write(where / "in.jsonl", docs)
        kw = dict(threshold=threshold, keep=keep)
        ref = _run(where, "one", **kw)
        got = _run(where, "staged", **kw, shard_docs=shard_docs, threads=threads)
        _same_near_misses(got, ref)
        one = _near_section((where / "one.html").read_text())
        assert _near_section((where / "staged.html").read_text()) == one


def _families(n: int = 6, seed: int = 5) -> list[str]:
    """Texts of 60 words, each with copies of 1 to 9 words replaced (Jaccard about 0.9 down
    to about 0.5), so that some kept documents lie just under a threshold of 0.8."""
    rng = np.random.default_rng(seed)
    vocab = [f"w{i}" for i in range(3000)]
    out = []
    for _ in range(n):
        base = rng.choice(vocab, 60).tolist()
        out.append(" ".join(base))
        for k in range(1, 10):
            v = list(base)
            for p in rng.choice(60, k, replace=False).tolist():
                v[p] = str(rng.choice(vocab))
            out.append(" ".join(v))
    return [out[i] for i in rng.permutation(len(out)).tolist()]


def test_staged_report_shows_the_near_misses(tmp_path):
    _write(tmp_path / "in.jsonl", _families())
    ref = _run(tmp_path, "one", threshold=0.8)
    got = _run(tmp_path, "staged", threshold=0.8, shard_docs=7)
    assert int((ref.verified.near_for >= 0).sum()) > 0  # the corpus has near misses to show
    _same_near_misses(got, ref)
    page = (tmp_path / "staged.html").read_text()
    assert "This run did not look for" not in page
    assert _near_section(page) == _near_section((tmp_path / "one.html").read_text())


def test_staged_near_misses_only_when_a_report_asks(tmp_path):
    _write(tmp_path / "in.jsonl", _families())
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        r = dedup([InputPath(tmp_path / "in.jsonl")], output=tmp_path / "k.jsonl", shard_docs=7,
                  collect=True)  # fmt: skip
    assert r.verified.near_for is None


@pytest.mark.slow
def test_staged_near_misses_on_dask(tmp_path):
    distributed = pytest.importorskip("distributed")
    _write(tmp_path / "in.jsonl", _families())
    ref = _run(tmp_path, "one", threshold=0.8)
    cluster = distributed.LocalCluster(
        n_workers=1, threads_per_worker=2, processes=False, dashboard_address=None
    )
    with cluster, distributed.Client(cluster) as client:
        got = _run(tmp_path, "dask", threshold=0.8, client=client)
    _same_near_misses(got, ref)

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
from test_staged import _copied, word_docs

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


def staged_is_one_process(docs: list[str], family: int, kw: dict, shard_docs: int,
                          threads: int) -> None:  # fmt: skip
    """A staged run of ``docs`` (keys held by more than ``family`` documents make families)
    writes the one-process run's bytes, labels, near misses and report."""
    from unittest.mock import patch

    from neardup.pipeline import stage_prefix

    with tempfile.TemporaryDirectory() as tmp, patch.object(stage_prefix, "FAMILY_DOCS", family):
        where = Path(tmp)
        _write(where / "in.jsonl", docs)
        ref = _run(where, "one", **kw)
        got = _run(where, "staged", **kw, shard_docs=shard_docs, threads=threads)
        assert (where / "staged.jsonl").read_bytes() == (where / "one.jsonl").read_bytes()
        assert got.labels.tolist() == ref.labels.tolist()
        _same_near_misses(got, ref)
        one, staged = (where / "one.html").read_text(), (where / "staged.html").read_text()
        assert _near_section(staged) == _near_section(one)
        assert _counts(staged) == _counts(one)


#: (docs, shard_docs, threads, threshold, keep, common_shingles, copies) of a staged run
RUN_CASES = (
    word_docs(WORDS, 14),
    st.integers(1, 12),
    st.integers(1, 2),
    st.sampled_from([0.5, 0.8]),
    st.sampled_from(["first", "longest"]),
    st.sampled_from([None, 0.4]),
    st.lists(st.tuples(st.integers(0, 40), st.integers(0, 80), st.integers(0, 2)), max_size=12),
)


@pytest.mark.slow
@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(*RUN_CASES)
def test_staged_near_misses_equal_the_one_process_run(docs, shard_docs, threads, threshold, keep,
                                                      common, copies):  # fmt: skip
    """``common``: the ``common_shingles`` of both runs (near misses on what is left);
    ``copies``: families of documents with one shingle set (``_copied``)."""
    docs = _copied(docs, copies) + docs[:2]  # exact copies too, some longer
    with tempfile.TemporaryDirectory() as tmp:
        where = Path(tmp)
        _write(where / "in.jsonl", docs)
        kw = dict(threshold=threshold, keep=keep, common_shingles=common)
        ref = _run(where, "one", **kw)
        got = _run(where, "staged", **kw, shard_docs=shard_docs, threads=threads)
        _same_near_misses(got, ref)
        one, staged = (where / "one.html").read_text(), (where / "staged.html").read_text()
        assert _near_section(staged) == _near_section(one)
        assert _counts(staged) == _counts(one)


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


def _counts(page: str) -> dict:
    """The report's chart numbers (drops and near misses per 0.01 of Jaccard)."""
    return json.loads(re.search(r'id="similarity-counts">(.*?)</script>', page, re.S)[1])


class _Stop(Exception):
    pass


def _stop_at_write(stage: str, done: int, total: int) -> None:
    if stage == "write":
        raise _Stop


@pytest.mark.slow
def test_near_misses_chosen_in_tasks_and_resumed(tmp_path):
    """The near misses are chosen by the near stages' tasks (one per shard, one per verify
    task), which a run stopped after them reuses from its work directory; the report of a run
    that returns no arrays (``collect=False``, as the CLI) is the one-process run's."""
    _write(tmp_path / "in.jsonl", _families())
    ref = _run(tmp_path, "one", threshold=0.8)
    one = (tmp_path / "one.html").read_text()
    work = tmp_path / "work"
    kw = dict(threshold=0.8, shard_docs=7, threads=2, work_dir=work, collect=False)
    with pytest.raises(_Stop):
        _run(tmp_path, "staged", **kw, stage_progress=_stop_at_write)
    assert not (tmp_path / "staged.html").exists()
    near = {p: p.stat().st_mtime_ns for st in ("near-kept", "near", "near-pick")
            for p in (work / st).glob("*/done.json")}  # fmt: skip
    got = _run(tmp_path, "staged", **kw).summary()
    stages = got["stages"]
    shards = stages["scan"]["tasks"]
    assert shards > 1 and stages["near-kept"]["tasks"] == stages["near-pick"]["tasks"] == shards
    assert stages["near"]["tasks"] == stages["verify"]["tasks"]
    assert len(near) == 2 * shards + stages["verify"]["tasks"]
    assert all(p.stat().st_mtime_ns == t for p, t in near.items())  # reused, not redone
    page = (tmp_path / "staged.html").read_text()
    assert _near_section(page) == _near_section(one)
    assert _counts(page) == _counts(one) and sum(_counts(one)["kept"]) > 0
    assert int((ref.verified.near_for >= 0).sum()) == sum(_counts(one)["kept"])


def _page(path: Path) -> str:
    """A report page, its run time and its diffs' anchor numbers set aside."""
    page = re.sub(r"<td>[0-9.]+ s</td>", "<td>T</td>", path.read_text())
    return re.sub(r"(difflib_chg_to|from|to)\d+_", r"\1_", page)


@pytest.mark.parametrize("verify", [True, False])
def test_staged_report_reads_the_parts_and_is_the_one_process_page(tmp_path, verify, monkeypatch):
    """Without arrays asked for (the command line), the report is made from the write tasks'
    cluster parts, read one line at a time (no ``--clusters`` asked for): no array of every
    document in this process, and the one-process run's page."""
    from neardup.pipeline import staged

    _write(tmp_path / "in.jsonl", _families())
    _run(tmp_path, "one", threshold=0.8, verify=verify)

    def no_arrays(*a, **k):
        raise AssertionError("the report built an array of every document")

    monkeypatch.setattr(staged, "build_result", no_arrays)
    _run(tmp_path, "staged", threshold=0.8, verify=verify, shard_docs=7, collect=False)
    one, got = _page(tmp_path / "one.html"), _page(tmp_path / "staged.html")
    assert got.count('<details class="cluster"') >= 3
    assert got == one


def test_no_near_stages_without_a_report(tmp_path):
    _write(tmp_path / "in.jsonl", _families())
    r = dedup([InputPath(tmp_path / "in.jsonl")], output=tmp_path / "k.jsonl", shard_docs=7,
              collect=False)  # fmt: skip
    assert "verify" in r.summary()["stages"]
    assert not {"near-kept", "near", "near-pick"} & set(r.summary()["stages"])


@pytest.mark.slow
@pytest.mark.parametrize("sketch_words", [8, None])
def test_staged_near_misses_against_an_index(tmp_path, sketch_words):
    """Checked against an index (with sketches, the documents found in it take no part), the
    near misses are the one-process run's."""
    from neardup.index import Index

    docs = _families(8, seed=2)
    (tmp_path / "old.jsonl").write_text(
        "".join(json.dumps({"id": f"o{i}", "text": t}) + "\n" for i, t in enumerate(docs[:25]))
    )
    _write(tmp_path / "in.jsonl", docs[15:])
    got = {}
    for tag, extra in (("one", {}), ("staged", {"shard_docs": 6})):
        ix = str(tmp_path / f"ix-{tag}")
        Index.create(
            ix, threshold=0.8, **({"sketch_words": sketch_words} if sketch_words else {})
        ).close()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", UserWarning)
            dedup([InputPath(tmp_path / "old.jsonl")], against=ix, update=True)
        got[tag] = _run(tmp_path, tag, threshold=0.8, against=ix, **extra)
    assert got["one"].against.n_found > 0 and (got["one"].verified.near_for >= 0).any()
    _same_near_misses(got["staged"], got["one"])
    one, staged = ((tmp_path / f"{t}.html").read_text() for t in ("one", "staged"))
    assert _near_section(staged) == _near_section(one) and _counts(staged) == _counts(one)

"""Dedup as stages over shards: the same outputs, byte for byte, for every shard size, thread
count and executor as the one-process job, and the decisions of the naive rule."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
import warnings
from pathlib import Path

import naive
import numpy as np
import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from neardup import dedup
from neardup.core.verify import priority_order
from neardup.errors import InputError
from neardup.fingerprints import Fingerprinter
from neardup.io.sources import InputPath
from neardup.pipeline import staged, staged_result
from neardup.pipeline.plan import build_plan

WORDS = ["apple", "berry", "cherry", "date", "elder", "fig", "grape"]
ROOT = Path(__file__).resolve().parents[1]
_MAIN = [sys.executable, "-c", "from neardup.cli.main import main; main()"]


def _write(path: Path, docs: list[str], ids: list | None = None) -> None:
    ids = ids if ids is not None else [f"d{i}" for i in range(len(docs))]
    path.write_text("".join(json.dumps({"id": k, "text": t}) + "\n" for k, t in zip(ids, docs)))


def _outputs(where: Path, tag: str) -> dict:
    return {
        "output": where / f"{tag}.jsonl",
        "clusters": where / f"{tag}.clusters",
        "drop_list": where / f"{tag}.drop",
    }


def _read(outs: dict) -> list[bytes]:
    return [Path(p).read_bytes() for p in outs.values()]


def _naive_kept(
    docs: list[str], threshold: float, keep: str, verify: bool, common: float | None = None
) -> list[bool]:
    """The decisions by the brute-force rules of tests/naive.py (``common``: on the sets
    without the common shingles)."""
    if not verify:
        fps = Fingerprinter().fingerprint_many(docs)
        order = priority_order(len(docs), keep, [len(d) for d in docs])
        return [k < 0 for k in naive.decide_fingerprints(fps, 6, order.tolist())]
    f = Fingerprinter().features_many(docs)
    sets = naive.csr_to_sets(f.offsets, f.keys)
    if common is not None:
        sets = naive.without_common(sets, common)
    fps = [naive.set_minhash(x) for x in sets]
    order = priority_order(len(docs), keep, [len(d) for d in docs])
    # the default candidates (prefix): every pair at the threshold
    kept_for, _ = naive.decide_verified(sets, fps, threshold, order, distance=64)
    return [k < 0 for k in kept_for]


def word_docs(words: list[str], max_words: int) -> st.SearchStrategy[list[str]]:
    """1-30 documents of up to ``max_words`` of ``words`` (empty ones and repeats likely)."""
    doc = st.lists(st.sampled_from(words), min_size=0, max_size=max_words).map(" ".join)
    return st.lists(doc, min_size=1, max_size=30)


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    word_docs(WORDS, 12),
    st.integers(1, 12),
    st.integers(1, 3),
    st.sampled_from([0.5, 0.8, 1.0]),
    st.sampled_from(["first", "longest"]),
    st.booleans(),
    st.sampled_from([None, 2, 5]),
    st.sampled_from([None, 0.3, 3]),
    st.lists(st.tuples(st.integers(0, 40), st.integers(0, 80), st.integers(0, 2)), max_size=16),
)
@example(["apple berry cherry", "fig grape", "date elder fig"], 2, 1, 0.8, "longest", True, None,
         None, [(0, 80, 1), (0, 0, 2), (1, 3, 2), (0, 2, 0), (1, 0, 0), (0, 5, 1)])  # fmt: skip
@pytest.mark.slow
def test_staged_matches_job_and_naive(docs, shard_docs, threads, threshold, keep, verify, bucket,
                                      common, copies):  # fmt: skip
    """``bucket``: fingerprints per search bucket (None: one search task; else the search is
    split into buckets of each table group, as for a large corpus); ``common``: the
    ``common_shingles`` of a verified run. ``copies``: families of documents with one shingle
    set, spread over the shards (``_copied``)."""
    docs = _copied(docs, copies) + docs[:3]  # exact copies too
    with tempfile.TemporaryDirectory() as tmp, _buckets(bucket):
        where = Path(tmp)
        _write(where / "in.jsonl", docs)
        src = [InputPath(where / "in.jsonl")]
        common = common if verify else None
        kw = dict(threshold=threshold, keep=keep, verify=verify, common_shingles=common)
        one, outs = _outputs(where, "one"), _outputs(where, "staged")
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", UserWarning)
            ref = dedup(src, **kw, **one)
            got = dedup(src, **kw, **outs, shard_docs=shard_docs, threads=threads)
        assert _read(outs) == _read(one)
        assert got.kept.tolist() == ref.kept.tolist()
        assert got.kept.tolist() == _naive_kept(docs, threshold, keep, verify, common)
        assert got.labels.tolist() == ref.labels.tolist()
        for k in ("dropped", "no_shingles", "common_shingles", "template_hint"):
            assert got.summary().get(k) == ref.summary().get(k)


@settings(max_examples=10, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.one_of(
        word_docs(WORDS, 12),
        st.integers(0, 1000).map(
            lambda seed: naive.text_families(40, seed, vocab=60, words=(8, 20))
        ),
    ),
    st.sampled_from([0.5, 0.8, 1.0]),
    st.sampled_from(["first", "longest"]),
    st.booleans(),
    st.sampled_from(["prefix", "bands", "fingerprint"]),
    st.sampled_from([None, 0.3]),
    st.lists(st.tuples(st.integers(0, 40), st.integers(0, 80), st.integers(0, 2)), max_size=8),
)
@pytest.mark.slow
def test_one_task_decides_a_small_run_as_the_stages_do(docs, threshold, keep, verify,
                                                        candidates, common, copies):  # fmt: skip
    """A staged run that fits in one process (no ``shard_docs``) decides every document in one
    task (``decide-all``): the bytes, labels and summary of the run through the candidate,
    component and decide stages, and the naive rule's decisions (on random words, or on
    families of near-copies)."""
    docs = _copied(docs, copies) + docs[:3]
    with tempfile.TemporaryDirectory() as tmp:
        where = Path(tmp)
        _write(where / "in.jsonl", docs)
        src = [InputPath(where / "in.jsonl")]
        common = common if verify else None
        kw = dict(threshold=threshold, keep=keep, verify=verify, common_shingles=common,
                  candidates=candidates if verify else None)  # fmt: skip
        whole, outs = _outputs(where, "whole"), _outputs(where, "staged")
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", UserWarning)
            ref = dedup(src, **kw, **outs, shard_docs=2, threads=2)
            got = dedup(src, **kw, **whole, work_dir=where / "w", threads=2)
        assert _read(whole) == _read(outs)
        assert got.labels.tolist() == ref.labels.tolist()
        assert "decide" in got.summary()["seconds"] and "exact" not in got.summary()["seconds"]
        if candidates == "prefix" or not verify:
            assert got.kept.tolist() == _naive_kept(docs, threshold, keep, verify, common)
        for k in ("dropped", "no_shingles", "common_shingles", "template_hint"):
            assert got.summary().get(k) == ref.summary().get(k)


def _copied(docs: list[str], copies: list[tuple[int, int, int]]) -> list[str]:
    """``docs`` with each ``(source, place, style)`` of ``copies`` inserted: a copy of document
    ``source`` (modulo their number) at ``place`` (modulo), before or after it, its shingle set
    the same and its length the same (style 0), or longer (1: in capitals with a space after;
    2: with spaces before and punctuation after), for ``keep="longest"``."""
    out = list(docs)
    for source, place, style in copies:
        text = docs[source % len(docs)]
        text = [text, text.upper() + " ", "  " + text + "!!"][style]
        out.insert(place % (len(out) + 1), text)
    return out


@contextlib.contextmanager
def _buckets(size: int | None):
    """Search buckets of ``size`` fingerprints (None: as configured)."""
    saved = staged.ONE_TASK_SEARCH, staged.SEARCH_PER_SHARD_DOC
    if size is not None:
        staged.ONE_TASK_SEARCH, staged.SEARCH_PER_SHARD_DOC = size, 0
    try:
        yield
    finally:
        staged.ONE_TASK_SEARCH, staged.SEARCH_PER_SHARD_DOC = saved


@pytest.mark.slow
@pytest.mark.parametrize("keep", ["first", "longest"])
@pytest.mark.parametrize("bucket", [None, 16])
def test_no_verify_chain_same_bytes_and_no_chaining(tmp_path, keep, bucket):
    """A chain of near-copies (one connected component whose ends are far apart) among
    families: the staged run writes the one-process run's bytes, both keep the naive rule's
    documents, and no document is dropped for one more than ``--distance`` bits away."""
    docs = naive.text_chain(60, seed=2) + naive.text_families(60, seed=4, vocab=60, words=(8, 20))
    docs = [docs[i] for i in np.random.default_rng(0).permutation(len(docs))]
    _write(tmp_path / "in.jsonl", docs)
    src = [InputPath(tmp_path / "in.jsonl")]
    one, outs = _outputs(tmp_path, "one"), _outputs(tmp_path, "staged")
    with _buckets(bucket):
        ref = dedup(src, verify=False, keep=keep, **one)
        got = dedup(src, verify=False, keep=keep, shard_docs=9, threads=2, **outs)
    assert _read(outs) == _read(one)
    want = _naive_kept(docs, 0.8, keep, verify=False)
    assert got.kept.tolist() == ref.kept.tolist() == want
    assert got.labels.tolist() == ref.labels.tolist()
    for r in (ref, got):
        d = r.decisions
        assert (d.distance <= 6).all() and d.kept[d.survivor].all()
    fps = Fingerprinter().fingerprint_many(docs)
    components = len(set(naive.find_clusters(fps, 6).tolist()))
    assert sum(want) > components  # the chain's far end is kept, not dropped through it


def test_shards_cut_a_file_after_line_ends(tmp_path):
    docs = [" ".join(WORDS[: 1 + i % 7]) for i in range(50)]
    _write(tmp_path / "in.jsonl", docs)
    plan = build_plan([InputPath(tmp_path / "in.jsonl")], shard_docs=7)
    data = (tmp_path / "in.jsonl").read_bytes()
    assert len(plan.shards) > 3
    assert plan.shards[0].start == 0 and plan.shards[-1].end == len(data)
    for a, b in zip(plan.shards, plan.shards[1:]):
        assert a.end == b.start and data[a.end - 1 : a.end] == b"\n"


def test_repeated_ids_across_shards(tmp_path):
    docs = [f"{w} one two three" for w in WORDS] * 2
    ids = [f"k{i}" for i in range(len(docs))]
    ids[10] = "k2"  # repeats an id of the first shard
    _write(tmp_path / "in.jsonl", docs, ids)
    src = [InputPath(tmp_path / "in.jsonl")]
    with pytest.raises(InputError, match=r"in.jsonl:11: duplicate id 'k2' \(first at .*:3\)"):
        dedup(src, shard_docs=3, output=tmp_path / "x.jsonl")
    assert not (tmp_path / "x.jsonl").exists()
    bad: list[str] = []
    one, outs = _outputs(tmp_path, "one"), _outputs(tmp_path, "staged")
    ref = dedup(src, skip_bad=True, **one)
    got = dedup(src, skip_bad=True, on_bad=lambda e: bad.append(str(e)), shard_docs=3, **outs)
    assert _read(outs) == _read(one)
    assert got.skipped == ref.skipped == 1 and "in.jsonl:11: duplicate id 'k2'" in bad[0]


def test_bad_record_is_named_and_nothing_written(tmp_path):
    lines = [json.dumps({"id": i, "text": f"{w} and more words"}) for i, w in enumerate(WORDS * 3)]
    lines[15] = '{"id": 99, "text": '
    (tmp_path / "in.jsonl").write_text("\n".join(lines) + "\n")
    out = tmp_path / "out.jsonl"
    with pytest.raises(InputError, match=r"in.jsonl:16: "):
        dedup([InputPath(tmp_path / "in.jsonl")], shard_docs=4, output=out)
    assert not out.exists()


def _bad_lines(path: Path, n: int, data: st.DataObject, most: int) -> None:
    """``n`` JSONL records, up to ``most`` of them repeating an earlier id and ``most`` cut
    short, written to ``path``."""
    lines = [json.dumps({"id": f"k{i}", "text": f"{WORDS[i % 7]} more words {i}"})
             for i in range(n)]  # fmt: skip
    for i in data.draw(st.lists(st.integers(1, n - 1), max_size=most)):
        lines[i] = json.dumps({"id": f"k{data.draw(st.integers(0, i - 1))}", "text": "again"})
    for i in data.draw(st.lists(st.integers(0, n - 1), max_size=most)):
        lines[i] = '{"id": 99, "text": '
    path.write_text("\n".join(lines) + "\n")


@pytest.mark.slow
@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(n=st.integers(2, 30), data=st.data(), shard_docs=st.integers(1, 6))
def test_the_input_s_first_error_is_raised(n, data, shard_docs):
    """Repeated ids and broken lines anywhere: the staged run raises the error the one-process
    run raises (the first in input order), though the ids are checked after every scan."""
    with tempfile.TemporaryDirectory() as tmp:
        _bad_lines(Path(tmp) / "in.jsonl", n, data, 3)
        errors = []
        for kw in ({}, {"shard_docs": shard_docs}):
            try:
                dedup([InputPath(Path(tmp) / "in.jsonl")], output=Path(tmp) / "o.jsonl", **kw)
                errors.append(None)
            except InputError as e:
                errors.append(str(e))
            assert not (Path(tmp) / "o.jsonl").exists() or errors[-1] is None
            (Path(tmp) / "o.jsonl").unlink(missing_ok=True)
        assert errors[1] == errors[0]


@pytest.mark.slow
@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(n=st.integers(2, 30), data=st.data(), shard_docs=st.integers(1, 6))
def test_skipped_records_in_input_order_from_the_tasks_files(n, data, shard_docs):
    """With --skip-bad the staged run skips what the one-process run skips, in the same order;
    the tasks keep the records in their files and hand the caller counts only."""
    with tempfile.TemporaryDirectory() as tmp:
        _bad_lines(Path(tmp) / "in.jsonl", n, data, 4)
        said: list[list[str]] = [[], []]
        outs = []
        for k, kw in enumerate(({}, {"shard_docs": shard_docs, "work_dir": Path(tmp) / "w"})):
            out = Path(tmp) / f"o{k}.jsonl"
            dedup([InputPath(Path(tmp) / "in.jsonl")], output=out, skip_bad=True,
                  on_bad=lambda e, k=k: said[k].append(str(e)), **kw)  # fmt: skip
            outs.append(out.read_bytes())
        assert said[1] == said[0] and outs[1] == outs[0]
        for done in (Path(tmp) / "w").glob("*/*/done.json"):  # counts and a first, no lists
            text = done.read_text()
            assert text.count("duplicate id") + text.count("in.jsonl:") <= 2, text


# ------------------------------------------------------------------------------------ Dask
@pytest.fixture(scope="module")
def client():
    distributed = pytest.importorskip("distributed")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        cluster = distributed.LocalCluster(
            n_workers=2, threads_per_worker=1, dashboard_address=None, processes=True
        )
    with cluster, distributed.Client(cluster) as c:
        yield c


@pytest.mark.parametrize("verify", [True, False])
@pytest.mark.slow
def test_dask_executor_same_bytes(client, tmp_path, verify):
    docs = naive.text_families(120, seed=3, vocab=60, words=(8, 20))
    _write(tmp_path / "in.jsonl", docs)
    src = [InputPath(tmp_path / "in.jsonl")]
    one, outs = _outputs(tmp_path, "one"), _outputs(tmp_path, "dask")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        ref = dedup(src, verify=verify, **one)
        with _buckets(16):
            got = dedup(src, verify=verify, client=client, shard_docs=25, **outs)
    assert _read(outs) == _read(one)
    assert got.kept.tolist() == ref.kept.tolist() and ref.n_dropped > 0
    with open(tmp_path / "in.jsonl", "a") as f:
        f.write('{"id": "bad", "text": \n')
    with pytest.raises(InputError, match=r"in.jsonl:121: "):  # from a worker, named
        dedup(src, verify=verify, client=client, shard_docs=25, output=tmp_path / "x.jsonl")
    assert not (tmp_path / "x.jsonl").exists()


@pytest.mark.slow
def test_dask_common_shingles_same_bytes(client, tmp_path):
    """--common-shingles on a Dask cluster: the common-count, common-merge and common stages
    and the exact stage on what is left run on the workers, and the outputs are the
    one-process run's, byte for byte."""
    template = "header of the site and its menu footer with the links and the licence"
    docs = naive.text_families(150, seed=7, vocab=60, words=(8, 20), wordless=0.0)
    docs = [f"{template} {d}" if i % 4 else d for i, d in enumerate(docs)]
    docs += docs[10:16]  # exact copies, in other shards
    _write(tmp_path / "in.jsonl", docs)
    src = [InputPath(tmp_path / "in.jsonl")]
    one, outs = _outputs(tmp_path, "one"), _outputs(tmp_path, "dask")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        ref = dedup(src, common_shingles=0.3, **one)
        got = dedup(src, common_shingles=0.3, client=client, shard_docs=25, **outs)
    assert _read(outs) == _read(one)
    assert got.kept.tolist() == ref.kept.tolist() and ref.n_dropped >= 6
    assert got.summary()["common_shingles"] == ref.summary()["common_shingles"]
    assert ref.summary()["common_shingles"]["keys"] > 0


@pytest.mark.slow
def test_dask_band_candidates_same_bytes(client, tmp_path):
    """--candidates bands on a Dask cluster: the band keys, their pairs and families and the
    decide tasks run on the workers, and the outputs are the one-process run's."""
    docs = naive.text_families(150, seed=11, vocab=60, words=(8, 20), wordless=0.0)
    _write(tmp_path / "in.jsonl", docs)
    src = [InputPath(tmp_path / "in.jsonl")]
    one, outs = _outputs(tmp_path, "one"), _outputs(tmp_path, "dask")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        ref = dedup(src, candidates="bands", **one)
        got = dedup(src, candidates="bands", client=client, shard_docs=25, **outs)
    assert _read(outs) == _read(one)
    assert got.kept.tolist() == ref.kept.tolist() and ref.n_dropped > 0
    assert got.summary()["bands"] == ref.summary()["bands"] == [30, 7]


@pytest.mark.slow
@pytest.mark.filterwarnings("ignore:.*no shingles:UserWarning")
def test_dask_against_and_update_same_bytes_and_index(client, tmp_path):
    from neardup.index import Index

    docs = naive.text_families(90, seed=5, vocab=60, words=(8, 20))
    _write(tmp_path / "old.jsonl", docs[:50], [f"o{i}" for i in range(50)])
    _write(tmp_path / "in.jsonl", docs[30:])
    sizes = {}
    for tag, extra in (("one", {}), ("dask", {"client": client, "shard_docs": 9})):
        ix = str(tmp_path / f"ix-{tag}")
        Index.create(ix, threshold=0.8, sketch_words=8).close()
        dedup([InputPath(tmp_path / "old.jsonl")], against=ix, update=True)
        got = dedup([InputPath(tmp_path / "in.jsonl")], against=ix, update=True,
                    **_outputs(tmp_path, tag), **extra)  # fmt: skip
        with Index.open(ix) as opened:
            sizes[tag] = (len(opened), opened.contains([f"d{i}" for i in range(60)]).tolist())
        assert got.against.n_found > 0
    assert _read(_outputs(tmp_path, "dask")) == _read(_outputs(tmp_path, "one"))
    assert sizes["dask"] == sizes["one"]


# ---------------------------------------------------------------------------- restarting
def _cli(*args: str, **kw) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src")}
    cmd = [*_MAIN, "dedup", *args]
    return subprocess.run(cmd, capture_output=True, text=True, env=env, **kw)


def _finished(work: Path) -> list[Path]:
    """The scan tasks finished (renamed into place) in ``work``."""
    found = (work / "scan").glob("*/done.json") if (work / "scan").exists() else []
    return [p for p in found if ".tmp-" not in p.parent.name]


@pytest.mark.slow
def test_killed_run_resumes_from_its_work_dir(tmp_path):
    docs = naive.text_families(4000, seed=5, vocab=200, words=(20, 40))
    _write(tmp_path / "in.jsonl", docs)
    src = str(tmp_path / "in.jsonl")
    work = tmp_path / "work"
    common = [src, "--shard-docs", "200", "--threads", "1", "-q"]
    r = _cli(*common, "-o", str(tmp_path / "one.jsonl"), "--clusters", str(tmp_path / "one.cl"))
    assert r.returncode == 0, r.stderr
    args = [*common, "--work-dir", str(work), "-o", str(tmp_path / "out.jsonl"),
            "--clusters", str(tmp_path / "out.cl")]  # fmt: skip
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src")}
    proc = subprocess.Popen([*_MAIN, "dedup", *args], env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)  # fmt: skip
    deadline = time.monotonic() + 120
    done = []
    while time.monotonic() < deadline and len(done) < 3 and proc.poll() is None:
        done = _finished(work)
        time.sleep(0.02)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    assert done, "no scan task finished before the kill"
    assert not (tmp_path / "out.jsonl").exists()
    stamps = {p: p.stat().st_mtime_ns for p in _finished(work)}
    r = _cli(*args)
    assert r.returncode == 0, r.stderr
    assert (tmp_path / "out.jsonl").read_bytes() == (tmp_path / "one.jsonl").read_bytes()
    assert (tmp_path / "out.cl").read_bytes() == (tmp_path / "one.cl").read_bytes()
    assert all(p.stat().st_mtime_ns == t for p, t in stamps.items())  # reused, not redone
    # another command, or changed inputs, against the same work dir: refused in one line
    (tmp_path / "out.jsonl").unlink()
    r = _cli(*args, "--threshold", "0.9")
    assert r.returncode == 2 and "holds the work of a different dedup command" in r.stderr
    assert len(r.stderr.strip().splitlines()) == 1 and not (tmp_path / "out.jsonl").exists()
    with open(src, "a") as f:
        f.write(json.dumps({"id": "new", "text": "a new document"}) + "\n")
    r = _cli(*args)
    assert r.returncode == 2 and "inputs that changed" in r.stderr


@pytest.mark.parametrize("kind", ["parquet", "text", "gz", "lines"])
def test_other_inputs_same_bytes(tmp_path, kind):
    docs = naive.text_families(60, seed=7, vocab=40, words=(6, 14), wordless=0)
    if kind in ("parquet", "text"):
        src, out = _parquet_and_text(tmp_path, kind)
    elif kind == "gz":
        import gzip

        with gzip.open(tmp_path / "in.jsonl.gz", "wt") as f:
            f.writelines(json.dumps({"id": i, "text": t}) + "\n" for i, t in enumerate(docs))
        src, out = [InputPath(tmp_path / "in.jsonl.gz")], "kept.jsonl.gz"
    else:
        (tmp_path / "in.txt").write_text("\n".join(docs) + "\n")
        src, out = [InputPath(tmp_path / "in.txt")], "kept.txt"
    fmt = "lines" if kind == "lines" else "auto"
    results = []
    for tag, extra in (("one", {}), ("staged", {"shard_docs": 7})):
        outs = {"output": tmp_path / tag / out, "clusters": tmp_path / f"{tag}.cl",
                "drop_list": tmp_path / f"{tag}.drop"}  # fmt: skip
        (tmp_path / tag).mkdir()
        r = dedup(src, fmt=fmt, **outs, **extra)
        results.append((r.kept.tolist(), [_tree(p) for p in outs.values()]))
    assert results[0] == results[1] and not all(results[0][0])


def _tree(path: Path) -> object:
    """A file's bytes (decompressed), or every file under a directory with its bytes."""
    if path.is_dir():
        return sorted((str(p.relative_to(path)), p.read_bytes()) for p in path.rglob("*")
                      if p.is_file())  # fmt: skip
    if path.suffix == ".gz":
        import gzip

        return gzip.decompress(path.read_bytes())
    return path.read_bytes()


@pytest.mark.slow
@settings(max_examples=8, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.integers(1, 6), st.lists(st.tuples(st.integers(0, 23), st.integers(0, 23)), max_size=4),
       st.booleans())  # fmt: skip
@example(2, [(0, 21), (0, 22)], False)  # two copies in one shard, the first in another
def test_repeated_ids_spread_over_hash_ranges(shard_docs, repeats, collide):
    """The ids check runs one task per hash range (several for several shards) and finds the
    one-process run's repeats; with every hash equal (``collide``), ids that differ are no
    repeats however their hashes agree."""
    docs = [f"{w} {i} one two three" for i, w in enumerate(WORDS * 4)][:24]
    ids = [f"k{i}" for i in range(len(docs))]
    for a, b in repeats:
        ids[max(a, b)] = ids[min(a, b)]
    with tempfile.TemporaryDirectory() as tmp, contextlib.ExitStack() as stack:
        if collide:  # every id hash the scan keeps is 0
            from neardup.pipeline.scan import SeenDocuments

            add = SeenDocuments.add

            def colliding(self, batch, bad):
                keep = add(self, batch, bad)
                if self.hash_parts:
                    self.hash_parts[-1] = np.zeros_like(self.hash_parts[-1])
                return keep

            stack.enter_context(pytest.MonkeyPatch.context()).setattr(
                SeenDocuments, "add", colliding
            )
        where = Path(tmp)
        _write(where / "in.jsonl", docs, ids)
        src = [InputPath(where / "in.jsonl")]
        bad_one: list[str] = []
        bad: list[str] = []
        one, outs = _outputs(where, "one"), _outputs(where, "staged")
        dedup(src, skip_bad=True, on_bad=lambda e: bad_one.append(str(e)), **one)
        dedup(src, skip_bad=True, on_bad=lambda e: bad.append(str(e)), shard_docs=shard_docs,
              json_summary=where / "s.json", **outs)  # fmt: skip
        assert bad == bad_one and _read(outs) == _read(one)
        stages_run = json.loads((where / "s.json").read_text())["stages"]
        shards = -(-len(docs) // shard_docs)
        assert stages_run["ids"]["tasks"] == staged.S.id_buckets(shards) > shards // 2
        reads = [v["caller_disk_reads"] for v in stages_run.values()]  # page cache misses
        assert all(isinstance(b, int) and b >= 0 for b in reads)
        assert all(v["caller_cpu_seconds"] >= 0 for v in stages_run.values())
        assert stages_run["scan"]["caller_cpu_seconds"] > 0  # the threads' work is counted
        if bad_one:  # without --skip-bad, a repeat is the error and nothing is written
            with pytest.raises(InputError) as e:
                dedup(src, shard_docs=shard_docs, output=where / "x.jsonl")
            # the scans raise their own first repeat before the ids check runs
            assert str(e.value) in bad_one and not (where / "x.jsonl").exists()


def _parquet_and_text(tmp_path: Path, kind: str) -> tuple[list, str]:
    docs = naive.text_families(60, seed=11, vocab=40, words=(6, 14), wordless=0)
    if kind == "parquet":
        pq = pytest.importorskip("pyarrow.parquet")
        import pyarrow as pa

        for k in range(3):
            part = docs[k * 20 : (k + 1) * 20]
            ids = [f"p{k}-{i}" for i in range(len(part))]
            pq.write_table(pa.table({"id": ids, "text": part}), tmp_path / f"in{k}.parquet")
        return [InputPath(tmp_path / f"in{k}.parquet") for k in range(3)], "kept.parquet"
    (tmp_path / "dir" / "sub").mkdir(parents=True)
    for i, t in enumerate(docs):
        (tmp_path / "dir" / ("sub" if i % 3 else "") / f"{i:03d}.txt").write_text(t)
    return [InputPath(tmp_path / "dir")], "kept"


@pytest.mark.parametrize("kind", ["parquet", "text"])
def test_parquet_and_text_outputs_written_by_the_shards(tmp_path, kind, monkeypatch):
    """The shards write their kept rows (files); the caller joins the parts a row group at a
    time, or moves the files: it never loads every document's arrays for the output."""
    src, out = _parquet_and_text(tmp_path, kind)
    ref = dedup(src, output=tmp_path / f"one-{out}")

    def refuse(*a, **k):
        raise AssertionError("the caller loaded every document's arrays")

    monkeypatch.setattr(staged_result, "_scan_arrays", refuse)
    got = dedup(src, output=tmp_path / out, shard_docs=7, collect=False,
                work_dir=tmp_path / "work")  # fmt: skip
    assert got.summary()["dropped"] == int((~ref.kept).sum()) > 0
    assert _tree(tmp_path / out) == _tree(tmp_path / f"one-{out}")
    if kind == "text":  # the work directory keeps its parts for a later run
        assert list((tmp_path / "work" / "write").glob("*/files/**/*.txt"))


@pytest.mark.slow
@pytest.mark.parametrize("kind", ["parquet", "text"])
def test_dask_parquet_and_text_same_bytes(client, tmp_path, kind):
    src, out = _parquet_and_text(tmp_path, kind)
    dedup(src, output=tmp_path / f"one-{out}")
    dedup(src, output=tmp_path / out, shard_docs=7, client=client, collect=False)
    assert _tree(tmp_path / out) == _tree(tmp_path / f"one-{out}")


@pytest.mark.slow
def test_staged_says_how_many_documents_have_no_shingles(tmp_path):
    """The staged run prints the one-process run's line about documents without shingles,
    counted without the records skipped for repeated ids."""
    docs = [" ".join(WORDS[i % 5 : i % 5 + 3]) + f" w{i}" if i % 3 else "!!" for i in range(120)]
    ids = [f"d{i}" for i in range(120)]
    _write(tmp_path / "in.jsonl", [*docs, "", "?"], [*ids, "d0", "d3"])  # two repeated ids
    line = "warning: 40 of 120 documents (33.3%) have no shingles (empty or no words)"
    for extra in ([], ["--shard-docs", "7"]):
        r = _cli(str(tmp_path / "in.jsonl"), "-o", str(tmp_path / "out.jsonl"), "--skip-bad",
                 "--json-summary", str(tmp_path / "s.json"), *extra)  # fmt: skip
        assert r.returncode == 0, r.stderr
        assert r.stderr.count(line) == 1, (extra, r.stderr)
        summary = json.loads((tmp_path / "s.json").read_text())
        assert summary["no_shingles"] == 40 and summary["skipped"] == 2


def _rows(work: Path, stage: str) -> int:
    """Pairs (rows of ``pairs.npy``) that the tasks of ``stage`` wrote in ``work``."""
    return sum(len(np.load(p, mmap_mode="r")) for p in (work / stage).glob("*/pairs.npy"))


@pytest.mark.parametrize("keep", ["first", "longest"])
def test_identical_documents_write_pairs_linear_in_their_number(tmp_path, keep):
    """Copies of one shingle set over many shards are searched once: the pairs and verify
    stages write no pair between copies, the exact stage one link per copy after the first (in
    keep order), and the outputs are the one-process run's, byte for byte."""
    n, text = 3000, "the quick brown fox jumps over the lazy dog near the river bank"
    other = "lorem ipsum dolor sit amet consectetur adipiscing elit sed do"
    variants = [other, other.upper() + " ", "  " + other + "!!"]  # one set, three lengths
    docs = [text if i % 3 else variants[i % 9 // 3] for i in range(n)]
    docs[::500] = [f"w{i} w{i + 1} w{i + 2} w{i + 3}" for i in range(0, n, 500)]  # singletons
    _write(tmp_path / "in.jsonl", docs)
    src = [InputPath(tmp_path / "in.jsonl")]
    one, outs = _outputs(tmp_path, "one"), _outputs(tmp_path, "staged")
    work = tmp_path / "work"
    ref = dedup(src, keep=keep, **one)
    got = dedup(src, keep=keep, **outs, shard_docs=250, work_dir=work, threads=2)
    assert _read(outs) == _read(one)
    assert got.kept.tolist() == ref.kept.tolist() and int(ref.kept.sum()) == 8
    assert _rows(work, "exact") == n - 8  # every copy but each family's first
    assert _rows(work, "pairs") <= 8 and _rows(work, "verify") <= 8
    # the second family keeps its first (place 3), or its first longest (place 6)
    assert np.flatnonzero(got.kept)[:3].tolist() == [0, 1, 6 if keep == "longest" else 3]


@pytest.mark.parametrize("keep", ["first", "longest"])
def test_identical_documents_with_common_shingles_write_pairs_linear(tmp_path, keep):
    """With common shingles left out, copies of one set (of what is left: a template in every
    page is common) are found by the exact stage on the sets without them: no pair between
    copies is searched or verified, and the outputs are the one-process run's, byte for
    byte."""
    n, families = 3000, 30
    template = " ".join(f"t{i}" for i in range(40))
    docs = []
    for i in range(n):
        text = f"{template} " + " ".join(f"f{i % families}x{j}" for j in range(12))
        docs.append([text, text.upper() + " ", "  " + text + "!!"][i // families % 3])
    docs[5::500] = [f"{template} w{i} w{i + 1} w{i + 2} w{i + 3}" for i in range(5, n, 500)]
    _write(tmp_path / "in.jsonl", docs)
    src = [InputPath(tmp_path / "in.jsonl")]
    one, outs = _outputs(tmp_path, "one"), _outputs(tmp_path, "staged")
    work = tmp_path / "work"
    kw = dict(keep=keep, common_shingles=0.5)
    ref = dedup(src, **kw, **one)
    got = dedup(src, **kw, **outs, shard_docs=250, work_dir=work, threads=2)
    assert _read(outs) == _read(one)
    assert got.kept.tolist() == ref.kept.tolist() and int(ref.kept.sum()) == families + 6
    assert got.summary()["common_shingles"] == ref.summary()["common_shingles"]
    assert ref.summary()["common_shingles"]["keys"] > 0  # the template's shingles
    assert _rows(work, "exact") == n - families - 6  # every copy but each family's first
    assert _rows(work, "pairs") <= families + 6 and _rows(work, "verify") <= families + 6


def _few_descriptors() -> None:
    import resource

    resource.setrlimit(resource.RLIMIT_NOFILE, (256, 256))


@pytest.mark.slow
def test_a_near_copy_family_of_many_tasks_runs_with_few_descriptors(tmp_path):
    """80 near-copies make all their 3,160 pairs candidates: with 10 pairs a task, 316 verify
    and components tasks, whose files the components tasks read one at a time (on either
    candidate generator: the stages after the candidates are shared). With 256 file
    descriptors the staged run ends with the one-process run's bytes (it stopped on "too many
    open files" when every task's file stayed mapped until all were read). Fingerprint
    candidates: prefix candidates make these copies one family, not pairs."""
    candidates = "fingerprint"
    base = " ".join(f"w{k}" for k in range(60))
    src = tmp_path / "in.jsonl"
    src.write_text("".join(json.dumps({"id": i, "text": f"{base} own{i}"}) + "\n"
                           for i in range(80)))  # fmt: skip
    plain = tmp_path / "plain.jsonl"
    dedup(str(src), output=str(plain), candidates=candidates)
    out = tmp_path / "staged.jsonl"
    cmd = [sys.executable, "-m", "neardup", "dedup", str(src), "-o", str(out), "--shard-docs",
           "10", "--work-dir", str(tmp_path / "w"), "--candidates", candidates, "-q",
           "--json-summary", str(tmp_path / "s.json")]  # fmt: skip
    r = subprocess.run(cmd, capture_output=True, text=True, preexec_fn=_few_descriptors,
                       timeout=600, check=False)  # fmt: skip
    assert r.returncode == 0, r.stderr
    assert out.read_bytes() == plain.read_bytes() and len(plain.read_text().splitlines()) == 1
    stages = json.loads((tmp_path / "s.json").read_text())["stages"]
    assert stages["cc-edges"]["tasks"] > 256  # more files than descriptors


def test_running_out_of_descriptors_is_not_called_damage():
    import errno

    from neardup.errors import reading_back

    with pytest.raises(InputError, match="nothing is damaged.*ulimit -n") as e:
        with reading_back("w/cc-edges/1/c.npy"):
            raise OSError(errno.EMFILE, "Too many open files")
    assert "damaged;" not in str(e.value)
    with pytest.raises(InputError, match="the work directory is damaged"):
        with reading_back("w/cc-edges/1/c.npy"):
            raise OSError(errno.EIO, "Input/output error")


def test_each_file_cut_into_ranges_numbers_its_own_lines(tmp_path):
    """Two JSONL files, each cut into byte ranges: a record's line is its line in its own
    file (a bad line of the second file was named as if the first file's lines came before
    it), in errors, skipped records, duplicate ids, ids made of lines and the result's
    record numbers."""
    paths = []
    for name in ("a.jsonl", "b.jsonl"):
        lines = [json.dumps({"id": f"{name}-{i}", "text": f"doc {i} " + "word " * 40})
                 for i in range(900)]  # fmt: skip
        if name == "b.jsonl":
            lines[500] = "{broken"
            lines[700] = json.dumps({"id": "b.jsonl-3", "text": "a repeated id"})
        (tmp_path / name).write_text("\n".join(lines) + "\n")
        paths.append(tmp_path / name)
    src = [InputPath(p) for p in paths]
    b = str(tmp_path / "b.jsonl")
    with pytest.raises(InputError, match=rf"^{b}:501: not valid JSON"):
        dedup(src, shard_docs=200)
    for shard_docs in (200, 10_000):  # cut into ranges, or a file a shard
        bad: list = []
        r = dedup(src, shard_docs=shard_docs, skip_bad=True, on_bad=bad.append)
        assert [(e.source, e.line) for e in bad] == [(b, 501), (b, 701)], bad
        assert f"(first at {b}:4)" in str(bad[1])
        assert r.scan.record.tolist() == [*range(1, 901), *range(1, 501), *range(502, 701),
                                          *range(702, 901)]  # fmt: skip
        assert r.scan.source.tolist() == [0] * 900 + [1] * 898
        ids = dedup(src, shard_docs=shard_docs, skip_bad=True, id_field=None).ids
        assert ids[900] == f"{b}:1" and ids[-1] == f"{b}:900"


@pytest.mark.parametrize("candidates", ["prefix", "bands", "fingerprint"])
def test_only_the_fingerprint_search_spills_set_fingerprints(tmp_path, candidates):
    """The scan spills each document's set fingerprint only for the fingerprint search (the
    prefix and band candidates never read them), with the same kept documents either way."""
    sample = os.path.join(os.path.dirname(__file__), "..", "data", "sample", "corpus.jsonl")
    work = tmp_path / "work"
    got = dedup(sample, candidates=candidates, shard_docs=400, work_dir=work)
    scans = sorted((work / "scan").iterdir())
    assert len(scans) >= 3 and all((s / "koff.npy").exists() for s in scans)
    assert {(s / "sfp.npy").exists() for s in scans} == {candidates == "fingerprint"}
    assert got.n_dropped == 174 and (got.decisions.distance[got.dropped] >= 0).all()

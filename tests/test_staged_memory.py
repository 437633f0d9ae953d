"""The staged dedup's calling process holds no per-document state: on Dask (the tasks in worker
processes) what the caller allocates for a run does not grow with the corpus; and the outputs
it writes from the shards' parts are those of the one-process run."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import naive
import pytest

from neardup import dedup
from neardup.io.sources import InputPath

ROOT = Path(__file__).resolve().parents[1]

#: In a fresh process: a LocalCluster of 2 workers; one warm-up run, then a run on each corpus
#: with the search cut into buckets of 200 fingerprints; for each, the caller's Python
#: allocations (tracemalloc) during the run (peak) and left after it, above those before it.
_MEASURE = """
import json, sys, tracemalloc, warnings
tracemalloc.start()
import distributed
from neardup import dedup
from neardup.io.sources import InputPath
from neardup.pipeline import staged

staged.ONE_TASK_SEARCH, staged.SEARCH_PER_SHARD_DOC = 200, 0
paths, kind, out = sys.argv[1:-2], sys.argv[-2], sys.argv[-1]
with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    cluster = distributed.LocalCluster(n_workers=2, threads_per_worker=1,
                                       dashboard_address=None, processes=True)
found = []
with cluster, distributed.Client(cluster) as client:
    for k, path in enumerate([paths[0], *paths]):
        skipped = []
        before = tracemalloc.get_traced_memory()[0]
        tracemalloc.reset_peak()
        summary = dedup([InputPath(path)], client=client, shard_docs=20, skip_bad=True,
                        on_bad=lambda e: skipped.append(1), output=f"{out}/kept-{k}.{kind}",
                        collect=False).summary()
        now, peak = tracemalloc.get_traced_memory()
        found.append([peak - before, now - before, summary["documents"], len(skipped),
                      summary["stages"]["pairs"]["tasks"]])
print(json.dumps(found[1:]))
"""


def _jsonl_with_bad(path: Path, docs: list[str]) -> Path:
    """After every second document, a bad record (skipped)."""
    with open(path, "w") as f:
        for i, t in enumerate(docs):
            f.write(json.dumps({"id": f"d{i}", "text": t}) + "\n")
            if i % 2 == 1:
                f.write(f'{{"id": "bad{i}", "text": ' + "x" * 200 + "\n")
    return path


@pytest.mark.slow
def test_dask_caller_allocations_flat_in_documents(tmp_path):
    """400 documents, then 1,600 (shards of 20, half as many bad records skipped): what the
    caller allocates grows by less than 12 MB, Dask's own record of each task (its logs of
    bounded length; the tasks are 4x as many, and the growth measured 9.4 to 10.2 MB from run
    to run). Before, each task's arguments carried the plan (its shards: 80 here) and the
    shard offsets, and the scheduler and its message logs, in the caller with a LocalCluster,
    kept a copy of each task's: 28 MB; and the caller held the bad records of every shard at
    once."""
    pytest.importorskip("distributed")
    paths = []
    for n in (400, 1600):
        docs = naive.text_families(n, seed=n, vocab=300, words=(20, 30))
        paths.append(_jsonl_with_bad(tmp_path / f"in{n}.jsonl", docs))
    (tmp_path / "out").mkdir()
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src")}
    cmd = [sys.executable, "-c", _MEASURE, *map(str, paths), "jsonl", str(tmp_path / "out")]
    r = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=300)
    assert r.returncode == 0, r.stderr[-3000:]
    (small, big) = json.loads(r.stdout.strip().splitlines()[-1])
    assert small[2:4] == [400, 200] and big[2:4] == [1600, 800]
    assert big[4] > small[4] > 1  # the search in buckets
    grew = {"peak": big[0] - small[0], "retained": big[1] - small[1]}
    assert max(grew.values()) < 12e6, (grew, small, big)


@pytest.mark.filterwarnings("ignore:.*no shingles:UserWarning")
def test_skipped_bad_records_same_as_one_process(tmp_path):
    """The bad records that the scan tasks skip (written to their spills, read back shard by
    shard) reach ``on_bad`` in input order, as in the one-process run."""
    docs = naive.text_families(60, seed=2, vocab=40, words=(6, 14))
    src = [InputPath(_jsonl_with_bad(tmp_path / "in.jsonl", docs))]
    got = {}
    for tag, extra in (("one", {}), ("staged", {"shard_docs": 7, "threads": 2})):
        bad: list[str] = []
        r = dedup(src, skip_bad=True, on_bad=lambda e, bad=bad: bad.append(str(e)),
                  output=tmp_path / f"{tag}.jsonl", **extra)  # fmt: skip
        got[tag] = (r.skipped, bad, (tmp_path / f"{tag}.jsonl").read_bytes())
    assert got["staged"] == got["one"] and got["one"][0] == 30
    assert [b.split(":")[1] for b in got["one"][1]][:2] == ["3", "6"]

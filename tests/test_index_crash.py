"""Crash safety: a writer killed with SIGKILL at random points reopens in a committed state."""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import time

import naive
import numpy as np
import pytest

from neardup.index import Index

WRITER = r"""
import sys
import numpy as np
from neardup.index import Index

path, start = sys.argv[1], int(sys.argv[2])
ix = Index.open(path, "w")
from neardup.core.sketch import Sketches
ix.max_segments = 4
step = start
print("ready", flush=True)
while True:
    kind, fps, ids = plan(step)
    if kind == "add" and ix.sketch_words:
        ix.add(None, ids=ids, sketches=Sketches(sketch_words(fps), np.full(len(fps), 100, np.uint32)))
    elif kind == "add":
        ix.add(fps, ids=ids)
    elif kind == "remove":
        ix.remove(ids, missing="ignore")
    else:
        ix.compact()
    print(f"committed {step}", flush=True)
    step += 1
"""

PLAN = r"""
def sketch_words(fps):
    # made-up sketches that the model can recompute: word k is the fingerprint XOR a constant
    return np.stack([fps] + [fps ^ np.uint64(0x9E3779B97F4A7C15 * k % 2**64) for k in (1, 2, 3)],
                    axis=1)


def plan(step):
    rng = np.random.default_rng(step)
    if step % 7 == 6:
        return "compact", None, None
    if step % 3 == 2:
        return "remove", None, [int(i) for i in rng.integers(0, 3000 * step, 800)]
    n = 3000
    ids = np.arange(3000 * step, 3000 * step + n, dtype=np.int64)
    fps = rng.integers(0, 2**64, n, dtype=np.uint64, endpoint=False)
    fps[n // 2 :] = fps[: n // 2] ^ np.uint64(1 << int(rng.integers(0, 64)))
    return "add", fps, ids
"""

import_np = "import numpy as np\n"
exec(import_np + PLAN)  # defines plan() here too, so the model replays the same steps


def model_after(step: int) -> dict[int, int]:
    """Contents {id: fingerprint} after steps 0..step-1."""
    model: dict[int, int] = {}
    for s in range(step):
        kind, fps, ids = plan(s)  # noqa: F821 - defined by exec above
        if kind == "add":
            model.update(zip(ids.tolist(), fps.tolist(), strict=True))
        elif kind == "remove":
            for i in ids:
                model.pop(i, None)
    return model


def same(ix: Index, model: dict[int, int], queries: np.ndarray) -> bool:
    if len(ix) != len(model):
        return False
    for seg in ix._segs if ix.sketch_words else []:  # every row's sketch is its fingerprint's
        if not np.array_equal(seg.sketch, sketch_words(np.asarray(seg.fps))):  # noqa: F821
            return False
    got = ix.query_arrays(queries, distance=1)
    ids = np.array(sorted(model), dtype=np.int64)
    corpus = np.array([model[i] for i in ids.tolist()], dtype=np.uint64)
    qi, ci, di = naive.query(corpus, queries, 1)
    return (
        np.array_equal(got.query_index, qi)
        and np.array_equal(got.id, ids[ci])
        and np.array_equal(got.distance, di)
    )


@pytest.mark.parametrize("sketches", [False, True], ids=["plain", "sketches"])
def test_sigkill_at_random_points_reopens_committed_state(tmp_path, sketches):
    path = tmp_path / "ix"
    Index.create(
        path, distance=3, blocks=5, threshold=0.8 if sketches else None,
        sketch_words=4 if sketches else None,
    ).close()  # fmt: skip
    rnd = random.Random(1234)
    step = 0
    script = "import numpy as np\n" + PLAN + WRITER
    for _round in range(6):
        proc = subprocess.Popen(
            [sys.executable, "-c", script, str(path), str(step)],
            stdout=subprocess.PIPE,
            text=True,
        )
        assert proc.stdout is not None
        assert proc.stdout.readline().strip() == "ready"
        time.sleep(rnd.uniform(0.02, 0.5))
        os.kill(proc.pid, signal.SIGKILL)
        out, _ = proc.communicate()
        done = [int(line.split()[1]) for line in out.splitlines() if line.startswith("committed")]
        last = done[-1] + 1 if done else step  # steps 0..last-1 were reported committed
        with Index.open(path) as ix:
            ix.verify()
            rng = np.random.default_rng(last)
            sample = list(model_after(last + 1).values())
            queries = np.array(
                rng.choice(sample, min(200, len(sample))) if sample else [], dtype=np.uint64
            )
            if same(ix, model_after(last), queries):
                step = last
            else:
                assert same(ix, model_after(last + 1), queries), f"round {_round}: lost state"
                step = last + 1  # the commit landed, the kill came before the print
    assert step > 3  # the writer made progress across rounds
    with Index.open(path, "w") as ix:  # the killed writer's lock is gone
        ix.compact()
        assert len(ix) == len(model_after(step))

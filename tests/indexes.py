"""What the index tests share: the check of an index's answers against brute force, the
hypothesis sequences of adds, removes, compactions and reopens with the model they update, and
the writer killed with SIGKILL at random points of the crash tests."""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import time

import naive
import numpy as np
from hypothesis import strategies as st
from strategies import fingerprints

from neardup.index import Index

#: (distance, blocks) of the indexes the sequences build: distance 0, blocks = distance + 1,
#: several blocks per distance, blocks = 64
LAYOUTS = st.sampled_from([(0, 1), (1, 2), (2, 3), (3, 4), (3, 5), (3, 6), (4, 9), (2, 64)])


def check(ix, model: dict, queries: np.ndarray, k: int) -> None:
    """``query_arrays`` and ``dedup_mask`` of ``ix`` (local or Redis) at distance ``k``, and its
    size, against brute force over ``model`` {id: fingerprint}."""
    got = ix.query_arrays(queries, distance=k)
    qi, ids, di = naive.index_query(model, queries, k)
    np.testing.assert_array_equal(got.query_index, qi)
    np.testing.assert_array_equal(got.id, ids)
    np.testing.assert_array_equal(got.distance, di)
    np.testing.assert_array_equal(ix.dedup_mask(queries, k), np.isin(np.arange(len(queries)), qi))
    assert len(ix) == len(model)


def index_ops(*, compact: str | None = "plain", max_id: int = 200, max_size: int = 10):
    """Sequences of ``("add", fingerprints)``, ``("remove", ids)``, ``("compact",)`` (with
    ``compact="codec"``: ``("compact", compress)``, compress None, True or False; none with
    ``compact=None``) and ``("reopen",)``."""
    steps = [
        st.tuples(st.just("add"), fingerprints(max_size=40)),
        st.tuples(st.just("remove"), st.lists(st.integers(0, max_id), max_size=15)),
    ]
    if compact == "plain":
        steps.append(st.tuples(st.just("compact")))
    elif compact == "codec":
        steps.append(st.tuples(st.just("compact"), st.sampled_from([None, True, False])))
    steps.append(st.tuples(st.just("reopen")))
    return st.lists(st.one_of(*steps), max_size=max_size)


class Model:
    """What an index holds after the same adds (automatic ids) and removes: ``fps`` {id:
    fingerprint}, ``next_id`` the next automatic id."""

    def __init__(self) -> None:
        self.fps: dict[int, int] = {}
        self.next_id = 0

    def add(self, fps: np.ndarray) -> None:
        for v in fps.tolist():
            self.fps[self.next_id] = v
            self.next_id += 1

    def remove(self, ids: list[int]) -> int:
        """Remove the ids present; returns how many were."""
        gone = {i for i in ids if i in self.fps}
        for i in gone:
            del self.fps[i]
        return len(gone)


def apply(ix: Index, op: tuple, model: Model) -> Index:
    """Apply one step of :func:`index_ops` to the local index ``ix`` and to ``model``; returns the
    index (another object after a reopen, for writing, with the same ``max_segments``)."""
    if op[0] == "add":
        ix.add(op[1])
        model.add(op[1])
    elif op[0] == "remove":
        assert ix.remove(op[1], missing="ignore") == model.remove(op[1])
    elif op[0] == "compact":
        ix.compact(*op[1:])
        assert len(ix.info()["segments"]) <= 1
    else:
        max_segments = ix.max_segments
        ix.close()
        ix = Index.open(ix.path, "w")
        ix.max_segments = max_segments
    return ix


# The crash tests: a child process runs ``plan(step)`` for step = start, start + 1, ... on the
# index at ``path`` and prints "committed STEP" after each commit; the test replays the plan.

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

WRITER = r"""
import sys
import numpy as np
from neardup.index import Index

path, start, alternate = sys.argv[1], int(sys.argv[2]), sys.argv[3] == "alternate"
ix = Index.open(path, "w")
from neardup.core.sketch import Sketches
ix.max_segments = 4
if sys.argv[4] == "background":  # merges by a thread, as often as they come
    ix.background_merges, ix.merge_factor = True, 2
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
    elif alternate:
        ix.compact(compress=step % 2 == 0)
    else:
        ix.compact()
    print(f"committed {step}", flush=True)
    step += 1
"""

exec("import numpy as np\n" + PLAN)  # defines plan() here too, so the model replays the same steps


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
    """Whether ``ix`` holds exactly ``model`` (its sketches too): its size and its matches of
    ``queries`` within 1 bit."""
    if len(ix) != len(model):
        return False
    for seg in ix._segs if ix.sketch_words else []:  # every row's sketch is its fingerprint's
        if not np.array_equal(seg.sketch, sketch_words(np.asarray(seg.fps))):  # noqa: F821
            return False
    got = ix.query_arrays(queries, distance=1)
    qi, ids, di = naive.index_query(model, queries, 1)
    return (
        np.array_equal(got.query_index, qi)
        and np.array_equal(got.id, ids)
        and np.array_equal(got.distance, di)
    )


def kill_writers(
    path,
    seed: int,
    *,
    rounds: int = 5,
    alternate: bool = False,
    low: float = 0.05,
    background: bool = False,
) -> int:
    """Run the writer on the index at ``path`` and kill it with SIGKILL after a random wait, round
    after round, checking after each kill that the index reopens holding the steps reported
    committed (or one more: the kill came between a commit and its report). At least ``rounds``
    rounds; on a loaded machine a writer may commit little before each kill, so it goes on (waiting
    longer each time, at most 30 rounds) until more than 3 steps have committed. ``alternate``:
    compactions alternate between compressed and plain tables; ``background``: the writer
    merges in a background thread (``Index.background_merges``, two runs a tier), so kills land
    inside merges too. Returns the steps committed."""
    rnd = random.Random(seed)
    step = 0
    script = "import numpy as np\n" + PLAN + WRITER
    mode = "alternate" if alternate else "keep"
    for _round in range(30):
        if _round >= rounds and step > 3:
            break
        proc = subprocess.Popen(
            [
                sys.executable,
                "-c",
                script,
                str(path),
                str(step),
                mode,
                "background" if background else "inline",
            ],  # fmt: skip
            stdout=subprocess.PIPE,
            text=True,
        )
        assert proc.stdout is not None
        assert proc.stdout.readline().strip() == "ready"
        time.sleep(rnd.uniform(low, 0.5) * (1 + _round // 5))
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
    return step

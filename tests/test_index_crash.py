"""Crash safety: a writer killed with SIGKILL at random points reopens in a committed state."""

from __future__ import annotations

import pytest
from indexes import kill_writers, model_after

from neardup.index import Index


@pytest.mark.parametrize("sketches", [False, True], ids=["plain", "sketches"])
@pytest.mark.slow
def test_sigkill_at_random_points_reopens_committed_state(tmp_path, sketches):
    path = tmp_path / "ix"
    Index.create(
        path, distance=3, blocks=5, threshold=0.8 if sketches else None,
        sketch_words=4 if sketches else None,
    ).close()  # fmt: skip
    step = kill_writers(path, 1234, rounds=6, low=0.02)
    assert step > 3  # the writer made progress across rounds
    with Index.open(path, "w") as ix:  # the killed writer's lock is gone
        ix.compact()
        assert len(ix) == len(model_after(step))

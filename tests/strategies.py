"""Hypothesis strategies for fingerprint sets with near-duplicates and edge values."""

from __future__ import annotations

import numpy as np
from hypothesis import strategies as st

EDGE = [0, 2**64 - 1, 1, 2**63, 2**64 - 2]


@st.composite
def fingerprints(draw, max_size: int = 120) -> np.ndarray:
    """Random values, clusters of 1-3 bit flips around a few bases, exact repeats, 0 and 2**64-1."""
    n_base = draw(st.integers(0, 6))
    bases = draw(st.lists(st.integers(0, 2**64 - 1), min_size=n_base, max_size=n_base))
    bases += draw(st.lists(st.sampled_from(EDGE), max_size=2))
    out: list[int] = []
    size = draw(st.integers(0, max_size))
    for _ in range(size):
        kind = draw(st.integers(0, 3)) if bases else 0
        if kind == 0:
            out.append(draw(st.integers(0, 2**64 - 1)))
        else:
            v = draw(st.sampled_from(bases))
            for bit in draw(st.lists(st.integers(0, 63), max_size=3)):
                v ^= 1 << bit
            out.append(v)
    return np.array(out, dtype=np.uint64)


@st.composite
def layouts(draw) -> tuple[int, int | None]:
    """(distance, blocks): small distances, blocks from distance+1 up to 64 or automatic."""
    distance = draw(st.integers(0, 5))
    choice = draw(st.sampled_from(["auto", "tight", "any", "max"]))
    if choice == "auto":
        return distance, None
    if choice == "tight":
        return distance, distance + 1
    if choice == "max" and distance <= 2:
        return distance, 64
    return distance, draw(st.integers(distance + 1, min(64, distance + 9)))

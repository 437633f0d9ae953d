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


#: kinds of the sets :func:`key_sets` draws, each as likely as the others: no keys, one key,
#: unrelated keys, 300 keys spread over the whole range, a base as it is, a base with a few keys
#: added or removed
EMPTY, SINGLE, UNRELATED, BIG, COPY, EDITED = range(6)


@st.composite
def key_sets(
    draw,
    max_docs: int = 30,
    *,
    universe: int = 80,
    max_keys: int = 40,
    max_bases: int = 3,
    max_edits: int = 4,
    kinds: tuple[int, ...] = (EMPTY, SINGLE, UNRELATED, BIG, EDITED, EDITED, EDITED),
) -> list[set]:
    """Shingle key sets in families around 1 to ``max_bases`` bases, over keys ``0..universe``
    (many overlaps) plus 0 and 2**32 - 1, of at most ``max_keys`` keys but the ``BIG`` ones
    (more than a sketch has buckets)."""
    keys = st.one_of(st.integers(0, universe), st.sampled_from([0, 2**32 - 1]))
    bases = draw(
        st.lists(st.sets(keys, min_size=1, max_size=max_keys), min_size=1, max_size=max_bases)
    )
    out: list[set] = []
    for _ in range(draw(st.integers(0, max_docs))):
        kind = kinds[draw(st.integers(0, len(kinds) - 1))]
        if kind == EMPTY:
            out.append(set())
        elif kind == SINGLE:
            out.append({draw(keys)})
        elif kind == UNRELATED:
            out.append(draw(st.sets(keys, max_size=max_keys)))
        elif kind == BIG:
            seed = draw(st.integers(0, 2**16))
            big = np.random.default_rng(seed).choice(2**32, 300, replace=False)
            out.append(set(big.tolist()))
        else:
            s = set(draw(st.sampled_from(bases)))
            if kind == EDITED:
                for k in draw(st.lists(keys, max_size=max_edits)):
                    s.discard(k) if draw(st.booleans()) else s.add(k)
            out.append(s)
    return out

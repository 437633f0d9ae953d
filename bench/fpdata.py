"""Benchmark fingerprints for the search benchmarks, cached as ``.npy`` under ``bench/out/``.

``uniform``   90% uniformly random, 10% planted clusters of 2-4 members (a random centre plus
              members that differ from it in 1-3 bits)
``families``  90% uniformly random, 10% in families of 1,000-100,000 members (sizes log-uniform)
              the way text near-duplicates come: half of a family's members equal its centre,
              the others differ from it in 1-3 of the family's 12 unstable ("hot") bits, so a
              family holds at most 299 distinct values and many identical ones
"""

from __future__ import annotations

import os

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
OUT = os.path.join(HERE, "out")
INPUTS = ("uniform", "families")


def uniform(n: int, seed: int) -> np.ndarray:
    """``n`` fingerprints: 90% random, 10% planted clusters of 2-4 (1-3 bit flips of a centre)."""
    rng = np.random.default_rng(seed)
    fp = rng.integers(0, np.iinfo(np.uint64).max, n, dtype=np.uint64, endpoint=True)
    n_plant = n // 10
    if n_plant >= 2:
        sizes = rng.integers(2, 5, n_plant // 2 + 1)
        cluster = np.repeat(np.arange(len(sizes)), sizes)[:n_plant]
        first = np.r_[True, cluster[1:] != cluster[:-1]]
        centre = rng.integers(0, np.iinfo(np.uint64).max, len(sizes), dtype=np.uint64)
        k = rng.integers(1, 4, n_plant)
        pos = rng.integers(0, 64, (n_plant, 3)).astype(np.uint64)
        bit = np.left_shift(np.uint64(1), pos)
        bit[:, 1][k < 2] = 0
        bit[:, 2][k < 3] = 0
        flips = bit[:, 0] | bit[:, 1] | bit[:, 2]
        flips[first] = 0
        fp[rng.permutation(n)[:n_plant]] = centre[cluster] ^ flips
    return fp


def families(n: int, seed: int) -> np.ndarray:
    """``n`` fingerprints: 90% random, 10% in families of 1,000-100,000 near-identical members."""
    rng = np.random.default_rng(seed)
    fp = rng.integers(0, np.iinfo(np.uint64).max, n, dtype=np.uint64, endpoint=True)
    left = n // 10
    members = []
    while left > 0:
        size = min(left, int(np.exp(rng.uniform(np.log(1_000), np.log(100_000)))))
        centre = rng.integers(0, np.iinfo(np.uint64).max, dtype=np.uint64, endpoint=True)
        hot = rng.choice(64, 12, replace=False).astype(np.uint64)
        flips = np.zeros(size, dtype=np.uint64)
        varied = rng.random(size) >= 0.5
        for _ in range(3):  # 1-3 hot bits (a bit drawn twice flips back: fewer)
            pick = varied & (rng.random(size) < 0.6)
            pick[varied & (flips == 0)] = True
            flips[pick] ^= np.left_shift(np.uint64(1), rng.choice(hot, int(pick.sum())))
        members.append(centre ^ flips)
        left -= size
    if members:
        fam = np.concatenate(members)
        fp[rng.permutation(n)[: len(fam)]] = fam
    return fp


def data_path(n: int, seed: int, kind: str = "uniform") -> str:
    """Path of the cached ``.npy`` of ``n`` fingerprints of the given kind."""
    suffix = "" if kind == "uniform" else f"_{kind}"
    path = os.path.join(OUT, f"fp_{n}_s{seed}{suffix}.npy")
    if not os.path.exists(path):
        os.makedirs(OUT, exist_ok=True)
        tmp = path + ".tmp.npy"
        np.save(tmp, uniform(n, seed) if kind == "uniform" else families(n, seed))
        os.replace(tmp, path)
    return path


def decimal_path(n: int, seed: int, kind: str = "uniform") -> str:
    """The same fingerprints as unsigned decimal lines (for command-line peers)."""
    path = data_path(n, seed, kind)[: -len(".npy")] + ".txt"
    if not os.path.exists(path):
        fp = np.load(data_path(n, seed, kind))
        tmp = path + ".tmp"
        with open(tmp, "w") as f:
            f.write("\n".join(map(str, fp.tolist())) + "\n")
        os.replace(tmp, path)
    return path


def value_pairs(fp: np.ndarray, pairs: np.ndarray) -> np.ndarray:
    """Index pairs -> sorted distinct pairs of distinct values ``(a < b)``, uint64 (p, 2)."""
    if len(pairs) == 0:
        return np.empty((0, 2), dtype=np.uint64)
    v = fp[np.asarray(pairs, dtype=np.int64)]
    v = np.sort(v, axis=1)
    v = v[v[:, 0] != v[:, 1]]
    return np.unique(v, axis=0)

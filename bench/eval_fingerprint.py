"""Precision and recall of simhash fingerprints against exact Jaccard similarity.

Corpus: real text on this machine (license and copyright files, a seeded sample of man pages in
every installed language; see bench/corpus.py), byte-identical duplicates removed. Truth: exact
Jaccard similarity of the sets of 3-word shingles, words being maximal runs of Unicode letters and
digits after NFKC + case folding. For every pair of documents and every fingerprinter we compare
the Hamming distance of the fingerprints with the truth:

    precision(d, t) = #(pairs with distance <= d and J >= t) / #(pairs with distance <= d)
    recall(d, t)    = #(pairs with distance <= d and J >= t) / #(pairs with J >= t)

Usage::

    python bench/eval_fingerprint.py [--man 2500] [--grid] [--simhash-python /tmp/simhash-venv/bin/python]

``--simhash-python`` names a Python that has the PyPI package ``simhash`` (give it numpy<2); the
peer is skipped when it is absent.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import time
import unicodedata

import numpy as np
import scipy.sparse as sp

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from corpus import eval_documents  # noqa: E402

from neardup.fingerprints import Fingerprinter  # noqa: E402

DISTANCES = (3, 4, 6, 8, 10)
THRESHOLDS = (0.9, 0.8)
_WORD = re.compile(r"[^\W_]+")

SIMHASH_SCRIPT = r"""
import json, sys
from simhash import Simhash
for line in sys.stdin:
    try:
        print(Simhash(json.loads(line)).value)
    except Exception as e:
        print(-1)
"""


def shingle_sets(texts: list[str], k: int = 3) -> sp.csr_matrix:
    vocab: dict[tuple[str, ...], int] = {}
    indptr = [0]
    indices: list[int] = []
    for text in texts:
        words = _WORD.findall(unicodedata.normalize("NFKC", text).casefold())
        grams = {tuple(words[i : i + k]) for i in range(max(1, len(words) - k + 1))}
        for g in grams:
            indices.append(vocab.setdefault(g, len(vocab)))
        indptr.append(len(indices))
    data = np.ones(len(indices), dtype=np.float32)
    return sp.csr_matrix((data, indices, indptr), shape=(len(texts), len(vocab)))


def jaccard_matrix(a: sp.csr_matrix) -> np.ndarray:
    inter = (a @ a.T).toarray()
    size = np.asarray(a.sum(axis=1)).ravel()
    union = size[:, None] + size[None, :] - inter
    with np.errstate(invalid="ignore", divide="ignore"):
        j = np.where(union > 0, inter / union, 0.0)
    return j.astype(np.float32)


def hamming_upper(fps: np.ndarray) -> np.ndarray:
    n = fps.shape[0]
    out = np.empty(n * (n - 1) // 2, dtype=np.uint8)
    pos = 0
    for i in range(n - 1):
        row = np.bitwise_count(fps[i] ^ fps[i + 1 :])
        out[pos : pos + row.shape[0]] = row
        pos += row.shape[0]
    return out


def upper(j: np.ndarray) -> np.ndarray:
    iu = np.triu_indices(j.shape[0], k=1)
    return j[iu]


def scores(ham: np.ndarray, jac: np.ndarray, valid: np.ndarray) -> dict:
    res = {}
    for t in THRESHOLDS:
        truth = (jac >= t) & valid
        n_true = int(truth.sum())
        for d in DISTANCES:
            found = (ham <= d) & valid
            tp = int((found & truth).sum())
            nf = int(found.sum())
            res[(t, d)] = (tp / nf if nf else float("nan"), tp / n_true if n_true else float("nan"))
    return res


def simhash_pypi(python: str, texts: list[str]) -> np.ndarray | None:
    if not python or not os.path.exists(python):
        return None
    payload = "".join(json.dumps(t) + "\n" for t in texts).encode()
    r = subprocess.run([python, "-c", SIMHASH_SCRIPT], input=payload, capture_output=True)
    if r.returncode != 0:
        print(f"simhash peer failed: {r.stderr.decode()[-300:]}", file=sys.stderr)
        return None
    vals = [int(x) for x in r.stdout.split()]
    return np.array([v if v >= 0 else 0 for v in vals], dtype=np.uint64), np.array(
        [v >= 0 for v in vals]
    )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--man", type=int, default=2500, help="man pages sampled (default 2500)")
    ap.add_argument("--grid", action="store_true", help="also score window x weighting choices")
    ap.add_argument("--simhash-python", default="/tmp/simhash-venv/bin/python")
    args = ap.parse_args()

    t0 = time.perf_counter()
    docs = eval_documents(args.man)
    texts = [t for _, t in docs]
    n = len(texts)
    jac = upper(jaccard_matrix(shingle_sets(texts)))
    mb = sum(len(t.encode()) for t in texts) / 1e6
    print(
        f"corpus: {n} documents, {mb:.1f} MB, {jac.shape[0]} pairs; "
        + ", ".join(f"{int((jac >= t).sum())} pairs with J >= {t}" for t in THRESHOLDS)
        + f" (truth in {time.perf_counter() - t0:.0f} s)"
    )
    all_valid = np.ones(jac.shape[0], dtype=bool)
    near = (jac >= 0.9) & (jac < 1.0)

    methods: dict[str, tuple[np.ndarray, np.ndarray]] = {}
    for preset in ("default", "reference"):
        methods[f"neardup {preset}"] = (Fingerprinter(preset).fingerprint_many(texts), all_valid)
    peer = simhash_pypi(args.simhash_python, texts)
    if peer is None:
        print("PyPI simhash: skipped (no --simhash-python interpreter)")
    else:
        fps, ok = peer
        iu = np.triu_indices(n, k=1)
        methods["PyPI simhash 2.1.2"] = (fps, ok[iu[0]] & ok[iu[1]])
        if not ok.all():
            print(f"PyPI simhash: {int((~ok).sum())} documents failed and are left out")
    if args.grid:
        for window in (1, 2, 3, 4, 5):
            for weighting in ("count", "unique", "log"):
                fp = Fingerprinter("default", window=window, weighting=weighting)
                methods[f"grid w={window} {weighting}"] = (fp.fingerprint_many(texts), all_valid)

    header = "| fingerprint | J >= | " + " | ".join(f"d<={d} P / R" for d in DISTANCES) + " |"
    print()
    print(header)
    print("|" + "---|" * (2 + len(DISTANCES)))
    summary = []
    for name, (fps, valid) in methods.items():
        ham = hamming_upper(fps)
        res = scores(ham, jac, valid)
        for t in THRESHOLDS:
            cells = " | ".join(f"{res[(t, d)][0]:.3f} / {res[(t, d)][1]:.3f}" for d in DISTANCES)
            if not name.startswith("grid"):
                print(f"| {name} | {t} | {cells} |")
        f1 = [2 * p * r / (p + r) if p + r > 0 else 0.0 for p, r in res.values()]
        mean_near = float(ham[near & valid].mean()) if (near & valid).any() else float("nan")
        summary.append((name, float(np.nanmean(f1)), mean_near))
    print()
    print("| fingerprint | mean F1 over the cells above | mean distance, 0.9 <= J < 1 |")
    print("|---|---|---|")
    for name, f1, mean_near in summary:
        print(f"| {name} | {f1:.3f} | {mean_near:.2f} |")
    print(f"\n(total {time.perf_counter() - t0:.0f} s)")


if __name__ == "__main__":
    main()

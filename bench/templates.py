"""Templates and boilerplate: what ``--common-shingles`` changes in what a verified dedup drops and
in what its search and verification cost.

Corpora (generated, words drawn from a vocabulary of 50,000 made-up words, so the truth is
known):

* ``templated N``: N pages of one site (``--template W``: a template of W words, 100-300,
  default 260 as in issue 39; its first half a header, the rest a footer; ``--sites K`` sites
  of one template each, the pages spread over them) around a body of 30-400 words of the
  page's own; 5% of the pages
  are followed by a true near-copy (the same page with one body word replaced: by its own words
  still J >= 0.8 for every body length). Every other page is a distinct article.
* ``distinct N``: N pages of 130-700 words of their own (the templated pages' lengths), 5% of
  them followed by a near-copy made the same way.

Each corpus is deduplicated in this process at the default threshold (0.8), keep first, with the
option off and at each of ``--shares`` (``neardup.dedup(texts, common_shingles=F)``), and each
run prints: distinct articles dropped (a page that is not a copy, dropped: wrong), true
near-copies found (copies dropped), and the wall time of search + verify (the summary's
``search+verify`` plus, with the option, ``common shingles``: counting the keys and removing the
common ones). Fingerprinting is the same for every run and left out. Each run is repeated
``--repeat`` times (default 3) and the fastest reported: the first large run of a process also
pays for growing its memory (about 0.5 s at 80,000 pages), whichever corpus comes first.

    python bench/templates.py                     # 20k and 80k templated, 80k distinct
    python bench/templates.py --sizes 5000 --distinct 5000 --off-max 5000   # a quick look

``--off-max N`` leaves out the runs without the option on templated corpora larger than N (each
costs minutes: every kept page of a site is checked against the earlier kept ones).
"""

from __future__ import annotations

import argparse
import random
import sys
import time
import warnings

import numpy as np

import neardup

VOCAB = 50_000
COPY_EVERY = 20  # one page in 20 gets a near-copy


def _words(rng: random.Random, k: int) -> list[str]:
    return [f"w{rng.randrange(VOCAB)}" for _ in range(k)]


def _copy(rng: random.Random, body: list[str]) -> list[str]:
    """``body`` with one word replaced by another (the page edited)."""
    edited = list(body)
    edited[rng.randrange(len(edited))] = f"edit{rng.randrange(VOCAB)}"
    return edited


def corpus(
    n: int, templated: bool, template: int = 260, n_sites: int = 1, seed: int = 1
) -> tuple[list[str], np.ndarray]:
    """``n`` pages (and their near-copies): the texts, and for each one whether it is a copy."""
    rng = random.Random(seed)
    sites = []
    for _ in range(n_sites):
        t = _words(rng, template)
        sites.append((t[: len(t) // 2], t[len(t) // 2 :]))
    texts, copy = [], []
    for i in range(n):
        if templated:
            head, foot = sites[rng.randrange(n_sites)]
            body = _words(rng, rng.randint(30, 400))
        else:
            head, foot = [], []
            body = _words(rng, rng.randint(130, 700))
        texts.append(" ".join(head + body + foot))
        copy.append(False)
        if i % COPY_EVERY == 0:
            texts.append(" ".join(head + _copy(rng, body) + foot))
            copy.append(True)
    return texts, np.array(copy)


def run(texts: list[str], copy: np.ndarray, share: float | None, threads: int | None) -> dict:
    t0 = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        r = neardup.dedup(texts, common_shingles=share, threads=threads)
    s = r.summary()
    sec = s["seconds"]
    dropped = r.dropped
    return {
        "distinct_dropped": int(np.count_nonzero(dropped & ~copy)),
        "copies_found": int(np.count_nonzero(dropped & copy)),
        "copies": int(np.count_nonzero(copy)),
        "search_verify_s": sec["search+verify"] + sec.get("common shingles", 0.0),
        "common_s": sec.get("common shingles", 0.0),
        "common_keys": s.get("common_shingles", {}).get("keys"),
        "all_common": s.get("common_shingles", {}).get("all_common"),
        "hint": s.get("template_hint"),
        "total_s": time.perf_counter() - t0,
    }


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sizes", type=int, nargs="+", default=[20_000, 80_000],
                    help="pages of the templated corpora")  # fmt: skip
    ap.add_argument("--distinct", type=int, default=80_000, help="pages of the distinct corpus")
    ap.add_argument("--shares", type=float, nargs="+", default=[0.01, 0.05, 0.2])
    ap.add_argument("--off-max", type=int, default=None,
                    help="leave out the runs without the option on larger templated corpora")  # fmt: skip
    ap.add_argument("--template", type=int, default=260, help="words of each site's template")
    ap.add_argument("--sites", type=int, default=1, help="sites of the templated corpora")
    ap.add_argument("--threads", type=int, default=None)
    ap.add_argument("--repeat", type=int, default=3, help="runs of each case, the fastest shown")
    args = ap.parse_args(argv)
    neardup.dedup(["warm up the kernels", "warm up the kernels too"], common_shingles=0.5)
    cases = [(f"templated {n:,}", n, True) for n in args.sizes]
    if args.distinct:
        cases.append((f"distinct {args.distinct:,}", args.distinct, False))
    print(f"{'corpus':<18} {'F':>5} {'distinct dropped':>17} {'copies found':>13} "
          f"{'search+verify s':>16} {'(common s)':>11}  hint")  # fmt: skip
    for name, n, templated in cases:
        texts, copy = corpus(n, templated, args.template, args.sites)
        for share in [None, *args.shares]:
            if share is None and templated and args.off_max is not None and n > args.off_max:
                print(f"{name:<18} {'off':>5}  (not run: --off-max {args.off_max:,})")
                continue
            r = min((run(texts, copy, share, args.threads) for _ in range(args.repeat)),
                    key=lambda x: x["search_verify_s"])  # fmt: skip
            hint = f"--common-shingles {r['hint']['suggest']:g}" if r["hint"] else ""
            print(f"{name:<18} {share if share is not None else 'off':>5} "
                  f"{r['distinct_dropped']:>17,} {r['copies_found']:>7,}/{r['copies']:<5,} "
                  f"{r['search_verify_s']:>16.2f} {r['common_s']:>11.2f}  {hint}",
                  flush=True)  # fmt: skip


if __name__ == "__main__":
    sys.exit(main())

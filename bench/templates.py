"""Templates and boilerplate: what ``--common-shingles`` changes in what a verified dedup drops and
in what its search and verification cost, beside datatrove's MinHash dedup.

Corpora (generated, words drawn from a vocabulary of 50,000 made-up words of letters, in
sentences of 12 words, so the truth is known):

* ``templated N``: N pages of one site (``--template W``: a template of W words, 100-300,
  default 260; its first half a header, the rest a footer; ``--sites K`` sites of one
  template each, the pages spread over them) around a body of 30-400 words of the page's own;
  5% of the pages are followed by a true near-copy (the same page with one body word replaced:
  J >= 0.8 with the template; by the body's words alone, below 0.8 for the shortest bodies, so
  with the template left out a few copies are rightly not found). Every other page is a
  distinct article.
* ``distinct N``: N pages of 130-700 words of their own (the templated pages' lengths), 5% of
  them followed by a near-copy made the same way.

Each corpus is written as JSONL (``id``, ``text``, ``copy``) under ``--out`` and deduplicated in
a child process of its own per case, so that its peak RSS (``ru_maxrss`` of the child and its
children, from ``wait4``) is that case's: neardup at the default threshold (0.8), keep first,
with the option off and at each of ``--shares`` (``neardup.dedup(texts, common_shingles=F)``);
with ``--datatrove PYTHON`` (the python of a virtual environment with datatrove, never the
project's), datatrove's MinHash dedup with its defaults, alone and after its SentenceDedup
(bench/peer_datatrove.py). Each run prints: distinct articles dropped (a page that is not a copy,
dropped: wrong), true near-copies found (copies dropped), the wall time and the peak RSS. For
neardup also the time of search + verify (the summary's ``search+verify`` plus, with the option,
``common shingles``: counting the keys and removing the common ones); its wall is that of
``neardup.dedup`` on the texts in memory (fingerprinting included), each case repeated
``--repeat`` times (default 3) in its process and the fastest shown. datatrove's wall is that of
all its stages, once, reading the JSONL and writing its files on the way, as it runs; its peak
RSS includes its imports (spaCy's tokenizer), neardup's the texts it reads.

    python bench/templates.py                     # 20k and 80k templated, 80k distinct
    python bench/templates.py --sizes 5000 --distinct 5000 --off-max 5000   # a quick look

``--off-max N`` leaves out the runs without the option on templated corpora larger than N (each
costs minutes: every kept page of a site is checked against the earlier kept ones).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import subprocess
import sys
import time
import warnings
from pathlib import Path

import numpy as np

import neardup

ROOT = Path(__file__).resolve().parent.parent
VOCAB = 50_000
COPY_EVERY = 20  # one page in 20 gets a near-copy
SENTENCE = 12  # words of a sentence (a period after each; neardup's shingles ignore it)


def _word(i: int) -> str:
    """The ``i``-th made-up word, in letters only: normalizers that map digits to one (datatrove's
    ``norm_numbers``) would make every word of ``w123`` form the same."""
    out = []
    while True:
        i, r = divmod(i, 26)
        out.append(chr(97 + r))
        if i == 0:
            return "w" + "".join(out)


def _words(rng: random.Random, k: int) -> list[str]:
    return [_word(rng.randrange(VOCAB)) for _ in range(k)]


def _text(*parts: list[str]) -> str:
    """The words as sentences of ``SENTENCE`` words, each part (template half, body) ending one."""
    out = []
    for words in parts:
        for i in range(0, len(words), SENTENCE):
            out.append(" ".join(words[i : i + SENTENCE]) + ".")
    return " ".join(out)


def _copy(rng: random.Random, body: list[str]) -> list[str]:
    """``body`` with one word replaced by another (the page edited)."""
    edited = list(body)
    edited[rng.randrange(len(edited))] = "edit" + _word(rng.randrange(VOCAB))
    return edited


def corpus(
    n: int,
    templated: bool,
    template: int = 260,
    n_sites: int = 1,
    seed: int = 1,
    body_words: tuple[int, int] = (30, 400),
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
            body = _words(rng, rng.randint(*body_words))
        else:
            head, foot = [], []
            body = _words(rng, rng.randint(130, 700))
        texts.append(_text(head, body, foot))
        copy.append(False)
        if i % COPY_EVERY == 0:
            texts.append(_text(head, _copy(rng, body), foot))
            copy.append(True)
    return texts, np.array(copy)


def run(texts: list[str], copy: np.ndarray, share: float | None, threads: int | None,
        candidates: str = "fingerprint") -> dict:  # fmt: skip
    t0 = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        r = neardup.dedup(texts, common_shingles=share, threads=threads, candidates=candidates)
    wall = time.perf_counter() - t0
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
        "wall_s": wall,
    }


def _read(path: Path) -> tuple[list[str], np.ndarray]:
    texts, copy = [], []
    with open(path) as f:
        for line in f:
            d = json.loads(line)
            texts.append(d["text"])
            copy.append(d["copy"])
    return texts, np.array(copy)


def _child(path: str, share: str, threads: str, repeat: str, result: str, cand: str) -> None:
    """One neardup case in this (child) process: the fastest of ``repeat`` runs to ``result``."""
    texts, copy = _read(Path(path))
    f = None if share == "off" else float(share)
    t = None if threads == "none" else int(threads)
    for warm in (None, 0.5):
        neardup.dedup(["warm up the kernels", "warm up the kernels too"], common_shingles=warm,
                      candidates=cand)  # fmt: skip
    r = min(
        (run(texts, copy, f, t, cand) for _ in range(int(repeat))),
        key=lambda x: x["search_verify_s"],
    )
    Path(result).write_text(json.dumps(r))


def _measured(cmd: list[str], result: Path, log: Path) -> tuple[dict, float]:
    """Run ``cmd`` as a child process: its result and its peak RSS (MiB, with its children)."""
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(ROOT / "src"), str(ROOT / "bench")]))
    with open(log, "w") as out:
        p = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, env=env, cwd=ROOT)
        _, status, usage = os.wait4(p.pid, 0)
        p.returncode = os.waitstatus_to_exitcode(status)
    if p.returncode != 0:
        raise RuntimeError(f"{cmd[:3]} failed ({p.returncode}), see {log}")
    return json.loads(result.read_text()), usage.ru_maxrss / 1024


def main(argv: list[str] | None = None) -> None:
    if argv is None and len(sys.argv) > 1 and sys.argv[1] == "--child":
        return _child(*sys.argv[2:])
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sizes", type=int, nargs="+", default=[20_000, 80_000],
                    help="pages of the templated corpora")  # fmt: skip
    ap.add_argument("--distinct", type=int, default=80_000, help="pages of the distinct corpus")
    ap.add_argument("--shares", type=float, nargs="+", default=[0.01, 0.05, 0.2])
    ap.add_argument("--off-max", type=int, default=None,
                    help="leave out the runs without the option on larger templated corpora")  # fmt: skip
    ap.add_argument("--template", type=int, default=260, help="words of each site's template")
    ap.add_argument(
        "--body",
        type=int,
        nargs=2,
        default=[30, 400],
        metavar=("MIN", "MAX"),
        help="words of a templated page's own",
    )
    ap.add_argument("--candidates", nargs="+", default=["fingerprint", "prefix"],
                    choices=["fingerprint", "prefix", "bands"], help="candidate generators to run")  # fmt: skip
    ap.add_argument("--sites", type=int, default=1, help="sites of the templated corpora")
    ap.add_argument("--threads", type=int, default=None)
    ap.add_argument("--repeat", type=int, default=3, help="runs of each case, the fastest shown")
    ap.add_argument("--datatrove", metavar="PYTHON", default=None,
                    help="python of a virtual environment with datatrove: adds its MinHash dedup, "
                    "alone and after its SentenceDedup (bench/peer_datatrove.py)")  # fmt: skip
    ap.add_argument("--out", type=Path, default=ROOT / "bench" / "out" / "templates",
                    help="folder of the corpora (JSONL) and the datatrove runs")  # fmt: skip
    args = ap.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    cases = [(f"templated {n:,}", n, True) for n in args.sizes]
    if args.distinct:
        cases.append((f"distinct {args.distinct:,}", args.distinct, False))
    if args.datatrove is None:
        print("(datatrove rows not run: give --datatrove PYTHON)")
    print(f"{'corpus':<18} {'dedup':<26} {'distinct dropped':>17} {'copies found':>13} "
          f"{'search+verify s':>16} {'(common s)':>11} {'wall s':>8} {'peak RSS MiB':>13}  hint")  # fmt: skip
    for name, n, templated in cases:
        texts, copy = corpus(n, templated, args.template, args.sites, body_words=args.body)
        path = args.out / f"{name.split()[0]}-{n}.jsonl"
        with open(path, "w") as f:
            for i, (t, c) in enumerate(zip(texts, copy)):
                f.write(json.dumps({"id": str(i), "text": t, "copy": bool(c)}) + "\n")
        del texts
        result = args.out / "result.json"
        runs = [(c, None) for c in args.candidates]
        runs += [("fingerprint", f) for f in args.shares if "fingerprint" in args.candidates]
        for cand, share in runs:
            label = f"neardup F={share if share is not None else 'off'}"
            label += f" {cand}" if cand != "fingerprint" else ""
            slow = share is None and cand == "fingerprint"
            if slow and templated and args.off_max is not None and n > args.off_max:
                print(f"{name:<18} {label:<26}  (not run: --off-max {args.off_max:,})")
                continue
            cmd = [sys.executable, str(ROOT / "bench" / "templates.py"), "--child", str(path),
                   "off" if share is None else repr(share),
                   "none" if args.threads is None else str(args.threads),
                   str(args.repeat), str(result), cand]  # fmt: skip
            r, rss = _measured(cmd, result, args.out / "child.log")
            hint = f"--common-shingles {r['hint']['suggest']:g}" if r["hint"] else ""
            print(f"{name:<18} {label:<26} "
                  f"{r['distinct_dropped']:>17,} {r['copies_found']:>7,}/{r['copies']:<5,} "
                  f"{r['search_verify_s']:>16.2f} {r['common_s']:>11.2f} "
                  f"{r['wall_s']:>8.2f} {rss:>13,.0f}  {hint}",
                  flush=True)  # fmt: skip
        if args.datatrove is None:
            continue
        for sentence in (False, True):
            label = "datatrove SentenceDedup+MinHash" if sentence else "datatrove MinHash"
            cmd = [args.datatrove, str(ROOT / "bench" / "peer_datatrove.py"), str(path),
                   str(args.out / "datatrove"), str(result)] + (["--sentence"] if sentence else [])  # fmt: skip
            r, rss = _measured(cmd, result, args.out / "datatrove.log")
            dropped = np.ones(len(copy), dtype=bool)
            dropped[np.array([int(i) for i in r["kept"]], dtype=np.int64)] = False
            dd, cf = np.count_nonzero(dropped & ~copy), np.count_nonzero(dropped & copy)
            print(f"{name:<18} {label:<26} {dd:>17,} {cf:>7,}/{np.count_nonzero(copy):<5,} "
                  f"{'':>16} {'':>11} {r['wall_s']:>8.2f} {rss:>13,.0f}",
                  flush=True)  # fmt: skip


if __name__ == "__main__":
    sys.exit(main())

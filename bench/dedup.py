"""End-to-end dedup benchmark: neardup (verified and fingerprint-only) vs datasketch MinHashLSH,
rensa RMinHashLSH and the PyPI ``simhash`` package.

Builds a corpus of real text from this machine (lines of man pages, license and copyright files;
each document 5-20 random lines) in which a share of documents are planted near-duplicates of an
earlier document (1-3 edits among: a few words inserted, deleted, adjacent words swapped, a
boilerplate header/footer line changed), so the truth is known: the planted copies are exactly the
documents a keep-first dedup should drop.

Every method runs in its own subprocess (peak RSS is that process's maximum) on the first N
documents:

* ``verified``: ``neardup.dedup(corpus.jsonl, output=kept.jsonl, threshold=J)`` (the default
  ``neardup dedup``: exact Jaccard >= J of the shingle sets behind every drop; J = 0.8 and 0.9):
  reading JSONL, fingerprinting, search, verification and writing the kept records. Also reports
  the temporary disk the shingle keys took.
* ``neardup``: the same with ``verify=False`` (``--no-verify``: each document dropped for the
  first kept one whose fingerprint is within ``--distance`` bits, never through a chain).
* ``minhash``: datasketch ``MinHash(num_perm=128)`` of lower-cased word 3-shingles and
  ``MinHashLSH`` at each of ``--thresholds``, streaming: query, drop on any match, else insert
  (texts already in memory: the time covers hashing and the index only).
* ``rensa``: rensa ``RMinHash(num_perm=128)`` of the same shingles and ``RMinHashLSH`` (16 bands
  of 8 rows) at each of ``--thresholds``, streaming: query, drop when a candidate's estimated
  Jaccard is >= the threshold, else insert (texts in memory).
* ``simhash``: ``simhash.Simhash(text)`` (its default features) and ``SimhashIndex(k=6)``,
  streaming the same way (texts in memory).

Reports documents/s, peak memory, temporary disk and precision/recall/F1 of the dropped set
against the planted truth. Run ``python bench/dedup.py --docs 20000 --minhash-docs 20000
--simhash-docs 5000`` for a quick look; the defaults take about 10 minutes on 2 cores.
``--simhash-docs 0`` (or ``--minhash-docs 0``, ``--rensa-docs 0``) leaves that peer out.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import re
import resource
import subprocess
import sys
import tempfile
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

BOILERPLATE = [
    "Copyright (c) {y} the authors. All rights reserved.",
    "This page was last updated on {y}-0{m}-1{d}.",
    "Posted in documentation, {y}.",
    "Share this page: mail, print, permalink.",
    "Generated automatically; do not edit. Revision {y}.{m}.{d}.",
]
_WORD = re.compile(r"\w+", re.UNICODE)


def line_pool(seed: int = 0) -> list[str]:
    """Distinct lines of 4+ words from man pages and license/copyright files."""
    import corpus

    rng = random.Random(seed)
    paths = corpus.license_files() + corpus.man_pages()
    rng.shuffle(paths)
    seen: set[str] = set()
    pool = []
    for p in paths:
        text = corpus._read(p)
        if not text:
            continue
        for line in text.splitlines():
            line = " ".join(line.split())
            if len(line.split()) >= 4 and line not in seen:
                seen.add(line)
                pool.append(line)
    return pool


def _boiler(rng: random.Random) -> str:
    return rng.choice(BOILERPLATE).format(
        y=rng.randint(1995, 2024), m=rng.randint(1, 9), d=rng.randint(0, 9)
    )


def edit(text: str, rng: random.Random) -> str:
    """A planted near-duplicate of ``text``: 1-3 small edits."""
    lines = text.split("\n")
    for e in rng.sample(["insert", "delete", "swap", "boilerplate"], rng.randint(1, 3)):
        if e == "boilerplate":
            if rng.random() < 0.5:
                lines[0] = _boiler(rng)
            else:
                lines[-1] = _boiler(rng)
            continue
        i = rng.randrange(1, max(2, len(lines) - 1))
        words = lines[i].split(" ")
        k = rng.randint(1, 2)
        if e == "insert":
            for _ in range(k):
                words.insert(rng.randrange(len(words) + 1), rng.choice(words))
        elif e == "delete":
            for _ in range(k):
                if len(words) > 2:
                    del words[rng.randrange(len(words))]
        elif len(words) > 1:
            j = rng.randrange(len(words) - 1)
            words[j], words[j + 1] = words[j + 1], words[j]
        lines[i] = " ".join(words)
    return "\n".join(lines)


def build(path: str, n: int, dup_rate: float, seed: int) -> np.ndarray:
    """Write ``n`` documents as JSONL; returns int64[n]: the planted copy's original, else -1."""
    rng = random.Random(seed)
    pool = line_pool(seed)
    truth = np.full(n, -1, dtype=np.int64)
    docs: list[str] = []
    with open(path, "w", encoding="utf-8") as f:
        for i in range(n):
            if i > 10 and rng.random() < dup_rate:
                j = rng.randrange(i)
                while truth[j] >= 0:
                    j = truth[j]
                truth[i] = j
                text = edit(docs[j], rng)
            else:
                body = rng.sample(pool, rng.randint(5, 20))
                text = "\n".join([_boiler(rng), *body, _boiler(rng)])
            docs.append(text)
            f.write(json.dumps({"id": i, "text": text}, ensure_ascii=False) + "\n")
    return truth


# ----------------------------------------------------------------------------------------------
# one method per subprocess


def _texts(path: str, n: int) -> list[str]:
    out = []
    with open(path, encoding="utf-8") as f:
        for line in f:
            if len(out) >= n:
                break
            out.append(json.loads(line)["text"])
    return out


def run_neardup(
    path: str,
    workdir: str,
    distance: int,
    window: int | None = None,
    threshold: float = 0.0,
    candidates: str | None = None,
) -> tuple[np.ndarray, int]:
    """Dropped positions and temporary bytes; ``threshold`` 0 means fingerprint-only;
    ``candidates`` None: the default generator."""
    from neardup import dedup
    from neardup.fingerprints import Fingerprinter

    out = os.path.join(workdir, "kept.jsonl")
    fingerprinter = Fingerprinter("default", **({"window": window} if window else {}))
    if threshold:
        r = dedup(path, output=out, threshold=threshold, fingerprinter=fingerprinter,
                  candidates=candidates)  # fmt: skip
    else:
        r = dedup(path, output=out, distance=distance, verify=False, fingerprinter=fingerprinter)
    return np.flatnonzero(r.dropped), r.temp_bytes


def _shingles(t: str) -> list[str]:
    w = _WORD.findall(t.lower())
    return [" ".join(w[k : k + 3]) for k in range(max(1, len(w) - 2))]


def run_minhash(texts: list[str], threshold: float, num_perm: int) -> np.ndarray:
    from datasketch import MinHash, MinHashLSH

    lsh = MinHashLSH(threshold=threshold, num_perm=num_perm)
    dropped = []
    for i, t in enumerate(texts):
        m = MinHash(num_perm=num_perm)
        m.update_batch([x.encode() for x in _shingles(t)])
        if lsh.query(m):
            dropped.append(i)
        else:
            lsh.insert(i, m)
    return np.array(dropped, dtype=np.int64)


def run_rensa(texts: list[str], threshold: float, num_perm: int) -> np.ndarray:
    from rensa import RMinHash, RMinHashLSH

    lsh = RMinHashLSH(threshold=threshold, num_perm=num_perm, num_bands=16)
    kept: dict[int, object] = {}
    dropped = []
    for i, t in enumerate(texts):
        m = RMinHash(num_perm=num_perm, seed=42)
        m.update(_shingles(t))
        if any(m.jaccard(kept[c]) >= threshold for c in lsh.query(m)):
            dropped.append(i)
        else:
            kept[i] = m
            lsh.insert(i, m)
    return np.array(dropped, dtype=np.int64)


def run_simhash(texts: list[str], k: int) -> np.ndarray:
    from simhash import Simhash, SimhashIndex

    index = SimhashIndex([], k=k)
    dropped = []
    for i, t in enumerate(texts):
        s = Simhash(t)
        if index.get_near_dups(s):
            dropped.append(i)
        else:
            index.add(str(i), s)
    return np.array(dropped, dtype=np.int64)


def _peak_rss() -> int:
    """Peak resident set of this process in bytes: VmHWM (reset by exec, unlike ru_maxrss,
    which a forked child inherits from the parent holding the corpus)."""
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


def child(args: argparse.Namespace) -> None:
    n = args.n
    temp = 0
    if args.method in ("neardup", "verified", "verified-fingerprint", "verified-bands"):
        src = args.corpus
        if n < args.total:
            src = os.path.join(args.workdir, f"head{n}.jsonl")
            with open(args.corpus, "rb") as f, open(src, "wb") as g:
                for k, line in enumerate(f):
                    if k >= n:
                        break
                    g.write(line)
        t0 = time.perf_counter()
        threshold = args.threshold if args.method.startswith("verified") else 0.0
        cands = {"verified-fingerprint": "fingerprint", "verified-bands": "bands"}.get(args.method)
        dropped, temp = run_neardup(src, args.workdir, args.distance, args.window, threshold,
                                    cands)  # fmt: skip
    else:
        texts = _texts(args.corpus, n)
        t0 = time.perf_counter()
        if args.method == "minhash":
            dropped = run_minhash(texts, args.threshold, 128)
        elif args.method == "rensa":
            dropped = run_rensa(texts, args.threshold, 128)
        else:
            dropped = run_simhash(texts, args.distance)
    seconds = time.perf_counter() - t0
    np.save(os.path.join(args.workdir, f"dropped-{args.method}-{n}.npy"), dropped)
    rss = _peak_rss()
    print(json.dumps({"seconds": seconds, "peak_bytes": rss, "temp_bytes": temp}))


def measure(method: str, n: int, d: float, args: argparse.Namespace, truth: np.ndarray) -> dict:
    """``d``: the distance (neardup, simhash) or the threshold (verified)."""
    cmd = [
        sys.executable, os.path.abspath(__file__), "--child", method, "--n", str(n),
        "--corpus", args.corpus, "--workdir", args.workdir, "--total", str(args.docs),
        "--distance", str(0 if method.startswith("verified") else d), "--threshold", str(d),
    ] + (["--window", str(args.window)] if args.window else [])  # fmt: skip
    proc = subprocess.run(cmd, capture_output=True, text=True)
    if proc.returncode != 0:
        raise SystemExit(f"{method} @ {n} failed:\n{proc.stderr}")
    out = proc.stdout
    res = json.loads(out.strip().splitlines()[-1])
    dropped = np.load(os.path.join(args.workdir, f"dropped-{method}-{n}.npy"))
    planted = truth[:n] >= 0
    hit = planted[dropped].sum() if len(dropped) else 0
    p = hit / len(dropped) if len(dropped) else float("nan")
    r = hit / planted.sum() if planted.sum() else float("nan")
    res.update(
        distance=d,
        method=method,
        docs=n,
        dropped=len(dropped),
        planted=int(planted.sum()),
        precision=p,
        recall=r,
        f1=2 * p * r / (p + r) if p + r > 0 else float("nan"),
    )
    return res


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--docs", type=int, default=1_000_000, help="corpus size (neardup's run)")
    ap.add_argument("--minhash-docs", type=int, default=50_000, help="MinHashLSH's run size")
    ap.add_argument("--rensa-docs", type=int, default=50_000, help="RMinHashLSH's run size")
    ap.add_argument("--simhash-docs", type=int, default=20_000, help="SimhashIndex's run size")
    ap.add_argument(
        "--thresholds",
        default="0.8,0.9",
        help="verified neardup's Jaccard thresholds, comma-separated ('' for none)",
    )
    ap.add_argument("--dup-rate", type=float, default=0.2, help="share of planted copies")
    ap.add_argument("--distance", type=float, default=6, help="neardup distance, SimhashIndex k")
    ap.add_argument(
        "--extra-distances",
        default="10",
        help="more neardup distances to run at every size, comma-separated ('' for none)",
    )
    ap.add_argument(
        "--window", type=int, default=None, help="neardup shingle window (default: the preset's)"
    )
    ap.add_argument(
        "--fingerprint-candidates",
        action="store_true",
        help="also run verified neardup with --candidates fingerprint (the default is prefix)",
    )
    ap.add_argument(
        "--band-candidates",
        action="store_true",
        help="also run verified neardup with --candidates bands (MinHash bands)",
    )
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--workdir", default=None, help="where the corpus is written (default tmp)")
    ap.add_argument("--child", default=None, help=argparse.SUPPRESS)
    ap.add_argument("--n", type=int, default=0, help=argparse.SUPPRESS)
    ap.add_argument("--corpus", default=None, help=argparse.SUPPRESS)
    ap.add_argument("--total", type=int, default=0, help=argparse.SUPPRESS)
    ap.add_argument("--threshold", type=float, default=0.0, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        args.method = args.child
        child(args)
        return

    with tempfile.TemporaryDirectory(dir=args.workdir) as wd:
        args.workdir = wd
        args.corpus = os.path.join(wd, "corpus.jsonl")
        t0 = time.perf_counter()
        truth = build(args.corpus, args.docs, args.dup_rate, args.seed)
        size = os.path.getsize(args.corpus)
        print(
            f"corpus: {args.docs} documents, {size / 1e6:.0f} MB JSONL, "
            f"{int((truth >= 0).sum())} planted near-duplicates "
            f"(built in {time.perf_counter() - t0:.0f} s); cpus: {len(os.sched_getaffinity(0))}"
        )
        dists = [int(args.distance)]
        dists += [int(x) for x in args.extra_distances.split(",") if x.strip()]
        thresholds = [float(x) for x in args.thresholds.split(",") if x.strip()]
        peers = [("minhash", args.minhash_docs, t) for t in thresholds or [0.8]]
        peers += [("rensa", args.rensa_docs, t) for t in thresholds or [0.8]]
        peers += [("simhash", args.simhash_docs, int(args.distance))]
        peers = [p for p in peers if p[1] > 0]
        small = sorted({n for _, n, _ in peers})
        sizes = [args.docs] + [n for n in small if n < args.docs]
        runs = [("verified", n, t) for n in sizes for t in thresholds]
        if args.fingerprint_candidates:
            runs += [("verified-fingerprint", n, t) for n in sizes for t in thresholds]
        if args.band_candidates:
            runs += [("verified-bands", n, t) for n in sizes for t in thresholds]
        runs += [("neardup", n, d) for n in sizes for d in dists]
        runs += peers
        rows = []
        for method, n, d in runs:
            r = measure(method, min(n, args.docs), d, args, truth)
            rows.append(r)
            print(f"  done {method} @ {r['docs']}: {r['seconds']:.1f} s", flush=True)

    print()
    print(
        "| method | documents | seconds | documents/s | peak RSS (MB) | temp disk (MB) | dropped "
        "| precision | recall | F1 |"
    )
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    win = f", window {args.window}" if args.window else ""
    names = {
        "verified": "neardup dedup, verified J>={d}" + win + " (file to file)",
        "verified-fingerprint": "neardup dedup --candidates fingerprint, verified J>={d}"
        + win
        + " (file to file)",
        "verified-bands": "neardup dedup --candidates bands, verified J>={d}"
        + win
        + " (file to file)",
        "neardup": "neardup dedup --no-verify, d={d}" + win + " (file to file)",
        "minhash": "datasketch MinHashLSH (128 perm, t={d})",
        "rensa": "rensa RMinHashLSH (128 perm, 16 bands, t={d})",
        "simhash": "simhash SimhashIndex (k={d})",
    }
    for r in rows:
        print(
            f"| {names[r['method']].format(d=r['distance'])} | {r['docs']:,} | {r['seconds']:.1f} "
            f"| {r['docs'] / r['seconds']:,.0f} | {r['peak_bytes'] / 1e6:,.0f} "
            f"| {r['temp_bytes'] / 1e6:,.0f} | {r['dropped']:,} "
            f"| {r['precision']:.3f} | {r['recall']:.3f} | {r['f1']:.3f} |"
        )

    def rate(r: dict) -> float:
        return r["docs"] / r["seconds"]

    base = [r for r in rows if r["method"] == "neardup" and r["docs"] == args.docs]
    for r in rows:
        if r["method"] != "verified" or r["docs"] != args.docs:
            continue
        parts = [f"verified J>={r['distance']} ({r['docs']:,} docs): documents/s"]
        if base:
            parts.append(f"{rate(r) / rate(base[0]):.2f}x --no-verify d={base[0]['distance']}")
        for p in rows:
            if p["method"] in ("minhash", "rensa") and p["distance"] == r["distance"]:
                parts.append(
                    f"{rate(r) / rate(p):.1f}x {p['method']} ({p['docs']:,} docs, "
                    f"F1 {r['f1']:.3f} vs {p['f1']:.3f})"
                )
        print(parts[0] + " = " + ", ".join(parts[1:]))


if __name__ == "__main__":
    main()

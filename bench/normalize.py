"""NFKC + case folding: neardup's kernel tables against ``unicodedata`` (and pyarrow), measured.

The ``default`` preset normalizes every document with ``NFKC`` then ``str.casefold`` inside the
fingerprint kernel (``fingerprints/_normalize.py``, tables built from :mod:`unicodedata` by
``fingerprints/unicode_tables.py``), without the GIL. The library route normalizes each
document in Python first (``unicodedata.normalize("NFKC", s).casefold()``, which holds the
GIL), then fingerprints the normalized text with ``normalize="none"``. Both give the same
fingerprints (checked here).

For each input (``english``: man pages, docs and Python sources; ``mixed``: mostly non-ASCII
gettext catalogs and translated man pages, the inputs of ``bench/fingerprint.py``) and thread
count it prints the median of ``--repeat`` interleaved timings, in MB/s of UTF-8:

``ours``
    ``Fingerprinter("default").fingerprint_many(texts, threads=t)``
``library``
    the per-document ``unicodedata`` pass, then ``Fingerprinter("default", normalize="none")``
``none``
    fingerprinting alone, no normalization (what both pay on top of it)

and the ratio ours / library (above 1: the kernel is faster), in wall time and in MB per
CPU second (process CPU time: the figure to read on a loaded machine, where wall times wait
for a core). It also times the normalization
step alone: the kernel's (``ours - none``), ``unicodedata``'s (per document, and in one call
over the batch joined by NUL), and pyarrow's
``utf8_normalize(NFKC)`` + ``utf8_lower`` (not the same answer: pyarrow has no case folding;
shown as the C++ library's speed).

Usage::

    python bench/normalize.py [--mb 5] [--threads 1,2] [--repeat 5]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
import unicodedata

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from corpus import bench_documents  # noqa: E402
from fingerprint import multilingual_documents  # noqa: E402

from neardup.fingerprints import Fingerprinter  # noqa: E402


def library_normalize(texts: list[str]) -> list[str]:
    """NFKC then case folding, one document at a time (what the kernel reproduces)."""
    return [unicodedata.normalize("NFKC", s).casefold() for s in texts]


def library_normalize_batched(texts: list[str]) -> list[str]:
    """The same in one call for the whole batch (NUL between documents: NFKC and case folding
    leave it as it is, and no composition crosses it)."""
    return unicodedata.normalize("NFKC", "\0".join(texts)).casefold().split("\0")


def pyarrow_normalize(texts: list[str]) -> object:
    """pyarrow's NFKC and lower-casing over the whole batch (C++; lower-casing is not case
    folding, so this is a speed reference, not a replacement)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    return pc.utf8_lower(pc.utf8_normalize(pa.array(texts), "NFKC"))


def measure(texts: list[str], threads: list[int], repeat: int) -> dict[str, list[float]]:
    """Seconds per run of each setting, the settings interleaved in every round."""
    ours, plain = Fingerprinter("default"), Fingerprinter("default", normalize="none")
    want = ours.fingerprint_many(texts, threads=1)  # compiles, and the answer to match
    got = plain.fingerprint_many(library_normalize(texts), threads=1)
    if not np.array_equal(want, got):
        raise SystemExit("the kernel's normalization and unicodedata's gave other fingerprints")
    if all("\0" not in s for s in texts) and library_normalize_batched(texts) != library_normalize(
        texts
    ):
        raise SystemExit("unicodedata per document and in one batch disagree")
    pyarrow_normalize(texts)  # imports pyarrow
    runs: dict[str, list[float]] = {}

    def timed(name: str, fn: object) -> None:
        t0, c0 = time.perf_counter(), time.process_time()
        fn()  # type: ignore[operator]
        runs.setdefault(name, []).append(time.perf_counter() - t0)
        runs.setdefault(f"{name}/cpu", []).append(time.process_time() - c0)

    for _ in range(repeat):
        timed("unicodedata", lambda: library_normalize(texts))
        timed("unicodedata batched", lambda: library_normalize_batched(texts))
        timed("pyarrow", lambda: pyarrow_normalize(texts))
        for t in threads:
            timed(f"ours/{t}", lambda t=t: ours.fingerprint_many(texts, threads=t))
            timed(
                f"library/{t}",
                lambda t=t: plain.fingerprint_many(library_normalize(texts), threads=t),
            )
            timed(f"none/{t}", lambda t=t: plain.fingerprint_many(texts, threads=t))
    return runs


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--mb", type=float, default=5.0, help="MB of UTF-8 per input")
    ap.add_argument("--threads", default="1,2")
    ap.add_argument("--repeat", type=int, default=5)
    args = ap.parse_args()
    threads = [int(t) for t in args.threads.split(",")]
    inputs = {
        "english": list(bench_documents(args.mb)),
        "mixed": multilingual_documents(args.mb),
    }
    print(f"load average {os.getloadavg()[0]:.2f}, {os.cpu_count()} CPUs")
    for name, texts in inputs.items():
        mb = sum(len(s.encode("utf-8")) for s in texts) / 1e6
        med = {k: statistics.median(v) for k, v in measure(texts, threads, args.repeat).items()}
        print(f"\n{name}: {len(texts)} documents, {mb:.1f} MB (median of {args.repeat})")
        print(
            f"{'threads':>7} {'ours MB/s':>10} {'library':>8} {'none':>7} {'ours/lib':>9}"
            f" {'ours MB/cpu-s':>14} {'library':>8} {'ours/lib':>9}"
        )
        for t in threads:
            o, lib, none = med[f"ours/{t}"], med[f"library/{t}"], med[f"none/{t}"]
            oc, libc = med[f"ours/{t}/cpu"], med[f"library/{t}/cpu"]
            print(
                f"{t:>7} {mb / o:>10.1f} {mb / lib:>8.1f} {mb / none:>7.1f} {lib / o:>9.2f}"
                f" {mb / oc:>14.1f} {mb / libc:>8.1f} {libc / oc:>9.2f}"
            )
        t = threads[0]
        ours_c, none_c = med[f"ours/{t}/cpu"], med[f"none/{t}/cpu"]
        uni, arrow = med["unicodedata/cpu"], med["pyarrow/cpu"]
        batched = med["unicodedata batched/cpu"]
        if ours_c - none_c < 0.05 * ours_c:  # the kernel's share is within the noise
            kernel = "within the noise of fingerprinting"
        else:
            kernel = f"{mb / (ours_c - none_c):.0f} ({uni / (ours_c - none_c):.1f}x unicodedata)"
        print(
            f"normalization alone, MB per CPU second ({t} thread): kernel {kernel}, "
            f"unicodedata {mb / uni:.0f} (batched {mb / batched:.0f}), "
            f"pyarrow NFKC+lower {mb / arrow:.0f}; "
            f"fingerprinting alone {mb / none_c:.0f}"
        )


if __name__ == "__main__":
    main()

"""Compiling ahead against plain lazy compiling: a cold first ``neardup dedup`` of the shipped
sample (an empty ``NUMBA_CACHE_DIR``, so every kernel compiles) with the search and
verification kernels compiled in a second process (``neardup.pipeline.ahead``, forced on
whatever the load) and without it (numba compiles each kernel at its first call, in the one
process), the runs interleaved. Prints the median wall and CPU seconds of each, and the load.

On a machine with an idle CPU the second process saves wall time; on a busy one the two
processes take turns and the child's own start-up is a loss, which is why neardup starts it
only when ``COMPILE_AHEAD_SPARE_CPUS`` are idle. Run it under ``nice -n -10`` to see what a
machine with idle CPUs gets.

Usage::

    python bench/compile_ahead.py [--repeat 3]
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from startup import SAMPLE, ahead  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--repeat", type=int, default=3, help="cold runs per mode (median shown)")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="neardup-ahead-") as tmp:
        out = os.path.join(tmp, "kept.jsonl")
        print(f"load average before: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
        ahead(["dedup", SAMPLE, "-o", out], dict(os.environ), args.repeat, tmp)


if __name__ == "__main__":
    main()

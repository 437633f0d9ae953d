"""neardup's two JSON writers (numba kernels) against orjson and json, on the same input.

``rows``
    ``neardup.io.formats.format_json_rows``: the output of ``simhash-find-all`` (one
    ``[a, b]`` line per pair of 64-bit fingerprints) and ``simhash-find-clusters`` (one line per
    cluster, 2 to 40 fingerprints). The library route is ``orjson.dumps`` per row of
    ``values.tolist()`` (orjson writes ``[a,b]``; ``, `` is put back so the bytes are the same),
    and ``orjson.dumps`` of the whole pair array with ``OPT_SERIALIZE_NUMPY`` (one nested array,
    not the line format: orjson's best case), then made into lines by two byte replaces.
``results``
    the service's ``/query`` body (``server/_kernels.results_json``): batches of queries with
    a few matches each, against ``orjson.dumps`` and ``json.dumps`` of the same objects (the
    objects built from :class:`neardup.Matches` as the service's fallback path builds them, the
    building included in the library's time).

Every route's bytes are checked equal to ours. Prints the median of ``--repeat`` timings per
route, MB/s of output, and the ratio library time / ours (above 1: ours is faster). The
writers run on one thread (one call per output; orjson holds the GIL).

Usage::

    python bench/json_write.py [--pairs 1000000] [--queries 10000] [--repeat 5]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from collections.abc import Callable

import numpy as np
import orjson

from neardup.core.matches import Matches
from neardup.io.formats import format_json_rows
from neardup.server import _kernels as server_kernels


def timed(fn: Callable[[], bytes], repeat: int) -> tuple[float, bytes]:
    out = fn()  # compiles a kernel on its first call
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        out = fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times), out


def report(name: str, routes: dict[str, Callable[[], bytes]], repeat: int) -> None:
    """Time every route, check its bytes against the first (ours), print the table."""
    base_t, base = timed(routes["ours"], repeat)
    mb = len(base) / 1e6
    print(f"\n{name}: {mb:.1f} MB of JSON (median of {repeat})")
    print(f"{'route':>26} {'MB/s':>8} {'time / ours':>12} {'same bytes':>11}")
    for route, fn in routes.items():
        t, out = (base_t, base) if route == "ours" else timed(fn, repeat)
        same = "yes" if out == base else "no"
        print(f"{route:>26} {mb / t:>8.0f} {t / base_t:>12.2f} {same:>11}")


def rows(values: np.ndarray, ptr: np.ndarray) -> dict[str, Callable[[], bytes]]:
    def per_row() -> bytes:
        flat = values.tolist()
        lines = [orjson.dumps(flat[a:b]) for a, b in zip(ptr[:-1].tolist(), ptr[1:].tolist())]
        return (b"\n".join(lines) + b"\n").replace(b",", b", ")

    routes = {"ours": lambda: format_json_rows(values, ptr), "orjson per row": per_row}
    if (np.diff(ptr) == 2).all():
        pairs = values.reshape(-1, 2)
        nested = orjson.OPT_SERIALIZE_NUMPY
        routes["orjson 2-D numpy (nested)"] = lambda: orjson.dumps(pairs, option=nested)
        routes["orjson 2-D numpy + lines"] = lambda: (
            orjson.dumps(pairs, option=nested)[1:-1].replace(b"],[", b"]\n[").replace(b",", b", ")
            + b"\n"
        )
    return routes


def results(m: Matches) -> dict[str, Callable[[], bytes]]:
    def objects() -> list[dict]:
        bounds, ids, dist = m.offsets.tolist(), m.ids.tolist(), m.distances.tolist()
        return [
            {
                "matches": [
                    {"id": i, "distance": d, "jaccard": None}
                    for i, d in zip(ids[a:b], dist[a:b], strict=True)
                ]
            }
            for a, b in zip(bounds[:-1], bounds[1:], strict=True)
        ]

    return {
        "ours": lambda: server_kernels.results_json(m.offsets, m.ids, m.distances).tobytes(),
        "orjson": lambda: orjson.dumps(objects()),
        "json": lambda: json.dumps(objects(), separators=(",", ":")).encode(),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--pairs", type=int, default=1_000_000)
    ap.add_argument("--queries", type=int, default=10_000)
    ap.add_argument("--repeat", type=int, default=5)
    args = ap.parse_args()
    rng = np.random.default_rng(0)
    print(f"load average {os.getloadavg()[0]:.2f}, {os.cpu_count()} CPUs")

    fps = rng.integers(0, 2**64, size=2 * args.pairs, dtype=np.uint64)
    report("find-all pairs", rows(fps, np.arange(0, len(fps) + 1, 2)), args.repeat)
    sizes = np.minimum(rng.geometric(0.3, size=args.pairs // 3) + 1, 40)
    ptr = np.concatenate(([0], np.cumsum(sizes)))
    values = rng.integers(0, 2**64, size=int(ptr[-1]), dtype=np.uint64)
    report("find-clusters rows", rows(values, ptr), args.repeat)

    for per_query in (1, 5):
        n = args.queries
        counts = rng.poisson(per_query, size=n)
        offsets = np.concatenate(([0], np.cumsum(counts))).astype(np.int64)
        ids = rng.integers(0, 10**9, size=int(offsets[-1]), dtype=np.int64)
        dist = rng.integers(0, 4, size=len(ids), dtype=np.int64)
        qi = np.repeat(np.arange(n, dtype=np.int64), counts)
        m = Matches.from_sorted(qi, ids, dist, n)
        name = f"/query body, {n} queries, ~{per_query} matches each"
        report(name, results(m), args.repeat)
    m1 = Matches.from_sorted(np.zeros(3, np.int64), np.arange(3), np.arange(3), 1)
    report("/query body, 1 query, 3 matches", results(m1), max(args.repeat, 1000))


if __name__ == "__main__":
    sys.exit(main())

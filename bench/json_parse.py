"""JSONL parsing: neardup's block kernel (io/_json_kernels.py) against orjson, same input, same run.

Both read the same JSONL bytes into what the first pass needs: each record's text and id. The
kernel parses whole blocks GIL-free (``neardup.io.blocks.parse_block``: texts as one UTF-8
buffer with offsets, ids, hashes); orjson parses each line into a dict (``orjson.loads``) and
the text and id are taken from it (and, in a third column, the texts encoded into one UTF-8
buffer with offsets, what the fingerprint kernels read). Each runs on 1 and 2 threads (blocks shared out by a thread
pool); the best of ``--repeat`` runs is reported.

    python bench/json_parse.py [--docs 200000] [--repeat 3]
"""

from __future__ import annotations

import argparse
import json
import os
import time
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import orjson

from neardup.io.blocks import line_format, parse_block

BLOCK = 4 << 20


def make_input(n: int, seed: int = 0) -> bytes:
    """``n`` JSONL records like a crawl's: an id, a text of 50-400 words (some non-ASCII and
    escapes) and a few other fields."""
    rng = np.random.default_rng(seed)
    words = ["near", "duplicate", "détection", "simhash", "the", "of", "データ", "a\\nb", "x"]
    lines = []
    for i in range(n):
        k = int(rng.integers(50, 400))
        text = " ".join(words[j] for j in rng.integers(0, len(words), k))
        rec = {"id": i, "url": f"https://example.org/{i}", "text": text, "lang": "en"}
        lines.append(json.dumps(rec, ensure_ascii=bool(i % 2)))
    return ("\n".join(lines) + "\n").encode()


def blocks(data: bytes) -> list[tuple[int, bytes]]:
    """(first line number, whole lines of about BLOCK bytes)."""
    out, start, number = [], 0, 1
    while start < len(data):
        end = data.rfind(b"\n", start, start + BLOCK) + 1 or len(data)
        out.append((number, data[start:end]))
        number += data.count(b"\n", start, end)
        start = end
    return out


def ours(parts: list[tuple[int, bytes]], threads: int) -> int:
    fmt = line_format("bench.jsonl", True, "text", "id")
    with ThreadPoolExecutor(threads) as ex:
        return sum(len(b) for b in ex.map(lambda p: parse_block(fmt, p[0], p[1]), parts))


def library(parts: list[tuple[int, bytes]], threads: int, utf8: bool = False) -> int:
    """orjson per line; with ``utf8`` also the texts as one UTF-8 buffer with offsets (what
    the fingerprint kernels read, and what the block kernel gives)."""

    def one(p: tuple[int, bytes]) -> int:
        texts, ids = [], []
        for line in p[1].splitlines():
            rec = orjson.loads(line)
            texts.append(rec["text"])
            ids.append(rec["id"])
        if utf8:
            enc = [t.encode("utf-8", "surrogatepass") for t in texts]
            offsets = np.zeros(len(enc) + 1, dtype=np.int64)
            np.cumsum([len(e) for e in enc], out=offsets[1:])
            np.frombuffer(b"".join(enc), dtype=np.uint8)
        return len(texts)

    with ThreadPoolExecutor(threads) as ex:
        return sum(ex.map(one, parts))


def library_utf8(parts: list[tuple[int, bytes]], threads: int) -> int:
    return library(parts, threads, utf8=True)


def best(fn, parts, threads: int, repeat: int) -> float:
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn(parts, threads)
        times.append(time.perf_counter() - t0)
    return min(times)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--docs", type=int, default=200_000)
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    data = make_input(args.docs)
    parts = blocks(data)
    assert ours(parts, 1) == library(parts, 1) == args.docs  # same records read; kernel loaded
    print(f"{args.docs:,} records, {len(data) / 1e6:.0f} MB, load {os.getloadavg()[0]:.1f}")
    for threads in (1, 2):
        a = best(ours, parts, threads, args.repeat)
        b = best(library, parts, threads, args.repeat)
        c = best(library_utf8, parts, threads, args.repeat)
        mb = len(data) / 1e6
        print(
            f"{threads} thread(s): kernel {mb / a:4.0f} MB/s, orjson {mb / b:4.0f} MB/s, "
            f"orjson + UTF-8 buffer {mb / c:4.0f} MB/s; kernel time / orjson time {a / b:.2f}, "
            f"/ (orjson + UTF-8) {a / c:.2f}"
        )


if __name__ == "__main__":
    main()

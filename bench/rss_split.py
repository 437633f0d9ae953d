"""Where a one-process dedup's peak memory lies: anonymous memory (arrays) against file pages
mapped into the process (the spooled shingle keys, read in place), for each candidate generator.

Samples ``RssAnon``, ``RssFile`` and ``VmRSS`` of /proc/self/status every 50 ms from a thread
during ``neardup.dedup(CORPUS, output=..., candidates=C, memory="1T")`` (one process, whatever
the size) and prints each one's peak. File pages are the kernel's to drop under pressure; the
anonymous peak is what the run needs.

    python bench/rss_split.py CORPUS.jsonl fingerprint prefix
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import threading


def child(corpus: str, candidates: str) -> None:
    import neardup

    peak = {"RssAnon": 0, "RssFile": 0, "VmRSS": 0}
    done = threading.Event()

    def poll() -> None:
        while not done.wait(0.05):
            with open("/proc/self/status") as f:
                for line in f:
                    key, _, value = line.partition(":")
                    if key in peak:
                        peak[key] = max(peak[key], int(value.split()[0]) * 1024)

    t = threading.Thread(target=poll, daemon=True)
    t.start()
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "kept.jsonl")
        neardup.dedup(corpus, output=out, candidates=candidates, memory="1T", collect=False)
    done.set()
    t.join()
    print(f"| {candidates} | " + " | ".join(f"{peak[k] / 1e6:,.0f}" for k in peak) + " |")


def main() -> None:
    if len(sys.argv) > 2 and sys.argv[1] == "--child":
        child(sys.argv[2], sys.argv[3])
        return
    corpus, generators = sys.argv[1], sys.argv[2:] or ["fingerprint", "prefix"]
    print("| candidates | peak anonymous MB | peak file pages MB | peak RSS MB |")
    print("|---|---:|---:|---:|")
    for g in generators:  # each in a fresh process: peaks are per process
        subprocess.run([sys.executable, __file__, "--child", corpus, g], check=True)


if __name__ == "__main__":
    main()

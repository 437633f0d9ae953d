"""The walk of data through ``neardup.dedup``: which of neardup's modules one call enters, and
how many of its calls go up the layers, for this checkout and, with ``--other-src``, another
one, in one command.

Each checkout runs in its own process, under a profile hook on every thread
(:func:`sys.setprofile`, :func:`threading.setprofile`), ``neardup.dedup`` of five texts in a
list and of the 1,200 sample documents (written to a temporary file), after one warm-up call
of each. It counts:

- *modules*: the distinct ``neardup`` modules whose functions the calls entered;
- *rooms*: the distinct rooms among them (``core``, ``io``, ``pipeline``, ...; a top-level
  module is its own room);
- *calls up*: distinct (caller, callee) module pairs where a lower layer calls a higher one
  (DESIGN's order: the base modules, ``core``, ``fingerprints`` and ``io``, ``index``,
  ``pipeline``, ``distributed`` and ``gpu``, ``server``, ``cli``), a callback or an import
  that points up.

    python bench/walk.py [--other-src OTHER_CHECKOUT/src]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

CHILD = r"""
import json, os, sys, tempfile, threading
import neardup

LAYER = {"core": 1, "fingerprints": 2, "io": 2, "index": 3, "pipeline": 4,
         "distributed": 5, "gpu": 5, "server": 6, "cli": 7}

def room(module):
    parts = module.split(".")
    return parts[1] if len(parts) > 2 else module

def layer(module):
    return LAYER.get(room(module).split(".")[0], 0)

modules, up = set(), set()

def hook(frame, event, arg):
    if event != "call":
        return
    callee = frame.f_globals.get("__name__", "")
    if not callee.startswith("neardup."):
        return
    modules.add(callee)
    back = frame.f_back
    caller = back.f_globals.get("__name__", "") if back is not None else ""
    if caller.startswith("neardup.") and layer(caller) < layer(callee):
        up.add((caller, callee))

texts = ["the cat sat on the mat today", "The cat sat on the mat today!", "dogs bark",
         "a quick brown fox jumps over the lazy dog", "a quick brown fox jumped over the lazy dog"]
sample, out = sys.argv[1], sys.argv[2]
neardup.dedup(texts)
neardup.dedup(sample, output=os.path.join(out, "warm.jsonl"))
threading.setprofile(hook)
sys.setprofile(hook)
neardup.dedup(texts)
neardup.dedup(sample, output=os.path.join(out, "kept.jsonl"))
sys.setprofile(None)
threading.setprofile(None)
print(json.dumps({"modules": len(modules), "rooms": len({room(m) for m in modules}),
                  "calls_up": sorted(f"{a} -> {b}" for a, b in up)}))
"""


def walk(src: str) -> dict:
    sample = os.path.join(ROOT, "data", "sample", "corpus.jsonl")
    env = dict(os.environ, PYTHONPATH=src)
    with tempfile.TemporaryDirectory() as out:
        done = subprocess.run([sys.executable, "-c", CHILD, sample, out], env=env, check=True,
                              capture_output=True, text=True)  # fmt: skip
    return json.loads(done.stdout.strip().splitlines()[-1])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--other-src", default=None, help="another checkout's src directory")
    ns = ap.parse_args()
    runs = [("this checkout", os.path.join(ROOT, "src"))]
    if ns.other_src:
        runs.append(("other", ns.other_src))
    print("| checkout | modules entered | rooms | calls up (distinct module pairs) |")
    print("|---|---:|---:|---:|")
    found = {name: walk(src) for name, src in runs}
    for name, w in found.items():
        print(f"| {name} | {w['modules']} | {w['rooms']} | {len(w['calls_up'])} |")
    for name, w in found.items():
        for pair in w["calls_up"]:
            print(f"{name}: up {pair}")


if __name__ == "__main__":
    main()

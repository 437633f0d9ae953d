"""One smoke test per installed console script, run as a real subprocess (the scripts are found
next to ``sys.executable``, so these run whether or not the environment is activated)."""

from __future__ import annotations

import json
import os

import pytest
from cli import run_script, script

SAMPLE = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "data", "sample")


@pytest.mark.parametrize("tool", ["neardup", "simhash-find-all", "simhash-find-clusters"])
def test_script_is_installed(tool):
    assert os.access(script(tool), os.X_OK), f"{script(tool)} is not an installed script"


def test_simhash_find_all_script():
    r = run_script("simhash-find-all", "-d", "1", "-q", input=b"5\n7\n1024\n")
    assert r.returncode == 0, r.stderr
    assert [json.loads(x) for x in r.stdout.decode().splitlines()] == [[5, 7]]


def test_simhash_find_clusters_script():
    r = run_script("simhash-find-clusters", "-d", "1", "-q", input=b"5\n7\n1024\n")
    assert r.returncode == 0, r.stderr
    assert [json.loads(x) for x in r.stdout.decode().splitlines()] == [[5, 7]]


def test_neardup_dedup_script_on_the_sample(tmp_path):
    out = tmp_path / "kept.jsonl"
    r = run_script("neardup", "dedup", os.path.join(SAMPLE, "corpus.jsonl"), "-o", str(out), "-q")
    assert r.returncode == 0, r.stderr
    kept = out.read_text().splitlines()
    assert 900 < len(kept) < 1200
    assert r.stderr == b""


def test_bad_option_is_one_line_without_traceback():
    r = run_script("simhash-find-all", "--distance", "x", input=b"")
    assert r.returncode == 2
    assert r.stderr.decode().count("\n") == 1
    assert "Traceback" not in r.stderr.decode()

"""Where compiled kernels are cached and the first run's notice (neardup.compiled)."""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import tempfile
import time

import pytest
from cli import script

from neardup import compiled, config


def test_cache_dir_follows_numbas_order(monkeypatch, tmp_path):
    src = compiled.GROUPS["search"][0]
    monkeypatch.setenv("NUMBA_CACHE_DIR", str(tmp_path / "user"))
    assert compiled.cache_dir_for(src).startswith(str(tmp_path / "user") + os.sep + "core_")
    monkeypatch.delenv("NUMBA_CACHE_DIR")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    in_tree = os.path.join(os.path.dirname(src), "__pycache__")
    monkeypatch.setattr(compiled, "_writable", lambda p: p == in_tree)
    assert compiled.cache_dir_for(src) == in_tree
    # a read-only install: the per-user directory
    monkeypatch.setattr(compiled, "_writable", lambda p: p.startswith(str(tmp_path / "xdg")))
    assert compiled.cache_dir_for(src).startswith(str(tmp_path / "xdg" / "numba" / "core_"))
    monkeypatch.setattr(compiled, "_writable", lambda p: False)
    assert compiled.cache_dir_for(src) is None


def test_nothing_writable_falls_back_to_a_per_user_temp_dir(monkeypatch, tmp_path):
    # set, then removed: the variable use_writable_cache sets is restored after the test
    monkeypatch.setenv("NUMBA_CACHE_DIR", "restored-after-the-test")
    monkeypatch.delenv("NUMBA_CACHE_DIR")
    monkeypatch.setattr(compiled.tempfile, "gettempdir", lambda: str(tmp_path))
    monkeypatch.setattr(compiled, "_writable", lambda p: p.startswith(str(tmp_path)))
    monkeypatch.setenv("XDG_CACHE_HOME", "/nonexistent-for-this-test")
    assert compiled.use_writable_cache() is None  # numba is loaded already: too late to steer
    monkeypatch.delitem(sys.modules, "numba")
    path = compiled.use_writable_cache()
    assert path is not None and path.startswith(str(tmp_path)) and "neardup-numba-cache" in path
    assert os.environ["NUMBA_CACHE_DIR"] == path


def test_notice_only_while_a_group_is_not_compiled(monkeypatch, tmp_path):
    monkeypatch.setenv("NUMBA_CACHE_DIR", str(tmp_path))
    cost = {g: c for g, (_, _, c) in compiled.GROUPS.items()}
    assert compiled.compile_notice(["search"]) == (
        f"compiling kernels for this machine (first run only, ~{cost['search']} s)"
    )
    where = compiled.cache_dir_for(compiled.GROUPS["search"][0])
    os.makedirs(where)
    open(os.path.join(where, "tree_kernels.root_pairs-471.py311.nbi"), "wb").close()
    assert compiled.compile_notice(["search"]) is None
    want = cost["query"] + cost["fingerprint"]
    assert f"~{want} s" in compiled.compile_notice(["search", "query", "fingerprint"])
    # groups compiled meanwhile by another process: the longer of the two sides
    want = max(cost["fingerprint"], cost["verify"])
    assert f"~{want} s" in compiled.compile_notice(["fingerprint"], alongside=["verify"])
    assert compiled.compile_notice(["index"]) is None  # a second: not worth a line


def test_each_group_is_announced_once_per_process(monkeypatch, tmp_path):
    monkeypatch.setenv("NUMBA_CACHE_DIR", str(tmp_path))
    monkeypatch.setattr(compiled, "_ANNOUNCED", set())
    cost = {g: c for g, (_, _, c) in compiled.GROUPS.items()}
    assert f"~{cost['fingerprint']} s" in compiled.first_notice(["fingerprint"])
    assert compiled.first_notice(["fingerprint"]) is None
    got = compiled.first_notice(["fingerprint", "reader"])  # only what the first did not name
    assert f"~{cost['reader']} s" in got


def test_a_dedup_announces_what_it_compiles():
    from neardup.io.sources import InputPath, expand_inputs
    from neardup.pipeline.ahead import dedup_groups

    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    files = expand_inputs([InputPath(os.path.join(root, "data", "sample", "corpus.jsonl"))], "auto")
    assert dedup_groups(None, True, False) == ["fingerprint", "search", "verify"]
    assert dedup_groups(None, False, True) == ["fingerprint", "query", "index", "search"]
    assert "reader" not in dedup_groups(files, True, False)  # small files: read in Python
    config.READ_KERNEL_FROM = 0
    try:
        assert "reader" in dedup_groups(files, True, False)
    finally:
        config._reset()


@pytest.mark.slow
def test_first_run_says_so_once(tmp_path):
    env = dict(os.environ, NUMBA_CACHE_DIR=str(tmp_path / "cache"))
    args = [script("simhash-find-all"), "-d", "1", "-b", "3"]  # --blocks: the numba engine
    first = subprocess.run(args, input=b"5\n7\n", capture_output=True, env=env, timeout=600)
    second = subprocess.run(args, input=b"5\n7\n", capture_output=True, env=env, timeout=600)
    assert first.returncode == second.returncode == 0
    assert first.stdout == second.stdout == b"[5, 7]\n"
    cost = compiled.GROUPS["search"][2]
    assert (
        f"compiling kernels for this machine (first run only, ~{cost} s)".encode() in first.stderr
    )
    assert b"compiling" not in second.stderr


# -- a poisoned cache: entries swapped, cut short, or left by first runs killed while compiling --

#: fingerprints of these documents in a child process, with the cache in NUMBA_CACHE_DIR;
#: ASCII and non-ASCII documents compile two variants of the fingerprint kernel
_FINGERPRINTS = """
import json, sys
from neardup import Fingerprinter
fp = Fingerprinter()
print(json.dumps([[int(x) for x in fp.fingerprint_many(b)] for b in json.load(sys.stdin)]))
"""
_ASCII = ["x y z", "hello world"]
_MIXED = ["café", "a b " * 50_000, "x y z"]


def _fingerprints(cache, *batches) -> subprocess.Popen:
    env = dict(os.environ, NUMBA_CACHE_DIR=str(cache))
    with tempfile.TemporaryFile() as f:  # (too long for an argument)
        f.write(json.dumps(batches).encode())
        f.seek(0)
        return subprocess.Popen(
            [sys.executable, "-c", _FINGERPRINTS],
            env=env,
            stdin=f,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )


def _run(cache, *batches) -> list[list[int]]:
    p = _fingerprints(cache, *batches)
    out, err = p.communicate(timeout=600)
    assert p.returncode == 0, err.decode()
    return json.loads(out)


def _expected(*batches) -> list[list[int]]:
    from neardup import Fingerprinter

    return [[int(x) for x in Fingerprinter().fingerprint_many(docs)] for docs in batches]


@pytest.mark.slow
def test_swapped_or_cut_cache_entries_are_compiled_again(tmp_path):
    """numba loads whatever data file its index names: a file written over by another process
    compiling the same kernel, or left by a run killed between its two writes, gave another
    variant's code (the fingerprint of "café" was 0, or a 'descr is NULL' RuntimeError)."""
    cache = tmp_path / "cache"
    _run(cache, _ASCII, ["é"])  # both variants of the fingerprint kernel, in one child
    entries = sorted(cache.glob("*/*_fingerprint_chunk*.nbc"))
    assert len(entries) == 2
    first, second = (p.read_bytes() for p in entries)
    entries[0].write_bytes(second)  # each entry holds the other's code
    entries[1].write_bytes(first)
    assert _run(cache, _MIXED, _ASCII) == _expected(_MIXED, _ASCII)
    for p in sorted(cache.glob("*/*_fingerprint_chunk*.nbc")):
        p.write_bytes(p.read_bytes()[: p.stat().st_size // 2])  # half-written
    assert _run(cache, _MIXED) == _expected(_MIXED)


@pytest.mark.scale
@pytest.mark.slow
def test_first_runs_killed_while_compiling_leave_a_usable_cache(tmp_path):
    """First runs SIGKILLed at random points while they compile (two at once, as a dedup and
    its compile-ahead child, or two users, do), then a run to the end: right fingerprints."""
    rng = random.Random(25)
    want = _expected(_ASCII, _MIXED)
    for trial in range(2):
        cache = tmp_path / f"cache{trial}"
        for _ in range(3):
            runs = [_fingerprints(cache, _MIXED, _ASCII), _fingerprints(cache, _ASCII, _MIXED)]
            time.sleep(rng.uniform(1.0, 6.0))
            for p in runs:
                p.send_signal(signal.SIGKILL)
                p.communicate()
        assert _run(cache, _ASCII, _MIXED) == want


def test_every_cached_kernel_uses_the_checked_cache():
    import importlib
    import pkgutil

    import numba

    import neardup

    seen = 0
    for m in pkgutil.walk_packages(neardup.__path__, "neardup."):
        path = importlib.util.find_spec(m.name).origin
        if not path.endswith(".py") or "cache=True" not in open(path, encoding="utf-8").read():
            continue
        for name, obj in vars(importlib.import_module(m.name)).items():
            if isinstance(obj, numba.core.registry.CPUDispatcher) and obj.__module__ == m.name:
                assert type(obj._cache).__name__ == "CheckedFunctionCache", f"{m.name}.{name}"
                seen += 1
    assert seen > 100


_API = """
import neardup
texts = ["the cat sat on the mat today", "The cat sat on the mat today!", "dogs bark"]
neardup.dedup(texts)
neardup.dedup(texts)
"""


def _nbi(cache) -> set[str]:
    return {p.name for p in cache.rglob("*.nbi")}


@pytest.mark.slow
def test_warmup_compiles_what_the_commands_and_the_api_use(tmp_path):
    """The Python API's first call says it compiles (once); after `neardup warmup` on a fresh
    cache, no command compiles anything more and none says it does."""
    cache = tmp_path / "cache"
    env = dict(os.environ, NUMBA_CACHE_DIR=str(cache))
    run = lambda *a, **kw: subprocess.run(a, capture_output=True, text=True, env=env, **kw)  # noqa: E731
    api = run(sys.executable, "-c", _API, timeout=600)
    assert api.returncode == 0, api.stderr
    assert api.stderr.count("neardup: compiling kernels for this machine (first run only") == 1
    warm = run(script("neardup"), "warmup", timeout=600)
    assert warm.returncode == 0, warm.stderr
    assert "every kernel compiled" in warm.stderr
    before = _nbi(cache)
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    sample = os.path.join(root, "data", "sample", "corpus.jsonl")
    commands = [
        ["dedup", sample, "-o", str(tmp_path / "kept.jsonl")],
        ["dedup", sample, "--no-verify", "-o", str(tmp_path / "kept2.jsonl")],
        ["fingerprint", sample, "-o", str(tmp_path / "fps.txt")],
        ["find-all", str(tmp_path / "fps.txt"), "-o", str(tmp_path / "pairs.jsonl")],
        ["index", "create", str(tmp_path / "ix")],
        ["index", "add", str(tmp_path / "ix"), sample],
        ["index", "query", str(tmp_path / "ix"), sample, "-o", str(tmp_path / "q.jsonl")],
    ]
    for args in commands:
        r = run(script("neardup"), *args, timeout=600)
        assert r.returncode == 0, r.stderr
        assert "compiling" not in r.stderr, args
    assert _nbi(cache) == before  # nothing compiled after the warmup

"""Where compiled kernels are cached and the first run's notice (neardup.compiled)."""

from __future__ import annotations

import os
import subprocess
import sys

from cli import script

from neardup import compiled


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
    assert compiled.compile_notice(["search"]) == (
        "compiling kernels for this machine (first run only, ~2 s)"
    )
    where = compiled.cache_dir_for(compiled.GROUPS["search"][0])
    os.makedirs(where)
    open(os.path.join(where, "tree_kernels._root-471.py311.nbi"), "wb").close()
    assert compiled.compile_notice(["search"]) is None
    assert "~3 s" in compiled.compile_notice(["search", "fingerprint"])
    # groups compiled meanwhile by another process: the longer of the two sides
    assert "~3 s" in compiled.compile_notice(["fingerprint"], alongside=["verify"])
    assert "~4 s" in compiled.compile_notice(["verify", "fingerprint"], alongside=["index"])
    assert "~1 s" in compiled.compile_notice([], alongside=["verify", "search"])


def test_first_run_says_so_once(tmp_path):
    env = dict(os.environ, NUMBA_CACHE_DIR=str(tmp_path / "cache"))
    args = [script("simhash-find-all"), "-d", "1", "-b", "3"]  # --blocks: the numba engine
    first = subprocess.run(args, input=b"5\n7\n", capture_output=True, env=env, timeout=600)
    second = subprocess.run(args, input=b"5\n7\n", capture_output=True, env=env, timeout=600)
    assert first.returncode == second.returncode == 0
    assert first.stdout == second.stdout == b"[5, 7]\n"
    assert b"compiling kernels for this machine (first run only, ~2 s)" in first.stderr
    assert b"compiling" not in second.stderr

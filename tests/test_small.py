"""The numba-free brute force for tiny inputs (neardup.core.small) and the seed tools' fast start:
exactly the engine's answers, and no numba loaded for a small input."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest
from cli import invoke
from hypothesis import given
from hypothesis import strategies as st
from naive import find_all as naive_find_all
from naive import find_clusters as naive_find_clusters

from neardup.core import small as small_mod
from neardup.core.search import cluster_groups, find_all, find_clusters
from neardup.core.small import cluster_groups_small, find_all_small, find_clusters_small
from neardup.io import formats
from neardup.io.formats import format_json_rows, parse_decimal_lines

EDGE = [0, 1, 2**64 - 1, 2**63, 2**63 - 1, 0b1011, 0b1001, 0b1011]


def _cases():
    rng = np.random.default_rng(7)
    yield np.array([], dtype=np.uint64), 3
    yield np.array([5], dtype=np.uint64), 0
    yield np.array(EDGE, dtype=np.uint64), 1
    yield np.array(EDGE, dtype=np.uint64), 63
    for n, d in [(50, 0), (200, 6), (300, 20), (120, 32)]:
        base = rng.integers(0, 2**64, size=n, dtype=np.uint64)
        flips = np.uint64(1) << rng.integers(0, 64, size=n).astype(np.uint64)
        yield np.concatenate([base, base[: n // 3] ^ flips[: n // 3], base[:3]]), d


@pytest.mark.parametrize("k", range(8))
def test_same_as_brute_force_and_engine(k):
    fp, d = list(_cases())[k]
    pairs = find_all_small(fp, d)
    np.testing.assert_array_equal(pairs, naive_find_all(fp, d))
    np.testing.assert_array_equal(pairs, find_all(fp, d))
    labels = find_clusters_small(fp, d)
    np.testing.assert_array_equal(labels, naive_find_clusters(fp, d))
    np.testing.assert_array_equal(labels, find_clusters(fp, d))
    for m in (1, 2, 3):
        a, b = cluster_groups_small(labels, m), cluster_groups(labels, m)
        assert len(a) == len(b) and all(np.array_equal(x, y) for x, y in zip(a, b))


@given(st.lists(st.integers(0, 2**64 - 1), max_size=40), st.integers(0, 63))
def test_property_against_brute_force(values, d):
    fp = np.array(values, dtype=np.uint64)
    np.testing.assert_array_equal(find_all_small(fp, d), naive_find_all(fp, d))
    np.testing.assert_array_equal(find_clusters_small(fp, d), naive_find_clusters(fp, d))


@given(st.lists(st.integers(0, 2**64 - 1), max_size=30), st.sampled_from([b"\n", b"\r\n"]),
       st.sampled_from([b"", b" ", b"\t", b" \x0b\x0c "]))  # fmt: skip
def test_small_parse_matches_the_kernel(values, eol, pad):
    data = eol.join(pad + str(v).encode() + pad for v in values) + eol
    small = parse_decimal_lines(data)
    old = formats.SMALL_PARSE_BYTES
    formats.SMALL_PARSE_BYTES = -1  # force the numba kernel
    try:
        big = parse_decimal_lines(data)
    finally:
        formats.SMALL_PARSE_BYTES = old
    np.testing.assert_array_equal(small, big)
    np.testing.assert_array_equal(small, np.array(values, dtype=np.uint64))


@pytest.mark.parametrize("bad", [b"1\n12x\n", b"1\n-5\n", b"18446744073709551616\n", b"1 2\n"])
def test_small_parse_errors_come_from_the_kernel(bad):
    with pytest.raises(ValueError) as small:
        parse_decimal_lines(bad, "f")
    assert str(small.value).startswith("f:")


def test_small_json_rows_match_the_kernel():
    rng = np.random.default_rng(3)
    vals = rng.integers(0, 2**64, size=200, dtype=np.uint64)
    ptr = np.array([0, 0, 1, 5, 100, 200], dtype=np.int64)
    small = format_json_rows(vals, ptr)
    old = small_mod.SMALL_INPUT
    small_mod.SMALL_INPUT = -1
    try:
        assert format_json_rows(vals, ptr) == small
    finally:
        small_mod.SMALL_INPUT = old


def test_seed_tools_small_and_engine_paths_agree():
    rng = np.random.default_rng(11)
    base = rng.integers(0, 2**64, size=300, dtype=np.uint64)
    vals = np.concatenate([base, base ^ np.uint64(5)])
    data = "".join(f"{v}\n" for v in vals.tolist())
    for tool in ("simhash-find-all", "simhash-find-clusters"):
        small = invoke(tool, "-d", "3", input=data, text=True)
        engine = invoke(tool, "-d", "3", "-b", "5", input=data, text=True)
        assert small.returncode == engine.returncode == 0
        assert small.stdout == engine.stdout and small.stdout.count("\n") >= 300
        assert "brute force over 179,700 pairs" in small.stderr


def test_a_small_seed_run_never_loads_numba(tmp_path):
    src = tmp_path / "fps.txt"
    src.write_text("5\n7\n1024\n")
    code = (
        "import sys\n"
        "from neardup.cli.seed import find_all_main\n"
        f"try:\n    find_all_main(['-i', {str(src)!r}, '-d', '1', '-q'])\n"
        "except SystemExit:\n    pass\n"
        "print('numba' in sys.modules, 'scipy' in sys.modules, file=sys.stderr)\n"
    )
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert r.stdout == "[5, 7]\n"
    assert r.stderr.strip() == "False False"

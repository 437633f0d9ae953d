"""The GPU engine (``device="cuda"``) against brute force and the CPU engine.

Without a GPU (and in CI) these run under numba's CUDA simulator, which ``tests/gpusim.py``
switches on for this process before ``numba.cuda`` is first imported: it changes nothing for the
CPU engine's numba kernels (only ``numba.cuda`` reads the setting). On a machine with a CUDA
GPU and CuPy, ``pytest -m gpu`` runs the same tests on the GPU. The simulator runs kernels as
Python: inputs and table counts stay small.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time

import naive
import numpy as np
import pytest
from cli import invoke
from gpusim import NO_GPU, NO_GPU_FIX, REAL_GPU
from hypothesis import given, settings
from hypothesis import strategies as st
from strategies import fingerprints

import neardup
from neardup.core.layout import Layout
from neardup.gpu import BYTES_PER_FINGERPRINT, PHASES, engine, find_all_pairs, runtime

pytestmark = pytest.mark.gpu

SMALL = settings(max_examples=20)
EDGES = [0, 2**64 - 1, 1, 2**63, 2**64 - 2]


@st.composite
def layouts(draw) -> tuple[int, int | None]:
    """(distance, blocks) with few tables (the simulator is slow): automatic, distance + 1,
    a few blocks more, 64 blocks at distance 0, and large distances."""
    kind = draw(st.sampled_from(["auto", "tight", "more", "64", "large"]))
    if kind == "64":
        return 0, 64
    if kind == "large":
        d = draw(st.integers(6, 40))
        return d, d + 1
    d = draw(st.integers(0, 5))
    if kind == "auto":
        return d, None
    if kind == "tight":
        return d, d + 1
    return d, draw(st.integers(d + 1, min(d + 3, 7)))


@SMALL
@given(fingerprints(max_size=40), layouts())
@pytest.mark.slow
def test_find_all_matches_brute_force_and_cpu(fp, layout):
    distance, blocks = layout
    got = neardup.find_all(fp, distance, blocks, device="cuda")
    np.testing.assert_array_equal(got, naive.find_all(fp, distance))
    np.testing.assert_array_equal(got, neardup.find_all(fp, distance, blocks))
    assert got.dtype == np.int64 and got.shape[1] == 2
    values = neardup.find_all_values(fp, distance, blocks, device="cuda")
    np.testing.assert_array_equal(values, naive.find_all_values(fp, distance))


@SMALL
@given(fingerprints(max_size=30), fingerprints(max_size=12), st.integers(0, 6))
@pytest.mark.slow
def test_query_matches_brute_force_and_cpu(corpus, queries, distance):
    got = neardup.query(corpus, queries, distance, device="cuda")
    cpu = neardup.query(corpus, queries, distance)
    flat = (got.query_index, got.ids, got.distances)
    for a, b, c in zip(
        flat, naive.query(corpus, queries, distance), (cpu.query_index, cpu.ids, cpu.distances)
    ):
        np.testing.assert_array_equal(a, b)
        np.testing.assert_array_equal(a, c)
    np.testing.assert_array_equal(got.offsets, cpu.offsets)


@SMALL
@given(fingerprints(max_size=40), st.integers(0, 6))
@pytest.mark.slow
def test_find_clusters_matches_brute_force(fp, distance):
    got = neardup.find_clusters(fp, distance, device="cuda")
    np.testing.assert_array_equal(got, naive.find_clusters(fp, distance))


@SMALL
@given(fingerprints(max_size=40), st.integers(0, 4), st.integers(2, 12))
@pytest.mark.slow
def test_passes_under_a_tiny_memory_budget(fp, distance, per_pass):
    # a budget of a few fingerprints forces many prefix-shard passes per table
    want = naive.find_all(fp, distance)
    memory = per_pass * BYTES_PER_FINGERPRINT
    got = neardup.find_all(fp, distance, device="cuda", memory=memory)
    np.testing.assert_array_equal(got, want)
    # one pass, but no room to sort the pairs on the GPU: they are merged in host memory
    memory = max(1, len(fp)) * BYTES_PER_FINGERPRINT + per_pass
    got = neardup.find_all(fp, distance, device="cuda", memory=memory)
    np.testing.assert_array_equal(got, want)


def _rows(pairs: np.ndarray) -> list[tuple[int, int]]:
    return [tuple(p) for p in pairs.tolist()]


@pytest.mark.slow
@pytest.mark.parametrize(
    "fp, distance, blocks",
    [
        ([], 3, None),
        ([7], 3, None),
        ([5, 5], 0, 1),
        ([0, 2**64 - 1, 0, 2**64 - 1], 0, None),
        ([0, 2**64 - 1], 63, 64),
        ([0, 1, 3, 7, 15], 2, 3),
        ([2**64 - 1] * 6 + [2**64 - 2] * 3, 1, 2),
        (EDGES * 3, 1, 64),
    ],
)
def test_edge_cases(fp, distance, blocks):
    fp = np.array(fp, dtype=np.uint64)
    got = neardup.find_all(fp, distance, blocks, device="cuda")
    assert _rows(got) == _rows(naive.find_all(fp, distance))
    assert _rows(got) == _rows(neardup.find_all(fp, distance, blocks))


def test_families_of_identical_values_across_passes():
    # one prefix shared by more fingerprints than a pass holds: that shard is a pass alone
    rng = np.random.default_rng(7)
    fam = rng.integers(0, 2**63, 4, dtype=np.uint64)
    fp = np.concatenate(
        [np.repeat(fam, 6), fam ^ np.uint64(3), rng.integers(0, 2**63, 8, dtype=np.uint64)]
    )
    rng.shuffle(fp)
    want = naive.find_all(fp, 2)
    for memory in (None, 3 * BYTES_PER_FINGERPRINT):
        got = find_all_pairs(fp, Layout(3, 2), memory=memory)
        np.testing.assert_array_equal(got, want)
    assert len(want) >= 4 * 15  # the repeats alone pair up: the test cannot pass on no pairs


@SMALL
@given(fingerprints(max_size=60), st.integers(1, 8), st.integers(0, 3))
def test_passes_cover_every_position_once(fp, capacity, distance):
    layout = Layout(distance + 1, distance)
    for t in range(layout.n_tables):
        parts = list(engine.passes(fp, layout, t, capacity))
        assert sorted(np.concatenate(parts).tolist() if parts else []) == list(range(len(fp)))
        top = layout.apply(fp, t) >> np.uint64(64 - min(int(layout.spec.pbits[t]), 16))
        for sel in parts:
            # over capacity only when the pass is one prefix shard, which cannot be split
            assert len(sel) <= capacity or len(np.unique(top[sel])) == 1
            assert len(sel) > 0
        if len(fp) > 2 * capacity and len(np.unique(top)) == len(fp):
            assert len(parts) > 1


def test_the_gpu_engine_runs_where_expected():
    assert runtime.load().simulated is not REAL_GPU


def test_device_is_checked():
    with pytest.raises(ValueError, match='device must be "cpu", "cuda" or "auto"'):
        neardup.find_all([1, 2], 1, device="gpu")


def test_auto_never_picks_the_simulator():
    from neardup.gpu.runtime import usable

    assert usable() is REAL_GPU
    fp = np.array([1, 3, 2**40], dtype=np.uint64)
    assert _rows(neardup.find_all(fp, 1, device="auto")) == [(0, 1)]


@pytest.mark.parametrize("command", ["find-all", "clusters"])
def test_cli_device(tmp_path, command):
    src = tmp_path / "fp.txt"
    src.write_text("11\n9\n1099511627776\n11\n")
    outs = []
    for device in ("cpu", "cuda"):
        out = tmp_path / f"{device}.jsonl"
        r = invoke(
            "neardup", command, str(src), "-o", str(out), "-d", "1", "--device", device, "-q"
        )
        assert r.returncode == 0, r.stderr
        outs.append(out.read_text())
    assert outs[0] == outs[1] and outs[0].strip()


@pytest.mark.skipif(REAL_GPU, reason="checks the message where there is no GPU")
@pytest.mark.slow
def test_no_gpu_is_one_line_and_auto_falls_back(tmp_path):
    """Without the simulator and without CuPy/a GPU: "cuda" is one line, "auto" is the CPU."""
    src = tmp_path / "fp.txt"
    src.write_text("11\n9\n")
    env = {k: v for k, v in os.environ.items() if k != "NUMBA_ENABLE_CUDASIM"}
    env["PYTHONPATH"] = os.pathsep.join(sys.path)
    run = [sys.executable, "-m", "neardup", "find-all", str(src), "-d", "1", "-q"]
    r = subprocess.run([*run, "--device", "cuda"], env=env, capture_output=True, text=True)
    assert r.returncode == 2
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"neardup: error: {NO_GPU}")
    assert lines[0].endswith(NO_GPU_FIX)
    r = subprocess.run([*run, "--device", "auto"], env=env, capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "[0, 1]"


DOCS = [
    "the quick brown fox jumps over the lazy dog near the river bank today",
    "the quick brown fox jumps over the lazy dog near the river bank today!",
    "a completely different sentence about gardening and tomatoes in july",
    "The quick brown fox jumps over the lazy dog near the river bank, today",
    "a completely different sentence about gardening and tomatoes in july.",
    "nothing like the others at all",
]


def _without_simulator() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != "NUMBA_ENABLE_CUDASIM"}
    env["PYTHONPATH"] = os.pathsep.join(sys.path)
    return env


@pytest.mark.slow
@pytest.mark.skipif(REAL_GPU, reason="checks the message where there is no GPU")
@pytest.mark.parametrize("extra", [[], ["--no-verify"], ["--shard-docs", "2"]])
def test_no_gpu_dedup_is_one_line(tmp_path, extra):
    """The one-process dedup (verified or not) and the staged one, without CuPy or a GPU."""
    src = tmp_path / "docs.jsonl"
    src.write_text("".join(f'{{"id": {i}, "text": "{t}"}}\n' for i, t in enumerate(DOCS)))
    out = tmp_path / "out.jsonl"
    run = [sys.executable, "-m", "neardup", "dedup", str(src), "-o", str(out), "-q", *extra]
    r = subprocess.run(
        [*run, "--device", "cuda"], env=_without_simulator(), capture_output=True, text=True
    )
    assert r.returncode == 2 and not out.exists()
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"neardup: error: {NO_GPU}")


@pytest.mark.slow
@pytest.mark.skipif(REAL_GPU, reason="checks the message where there is no GPU")
def test_no_gpu_in_python_is_one_line():
    code = (
        "import neardup\n"
        "from neardup.gpu import DeviceUnavailable\n"
        "for call in (lambda: neardup.find_all([1, 3], 1, device='cuda'),\n"
        "             lambda: neardup.dedup(['a b', 'a b'], device='cuda')):\n"
        "    try:\n"
        "        call()\n"
        "    except ImportError as e:\n"
        "        assert isinstance(e, DeviceUnavailable)\n"
        "        print(e)\n"
    )
    r = subprocess.run(
        [sys.executable, "-c", code], env=_without_simulator(), capture_output=True, text=True
    )
    assert r.returncode == 0, r.stderr
    lines = r.stdout.strip().splitlines()
    assert len(lines) == 2 and all(x.startswith(NO_GPU) for x in lines), lines


@pytest.mark.parametrize("verify", [True, False])
def test_dedup_device(verify):
    cpu = neardup.dedup(DOCS, verify=verify)
    gpu = neardup.dedup(DOCS, verify=verify, device="cuda")
    np.testing.assert_array_equal(gpu.kept, cpu.kept)
    np.testing.assert_array_equal(gpu.labels, cpu.labels)
    assert not cpu.kept.all()  # near-duplicates were found: the comparison means something


def test_cli_dedup_device(tmp_path):
    src = tmp_path / "docs.jsonl"
    src.write_text("".join(f'{{"id": {i}, "text": "{t}"}}\n' for i, t in enumerate(DOCS)))
    outs = []
    for device in ("cpu", "cuda"):
        out = tmp_path / f"{device}.jsonl"
        r = invoke("neardup", "dedup", str(src), "-o", str(out), "--device", device, "-q")
        assert r.returncode == 0, r.stderr
        outs.append(out.read_text())
    assert outs[0] == outs[1] and 0 < outs[0].count("\n") < len(DOCS)


#: bench/gpu.py's column heads of neardup.gpu.PHASES, in order
PHASE_HEADS = ["split", "to GPU", "keys", "sort", "scan", "back", "merge"]


def _bench(*args: str) -> tuple[str, list[dict[str, str]]]:
    """``bench/gpu.py`` run with ``args``: its output and its table's rows, head -> cell."""
    bench = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "bench")
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path))
    r = subprocess.run(
        [sys.executable, os.path.join(bench, "gpu.py"), *args],
        env=env,
        capture_output=True,
        text=True,
    )
    assert r.returncode == 0, r.stderr
    table = [
        [c.strip() for c in line.split("|")[1:-1]]
        for line in r.stdout.splitlines()
        if line.startswith("| ")
    ]
    heads = table[0]
    return r.stdout, [dict(zip(heads, cells)) for cells in table[1:]]


def _seconds(cell: str) -> float:
    assert cell.endswith(" s"), cell
    return float(cell[:-2])


@pytest.mark.slow
def test_bench_quick():
    """``bench/gpu.py --quick`` (under the simulator) prints every row, large distances
    included, with the GPU's answer the CPU engine's: the script cannot rot unseen."""
    out, rows = _bench("--quick", "--threads", "1")
    assert [(r["N"], r["distance"]) for r in rows] == [
        ("200", "3"), ("200", "6"), ("200", "8"), ("60", "10"), ("60", "12"), ("40", "14")
    ], out  # fmt: skip
    for r in rows:
        assert r["same"] == "yes" and _seconds(r["CPU engine"]) >= 0, out
        phases = [_seconds(r[h]) for h in PHASE_HEADS]
        assert min(phases) >= 0 and sum(phases) <= _seconds(r["GPU"]) + 0.0005 * len(phases)
    assert sum(int(r["pairs"]) for r in rows) > 0  # pairs were found: "same" means something
    assert "simulator" in out


@pytest.mark.slow
def test_bench_prints_where_the_time_goes():
    """One tiny row under the simulator, in passes (a budget of 40 fingerprints), so every
    phase runs: one column per phase, each a time, together at most the GPU's total."""
    memory = str(40 * BYTES_PER_FINGERPRINT)
    out, rows = _bench("--quick", "--rows", "120:3", "--memory", memory, "--threads", "1")
    heads = list(rows[0])
    assert heads[heads.index("GPU") + 1 :][: len(PHASE_HEADS)] == PHASE_HEADS, out
    (row,) = rows
    phases = [_seconds(row[h]) for h in PHASE_HEADS]
    # each printed to the millisecond: their sum may pass the total by half a millisecond each
    assert min(phases) >= 0 and sum(phases) <= _seconds(row["GPU"]) + 0.0005 * len(phases), out
    assert sum(phases) > 0 and row["same"] == "yes" and int(row["pairs"]) > 0, out


@pytest.mark.slow
@pytest.mark.parametrize("memory", [None, 40 * BYTES_PER_FINGERPRINT])
def test_phases_add_up_and_change_nothing(memory):
    """A ``phases`` dict gets every phase's seconds, which add up to at most the search's,
    and the same answer as without one: in one pass, and in many."""
    fp = np.array(EDGES * 4 + list(range(0, 300, 3)), dtype=np.uint64)
    layout = Layout(4, 3)
    phases: dict[str, float] = {}
    t0 = time.perf_counter()
    got = find_all_pairs(fp, layout, memory=memory, phases=phases)
    seconds = time.perf_counter() - t0
    assert list(phases) == list(PHASES)
    assert min(phases.values()) >= 0 and 0 < sum(phases.values()) <= seconds
    np.testing.assert_array_equal(got, find_all_pairs(fp, layout, memory=memory))
    np.testing.assert_array_equal(got, naive.find_all(fp, 3))
    assert len(got) > 0


@pytest.mark.parametrize(
    "numba_cuda, numpy",
    [("0.30.4", "2.5.2"), ("0.21.1", "2.5.0"), ("0.28.2", "2.5.0rc1"), ("0.30.4", "2.6.0.dev0")],
)
def test_a_numba_cuda_that_calls_row_stack_is_refused_on_numpy_2_5(numba_cuda, numpy):
    msg = runtime.version_conflict(numba_cuda, numpy)
    assert msg is not None and "\n" not in msg
    assert f"numba-cuda {numba_cuda} with numpy {numpy}" in msg and "np.row_stack" in msg
    assert msg.endswith("pip install 'numpy<2.5'")


@pytest.mark.parametrize(
    "numba_cuda, numpy",
    [
        ("0.30.4", "2.4.6"),  # numpy still has np.row_stack
        ("0.30.4", "2.0.0"),
        ("0.20.1", "2.5.2"),  # before numba-cuda's own copy of numba's array functions
        ("0.31.0", "2.5.2"),  # after the newest release checked: not known to call it
        ("0.30.4.post1", "2.4.0"),
        (None, "2.5.2"),  # numba's own numba.cuda
    ],
)
def test_other_releases_are_not_refused(numba_cuda, numpy):
    assert runtime.version_conflict(numba_cuda, numpy) is None


def test_the_gpu_extra_pins_what_the_refusal_names():
    """``pip install "neardup[gpu]"`` installs no combination the runtime refuses."""
    tomllib = pytest.importorskip("tomllib")
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    with open(os.path.join(root, "pyproject.toml"), "rb") as f:
        extra = tomllib.load(f)["project"]["optional-dependencies"]["gpu"]
    pins = {d.split(">")[0].split("<")[0].split("[")[0]: d for d in extra}
    assert pins["numpy"].endswith(runtime.NUMPY_FOR_GPU.removeprefix("numpy"))
    assert pins["numba-cuda"].endswith(">=0.30.4") and pins["cupy-cuda12x"] == "cupy-cuda12x>=13.6"


@pytest.mark.slow
def test_the_cpu_path_never_imports_gpu_libraries():
    code = (
        "import sys, neardup\n"
        "from neardup.pipeline.job import decide\n"
        "neardup.find_all([1, 3], 1); neardup.find_clusters([1, 3], 1)\n"
        "neardup.query([1], [3], 1); decide([1, 3], distance=1)\n"
        f"docs = {DOCS!r}\n"
        "assert not neardup.dedup(docs).kept.all()\n"
        "assert not neardup.dedup(docs, verify=False).kept.all()\n"
        "import neardup.distributed as nd\n"
        "from distributed import Client, LocalCluster\n"
        "with LocalCluster(n_workers=1, processes=False, dashboard_address=None) as cl:\n"
        "    with Client(cl) as c:\n"
        "        assert nd.find_all([1, 3, 2**40], 1, client=c).tolist() == [[0, 1]]\n"
        "        assert not neardup.dedup(docs, client=c).kept.all()\n"
        "bad = [m for m in ('numba.cuda', 'cupy', 'neardup.gpu') if m in sys.modules]\n"
        "assert not bad, bad\n"
    )
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path))
    r = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True)
    assert r.returncode == 0, r.stderr

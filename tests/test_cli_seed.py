"""simhash-find-all / simhash-find-clusters: the seed tools' contract, run in process."""

from __future__ import annotations

import json

import naive
import numpy as np
import pytest
from cli import Result, invoke

VALUES = [5, 7, 1, 5, 2**64 - 1, 2**64 - 2, 0b111 << 40, 0]


def run(tool: str, *args: str, stdin: bytes = b"") -> Result:
    return invoke(tool, *args, input=stdin)


def lines(values) -> bytes:
    return "".join(f"{v}\n" for v in values).encode()


def test_find_all_stdin_stdout_matches_brute_force():
    r = run("simhash-find-all", "-d", "1", "-q", stdin=lines(VALUES))
    assert r.returncode == 0, r.stderr
    assert r.stderr == b""
    got = [json.loads(x) for x in r.stdout.decode().splitlines()]
    assert got == naive.find_all_values(VALUES, 1).tolist()
    assert got == [[0, 1], [1, 5], [5, 7], [2**64 - 2, 2**64 - 1]]


def test_find_clusters_files_and_equals_syntax(tmp_path):
    src = tmp_path / "in.txt"
    src.write_bytes(b"5\r\n  7 \n\n1\n" + lines([2**64 - 1, 2**64 - 2, 0b111 << 40]))
    out = tmp_path / "out.json"
    r = run(
        "simhash-find-clusters", f"--input={src}", f"--output={out}", "--distance=1", "--blocks=2"
    )
    assert r.returncode == 0, r.stderr
    assert b"distinct fingerprints" in r.stderr  # progress on stderr
    assert [json.loads(x) for x in out.read_text().splitlines()] == [
        [1, 5, 7],
        [2**64 - 2, 2**64 - 1],
    ]
    r = run("simhash-find-clusters", "-i", str(src), "-d", "1", "--singletons", "-q")
    assert [json.loads(x) for x in r.stdout.decode().splitlines()] == [
        [1, 5, 7],
        [0b111 << 40],
        [2**64 - 2, 2**64 - 1],
    ]


@pytest.mark.parametrize("tool", ["simhash-find-all", "simhash-find-clusters"])
def test_random_input_agrees_with_brute_force(tool, tmp_path):
    rng = np.random.default_rng(7)
    base = rng.integers(0, 2**64 - 1, 300, dtype=np.uint64, endpoint=True)
    near = base[rng.integers(0, 300, 700)] ^ (
        np.uint64(1) << rng.integers(0, 64, 700).astype(np.uint64)
    )
    values = np.concatenate([base, near])
    (tmp_path / "in.txt").write_bytes(lines(values.tolist()))
    r = run(tool, "-i", str(tmp_path / "in.txt"), "-d", "2", "-q")
    assert r.returncode == 0, r.stderr
    got = [json.loads(x) for x in r.stdout.decode().splitlines()]
    u = np.unique(values)
    if tool == "simhash-find-all":
        assert got == naive.find_all_values(values, 2).tolist()
    else:
        labels = naive.find_clusters(u, 2)
        expected = [
            u[labels == lab].tolist() for lab in np.unique(labels) if (labels == lab).sum() > 1
        ]
        assert got == expected


@pytest.mark.parametrize(
    "data, line, fragment",
    [
        (b"1\n2\nabc\n", 3, "'abc' is not an unsigned decimal integer"),
        (b"1\n-4\n", 2, "'-4' is negative"),
        (b"18446744073709551616\n", 1, "is not below 2**64"),
        (b"12\n3x\n", 2, "'3x'"),
    ],
)
@pytest.mark.parametrize("tool", ["simhash-find-all", "simhash-find-clusters"])
def test_bad_input_exit_2_names_file_and_line_and_writes_nothing(
    tool, data, line, fragment, tmp_path
):
    src = tmp_path / "bad.txt"
    src.write_bytes(data)
    out = tmp_path / "out.json"
    r = run(tool, "-i", str(src), "-o", str(out))
    assert r.returncode == 2
    err = r.stderr.decode()
    assert f"{src}:{line}:" in err and fragment in err
    assert "Traceback" not in err and len(err.strip().splitlines()) == 1
    assert not out.exists()
    assert list(tmp_path.iterdir()) == [src]  # no temporary file left behind
    r = run(tool, "-q", stdin=data)
    assert r.returncode == 2 and r.stdout == b""
    assert f"<stdin>:{line}:" in r.stderr.decode()


def test_existing_output_is_kept_on_error(tmp_path):
    out = tmp_path / "out.json"
    out.write_text("previous\n")
    r = run("simhash-find-all", "-o", str(out), "-q", stdin=b"1\nx\n")
    assert r.returncode == 2
    assert out.read_text() == "previous\n"


@pytest.mark.parametrize(
    "args, fragment",
    [
        (
            ["-b", "3", "-d", "3"],
            "blocks must be > distance (got blocks=3, distance=3); use blocks >= 4",
        ),
        (["-b", "65"], "blocks must be <= 64"),
        (["-d", "-1"], "distance must be >= 0"),
        (["-b", "-2"], "blocks must be > distance"),
        (["--blocks", "x"], "'x' is not a valid integer"),
        (["--nope"], "No such option"),
        (["-i", "/nonexistent/in.txt"], "/nonexistent/in.txt: No such file or directory"),
    ],
)
@pytest.mark.parametrize("tool", ["simhash-find-all", "simhash-find-clusters"])
def test_invalid_options_one_line_exit_2(tool, args, fragment):
    r = run(tool, *args, stdin=b"1\n2\n")
    assert r.returncode == 2
    err = r.stderr.decode().strip()
    assert len(err.splitlines()) == 1, err
    assert fragment in err and err.startswith(f"{tool}: error:")
    assert r.stdout == b""


def test_empty_input_gives_empty_output():
    for tool in ("simhash-find-all", "simhash-find-clusters"):
        r = run(tool, "-q", stdin=b"\n\n")
        assert r.returncode == 0 and r.stdout == b""


def test_quiet_silences_stderr():
    r = run("simhash-find-all", "--quiet", stdin=b"1\n3\n")
    assert r.returncode == 0 and r.stderr == b"" and r.stdout == b"[1, 3]\n"

"""What dedup promises about inputs it reads twice: an input changed between (or during) the
passes stops the run with one line naming it and nothing written; special files (stdin,
``<(cmd)``, FIFOs) are read once and spooled to a temporary file."""

from __future__ import annotations

import dataclasses
import json
import os
import subprocess
import sys
import tempfile

import pytest
from cli import invoke

import neardup
from neardup.errors import InputError
from neardup.io.sources import InputPath
from neardup.pipeline.stage_table import STAGES

ROWS = [
    {"id": f"d{i}", "text": f"document number {i} about the {w} and the river bank today"}
    for i, w in enumerate(["cat", "dog", "fox", "owl", "elk", "ant", "bee", "cow"] * 2)
]


def _jsonl(path, rows=ROWS) -> None:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))


def _one_line_error(r) -> str:
    lines = [ln for ln in r.stderr.splitlines() if "compiling kernels" not in ln]
    assert r.returncode == 2 and len(lines) == 1 and "Traceback" not in r.stderr, r.stderr
    return lines[0]


def _rewrite_jsonl(path) -> None:
    """The same lines and bytes count, other texts (never fingerprinted)."""
    before = path.stat().st_size
    _jsonl(path, [dict(r, text=r["text"].replace("document", "DOCUMENT")) for r in ROWS])
    assert path.stat().st_size == before


def _write_parquet(path, rows) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    pq.write_table(pa.Table.from_pylist(rows), path)


@pytest.mark.parametrize("kind", ["jsonl", "parquet-shrunk", "parquet-rewritten", "text"])
def test_an_input_changed_between_the_passes_stops_the_run(tmp_path, monkeypatch, kind):
    if kind == "jsonl":
        src = tmp_path / "in.jsonl"
        _jsonl(src)
        change, named = (lambda: _rewrite_jsonl(src)), src
    elif kind.startswith("parquet"):
        pytest.importorskip("pyarrow")
        src = tmp_path / "in.parquet"
        _write_parquet(src, ROWS)
        rows = ROWS[:5] if kind == "parquet-shrunk" else [dict(r, text="x y z") for r in ROWS]
        change, named = (lambda: _write_parquet(src, rows)), src
    else:
        src = tmp_path / "docs"
        src.mkdir()
        for r in ROWS:
            (src / f"{r['id']}.txt").write_text(r["text"])
        named = src / "d3.txt"
        change = lambda: named.write_text("another text altogether")  # noqa: E731
    step = STAGES["write"]

    def second_pass(*a, **k):
        if not changed:
            changed.append(True)
            change()
        return step.fn(*a, **k)

    changed: list[bool] = []
    monkeypatch.setitem(STAGES, "write", dataclasses.replace(step, fn=second_pass))
    out = tmp_path / "out"
    r = invoke("neardup", "dedup", str(src), "-o", str(out), "--drop-list",
               str(tmp_path / "drop.txt"), "-q", text=True)  # fmt: skip
    err = _one_line_error(r)
    assert err.startswith(f"neardup: error: {named}: changed while dedup ran"), err
    assert changed and sorted(os.listdir(tmp_path)) == [src.name]  # nothing written


@pytest.mark.parametrize("stage", ["scan", "write"])
@pytest.mark.parametrize("kind", ["jsonl", "parquet"])
def test_an_input_changed_during_a_pass_stops_the_run(tmp_path, kind, stage):
    if kind == "parquet":
        pytest.importorskip("pyarrow")
        a, b = tmp_path / "a.parquet", tmp_path / "b.parquet"
        _write_parquet(a, ROWS[:8])
        _write_parquet(b, ROWS[8:])
        inputs, named = [InputPath(str(a)), InputPath(str(b))], b

        def change() -> None:
            _write_parquet(b, ROWS[8:10])  # shrunk while the first file is copied

    else:
        src = tmp_path / "in.jsonl"
        _jsonl(src)
        inputs, named = [InputPath(str(src))], src

        def change() -> None:
            _rewrite_jsonl(src)

    def progress(now: str, done: int, tasks: int) -> None:
        if now == stage and not changed:
            changed.append(True)
            change()

    changed: list[bool] = []
    out = tmp_path / f"out.{kind}"
    with pytest.raises(InputError, match="changed while dedup ran") as e:
        neardup.dedup(inputs, output=str(out), stage_progress=progress)
    assert e.value.source == str(named) and changed
    assert not out.exists() and not [p for p in os.listdir(tmp_path) if p.startswith(".")]


def test_unchanged_inputs_read_twice_are_accepted(tmp_path):
    # reading (atime) and a rewrite of another file do not count as a change
    src, other = tmp_path / "in.jsonl", tmp_path / "other.jsonl"
    _jsonl(src)
    _jsonl(other)
    r = neardup.dedup(InputPath(str(src)), output=str(tmp_path / "k.jsonl"),
                      stage_progress=lambda stage, done, tasks: _jsonl(other))  # fmt: skip
    assert len((tmp_path / "k.jsonl").read_text().splitlines()) == int(r.kept.sum()) > 0


def _neardup(*args: str, tmp, stdin: bytes | None = None, shell: str | None = None):
    """The real command in a child process (its own stdin, file descriptors and TMPDIR)."""
    env = dict(os.environ, TMPDIR=str(tmp))
    if shell is not None:
        argv = ["bash", "-c", shell]
    else:
        argv = [sys.executable, "-m", "neardup", *args]
    return subprocess.run(argv, input=stdin, capture_output=True, env=env, timeout=300)


def _kept_ids(path) -> list[str]:
    return [json.loads(x)["id"] for x in path.read_text().splitlines()]


@pytest.mark.slow
def test_pipes_fifos_and_process_substitution_are_read_once_and_spooled(tmp_path):
    src = tmp_path / "in.jsonl"
    _jsonl(src, [*ROWS, dict(ROWS[0], id="copy")])
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    r = _neardup("dedup", str(src), "-o", str(tmp_path / "want.jsonl"), "-q", tmp=tmp)
    assert r.returncode == 0, r.stderr
    want = _kept_ids(tmp_path / "want.jsonl")
    assert "copy" not in want and len(want) == len(ROWS)
    # stdin as /dev/stdin (a pipe)
    out, summary = tmp_path / "k1.jsonl", tmp_path / "s1.json"
    r = _neardup("dedup", "/dev/stdin", "--format", "jsonl", "-o", str(out), "--json-summary",
                 str(summary), "-q", tmp=tmp, stdin=src.read_bytes())  # fmt: skip
    assert r.returncode == 0, r.stderr
    assert _kept_ids(out) == want
    assert json.loads(summary.read_text())["temp_bytes"] > src.stat().st_size  # counted
    # <(cmd): /dev/fd/N
    out = tmp_path / "k2.jsonl"
    cmd = f"{sys.executable} -m neardup dedup <(cat {src}) --format jsonl -o {out} -q"
    r = _neardup(tmp=tmp, shell=cmd)
    assert r.returncode == 0, r.stderr
    assert _kept_ids(out) == want
    # a FIFO, written once by another process
    fifo = tmp_path / "fifo.jsonl"
    os.mkfifo(fifo)
    out = tmp_path / "k3.jsonl"
    cmd = f"cat {src} > {fifo} & {sys.executable} -m neardup dedup {fifo} -o {out} -q; wait"
    r = _neardup(tmp=tmp, shell=cmd)
    assert r.returncode == 0, r.stderr
    assert _kept_ids(out) == want
    assert os.listdir(tmp) == []  # every temporary copy removed


@pytest.mark.slow
def test_stdin_as_text_and_parquet_keeps_its_content(tmp_path):
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    text = b"one document read from a pipe, not an empty file\n"
    r = _neardup("dedup", "/dev/stdin", "--format", "text", "-o", str(tmp_path / "out"), "-q",
                 tmp=tmp, stdin=text)  # fmt: skip
    assert r.returncode == 0, r.stderr
    assert (tmp_path / "out" / "stdin").read_bytes() == text
    pytest.importorskip("pyarrow")
    _write_parquet(tmp_path / "in.parquet", [*ROWS, dict(ROWS[1], id="copy")])
    out = tmp_path / "k.parquet"
    # Parquet told by its content
    r = _neardup("dedup", "/dev/stdin", "-o", str(out), "-q", tmp=tmp,
                 stdin=(tmp_path / "in.parquet").read_bytes())  # fmt: skip
    assert r.returncode == 0, r.stderr
    import pyarrow.parquet as pq

    assert pq.read_table(out).column("id").to_pylist() == [r["id"] for r in ROWS]
    assert os.listdir(tmp) == []
    # '-' says how to pass stdin
    r = _neardup("dedup", "-", "-o", str(tmp_path / "x.jsonl"), tmp=tmp)
    assert r.returncode == 2 and b"name it /dev/stdin" in r.stderr


def _piped_runs(src, fifo, out) -> dict[str, str]:
    """Each way of piping ``src`` into dedup without saying its format, as a shell command that
    writes ``out``."""
    nd = f"{sys.executable} -m neardup dedup"
    return {
        "redirect /dev/stdin": f"{nd} /dev/stdin -o {out} -q < {src}",
        "cat | /dev/stdin": f"cat {src} | {nd} /dev/stdin -o {out} -q",
        "<(cmd)": f"{nd} <(cat {src}) -o {out} -q",
        "/proc/self/fd/0": f"cat {src} | {nd} /proc/self/fd/0 -o {out} -q",
        "/dev/fd/0": f"cat {src} | {nd} /dev/fd/0 -o {out} -q",
        "FIFO": f"cat {src} > {fifo} & {nd} {fifo} -o {out} -q; wait",
        "staged": f"cat {src} | {nd} /dev/stdin --shard-docs 5 -o {out} -q",
    }


@pytest.mark.slow
def test_piped_jsonl_is_read_as_jsonl_whatever_its_name(tmp_path):
    # a pipe's name says nothing of its format: its content does (JSONL starts with '{')
    src = tmp_path / "in.jsonl"
    _jsonl(src, [*ROWS, dict(ROWS[0], id="copy")])
    want = [r["id"] for r in ROWS]
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    out = tmp_path / "s.jsonl"
    for how, cmd in _piped_runs(src, fifo, out).items():
        r = _neardup(tmp=tmp, shell=cmd)
        assert r.returncode == 0, (how, r.stderr)
        assert out.is_file() and _kept_ids(out) == want, how
        out.unlink()
        assert os.listdir(tmp) == [], how


@pytest.mark.slow
def test_piped_text_without_format_is_refused_asking_for_it(tmp_path):
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    out = tmp_path / "s.jsonl"
    for stdin in (b"plain text, not records\n", b"", b"  \n\n"):
        r = _neardup("dedup", "/dev/stdin", "-o", str(out), tmp=tmp, stdin=stdin)
        r.stderr = r.stderr.decode()
        err = _one_line_error(r)
        assert err.startswith("neardup: error: /dev/stdin: ") and "--format" in err, err
        assert sorted(os.listdir(tmp_path)) == ["tmp"] and os.listdir(tmp) == []


def test_text_inputs_never_turn_a_file_output_into_a_directory(tmp_path):
    docs = tmp_path / "docs"
    docs.mkdir()
    for r in ROWS:
        (docs / f"{r['id']}.txt").write_text(r["text"])
    for out in ("s.jsonl", "s.parquet", "s.ndjson.gz"):
        r = invoke("neardup", "dedup", str(docs), "-o", str(tmp_path / out), "-q", text=True)
        err = _one_line_error(r)
        assert err.startswith(f"neardup: error: {tmp_path / out}: ") and "--format" in err, err
        assert sorted(os.listdir(tmp_path)) == ["docs"]
    # a directory output for them is as before
    r = invoke("neardup", "dedup", str(docs), "-o", str(tmp_path / "kept"), "-q", text=True)
    assert r.returncode == 0, r.stderr
    assert len(os.listdir(tmp_path / "kept")) == len(ROWS)


@pytest.mark.slow
@pytest.mark.parametrize("how", ["shard-docs", "work-dir", "workers", "process-substitution"])
def test_a_staged_run_reads_a_pipe_from_its_copy(tmp_path, how):
    src = tmp_path / "in.jsonl"
    _jsonl(src, [*ROWS, dict(ROWS[2], id="copy")])
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    out = tmp_path / "o.jsonl"
    nd = f"{sys.executable} -m neardup dedup"
    opts = f"--format jsonl --shard-docs 5 -o {out} -q"
    cmd = {
        "shard-docs": f"cat {src} | {nd} /dev/stdin {opts}",
        "work-dir": f"cat {src} | {nd} /dev/stdin {opts} --work-dir {tmp_path / 'work'}",
        "workers": f"cat {src} | {nd} /dev/stdin {opts} --workers 1",
        "process-substitution": f"{nd} <(cat {src}) {opts} --threads 2",
    }[how]
    if how == "workers":
        pytest.importorskip("distributed")
    r = _neardup(tmp=tmp, shell=cmd)
    assert r.returncode == 0, r.stderr
    assert _kept_ids(out) == [r["id"] for r in ROWS]
    assert [p for p in os.listdir(tmp) if "neardup-input" in p] == []


def test_a_character_device_is_refused_before_anything_is_copied(tmp_path, monkeypatch):
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    monkeypatch.setenv("TMPDIR", str(tmp))
    monkeypatch.setattr(tempfile, "tempdir", None)  # TMPDIR read again
    for dev in ("/dev/zero", "/dev/null"):
        r = invoke("neardup", "dedup", dev, "-o", str(tmp_path / "z.jsonl"), "--format", "jsonl",
                   "-q", text=True)  # fmt: skip
        err = _one_line_error(r)
        assert err.startswith(f"neardup: error: {dev}: is a character device"), err
        assert os.listdir(tmp) == [] and sorted(os.listdir(tmp_path)) == ["tmp"]
    with pytest.raises(InputError, match="is a character device"):
        neardup.dedup(InputPath("/dev/zero"), output=str(tmp_path / "z.jsonl"), fmt="jsonl")


@pytest.mark.parametrize("fmt", ["jsonl", "auto", "text"])
def test_a_pipe_without_line_ends_stops_its_copy_at_the_record_limit(tmp_path, monkeypatch, fmt):
    from neardup import config

    monkeypatch.setattr(config, "MAX_RECORD_BYTES", 1 << 20)
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    # a writer of 8 MiB without a line end: {"text": "aaaa...
    writer = subprocess.Popen(
        ["sh", "-c", f"{{ printf '{{\"text\": \"'; head -c 8M /dev/zero | tr '\\0' a; }} > {fifo}"],
        stderr=subprocess.DEVNULL,
    )
    try:
        out = tmp_path / "out"
        r = invoke("neardup", "dedup", str(fifo), "--format", fmt, "--temp-dir", str(tmp),
                   "-o", str(out), "-q", text=True)  # fmt: skip
        err = _one_line_error(r)
        assert err.startswith(f"neardup: error: {fifo}:1: more than 1048576 bytes"), err
        assert os.listdir(tmp) == [] and sorted(os.listdir(tmp_path)) == ["fifo", "tmp"]
    finally:
        writer.kill()
        writer.wait()

"""What the commands promise about users' files: inputs are never overwritten, every output is
checked before work and all are committed together, errors are one line naming the path given."""

from __future__ import annotations

import errno
import json
import os
import stat

import numpy as np
import pytest
from cli import invoke
from servers import small_tmpfs

from neardup.index import Index

DOCS = [
    {"id": "a", "text": "the quick brown fox jumps over the lazy dog near the river bank"},
    {"id": "b", "text": "the quick brown fox jumps over the lazy dog near the river bank!"},
    {"id": "c", "text": "a completely different document about sorted tables and disks"},
]


def _snapshot(d) -> dict[str, bytes | None]:
    """Every path under ``d`` with its bytes (None for directories and links)."""
    out: dict[str, bytes | None] = {}
    for root, dirs, files in os.walk(d):
        for name in dirs + files:
            p = os.path.join(root, name)
            out[os.path.relpath(p, d)] = (
                None if os.path.isdir(p) or os.path.islink(p) else open(p, "rb").read()
            )
    return out


def _corpus(tmp_path, rows=DOCS, name="in.jsonl"):
    p = tmp_path / name
    p.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return p


def _one_line_error(r, code: int = 2) -> str:
    assert r.returncode == code, r.stderr
    # one line (a first run may say before it that it compiles kernels)
    lines = [ln for ln in r.stderr.splitlines() if "compiling kernels for this machine" not in ln]
    assert len(lines) == 1 and "Traceback" not in r.stderr, r.stderr
    return lines[0] + "\n"


@pytest.mark.parametrize(
    "args",
    [
        ["neardup", "dedup", "{in}", "-o", "{d}/kept.jsonl", "--clusters", "{in}"],
        ["neardup", "dedup", "{in}", "-o", "{d}/kept.jsonl", "--drop-list", "{d}/./in.jsonl"],
        ["neardup", "dedup", "{in}", "-o", "{d}/kept.jsonl", "--json-summary", "{d}/link"],
        ["neardup", "dedup", "{in}", "-o", "{d}/kept.jsonl", "--clusters", "{d}/kept.jsonl"],
        ["neardup", "dedup", "{in}", "-o", "-", "--json-summary", "-"],
        ["neardup", "fingerprint", "{in}", "-o", "{in}"],
        ["simhash-find-all", "-i", "{fps}", "-o", "{fps}"],
        ["simhash-find-clusters", "-i", "{fps}", "-o", "{d}/../{base}/fps.txt"],
        ["neardup", "find-all", "{fps}", "-o", "{fps}"],
        ["neardup", "clusters", "{fps}", "-o", "{fps}"],
        ["neardup", "index", "query", "{d}/ix", "{in}", "-o", "{in}"],
        ["neardup", "index", "query", "{d}/ix", "{in}", "-o", "{d}/ix/MANIFEST"],
        ["neardup", "dedup", "{in}", "-o", "{d}/ix/kept.jsonl", "--against", "{d}/ix"],
        ["neardup", "dedup", "{in}", "-o", "{d}/kept.jsonl", "--clusters", "/nonexistent/c"],
        ["neardup", "dedup", "{in}", "-o", "{d}/sub"],
        ["neardup", "dedup", "{in}", "-o", "{d}/kept.jsonl", "--report", "{in}"],
        ["neardup", "dedup", "{in}", "-o", "{d}/kept.jsonl", "--report", "{d}/kept.jsonl"],
        ["neardup", "dedup", "{in}", "-o", "{d}/kept.jsonl", "--report", "{d}/sub"],
        ["neardup", "dedup", "{in}", "-o", "{d}/kept.jsonl", "--report", "{d}/no/r.html"],
        ["neardup", "dedup", "{d}/docs", "-o", "{d}/kept.jsonl", "--clusters", "{d}/docs/a.jsonl"],
        ["neardup", "index", "query", "{d}/ix", "{d}/docs", "-o", "{d}/docs/a.jsonl"],
        ["neardup", "find-all", "{d}/fpsdir", "-o", "{d}/fpsdir/f.txt"],
        ["neardup", "fingerprint", "{d}/docs", "-o", "{d}/docs/a.jsonl"],
        # an input named as a URL is the file it names
        ["neardup", "dedup", "file://{in}", "-o", "{in}"],
        ["neardup", "dedup", "file://{in}", "-o", "{d}/kept.jsonl", "--clusters", "{in}"],
        [
            "neardup",
            "dedup",
            "local://{d}/docs",
            "-o",
            "{d}/kept.jsonl",
            "--drop-list",
            "{d}/docs/a.jsonl",
        ],  # fmt: skip
        ["neardup", "fingerprint", "file://{in}", "-o", "{d}/link"],
        ["neardup", "index", "query", "{d}/ix", "file://{in}", "-o", "{in}"],
        # an index's files are its own, whether or not the run uses it
        ["neardup", "dedup", "{in}", "-o", "{d}/ix/MANIFEST"],
        ["neardup", "dedup", "{in}", "-o", "{d}/kept.jsonl", "--json-summary", "{d}/ixlink/s"],
        ["neardup", "dedup", "{in}", "-o", "{d}/kept.jsonl", "--report", "{d}/ixlink/r.html"],
        ["neardup", "fingerprint", "{in}", "-o", "{d}/ix/fps.txt"],
        ["neardup", "find-all", "{fps}", "-o", "{d}/ixlink/pairs.txt"],
    ],
)
def test_unsafe_outputs_fail_before_any_work_and_change_nothing(tmp_path, args):
    d = tmp_path / "work"
    d.mkdir()
    src = _corpus(d)
    (d / "fps.txt").write_text("1\n3\n7\n")
    (d / "kept.jsonl").write_text("OLD\n")
    (d / "link").symlink_to(src)
    (d / "sub").mkdir()
    (d / "docs").mkdir()
    _corpus(d / "docs", name="a.jsonl")
    (d / "fpsdir").mkdir()
    (d / "fpsdir" / "f.txt").write_text("1\n3\n")
    Index.create(d / "ix", distance=6).close()
    (d / "ixlink").symlink_to(d / "ix")
    before = _snapshot(d)
    sub = {"{in}": str(src), "{d}": str(d), "{fps}": str(d / "fps.txt"), "{base}": "work"}
    argv = list(args)
    for k, v in sub.items():
        argv = [a.replace(k, v) for a in argv]
    r = invoke(argv[0], *argv[1:], text=True)
    err = _one_line_error(r)
    assert (
        "overwrite" in err
        or "same" in err
        or "stdout" in err
        or "index" in err
        or ("does not exist" in err or "is a directory" in err)
    ), err
    assert _snapshot(d) == before


def test_output_checks_come_before_reading_the_input(tmp_path):
    src = _corpus(tmp_path)
    with open(src, "a") as f:
        f.write("{broken\n")
    (tmp_path / "kept.jsonl").write_text("OLD\n")
    r = invoke(
        "neardup", "dedup", str(src), "-o", str(tmp_path / "kept.jsonl"),
        "--clusters", "/nonexistent/c.jsonl", text=True,
    )  # fmt: skip
    err = _one_line_error(r)
    assert "/nonexistent/c.jsonl: directory /nonexistent does not exist" in err
    assert (tmp_path / "kept.jsonl").read_text() == "OLD\n"


def test_a_run_that_fails_late_leaves_every_output_as_it_was(tmp_path, monkeypatch):
    src = _corpus(tmp_path)
    for name in ("kept.jsonl", "c.jsonl", "drop.txt"):
        (tmp_path / name).write_text("OLD\n")
    before = _snapshot(tmp_path)
    import neardup.pipeline.staged as staged

    commit_parts = staged.commit_parts

    def interrupted(*a, **k):  # once every output is staged, before any is committed
        commit_parts(*a, **k)
        raise KeyboardInterrupt

    monkeypatch.setattr(staged, "commit_parts", interrupted)
    r = invoke(
        "neardup", "dedup", str(src), "-o", str(tmp_path / "kept.jsonl"), "-q",
        "--clusters", str(tmp_path / "c.jsonl"), "--drop-list", str(tmp_path / "drop.txt"),
        text=True,
    )  # fmt: skip
    assert r.returncode == 130 and "interrupted; nothing is kept" in r.stderr, r.stderr
    assert _snapshot(tmp_path) == before  # nothing replaced, no temporary file left


def test_all_outputs_appear_together_and_keep_their_permissions(tmp_path):
    src = _corpus(tmp_path)
    kept, clusters, summary = (tmp_path / n for n in ("kept.jsonl", "c.jsonl", "s.json"))
    kept.write_text("OLD\n")
    os.chmod(kept, 0o600)
    r = invoke(
        "neardup", "dedup", str(src), "-o", str(kept), "--clusters", str(clusters),
        "--json-summary", str(summary), "-q", text=True,
    )  # fmt: skip
    assert r.returncode == 0, r.stderr
    assert len(kept.read_text().splitlines()) == 2
    assert json.loads(summary.read_text())["dropped"] == 1
    assert json.loads(clusters.read_text())["members"] == ["a", "b"]
    assert stat.S_IMODE(os.stat(kept).st_mode) == 0o600
    fps = tmp_path / "fps.txt"
    fps.write_text("1\n3\n")
    out = tmp_path / "pairs.json"
    out.write_text("")
    os.chmod(out, 0o600)
    assert invoke("simhash-find-all", "-i", str(fps), "-o", str(out), "-d", "1").returncode == 0
    assert out.read_text() == "[1, 3]\n" and stat.S_IMODE(os.stat(out).st_mode) == 0o600


def test_a_failure_writing_the_report_leaves_no_output_and_no_index_change(tmp_path, monkeypatch):
    pytest.importorskip("matplotlib")
    import neardup.pipeline.report_html as report_html

    src = _corpus(tmp_path)
    (tmp_path / "kept.jsonl").write_text("OLD\n")
    ix = tmp_path / "ix"
    Index.create(ix, distance=6).close()
    before = _snapshot(tmp_path)

    def full_disk(*a, **k):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(report_html, "render", full_disk)
    r = invoke(
        "neardup", "dedup", str(src), "-o", str(tmp_path / "kept.jsonl"), "-q",
        "--clusters", str(tmp_path / "c.jsonl"), "--drop-list", str(tmp_path / "drop.txt"),
        "--json-summary", str(tmp_path / "s.json"), "--report", str(tmp_path / "r.html"),
        "--against", str(ix), "--update", text=True,
    )  # fmt: skip
    assert "No space left on device" in _one_line_error(r)
    # no output replaced or added, no temporary file left, nothing added to the index
    assert _snapshot(tmp_path) == before
    with Index.open(ix) as opened:
        assert len(opened) == 0 and opened.generation == 0


def test_a_failure_saving_the_dataset_leaves_no_output(tmp_path, monkeypatch):
    datasets = pytest.importorskip("datasets")
    datasets.Dataset.from_dict(
        {"id": [r["id"] for r in DOCS], "text": [r["text"] for r in DOCS]}
    ).save_to_disk(str(tmp_path / "ds"))
    (tmp_path / "c.jsonl").write_text("OLD\n")
    before = _snapshot(tmp_path)

    def half_written(self, path, *a, **k):
        with open(os.path.join(path, "data-00000-of-00001.arrow"), "wb") as f:
            f.write(b"half")
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(datasets.Dataset, "save_to_disk", half_written)
    r = invoke(
        "neardup", "dedup", str(tmp_path / "ds"), "-o", str(tmp_path / "kept"), "-q",
        "--clusters", str(tmp_path / "c.jsonl"), "--drop-list", str(tmp_path / "drop.txt"),
        "--json-summary", str(tmp_path / "s.json"), "--report", str(tmp_path / "r.html"),
        text=True,
    )  # fmt: skip
    assert "No space left on device" in _one_line_error(r)
    assert _snapshot(tmp_path) == before


def test_update_checks_ids_against_the_index_before_writing_anything(tmp_path):
    ix = tmp_path / "ix"
    with Index.create(ix, distance=6) as w:
        w.add(np.array([12345], dtype=np.uint64), ids=["c"])  # same id, unrelated document
    src = _corpus(tmp_path)
    before = _snapshot(tmp_path), _snapshot(ix)
    r = invoke(
        "neardup", "dedup", str(src), "-o", str(tmp_path / "kept.jsonl"), "--against", str(ix),
        "--update", "-q", text=True,
    )  # fmt: skip
    err = _one_line_error(r)
    assert f"{src}:3: id 'c' is already in index" in err
    assert (_snapshot(tmp_path), _snapshot(ix)) == before


@pytest.mark.parametrize("command", ["fingerprint", "dedup", "index add", "index query"])
def test_absurd_json_is_a_record_error_skippable(tmp_path, command):
    deep = '{"text": "x", "n": ' + "[" * 100_000 + "]" * 100_000 + "}"
    src = tmp_path / "in.jsonl"
    src.write_text(json.dumps(DOCS[2]) + "\n" + deep + "\n")
    Index.create(tmp_path / "ix", distance=6).close()
    out = tmp_path / "out"
    base = {
        "fingerprint": ["fingerprint", str(src), "-o", str(out)],
        "dedup": ["dedup", str(src), "-o", str(out)],
        "index add": ["index", "add", str(tmp_path / "ix"), str(src)],
        "index query": ["index", "query", str(tmp_path / "ix"), str(src), "-o", str(out)],
    }[command]
    err = _one_line_error(invoke("neardup", *base, text=True))
    assert f"{src}:2: JSON nested more than 256 levels deep" in err
    assert not out.exists()
    r = invoke("neardup", *base, "--skip-bad", text=True)
    assert r.returncode == 0 and "Traceback" not in r.stderr, r.stderr


@pytest.mark.parametrize(
    "lines, args, message",
    [
        ([{"text": "a", "url": "u"}], ["--id-field", "URL"], ":1: missing id field 'URL'"),
        (['{"text": "a", "n": ' + "1" * 4400 + "}"], [], ":1: unusable JSON: Exceeds the limit"),
        ([{"text": "a", "id": 1}, {"text": "b", "id": 1}], [], ":2: index .*: id 1 repeats"),
        ([{"text": "a", "id": 2**70}], [], ":1: index .*: id 1180591620717411303424 does not"),
    ],
)
def test_index_add_errors_name_file_and_line(tmp_path, lines, args, message):
    src = tmp_path / "in.jsonl"
    src.write_text("".join((r if isinstance(r, str) else json.dumps(r)) + "\n" for r in lines))
    Index.create(tmp_path / "ix", distance=3).close()
    err = _one_line_error(invoke("neardup", "index", "add", str(tmp_path / "ix"), str(src), *args,
                                 text=True))  # fmt: skip
    assert pytest.importorskip("re").search(f"{src}{message}", err), err


def test_index_remove_ids_file_errors_name_the_line(tmp_path):
    with Index.create(tmp_path / "ix", distance=3) as ix:
        ix.add([1, 2])
    ids = tmp_path / "ids.txt"
    ids.write_bytes(b"0\n\xff\n")
    err = _one_line_error(invoke("neardup", "index", "remove", str(tmp_path / "ix"),
                                 "--ids-file", str(ids), text=True))  # fmt: skip
    assert f"{ids}:2: not valid UTF-8" in err
    ids.write_bytes(b"0\n" + str(2**64).encode() + b"\n")
    err = _one_line_error(invoke("neardup", "index", "remove", str(tmp_path / "ix"),
                                 "--ids-file", str(ids), text=True))  # fmt: skip
    assert f"{ids}:2: id {2**64} does not fit in int64" in err
    assert len(Index.open(tmp_path / "ix")) == 2


def test_index_create_refuses_a_non_empty_directory(tmp_path):
    d = tmp_path / "d"
    d.mkdir()
    for name in (".draft.tmp", "s12345678.mine.npy", "notes.txt"):
        (d / name).write_text("mine")
    err = _one_line_error(invoke("neardup", "index", "create", str(d), text=True))
    assert "not empty and holds no index" in err
    assert sorted(os.listdir(d)) == [".draft.tmp", "notes.txt", "s12345678.mine.npy"]


def test_running_out_of_memory_is_one_line_saying_what_was_held(tmp_path, monkeypatch):
    import neardup.cli.seed as seed

    def no_memory(*a, **k):
        raise MemoryError

    fps = tmp_path / "fps.txt"
    fps.write_text("1\n2\n")
    monkeypatch.setattr(seed, "format_json_rows", no_memory)
    err = _one_line_error(invoke("simhash-find-all", "-i", str(fps), "-q", text=True), 1)
    assert "out of memory holding the input text, its fingerprints" in err and "split" in err
    import dataclasses

    from neardup.pipeline.stage_table import STAGES

    step = STAGES["decide-all"]
    monkeypatch.setitem(STAGES, "decide-all", dataclasses.replace(step, fn=no_memory))
    src = _corpus(tmp_path)
    for verify in ([], ["--no-verify"]):
        r = invoke(
            "neardup", "dedup", str(src), "-o", str(tmp_path / "k.jsonl"), *verify, text=True
        )
        assert "out of memory holding" in _one_line_error(r, 1)
        assert not (tmp_path / "k.jsonl").exists()


def test_a_full_disk_names_the_output_not_a_temporary_file_or_an_input(tmp_path):
    pages = tmp_path / "pages"
    pages.mkdir()
    for k in range(4):  # 40 kB each: the output's 64 kB disk fills up at the second
        (pages / f"p{k}.txt").write_text(f"page {k} " + " ".join(f"w{k}x{i}" for i in range(6000)))
    with small_tmpfs(tmp_path / "tiny", "64k") as tiny:
        r = invoke("neardup", "dedup", str(pages), "-o", str(tiny / "kept"), "-q", text=True)
        err = _one_line_error(r)
        assert f"{tiny / 'kept'}" in err and "No space left on device" in err, err
        assert os.listdir(tiny) == []  # nothing half-written
        # kept lines written beside their output fill its disk: the output is named
        src = tmp_path / "big.jsonl"
        src.write_text("".join(json.dumps({"id": k, "text": f"doc {k} " + " ".join(
            f"w{k}x{i}" for i in range(400))}) + "\n" for k in range(60)))  # fmt: skip
        r = invoke("neardup", "dedup", str(src), "-o", str(tiny / "k.jsonl"), "-q", text=True)
        err = _one_line_error(r)
        assert f"{tiny / 'k.jsonl'}: No space left on device" in err, err
        assert os.listdir(tiny) == []
    assert sorted(os.listdir(tmp_path)) == ["big.jsonl", "pages", "tiny"]
    if os.path.exists("/dev/full"):
        src = _corpus(tmp_path)
        r = invoke("neardup", "fingerprint", str(src), "-o", "/dev/full", text=True)
        assert "/dev/full: No space left on device" in _one_line_error(r)


def test_ids_are_written_as_standard_json(tmp_path):
    pd = pytest.importorskip("pandas")
    import neardup

    df = pd.DataFrame({"text": [DOCS[0]["text"], DOCS[1]["text"]], "id": [float("nan"), 1.5]})
    out = tmp_path / "c.jsonl"
    neardup.dedup(df, clusters=out)

    def strict(name):
        raise ValueError(f"non-standard JSON constant {name}")

    rows = [json.loads(line, parse_constant=strict) for line in out.read_text().splitlines()]
    assert rows[0]["members"] == ["nan", 1.5]
    src = tmp_path / "in.jsonl"
    src.write_text('{"text": "a", "id": NaN}\n{"text": "b", "id": 2}\n')
    r = invoke("neardup", "fingerprint", str(src), "-o", str(tmp_path / "o.jsonl"), "--skip-bad",
               text=True)  # fmt: skip
    assert r.returncode == 0 and f"{src}:1: id field 'id' is nan" in r.stderr
    assert [json.loads(x)["id"] for x in (tmp_path / "o.jsonl").read_text().splitlines()] == [2]


def test_commands_in_process_put_the_sigterm_handler_back(tmp_path):
    import signal

    before = signal.getsignal(signal.SIGTERM)
    src = _corpus(tmp_path)
    assert (
        invoke("neardup", "dedup", str(src), "-o", str(tmp_path / "k.jsonl"), "-q").returncode == 0
    )
    assert invoke("neardup", "dedup", "/nonexistent.jsonl", "-o", "-").returncode == 2
    assert signal.getsignal(signal.SIGTERM) is before

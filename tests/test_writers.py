"""io/writers: an OutputSet checks every output before work, commits all or none, keeps modes."""

from __future__ import annotations

import errno
import os
import stat
import sys

import pytest

from neardup.errors import InputError
from neardup.io import writers
from neardup.io.writers import OutputSet, atomic_directory, atomic_output


def _listing(d) -> list[str]:
    return sorted(os.listdir(d))


def test_commit_writes_every_output_and_leaves_no_temporary_file(tmp_path):
    with OutputSet() as outs:
        a = outs.file(tmp_path / "a.txt")
        b = outs.file(tmp_path / "b.bin")
        d = outs.directory(tmp_path / "dir")
        with outs.open(a, "w") as f:
            f.write("één\n")
        with outs.open(b) as f:
            f.write(b"\x00\x01")
        with outs.open_directory(d) as tmp:
            (tmp_path / tmp / "x.txt").write_text("x")
        assert _listing(tmp_path)[0].startswith(".")  # staged under temporary names
        outs.commit()
    assert (tmp_path / "a.txt").read_text(encoding="utf-8") == "één\n"
    assert (tmp_path / "b.bin").read_bytes() == b"\x00\x01"
    assert (tmp_path / "dir" / "x.txt").read_text() == "x"
    assert _listing(tmp_path) == ["a.txt", "b.bin", "dir"]


@pytest.mark.parametrize(
    "make, message",
    [
        (lambda p: (p / "in.txt", [p / "in.txt"]), "would overwrite an input"),
        (lambda p: (p / "." / "in.txt", [p / "in.txt"]), "would overwrite an input"),
        (lambda p: (p / "link.txt", [p / "in.txt"]), "would overwrite an input"),
        (lambda p: (p / "hard.txt", [p / "in.txt"]), "would overwrite an input"),
        (lambda p: (p / "sub", [p / "sub"]), "would overwrite an input"),
        (lambda p: (p / "missing" / "o.txt", []), "directory .*missing does not exist"),
        (lambda p: (p / "sub", []), "is a directory"),
        (lambda p: (p / "", []), "is a directory"),
    ],
)
def test_unsafe_outputs_are_refused_when_registered(tmp_path, make, message):
    (tmp_path / "in.txt").write_text("input")
    (tmp_path / "sub").mkdir()
    (tmp_path / "link.txt").symlink_to(tmp_path / "in.txt")
    os.link(tmp_path / "in.txt", tmp_path / "hard.txt")
    before = _listing(tmp_path)
    out, inputs = make(tmp_path)
    with OutputSet(inputs) as outs, pytest.raises(InputError, match=message) as e:
        outs.file(out)
    assert str(e.value).startswith(str(out))  # named as given
    assert "\n" not in str(e.value)
    assert _listing(tmp_path) == before and (tmp_path / "in.txt").read_text() == "input"


def test_outputs_of_one_run_must_differ_and_not_nest(tmp_path):
    with OutputSet() as outs:
        outs.file(tmp_path / "a.txt", "the output")
        with pytest.raises(InputError, match="--clusters and the output are the same file"):
            outs.file(tmp_path / "." / "a.txt", "--clusters")
        outs.directory(tmp_path / "kept", "the output directory")
        with pytest.raises(InputError, match="inside one another"):
            outs.file(tmp_path / "kept" / "c.jsonl", "--clusters")
        outs.file("-", "--json-summary")
        with pytest.raises(InputError, match="both go to stdout"):
            outs.file("-", "--drop-list")


def test_inputs_registered_later_and_protected_directories_are_checked(tmp_path):
    (tmp_path / "ix").mkdir()
    with OutputSet(protect=[tmp_path / "ix"]) as outs:
        with pytest.raises(InputError, match="inside the index"):
            outs.file(tmp_path / "ix" / "MANIFEST")
    with OutputSet() as outs:
        outs.file(tmp_path / "o.txt")
        with pytest.raises(InputError, match="would overwrite an input"):
            outs.add_inputs([tmp_path / "o.txt"])


def test_a_non_empty_output_directory_is_refused(tmp_path):
    (tmp_path / "d").mkdir()
    (tmp_path / "d" / "keep.txt").write_text("mine")
    with pytest.raises(InputError, match="not empty"):
        with atomic_directory(tmp_path / "d"):
            pass
    assert (tmp_path / "d" / "keep.txt").read_text() == "mine"


@pytest.mark.parametrize("interrupt", [KeyboardInterrupt, ValueError, OSError])
def test_an_error_before_commit_leaves_every_target_as_it_was(tmp_path, interrupt):
    (tmp_path / "a.txt").write_text("OLD")
    with pytest.raises(interrupt):
        with OutputSet() as outs:
            a = outs.file(tmp_path / "a.txt")
            b = outs.file(tmp_path / "b.txt")
            with outs.open(a, "w") as f:
                f.write("NEW")
            with outs.open(b, "w") as f:
                f.write("half")
                raise interrupt()
    assert (tmp_path / "a.txt").read_text() == "OLD"
    assert _listing(tmp_path) == ["a.txt"]


def test_a_failed_rename_puts_back_the_outputs_already_committed(tmp_path, monkeypatch):
    (tmp_path / "a.txt").write_text("OLD A")
    real_replace = os.replace
    calls = []

    def replace(src, dst):
        calls.append(dst)
        if len(calls) == 2:
            raise OSError(errno.EIO, "Input/output error", src)
        return real_replace(src, dst)

    with OutputSet() as outs:
        a, b = outs.file(tmp_path / "a.txt"), outs.file(tmp_path / "b.txt")
        for o in (a, b):
            with outs.open(o, "w") as f:
                f.write("NEW")
        monkeypatch.setattr(writers.os, "replace", replace)
        with pytest.raises(OSError) as e:
            outs.commit()
    assert e.value.filename == str(tmp_path / "b.txt")  # the output, not its temporary file
    assert (tmp_path / "a.txt").read_text() == "OLD A"
    assert _listing(tmp_path) == ["a.txt"]


def _three_outputs(outs: OutputSet, tmp_path) -> None:
    """An existing file, a new file, a new directory and stdout, all written ``NEW``."""
    a, b = outs.file(tmp_path / "a.txt"), outs.file(tmp_path / "b.txt")
    d, o = outs.directory(tmp_path / "dir"), outs.file("-")
    for x in (a, b, o):
        with outs.open(x, "w") as f:
            f.write("NEW")
    with outs.open_directory(d) as tmp:
        (tmp_path / tmp / "x.txt").write_text("NEW")


def test_a_change_committed_with_the_outputs_sees_them_or_undoes_them(tmp_path, capfdbinary):
    (tmp_path / "a.txt").write_text("OLD A")
    seen = []

    def index_update():  # runs with every file in place, before stdout is written
        seen.append([(tmp_path / n).read_text() for n in ("a.txt", "b.txt", "dir/x.txt")])
        seen.append(capfdbinary.readouterr().out)

    with OutputSet() as outs:
        _three_outputs(outs, tmp_path)
        outs.commit(then=index_update)
    assert seen == [["NEW"] * 3, b""] and capfdbinary.readouterr().out == b"NEW"

    def index_full():
        raise OSError(errno.ENOSPC, "No space left on device", "ix/MANIFEST")

    before = {n: (tmp_path / n).read_text() for n in ("a.txt", "b.txt", "dir/x.txt")}
    (tmp_path / "b.txt").unlink()
    (tmp_path / "dir" / "x.txt").unlink()
    (tmp_path / "dir").rmdir()
    with OutputSet() as outs:
        _three_outputs(outs, tmp_path)
        with pytest.raises(writers.RolledBack) as e:
            outs.commit(then=index_full)
    # every file as it was, none added, no temporary file left, nothing on stdout
    assert _listing(tmp_path) == ["a.txt"] and (tmp_path / "a.txt").read_text() == before["a.txt"]
    assert capfdbinary.readouterr().out == b""
    assert e.value.left == [] and isinstance(e.value.cause, OSError)
    assert (
        str(e.value) == "[Errno 28] No space left on device: 'ix/MANIFEST'; no output was changed"
    )


def test_an_existing_file_keeps_its_permissions(tmp_path):
    p = tmp_path / "secret.txt"
    p.write_text("old")
    os.chmod(p, 0o600)
    with atomic_output(p, "w") as f:
        f.write("new")
    assert p.read_text() == "new" and stat.S_IMODE(os.stat(p).st_mode) == 0o600
    q = tmp_path / "new.txt"
    with atomic_output(q, "w") as f:
        f.write("x")
    mask = os.umask(0)
    os.umask(mask)
    assert stat.S_IMODE(os.stat(q).st_mode) == 0o666 & ~mask


def test_stdout_and_devices_are_written_at_commit(tmp_path, capfdbinary):
    with OutputSet() as outs:
        o = outs.file("-")
        with outs.open(o) as f:
            f.write(b"row\n")
        assert capfdbinary.readouterr().out == b""
        outs.commit()
    assert capfdbinary.readouterr().out == b"row\n"
    if os.path.exists("/dev/full"):
        with pytest.raises(OSError, match="No space left") as e:
            with atomic_output("/dev/full") as f:
                f.write(b"x" * 10)
        assert e.value.filename == "/dev/full"


def test_write_errors_name_the_output_not_its_temporary_file(tmp_path, monkeypatch):
    with OutputSet() as outs:
        o = outs.file(tmp_path / "out.txt")
        with pytest.raises(OSError) as e, outs.open(o) as f:
            f.write(b"x")
            raise OSError(errno.ENOSPC, "No space left on device")
    assert e.value.filename == str(tmp_path / "out.txt")
    assert _listing(tmp_path) == []


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes anywhere")
def test_an_unwritable_directory_is_refused_up_front(tmp_path):
    d = tmp_path / "ro"
    d.mkdir()
    os.chmod(d, 0o555)
    try:
        with OutputSet() as outs, pytest.raises(InputError, match="permission denied"):
            outs.file(d / "o.txt")
    finally:
        os.chmod(d, 0o755)


def test_outputs_that_cannot_be_put_back_are_named(tmp_path, monkeypatch):
    (tmp_path / "a.txt").write_text("OLD A")
    (tmp_path / "b.txt").write_text("OLD B")
    real_replace = os.replace

    def replace(src, dst):  # putting a.txt back fails (its backup is a hard link ".a.txt.*")
        if os.path.basename(src).startswith(".a.txt.") and src.endswith(".old.tmp"):
            raise OSError(errno.EIO, "Input/output error", src)
        return real_replace(src, dst)

    def index_full():
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(writers.os, "replace", replace)
    with OutputSet() as outs:
        a, b, c = (outs.file(tmp_path / n) for n in ("a.txt", "b.txt", "c.txt"))
        for o in (a, b, c):
            with outs.open(o, "w") as f:
                f.write("NEW")
        with pytest.raises(writers.RolledBack) as e:
            outs.commit(then=index_full)
    assert [o.path for o in e.value.left] == [str(tmp_path / "a.txt")]
    assert str(e.value).endswith(
        f"; {tmp_path / 'a.txt'} already written (could not be put back); "
        f"{tmp_path / 'b.txt'}, {tmp_path / 'c.txt'} left as they were"
    )
    assert (tmp_path / "a.txt").read_text() == "NEW" and (tmp_path / "b.txt").read_text() == "OLD B"
    assert not (tmp_path / "c.txt").exists()


def test_a_zst_output_without_zstandard_fails_before_any_work(monkeypatch, tmp_path):
    from cli import invoke

    from neardup._optional import MissingDependency

    monkeypatch.setitem(sys.modules, "zstandard", None)  # as if not installed
    with pytest.raises(MissingDependency, match="zstandard"), OutputSet() as outs:
        outs.file(tmp_path / "kept.jsonl.zst")
    docs = tmp_path / "docs.jsonl"
    docs.write_text('{"id": 1, "text": "a b c d e f"}\n')
    r = invoke("neardup", "dedup", str(docs), "-o", str(tmp_path / "k.jsonl.zst"), text=True)
    assert r.returncode == 2
    assert "zstandard" in r.stderr and "documents read" not in r.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["docs.jsonl"]

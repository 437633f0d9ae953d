"""One command-line house style: help for every option, --version everywhere, defaults that agree,
summaries with correct plurals and sizes, directories wherever files go, one progress policy,
and one line naming the extra for every missing optional dependency."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys

import click
import pytest
from cli import invoke

from neardup import __version__, config
from neardup.cli import progress
from neardup.cli.main import cli
from neardup.cli.progress import Progress, resolve_mode
from neardup.cli.seed import find_all_command, find_clusters_command
from neardup.io.display import plural, saved, size

SAMPLE = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "data", "sample")
CORPUS = os.path.join(SAMPLE, "corpus.jsonl")
ROOTS = {"neardup": cli, "simhash-find-all": find_all_command,
         "simhash-find-clusters": find_clusters_command}  # fmt: skip


def _commands():
    for tool, root in ROOTS.items():
        todo = [((tool,), root)]
        while todo:
            path, cmd = todo.pop()
            yield path, cmd
            if isinstance(cmd, click.Group):
                todo += [((*path, n), c) for n, c in cmd.commands.items()]


ALL = sorted(_commands(), key=lambda x: x[0])


def test_every_command_and_option_is_described():
    missing = []
    for path, cmd in ALL:
        if not cmd.help:
            missing.append(" ".join(path))
        for p in cmd.params:
            if isinstance(p, click.Option) and not p.help:
                missing.append(f"{' '.join(path)} {'/'.join(p.opts)}")
    assert missing == []


@pytest.mark.parametrize("path", [p for p, _ in ALL], ids=" ".join)
def test_version_everywhere(path):
    r = invoke(path[0], *path[1:], "--version", text=True)
    assert r.returncode == 0, r.stderr
    assert r.stdout == f"{path[0]}, version {__version__}\n"


def test_python_dash_m_neardup():
    r = subprocess.run([sys.executable, "-m", "neardup", "--version"], capture_output=True,
                       text=True, timeout=120)  # fmt: skip
    assert r.returncode == 0 and r.stdout == f"neardup, version {__version__}\n"


def test_plurals_and_sizes():
    assert plural(1, "cluster") == "1 cluster" and plural(2, "cluster") == "2 clusters"
    assert plural(1200, "entry", "entries") == "1,200 entries"
    assert size(512) == "512 B" and size(161_300) == "161.3 kB" and size(-1) == "-1 B"
    assert saved(1000, 1001) == "1 B larger" and saved(1_400_000, 1_200_000) == "200.0 kB saved"


@pytest.mark.slow
def test_dedup_summary_speaks_singular_and_never_negative_savings(tmp_path):
    src = tmp_path / "d.jsonl"
    # one pair of near-duplicates, and a last line without its newline (the output adds one)
    text = "the quick brown fox jumps over the lazy dog near the river bank today"
    src.write_text(json.dumps({"text": text}) + "\n" + json.dumps({"text": text + "!"}))
    r = invoke("neardup", "dedup", str(src), "-o", str(tmp_path / "o.jsonl"), text=True)
    assert r.returncode == 0, r.stderr
    assert "2 documents fingerprinted, 1 cluster found" in r.stderr
    assert " saved" in r.stderr and "-" not in r.stderr.split("bytes")[1].split("\n")[0]
    src.write_text(json.dumps({"text": text}))  # nothing dropped, one byte added
    r = invoke("neardup", "dedup", str(src), "-o", str(tmp_path / "p.jsonl"), text=True)
    assert "1 document fingerprinted, 0 clusters found" in r.stderr
    assert "1 B larger" in r.stderr


def test_index_defaults_agree_with_dedup(tmp_path):
    ix = str(tmp_path / "seen.idx")
    r = invoke("neardup", "index", "create", ix, text=True)
    assert r.returncode == 0 and "distance 6" in r.stderr
    r = invoke("neardup", "dedup", CORPUS, "-o", str(tmp_path / "k.jsonl"), "--against", ix,
               "--update", "-q")  # fmt: skip
    assert r.returncode == 0, r.stderr
    again = invoke("neardup", "index", "create", ix, text=True)
    assert again.returncode == 2 and again.stderr.count("\n") == 1
    assert "neardup index add" in again.stderr and "Index.open" not in again.stderr
    r = invoke("neardup", "index", "compact", ix, text=True)
    assert r.returncode == 0
    assert r.stderr.startswith(f"neardup index: compacted {ix}: ")
    assert "merged into 1 run, 1,026 entries" in r.stderr  # the 1,200 less 174 planted copies


def test_directories_wherever_files_go(tmp_path):
    d = tmp_path / "docs"
    (d / "sub").mkdir(parents=True)
    (d / "a.txt").write_text("the first document about cats and dogs")
    (d / "sub" / "b.txt").write_text("a second document about birds and bees")
    by_dir = invoke("neardup", "fingerprint", str(d) + "/", "-q", text=True)
    by_files = invoke("neardup", "fingerprint", str(d / "a.txt"), str(d / "sub" / "b.txt"), "-q",
                      text=True)  # fmt: skip
    assert by_dir.returncode == 0, by_dir.stderr
    assert by_dir.stdout == by_files.stdout and len(by_dir.stdout.split()) == 2
    ix = str(tmp_path / "i.idx")
    assert invoke("neardup", "index", "create", ix).returncode == 0
    r = invoke("neardup", "index", "add", ix, str(d), text=True)
    assert r.returncode == 0, r.stderr
    assert "added 2 fingerprints" in r.stderr


def test_fingerprint_summary_line_and_no_bar_in_redirected_stderr(tmp_path):
    r = invoke("neardup", "fingerprint", CORPUS, "-o", str(tmp_path / "f.txt"), text=True)
    assert r.returncode == 0
    assert (
        r.stderr
        == f"neardup fingerprint: 1,200 documents fingerprinted, written to {tmp_path / 'f.txt'}\n"
    )


def test_progress_policy(monkeypatch, tmp_path):
    class Tty:
        def isatty(self):
            return True

    assert resolve_mode("auto", stream=Tty()) == "bar"
    assert resolve_mode("auto", stream=open(os.devnull, "w")) == "none"  # noqa: SIM115
    assert resolve_mode("bar", quiet=True) == "none" and resolve_mode("log") == "log"
    monkeypatch.setattr(config, "PROGRESS_LOG_SECONDS", 0.0)
    r = invoke("neardup", "dedup", CORPUS, "-o", str(tmp_path / "k.jsonl"), "--progress", "log",
               text=True)  # fmt: skip
    lines = r.stderr.splitlines()  # each stage's tasks as they finish, then its rate
    assert "neardup dedup: scan 2/2 tasks" in lines and "neardup dedup: write 0/2 tasks" in lines
    assert any(ln.startswith("neardup dedup: write 2/2 tasks, ") and "documents/s" in ln
               for ln in lines)  # fmt: skip
    quiet = invoke("neardup", "dedup", CORPUS, "-o", str(tmp_path / "q.jsonl"), "--progress",
                   "none", "--json-summary", str(tmp_path / "s.json"), text=True)  # fmt: skip
    assert not re.search(r"\d+/\d+ task", quiet.stderr) and "ETA" not in quiet.stderr
    monkeypatch.setattr(progress, "BAR_DELAY", 0.0)
    bar = invoke("neardup", "fingerprint", CORPUS, "-o", str(tmp_path / "f.txt"), "--progress",
                 "bar", text=True)  # fmt: skip
    assert "fingerprint:" in bar.stderr and "%|" in bar.stderr and "B/s" in bar.stderr
    p = Progress("x", "log")
    p.stage("read", 1000)
    p.update(250, 10)
    assert p.line(1.0).startswith("read 25% (250 B of 1.0 kB), 250 B/s, 10 documents, ETA 0:03")


def test_missing_optional_dependencies_are_one_line(monkeypatch, tmp_path):
    pa = pytest.importorskip("pyarrow")
    pq = pytest.importorskip("pyarrow.parquet")
    src = tmp_path / "d.parquet"
    pq.write_table(pa.table({"text": ["a b c", "d e f"]}), src)
    cases = {
        "pyarrow": (["dedup", str(src), "-o", str(tmp_path / "o.parquet")], "neardup[parquet]"),
        "distributed": (["dedup", CORPUS, "-o", str(tmp_path / "o.jsonl"), "--workers", "2"],
                        "neardup[dask]"),
        "matplotlib": (["dedup", CORPUS, "-o", str(tmp_path / "r.jsonl"), "--report",
                        str(tmp_path / "r.html")], "neardup[report]"),
        "ray": (["dedup", CORPUS, "-o", str(tmp_path / "o.jsonl"), "--ray", "local"],
                "neardup[ray]"),
    }  # fmt: skip
    for module, (args, extra) in cases.items():
        with monkeypatch.context() as m:
            m.setitem(sys.modules, module, None)
            for sub in [k for k in sys.modules if k.startswith(module + ".")]:
                m.setitem(sys.modules, sub, None)
            r = invoke("neardup", *args, text=True)
        assert r.returncode == 2, (module, r.stderr)
        assert r.stderr.count("\n") == 1 and f'pip install "{extra}"' in r.stderr, r.stderr
    assert not (tmp_path / "r.jsonl").exists()  # the report's dependency is checked first


def test_progress_for_index_inputs_and_directories_for_find_all(monkeypatch, tmp_path):
    monkeypatch.setattr(config, "PROGRESS_LOG_SECONDS", 0.0)
    ix = str(tmp_path / "i.idx")
    assert invoke("neardup", "index", "create", ix).returncode == 0
    r = invoke("neardup", "index", "add", ix, CORPUS, "--progress", "log", text=True)
    assert r.returncode == 0, r.stderr
    assert re.search(r"neardup index: fingerprint \d+% \(.* of 1\.4 MB\)", r.stderr)
    d = tmp_path / "fps"
    d.mkdir()
    (d / "a.txt").write_text("5\n7\n")
    (d / "b.txt").write_text("1024\n")
    r = invoke("neardup", "find-all", str(d), "-d", "1", "-q", text=True)
    assert r.returncode == 0, r.stderr
    assert r.stdout == "[0, 1]\n"


def test_the_command_lists_are_not_cut_short():
    for args in ([], ["index"]):
        r = invoke("neardup", *args, "--help", text=True)
        commands = r.stdout.split("Commands:")[1]
        assert r.returncode == 0 and "..." not in commands, commands
        assert len(commands.strip().splitlines()) >= 6


#: a count and a noun that disagree ("1 shards"), or a count of thousands without separators
_ONE_AND_MANY = re.compile(
    r"(?<![\d.,/])1 (documents|shards|clusters|tasks|fingerprints|entries|workers|threads|runs|"
    r"pairs|queries|records)\b(?!/s)"
)
_NO_SEPARATOR = re.compile(r"(?<![\w.,/:-])\d{4,}(?![\w.,/:-])")


def _count_faults(text: str) -> list[str]:
    return [m.group() for m in (*_ONE_AND_MANY.finditer(text), *_NO_SEPARATOR.finditer(text))]


def test_counts_agree_with_their_nouns_and_carry_separators(monkeypatch, tmp_path):
    """What the commands print of a staged dedup that updates an index, of one document and of
    1,200: "1 shard", "added 1,026 documents", never "1 shards" or "added 1026"."""
    assert _count_faults("1 shards, added 1026 documents") == ["1 shards", "1026"]
    assert _count_faults("1 shard, 11 documents, 1,026 kept in 0.25 s, part-00001.jsonl") == []
    monkeypatch.setattr(config, "PROGRESS_LOG_SECONDS", 0.0)
    one = tmp_path / "one.jsonl"
    one.write_text(json.dumps({"id": "a", "text": "a single document of a few words"}) + "\n")
    for name, src in (("one", str(one)), ("many", CORPUS)):
        ix = str(tmp_path / f"{name}.idx")
        said = [invoke("neardup", "index", "create", ix, text=True)]
        said.append(invoke("neardup", "dedup", src, "-o", str(tmp_path / f"{name}.kept.jsonl"),
                           "--shard-docs", "5000", "--against", ix, "--update", "--progress",
                           "log", text=True))  # fmt: skip
        said.append(invoke("neardup", "index", "compact", ix, text=True))
        assert [r.returncode for r in said] == [0, 0, 0], "".join(r.stderr for r in said)
        stderr = "".join(r.stderr for r in said)
        assert _count_faults(stderr) == [], stderr
        want = ("1 document fingerprinted, 0 clusters", "added 1 document to") if name == "one" \
            else ("1,200 documents fingerprinted, 130 clusters", "added 1,026 documents to")  # fmt: skip
        assert all(w in stderr for w in want), stderr
        assert re.search(r"scan 1/1 task\b", stderr), stderr


@pytest.mark.slow
def test_a_missing_package_is_named_before_the_compile_notice(tmp_path):
    """A first run (nothing compiled) that needs a package not installed says so in its only
    line, without announcing a compile it will not do (and so again on the next try)."""
    pa = pytest.importorskip("pyarrow")
    pq = pytest.importorskip("pyarrow.parquet")
    src = tmp_path / "d.parquet"
    pq.write_table(pa.table({"text": ["a b c d e", "f g h i j"]}), src)
    zst = tmp_path / "d.jsonl.zst"
    zst.write_bytes(b"(\xb5/\xfd")  # never read: the check comes first
    block = tmp_path / "block"
    block.mkdir()
    (block / "sitecustomize.py").write_text(
        "import os, sys\n"
        "class Block:\n"
        "    def find_spec(self, name, path=None, target=None):\n"
        "        if name.split('.')[0] in os.environ['BLOCKED'].split(','):\n"
        "            raise ModuleNotFoundError(f'No module named {name!r}', name=name)\n"
        "sys.meta_path.insert(0, Block())\n"
    )
    ix = tmp_path / "ix"
    assert invoke("neardup", "index", "create", str(ix)).returncode == 0
    cases = [
        ("pyarrow", ["dedup", str(src), "-o", str(tmp_path / "o.parquet")], "parquet"),
        ("zstandard", ["dedup", str(zst), "-o", str(tmp_path / "o.jsonl")], "zstd"),
        ("dask,distributed", ["dedup", CORPUS, "-o", str(tmp_path / "w.jsonl"), "--workers",
                              "2"], "dask"),
        ("pyarrow", ["index", "add", str(ix), str(src)], "parquet"),
        ("zstandard", ["fingerprint", str(zst)], "zstd"),
    ]  # fmt: skip
    cache = tmp_path / "numba-cache"
    for blocked, args, extra in cases:
        env = {
            **os.environ,
            "BLOCKED": blocked,
            "NUMBA_CACHE_DIR": str(cache),
            "PYTHONPATH": os.pathsep.join([str(block), os.environ.get("PYTHONPATH", "")]),
        }
        r = subprocess.run([sys.executable, "-m", "neardup", *args], capture_output=True,
                           text=True, env=env, timeout=300)  # fmt: skip
        assert r.returncode == 2, r.stderr
        assert r.stderr.count("\n") == 1 and f'pip install "neardup[{extra}]"' in r.stderr, (
            args, r.stderr)  # fmt: skip

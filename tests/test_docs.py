"""Every code example in README.md and docs/ runs, so none can rot.

The fenced ``sh`` and ``python`` blocks of each page run in order, in a fresh directory holding
the sample data (``data/sample/``, ``data/fingerprints.txt``): shell blocks with bash (errexit,
pipefail), Python blocks in one namespace per page, so a page's later blocks can use what its
earlier ones made. A block right after ``<!-- skip: REASON -->`` is not run; such blocks are
counted and kept few. ``pip install`` lines are taken as done: the suite runs where neardup and
its test extra are installed. ``text`` blocks (outputs, synopses) are not run.

The commands run this checkout's neardup (``neardup``, ``simhash-find-all``,
``simhash-find-clusters`` and ``python`` on PATH point to this interpreter and this source).
"""

from __future__ import annotations

import os
import re
import shutil
import socket
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import NamedTuple

import pytest

import neardup

ROOT = Path(__file__).resolve().parent.parent
SRC = Path(neardup.__file__).resolve().parent.parent
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
RUN = {"sh", "python"}
#: most blocks that may be skipped outside the benchmark pages (network, servers, the suite)
MAX_SKIPPED = 6
#: most skipped blocks per benchmark page (its commands take minutes to hours)
MAX_SKIPPED_PER_BENCHMARK = 1
SKIP = re.compile(r"^<!--\s*skip:\s*(\S.*?)\s*-->$")
FENCE = re.compile(r"^```\s*([\w-]*)\s*$")
BENCH = re.compile(r"python3? (bench/[\w/]+\.py)((?: [^`\n]*)?)")


class Block(NamedTuple):
    page: Path
    line: int  # 1-based line of the opening fence
    lang: str
    code: str
    skip: str | None  # the reason, when marked to be skipped


def blocks(page: Path) -> list[Block]:
    """The fenced code blocks of a Markdown page, in order."""
    lines = page.read_text(encoding="utf-8").splitlines()
    found: list[Block] = []
    i = 0
    while i < len(lines):
        m = FENCE.match(lines[i])
        if not m:
            i += 1
            continue
        start, lang = i, m.group(1)
        j = i + 1
        while j < len(lines) and lines[j].strip() != "```":
            j += 1
        assert j < len(lines), f"{page}:{start + 1}: code block never closed"
        before = [ln.strip() for ln in lines[:start] if ln.strip()]
        marker = SKIP.match(before[-1]) if before else None
        code = "\n".join(lines[start + 1 : j]) + "\n"
        found.append(Block(page, start + 1, lang, code, marker.group(1) if marker else None))
        i = j + 1
    return found


def name(page: Path) -> str:
    return str(page.relative_to(ROOT))


def runnable_pages() -> list[Path]:
    return [p for p in PAGES if any(b.lang in RUN and b.skip is None for b in blocks(p))]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _workdir(tmp: Path) -> dict[str, str]:
    """Sample data in ``tmp``, this checkout's commands on PATH; the environment to run in."""
    shutil.copytree(ROOT / "data" / "sample", tmp / "data" / "sample")
    shutil.copy(ROOT / "data" / "fingerprints.txt", tmp / "data" / "fingerprints.txt")
    bin_dir = tmp / ".bin"
    bin_dir.mkdir()
    scripts = {
        "neardup": "from neardup.cli.main import main",
        "simhash-find-all": "from neardup.cli.seed import find_all_main as main",
        "simhash-find-clusters": "from neardup.cli.seed import find_clusters_main as main",
    }
    for tool, imp in scripts.items():
        path = bin_dir / tool
        path.write_text(f'#!{sys.executable}\n{imp}\n\nif __name__ == "__main__":\n    main()\n')
        path.chmod(0o755)
    for tool in ("python", "python3"):
        (bin_dir / tool).symlink_to(sys.executable)
    env = dict(os.environ)
    env["PATH"] = f"{bin_dir}{os.pathsep}{env.get('PATH', '')}"
    env["PYTHONPATH"] = os.pathsep.join([str(SRC), env.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    env["PORT"] = str(_free_port())
    return env


def _run_sh(block: Block, env: dict[str, str], cwd: Path) -> None:
    script = "set -euo pipefail\npip() { return 0; }  # installs are done where the tests run\n"
    proc = subprocess.run(
        ["bash", "-c", script + block.code],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    if proc.returncode != 0:
        pytest.fail(
            f"{name(block.page)}:{block.line}: the sh block exited with status "
            f"{proc.returncode}\n--- block\n{block.code}--- stdout\n{proc.stdout[-4000:]}"
            f"--- stderr\n{proc.stderr[-4000:]}"
        )


def _run_python(block: Block, namespace: dict) -> None:
    code = compile(block.code, f"{name(block.page)}:{block.line}", "exec")
    exec(code, namespace)


#: pages whose examples take several seconds (many commands, each a fresh process): the full
#: run runs them, the quick run (``-m "not slow"``) the others
SLOW_PAGES = {
    "README.md", "docs/guides/dedup.md", "docs/guides/index.md", "docs/guides/dask.md",
    "docs/guides/fingerprints.md", "docs/guides/threshold.md", "docs/guides/report.md",
    "docs/guides/search.md", "docs/guides/service.md", "docs/guides/gpu.md", "docs/guides/memory.md",
    "docs/guides/cluster.md", "docs/guides/coming-from.md",
}  # fmt: skip


def _page_params() -> list:
    return [
        pytest.param(p, id=name(p), marks=[pytest.mark.slow] if name(p) in SLOW_PAGES else [])
        for p in runnable_pages()
    ]


@pytest.mark.scale
@pytest.mark.parametrize("page", _page_params())
def test_page_examples_run(page: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    env = _workdir(tmp_path)
    for key in ("PATH", "PYTHONPATH", "PORT"):
        monkeypatch.setenv(key, env[key])
    monkeypatch.chdir(tmp_path)
    namespace: dict = {"__name__": "__docs__"}
    ran = 0
    for block in blocks(page):
        if block.lang not in RUN or block.skip is not None:
            continue
        if block.lang == "sh":
            _run_sh(block, env, tmp_path)
        else:
            _run_python(block, namespace)
        ran += 1
    assert ran > 0


def test_skipped_blocks_are_few_and_say_why() -> None:
    skipped = [b for p in PAGES for b in blocks(p) if b.skip is not None]
    for b in skipped:
        assert b.lang in RUN, f"{name(b.page)}:{b.line}: a skip marker on a block that never runs"
    bench = ROOT / "docs" / "benchmarks"
    others = [b for b in skipped if bench not in b.page.parents]
    assert len(others) <= MAX_SKIPPED, [f"{name(b.page)}:{b.line}: {b.skip}" for b in others]
    for page in {b.page for b in skipped} - {b.page for b in others}:
        count = sum(b.page == page for b in skipped)
        assert count <= MAX_SKIPPED_PER_BENCHMARK, f"{name(page)}: {count} skipped blocks"


def test_every_page_is_found_and_has_runnable_examples() -> None:
    assert ROOT / "README.md" in PAGES
    runnable = runnable_pages()
    assert ROOT / "README.md" in runnable
    assert ROOT / "docs" / "getting-started.md" in runnable
    assert len(runnable) >= 10, [name(p) for p in runnable]


def test_blocks_parser_reads_markers_and_languages(tmp_path: Path) -> None:
    page = tmp_path / "page.md"
    page.write_text(
        textwrap.dedent(
            """\
            text
            ```sh
            echo one
            ```

            <!-- skip: needs s3 -->

            ```python
            x = 1
            ```
            ```text
            out
            ```
            """
        )
    )
    found = blocks(page)
    assert [(b.lang, b.line, b.skip) for b in found] == [
        ("sh", 2, None),
        ("python", 8, "needs s3"),
        ("text", 11, None),
    ]
    assert found[0].code == "echo one\n"


def test_benchmark_commands_name_options_their_script_has() -> None:
    """Every ``python bench/X.py --option`` cited in the docs names a script and options it has."""
    cited = 0
    for page in PAGES:
        for m in BENCH.finditer(page.read_text(encoding="utf-8")):
            script = ROOT / m.group(1)
            assert script.is_file(), f"{name(page)}: {m.group(0)!r} names no script"
            source = script.read_text(encoding="utf-8")
            for option in re.findall(r"(?<![\w-])(--[a-z][\w-]*)", m.group(2)):
                assert f'"{option}"' in source, f"{name(page)}: {script.name} has no {option}"
            cited += 1
    assert cited >= 20


def test_readme_test_command_is_the_one_ci_runs() -> None:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert 'pip install -e ".[test]" && python -m pytest' in readme
    ci = (ROOT / ".ci" / "run").read_text(encoding="utf-8")
    assert 'python3 -m pip install -e ".[test]" && python3 -m pytest' in ci
    assert "mkdocs build --strict" in ci


def test_readme_links_point_to_files_that_exist() -> None:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    links = re.findall(r"\]\(([^)#\s]+)(?:#[^)]*)?\)", readme)
    local = [link for link in links if "://" not in link]
    assert len(local) >= 5
    for link in local:
        assert (ROOT / link).exists(), f"README.md links to {link}, which does not exist"


def test_pages_cited_in_the_code_exist() -> None:
    """Docstrings, comments and messages cite docs pages by path; each must exist."""
    cited = set()
    for path in (ROOT / "src" / "neardup").rglob("*.py"):
        source = path.read_text(encoding="utf-8")
        assert "reference/0" not in source and "README" not in source, path
        cited.update(re.findall(r"docs/[\w/.-]+?\.md", source))
    assert "docs/guides/memory.md" in cited
    for page in cited:
        assert (ROOT / page).is_file(), f"the code cites {page}, which does not exist"


def test_api_reference_covers_every_public_name() -> None:
    api = (ROOT / "docs" / "reference" / "api.md").read_text(encoding="utf-8")
    documented = set(re.findall(r"^::: [\w.]+\.(\w+)$", api, flags=re.M))
    public = set(neardup.__all__) - {"__version__"}
    assert public <= documented, sorted(public - documented)


def test_quick_start_output_is_what_the_command_prints(tmp_path: Path) -> None:
    """The quick-start output shown (README and getting started) has the counts the command really
    prints (times and sizes vary from machine to machine, so only the lines of counts count)."""
    pages = (ROOT / "README.md", ROOT / "docs" / "getting-started.md")
    outputs = [next(b.code for b in blocks(page) if b.lang == "text") for page in pages]
    shown = [ln for ln in outputs[0].splitlines() if ln.startswith("neardup dedup:")]
    assert outputs[1] == outputs[0], "the getting-started page shows another quick-start output"
    counted = ("documents read", "clusters", "dropped", "verified")
    env = _workdir(tmp_path)
    proc = subprocess.run(
        ["neardup", "dedup", "data/sample/corpus.jsonl", "--output", "kept.jsonl"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stderr

    def counts(lines: list[str]) -> list[str]:
        out = []
        for ln in lines:
            words = ln.removeprefix("neardup dedup:").split()
            if " ".join(words).startswith(counted):
                out.append(" ".join(w for w in words if not w.endswith(("kB", "MB", "GB"))))
        return out

    printed = counts(proc.stderr.splitlines())
    assert len(printed) == len(counted), proc.stderr
    assert counts(shown) == printed


def test_default_distances_in_the_guides_are_the_codes() -> None:
    """Every "N bits at J" the guides give as a threshold's distance is the code's rule, and the
    fingerprint-only default they name is the code's (no "both default to 6" beside a
    verified dedup that searches at 10)."""
    from neardup.core.decide import DEFAULT_DEDUP_DISTANCE, DEFAULT_DEDUP_THRESHOLD
    from neardup.core.verify import distance_for_threshold

    guides = {
        p.name: p.read_text(encoding="utf-8") for p in (ROOT / "docs" / "guides").glob("*.md")
    }
    rule = re.compile(r"the threshold's distance[^)]*?\((\d+) bits at (0\.\d+), (\d+) at (0\.\d+)")
    claims = [m for text in guides.values() for m in rule.finditer(text)]
    claims += list(re.finditer(r"default the\s+distance chosen for the threshold \((\d+) bits at "
                               r"(0\.\d+), (\d+) at (0\.\d+)", guides["dedup.md"]))  # fmt: skip
    assert len(claims) >= 2
    for m in claims:
        for bits, at in ((m[1], m[2]), (m[3], m[4])):
            assert int(bits) == distance_for_threshold(float(at)), m.group()
    index = " ".join(guides["index.md"].split())
    assert f"`--distance` bits, {DEFAULT_DEDUP_DISTANCE} unless given" in index
    at = f"{distance_for_threshold(DEFAULT_DEDUP_THRESHOLD)} bits at the default "
    assert f"{at}{DEFAULT_DEDUP_THRESHOLD:g}" in index
    assert not any("both default to" in text for text in guides.values())

"""``neardup warmup``: compile every kernel once, for container images and shared installs.

numba compiles each kernel at its first call and caches it (:mod:`neardup.compiled`); a first
run of each command pays for what it uses. ``warmup`` runs the commands themselves on a small
made-up corpus in a temporary directory (ASCII and non-ASCII text, JSONL read with the block
reader, Parquet when pyarrow is installed, an index with and without sketches), so the cache
then holds every kernel those commands compile.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator

import click
import numpy as np

from neardup import compiled, config
from neardup.core.small import SMALL_INPUT
from neardup.io import formats

PROG = "neardup warmup"

_WORDS = (
    "river council library harbour market garden morning station winter ledger bridge orchard "
    "lantern meadow quarry chapel festival archive tram ferry school bakery mill tower"
).split()
_ACCENTS = "café naïve Zürich façade über señor crème brûlée 東京 서울 Ελλάδα Ünïcödé ﬁne ½"


def _corpus(n: int, unicode: bool) -> list[dict[str, object]]:
    """``n`` documents of 40-80 words, every fifth a near copy of the one before (ids: integers
    for ASCII text, strings for the other)."""
    rng = np.random.default_rng(7 + unicode)
    docs: list[dict[str, object]] = []
    for i in range(n):
        if i % 5 == 4:
            words = str(docs[-1]["text"]).split()
            words[int(rng.integers(len(words)))] = "changed"
        else:
            words = [_WORDS[j] for j in rng.integers(0, len(_WORDS), int(rng.integers(40, 80)))]
            if unicode:
                words += _ACCENTS.split()
        docs.append({"id": f"u{i}" if unicode else i, "text": " ".join(words) + "."})
    return docs


def _write_inputs(tmp: str) -> dict[str, str]:
    """The corpus files, by name."""
    paths = {}
    for name, unicode in (("ascii", False), ("unicode", True)):
        paths[name] = os.path.join(tmp, f"{name}.jsonl")
        with open(paths[name], "w", encoding="utf-8") as f:
            f.writelines(json.dumps(d, ensure_ascii=False) + "\n" for d in _corpus(400, unicode))
    paths["lines"] = os.path.join(tmp, "lines.txt")
    with open(paths["lines"], "w", encoding="utf-8") as f:
        f.writelines(str(d["text"]) + "\n" for d in _corpus(200, True))
    paths["fps"] = os.path.join(tmp, "fps.txt")
    fps = np.random.default_rng(3).integers(0, 2**63, SMALL_INPUT + 100, dtype=np.uint64)
    np.savetxt(paths["fps"], fps, fmt="%d")
    paths["one"] = os.path.join(tmp, "one.txt")  # a single query: the index's few-query kernel
    np.savetxt(paths["one"], fps[:1], fmt="%d")
    try:
        import pyarrow as pa
        import pyarrow.parquet as pq
    except ImportError:
        return paths
    paths["parquet"] = os.path.join(tmp, "docs.parquet")
    pq.write_table(pa.Table.from_pylist(_corpus(400, True)), paths["parquet"])
    return paths


def _runs(tmp: str, p: dict[str, str]) -> Iterator[list[str]]:
    """The command lines that, between them, compile every kernel."""
    out = lambda name: os.path.join(tmp, name)  # noqa: E731
    yield ["dedup", p["ascii"], "-o", out("a.jsonl"), "--clusters", out("a.clusters.jsonl")]
    yield ["dedup", p["unicode"], "-o", out("u.jsonl"), "--drop-list", out("u.drops.txt")]
    yield ["dedup", p["unicode"], "--no-verify", "-o", out("n.jsonl")]
    yield ["dedup", p["ascii"], "--candidates", "fingerprint", "-o", out("f.jsonl")]
    yield ["dedup", p["ascii"], "--candidates", "bands", "-o", out("b.jsonl")]
    yield ["fingerprint", p["lines"], "--lines", "-o", out("lines.fps.txt")]
    yield ["find-all", p["fps"], "-o", out("pairs.jsonl")]
    yield ["clusters", p["fps"], "-o", out("clusters.jsonl")]
    yield ["index", "create", out("ix")]
    yield ["index", "add", out("ix"), p["ascii"]]
    yield ["index", "add", out("ix"), "--fingerprints", p["fps"]]
    yield ["index", "query", out("ix"), p["unicode"], "-o", out("q.jsonl")]
    yield ["dedup", p["unicode"], "--against", out("ix"), "-o", out("against.jsonl")]
    yield ["index", "remove", out("ix"), "1", "2"]
    yield ["index", "create", out("ix2")]
    yield ["index", "add", out("ix2"), p["unicode"]]  # string ids
    yield ["index", "query", out("ix2"), p["ascii"], "-o", out("q2.jsonl")]
    yield ["index", "create", out("ix3")]
    yield ["index", "add", out("ix3"), "--fingerprints", p["fps"]]
    yield ["index", "add", out("ix3"), "--fingerprints", p["one"]]
    yield ["index", "query", out("ix3"), "--fingerprints", p["one"], "-o", out("q1.jsonl")]
    yield ["index", "compact", out("ix3")]  # runs without removals: their tables merged
    yield ["index", "compact", out("ix")]
    yield ["index", "create", out("ixs"), "--threshold", "0.8"]
    yield ["index", "add", out("ixs"), p["unicode"]]
    yield ["index", "query", out("ixs"), p["ascii"], "--threshold", "0.8", "-o", out("qs.jsonl")]
    if "parquet" in p:
        yield ["dedup", p["parquet"], "-o", out("p.parquet")]


def _small_runs(tmp: str, p: dict[str, str]) -> Iterator[list[str]]:
    """Command lines that read small files as they are read (in Python, documents as str): the
    fingerprint kernel's variants for str chunks, with and without shingle keys. Each runs in a
    process of its own: a process reuses a variant made for more kinds of text, so only a fresh
    one compiles the variant of its first chunk."""
    out = lambda name: os.path.join(tmp, name)  # noqa: E731
    for name in ("ascii", "unicode"):
        yield ["dedup", p[name], "-o", out(f"s.{name}.jsonl")]
        yield ["fingerprint", p[name], "-o", out(f"s.{name}.fps.txt")]


@contextlib.contextmanager
def _settings() -> Iterator[None]:
    """Small files read with the kernels that large ones use, everything in this process."""
    saved = config.READ_KERNEL_FROM, formats.SMALL_PARSE_BYTES, config.COMPILE_AHEAD
    config.READ_KERNEL_FROM, formats.SMALL_PARSE_BYTES, config.COMPILE_AHEAD = 0, 0, False
    try:
        yield
    finally:
        config.READ_KERNEL_FROM, formats.SMALL_PARSE_BYTES, config.COMPILE_AHEAD = saved


@click.command("warmup", short_help="Compile every kernel once (for container images).")
@click.option("-q", "--quiet", is_flag=True, help="No summary on stderr.")
def warmup(quiet: bool) -> None:
    """Compile every kernel once, into numba's cache, so that no later run pays for it.

    Run it once where neardup is installed: in a container image's build (after pip install),
    or on a shared machine as the user who runs neardup. The cache is numba's (NUMBA_CACHE_DIR
    when set); a neardup upgrade or a new numba compiles again.
    """
    from neardup.cli.main import cli

    if not quiet:
        todo = sum(
            cost for g, (_, _, cost) in compiled.GROUPS.items() if not compiled.is_compiled(g)
        )
        click.echo(f"{PROG}: compiling every kernel not compiled yet (~{todo} s)", err=True)
    t0 = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="neardup-warmup-") as tmp:
        paths = _write_inputs(tmp)
        with _settings():
            for args in _runs(tmp, paths):
                hush = [] if args[:2] in (["index", "create"], ["index", "compact"]) else ["-q"]
                sink = io.StringIO()  # (create and compact say what they did)
                with contextlib.redirect_stdout(sink), contextlib.redirect_stderr(sink):
                    cli.main([*args, *hush], prog_name="neardup", standalone_mode=False)
        for args in _small_runs(tmp, paths):
            r = subprocess.run([sys.executable, "-m", "neardup", *args, "-q"], capture_output=True)
            if r.returncode != 0:
                raise ValueError(f"warmup run {' '.join(args)} failed: {r.stderr.decode()[-300:]}")
    missing = [g for g in compiled.GROUPS if not compiled.is_compiled(g)]
    if missing:  # numba could cache nowhere (see neardup.compiled)
        raise ValueError(f"kernels not cached: {', '.join(missing)}; set NUMBA_CACHE_DIR")
    if not quiet:
        where = compiled.cache_dir_for(compiled.GROUPS["search"][0])
        click.echo(
            f"{PROG}: every kernel compiled in {time.perf_counter() - t0:.1f} s, cached in "
            f"{os.path.dirname(where) if os.environ.get('NUMBA_CACHE_DIR') else where}",
            err=True,
        )

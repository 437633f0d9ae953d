"""Run neardup's console scripts in process (click's CliRunner isolation) or, for the smoke
tests, as the installed scripts next to ``sys.executable`` (found whether or not the
environment's ``bin/`` is on PATH)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections.abc import Callable
from typing import NamedTuple

from click.testing import CliRunner

from neardup.cli.main import main as neardup_main
from neardup.cli.seed import find_all_main, find_clusters_main

ENTRY_POINTS: dict[str, Callable[[list[str] | None], None]] = {
    "neardup": neardup_main,
    "simhash-find-all": find_all_main,
    "simhash-find-clusters": find_clusters_main,
}


class Result(NamedTuple):
    """What a command did: exit status and what it wrote (bytes, or str with ``text=True``)."""

    returncode: int
    stdout: bytes | str
    stderr: bytes | str


def invoke(tool: str, *args: str, input: bytes | str | None = None, text: bool = False) -> Result:
    """Run console script ``tool`` with ``args`` in this process, as its entry point does."""
    runner = CliRunner()
    with runner.isolation(input=input) as (out, err, _):
        try:
            ENTRY_POINTS[tool](list(args))
            code = 0
        except SystemExit as e:
            code = e.code if isinstance(e.code, int) else (0 if e.code is None else 1)
        stdout, stderr = out.getvalue(), err.getvalue()
    if text:
        return Result(code, stdout.decode("utf-8"), stderr.decode("utf-8"))
    return Result(code, stdout, stderr)


def script(tool: str) -> str:
    """Path of the installed console script ``tool`` beside the running interpreter."""
    return os.path.join(os.path.dirname(sys.executable), tool)


def run_script(tool: str, *args: str, input: bytes | None = None) -> subprocess.CompletedProcess:
    """Run the installed console script ``tool`` as a subprocess."""
    return subprocess.run([script(tool), *args], input=input, capture_output=True, timeout=300)


def interruptible() -> None:
    """``preexec_fn`` for a child that a test sends SIGINT: a shell without job control starts
    background commands with SIGINT ignored, and a child inherits that (Python then never raises
    KeyboardInterrupt), so a Ctrl-C test run from such a shell would test nothing."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)

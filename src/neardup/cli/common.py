"""Shared command-line plumbing: one-line errors, exit codes, stderr progress."""

from __future__ import annotations

import contextlib
import signal
import sys
import threading
import time
from collections.abc import Iterable, Iterator
from typing import TypeVar

import click

from neardup._optional import MissingDependency
from neardup.config import DEFAULT_DISTANCE
from neardup.errors import InputError, OutOfMemory

EXIT_USAGE = 2
#: Exit status when memory runs out (as for other errors that are not the input's fault: 1).
EXIT_MEMORY = 1
#: Exit status after Ctrl-C (128 + SIGINT, as shells report it).
EXIT_INTERRUPTED = 130
#: Exit status after SIGTERM (128 + SIGTERM, as shells report it).
EXIT_TERMINATED = 128 + signal.SIGTERM


class Terminated(BaseException):
    """SIGTERM arrived (``kill PID``, a scheduler stopping the job). Raised in the main thread
    by :func:`run`'s handler and unwinds like Ctrl-C: staged outputs and temporary files are
    removed on the way out. A ``BaseException``, so ``except Exception`` never swallows it."""


def _on_sigterm(_signum: int, _frame: object) -> None:
    # further SIGTERMs are ignored while the first one unwinds, so the clean-up it runs
    # (removing temporary files, rolling back a commit) is not cut short; SIGKILL still ends it
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    raise Terminated()


@contextlib.contextmanager
def sigterm_unwinds() -> Iterator[None]:
    """Inside the block, SIGTERM raises :class:`Terminated` in the main thread (elsewhere, or
    where a handler cannot be set, nothing changes); the previous handler is put back after."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    try:
        previous = signal.signal(signal.SIGTERM, _on_sigterm)
    except (ValueError, OSError):  # pragma: no cover - no signals here (an embedded interpreter)
        yield
        return
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


T = TypeVar("T")


def batches(items: Iterable[T], size: int) -> Iterator[list[T]]:
    """``items`` in lists of ``size`` (the last may be shorter)."""
    batch: list[T] = []
    for item in items:
        batch.append(item)
        if len(batch) >= size:
            yield batch
            batch = []
    if batch:
        yield batch


def fail(prog: str, message: str, code: int = EXIT_USAGE) -> None:
    """Print ``prog: error: message`` on one line to stderr and exit with ``code``."""
    lines = [line.strip() for line in message.splitlines() if line.strip()]
    click.echo(f"{prog}: error: {'; '.join(lines)}", err=True)
    sys.exit(code)


def run(command: click.Command, prog: str, argv: list[str] | None = None) -> None:
    """Run a click command turning every user error into one line on stderr and exit status 2.

    Usage errors, bad option values, bad input data, unreadable files and damaged indexes never
    show a traceback; running out of memory is one line (exit status 1) saying what was held.
    Ctrl-C and SIGTERM end the command as an error does, without a traceback (exit status 130
    and 143): staged outputs and temporary files are removed, the previous files left as they
    were.
    """
    try:
        with sigterm_unwinds():
            rv = command.main(args=argv, prog_name=prog, standalone_mode=False)
    except click.exceptions.NoArgsIsHelpError as e:
        click.echo(e.ctx.get_help() if e.ctx else str(e), err=True)
        sys.exit(EXIT_USAGE)
    except click.UsageError as e:
        fail(prog, e.format_message().replace("\n", " "))
    except click.Abort as e:  # click's own for Ctrl-C: a staged dedup's says what it kept
        stop = e.__cause__
        note = str(stop) if isinstance(stop, KeyboardInterrupt) else ""
        fail(prog, f"interrupted; {note}" if note else "aborted", EXIT_INTERRUPTED)
    except Terminated:
        fail(prog, "terminated", EXIT_TERMINATED)
    except InputError as e:
        fail(prog, str(e))
    except MissingDependency as e:
        fail(prog, str(e))
    except ValueError as e:
        fail(prog, str(e))
    except OSError as e:
        name = f"{e.filename}: " if getattr(e, "filename", None) else ""
        fail(prog, f"{name}{e.strerror or e}")
    except OutOfMemory as e:
        fail(prog, str(e), EXIT_MEMORY)
    except MemoryError:
        fail(
            prog,
            "out of memory; docs/guides/memory.md gives what each command holds",
            EXIT_MEMORY,
        )
    except KeyboardInterrupt:
        fail(prog, "interrupted", EXIT_INTERRUPTED)
    sys.exit(rv if isinstance(rv, int) else 0)


class Reporter:
    """Progress and timing lines on stderr, silenced by ``--quiet``."""

    def __init__(self, prog: str, quiet: bool) -> None:
        self.prog = prog
        self.quiet = quiet
        self._t0 = time.perf_counter()

    def say(self, message: str) -> None:
        if not self.quiet:
            click.echo(f"{self.prog}: {message}", err=True)

    def lap(self) -> float:
        """Seconds since the previous lap (or creation)."""
        now = time.perf_counter()
        dt, self._t0 = now - self._t0, now
        return dt


quiet_option = click.option(
    "--quiet", "-q", is_flag=True, help="No progress or timing messages on stderr."
)
output_option = click.option(
    "--output", "-o", default="-", show_default=True, help="Output file ('-' = stdout)."
)
blocks_option = click.option(
    "--blocks",
    "-b",
    type=int,
    default=None,
    help="Blocks the 64 bits are split into (distance < blocks <= 64). Default: chosen "
    "automatically for the input size.",
)

device_option = click.option(
    "--device",
    type=click.Choice(["cpu", "cuda", "auto"]),
    default="cpu",
    show_default=True,
    help='Where the search runs: the CPU, a CUDA GPU (pip install "neardup[gpu]"; the same '
    "answers), or auto (the GPU when one is usable, else the CPU). With --workers or "
    "--scheduler: on each worker.",
)


def distance_option(default: int = DEFAULT_DISTANCE):
    """``--distance/-d``: the largest number of differing bits that matches."""
    return click.option(
        "--distance",
        "-d",
        type=int,
        default=default,
        show_default=True,
        help="Largest number of differing bits that matches (inclusive).",
    )


def dask_options(f):
    """``--scheduler ADDRESS`` / ``--workers N``: where the search runs on Dask."""
    f = click.option(
        "--workers",
        type=click.IntRange(min=1),
        default=None,
        help="Run the search on a local Dask cluster of N worker processes.",
    )(f)
    return click.option(
        "--scheduler",
        metavar="ADDRESS",
        default=None,
        help="Run the search on the Dask cluster whose scheduler is at ADDRESS "
        "(e.g. tcp://host:8786).",
    )(f)

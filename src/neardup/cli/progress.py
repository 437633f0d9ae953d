"""One progress policy for every command that reads documents (``--progress auto|bar|log|none``).

Progress is counted in bytes of the inputs as stored (compressed bytes for compressed files; see
:func:`neardup.io.files.metered`), so it has a percentage, a rate and an ETA:

- ``bar``: a tqdm bar on stderr (percentage, bytes, rate, ETA, documents so far);
- ``log``: a plain line every :data:`neardup.config.PROGRESS_LOG_SECONDS` seconds, for log files;
- ``none``: nothing;
- ``auto`` (the default): ``bar`` when stderr is a terminal, else ``none``.

``--quiet`` means ``none``.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable, Iterable, Iterator
from typing import Any, TypeVar

import click

from neardup import config
from neardup.cli.style import plural, size

MODES = ("auto", "bar", "log", "none")

#: ``--progress bar``: seconds before a bar appears (shorter runs never show one).
BAR_DELAY = 0.5

T = TypeVar("T")


def progress_option(f: Callable[..., Any]) -> Callable[..., Any]:
    """The ``--progress`` option (parameter ``progress_mode``)."""
    return click.option(
        "--progress",
        "progress_mode",
        type=click.Choice(MODES),
        default="auto",
        show_default=True,
        help="Progress on stderr: a bar with percentage, rate and ETA (bar), a plain line every "
        "few seconds (log), nothing (none); auto: a bar on a terminal, else nothing.",
    )(f)


def resolve_mode(mode: str, quiet: bool = False, stream: Any = None) -> str:
    """``bar``, ``log`` or ``none`` for ``--progress mode`` (``auto`` asks whether ``stream``,
    default stderr, is a terminal)."""
    if quiet or mode == "none":
        return "none"
    if mode == "auto":
        stream = sys.stderr if stream is None else stream
        isatty = getattr(stream, "isatty", None)
        return "bar" if isatty is not None and isatty() else "none"
    return mode


def _eta(seconds: float) -> str:
    seconds = int(round(seconds))
    h, rest = divmod(seconds, 3600)
    m, s = divmod(rest, 60)
    return f"{h}:{m:02d}:{s:02d}" if h else f"{m}:{s:02d}"


class Progress:
    """Progress of one command through its stages, in bytes of input.

    Parameters
    ----------
    prog : str
        Command name for log lines (``neardup dedup``).
    mode : str
        One of :data:`MODES`.
    quiet : bool
        ``--quiet``: no progress at all.
    """

    def __init__(self, prog: str, mode: str = "auto", quiet: bool = False) -> None:
        self.prog = prog
        self.mode = resolve_mode(mode, quiet)
        self._bar: Any = None
        self._stage = ""
        self._total: int | None = None
        self._done = 0
        self._docs = 0
        self._t0 = self._last = 0.0

    def stage(self, name: str, total_bytes: int | None) -> None:
        """Start stage ``name`` over ``total_bytes`` bytes (None: unknown, no percentage)."""
        self.close()
        self._stage, self._total, self._done, self._docs = name, total_bytes or None, 0, 0
        self._t0 = self._last = time.monotonic()
        if self.mode == "bar":
            from tqdm import tqdm

            self._bar = tqdm(
                total=self._total,
                desc=name,
                unit="B",
                unit_scale=True,
                unit_divisor=1000,
                file=sys.stderr,
                leave=False,
                dynamic_ncols=True,
                mininterval=0.2,
                delay=BAR_DELAY,
            )

    def update(self, done_bytes: int, documents: int | None = None) -> None:
        """``done_bytes`` of this stage's input read so far, ``documents`` handled so far."""
        self._done = done_bytes
        if documents is not None:
            self._docs = documents
        if self._bar is not None:
            if documents is not None:
                self._bar.set_postfix_str(f"{documents:,} docs", refresh=False)
            self._bar.update(done_bytes - self._bar.n)
        elif self.mode == "log":
            now = time.monotonic()
            if now - self._last >= config.PROGRESS_LOG_SECONDS:
                self._last = now
                click.echo(f"{self.prog}: {self.line(now - self._t0)}", err=True)

    def line(self, elapsed: float) -> str:
        """The plain progress line: stage, percentage, bytes, rate, documents, ETA."""
        rate = self._done / elapsed if elapsed > 0 else 0.0
        if self._total:
            pct = 100.0 * min(self._done, self._total) / self._total
            head = f"{self._stage} {pct:.0f}% ({size(self._done)} of {size(self._total)})"
        else:
            head = f"{self._stage} {size(self._done)}"
        parts = [head, f"{size(rate)}/s"]
        if self._docs:
            parts.append(plural(self._docs, "document"))
        if self._total and rate > 0 and self._done < self._total:
            parts.append(f"ETA {_eta((self._total - self._done) / rate)}")
        return ", ".join(parts)

    def message(self, text: str) -> None:
        """Print ``prog: text`` on stderr without breaking a bar."""
        if self._bar is not None:
            self._bar.clear()
        click.echo(f"{self.prog}: {text}", err=True)
        if self._bar is not None:
            self._bar.refresh()

    def close(self) -> None:
        """End the current stage (the bar disappears)."""
        if self._bar is not None:
            self._bar.close()
            self._bar = None


def tick(items: Iterable[T], callback: Callable[[int], None], every: int = 256) -> Iterator[T]:
    """``items`` unchanged, calling ``callback(count)`` every ``every`` items and at the end."""
    n = 0
    for item in items:
        yield item
        n += 1
        if n % every == 0:
            callback(n)
    callback(n)


class TaskProgress:
    """Progress of a staged run (``neardup dedup --shard-docs``): for each stage, tasks done of
    its tasks, documents per second (``documents`` known after the scan) and an ETA, both from
    the tasks this run ran (``reused``: the tasks of each stage found finished in the work
    directory, a run resumed); a tqdm bar (``bar``) or a plain line every few seconds and at
    each stage's end (``log``).

    Call it as ``progress(stage, done, total)``.
    """

    def __init__(self, prog: str, mode: str = "auto", quiet: bool = False) -> None:
        self.prog = prog
        self.mode = resolve_mode(mode, quiet)
        self.documents = 0
        self.reused: dict[str, int] = {}
        self._bar: Any = None
        self._stage = ""
        self._t0 = self._last = 0.0

    def __call__(self, stage: str, done: int, total: int) -> None:
        now = time.monotonic()
        if stage != self._stage:
            self.close()
            self._stage, self._t0, self._last = stage, now, now
            if self.mode == "bar":
                from tqdm import tqdm

                self._bar = tqdm(total=total, desc=stage, unit="task", file=sys.stderr,
                                 leave=False, dynamic_ncols=True, mininterval=0.2,
                                 delay=BAR_DELAY)  # fmt: skip
        if self._bar is not None:
            self._bar.update(done - self._bar.n)
        elif self.mode == "log" and (
            done == total or now - self._last >= config.PROGRESS_LOG_SECONDS
        ):
            self._last = now
            click.echo(f"{self.prog}: {self.line(done, total, now - self._t0)}", err=True)

    def line(self, done: int, total: int, elapsed: float) -> str:
        """``stage done/total tasks[ (k reused)][, documents/s][, ETA]``: the rate and ETA of
        the tasks run, not of those reused."""
        reused = min(self.reused.get(self._stage, 0), done)
        ran = done - reused
        parts = [f"{self._stage} {done:,}/{plural(total, 'task')}"]
        if reused:
            parts[0] += f" ({reused:,} reused)"
        if self.documents and elapsed > 0 and ran:
            parts.append(f"{self.documents * ran / total / elapsed:,.0f} documents/s")
        if 0 < done < total and elapsed > 0 and ran:
            parts.append(f"ETA {_eta(elapsed * (total - done) / ran)}")
        return ", ".join(parts)

    def close(self) -> None:
        if self._bar is not None:
            self._bar.close()
            self._bar = None

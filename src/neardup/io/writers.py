"""Atomic output files and directories.

Every writer here writes to a temporary file beside the target and renames it over the target only
when the whole output is complete, so an error or an interrupt never leaves half an output behind.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import sys
import tempfile
from collections.abc import Iterator
from typing import IO

from neardup.errors import InputError
from neardup.io.formats import STDIO


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


@contextlib.contextmanager
def atomic_output(path: str | os.PathLike, mode: str = "wb") -> Iterator[IO]:
    """Open ``path`` for writing so that it appears only if the ``with`` block completes.

    ``-`` yields stdout (binary or text according to ``mode``); nothing is written to stdout until
    the caller writes, so callers should compute everything before writing.
    """
    if str(path) == STDIO:
        stream = sys.stdout.buffer if "b" in mode else sys.stdout
        yield stream
        stream.flush()
        return
    target = os.path.abspath(os.fspath(path))
    directory = os.path.dirname(target)
    fd, tmp = tempfile.mkstemp(prefix=f".{os.path.basename(target)}.", suffix=".tmp", dir=directory)
    try:
        # mkstemp creates 0600; give the output the permissions a plain open() would
        os.fchmod(fd, 0o666 & ~_umask())
        kwargs = {} if "b" in mode else {"encoding": "utf-8", "newline": "\n"}
        with os.fdopen(fd, mode, **kwargs) as f:
            yield f
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, target)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


@contextlib.contextmanager
def atomic_directory(path: str | os.PathLike) -> Iterator[str]:
    """A temporary directory beside ``path``, renamed to ``path`` when the block completes.

    An existing non-empty directory (or a file) at ``path`` is refused rather than replaced.
    """
    target = os.path.abspath(os.fspath(path))
    if os.path.exists(target) and (not os.path.isdir(target) or os.listdir(target)):
        raise InputError(
            str(path), None, "output directory exists and is not empty; remove it first"
        )
    tmp = tempfile.mkdtemp(
        prefix=f".{os.path.basename(target)}.", suffix=".tmp", dir=os.path.dirname(target)
    )
    try:
        os.chmod(tmp, 0o777 & ~_umask())
        yield tmp
        os.replace(tmp, target)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise

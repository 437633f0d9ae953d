"""File-system facts the atomic writers (:mod:`neardup.io.writers`) check and rely on: whether
two stats are one file, a path's stat (None when it is missing), whether a path lies inside a
directory, the process's umask, and a directory's fsync (so that a rename in it is durable).
"""

from __future__ import annotations

import contextlib
import os

__all__ = ["current_umask", "fsync_dir", "is_inside", "same_file", "stat_or_none"]


def current_umask() -> int:
    """The process's file mode creation mask, read without changing it.

    Returns
    -------
    int
        The umask as permission bits (e.g. ``0o022``): a new file's mode is ``0o666 & ~umask``.
    """
    mask = os.umask(0)
    os.umask(mask)
    return mask


def same_file(a: os.stat_result, b: os.stat_result) -> bool:
    """Whether two stats are of one file (the same device and inode).

    Parameters
    ----------
    a, b : os.stat_result
        Stats of two paths (symlinks followed or not, as the caller took them).

    Returns
    -------
    bool
        True when ``a`` and ``b`` have the same ``st_dev`` and ``st_ino``.
    """
    return (a.st_dev, a.st_ino) == (b.st_dev, b.st_ino)


def stat_or_none(path: str) -> os.stat_result | None:
    """The stat of ``path`` (symlinks followed), or None when it does not exist.

    Parameters
    ----------
    path : str
        A file-system path.

    Returns
    -------
    os.stat_result or None
        None when ``path`` or a directory on its way is missing (other errors raise).
    """
    try:
        return os.stat(path)
    except (FileNotFoundError, NotADirectoryError):
        return None


def is_inside(path: str, directory: str) -> bool:
    """Whether ``path`` is ``directory`` or lies below it, comparing the strings only.

    Parameters
    ----------
    path, directory : str
        Absolute, resolved paths (the caller resolves symlinks and ``..`` first).

    Returns
    -------
    bool
        True when ``path == directory`` or ``path`` starts with ``directory`` and a separator.
    """
    return path == directory or path.startswith(directory.rstrip(os.sep) + os.sep)


def fsync_dir(path: str) -> None:
    """Flush directory ``path`` to disk, so that a rename into it survives a crash.

    Parameters
    ----------
    path : str
        A directory. Errors (a file system that cannot fsync a directory, a missing path) are
        ignored: the flush is best effort.
    """
    with contextlib.suppress(OSError):
        fd = os.open(path, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)

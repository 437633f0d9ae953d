"""Exceptions raised for bad user input (the CLI turns them into one-line messages)."""

from __future__ import annotations

import contextlib
import errno
from collections.abc import Iterator


class NeardupError(Exception):
    """Base of the errors neardup raises about what it was asked to do."""


class UnsupportedOperation(NeardupError, ValueError):
    """An index backend lacks a capability: the message names the index and the capability."""

    def __init__(self, where: str, backend: str, capability: str) -> None:
        self.capability = capability
        super().__init__(
            f"index {where}: the {backend} backend cannot do {capability!r} "
            f"(see IndexBackend.capabilities)"
        )


class NotCollectedError(NeardupError, AttributeError):
    """A per-document field asked of a dedup result made with ``collect=False``, which keeps
    only the run's summary and counts (its outputs hold the decisions)."""


class InputError(ValueError):
    """Bad input data: names the source, the line/record (1-based) and what was wrong."""

    def __init__(self, source: str, line: int | None, message: str) -> None:
        self.source = source
        self.line = line
        self.message = message
        where = f"{source}:{line}" if line is not None else source
        super().__init__(f"{where}: {message}")


class IdError(ValueError):
    """A bad document id.

    ``reason`` says what is wrong; ``position`` is the id's 0-based position in the batch
    given (or None) and ``first`` the position of the id it repeats (or None). The message is
    the reason followed by the positions; callers that know the ids' files and lines name
    those instead.
    """

    def __init__(self, reason: str, position: int | None = None, first: int | None = None):
        self.reason = reason
        self.position = position
        self.first = first
        if first is not None:
            reason += f" (positions {first} and {position})"
        elif position is not None:
            reason += f" (position {position})"
        super().__init__(reason)


#: The errors of a full disk, or of a user's quota used up.
NO_SPACE = (errno.ENOSPC, errno.EDQUOT)


def disk_full(e: OSError) -> bool:
    """Whether ``e`` says a disk is full: no space, no quota left, or numpy's short write
    (``"N requested and M written"``, which has no errno)."""
    short = e.errno is None and "requested and" in str(e)
    return e.errno in NO_SPACE or short


def temp_dir_error(e: OSError, where: str, held: str, other: str) -> OSError:
    """``e``, met writing in the temporary directory ``where``, as one line naming it, what the
    run keeps there (``held``) and how to choose another (``--temp-dir``, ``TMPDIR`` or
    ``other``). A short write without an errno (numpy's "N requested and M written") is a
    full disk."""
    full = disk_full(e) or e.errno is None
    why = "is full" if full else f"cannot hold it ({e.strerror or e})"
    return OSError(
        e.errno or errno.ENOSPC,
        f"the temporary directory {why}: {held}; make room, or choose a directory with room "
        f"with --temp-dir (temp_dir= in Python) or TMPDIR, or {other}",
        where,
    )


class OutOfMemory(MemoryError):
    """Memory ran out; the message says what was being held and how to need less."""


#: errors of opening a file that say nothing of the file (descriptors or memory ran out)
_NOT_THE_FILE = frozenset({errno.EMFILE, errno.ENFILE, errno.ENOMEM})


@contextlib.contextmanager
def holding(what: str, fix: str) -> Iterator[None]:
    """Turn a bare ``MemoryError`` inside the block into :class:`OutOfMemory` saying that
    ``what`` was being held and how to reduce it (``fix``)."""
    try:
        yield
    except OutOfMemory:
        raise
    except MemoryError:
        raise OutOfMemory(f"out of memory holding {what}; {fix}") from None


def damaged(path: str, why: object) -> InputError:
    """The error for a file of a dedup run's work directory that cannot be read back (its
    results are never taken as empty)."""
    return InputError(path, None, f"cannot be read back ({why}): the work directory is damaged; "
                      "run again with another --work-dir, or with this one removed")  # fmt: skip


@contextlib.contextmanager
def reading_back(path: str) -> Iterator[None]:
    """Turn a failure to read ``path``, a file a dedup run wrote in its work directory, into
    :func:`damaged` (one line naming the file, not a traceback)."""
    import pickle

    try:
        yield
    except InputError:
        raise
    except OSError as e:
        if e.errno in _NOT_THE_FILE:  # the process's limits, not the file: a rerun may pass
            raise InputError(path, None, f"cannot be opened: {e.strerror}; nothing is damaged: "
                             "raise the limit (ulimit -n) or free memory and run the same "
                             "command again") from None  # fmt: skip
        raise damaged(path, f"{type(e).__name__}: {e}") from None
    except (ValueError, EOFError, pickle.UnpicklingError) as e:
        raise damaged(path, f"{type(e).__name__}: {e}") from None

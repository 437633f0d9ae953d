"""Temporary files a run owns, named so that what a killed run left behind can be found later.

A run stages its outputs beside their targets and spools shingle keys to the temporary
directory. On an error, Ctrl-C or SIGTERM it removes them itself; a run killed outright (SIGKILL,
the OOM killer, a power cut) cannot. Every such file or directory is named

    ``.<name>.neardup-<host>-<pid>-<random>.tmp``

``<host>``: a short hash of the machine's name (a directory shared over a network holds other
machines' runs, whose process ids mean nothing here); ``<pid>``: the process that made it. A
*leftover* is an entry of exactly this pattern, owned by this user, made on this machine by a
process that no longer runs. :func:`remove_leftovers` removes only those: a later run does so in
the directories it writes to, and ``neardup clean`` on demand. Nothing a user named is ever
touched: a user's file would have to carry this exact pattern. A ``<pid>`` that no process can
have (above :data:`PID_LIMIT`), or that the system cannot be asked about, is not provably dead:
its entry is left alone.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import re
import shutil
import socket
import stat
from dataclasses import dataclass

__all__ = [
    "PID_LIMIT",
    "TEMP_SUFFIX",
    "Leftover",
    "find_leftovers",
    "remove_leftovers",
    "temp_prefix",
]

TEMP_SUFFIX = ".tmp"
#: The largest process id any system gives (Linux's ``PID_MAX_LIMIT``, 2**22; macOS: 99,999).
PID_LIMIT = 1 << 22
_PATTERN = re.compile(
    r"^\.(?P<name>.*)\.neardup-(?P<host>[0-9a-f]{6})-(?P<pid>[1-9][0-9]{0,9})-[A-Za-z0-9_]+\.tmp$"
)


def _host() -> str:
    return hashlib.sha1(socket.gethostname().encode()).hexdigest()[:6]


def temp_prefix(name: str) -> str:
    """The start of the name of a temporary file or directory of this run standing for
    ``name`` (the output's file name, or what the file holds); end it with :data:`TEMP_SUFFIX`
    (``tempfile.mkstemp(prefix=..., suffix=TEMP_SUFFIX)``)."""
    return f".{name}.neardup-{_host()}-{os.getpid()}-"


def _dead(pid: int) -> bool:
    """True only when no process ``pid`` runs on this machine (a number that cannot be a process
    id, or one the system cannot be asked about, is not provably dead)."""
    if pid == os.getpid() or not 0 < pid <= PID_LIMIT:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    except (OSError, OverflowError, ValueError):  # another user's (EPERM), or no way to tell
        return False
    return False


@dataclass(frozen=True)
class Leftover:
    """A temporary file or directory left by a neardup run that no longer runs."""

    path: str
    pid: int  #: the process that made it
    name: str  #: the output it stood for (or what it held, e.g. ``neardup-shingles``)
    size: int  #: bytes (of every file below it, for a directory)
    is_dir: bool


def _size(path: str, is_dir: bool) -> int:
    if not is_dir:
        return os.lstat(path).st_size
    total = 0
    for d, _, names in os.walk(path):
        for n in names:
            with contextlib.suppress(OSError):
                total += os.lstat(os.path.join(d, n)).st_size
    return total


def find_leftovers(directory: str | os.PathLike) -> list[Leftover]:
    """The leftovers in ``directory`` (not below it), sorted by path; none when it cannot be
    listed."""
    found = []
    host, uid = _host(), os.geteuid()
    try:
        entries = list(os.scandir(directory))
    except OSError:
        return []
    for e in entries:
        m = _PATTERN.match(e.name)
        if m is None or m["host"] != host:
            continue
        try:
            st = e.stat(follow_symlinks=False)
            is_dir = stat.S_ISDIR(st.st_mode)
            if st.st_uid != uid or not (is_dir or stat.S_ISREG(st.st_mode)):
                continue
            if not _dead(int(m["pid"])):
                continue
            found.append(Leftover(e.path, int(m["pid"]), m["name"], _size(e.path, is_dir), is_dir))
        except OSError:
            continue
    return sorted(found, key=lambda x: x.path)


def remove_leftovers(directory: str | os.PathLike) -> list[Leftover]:
    """Remove the leftovers in ``directory``; returns those removed (an entry that cannot be
    removed is left, silently: this is tidying, never a reason for a run to fail)."""
    removed = []
    for left in find_leftovers(directory):
        try:
            if left.is_dir:
                shutil.rmtree(left.path)
            else:
                os.unlink(left.path)
        except OSError:
            continue
        removed.append(left)
    return removed

"""Local copies of the files a staged run's tasks read from a work directory on object storage
(:mod:`neardup.io.objects`), so that they are read as local files (memory-mapped arrays
included) and each is fetched once per stage in each process.

:func:`local_file` is the path to open: a local path is itself (nothing changes for a work
directory on a file system); a URL is downloaded, whole, into this process's copies of its work
directory, a folder in the temporary directory (``TMPDIR``) named as
:mod:`neardup.io.leftovers` says. The copies belong to a *generation*, one per stage that the
run maps (:func:`renew`): a task's files never change once its completion record is written,
but the run moves the repeated ids' spills over the scan's between two stages, so the copies of
one stage are not trusted in the next: a new generation removes them. The caller removes its
copies at the end of the run (:func:`forget`); a worker process, when a task of the next stage
comes, or when it exits.
"""

from __future__ import annotations

import os
import shutil
import tempfile
import threading
import uuid
from dataclasses import dataclass, field

from neardup.io.files import is_url
from neardup.io.leftovers import TEMP_SUFFIX, remove_leftovers, temp_prefix
from neardup.io.objects import get_file

__all__ = ["forget", "local_file", "renew"]


@dataclass
class _Copies:
    """The copies of one work directory in this process: its generation and folder."""

    generation: str
    folder: str
    fetching: dict[str, threading.Lock] = field(default_factory=dict)


_LOCK = threading.Lock()
_COPIES: dict[str, _Copies] = {}  #: by work directory URL (without a closing /)


def _new_folder() -> str:
    where = tempfile.gettempdir()
    remove_leftovers(where)  # the copies of processes killed outright
    return tempfile.mkdtemp(prefix=temp_prefix("neardup-copies"), suffix=TEMP_SUFFIX, dir=where)


def renew(work: str, generation: str | None = None) -> None:
    """Read the work directory ``work`` (a URL; nothing for a local path) in ``generation``
    (default: a new one) from now on in this process: the copies of another generation are
    removed."""
    if not is_url(work):
        return
    key = work.rstrip("/")
    generation = generation or uuid.uuid4().hex
    with _LOCK:
        old = _COPIES.get(key)
        if old is not None and old.generation == generation:
            return
        _COPIES[key] = _Copies(generation, _new_folder())
    if old is not None:
        shutil.rmtree(old.folder, ignore_errors=True)


def forget(work: str) -> None:
    """Remove this process's copies of the work directory ``work``."""
    with _LOCK:
        old = _COPIES.pop(work.rstrip("/"), None)
    if old is not None:
        shutil.rmtree(old.folder, ignore_errors=True)


def _copies_of(path: str) -> tuple[_Copies, str]:
    """The copies of the work directory that holds ``path``, and ``path`` relative to it
    (a URL of no work directory read so far: copies of its own folder)."""
    with _LOCK:
        for key, copies in _COPIES.items():
            if path.startswith(key + "/"):
                return copies, path[len(key) + 1 :]
    renew(path.rstrip("/").rsplit("/", 1)[0])
    return _copies_of(path)


def local_file(path: str) -> str:
    """The local file to read for ``path``, a file of a work directory: ``path`` itself, or for
    a URL its local copy of this generation (downloaded if not yet here;
    ``FileNotFoundError`` where the object is missing)."""
    if not is_url(path):
        return path
    copies, rel = _copies_of(path)
    local = os.path.join(copies.folder, *rel.split("/"))
    if os.path.exists(local):
        return local
    with _LOCK:
        lock = copies.fetching.setdefault(local, threading.Lock())
    with lock:  # one download of a file, whichever thread asks first
        if not os.path.exists(local):
            os.makedirs(os.path.dirname(local), exist_ok=True)
            part = f"{local}.{uuid.uuid4().hex[:8]}.part"
            try:
                get_file(path, part)
                os.replace(part, local)
            finally:
                if os.path.exists(part):
                    os.unlink(part)
    return local

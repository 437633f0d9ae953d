"""The work store of a staged dedup: where its tasks' files live.

Two kinds, one interface. A work directory (local, or a prefix of object storage read through
:mod:`neardup.pipeline.read_cache`) holds them as files. A small run of in-memory data (a
list of texts, a DataFrame) on this process's threads keeps them in this process's memory
instead (:func:`memory_store`): its arrays stay arrays, its other files bytes, and nothing is
created, renamed or removed on a file system (five texts: 0.7 ms a call against 3.4 ms on the
memory file system). Such a store's root is a string that names no file (it begins with a NUL
byte): a path of it reaching the file system unawares fails there at once, never writing
beside the user's files. It lives as long as the run, and is never resumed.

Every task reads and writes its files through these functions; the layout of the files
(which stage, which task, which name) is :mod:`neardup.pipeline.layout`'s.
"""

from __future__ import annotations

import contextlib
import io
import os
import threading
import uuid
from collections.abc import Iterator
from typing import IO, Any

import numpy as np

from neardup.errors import reading_back
from neardup.index.storage import NPY_HEADERS
from neardup.pipeline.read_cache import local_file

__all__ = [
    "create",
    "file_size",
    "in_memory",
    "load_array",
    "memory_store",
    "move",
    "open_bytes",
    "raw_array",
    "remove",
    "save_array",
    "sizes",
    "write_values",
]

_PREFIX = "\0neardup-memory-"
#: each memory store's files by path: ndarray (an array file) or bytearray
_STORES: dict[str, dict[str, Any]] = {}
_LOCK = threading.Lock()


@contextlib.contextmanager
def memory_store() -> Iterator[str]:
    """A new memory store's root, for the block; its files are dropped at its end."""
    root = f"{_PREFIX}{uuid.uuid4().hex}"
    _STORES[root] = {}
    try:
        yield root
    finally:
        _STORES.pop(root, None)


def in_memory(path: str) -> bool:
    """Whether ``path`` is in a memory store (else: a file system or object storage)."""
    return path.startswith(_PREFIX)


def _files(path: str) -> dict[str, Any]:
    root = path.split(os.sep, 1)[0]
    files = _STORES.get(root)
    if files is None:
        raise FileNotFoundError(f"the run's memory store has ended ({path!r})")
    return files


def _get(path: str) -> Any:
    got = _files(path).get(path)
    if got is None:
        raise FileNotFoundError(f"no file {os.path.basename(path)!r} in the run's memory store")
    return got


def save_array(path: str, a: np.ndarray) -> int:
    """Array ``a`` as the ``.npy`` file ``path`` (in a memory store: a read-only copy of it);
    the bytes it holds."""
    if not in_memory(path):
        np.save(path, a)
        return os.path.getsize(path)
    kept = np.array(a, copy=True)
    kept.setflags(write=False)
    _files(path)[path] = kept
    return kept.nbytes


def load_array(path: str) -> np.ndarray:
    """The array of the ``.npy`` file ``path``, read-only (memory-mapped from a file)."""
    if in_memory(path):
        return _get(path)
    with reading_back(path), NPY_HEADERS:  # np.load parses its header with ast
        return np.load(local_file(path), mmap_mode="r")


def raw_array(path: str, dtype: Any, n: int) -> np.ndarray:
    """The ``n`` values of ``dtype`` of the headerless file ``path``, read-only (mapped)."""
    if not in_memory(path):
        with reading_back(path):
            return np.memmap(local_file(path), dtype=dtype, mode="r", shape=(n,))
    a = np.frombuffer(_get(path), dtype=dtype)
    a.flags.writeable = False
    if len(a) != n:
        raise ValueError(f"{len(a)} values in {os.path.basename(path)!r} where {n} were due")
    return a


class _Written:
    """A file of a memory store being written: the chunks written (copies: a writer may reuse
    its buffer), joined into one buffer when it is closed, each dropped once placed (the whole
    is never held twice)."""

    def __init__(self, path: str) -> None:
        self.path, self.closed = path, False
        self._chunks: list[bytes] = []
        self._n = 0

    def write(self, data: Any) -> int:
        chunk = bytes(data)
        self._chunks.append(chunk)
        self._n += len(chunk)
        return len(chunk)

    def writelines(self, lines: Any) -> None:
        for line in lines:
            self.write(line)

    def tell(self) -> int:
        return self._n

    def close(self) -> None:
        if self.closed:
            return
        self.closed = True
        out, at = bytearray(self._n), 0
        chunks, self._chunks = self._chunks[::-1], []
        while chunks:
            chunk = chunks.pop()
            out[at : at + len(chunk)] = chunk
            at += len(chunk)
        _files(self.path)[self.path] = out

    def __enter__(self) -> _Written:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def create(path: str) -> IO[bytes]:
    """The file ``path`` of a task's directory, new and open for writing bytes."""
    if in_memory(path):
        return _Written(path)  # type: ignore[return-value]
    return open(path, "wb")  # noqa: SIM115


def write_values(f: IO[bytes], a: np.ndarray) -> None:
    """The values of ``a`` appended to the file ``f`` (:func:`create`) as they lie in memory
    (no header), without a copy where ``a`` is contiguous."""
    f.write(memoryview(np.ascontiguousarray(a)).cast("B"))


def open_bytes(path: str) -> IO[bytes]:
    """The file ``path``, open for reading bytes (a work directory on object storage: its
    local copy)."""
    if in_memory(path):
        got = _get(path)
        return io.BytesIO(got.tobytes() if isinstance(got, np.ndarray) else got)
    return open(local_file(path), "rb")  # noqa: SIM115


def file_size(f: IO[bytes]) -> int:
    """The bytes of the file open as ``f`` (:func:`open_bytes`)."""
    if isinstance(f, io.BytesIO):
        return len(f.getbuffer())
    return os.fstat(f.fileno()).st_size


def _nbytes(value: Any) -> int:
    return value.nbytes if isinstance(value, np.ndarray) else len(value)


def sizes(directory: str) -> dict[str, int]:
    """``{name: bytes}`` of every file under ``directory`` of a memory store (names relative
    to it, ``/`` between parts)."""
    head = directory.rstrip(os.sep) + os.sep
    with _LOCK:
        found = list(_files(directory).items())
    return {p[len(head) :]: _nbytes(v) for p, v in found if p.startswith(head)}


def move(src: str, dest: str) -> None:
    """The files under directory ``src`` of a memory store, to the same names under ``dest``."""
    files, head = _files(src), src.rstrip(os.sep) + os.sep
    with _LOCK:
        for p in [p for p in files if p.startswith(head)]:
            files[os.path.join(dest, p[len(head) :])] = files.pop(p)


def remove(directory: str) -> None:
    """The files under ``directory`` of a memory store, dropped."""
    files, head = _files(directory), directory.rstrip(os.sep) + os.sep
    with _LOCK:
        for p in [p for p in files if p.startswith(head)]:
            del files[p]

"""Shingle keys of every document, spooled to a temporary file during pass 1 of a verified dedup.

Keys (uint32, 4 bytes per distinct shingle) go to disk batch by batch; only the offsets (int64,
8 bytes per document) stay in memory. The decision reads the keys back through ``np.memmap``.
The file is named as :mod:`neardup.io.leftovers` says: a spool left by a run killed outright is
removed by the next spool made in the same directory (or by ``neardup clean``).
"""

from __future__ import annotations

import os
import tempfile
from typing import Any

import numpy as np

from neardup.core.similarity import ShingleSets
from neardup.errors import temp_dir_error
from neardup.io.leftovers import TEMP_SUFFIX, remove_leftovers, temp_prefix

__all__ = ["ShingleSpool", "subset_sets"]


class ShingleSpool:
    """A temporary file of CSR shingle keys, appended one batch of documents at a time.

    The file is created in ``directory`` (default: the system temporary directory, ``TMPDIR``)
    and removed by :meth:`close`; use the spool as a context manager so that it is removed on
    success, on error and on Ctrl-C alike. A directory that cannot hold it (full, missing,
    read-only) is an ``OSError`` naming the directory and how to choose another.

    Examples
    --------
    >>> with ShingleSpool() as spool:
    ...     spool.append(np.array([0, 2, 3]), np.array([5, 9, 7], dtype=np.uint32))
    ...     spool.append(np.array([0, 0]), np.zeros(0, dtype=np.uint32))
    ...     s = spool.sets()
    ...     s.offsets.tolist(), s.keys.tolist(), spool.nbytes
    ([0, 2, 3, 3], [5, 9, 7], 12)
    """

    def __init__(self, directory: str | os.PathLike | None = None) -> None:
        self.directory = os.fspath(directory) if directory is not None else tempfile.gettempdir()
        self._file: Any = None
        self._offsets: list[np.ndarray] = [np.zeros(1, dtype=np.int64)]
        self._total = 0
        self._keys: np.ndarray | None = None
        remove_leftovers(self.directory)  # spools of runs killed outright
        try:
            fd, self.path = tempfile.mkstemp(
                prefix=temp_prefix("neardup-shingles"), suffix=TEMP_SUFFIX, dir=self.directory
            )
        except OSError as e:
            raise self._cannot_write(e) from None
        self._file = os.fdopen(fd, "wb")

    @property
    def nbytes(self) -> int:
        """Bytes of keys written to the temporary file."""
        return 4 * self._total

    def append(self, offsets: np.ndarray, keys: np.ndarray) -> None:
        """Add a batch: ``offsets`` int64[m + 1] from 0, ``keys`` uint32[offsets[-1]]."""
        if self._file is None:
            raise ValueError("the spool was already read or closed")
        try:
            np.ascontiguousarray(keys, dtype=np.uint32).tofile(self._file)
        except OSError as e:
            raise self._cannot_write(e) from None
        self._offsets.append(np.asarray(offsets[1:], dtype=np.int64) + self._total)
        self._total += int(offsets[-1])

    def sets(self) -> ShingleSets:
        """All documents' keys so far as :class:`ShingleSets`, the keys memory-mapped (read-only);
        no more batches can be appended."""
        if self._file is not None:
            try:
                self._file.close()
            except OSError as e:
                raise self._cannot_write(e) from None
            self._file = None
            if self._total:
                self._keys = np.memmap(self.path, dtype=np.uint32, mode="r", shape=(self._total,))
            else:  # an empty file cannot be mapped
                self._keys = np.zeros(0, dtype=np.uint32)
            self._offsets = [np.concatenate(self._offsets)]
        if self._keys is None:
            raise ValueError("the spool was closed")
        return ShingleSets(self._offsets[0], self._keys)

    def _cannot_write(self, e: OSError) -> OSError:
        """``e`` as one line naming the directory, what it holds and how to choose another."""
        held = (f"a verified dedup spools 4 bytes per distinct shingle there ({self.nbytes} "
                "written so far)")  # fmt: skip
        return temp_dir_error(e, self.directory, held, "use --no-verify")

    def close(self) -> None:
        """Remove the temporary file (idempotent)."""
        if self._file is not None:
            try:
                self._file.close()
            except OSError:  # a full disk: the file goes anyway
                pass
            self._file = None
        self._keys = None
        try:
            os.unlink(self.path)
        except FileNotFoundError:
            pass

    def __enter__(self) -> ShingleSpool:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


def subset_sets(sets: ShingleSets, keep: np.ndarray) -> ShingleSets:
    """The sets of the documents where ``keep`` (bool[n]) is True, copied into memory."""
    sizes = sets.sizes[keep]
    offsets = np.zeros(len(sizes) + 1, dtype=np.int64)
    np.cumsum(sizes, out=offsets[1:])
    starts = sets.offsets[:-1][keep]
    idx = np.repeat(starts - offsets[:-1], sizes) + np.arange(offsets[-1], dtype=np.int64)
    return ShingleSets(offsets, np.ascontiguousarray(sets.keys[idx]))

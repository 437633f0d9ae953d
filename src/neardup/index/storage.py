"""On-disk format of the index: a versioned JSON manifest, ``.npy`` array files, a writer lock.

Layout of an index directory::

    MANIFEST                 JSON: magic, format version, byte order, layout, segments, checksums
    LOCK                     flock()ed by the one writer; holds its pid
    s00000007.fp.npy         a segment's fingerprints, sorted ascending (uint64)
    s00000007.t1.npy ...     its permuted tables 1..T-1: distinct values, permuted, sorted (uint64)
    s00000007.key.npy        per row: the int64 id, or the 64-bit hash of the string id
    s00000007.kord.npy       rows ordered by key (uint32 below 2**32 rows, else int64)
    s00000007.sblob.npy      string ids only: UTF-8 bytes of all ids (uint8)
    s00000007.soff.npy       string ids only: offsets into sblob (int64, rows + 1)
    s00000007.del12.npy      rows of segment 7 removed up to generation 12 (int64, sorted)

Files are immutable once referenced: every change writes new files (temp name, fsync, rename),
fsyncs the directory, then replaces ``MANIFEST`` atomically the same way. Files that no committed
manifest references (left by a crash, or replaced by a compaction) are deleted by the next writer.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import json
import os
import re
import sys
import zlib
from typing import Any

import numpy as np

MAGIC = "neardup-index"
FORMAT_VERSION = 1
#: Format of indexes whose tables are coded (``"codec"`` in the manifest, see
#: :mod:`neardup.index.codec`): readers that only know version 1 refuse them.
CODEC_FORMAT_VERSION = 2
MANIFEST = "MANIFEST"
LOCK = "LOCK"
_CHUNK = 16 << 20
_OWNED = re.compile(r"^(s\d{8}\.[a-z0-9]+\.npy|\..*\.tmp)$")


class CorruptIndexError(ValueError):
    """A file of the index is missing, truncated or does not match its checksum."""


class IndexLockedError(OSError):
    """Another process holds the index open for writing."""


def _fsync_dir(path: str) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


class _CrcWriter:
    """File wrapper computing the CRC-32 of everything written through it."""

    def __init__(self, f: Any) -> None:
        self.f = f
        self.crc = 0
        self.size = 0

    def write(self, data: bytes | memoryview) -> int:
        self.crc = zlib.crc32(data, self.crc)
        self.size += len(data)
        return self.f.write(data)


def write_array(directory: str, name: str, arr: np.ndarray) -> dict[str, Any]:
    """Write ``arr`` as ``directory/name`` (.npy), durably; return its manifest entry.

    The data goes to a temporary file that is fsynced and renamed; the caller fsyncs the
    directory once after writing all of a commit's files.
    """
    arr = np.ascontiguousarray(arr)
    tmp = os.path.join(directory, f".{name}.tmp")
    with open(tmp, "wb") as raw:
        w = _CrcWriter(raw)
        _write_npy(w, arr)
        raw.flush()
        os.fsync(raw.fileno())
    os.replace(tmp, os.path.join(directory, name))
    return {
        "name": name,
        "bytes": w.size,
        "crc32": w.crc,
        "dtype": arr.dtype.str,
        "shape": list(arr.shape),
    }


def _write_npy(w: _CrcWriter, arr: np.ndarray) -> None:
    np.lib.format.write_array_header_1_0(w, np.lib.format.header_data_from_array_1_0(arr))
    flat = arr.reshape(-1).view(np.uint8) if arr.size else np.empty(0, np.uint8)
    for s in range(0, flat.size, _CHUNK):
        w.write(memoryview(flat[s : s + _CHUNK]))


def load_array(directory: str, entry: dict[str, Any]) -> np.ndarray:
    """Memory-map one array file, checking its size, dtype and shape against ``entry``.

    Raises :class:`CorruptIndexError` naming the file when it is missing, truncated or has
    another header. Content checksums are checked by :func:`verify_file`.
    """
    path = os.path.join(directory, entry["name"])
    try:
        size = os.path.getsize(path)
    except FileNotFoundError:
        raise CorruptIndexError(f"{path}: file missing from the index") from None
    if size != entry["bytes"]:
        raise CorruptIndexError(
            f"{path}: size {size} bytes, the manifest records {entry['bytes']} (truncated or "
            f"overwritten); restore it from a backup or rebuild the index"
        )
    try:
        if int(np.prod(entry["shape"])) == 0:
            arr = np.load(path)
        else:
            arr = np.load(path, mmap_mode="r")
    except (ValueError, OSError) as e:
        raise CorruptIndexError(f"{path}: unreadable array file ({e})") from None
    if arr.dtype.str != entry["dtype"] or list(arr.shape) != list(entry["shape"]):
        raise CorruptIndexError(
            f"{path}: holds {arr.dtype.str}{list(arr.shape)}, the manifest records "
            f"{entry['dtype']}{entry['shape']}"
        )
    return arr


def verify_file(directory: str, entry: dict[str, Any]) -> None:
    """Recompute the CRC-32 of one file; raise :class:`CorruptIndexError` naming it on mismatch."""
    path = os.path.join(directory, entry["name"])
    try:
        size = os.path.getsize(path)
        crc = 0
        with open(path, "rb") as f:
            while chunk := f.read(_CHUNK):
                crc = zlib.crc32(chunk, crc)
    except FileNotFoundError:
        raise CorruptIndexError(f"{path}: file missing from the index") from None
    if size != entry["bytes"]:
        raise CorruptIndexError(
            f"{path}: size {size} bytes, the manifest records {entry['bytes']} (truncated)"
        )
    if crc != entry["crc32"]:
        raise CorruptIndexError(
            f"{path}: checksum mismatch (crc32 {crc:08x}, manifest {entry['crc32']:08x}); "
            f"the file is corrupt"
        )


def _body_crc(body: dict[str, Any]) -> int:
    return zlib.crc32(json.dumps(body, sort_keys=True, separators=(",", ":")).encode())


def write_manifest(directory: str, body: dict[str, Any]) -> None:
    """Commit ``body`` as the new ``MANIFEST``: fsync the directory (for the data files just
    written), write a temp file, fsync, rename over ``MANIFEST``, fsync the directory."""
    _fsync_dir(directory)
    doc = dict(body, manifest_crc32=_body_crc(body))
    tmp = os.path.join(directory, f".{MANIFEST}.tmp")
    with open(tmp, "w", encoding="utf-8") as f:
        json.dump(doc, f, indent=1, sort_keys=True)
        f.write("\n")
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, os.path.join(directory, MANIFEST))
    _fsync_dir(directory)


def read_manifest(directory: str) -> dict[str, Any]:
    """Read and check ``MANIFEST`` (magic, version, byte order, its own checksum)."""
    path = os.path.join(directory, MANIFEST)
    if not os.path.isdir(directory):
        raise FileNotFoundError(errno.ENOENT, "no such index directory", directory)
    if not os.path.exists(path):
        raise CorruptIndexError(f"{directory}: not a neardup index (no {MANIFEST} file)")
    try:
        with open(path, encoding="utf-8") as f:
            doc = json.load(f)
    except (ValueError, UnicodeDecodeError) as e:
        raise CorruptIndexError(f"{path}: corrupt manifest ({e})") from None
    if not isinstance(doc, dict) or doc.get("magic") != MAGIC:
        raise CorruptIndexError(f"{path}: not a neardup index manifest")
    crc = doc.pop("manifest_crc32", None)
    if crc != _body_crc(doc):
        raise CorruptIndexError(f"{path}: manifest checksum mismatch; the file is corrupt")
    if doc.get("format_version") not in (FORMAT_VERSION, CODEC_FORMAT_VERSION):
        raise CorruptIndexError(
            f"{path}: format version {doc.get('format_version')} is not supported "
            f"(this neardup reads versions {FORMAT_VERSION} and {CODEC_FORMAT_VERSION}); "
            f"upgrade neardup"
        )
    if doc.get("byte_order") != sys.byteorder:
        raise CorruptIndexError(
            f"{path}: written on a {doc.get('byte_order')}-endian machine, this one is "
            f"{sys.byteorder}-endian"
        )
    return doc


def referenced_files(body: dict[str, Any]) -> set[str]:
    """Names of every data file a manifest references."""
    names: set[str] = set()
    for seg in body["segments"]:
        names.update(e["name"] for e in seg["files"].values())
        if seg.get("deleted"):
            names.add(seg["deleted"]["name"])
    return names


def remove_unreferenced(directory: str, body: dict[str, Any]) -> int:
    """Delete the index's own files (segment arrays, temp files) that ``body`` does not
    reference; return how many. Only the writer calls this, after a commit."""
    keep = referenced_files(body)
    gone = 0
    for name in os.listdir(directory):
        if _OWNED.match(name) and name not in keep and name != f".{MANIFEST}.tmp":
            with contextlib.suppress(FileNotFoundError):
                os.unlink(os.path.join(directory, name))
                gone += 1
    return gone


class WriterLock:
    """Exclusive ``flock`` on ``LOCK``, held while an index is open for writing."""

    def __init__(self, directory: str) -> None:
        self.path = os.path.join(directory, LOCK)
        self.fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(self.fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            try:
                pid = os.pread(self.fd, 32, 0).decode(errors="replace").strip() or "?"
            finally:
                os.close(self.fd)
            raise IndexLockedError(
                f"index {directory} is open for writing by another process (pid {pid}); "
                f"close it there or open this one with mode='r'"
            ) from None
        os.ftruncate(self.fd, 0)
        os.pwrite(self.fd, f"{os.getpid()}\n".encode(), 0)

    def release(self) -> None:
        if self.fd >= 0:
            with contextlib.suppress(OSError):
                os.ftruncate(self.fd, 0)
            fcntl.flock(self.fd, fcntl.LOCK_UN)
            os.close(self.fd)
            self.fd = -1

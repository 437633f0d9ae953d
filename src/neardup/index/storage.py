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
    s00000007.sketch.npy     indexes with sketches only: each row's MinHash sketch (uint64, rows x K)
    s00000007.ssize.npy      indexes with sketches only: each row's shingle count (uint32)
    s00000007.del12.npy      rows of segment 7 removed up to generation 12 (int64, sorted)

Files are immutable once referenced: every change writes new files (temp name, fsync, rename),
fsyncs the directory, then replaces ``MANIFEST`` atomically the same way. Files that no committed
manifest references (left by a crash, or replaced by a compaction) are deleted by the next writer.
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import errno
import fcntl
import functools
import json
import os
import queue
import re
import secrets
import shutil
import sys
import tempfile
import threading
import time
import zlib
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import numpy as np

from neardup.io.leftovers import TEMP_SUFFIX, temp_prefix

MAGIC = "neardup-index"
FORMAT_VERSION = 1
#: Format of indexes whose tables are coded (``"codec"`` in the manifest, see
#: :mod:`neardup.index.codec`): readers that only know version 1 refuse them.
CODEC_FORMAT_VERSION = 2
#: Format of indexes that keep a MinHash sketch per entry (``"sketch_words"`` in the manifest,
#: see :mod:`neardup.core.sketch`), whatever their codec: older readers refuse them, so that no
#: writer that does not know sketches adds entries without one.
SKETCH_FORMAT_VERSION = 3
#: Format versions this neardup reads.
FORMAT_VERSIONS = (FORMAT_VERSION, CODEC_FORMAT_VERSION, SKETCH_FORMAT_VERSION)
#: Codecs a table file may be stored with (see :mod:`neardup.index.codec`).
TABLE_CODECS = ("ef",)
MANIFEST = "MANIFEST"
LOCK = "LOCK"
_CHUNK = 16 << 20
#: Kinds of segment file the index writes (``s00000007.<kind>.npy``); only files named so, their
#: temporary files and ``.MANIFEST.tmp`` are ever deleted, and only when no manifest names them.
#: A temporary file is named as :mod:`neardup.io.leftovers` says
#: (``.s00000007.fp.npy.neardup-HOST-PID-RANDOM.tmp``; ``.s00000007.fp.npy.tmp`` before), so that
#: ``neardup clean`` also knows one that a writer killed outright left.
FILE_KINDS = r"(?:fp|key|kord|sblob|soff|sketch|ssize|t\d+|del\d+)"
_OWNED = re.compile(
    rf"^\.?s\d{{8}}\.{FILE_KINDS}\.npy(?:\.tmp|\.neardup-[0-9a-f]{{6}}-\d+-[A-Za-z0-9_]+\.tmp)?$"
    rf"|^\.{MANIFEST}\.tmp$"
)
_MAX_MANIFEST_BYTES = 256 << 20


class CorruptIndexError(ValueError):
    """A file of the index is missing, truncated or does not match its checksum."""


class IndexLockedError(OSError):
    """Another process holds the index open for writing."""


def _fsync(path: str) -> None:
    """fsync a file or a directory (its entries) by path."""
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


def write_array(directory: str, name: str, arr: np.ndarray, *, sync: bool = True) -> dict[str, Any]:
    """Write ``arr`` as ``directory/name`` (.npy), durably; return its manifest entry.

    The data goes to a temporary file that is fsynced and renamed; the caller fsyncs the
    directory once after writing all of a commit's files. ``sync=False`` leaves the fsync to
    the commit (:func:`write_manifest`'s ``unsynced``), which overlaps the fsyncs of all its
    files: until a manifest names it, a file is nobody's, and a crash only leaves it to be
    deleted.
    """
    arr = np.ascontiguousarray(arr)
    tmp = os.path.join(directory, temp_prefix(name) + secrets.token_hex(4) + TEMP_SUFFIX)
    try:
        with open(tmp, "xb") as raw:
            w = _CrcWriter(raw)
            _write_npy(w, arr)
            raw.flush()
            if sync:
                os.fsync(raw.fileno())
        os.replace(tmp, os.path.join(directory, name))
    except BaseException:  # a full disk, Ctrl-C: no temporary file stays
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
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


def _entry_path(directory: str, entry: dict[str, Any]) -> str:
    return os.path.join(directory, entry["name"])


def load_array(directory: str, entry: dict[str, Any]) -> np.ndarray:
    """Memory-map one array file, checking its size, header, dtype and shape against ``entry``.

    Raises :class:`CorruptIndexError` naming the file when it is missing, truncated, has a
    damaged header or another dtype or shape. Content checksums are checked by
    :func:`verify_file`.
    """
    path = _entry_path(directory, entry)
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
        with open(path, "rb") as f:
            shape, fortran, dtype, offset = read_npy_header(f)
    except Exception as e:  # a damaged header can fail in many ways (tokenize, syntax, ...)
        first = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        raise CorruptIndexError(f"{path}: damaged array header ({first})") from None
    if (
        dtype.str != entry["dtype"]
        or list(shape) != list(entry["shape"])
        or (fortran and len(shape) > 1)
    ):
        raise CorruptIndexError(
            f"{path}: holds {dtype.str}{list(shape)}, the manifest records "
            f"{entry['dtype']}{entry['shape']}"
        )
    count = int(np.prod(shape, dtype=np.int64))
    if offset + count * dtype.itemsize != size:
        raise CorruptIndexError(
            f"{path}: {size} bytes do not hold a header and {count} values of {dtype.str}"
        )
    if count == 0:
        return np.empty(shape, dtype=dtype)
    try:
        return np.memmap(path, dtype=dtype, mode="r", offset=offset, shape=tuple(shape))
    except (ValueError, OSError) as e:
        raise CorruptIndexError(f"{path}: unreadable array file ({e})") from None


#: ``.npy`` headers are parsed with ``ast.literal_eval``, and CPython 3.11's parser is not safe to
#: enter from several threads at once ("SystemError: AST constructor recursion depth mismatch"):
#: every header neardup reads (the index's arrays, a work directory's) is read under this lock;
#: the data is mapped and read after, outside it.
NPY_HEADERS = threading.Lock()


def read_npy_header(f: Any) -> tuple[tuple[int, ...], bool, np.dtype, int]:
    """The header of the ``.npy`` file open at its start as ``f`` (binary): shape, Fortran
    order, dtype and the byte offset of its data (``f`` is left there), parsed under
    :data:`NPY_HEADERS`."""
    version = np.lib.format.read_magic(f)
    with NPY_HEADERS:
        shape, fortran, dtype = _read_header(f, version)
    return shape, fortran, dtype, f.tell()


def _read_header(f: Any, version: tuple[int, int]) -> tuple[tuple[int, ...], bool, np.dtype]:
    if version == (1, 0):
        return np.lib.format.read_array_header_1_0(f, max_header_size=10_000)
    if version == (2, 0):
        return np.lib.format.read_array_header_2_0(f, max_header_size=10_000)
    raise ValueError(f"npy format version {version} is not one neardup writes")


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


_POOL: ThreadPoolExecutor | None = None
_POOL_LOCK = threading.Lock()


def _reset_pool() -> None:
    global _POOL, _POOL_LOCK, _RETIRED
    # a forked child has none of the threads
    _POOL, _POOL_LOCK, _RETIRED = None, threading.Lock(), None


os.register_at_fork(after_in_child=_reset_pool)


def io_pool() -> ThreadPoolExecutor:
    """The threads that overlap a commit's file writes and fsyncs (shared, started once: an add
    would otherwise start a dozen threads for a few milliseconds of waiting)."""
    global _POOL
    with _POOL_LOCK:
        if _POOL is None:
            _POOL = ThreadPoolExecutor(32, thread_name_prefix="neardup-index-io")
        return _POOL


#: Seconds a retired object is kept before the reaper thread lets it go.
RETIRE_DELAY = 1.0
_RETIRED: queue.SimpleQueue | None = None


def _reaper(q: queue.SimpleQueue) -> None:
    while True:
        when, _objects = q.get()
        time.sleep(max(0.0, when - time.monotonic()))
        del _objects  # the last reference, mostly: the unmaps happen here


def retire(objects: Any) -> None:
    """Let go of ``objects`` (replaced segments, their arrays) in a thread, a moment from now.

    The last unmap of a file that a commit has deleted frees its blocks, a few milliseconds
    for a run of a few MB (more with online discard); done by whoever drops the last reference,
    it would land in an add or a query. Whoever still uses the objects keeps them alive.
    """
    global _RETIRED
    with _POOL_LOCK:
        if _RETIRED is None:
            _RETIRED = queue.SimpleQueue()
            threading.Thread(
                target=_reaper, args=(_RETIRED,), name="neardup-index-reaper", daemon=True
            ).start()
        _RETIRED.put((time.monotonic() + RETIRE_DELAY, objects))


def write_manifest(directory: str, body: dict[str, Any], unsynced: Sequence[str] = ()) -> None:
    """Commit ``body`` as the new ``MANIFEST``: fsync the data files named ``unsynced`` (written
    with ``sync=False``) and the directory (for the data files just written) while a temp file
    is written and fsynced, then rename it over ``MANIFEST`` and fsync the directory. The fsyncs
    before the rename run at once (threads), so a commit waits for about two, not one a file."""
    doc = dict(body, manifest_crc32=_body_crc(body))
    tmp = os.path.join(directory, f".{MANIFEST}.tmp")

    def write_tmp() -> None:
        with open(tmp, "w", encoding="utf-8") as f:
            json.dump(doc, f, indent=1, sort_keys=True)
            f.write("\n")
            f.flush()
            os.fsync(f.fileno())

    jobs = [write_tmp, functools.partial(_fsync, directory)]
    jobs += [functools.partial(_fsync, os.path.join(directory, n)) for n in unsynced]
    futures = [io_pool().submit(job) for job in jobs]
    try:
        for f in futures:
            f.result()
        os.replace(tmp, os.path.join(directory, MANIFEST))
    except BaseException:  # a full disk, Ctrl-C: no temporary file stays
        concurrent.futures.wait(futures)
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
    _fsync(directory)


def is_index_directory(directory: str) -> bool:
    """True when ``directory`` holds a neardup index (a ``MANIFEST`` of this magic), damaged or
    not; a cheap test (one stat) for directories that hold none."""
    path = os.path.join(directory, MANIFEST)
    if not os.path.isfile(path):
        return False
    try:
        with open(path, "rb") as f:
            raw = f.read(_MAX_MANIFEST_BYTES)
    except OSError:
        return True  # unreadable: assume the worst, it is not ours to write into
    return json.dumps(MAGIC).encode() in raw


def read_manifest(directory: str) -> dict[str, Any]:
    """Read and check ``MANIFEST``: magic, version, byte order, its own checksum, then every
    field's type and every file name (see :func:`neardup.index.manifest.check_manifest`)."""
    path = os.path.join(directory, MANIFEST)
    if not os.path.isdir(directory):
        raise FileNotFoundError(errno.ENOENT, "no such index directory", directory)
    if not os.path.exists(path):
        hint = ""
        if _interrupted_create(directory):
            hint = "; an `index create` was interrupted here: create the index again"
        raise CorruptIndexError(f"{directory}: not a neardup index (no {MANIFEST} file){hint}")
    try:
        with open(path, "rb") as f:
            raw = f.read(_MAX_MANIFEST_BYTES + 1)
        if len(raw) > _MAX_MANIFEST_BYTES:
            raise ValueError(f"larger than {_MAX_MANIFEST_BYTES} bytes")
        doc = json.loads(raw.decode("utf-8"))
    except (ValueError, RecursionError) as e:
        first = str(e).splitlines()[0] if str(e) else type(e).__name__
        raise CorruptIndexError(f"{path}: corrupt manifest ({first})") from None
    if not isinstance(doc, dict) or doc.get("magic") != MAGIC:
        raise CorruptIndexError(f"{path}: not a neardup index manifest")
    crc = doc.pop("manifest_crc32", None)
    if crc != _body_crc(doc):
        raise CorruptIndexError(f"{path}: manifest checksum mismatch; the file is corrupt")
    if doc.get("format_version") not in FORMAT_VERSIONS:
        raise CorruptIndexError(
            f"{path}: format version {doc.get('format_version')!r} is not supported "
            f"(this neardup reads versions {', '.join(map(str, FORMAT_VERSIONS))}); "
            f"upgrade neardup"
        )
    if doc.get("byte_order") != sys.byteorder:
        raise CorruptIndexError(
            f"{path}: written on a {doc.get('byte_order')}-endian machine, this one is "
            f"{sys.byteorder}-endian"
        )
    from neardup.index.manifest import check_manifest  # it builds on this module

    check_manifest(doc, path)
    return doc


def _interrupted_create(directory: str) -> bool:
    """True for a directory left by an `index create` of an earlier version that was killed:
    nothing but a ``LOCK`` file holding a pid (and maybe ``.MANIFEST.tmp``)."""
    try:
        names = set(os.listdir(directory))
    except OSError:
        return False
    if LOCK not in names or names - {LOCK, f".{MANIFEST}.tmp"}:
        return False
    try:
        with open(os.path.join(directory, LOCK), "rb") as f:
            pid = f.read(64)
    except OSError:
        return False
    return re.fullmatch(rb"\d*\n?", pid) is not None


def referenced_files(body: dict[str, Any]) -> set[str]:
    """Names of every data file a manifest references."""
    names: set[str] = set()
    for seg in body["segments"]:
        names.update(e["name"] for e in seg["files"].values())
        if seg.get("deleted"):
            names.add(seg["deleted"]["name"])
    return names


def remove_unreferenced(directory: str, body: dict[str, Any], busy: Sequence[str] = ()) -> int:
    """Delete the index's own files that ``body`` does not reference (segment arrays, their
    temporary files, ``.MANIFEST.tmp``); return how many. Only files named as the index names
    them (:data:`FILE_KINDS`) are candidates, and none of the segments named ``busy`` (being
    written by a background merge). Only the writer calls this, after a commit or when it
    opens the index."""
    keep = referenced_files(body)
    prefixes = tuple(f"{b}." for b in busy) + tuple(f".{b}." for b in busy)
    gone = 0
    for name in os.listdir(directory):
        if _OWNED.match(name) and name not in keep and not name.startswith(prefixes):
            with contextlib.suppress(FileNotFoundError):
                os.unlink(os.path.join(directory, name))
                gone += 1
    return gone


def remove_segment_files(directory: str, name: str) -> int:
    """Delete the files of segment ``name`` (finished or temporary), one that a write gave up
    on before any manifest named it; return how many."""
    gone = 0
    for f in os.listdir(directory):
        if _OWNED.match(f) and f.startswith((f"{name}.", f".{name}.")):
            with contextlib.suppress(FileNotFoundError):
                os.unlink(os.path.join(directory, f))
                gone += 1
    return gone


def create_directory(path: str, body: dict[str, Any]) -> WriterLock:
    """Create the index directory ``path`` holding ``body`` as its manifest, atomically.

    ``path`` must not exist or be an empty directory (or one left by an interrupted create of
    an earlier version). The manifest is written in a temporary directory beside ``path``,
    which is renamed to ``path``; so a create killed at any point leaves ``path`` as it was.
    Returns the writer lock, held.
    """
    real = os.path.realpath(path)
    mode = 0o777 & ~_umask()
    leftovers: list[str] = []
    if os.path.lexists(real):
        if not os.path.isdir(real):
            raise FileExistsError(f"{path}: exists and is not a directory; an index is a directory")
        names = os.listdir(real)
        if MANIFEST in names:
            raise FileExistsError(f"{path}: an index already exists here; open it with Index.open")
        if names and not _interrupted_create(real):
            raise FileExistsError(
                f"{path}: directory is not empty and holds no index; create the index in a new "
                "or empty directory"
            )
        leftovers = names
        mode = os.stat(real).st_mode & 0o7777
    parent = os.path.dirname(real)
    tmp = None
    try:
        os.makedirs(parent, exist_ok=True)
        _remove_abandoned_creates(parent, os.path.basename(real))
        tmp = tempfile.mkdtemp(prefix=f".{os.path.basename(real)}.", suffix=".tmp", dir=parent)
        os.chmod(tmp, mode)
        lock = WriterLock(tmp)
        try:
            write_manifest(tmp, body)
            for name in leftovers:
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(os.path.join(real, name))
            os.rename(tmp, real)
        except BaseException:
            lock.release()
            raise
    except OSError as e:
        if tmp is not None:
            shutil.rmtree(tmp, ignore_errors=True)
        if e.errno in (errno.ENOTEMPTY, errno.EEXIST):
            raise FileExistsError(f"{path}: something was created here meanwhile") from None
        raise OSError(e.errno, e.strerror or str(e), path) from None
    except BaseException:
        if tmp is not None:
            shutil.rmtree(tmp, ignore_errors=True)
        raise
    _fsync(parent)
    lock.path = os.path.join(real, LOCK)
    return lock


def _remove_abandoned_creates(parent: str, base: str) -> None:
    """Delete the temporary directories of earlier creates of ``base`` that were killed: named
    ``.base.XXXXXXXX.tmp``, holding nothing but a LOCK and a manifest, and whose LOCK no live
    process holds, or empty (killed before its LOCK was made; a create that is just then between
    the two steps fails cleanly)."""
    pattern = re.compile(rf"^\.{re.escape(base)}\.[a-z0-9_]{{8}}\.tmp$")
    for name in os.listdir(parent):
        d = os.path.join(parent, name)
        if not pattern.match(name) or os.path.islink(d) or not os.path.isdir(d):
            continue
        with contextlib.suppress(OSError):
            names = set(os.listdir(d))
            if not names:
                os.rmdir(d)  # only ever removes an empty directory
                continue
            if not names <= {LOCK, MANIFEST, f".{MANIFEST}.tmp"}:
                continue
            fd = os.open(os.path.join(d, LOCK), os.O_RDWR)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)  # held: a create in progress
                shutil.rmtree(d)
            finally:
                os.close(fd)


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


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
            if pid == str(os.getpid()):
                raise IndexLockedError(
                    f"index {directory} is already open for writing in this process; close "
                    f"that Index (or use it) before opening another writer"
                ) from None
            raise IndexLockedError(
                f"index {directory} is open for writing by another process (pid {pid}); "
                f"close it there or open this one with mode='r'"
            ) from None
        try:
            os.ftruncate(self.fd, 0)
            os.pwrite(self.fd, f"{os.getpid()}\n".encode(), 0)
        except OSError:  # a full disk: let go of the lock, or this process keeps it for good
            self.release()
            raise

    def release(self) -> None:
        if self.fd >= 0:
            with contextlib.suppress(OSError):
                os.ftruncate(self.fd, 0)
            fcntl.flock(self.fd, fcntl.LOCK_UN)
            os.close(self.fd)
            self.fd = -1

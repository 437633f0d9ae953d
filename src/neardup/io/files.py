"""Opening inputs wherever users keep them: local files, compressed files (``.gz``, ``.bz2``,
``.xz``, ``.zst``) and fsspec URLs (``s3://``, ``gs://``, ``hf://``, ``http(s)://``,
``memory://``, ...), always streamed, never read whole.

A byte meter (:func:`metered`) counts the bytes read from the files themselves (compressed bytes
for compressed files), so progress can be shown as a share of the inputs' sizes.

Remote filesystems need ``fsspec`` (``pip install "neardup[remote]"``) and the backend package of
the protocol (``s3fs``, ``gcsfs``, ``huggingface_hub``, ``aiohttp`` for http); a missing one is a
one-line error naming the package. Credentials and endpoints come from the backend's usual
configuration (environment variables such as ``AWS_PROFILE``, or fsspec's ``FSSPEC_S3_ENDPOINT_URL``
style variables). Remote reads time out, are retried and fail in one line naming the URL
(:mod:`neardup.io.remote`).
"""

from __future__ import annotations

import bz2
import contextlib
import contextvars
import gzip
import io
import lzma
import os
import re
import stat
import sys
import tempfile
from collections.abc import Iterable, Iterator
from typing import IO, Any

from neardup import config
from neardup._optional import MissingDependency, require
from neardup.errors import InputError
from neardup.io.decompress import Decompressed
from neardup.io.leftovers import TEMP_SUFFIX, temp_prefix
from neardup.io.remote import Resuming, remote_errors, remote_options

__all__ = [
    "COMPRESSIONS",
    "tree_size",
    "ByteMeter",
    "compression_of",
    "changed_error",
    "check_unchanged",
    "file_stamp",
    "input_copies",
    "input_size",
    "is_spooled",
    "is_url",
    "list_url",
    "local_path",
    "metered",
    "open_input",
    "open_parquet",
    "open_output_stream",
    "read_path",
    "reading_copies",
    "spooled",
    "strip_compression",
    "url_filesystem",
]

#: File name suffix -> compression, for inputs read transparently (and ``.gz``/... outputs).
COMPRESSIONS = {".gz": "gzip", ".bz2": "bz2", ".xz": "xz", ".zst": "zstd"}

_URL = re.compile(r"^[A-Za-z][A-Za-z0-9+.\-]*://")
_BUFFER = 1 << 20


def is_url(path: str | os.PathLike) -> bool:
    """True for ``scheme://...`` paths (read through fsspec); ``file://`` counts too."""
    return bool(_URL.match(os.fspath(path))) if isinstance(path, (str, os.PathLike)) else False


#: fsspec protocols that name files of this machine (``file:///data/x.jsonl``).
_LOCAL_SCHEMES = frozenset({"file", "local"})


def local_path(path: str | os.PathLike) -> str | None:
    """The file of this machine that ``path`` names: ``path`` itself when it is not a URL, the
    path of a ``file://`` (or ``local://``) URL as fsspec reads it, None for any other URL.

    The output checks resolve inputs through this, so that an input named as a URL is still
    never overwritten.

    Examples
    --------
    >>> local_path("file:///data/x.jsonl"), local_path("s3://bucket/x.jsonl")
    ('/data/x.jsonl', None)
    """
    p = os.fspath(path)
    if not is_url(p):
        return p
    if _scheme(p) not in _LOCAL_SCHEMES:
        return None
    try:
        return url_filesystem(p)[1]
    except MissingDependency:  # read the same way fsspec would: the rest, from the cwd
        return os.path.abspath(p.split("://", 1)[1])


def compression_of(path: str | os.PathLike) -> str | None:
    """``"gzip"``, ``"bz2"``, ``"xz"``, ``"zstd"`` or None, by the file name's last suffix."""
    low = os.fspath(path).lower()
    for suffix, kind in COMPRESSIONS.items():
        if low.endswith(suffix):
            return kind
    return None


def strip_compression(path: str | os.PathLike) -> str:
    """``path`` without its compression suffix (``x.jsonl.gz`` -> ``x.jsonl``)."""
    p = os.fspath(path)
    for suffix in COMPRESSIONS:
        if p.lower().endswith(suffix):
            return p[: -len(suffix)]
    return p


class ByteMeter:
    """Bytes read so far from every file opened with :func:`open_input` while it is active."""

    def __init__(self) -> None:
        self.done = 0


_METER: contextvars.ContextVar[ByteMeter | None] = contextvars.ContextVar(
    "neardup_byte_meter", default=None
)


@contextlib.contextmanager
def metered() -> Iterator[ByteMeter]:
    """Count the bytes that :func:`open_input` reads inside the ``with`` block (this thread's
    context), for byte-based progress."""
    meter = ByteMeter()
    token = _METER.set(meter)
    try:
        yield meter
    finally:
        _METER.reset(token)


class _Counted(io.RawIOBase):
    """A binary stream that adds what it reads to a :class:`ByteMeter`."""

    def __init__(self, raw: IO[bytes], meter: ByteMeter) -> None:
        self._raw = raw
        self._meter = meter

    def readable(self) -> bool:
        return True

    def readinto(self, b: Any) -> int:
        n = self._raw.readinto(b)
        if n:
            self._meter.done += n
        return n

    def seekable(self) -> bool:
        return self._raw.seekable()

    def seek(self, offset: int, whence: int = 0) -> int:
        return self._raw.seek(offset, whence)

    def tell(self) -> int:
        return self._raw.tell()

    def close(self) -> None:
        self._raw.close()
        super().close()


def _scheme(url: str) -> str:
    return url.split("://", 1)[0].lower()


def url_filesystem(url: str, **extra: Any) -> tuple[Any, str]:
    """``(filesystem, path)`` for an fsspec URL (``extra``: more options of the filesystem).

    Raises
    ------
    MissingDependency
        fsspec, or the protocol's backend package, is not installed (the message names it).
    InputError
        The protocol is unknown to fsspec.
    """
    scheme = _scheme(url)
    fsspec = require("fsspec", "remote", f"reading {scheme}:// paths")
    options = remote_options(scheme, fsspec.config.conf.get(scheme, {}))
    try:
        return fsspec.core.url_to_fs(url, **options, **extra)
    except ImportError as e:
        raise MissingDependency(_backend_hint(scheme, e)) from None
    except ValueError as e:
        if "not known" in str(e).lower():
            raise InputError(url, None, f"no filesystem handles {scheme}:// ({e})") from None
        raise


def _backend_hint(scheme: str, err: ImportError) -> str:
    from fsspec.registry import known_implementations

    cause = err.__cause__ if isinstance(err.__cause__, ImportError) else err
    package = getattr(cause, "name", None)
    if not package:
        cls = known_implementations.get(scheme, {}).get("class", "")
        package = cls.split(".")[0] or scheme
    package = package.split(".")[0].replace("_", "-")
    return (
        f"reading {scheme}:// paths needs {package}, which is not installed: pip install {package}"
    )


#: Special files (pipes, FIFOs, ``/dev/stdin``, ``<(cmd)``) read once by :func:`spooled`, as
#: named -> their temporary copy; every reader here reads the copy while it exists.
_SPOOLED: dict[str, str] = {}
#: The copies a task was given with :func:`reading_copies` (a task in another process).
_GIVEN: contextvars.ContextVar[dict[str, str] | None] = contextvars.ContextVar(
    "neardup_input_copies", default=None
)


def read_path(path: str | os.PathLike) -> str:
    """The file that reads of ``path`` open: the temporary copy of a special file that
    :func:`spooled` read (or that :func:`reading_copies` names), else ``path`` itself."""
    p = os.fspath(path)
    given = _GIVEN.get()
    if given is not None and p in given:
        return given[p]
    return _SPOOLED.get(p, p)


def is_spooled(path: str | os.PathLike) -> bool:
    """True while ``path`` is a special file read from its temporary copy (:func:`spooled`)."""
    return read_path(path) != os.fspath(path)


def input_copies(paths: Iterable[str | os.PathLike]) -> tuple[tuple[str, str], ...]:
    """``(name, copy)`` of each of ``paths`` read from its temporary copy: what a task in
    another process on this machine is given, with :func:`reading_copies`, to read them."""
    return tuple((os.fspath(p), read_path(p)) for p in paths if is_spooled(p))


@contextlib.contextmanager
def reading_copies(copies: Iterable[tuple[str, str]]) -> Iterator[None]:
    """Inside the block (this thread's context), reads of each name of ``copies``
    (:func:`input_copies`) open its copy."""
    token = _GIVEN.set(dict(copies) or None)
    try:
        yield
    finally:
        _GIVEN.reset(token)


class Spooled:
    """The special files :func:`spooled` copied: ``paths`` (as named) and ``nbytes`` in all
    (with the copies an enclosing :func:`spooled` made of the paths it was given)."""

    def __init__(self) -> None:
        self.paths: list[str] = []
        self.nbytes = 0


def _special_kind(path: str) -> str | None:
    """``"pipe"`` for a FIFO or socket, ``"device"`` for a character device (a terminal,
    ``/dev/zero``, ``/dev/null``), ``"block device"``, or None for a regular file, a directory
    or a URL."""
    if is_url(path):
        return None
    try:
        mode = os.stat(path).st_mode
    except OSError:
        return None
    if stat.S_ISFIFO(mode) or stat.S_ISSOCK(mode):
        return "pipe"
    if stat.S_ISCHR(mode):
        return "device"
    if stat.S_ISBLK(mode):
        return "block device"
    return None


#: How a device refused as an input is named, by :func:`_special_kind`.
_DEVICES = {
    "device": "a character device (a terminal, /dev/zero, /dev/null, ...)",
    "block device": "a block device",
}


class _Lines:
    """The line ends of a stream copied chunk by chunk, and the bytes of its line not ended."""

    def __init__(self) -> None:
        self.ended = 0
        self.open = 0  #: bytes of the line not ended yet

    def add(self, chunk: bytes) -> int:
        """Count ``chunk`` in; return the bytes the line open before it reaches in it (at its
        end, or at the chunk's end)."""
        first = chunk.find(b"\n")
        if first < 0:
            self.open += len(chunk)
            return self.open
        reached = self.open + first
        self.ended += chunk.count(b"\n")
        self.open = len(chunk) - chunk.rfind(b"\n") - 1
        return reached


def _read_chunk(r: IO[bytes], path: str, size: int) -> bytes:
    try:
        return r.read(size)
    except OSError as e:
        raise InputError(path, None, f"cannot read it ({e.strerror or e})") from None


def _copy_special(path: str, w: IO[bytes], tmp: str) -> int:
    """Copy the special file ``path`` to ``w`` (the file ``tmp``); return the bytes copied. A
    read error names ``path``, a write error the temporary file and where it is; a line longer
    than a record may have (:data:`neardup.config.MAX_RECORD_BYTES`) stops the copy."""
    limit = config.MAX_RECORD_BYTES
    # chunks of at most ``limit`` bytes: a line within one is never longer
    n, lines, size = 0, _Lines(), max(1, min(_BUFFER, limit))
    try:
        r = open(path, "rb")  # noqa: SIM115 - closed below
    except OSError as e:
        raise InputError(path, None, f"cannot read it ({e.strerror or e})") from None
    with r:
        while chunk := _read_chunk(r, path, size):
            line = lines.ended + 1
            if lines.add(chunk) > limit:
                raise InputError(path, line, f"more than {limit} bytes without a line "
                                 "end, more than a record may have (neardup.config."
                                 "MAX_RECORD_BYTES); its copy stopped there and nothing was "
                                 "written: is it the right input?")  # fmt: skip
            try:
                w.write(chunk)
            except OSError as e:
                raise OSError(
                    e.errno, f"{e.strerror or e} (a copy of {path}, in TMPDIR)", tmp
                ) from None
            n += len(chunk)
    return n


@contextlib.contextmanager
def spooled(
    paths: Iterable[str | os.PathLike], directory: str | os.PathLike | None = None
) -> Iterator[Spooled]:
    """Read each pipe among ``paths`` (a FIFO, ``/dev/stdin``, ``<(cmd)``'s ``/dev/fd/N``)
    once, into a temporary file in ``directory`` (default ``TMPDIR``), for a run that reads its
    inputs twice: inside the block, :func:`open_input`, :func:`open_parquet`,
    :func:`input_size`, :func:`file_stamp` and :func:`read_path` read the copy under the name
    given; the copies are removed when the block ends. Regular files, directories, URLs and
    paths an enclosing block copied are left as they are. The copy stops at a line longer than
    a record may have (:data:`neardup.config.MAX_RECORD_BYTES`), so an endless stream without
    line ends cannot fill the disk.

    Raises
    ------
    InputError
        For a device (a terminal, ``/dev/zero``, a block device: naming it), a read error of
        a pipe, or a line of a pipe over the record-size limit (nothing is left of its copy).
    """
    done = Spooled()
    try:
        for p in dict.fromkeys(os.fspath(q) for q in paths):
            if is_spooled(p):
                done.nbytes += os.path.getsize(read_path(p))
                continue
            kind = _special_kind(p)
            if kind is None:
                continue
            if kind != "pipe":
                raise InputError(p, None, f"is {_DEVICES[kind]}, not a pipe or a file of "
                                 "documents: save the documents to a file, or pipe them in "
                                 "(cmd | neardup dedup /dev/stdin)")  # fmt: skip
            fd, tmp = tempfile.mkstemp(
                prefix=temp_prefix("neardup-input"), suffix=TEMP_SUFFIX, dir=directory
            )
            _SPOOLED[p] = tmp
            done.paths.append(p)
            with os.fdopen(fd, "wb") as w:
                done.nbytes += _copy_special(p, w, tmp)
        yield done
    finally:
        for p in done.paths:
            with contextlib.suppress(OSError):
                os.unlink(_SPOOLED.pop(p))


def _open_raw(path: str) -> IO[bytes]:
    path = read_path(path)
    if not is_url(path):
        return open(path, "rb", buffering=0)  # noqa: SIM115 - closed by open_input
    fs, p = url_filesystem(path)

    def open_at(offset: int) -> IO[bytes]:
        try:
            f = fs.open(p, "rb")
        except FileNotFoundError:
            raise InputError(path, None, "no such file") from None
        if offset and not f.seekable():
            f.close()
            raise InputError(
                path, None, f"the connection dropped at byte {offset}, and the server cannot "
                "resume there (no range requests); try again, or copy the file first",
            )  # fmt: skip
        if offset:
            f.seek(offset)
        return f

    return Resuming(open_at, path)


@contextlib.contextmanager
def open_input(path: str | os.PathLike, *, decompress: bool = True) -> Iterator[IO[bytes]]:
    """``path`` opened for streaming binary reads (line iteration works), decompressed by its
    suffix unless ``decompress=False``, counted by the active :func:`metered` meter.

    Raises
    ------
    InputError
        A compressed file that is damaged or cut short, in any of its concatenated streams
        (named, with the compressed byte offset; raised by reads), or a URL that names no
        file.
    MissingDependency
        ``.zst`` without ``zstandard``, or a URL without fsspec or its backend.
    """
    p = os.fspath(path)
    raw: IO[bytes] = _open_raw(p)
    meter = _METER.get()
    stack = contextlib.ExitStack()
    with stack:
        stack.callback(raw.close)
        if meter is not None:
            raw = _Counted(raw, meter)
        kind = compression_of(p) if decompress else None
        stream: IO[bytes]
        if kind is not None:
            stream = io.BufferedReader(Decompressed(raw, kind, p), _BUFFER)
        elif hasattr(raw, "readinto"):
            stream = io.BufferedReader(raw, _BUFFER)  # type: ignore[arg-type]
        else:
            stream = raw
        stack.callback(stream.close)
        yield stream


def open_parquet(path: str | os.PathLike) -> Any:
    """``pyarrow.parquet.ParquetFile`` of a local path, of a URL (through its fsspec
    filesystem) or of stdin (``-``); its schema is ``.schema_arrow``.

    Raises
    ------
    InputError
        Naming the file when it is missing or not a readable Parquet file.
    """
    pq = require("pyarrow.parquet", feature="Parquet")
    pa = require("pyarrow", feature="Parquet")
    p = os.fspath(path)
    shown = "<stdin>" if p == "-" else p
    try:
        if p == "-":
            return pq.ParquetFile(io.BytesIO(sys.stdin.buffer.read()))
        if not is_url(p):
            return pq.ParquetFile(read_path(p))
        fs, q = url_filesystem(p)
        with remote_errors(p):
            if not fs.exists(q):
                raise InputError(p, None, "no such file")
            return pq.ParquetFile(q, filesystem=fs)
    except (InputError, MissingDependency):
        raise
    except FileNotFoundError:
        raise InputError(shown, None, "no such file") from None
    except (pa.ArrowException, OSError, ValueError, TypeError) as e:
        first = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        raise InputError(shown, None, f"not a readable Parquet file ({first})") from None


def tree_size(path: str | os.PathLike) -> int:
    """Bytes in every file below the local directory ``path``."""
    return sum(os.path.getsize(os.path.join(d, f)) for d, _, names in os.walk(path) for f in names)


def input_size(path: str | os.PathLike) -> int:
    """Size in bytes of the file as stored (compressed size for compressed files)."""
    p = os.fspath(path)
    if is_url(p):
        fs, q = url_filesystem(p)
        with remote_errors(p):
            return int(fs.size(q) or 0)
    return os.path.getsize(read_path(p))


#: What a remote filesystem's ``info()`` may report that changes when a file is rewritten.
_CHANGE_KEYS = ("size", "mtime", "LastModified", "last_modified", "ETag", "etag", "created")


def file_stamp(path: str | os.PathLike) -> tuple:
    """What changes when the file at ``path`` is written to: device, inode, size,
    modification and status-change times (ns) of a local file, which a write always changes
    and no user can set back (the status-change time); the size, modification time and ETag a
    remote filesystem reports for a URL (whatever of those it has).

    A run that reads its inputs twice takes a stamp when it first opens them and compares it
    with :func:`check_unchanged` before and after reading them again.
    """
    p = os.fspath(path)
    if is_url(p):
        fs, q = url_filesystem(p)
        with remote_errors(p):
            info = fs.info(q)
        return tuple((k, str(info[k])) for k in _CHANGE_KEYS if k in info)
    st = os.stat(read_path(p))
    return (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns)


def check_unchanged(path: str | os.PathLike, stamp: tuple, what: str = "dedup") -> None:
    """Raise :class:`InputError` naming ``path`` when its :func:`file_stamp` is no longer
    ``stamp``: the file was rewritten, cut or replaced since then (or is gone)."""
    p = os.fspath(path)
    try:
        now = file_stamp(p)
    except (OSError, InputError):
        now = None
    if now != stamp:
        raise changed_error(p, what)


def changed_error(path: str, what: str = "dedup") -> InputError:
    """The error for an input found changed between the passes of a run that reads it twice."""
    return InputError(
        path,
        None,
        f"changed while {what} ran (it reads its inputs twice); nothing was written: run it "
        "again once nothing writes to the file",
    )


def list_url(url: str) -> list[tuple[str, str]]:
    """Files named by a URL: ``[(url, name relative to the given directory)]``.

    A file is itself; a directory is walked (sorted, dot-files skipped); a pattern with
    ``*?[`` is globbed. Raises :class:`InputError` when nothing is there.
    """
    with remote_errors(url):
        return _list_url(url)


def _list_url(url: str) -> list[tuple[str, str]]:
    fs, p = url_filesystem(url)
    proto = url.split("://", 1)[0]

    def full(q: str) -> str:
        return fs.unstrip_protocol(q) if hasattr(fs, "unstrip_protocol") else f"{proto}://{q}"

    if any(c in p for c in "*?["):
        found = sorted(fs.glob(p))
        found = [q for q in found if not fs.isdir(q)]
        if not found:
            raise InputError(url, None, "no file matches this pattern")
        return [(full(q), q.rsplit("/", 1)[-1]) for q in found]
    try:
        is_dir = fs.isdir(p)
    except (OSError, ValueError):
        is_dir = False
    if is_dir:
        root = p.rstrip("/")
        found = sorted(fs.find(root))
        out = []
        for q in found:
            rel = q[len(root) :].lstrip("/")
            if any(part.startswith(".") for part in rel.split("/")):
                continue
            out.append((full(q), rel))
        return out
    if not fs.exists(p):
        raise InputError(url, None, "no such file")
    return [(url, p.rsplit("/", 1)[-1])]


@contextlib.contextmanager
def open_output_stream(raw: IO[bytes], path: str | os.PathLike) -> Iterator[IO[bytes]]:
    """``raw`` (an open binary output) compressed by ``path``'s suffix (``.gz``, ``.bz2``,
    ``.xz``, ``.zst``), or ``raw`` itself; the compressor is finished on exit, ``raw`` left
    open."""
    kind = compression_of(path)
    if kind is None:
        yield raw
        return
    if kind == "gzip":
        stream: Any = gzip.GzipFile(fileobj=raw, mode="wb", mtime=0)
    elif kind == "bz2":
        stream = bz2.BZ2File(raw, "wb")
    elif kind == "xz":
        stream = lzma.LZMAFile(raw, "wb")
    else:
        zstd = require("zstandard", "zstd", "writing .zst files")
        stream = zstd.ZstdCompressor().stream_writer(raw, closefd=False)
    try:
        yield stream
    finally:
        stream.close()

"""Strict decompression of ``.gz``, ``.bz2``, ``.xz`` and ``.zst`` inputs: every stream whole.

A compressed file may hold several streams one after another (``cat a.gz b.gz``, ``pbzip2``,
``pigz --independent``, ``zstd`` frames). Python's own readers stop silently at a later stream
that does not start as a valid one (``bz2``, ``lzma``) or at a frame cut short (``zstandard``'s
stream reader), so the documents after that point would be missing without a word. The
:class:`Decompressed` stream reads every stream to its end and raises :class:`InputError` naming
the file and the compressed byte offset for a damaged or truncated stream, and for anything
after the last stream that is not one (``NUL`` padding between and after streams is skipped,
as gzip and xz allow). Output is bounded per call, so a decompression bomb is streamed, not held.
"""

from __future__ import annotations

import bz2
import io
import lzma
import zlib
from typing import IO, Any

from neardup._optional import require
from neardup.errors import InputError

__all__ = ["Decompressed"]

_READ = 1 << 16  # compressed bytes read at a time: the precision of a reported offset
_ZSTD_FEED = 1 << 12  # zstd has no output bound: at most ~128 MiB come of 4 KiB (RLE blocks)


class _Bounded:
    """A bz2/lzma/zlib decompressor for one stream, its output bounded per call."""

    def __init__(self, kind: str) -> None:
        if kind == "gzip":
            self._d: Any = zlib.decompressobj(16 + zlib.MAX_WBITS)
        elif kind == "bz2":
            self._d = bz2.BZ2Decompressor()
        else:
            self._d = lzma.LZMADecompressor()
        self._zlib = kind == "gzip"

    def hungry(self) -> bool:
        """True when no input is held: output needs more compressed bytes."""
        return not self._d.unconsumed_tail if self._zlib else self._d.needs_input

    def push(self, data: bytes, n: int) -> bytes:
        if self._zlib:
            return self._d.decompress(self._d.unconsumed_tail + data, n)
        return self._d.decompress(data, n)

    @property
    def eof(self) -> bool:
        return self._d.eof

    @property
    def unused(self) -> bytes:
        return self._d.unused_data


class _Zstd:
    """A zstd decompressor for one frame, fed a little at a time (it has no output bound)."""

    def __init__(self) -> None:
        zstd = require("zstandard", "zstd", "reading .zst files")
        self._d = zstd.ZstdDecompressor().decompressobj()
        self._tail = b""

    def hungry(self) -> bool:
        return not self._tail

    def push(self, data: bytes, n: int) -> bytes:
        data = self._tail + data if self._tail else data
        self._tail = data[_ZSTD_FEED:]
        return self._d.decompress(data[:_ZSTD_FEED])

    @property
    def eof(self) -> bool:
        return self._d.eof

    @property
    def unused(self) -> bytes:
        return self._d.unused_data + self._tail


def _errors() -> tuple[type[BaseException], ...]:
    """What a decompressor raises for bad data (``bz2`` raises a plain ``OSError``)."""
    errs: tuple[type[BaseException], ...] = (zlib.error, lzma.LZMAError, OSError, EOFError)
    try:
        import zstandard
    except ImportError:
        return errs
    return (*errs, zstandard.ZstdError)


class Decompressed(io.RawIOBase):
    """The decompressed bytes of every stream of the compressed binary stream ``raw``
    (``kind``: ``"gzip"``, ``"bz2"``, ``"xz"`` or ``"zstd"``); ``name`` is used in errors.

    Raises :class:`InputError` (from ``read``) for a damaged stream, a stream cut short, or
    bytes after a stream that do not start a valid one.
    """

    def __init__(self, raw: IO[bytes], kind: str, name: str) -> None:
        self._raw = raw
        self._kind = kind
        self._name = name
        self._dec: _Bounded | _Zstd | None = None
        self._held = b""  # compressed bytes read, not yet given to a decompressor
        self._read = 0  # compressed bytes read from raw
        self._start = 0  # where the current stream starts
        self._ended = False  # raw has no more bytes
        self._errors = _errors()
        if kind == "zstd":
            _Zstd()  # a missing zstandard is named at open, not at the first read

    def readable(self) -> bool:
        return True

    def readinto(self, b: Any) -> int:
        n = len(b)
        while n:
            if self._dec is None and not self._next_stream():
                return 0
            out = self._step(n)
            if out:
                b[: len(out)] = out
                return len(out)
        return 0

    def _more(self) -> bytes:
        if self._held:
            data, self._held = self._held, b""
            return data
        data = self._raw.read(_READ)
        self._read += len(data)
        self._ended = not data
        return data

    def _next_stream(self) -> bool:
        """Start the next stream; False at a clean end of the file."""
        data = self._more()
        while data and not data.strip(b"\0"):
            data = self._more()  # NUL padding after a stream (gzip and xz allow it)
        data = data.lstrip(b"\0")
        if not data:
            return False
        self._start = self._read - len(data)
        self._dec = _Zstd() if self._kind == "zstd" else _Bounded(self._kind)
        self._held = data
        return True

    def _step(self, n: int) -> bytes:
        """Up to ``n`` decompressed bytes (maybe none) of the current stream."""
        dec = self._dec
        assert dec is not None
        if dec.eof:
            self._held = dec.unused + self._held
            self._dec = None
            return b""
        data = self._more() if dec.hungry() else b""
        try:
            out = dec.push(data, n)
        except self._errors as e:
            raise self._error(f"damaged data ({e}), before compressed byte") from None
        if not out and self._ended and dec.hungry() and not dec.eof:
            raise self._error("the file ends inside a compressed stream (cut short?) at byte")
        return out

    def _error(self, what: str) -> InputError:
        where = f"; that stream starts at byte {self._start}" if self._start else ""
        msg = f"cannot decompress ({self._kind}): {what} {self._read}{where}"
        return InputError(self._name, None, msg)

    def close(self) -> None:
        self._dec = None
        super().close()

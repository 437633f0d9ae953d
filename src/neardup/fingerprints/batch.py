"""Documents to the fingerprint kernels: chunks, their text in one or two buffers, threads.

The only work under the GIL is copying each chunk's text into its buffers with C-level steps
(``str.isascii`` and ``len`` of each document, both O(1); ``str.encode``, ``join``): ASCII text
as it is, other text as UTF-16, the cheapest encoding of Python's wide strings (about 0.1 and
0.3 ns per byte of UTF-8). The kernels (``_pipeline.py``) do the rest, normalization included,
without the GIL, so chunks run in parallel on threads.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from itertools import compress
from typing import Any, TypeVar

import numpy as np

from neardup import config
from neardup.fingerprints._normalize import first_invalid_utf8
from neardup.fingerprints._pipeline import KIND_ASCII, KIND_UTF8, KIND_UTF16, ChunkData

__all__ = [
    "decode_document",
    "encode_chunk",
    "encode_one",
    "join_keys",
    "plan_chunks",
    "plan_sizes",
    "run_chunks",
    "threads_for",
    "utf8_chunk",
]

#: Fingerprinting: at most this many documents per chunk (one chunk is one kernel call on one
#: thread, after one join and one UTF-8 encoding of its text under the GIL).
FINGERPRINT_CHUNK_DOCS = 2048

#: Fingerprinting: at most this many characters (str) or bytes per chunk...
FINGERPRINT_CHUNK_BYTES = 4 << 20

#: ... but chunks small enough that every thread gets about this many of them, down to
#: FINGERPRINT_CHUNK_MIN_BYTES, so that threads end together.
FINGERPRINT_CHUNKS_PER_THREAD = 4

#: The smallest chunk (bytes) that FINGERPRINT_CHUNKS_PER_THREAD cuts.
FINGERPRINT_CHUNK_MIN_BYTES = 256 << 10

#: Fingerprinting: a chunk whose documents average fewer characters than this is joined into
#: one string before it is encoded (one call); larger documents are encoded one by one (one
#: copy less).
FINGERPRINT_JOIN_BELOW = 512

Document = str | bytes
T = TypeVar("T")


def decode_document(doc: Any, index: int) -> str:
    """``doc`` as ``str``: ``str`` as it is, UTF-8 bytes decoded (strict)."""
    if isinstance(doc, str):
        return doc
    if isinstance(doc, (bytes, bytearray, memoryview)):
        try:
            return bytes(doc).decode("utf-8")
        except UnicodeDecodeError as e:
            raise ValueError(f"document {index} is not valid UTF-8: {e}") from None
    raise TypeError(f"document {index} must be str or bytes, got {type(doc).__name__}")


def _raw_utf8(doc: Any, index: int, validate: bool) -> bytes:
    """The UTF-8 bytes of one document, not normalized: ``str`` encoded (lone surrogates as
    ``surrogatepass`` writes them), ``bytes``/``bytearray`` as they are (checked when
    ``validate``), anything else decoded first."""
    if isinstance(doc, str):
        return doc.encode("utf-8", "surrogatepass")
    if isinstance(doc, (bytes, bytearray)) and not validate:
        return bytes(doc)  # C-string semantics for the reference tokenizer: NUL ends the text
    return decode_document(doc, index).encode("utf-8")


# The UTF-8/ASCII buffer is a bytearray (a writable array), the type of the kernels' own
# normalized text: one compiled specialization of the tokenizer and hashes serves both.
_JOIN8 = bytearray().join


def _lengths(docs: Sequence[Any]) -> np.ndarray:
    return np.fromiter(map(len, docs), dtype=np.int64, count=len(docs))


# One array type per buffer (each other type compiles the kernel again): the UTF-8/ASCII
# buffer is always writable (a bytearray), the UTF-16 buffer always read-only (bytes).
def _buffer8(data: bytearray) -> np.ndarray:
    return np.frombuffer(data if data else bytearray(2), dtype=np.uint8)


def _buffer16(data: bytes) -> np.ndarray:
    return np.frombuffer(data if data else bytes(2), dtype=np.dtype("<u2"))


def _chunk(
    data8: bytearray,
    len8: np.ndarray,
    kind: int | np.ndarray,
    data16: bytes = b"",
    len16: np.ndarray | None = None,
    off16_in_chars: bool = False,
) -> ChunkData:
    n = len8.shape[0]
    off8 = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(len8, out=off8[1:])
    off16 = np.zeros(n + 1, dtype=np.int64)
    if len16 is not None:
        np.cumsum(len16, out=off16[1:])
    if isinstance(kind, int):
        kinds = (1 << kind) if n else 0
    else:
        kinds = sum(1 << k for k in (KIND_UTF8, KIND_UTF16, KIND_ASCII) if (kind == k).any())
    return ChunkData(
        buf8=_buffer8(data8),
        off8=off8,
        buf16=_buffer16(data16),
        off16=off16,
        kind=np.full(n, kind, dtype=np.uint8) if isinstance(kind, int) else kind,
        off16_in_chars=off16_in_chars,
        kinds=kinds,
    )


def _utf16(doc: str) -> bytes:
    return doc.encode("utf-16-le")  # strict: a lone surrogate raises UnicodeEncodeError


def _encode_str(docs: Sequence[str], ascii_: np.ndarray) -> ChunkData:
    """``str`` documents (``ascii_``: which are ASCII) as ASCII and UTF-16 buffers; raises
    UnicodeEncodeError when one holds a lone surrogate."""
    n = len(docs)
    lengths = _lengths(docs)
    # Large documents are encoded one by one (fewer copies); many small ones are joined first
    # (fewer calls). Both give the same buffers.
    per_doc = int(lengths.sum()) >= FINGERPRINT_JOIN_BELOW * n
    if ascii_.all():
        data8 = _JOIN8(map(str.encode, docs)) if per_doc else bytearray("".join(docs), "ascii")
        return _chunk(data8, lengths, KIND_ASCII)
    wide = ~ascii_
    narrow_docs = list(compress(docs, ascii_))
    wide_docs = list(compress(docs, wide))
    kind = np.where(wide, KIND_UTF16, KIND_ASCII).astype(np.uint8)
    if per_doc:
        parts = list(map(_utf16, wide_docs))
        len16 = np.zeros(n, dtype=np.int64)
        len16[wide] = _lengths(parts) // 2
        data8 = _JOIN8(map(str.encode, narrow_docs))
        return _chunk(data8, lengths * ascii_, kind, b"".join(parts), len16)
    data16 = "".join(wide_docs).encode("utf-16-le")
    data8 = bytearray("".join(narrow_docs), "ascii")
    return _chunk(data8, lengths * ascii_, kind, data16, lengths * wide, off16_in_chars=True)


def encode_chunk(docs: Sequence[Any], first: int, validate: bool) -> ChunkData:
    """The text of a chunk of documents in the buffers the kernels read.

    ``str`` documents: the ASCII ones as they are, the others as UTF-16 (the cheapest
    encoding of Python's wide strings; the kernels decode it), copied once into two buffers
    with C-level steps only (``isascii``, ``len``, ``encode``, ``join``). A chunk with a lone
    surrogate (which UTF-16 cannot carry), ``bytes`` documents or a mix of types goes as
    UTF-8 (``surrogatepass``).

    Parameters
    ----------
    docs : sequence of str or bytes
        The chunk's documents (``docs[i]`` is document ``first + i`` in error messages).
    first : int
        Index of ``docs[0]`` in the whole input.
    validate : bool
        Bytes must be valid UTF-8 (the normalizations need text); else they pass as they are.

    Returns
    -------
    ChunkData
        See ``_pipeline.ChunkData``.
    """
    try:
        ascii_ = np.fromiter(map(str.isascii, docs), dtype=bool, count=len(docs))
    except TypeError:  # not every document is a str
        pass
    else:
        try:
            return _encode_str(docs, ascii_)
        except UnicodeEncodeError:  # a lone surrogate: UTF-8 with surrogatepass below
            pass
    if all(type(d) is bytes for d in docs):
        data8 = _JOIN8(docs)
        if data8.isascii():  # valid UTF-8, and the kernel needs no normalization code for it
            return _chunk(data8, _lengths(docs), KIND_ASCII)
        chunk = _chunk(data8, _lengths(docs), KIND_UTF8)
        if validate:
            bad = int(first_invalid_utf8(chunk.buf8, chunk.off8))
            if bad >= 0:
                decode_document(docs[bad], first + bad)  # raises, naming the document
        return chunk
    encoded = [_raw_utf8(d, first + i, validate) for i, d in enumerate(docs)]
    return _chunk(_JOIN8(encoded), _lengths(encoded), KIND_UTF8)


_NO8 = _buffer8(bytearray())
_NO16 = _buffer16(b"")
_KIND1 = {k: np.full(1, k, dtype=np.uint8) for k in (KIND_ASCII, KIND_UTF16)}
_ASCII = 1 << KIND_ASCII
_UTF16 = 1 << KIND_UTF16


def encode_one(doc: Any, validate: bool) -> ChunkData:
    """``encode_chunk([doc], 0, validate)``, with less overhead for a ``str``."""
    if type(doc) is str:
        zeros = np.zeros(2, dtype=np.int64)
        if doc.isascii():
            if doc:
                data = np.frombuffer(bytearray(doc, "ascii"), dtype=np.uint8)
                off = np.array((0, data.shape[0]), dtype=np.int64)
                return ChunkData(data, off, _NO16, zeros, _KIND1[KIND_ASCII], False, _ASCII)
        else:
            try:
                data16 = np.frombuffer(_utf16(doc), dtype=np.dtype("<u2"))
            except UnicodeEncodeError:
                pass
            else:
                off = np.array((0, data16.shape[0]), dtype=np.int64)
                return ChunkData(_NO8, zeros, data16, off, _KIND1[KIND_UTF16], False, _UTF16)
    return encode_chunk([doc], 0, validate)


def utf8_chunk(
    data: np.ndarray, offsets: np.ndarray, a: int, b: int, ascii_: np.ndarray | None = None
) -> ChunkData:
    """Documents ``a`` to ``b`` of UTF-8 text in one buffer (document ``i`` is
    ``data[offsets[i]:offsets[i + 1]]``; ``data`` writable uint8) as the kernels read them;
    ``ascii_`` (bool[b - a]): which are pure ASCII, when known."""
    lo, hi = int(offsets[a]), int(offsets[b])
    if ascii_ is None:
        kind: int | np.ndarray = KIND_UTF8
    else:
        kind = np.where(ascii_, KIND_ASCII, KIND_UTF8).astype(np.uint8)
    chunk = _chunk(bytearray(), offsets[a + 1 : b + 1] - offsets[a:b], kind)
    return chunk._replace(buf8=data[lo:hi] if hi > lo else chunk.buf8)


def threads_for(threads: int | None) -> int:
    """``threads``, checked, or the default (``NEARDUP_THREADS`` or the usable CPU count)."""
    if threads is not None:
        if threads < 1:
            raise ValueError(f"threads must be >= 1 (got {threads})")
        return int(threads)
    return config.default_threads()


def plan_chunks(docs: Sequence[Any], threads: int) -> list[tuple[int, int]]:
    """``(start, stop)`` document ranges: at most ``FINGERPRINT_CHUNK_DOCS`` documents and about
    ``FINGERPRINT_CHUNK_BYTES`` characters each, smaller when that gives every thread
    ``FINGERPRINT_CHUNKS_PER_THREAD`` chunks (down to ``FINGERPRINT_CHUNK_MIN_BYTES``)."""
    n = len(docs)
    try:
        sizes = _lengths(docs)
    except TypeError:  # something without a length: the chunk that holds it reports it
        sizes = np.fromiter(
            (len(d) if isinstance(d, (str, bytes, bytearray)) else 0 for d in docs),
            dtype=np.int64,
            count=n,
        )
    return plan_sizes(sizes, threads)


def plan_sizes(sizes: np.ndarray, threads: int) -> list[tuple[int, int]]:
    """:func:`plan_chunks` of documents of ``sizes`` characters or bytes (int64[n])."""
    n = len(sizes)
    cum = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(sizes, out=cum[1:])
    target = int(cum[-1]) // max(1, threads * FINGERPRINT_CHUNKS_PER_THREAD)
    limit = max(1, min(FINGERPRINT_CHUNK_BYTES, max(FINGERPRINT_CHUNK_MIN_BYTES, target)))
    per = max(1, int(FINGERPRINT_CHUNK_DOCS))
    chunks = []
    start = 0
    while start < n:
        by_size = int(np.searchsorted(cum, cum[start] + limit, side="left"))
        stop = max(start + 1, min(n, start + per, by_size))
        chunks.append((start, stop))
        start = stop
    return chunks


def join_keys(
    plan: list[tuple[int, int]], parts: list[tuple[Any, np.ndarray, np.ndarray]], n: int
) -> tuple[np.ndarray, np.ndarray]:
    """``(offsets, keys)`` of ``n`` documents from the chunks ``plan``, whose kernel results
    ``(fingerprints, key offsets from 0, keys)`` are ``parts``."""
    offsets = np.zeros(n + 1, dtype=np.int64)
    pos = 0
    for (a, b), (_, key_off, _) in zip(plan, parts, strict=True):
        offsets[a + 1 : b + 1] = key_off[1:] + pos
        pos += int(key_off[-1])
    keys = np.concatenate([p[2] for p in parts]) if parts else np.zeros(0, dtype=np.uint32)
    return offsets, keys


def run_chunks(fn: Callable[[int, int], T], chunks: list[tuple[int, int]], threads: int) -> list[T]:
    """``[fn(a, b) for a, b in chunks]``, on up to ``threads`` threads (in order)."""
    if threads <= 1 or len(chunks) <= 1:
        return [fn(a, b) for a, b in chunks]
    with ThreadPoolExecutor(max_workers=min(threads, len(chunks))) as pool:
        return list(pool.map(lambda ab: fn(*ab), chunks))

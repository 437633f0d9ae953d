"""Chunks for the fingerprint kernels: buffers and offsets for every kind of input, chunk plans,
threads."""

from __future__ import annotations

import numpy as np
import pytest

from neardup.fingerprints import Fingerprinter
from neardup.fingerprints import batch as fbatch
from neardup.fingerprints._normalize import _char_to_unit_offsets
from neardup.fingerprints._pipeline import KIND_ASCII, KIND_UTF8, KIND_UTF16
from neardup.fingerprints.batch import (
    encode_chunk,
    encode_one,
    plan_chunks,
    run_chunks,
    threads_for,
)

DOCS = ["plain ascii", "", "Grüße", "日本語\U00020000", "x", "emoji \U0001f600!", "ASCII AGAIN"]


def texts_of(chunk) -> list[str | bytes]:
    """Each document's text back from a chunk (UTF-8 bytes, or str from UTF-16)."""
    off16 = _char_to_unit_offsets(chunk.buf16, chunk.off16) if chunk.off16_in_chars else chunk.off16
    out: list[str | bytes] = []
    for d, kind in enumerate(chunk.kind):
        if kind == KIND_UTF16:
            units = chunk.buf16[off16[d] : off16[d + 1]]
            out.append(units.tobytes().decode("utf-16-le"))
        else:
            out.append(chunk.buf8[chunk.off8[d] : chunk.off8[d + 1]].tobytes())
    return out


@pytest.mark.parametrize("join_below", [0, 10**9])  # per document / joined
def test_str_documents_split_into_ascii_and_utf16(monkeypatch, join_below):
    monkeypatch.setattr(fbatch, "FINGERPRINT_JOIN_BELOW", join_below)
    chunk = encode_chunk(DOCS, 0, True)
    assert chunk.off16_in_chars == (join_below > 0)
    kinds = [KIND_ASCII if d.isascii() else KIND_UTF16 for d in DOCS]
    assert chunk.kind.tolist() == kinds
    assert texts_of(chunk) == [d.encode() if d.isascii() else d for d in DOCS]
    assert chunk.buf8.dtype == np.uint8 and chunk.buf16.dtype == np.dtype("<u2")


@pytest.mark.parametrize("join_below", [0, 10**9])
def test_all_ascii_and_empty(monkeypatch, join_below):
    monkeypatch.setattr(fbatch, "FINGERPRINT_JOIN_BELOW", join_below)
    chunk = encode_chunk(["a", "bc", ""], 0, True)
    assert chunk.kind.tolist() == [KIND_ASCII] * 3 and chunk.off8.tolist() == [0, 1, 3, 3]
    chunk = encode_chunk(["", ""], 0, True)
    assert chunk.buf8.shape[0] >= 1 and chunk.off8.tolist() == [0, 0, 0]


def test_lone_surrogates_go_as_utf8_surrogatepass():
    docs = ["ok", "a\ud800b", "日本"]
    chunk = encode_chunk(docs, 0, True)
    assert chunk.kind.tolist() == [KIND_UTF8] * 3
    assert texts_of(chunk) == [d.encode("utf-8", "surrogatepass") for d in docs]
    one = encode_one("x\udfff", True)
    assert texts_of(one) == ["x\udfff".encode("utf-8", "surrogatepass")]


def test_bytes_documents():
    docs = [b"caf\xc3\xa9", b"", b"plain"]
    chunk = encode_chunk(docs, 0, True)
    assert chunk.kind.tolist() == [KIND_UTF8] * 3 and texts_of(chunk) == docs
    bad = [b"ok", b"\xff\xfe"]
    with pytest.raises(ValueError, match="document 8 is not valid UTF-8"):
        encode_chunk(bad, 7, True)
    assert texts_of(encode_chunk(bad, 7, False)) == bad  # as they are without normalization


def test_ascii_bytes_are_ascii_documents():
    # all-ASCII bytes need no validation and no normalization code in the kernel
    chunk = encode_chunk([b"plain", b"", b"NUL\0byte"], 0, True)
    assert chunk.kind.tolist() == [KIND_ASCII] * 3 and chunk.kinds == 1 << KIND_ASCII
    assert texts_of(chunk) == [b"plain", b"", b"NUL\0byte"]


@pytest.mark.parametrize(
    "docs",
    [DOCS, ["a", "bc"], [], ["Grüße"], ["ok", "a\ud800b"], [b"caf\xc3\xa9", b"x"], [b"x"]],
)
def test_kinds_and_one_array_type_per_buffer(docs):
    # chunk.kinds picks the compiled kernel; buffers of other array types would compile it again
    import numba

    for chunk in [encode_chunk(docs, 0, True)] + [encode_one(d, True) for d in docs]:
        assert chunk.kinds == sum(1 << int(k) for k in set(chunk.kind.tolist()))
        assert numba.typeof(chunk.buf8) == numba.typeof(np.zeros(2, np.uint8))  # writable
        assert numba.typeof(chunk.buf16) == numba.typeof(np.frombuffer(b"\0\0", "<u2"))


def test_mixed_and_other_types():
    docs = ["é", b"b\xc3\xa9", bytearray(b"ba"), memoryview(b"mv")]
    chunk = encode_chunk(docs, 0, True)
    assert texts_of(chunk) == ["é".encode(), b"b\xc3\xa9", b"ba", b"mv"]
    assert texts_of(encode_chunk([bytearray(b"\xff"), "x"], 0, False)) == [b"\xff", b"x"]
    with pytest.raises(ValueError, match="document 1 is not valid UTF-8"):
        encode_chunk(["x", memoryview(b"\xff")], 0, False)  # memoryview: always decoded
    with pytest.raises(TypeError, match="document 5 must be str or bytes, got int"):
        encode_chunk(["a", 3], 4, True)
    with pytest.raises(ValueError, match="document 4 is not valid UTF-8"):
        encode_chunk([b"\xff", 3], 4, True)  # the first bad document is the one reported


def test_encode_one_matches_encode_chunk():
    for doc in ["", "abc", "Grüße", "\U0001f600", b"bytes", "a\ud800"]:
        assert texts_of(encode_one(doc, True)) == texts_of(encode_chunk([doc], 0, True))


def test_plan_chunks(monkeypatch):
    docs = ["x" * 100] * 50
    monkeypatch.setattr(fbatch, "FINGERPRINT_CHUNK_MIN_BYTES", 1)
    monkeypatch.setattr(fbatch, "FINGERPRINT_CHUNK_BYTES", 1000)
    chunks = plan_chunks(docs, 1)
    assert chunks[0] == (0, 10) and chunks[-1][1] == 50
    assert all(b > a for a, b in chunks) and all(
        b == a2 for (_, b), (a2, _) in zip(chunks, chunks[1:], strict=False)
    )
    # several chunks for every thread
    assert len(plan_chunks(docs, 5)) >= 15
    monkeypatch.setattr(fbatch, "FINGERPRINT_CHUNK_DOCS", 7)
    assert max(b - a for a, b in plan_chunks(docs, 1)) == 7
    assert plan_chunks([], 4) == []
    odd = plan_chunks(["a", 3, "b"], 1)  # no len: sized 0, reported by its chunk later
    assert odd[0][0] == 0 and odd[-1][1] == 3


def test_run_chunks_and_threads():
    chunks = [(0, 2), (2, 5), (5, 6)]
    assert run_chunks(lambda a, b: (a, b), chunks, 1) == chunks
    assert run_chunks(lambda a, b: (a, b), chunks, 3) == chunks
    assert threads_for(3) == 3
    with pytest.raises(ValueError, match="threads must be >= 1"):
        threads_for(0)
    with pytest.raises(ValueError, match="threads must be >= 1"):
        Fingerprinter().fingerprint_many(["a"], threads=0)

"""Fingerprinter.features_utf8 / fingerprint_utf8: documents as UTF-8 in one buffer give the
fingerprints and shingle keys of the same documents as ``str``, bit for bit (and the naive
pipeline's, tests/naive.py)."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from naive import naive_fingerprint, naive_shingle_keys
from test_fingerprint import ALPHABET, OPTIONS

from neardup.fingerprints import Fingerprinter
from neardup.fingerprints import batch as fbatch


def _buffer(texts: list[str]) -> tuple[np.ndarray, np.ndarray]:
    raw = [t.encode("utf-8", "surrogatepass") for t in texts]
    offsets = np.zeros(len(raw) + 1, dtype=np.int64)
    np.cumsum([len(r) for r in raw], out=offsets[1:])
    return np.frombuffer(b"".join(raw) or b"\0", dtype=np.uint8).copy(), offsets


@settings(max_examples=300, deadline=None)
@given(st.lists(st.text(alphabet=ALPHABET, max_size=60), max_size=6), OPTIONS, st.integers(1, 3))
@pytest.mark.slow
def test_utf8_buffer_fingerprints_as_str(texts, options, threads):
    fp = Fingerprinter("default", **options)
    data, offsets = _buffer(texts)
    got = fp.features_utf8(data, offsets, threads, validate=False)
    want = fp.features_many(texts, threads=1)
    assert got.fingerprints.tolist() == want.fingerprints.tolist()
    assert got.offsets.tolist() == want.offsets.tolist() and got.keys.tolist() == want.keys.tolist()
    assert got.fingerprints.tolist() == [naive_fingerprint(t, **options) for t in texts]
    alone = fp.fingerprint_utf8(data, offsets, threads, validate=False)
    assert alone.tolist() == want.fingerprints.tolist()
    ascii_ = np.array([t.isascii() for t in texts], dtype=bool)  # the ASCII kernel stages
    told = fp.features_utf8(data, offsets, threads, validate=False, ascii=ascii_)
    assert told.fingerprints.tolist() == want.fingerprints.tolist()
    assert told.keys.tolist() == want.keys.tolist()
    keys = [np.unique(np.array(naive_shingle_keys(t, **options), dtype=np.uint64)) for t in texts]
    assert [k.tolist() for k in keys] == [
        got.keys[a:b].tolist() for a, b in zip(got.offsets[:-1], got.offsets[1:], strict=True)
    ]


@settings(max_examples=60, deadline=None)
@given(st.lists(st.text(alphabet=ALPHABET, max_size=300), min_size=1, max_size=40))
@pytest.mark.slow
def test_presets_and_many_chunks(texts):
    old = fbatch.FINGERPRINT_CHUNK_DOCS
    fbatch.FINGERPRINT_CHUNK_DOCS = 3
    try:
        for preset in ("default", "reference"):
            fp = Fingerprinter(preset)
            data, offsets = _buffer(texts)
            got = fp.features_utf8(data, offsets, 2, validate=False)
            want = fp.features_many(texts, threads=2)
            assert got.fingerprints.tolist() == want.fingerprints.tolist()
            assert got.keys.tolist() == want.keys.tolist()
    finally:
        fbatch.FINGERPRINT_CHUNK_DOCS = old


def test_validation_and_read_only_buffers():
    fp = Fingerprinter("default")
    data = np.frombuffer(b"good text\xffbad", dtype=np.uint8)  # read-only: copied
    offsets = np.array([0, 9, 13], dtype=np.int64)
    with pytest.raises(ValueError, match="document 1 is not valid UTF-8"):
        fp.features_utf8(data, offsets)
    assert fp.fingerprint_utf8(data, offsets[:2]).tolist() == [fp.fingerprint("good text")]
    ref = Fingerprinter("reference")  # no normalization: bytes as they are
    assert (
        ref.fingerprint_utf8(data, offsets).tolist()
        == ref.fingerprint_many([b"good text", b"\xffbad"]).tolist()
    )
    empty = fp.features_utf8(np.zeros(0, np.uint8), np.zeros(1, np.int64))
    assert len(empty.fingerprints) == 0 and empty.offsets.tolist() == [0]


def test_python_options_take_the_str_path():
    fp = Fingerprinter("default", normalize=str.upper, weighting=lambda s, c: 2.0)
    texts = ["Hello World again", "\ud800 lone", ""]
    data, offsets = _buffer(texts)
    got = fp.features_utf8(data, offsets, validate=False)
    want = fp.features_many(texts)
    assert got.fingerprints.tolist() == want.fingerprints.tolist()
    assert got.keys.tolist() == want.keys.tolist()
    with pytest.raises(ValueError, match="not valid UTF-8"):
        fp.fingerprint_utf8(data, offsets)

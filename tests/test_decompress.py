"""Compressed inputs made of several streams: every stream is read whole, and a damaged or cut
short stream anywhere (not only the first) is one line naming the file and the compressed byte
offset, exit status 2, nothing written: never documents silently missing."""

from __future__ import annotations

import bz2
import gzip
import json
import lzma
import os

import pytest
from cli import invoke

from neardup.errors import InputError
from neardup.io.files import open_input

zstandard = pytest.importorskip("zstandard")

#: every codec, zstd with its checksum (without one, zstd cannot tell damaged data from good)
COMPRESS = {
    ".gz": lambda b: gzip.compress(b, mtime=0),
    ".bz2": bz2.compress,
    ".xz": lzma.compress,
    ".zst": lambda b: zstandard.ZstdCompressor(write_checksum=True).compress(b),
}
FIRST = b"".join(
    b'{"id": %d, "text": "first part line %d of the corpus"}\n' % (i, i) for i in range(300)
)
SECOND = b"".join(
    b'{"id": %d, "text": "second %d part, other words"}\n' % (i, i) for i in range(300, 600)
)


def _read(path: str) -> bytes:
    with open_input(path) as f:
        return f.read()


def _write(path, data: bytes) -> str:
    with open(path, "wb") as f:
        f.write(data)
    return str(path)


@pytest.mark.parametrize("suffix", sorted(COMPRESS))
def test_concatenated_streams_and_nul_padding_read_whole(tmp_path, suffix):
    c = COMPRESS[suffix]
    path = _write(tmp_path / f"x.jsonl{suffix}", c(FIRST) + b"\0" * 8 + c(SECOND) + c(b"") + b"\0")
    assert _read(path) == FIRST + SECOND
    assert _read(_write(tmp_path / f"e.jsonl{suffix}", b"")) == b""


def _damaged_second_streams(suffix: str):
    """``(what, file bytes)``: the second stream damaged at its start, middle and end, cut
    short at each stream boundary, or followed by bytes that start no stream."""
    c = COMPRESS[suffix]
    one, two = c(FIRST), c(SECOND)
    for at in (0, 2, len(two) // 2, len(two) - 1):
        bad = bytearray(two)
        bad[at] ^= 0xFF
        yield f"byte {at} of the second stream flipped", one + bytes(bad)
    for cut in (len(one) - 1, len(one) + 1, len(one) + len(two) // 2, len(one) + len(two) - 1):
        yield f"cut at byte {cut}", (one + two)[:cut]
    yield "garbage after the last stream", one + two + b"garbage"


@pytest.mark.parametrize("suffix", sorted(COMPRESS))
def test_a_damaged_later_stream_is_an_error_naming_the_offset(tmp_path, suffix):
    path = str(tmp_path / f"x.jsonl{suffix}")
    for what, data in _damaged_second_streams(suffix):
        _write(path, data)
        with pytest.raises(InputError, match=r"cannot decompress .* byte \d+") as e:
            _read(path)
        assert str(e.value).startswith(f"{path}: ") and "\n" not in str(e.value), what


@pytest.mark.parametrize("suffix", [".gz", ".bz2"])
def test_dedup_of_a_damaged_concatenation_exits_2_and_writes_nothing(tmp_path, suffix):
    """A .gz damaged in the middle was a zlib.error traceback; a .bz2 whose second stream is
    damaged lost that stream's documents and exited 0."""
    c = COMPRESS[suffix]
    two = bytearray(c(SECOND))
    two[2 if suffix == ".bz2" else len(two) // 3] ^= 0xFF
    path = _write(tmp_path / f"x.jsonl{suffix}", c(FIRST) + bytes(two))
    before = sorted(os.listdir(tmp_path))
    r = invoke("neardup", "dedup", path, "-o", str(tmp_path / "kept.jsonl"), "-q", text=True)
    assert r.returncode == 2, r.stderr
    assert r.stderr.count("\n") == 1 and "Traceback" not in r.stderr
    assert r.stderr.startswith(f"neardup: error: {path}: cannot decompress")
    assert f"that stream starts at byte {len(c(FIRST))}" in r.stderr
    assert sorted(os.listdir(tmp_path)) == before


def test_the_whole_concatenation_is_deduplicated(tmp_path):
    path = _write(tmp_path / "x.jsonl.bz2", bz2.compress(FIRST) + bz2.compress(SECOND))
    out = tmp_path / "kept.jsonl"
    r = invoke("neardup", "dedup", path, "-o", str(out), "-q", "-d", "0", text=True)
    assert r.returncode == 0, r.stderr
    ids = [json.loads(line)["id"] for line in out.read_text().splitlines()]
    assert ids == list(range(600))


@pytest.mark.parametrize("suffix", sorted(COMPRESS))
def test_a_text_file_over_the_record_size_names_its_uncompressed_size(
    tmp_path, monkeypatch, suffix
):
    """It named the compressed size ("the file is 0 bytes, more than 268435456")."""
    from neardup import config
    from neardup.io.readers import read_text_file

    monkeypatch.setattr(config, "MAX_RECORD_BYTES", 64)
    path = _write(tmp_path / f"page.txt{suffix}", COMPRESS[suffix](b"word " * 2000))
    with pytest.raises(InputError, match="the file is 10000 bytes uncompressed, more than the 64"):
        list(read_text_file(path))
    out = tmp_path / "kept"
    r = invoke("neardup", "dedup", path, "-o", str(out), "-q", text=True)
    assert r.returncode == 2 and "10000 bytes uncompressed" in r.stderr, r.stderr
    plain = _write(tmp_path / "page.txt", b"word " * 20)
    with pytest.raises(InputError, match="the file is 100 bytes, more than the 64"):
        list(read_text_file(plain))

"""Compressed and remote inputs (neardup.io.files): the same documents and the same dedup decisions
as the plain local file, streamed; real servers on localhost for http:// and s3://."""

from __future__ import annotations

import bz2
import contextlib
import functools
import gzip
import http.server
import lzma
import os
import socket
import sys
import threading

import numpy as np
import pytest
from cli import invoke

import neardup
from neardup._optional import MissingDependency
from neardup.errors import InputError
from neardup.io.files import (
    compression_of,
    input_size,
    is_url,
    list_url,
    metered,
    open_input,
    strip_compression,
)
from neardup.io.readers import detect_format, read_documents

SAMPLE = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "data", "sample")
CORPUS = os.path.join(SAMPLE, "corpus.jsonl")

fsspec = pytest.importorskip("fsspec")
zstandard = pytest.importorskip("zstandard")

COMPRESSORS = {
    ".gz": lambda b: gzip.compress(b, mtime=0),
    ".bz2": bz2.compress,
    ".xz": lzma.compress,
    ".zst": lambda b: zstandard.ZstdCompressor().compress(b),
}


@functools.lru_cache(maxsize=1)
def _sample_bytes() -> bytes:
    with open(CORPUS, "rb") as f:
        return f.read()


@functools.lru_cache(maxsize=1)
def _plain_result():
    return neardup.dedup(CORPUS)


def _write(path, data: bytes) -> str:
    with open(path, "wb") as f:
        f.write(data)
    return str(path)


def test_names():
    assert compression_of("a/b.JSONL.GZ") == "gzip"
    assert compression_of("x.zst") == "zstd" and compression_of("x.jsonl") is None
    assert strip_compression("x.jsonl.xz") == "x.jsonl"
    assert detect_format("x.jsonl.bz2") == "jsonl"
    assert detect_format("x.parquet") == "parquet" and detect_format("x.txt.gz") == "text"
    assert is_url("s3://bucket/x.jsonl") and is_url("memory://a") and not is_url("a/b:c")


@pytest.mark.parametrize("suffix", sorted(COMPRESSORS))
def test_compressed_lines_read_as_plain(tmp_path, suffix):
    data = "one\r\ntwo é\n\nlast without newline".encode()
    path = _write(tmp_path / f"docs.txt{suffix}", COMPRESSORS[suffix](data))
    got = [r.text for r in read_documents([path], "lines")]
    assert got == ["one", "two é", "", "last without newline"]
    whole = [r.text for r in read_documents([path])]  # a text file: one document
    assert whole == [data.decode()]


@pytest.mark.slow
@pytest.mark.parametrize("suffix", sorted(COMPRESSORS))
def test_dedup_compressed_jsonl_same_decisions(tmp_path, suffix):
    path = _write(tmp_path / f"corpus.jsonl{suffix}", COMPRESSORS[suffix](_sample_bytes()))
    plain = _plain_result()
    out = tmp_path / "kept.jsonl"
    r = neardup.dedup(path, output=out)
    assert r.ids == plain.ids
    np.testing.assert_array_equal(r.kept, plain.kept)
    assert r.bytes_in == os.path.getsize(path)
    lines = _sample_bytes().splitlines(keepends=True)
    assert out.read_bytes() == b"".join(ln for ln, k in zip(lines, plain.kept) if k)


def test_compressed_output_by_suffix(tmp_path):
    out = tmp_path / "kept.jsonl.gz"
    r = neardup.dedup(CORPUS, output=out)
    lines = _sample_bytes().splitlines(keepends=True)
    assert gzip.decompress(out.read_bytes()) == b"".join(ln for ln, k in zip(lines, r.kept) if k)
    assert r.bytes_out == os.path.getsize(out)


def test_corrupt_and_truncated_compressed_input_is_one_line(tmp_path):
    good = gzip.compress(_sample_bytes())
    trunc = _write(tmp_path / "t.jsonl.gz", good[: len(good) // 2])
    r = invoke("neardup", "dedup", trunc, "-o", str(tmp_path / "o.jsonl"), text=True)
    assert r.returncode == 2
    assert r.stderr.strip().splitlines()[-1].startswith(f"neardup: error: {trunc}: ")
    assert "cannot decompress (gzip)" in r.stderr and "Traceback" not in r.stderr
    bad = _write(tmp_path / "b.jsonl.xz", b"this is not xz at all\n")
    with pytest.raises(InputError, match=r"cannot decompress \(xz\)"):
        list(read_documents([bad]))
    assert not (tmp_path / "o.jsonl").exists()


def test_meter_counts_stored_bytes(tmp_path):
    path = _write(tmp_path / "c.jsonl.gz", gzip.compress(_sample_bytes()))
    with metered() as m:
        n = sum(1 for _ in read_documents([path]))
    assert n == 1200
    assert m.done == os.path.getsize(path) == input_size(path)
    with open_input(path) as f:  # no meter outside the block
        f.read()
    assert m.done == os.path.getsize(path)


def test_memory_filesystem_file_directory_and_glob():
    fs = fsspec.filesystem("memory")
    data = _sample_bytes()
    fs.pipe("/nd-test/a/corpus.jsonl.gz", gzip.compress(data))
    fs.pipe("/nd-test/a/.hidden.jsonl", b'{"text": "x"}\n')
    try:
        plain = _plain_result()
        r = neardup.dedup("memory://nd-test/a/corpus.jsonl.gz")
        np.testing.assert_array_equal(r.kept, plain.kept)
        assert [rel for _, rel in list_url("memory://nd-test/a/")] == ["corpus.jsonl.gz"]
        assert len(list_url("memory://nd-test/a/*.gz")) == 1
        with pytest.raises(InputError, match="no such file"):
            list_url("memory://nd-test/missing.jsonl")
    finally:
        fs.rm("/nd-test", recursive=True)


@contextlib.contextmanager
def _http_server(directory):
    handler = functools.partial(_QuietHandler, directory=str(directory))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


class _QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args):  # keep the test output clean
        pass


def test_http_server_jsonl_gz_through_the_cli(tmp_path):
    pytest.importorskip("aiohttp")
    _write(tmp_path / "corpus.jsonl.gz", gzip.compress(_sample_bytes()))
    out = tmp_path / "kept.jsonl"
    with _http_server(tmp_path) as base:
        url = f"{base}/corpus.jsonl.gz"
        r = invoke("neardup", "dedup", url, "-o", str(out), "-q", text=True)
        assert r.returncode == 0, r.stderr
        missing = invoke("neardup", "dedup", f"{base}/nope.jsonl", "-o", str(out) + "2", text=True)
    lines = _sample_bytes().splitlines(keepends=True)
    assert out.read_bytes() == b"".join(ln for ln, k in zip(lines, _plain_result().kept) if k)
    assert missing.returncode == 2 and "nope.jsonl: no such file" in missing.stderr


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def s3_server():
    pytest.importorskip("s3fs")
    moto_server = pytest.importorskip("moto.server")
    port = _free_port()
    server = moto_server.ThreadedMotoServer(ip_address="127.0.0.1", port=port, verbose=False)
    server.start()
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.stop()


@pytest.mark.slow
def test_s3_compatible_server(s3_server, tmp_path, monkeypatch):
    import s3fs

    for k, v in {
        "AWS_ACCESS_KEY_ID": "testing",
        "AWS_SECRET_ACCESS_KEY": "testing",
        "AWS_DEFAULT_REGION": "us-east-1",
    }.items():
        monkeypatch.setenv(k, v)
    monkeypatch.setitem(fsspec.config.conf, "s3", {"endpoint_url": s3_server})
    s3fs.S3FileSystem.clear_instance_cache()
    fs = s3fs.S3FileSystem(endpoint_url=s3_server)
    fs.mkdir("nd-bucket")
    fs.pipe("nd-bucket/dump/part-1.jsonl", _sample_bytes())
    out = tmp_path / "kept.jsonl"
    r = invoke("neardup", "dedup", "s3://nd-bucket/dump/", "-o", str(out), "-q", text=True)
    assert r.returncode == 0, r.stderr
    lines = _sample_bytes().splitlines(keepends=True)
    assert out.read_bytes() == b"".join(ln for ln, k in zip(lines, _plain_result().kept) if k)
    fp = invoke("neardup", "fingerprint", "s3://nd-bucket/dump/part-1.jsonl", text=True)
    assert fp.returncode == 0, fp.stderr
    np.testing.assert_array_equal(
        np.array(fp.stdout.split(), dtype=np.uint64), _plain_result().fingerprints
    )
    missing = invoke("neardup", "dedup", "s3://nd-bucket/x.jsonl", "-o", str(out), text=True)
    assert missing.returncode == 2
    assert "s3://nd-bucket/x.jsonl: no such file" in missing.stderr
    s3fs.S3FileSystem.clear_instance_cache()


def test_missing_backend_names_the_package(tmp_path):
    fsspec_registry = pytest.importorskip("fsspec.registry")
    if "gcsfs" in sys.modules or _importable("gcsfs"):
        pytest.skip("gcsfs is installed here")
    assert "gs" in fsspec_registry.known_implementations
    with pytest.raises(MissingDependency, match=r"needs gcsfs.*pip install gcsfs"):
        neardup.dedup("gs://bucket/x.jsonl")
    r = invoke("neardup", "dedup", "gs://bucket/x.jsonl", "-o", str(tmp_path / "o"), text=True)
    assert r.returncode == 2 and r.stderr.count("\n") == 1
    assert "pip install gcsfs" in r.stderr


def test_missing_fsspec_names_the_extra(monkeypatch):
    monkeypatch.setitem(sys.modules, "fsspec", None)
    with pytest.raises(MissingDependency, match=r"neardup\[remote\]"):
        neardup.dedup("s3://bucket/x.jsonl")


def _importable(name: str) -> bool:
    import importlib.util

    return importlib.util.find_spec(name) is not None


def test_json_lines_of_a_url_keep_their_ids():
    fs = fsspec.filesystem("memory")
    fs.pipe("/nd-ids/x.jsonl", b'{"id": "a", "text": "hello there"}\n{"id": "b", "text": "hi"}\n')
    try:
        recs = list(read_documents(["memory://nd-ids/x.jsonl"]))
    finally:
        fs.rm("/nd-ids", recursive=True)
    assert [(r.source, r.number, r.id, r.text) for r in recs] == [
        ("memory://nd-ids/x.jsonl", 1, "a", "hello there"),
        ("memory://nd-ids/x.jsonl", 2, "b", "hi"),
    ]


def _piped(data: bytes) -> tuple[str, threading.Thread]:
    """``/dev/fd/N`` of a real pipe that a thread fills with ``data`` (then closes)."""
    r, w = os.pipe()

    def feed() -> None:
        with contextlib.suppress(BrokenPipeError), os.fdopen(w, "wb") as f:
            f.write(data)

    t = threading.Thread(target=feed, daemon=True)
    t.start()
    return f"/dev/fd/{r}", t


@pytest.mark.parametrize("chunk", [1 << 20, 7])
def test_a_pipe_copy_stops_at_the_first_line_over_the_record_limit(tmp_path, monkeypatch, chunk):
    from neardup import config
    from neardup.io import files

    monkeypatch.setattr(config, "MAX_RECORD_BYTES", 10)
    monkeypatch.setattr(files, "_BUFFER", chunk)  # lines across chunks, and within one
    fine = b"0123456789\n" + b"abc\n" * 5 + b"0123456789"  # lines of 10 bytes at most
    path, t = _piped(fine)
    with files.spooled([path], tmp_path) as done:
        assert done.nbytes == len(fine) and files.input_size(path) == len(fine)
        with open_input(path) as f:
            assert f.read() == fine
    t.join()
    assert os.listdir(tmp_path) == []
    for data, line in [(fine + b"x", 7), (b"abc\n" * 3 + b"x" * 11 + b"\n", 4)]:
        path, t = _piped(data)
        with pytest.raises(InputError, match="more than 10 bytes without a line end") as e:
            with files.spooled([path], tmp_path):
                pass
        assert (e.value.source, e.value.line) == (path, line)
        t.join()
        assert os.listdir(tmp_path) == []  # nothing left of the copy

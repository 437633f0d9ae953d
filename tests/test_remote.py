"""Remote inputs against a misbehaving HTTP server on localhost (no network): a connection that
drops mid-body is retried from where it stopped; one that always drops, a redirect loop and a
server that stalls are one line naming the URL (exit status 2) within the timeout, never a
traceback or a hang."""

from __future__ import annotations

import contextlib
import http.server
import json
import threading
import time

import pytest
from cli import invoke

import neardup
from neardup.io import remote

fsspec = pytest.importorskip("fsspec")
pytest.importorskip("aiohttp")

BODY = b"".join(
    json.dumps({"id": i, "text": f"document {i % 40} about {i % 7} things"}).encode() + b"\n"
    for i in range(600)
)


class _Handler(http.server.BaseHTTPRequestHandler):
    """``/good``: served (Range requests too); ``/flaky``: every third response is cut off
    half-way (a range once at most); ``/drop``: every response is cut off; ``/loop``: redirects to itself; ``/stall``:
    headers, then nothing."""

    protocol_version = "HTTP/1.1"

    def log_message(self, *args):  # keep the test output clean
        pass

    def _slice(self) -> tuple[int, bytes]:
        rng = self.headers.get("Range")
        if not rng:
            return 200, BODY
        a, b = rng.split("=", 1)[1].split("-")
        end = min(int(b) + 1 if b else len(BODY), len(BODY))
        return 206, BODY[int(a) : end]

    def do_HEAD(self):
        self._answer(head=True)

    def do_GET(self):
        self._answer(head=False)

    def _answer(self, head: bool) -> None:
        path = self.path.split("?")[0]
        if path.startswith("/loop"):
            self.send_response(302)
            self.send_header("Location", path)
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        status, data = (200, BODY) if head else self._slice()
        self.send_response(status)
        self.send_header("Content-Length", str(len(data)))
        self.send_header("Accept-Ranges", "bytes")
        if status == 206:
            start = int(self.headers["Range"].split("=")[1].split("-")[0])
            self.send_header("Content-Range", f"bytes {start}-{start + len(data) - 1}/{len(BODY)}")
        self.end_headers()
        if head:
            return
        server = self.server
        with server.lock:
            server.responses += 1
            n = server.responses
            # a range is cut once at most: its retry is served whatever other readers asked
            # for meanwhile (a count shared by concurrent readers could cut one read's every
            # retry)
            key = (path, self.headers.get("Range"))
            flaky = path.startswith("/flaky") and n % 3 == 2 and key not in server.cut
            if flaky:
                server.cut.add(key)
        if path.startswith("/stall"):
            server.stop.wait(60)
        elif path.startswith("/drop") or flaky:
            self.wfile.write(data[: len(data) // 2])
            self.wfile.flush()
            self.close_connection = True
        else:
            self.wfile.write(data)


@contextlib.contextmanager
def _server():
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
    server.daemon_threads = True
    server.lock = threading.Lock()
    server.responses = 0
    server.cut = set()
    server.stop = threading.Event()
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield server, f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.stop.set()
        server.shutdown()
        server.server_close()


@pytest.fixture
def quick_retries(monkeypatch):
    monkeypatch.setattr(remote, "BACKOFF_S", 0.01)
    # small blocks, so a file is fetched in several range requests and resumed in the middle
    monkeypatch.setitem(fsspec.config.conf, "http", {"block_size": 4096})
    fsspec.filesystem("http").clear_instance_cache()
    yield
    fsspec.filesystem("http").clear_instance_cache()


def test_a_dropped_connection_is_resumed_where_it_stopped(tmp_path, quick_retries):
    local = tmp_path / "c.jsonl"
    local.write_bytes(BODY)
    want = neardup.dedup(str(local))
    with _server() as (server, base):
        out = tmp_path / "kept.jsonl"
        r = invoke("neardup", "dedup", f"{base}/flaky.jsonl", "-o", str(out), "-q", text=True)
        assert r.returncode == 0, r.stderr
        assert server.responses > 6  # several blocks, some of them cut off and fetched again
        assert server.cut
    lines = BODY.splitlines(keepends=True)
    assert out.read_bytes() == b"".join(ln for ln, k in zip(lines, want.kept) if k)


@pytest.mark.parametrize(
    ("name", "message"),
    [
        ("drop.jsonl", "the connection dropped (ClientPayloadError"),
        ("loop.jsonl", "too many redirects"),
        (
            "stall.jsonl",
            "no answer from the server for 0.5 s (tried 4 times); see --remote-timeout",
        ),
    ],
)
@pytest.mark.slow
def test_a_misbehaving_server_is_one_line_naming_the_url(tmp_path, quick_retries, name, message):
    with _server() as (_, base):
        url = f"{base}/{name}"
        out = tmp_path / "kept.jsonl"
        t0 = time.monotonic()
        r = invoke("neardup", "dedup", url, "-o", str(out), "--remote-timeout", "0.5", text=True)
        took = time.monotonic() - t0
    assert r.returncode == 2, r.stderr
    assert r.stderr.count("\n") == 1 and "Traceback" not in r.stderr, r.stderr
    assert r.stderr.startswith(f"neardup: error: {url}: "), r.stderr
    assert message in r.stderr, r.stderr
    assert not out.exists() and took < 30

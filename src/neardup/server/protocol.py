"""uvicorn's httptools protocol with limits on slow and idle clients.

A connection must send a request's headers within ``header_timeout`` seconds of its first byte
(or of connecting); past ``max_connections`` open connections in a worker, the one waiting
longest for headers (or idle between requests) is closed to make room, so a flood of slow or
idle connections cannot keep new clients (``/health`` included) out.

A request whose target is in absolute form (``GET http://name/stats``) is for the target's
host, not its ``Host`` header's (RFC 9112, 3.2.2): the header is replaced by the target's
``host[:port]`` before the request reaches the app, so the app's Host check judges the name the
request is really for.
"""

from __future__ import annotations

import asyncio
from typing import Any

import httptools
from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

from neardup import config

__all__ = ["GuardedProtocol", "LIMITS", "target_as_host"]

#: Per-process limits, set by ``run_server`` (uvicorn creates the protocol objects itself).
LIMITS = {
    "header_timeout": config.SERVE_HEADER_TIMEOUT_S,
    "max_connections": config.SERVE_MAX_CONNECTIONS,
}


class GuardedProtocol(HttpToolsProtocol):
    """:class:`HttpToolsProtocol` with a header deadline and a cap on connections."""

    _timer: asyncio.TimerHandle | None = None
    _waiting_since = 0.0

    def connection_made(self, transport: Any) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self._arm()
        if len(self.connections) > LIMITS["max_connections"]:
            _shed(self.connections)

    def on_message_begin(self) -> None:
        super().on_message_begin()
        if self._timer is None:
            self._arm()

    def on_headers_complete(self) -> None:
        self._disarm()
        target_as_host(self.url, self.headers)
        super().on_headers_complete()

    def connection_lost(self, exc: Exception | None) -> None:
        self._disarm()
        super().connection_lost(exc)

    def _arm(self) -> None:
        self._waiting_since = self.loop.time()
        self._timer = self.loop.call_later(LIMITS["header_timeout"], self._too_slow)

    def _disarm(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None

    def _too_slow(self) -> None:
        self._timer = None
        if not self.transport.is_closing():
            self.transport.close()

    def _idle(self) -> bool:
        """Waiting for headers, or kept alive between requests."""
        return self._timer is not None or self.timeout_keep_alive_task is not None


def target_as_host(url: bytes, headers: list[tuple[bytes, bytes]]) -> None:
    """For a request target in absolute form, replace the ``Host`` lines of ``headers`` (in
    place) by one naming the target's ``host[:port]`` (IPv6 in brackets); any other target
    (``/path``, ``*``, or one the parser refuses, which uvicorn answers with a 400) is left."""
    if url.startswith(b"/") or url == b"*":
        return
    try:
        parsed = httptools.parse_url(url)
    except httptools.HttpParserInvalidURLError:
        return
    host = parsed.host or b""
    if b":" in host:
        host = b"[" + host + b"]"
    if parsed.port is not None:
        host += b":%d" % parsed.port
    headers[:] = [(k, v) for k, v in headers if k != b"host"] + [(b"host", host)]


def _shed(connections: Any) -> None:
    """Close the connection that has waited longest for headers or idled longest."""
    idle = [c for c in connections if isinstance(c, GuardedProtocol) and c._idle()]
    if idle:
        oldest = min(idle, key=lambda c: c._waiting_since)
        oldest._disarm()
        if not oldest.transport.is_closing():
            oldest.transport.close()

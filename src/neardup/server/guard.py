"""What every request passes before an endpoint sees it (a pure ASGI middleware): the Host
header, the tokens, the body read within its limit however it is sent, the JSON's depth; then
one access-log line and the request's metrics.

The checks run on the raw request, before any parsing, so a hostile client costs the service at
most ``config.SERVE_MAX_BODY`` bytes of memory and one linear pass over them.
"""

from __future__ import annotations

import hmac
import json
import logging
import re
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from neardup import config

__all__ = ["Access", "Guard", "error_response", "json_depth_over"]

log = logging.getLogger("neardup.serve")
access_log = logging.getLogger("neardup.access")

#: Endpoints that change the index (they need the write token when one is set).
WRITE_PATHS = frozenset(("/add", "/remove", "/dedup"))
#: Endpoints open to all (liveness, and the docs' page and its assets).
OPEN_PATHS = ("/health", "/docs", "/openapi.json", "/redoc", "/static-offline-docs/")
#: Endpoints named in metrics; anything else counts as "other" (bounded label values).
KNOWN_PATHS = frozenset(("/query", "/add", "/remove", "/dedup", "/stats", "/health", "/metrics"))

#: Deepest nesting of arrays and objects in a request's JSON (a deeper one gets a 400; the
#: requests themselves nest two levels).
MAX_JSON_DEPTH = 32

#: Longest error message in characters (values a request sent are shown cut, never echoed
#: whole).
ERROR_CHARS = 300


def error_response(status: int, message: str, headers: dict[str, str] | None = None) -> Any:
    """``{"error": "one line"}``: whitespace collapsed, at most ``ERROR_CHARS``
    characters (an error never echoes a request's values without bound)."""
    from starlette.responses import Response

    line = " ".join(str(message).split())
    if len(line) > ERROR_CHARS:
        line = line[: ERROR_CHARS - 3] + "..."
    body = json.dumps({"error": line}, separators=(",", ":")).encode()
    return Response(body, status_code=status, media_type="application/json", headers=headers)


def json_depth_over(body: bytes, limit: int) -> bool:
    """Whether the JSON text ``body`` nests arrays and objects deeper than ``limit``.

    Brackets are counted in vectorised passes over 1 MiB at a time; only when that count (an
    upper bound, since brackets inside strings count too) is over the limit is the text parsed
    to be sure.
    """
    b = np.frombuffer(body, dtype=np.uint8)
    opens = np.count_nonzero(b == 91) + np.count_nonzero(b == 123)
    if opens <= limit:
        return False
    depth, deepest = 0, 0
    for lo in range(0, len(b), 1 << 20):
        part = b[lo : lo + (1 << 20)]
        step = (part == 91).astype(np.int32) + (part == 123) - (part == 93) - (part == 125)
        run = np.cumsum(step) + depth
        deepest, depth = max(deepest, int(run.max())), int(run[-1])
    if deepest <= limit:
        return False
    try:
        value = json.loads(body)
    except RecursionError:
        return True
    except ValueError:
        return False  # malformed: the route says so
    return _depth(value) > limit


def _depth(v: Any) -> int:
    stack, deepest = [(v, 1)], 0
    while stack:
        x, d = stack.pop()
        if isinstance(x, (list, dict)):
            deepest = max(deepest, d)
            stack.extend((y, d + 1) for y in (x.values() if isinstance(x, dict) else x))
    return deepest


@dataclass
class Access:
    """Who may do what: tokens (None: open) and the Host header values served (None: any)."""

    write_token: str | None = None
    read_token: str | None = None
    hosts: frozenset[str] | None = None
    _write: bytes | None = field(init=False, repr=False, default=None)
    _read: bytes | None = field(init=False, repr=False, default=None)

    def __post_init__(self) -> None:
        for t in (self.write_token, self.read_token):
            if t is not None and not t.strip():
                raise ValueError("a token must not be empty")
        self._write = None if self.write_token is None else f"Bearer {self.write_token}".encode()
        self._read = None if self.read_token is None else f"Bearer {self.read_token}".encode()

    def refusal(
        self, method: str, path: str, headers: dict[bytes, bytes], hosts_sent: list[bytes]
    ) -> Any:
        """The error response for a request these rules refuse, else None (``hosts_sent``:
        the values of every ``Host`` header line of the request, in order)."""
        refused = self._host_refusal(hosts_sent)
        if refused is not None:
            return refused
        if path.startswith(OPEN_PATHS):
            return None
        given = headers.get(b"authorization", b"")
        write_ok = self._write is None or hmac.compare_digest(given, self._write)
        if path in WRITE_PATHS and method == "POST":
            if not write_ok:
                return error_response(
                    401, "writes need the header 'Authorization: Bearer <write token>'"
                )
            return None
        if self._read is not None and not (
            hmac.compare_digest(given, self._read) or (self._write is not None and write_ok)
        ):
            return error_response(401, "reads need the header 'Authorization: Bearer <token>'")
        return None

    def _host_refusal(self, sent: list[bytes]) -> Any:
        """A 400 for several ``Host`` lines (RFC 9112, 3.2), and, when the names served are
        set, for a value that is not ``host[:port]`` or names a host not served."""
        if len(sent) > 1:
            return error_response(
                400, f"{len(sent)} Host headers in one request; send exactly one (RFC 9112)"
            )
        if self.hosts is None:
            return None
        value = sent[0].decode("latin-1") if sent else ""
        host = _host_name(value)
        if host is None:
            return error_response(
                400, f"Host {value[:60]!r} is not a host name with an optional :port; send one"
            )
        if host not in self.hosts:
            return error_response(
                400,
                f"Host {host[:60]!r} is not served here; start neardup serve with "
                "--allow-host for it",
            )
        return None


#: A Host header's value: a name or an IPv6 address in brackets, then an optional port (RFC 9110,
#: 7.2: ``uri-host [ ":" port ]``); nothing may follow.
_HOST = re.compile(r"(\[[^\[\]]*\]|[^\[\]:]*)(?::[0-9]*)?")


def _host_name(value: str) -> str | None:
    """The host of a Host header value, lower case, without its port (IPv6 in brackets kept);
    None when the value is not ``host[:port]`` (``[::1]evil.com``, ``localhost:evil.com``)."""
    m = _HOST.fullmatch(value.strip().lower())
    return None if m is None else m.group(1)


_GONE = object()  # the body of a request whose client disconnected
_TOO_BIG = object()


async def read_body(receive: Any, limit: int) -> Any:
    """The whole request body as bytes; ``_TOO_BIG`` as soon as more than ``limit`` bytes
    arrived (a chunked body is counted as it streams: never more than ``limit`` held);
    ``_GONE`` if the client went away."""
    chunks, size, more = [], 0, True
    while more:
        message = await receive()
        if message["type"] != "http.request":
            return _GONE
        chunk = message.get("body", b"")
        size += len(chunk)
        if size > limit:
            return _TOO_BIG
        chunks.append(chunk)
        more = message.get("more_body", False)
    return b"".join(chunks)


def replay(body: bytes, receive: Any) -> Callable[[], Awaitable[Any]]:
    """A ``receive`` that gives ``body`` once, then waits on the real one (disconnects)."""
    sent = False

    async def again() -> Any:
        nonlocal sent
        if not sent:
            sent = True
            return {"type": "http.request", "body": body, "more_body": False}
        return await receive()

    return again


class Guard:
    """Pure ASGI middleware in front of the FastAPI app (see the module's docstring).

    ``fast_query(body)`` may answer a ``POST /query`` body itself (the fast lane for small
    plain queries) or return None to pass it on; ``observe(path, status, seconds)`` records
    each answered request.
    """

    def __init__(
        self,
        app: Any,
        access: Access,
        fast_query: Callable[[bytes], Awaitable[Any]] | None = None,
        observe: Callable[[str, int, float], None] | None = None,
    ) -> None:
        self.app = app
        self.access = access
        self.fast_query = fast_query
        self.observe = observe

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        start = time.perf_counter()
        sent = {"status": 0, "bytes": 0, "in": 0}

        async def counted(message: Any) -> None:
            if message["type"] == "http.response.start":
                sent["status"] = message["status"]
            elif message["type"] == "http.response.body":
                sent["bytes"] += len(message.get("body", b""))
            await send(message)

        try:
            await self._handle(scope, receive, counted, sent)
        finally:
            self._record(scope, sent, time.perf_counter() - start)

    async def _handle(self, scope: Any, receive: Any, send: Any, sent: dict) -> None:
        headers = dict(scope["headers"])
        method, path = scope["method"], scope["path"]
        hosts_sent = [v for k, v in scope["headers"] if k == b"host"]
        refusal = self.access.refusal(method, path, headers, hosts_sent)
        if refusal is None and method == "POST":
            size = headers.get(b"content-length")
            limit = config.SERVE_MAX_BODY
            if size is not None and (not size.isdigit() or int(size) > limit):
                refusal = _too_big()
            else:
                body = await read_body(receive, limit)
                if body is _GONE:  # nobody to answer
                    return
                if body is _TOO_BIG:
                    refusal = _too_big()
                else:
                    sent["in"] = len(body)
                    refusal, receive, scope = await self._checked(scope, receive, body, path)
        if refusal is not None:
            await refusal(scope, receive, send)
            return
        await self.app(scope, receive, send)

    async def _checked(self, scope: Any, receive: Any, body: bytes, path: str) -> Any:
        """(refusal or fast answer or None, the receive replaying ``body``, the scope declaring
        it JSON whatever type the client named: curl's ``-d`` says form data)."""
        if json_depth_over(body, MAX_JSON_DEPTH):
            msg = f"malformed JSON: nested deeper than {MAX_JSON_DEPTH} levels"
            return error_response(400, msg), receive, scope
        if path == "/query" and self.fast_query is not None:
            answer = await self.fast_query(body)
            if answer is not None:
                return answer, receive, scope
        hs = [(k, v) for k, v in scope["headers"] if k != b"content-type"]
        scope = {**scope, "headers": [*hs, (b"content-type", b"application/json")]}
        return None, replay(body, receive), scope

    def _record(self, scope: Any, sent: dict, seconds: float) -> None:
        path = scope["path"]
        if self.observe is not None:
            self.observe(path if path in KNOWN_PATHS else "other", sent["status"], seconds)
        if access_log.isEnabledFor(logging.INFO):
            client = scope.get("client") or ("", 0)
            access_log.info(
                json.dumps(
                    {
                        "time": round(time.time(), 3),
                        "client": f"{client[0]}:{client[1]}",
                        "method": scope["method"],
                        "path": path[:200],
                        "status": sent["status"],
                        "ms": round(seconds * 1000, 3),
                        "bytes_in": sent["in"],
                        "bytes_out": sent["bytes"],
                    },
                    separators=(",", ":"),
                )
            )


def _too_big() -> Any:
    return error_response(413, f"request body over {config.SERVE_MAX_BODY} bytes; split it")

"""Start uvicorn over :func:`neardup.server.app.create_app`, in one or several processes."""

from __future__ import annotations

import contextlib
import json
import os
import resource
import shutil
import sys
import tempfile
from collections.abc import Iterator
from typing import Any

from neardup import config
from neardup._optional import require
from neardup.server.app import CONFIG_ENV, READ_TOKEN_ENV, WRITE_TOKEN_ENV
from neardup.server.backends import open_backend
from neardup.server.metrics import MULTIPROC_ENV

__all__ = ["run_server", "default_hosts"]

_LOOPBACK = ("127.0.0.1", "localhost", "::1", "[::1]")


def default_hosts(host: str) -> list[str] | None:
    """The ``Host`` header values served by default: the loopback names when bound to a
    loopback address (a web page cannot reach the service by DNS rebinding), else any (None;
    ``--allow-host`` narrows it)."""
    if host in _LOOPBACK:
        return ["127.0.0.1", "localhost", "[::1]"]
    return None


def run_server(
    index: str,
    *,
    host: str = "127.0.0.1",
    port: int = 8080,
    workers: int = 1,
    token: str | None = None,
    read_token: str | None = None,
    allow_hosts: list[str] | None = None,
    preset: str = "default",
    window: int | None = None,
    log_level: str = "warning",
    access_log: bool = False,
    header_timeout: float = config.SERVE_HEADER_TIMEOUT_S,
    max_connections: int = config.SERVE_MAX_CONNECTIONS,
) -> None:
    """Serve the index at ``index`` (a directory or a ``redis://`` URL) over HTTP until stopped.

    With ``workers > 1`` uvicorn starts that many processes on the same port; each opens the
    index itself (see :mod:`neardup.server.backends` for how they share it). The index is
    opened once here first, so a missing or unreadable index fails before binding the port, and
    what is served is printed on stderr. Tokens reach the workers in the environment, never on
    a command line. ``allow_hosts`` (host names, ``*`` for any) defaults to
    :func:`default_hosts`.
    """
    uvicorn = require("uvicorn", "server", "neardup serve")
    require("fastapi", "server", "neardup serve")
    from neardup.server.protocol import GuardedProtocol

    backend = open_backend(index)  # raises the index's own one-line error
    hosts = default_hosts(host) if not allow_hosts else _hosts(allow_hosts, host)
    settings = {
        "index": index,
        "hosts": hosts,
        "preset": preset,
        "window": window,
        "access_log": access_log,
        "header_timeout": header_timeout,
        "max_connections": max_connections,
    }
    os.environ[CONFIG_ENV] = json.dumps(settings)
    for name, value in ((WRITE_TOKEN_ENV, token), (READ_TOKEN_ENV, read_token)):
        if value is None:
            os.environ.pop(name, None)
        else:
            os.environ[name] = value
    _raise_file_limit(max_connections)
    print(_banner(backend, host, port, workers, token, read_token, hosts), file=sys.stderr)
    with _shared_metrics(workers):
        uvicorn.run(
            "neardup.server.app:app_from_env",
            factory=True,
            host=host,
            port=port,
            workers=workers,
            log_level=log_level,
            access_log=False,  # neardup's own access log: one JSON line per request
            http=GuardedProtocol,
            timeout_keep_alive=int(max(1, header_timeout)),
        )


def _hosts(allowed: list[str], host: str) -> list[str] | None:
    if "*" in allowed:
        return None
    names = {h.strip().lower() for h in allowed if h.strip()}
    return sorted(names | set(default_hosts(host) or ()))


def _banner(
    backend: Any,
    host: str,
    port: int,
    workers: int,
    token: str | None,
    read_token: str | None,
    hosts: list[str] | None,
) -> str:
    """What ``neardup serve`` says when it starts: address, index, size, endpoints, access."""
    info = backend.stats()
    shown = f"[{host}]" if ":" in host else host
    words = info.get("sketch_words")
    kind = f", sketches of {words} words (texts verified by Jaccard)" if words else ""
    writes = "need the write token" if token else "open to all"
    reads = "need the read token" if read_token else "open to all"
    return "\n".join(
        [
            f"neardup serve: http://{shown}:{port}  ({workers} worker{'s' * (workers > 1)})",
            f"  index     {info.get('path', '')}: {info.get('entries', 0):,} entries, "
            f"distance {info.get('distance')}, generation {info.get('generation')}{kind}",
            "  endpoints POST /query /add /remove /dedup; GET /stats /health /metrics; "
            "docs at /docs",
            f"  access    writes {writes}; reads {reads}; Host "
            + ("any" if hosts is None else " ".join(hosts)),
        ]
    )


def _raise_file_limit(connections: int) -> None:
    """Raise the open-file limit towards what ``connections`` need (the soft limit is often
    1,024, and each connection holds a descriptor)."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    want = connections + 256
    if soft != resource.RLIM_INFINITY and soft < want:
        new = want if hard == resource.RLIM_INFINITY else min(want, hard)
        with contextlib.suppress(ValueError, OSError):
            resource.setrlimit(resource.RLIMIT_NOFILE, (new, hard))


@contextlib.contextmanager
def _shared_metrics(workers: int) -> Iterator[None]:
    """With several workers, a fresh directory where they add up their metrics (removed at
    the end); one worker keeps its counts in memory."""
    if workers <= 1 or os.environ.get(MULTIPROC_ENV):
        yield
        return
    where = tempfile.mkdtemp(prefix="neardup-metrics-")
    os.environ[MULTIPROC_ENV] = where
    try:
        yield
    finally:
        os.environ.pop(MULTIPROC_ENV, None)
        shutil.rmtree(where, ignore_errors=True)

"""``neardup serve``: the HTTP JSON service over an index directory or a Redis index."""

from __future__ import annotations

import os
import signal

import click

from neardup import config
from neardup._optional import require
from neardup.fingerprints import PRESETS

PROG = "neardup serve"


@click.command("serve", no_args_is_help=True, short_help="Serve an index over HTTP.")
@click.argument("index")
@click.option("--host", default="127.0.0.1", show_default=True, help="Address to bind.")
@click.option(
    "--port",
    type=click.IntRange(0, 65535),
    default=8080,
    show_default=True,
    help="TCP port to listen on.",
)
@click.option(
    "--workers",
    type=click.IntRange(min=1),
    default=1,
    show_default=True,
    help="Server processes; they share the index's memory maps (local) or Redis.",
)
@click.option(
    "--token-file",
    type=click.Path(dir_okay=False),
    default=None,
    help="File holding the write token: /add, /remove and /dedup then need "
    "'Authorization: Bearer TOKEN' (default: the NEARDUP_TOKEN environment variable, else "
    "writes are open).",
)
@click.option(
    "--read-token-file",
    type=click.Path(dir_okay=False),
    default=None,
    help="File holding the read token: /query, /stats and /metrics then need it (or the write "
    "token) (default: NEARDUP_READ_TOKEN, else reads are open; /health and /docs stay open).",
)
@click.option(
    "--token",
    default=None,
    hidden=True,
    help="The write token itself (visible to every user in `ps`: prefer --token-file).",
)
@click.option(
    "--allow-host",
    "allow_hosts",
    multiple=True,
    help="A Host header value to serve (repeat; '*' for any). Default: the loopback names when "
    "bound to a loopback address, else any.",
)
@click.option(
    "--header-timeout",
    type=click.FloatRange(min=0.1),
    default=config.SERVE_HEADER_TIMEOUT_S,
    show_default=True,
    help="Seconds a client may take to send a request's headers, and to idle between requests.",
)
@click.option(
    "--max-connections",
    type=click.IntRange(min=2),
    default=config.SERVE_MAX_CONNECTIONS,
    show_default=True,
    help="Open connections per worker; past it the longest idle one is closed.",
)
@click.option(
    "--preset",
    type=click.Choice(sorted(PRESETS)),
    default="default",
    show_default=True,
    help="Fingerprinter for requests that send texts.",
)
@click.option("--window", type=click.IntRange(min=1), default=None, help="Shingle window.")
@click.option(
    "--log-level",
    type=click.Choice(["critical", "error", "warning", "info", "debug"]),
    default="warning",
    show_default=True,
    help="Least severe server log messages shown on stderr.",
)
@click.option(
    "--access-log", is_flag=True, help="One JSON line per request on stderr (costs latency)."
)
def serve(
    index: str,
    host: str,
    port: int,
    workers: int,
    token_file: str | None,
    read_token_file: str | None,
    token: str | None,
    allow_hosts: tuple[str, ...],
    header_timeout: float,
    max_connections: int,
    preset: str,
    window: int | None,
    log_level: str,
    access_log: bool,
) -> None:
    """Serve INDEX (a directory, or redis://host:port/db?name=NAME) over HTTP.

    Endpoints: POST /query, /add, /remove, /dedup; GET /stats, /health, /metrics; docs at
    /docs. Binds to 127.0.0.1 unless --host says otherwise.
    """
    for module in ("fastapi", "pydantic", "uvicorn", "fastapi_offline", "prometheus_client"):
        require(module, "server", "neardup serve")
    from neardup.server import run_server

    if token is not None:
        click.echo(
            f"{PROG}: warning: --token is visible to every user in `ps`; use --token-file or "
            "the NEARDUP_TOKEN environment variable",
            err=True,
        )
    write = _token(token_file, "--token-file", token, "NEARDUP_TOKEN")
    read = _token(read_token_file, "--read-token-file", None, "NEARDUP_READ_TOKEN")
    # uvicorn shuts down gracefully on SIGTERM itself and then raises it again: let that end
    # the process as before, not as an error of this command
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    run_server(
        index,
        host=host,
        port=port,
        workers=workers,
        token=write,
        read_token=read,
        allow_hosts=list(allow_hosts) or None,
        preset=preset,
        window=window,
        log_level=log_level,
        access_log=access_log,
        header_timeout=header_timeout,
        max_connections=max_connections,
    )


def _token(path: str | None, option: str, given: str | None, env: str) -> str | None:
    """The token from its file, else from the command line, else from ``env``; None when
    none is set. An empty token is refused (it would let anyone in)."""
    where = option
    if path is not None:
        try:
            with open(path, encoding="utf-8") as f:
                value: str | None = f.read().strip()
        except OSError as e:
            raise click.UsageError(f"{option} {path}: {e.strerror}") from None
        where = f"{option} {path}"
    elif given is not None:
        value, where = given, "--token"
    else:
        value, where = os.environ.get(env), env
    if value is None:
        return None
    if not value.strip() or any(c.isspace() for c in value.strip()):
        raise click.UsageError(f"{where}: the token is empty or holds spaces; give a real one")
    return value.strip()

"""``neardup serve``: the HTTP JSON service over an index directory or a Redis index."""

from __future__ import annotations

import os
import signal

import click

from neardup.fingerprints import PRESETS


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
    "--token",
    default=None,
    help="Require 'Authorization: Bearer TOKEN' for /add, /remove and /dedup "
    "(default: the NEARDUP_TOKEN environment variable, else no token).",
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
@click.option("--access-log", is_flag=True, help="Log every request (costs latency).")
def serve(
    index: str,
    host: str,
    port: int,
    workers: int,
    token: str | None,
    preset: str,
    window: int | None,
    log_level: str,
    access_log: bool,
) -> None:
    """Serve INDEX (a directory, or redis://host:port/db?name=NAME) over HTTP.

    Endpoints: POST /query, /add, /remove, /dedup; GET /stats, /health; docs at /docs.
    Binds to 127.0.0.1 unless --host says otherwise.
    """
    from neardup.server import run_server

    # uvicorn shuts down gracefully on SIGTERM itself and then raises it again: let that end
    # the process as before, not as an error of this command
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    run_server(
        index,
        host=host,
        port=port,
        workers=workers,
        token=token if token is not None else os.environ.get("NEARDUP_TOKEN") or None,
        preset=preset,
        window=window,
        log_level=log_level,
        access_log=access_log,
    )

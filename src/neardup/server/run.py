"""Start uvicorn over :func:`neardup.server.app.create_app`, in one or several processes."""

from __future__ import annotations

import json
import os

from neardup._optional import require
from neardup.server.app import CONFIG_ENV
from neardup.server.backends import open_backend

__all__ = ["run_server"]


def run_server(
    index: str,
    *,
    host: str = "127.0.0.1",
    port: int = 8080,
    workers: int = 1,
    token: str | None = None,
    preset: str = "default",
    window: int | None = None,
    log_level: str = "warning",
    access_log: bool = False,
) -> None:
    """Serve the index at ``index`` (a directory or a ``redis://`` URL) over HTTP until stopped.

    With ``workers > 1`` uvicorn starts that many processes on the same port; each opens the
    index itself (see :mod:`neardup.server.backends` for how they share it). The index is
    opened once here first, so a missing or unreadable index fails before binding the port.
    """
    uvicorn = require("uvicorn", "server", "neardup serve")
    require("fastapi", "server", "neardup serve")
    open_backend(index)  # raises the index's own one-line error
    settings = {"index": index, "token": token, "preset": preset, "window": window}
    os.environ[CONFIG_ENV] = json.dumps(settings)
    uvicorn.run(
        "neardup.server.app:app_from_env",
        factory=True,
        host=host,
        port=port,
        workers=workers,
        log_level=log_level,
        access_log=access_log,
    )

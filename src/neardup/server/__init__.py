"""``neardup serve``: the near-duplicate service over an index, on one machine or on Redis.

``create_app(index)`` builds the FastAPI application; ``run_server(index, ...)`` serves it with
uvicorn (``pip install "neardup[server]"``).
"""

from __future__ import annotations

from neardup.server.app import create_app
from neardup.server.run import run_server

__all__ = ["create_app", "run_server"]

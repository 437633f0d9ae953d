"""Where an index lives: :func:`open_index` reads a directory path or a Redis URL and returns
the backend that serves it."""

from __future__ import annotations

import os

from neardup.index.backend import IndexBackend
from neardup.index.redis_store import is_redis_url

__all__ = ["open_index"]


def open_index(location: str | os.PathLike, mode: str = "r") -> IndexBackend:
    """Open the index at ``location``: a directory (:class:`neardup.index.Index`) or a
    ``redis://host:port/db?name=NAME`` URL (also ``rediss://``, ``unix://``;
    :class:`neardup.index.redis.RedisIndex`).

    Parameters
    ----------
    location : str or PathLike
        The index's directory or URL.
    mode : {"r", "w"}
        ``"r"`` reads (a local index: the snapshot committed when opened, see
        :meth:`~neardup.index.Index.refresh`); ``"w"`` also writes (a local index takes its
        writer lock until closed; a Redis index takes its lease per write).

    Returns
    -------
    IndexBackend
        The backend; what it can do is in its ``capabilities``.

    Raises
    ------
    FileNotFoundError
        No index there.
    neardup.index.IndexLockedError
        ``mode="w"`` while another process writes the local index.
    """
    if is_redis_url(location):
        from neardup.index.redis import RedisIndex

        return RedisIndex(str(location), mode)
    from neardup.index.index import Index

    return Index(location, mode)

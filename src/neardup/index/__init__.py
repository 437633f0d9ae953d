"""The persistent online index: add, query and remove fingerprints on disk or in Redis.

Open any index with :func:`open_index` (a directory or a ``redis://`` URL); every backend
implements :class:`IndexBackend`. See :class:`neardup.index.Index` for the local one.
"""

from __future__ import annotations

from neardup.core.matches import Matches
from neardup.index.backend import CAPABILITIES, IndexBackend, IndexMatches, Session
from neardup.index.index import Index, choose_index_blocks
from neardup.index.location import open_index
from neardup.index.storage import CorruptIndexError, IndexLockedError

__all__ = [
    "CAPABILITIES",
    "Index",
    "IndexBackend",
    "IndexMatches",
    "Matches",
    "Session",
    "CorruptIndexError",
    "IndexLockedError",
    "choose_index_blocks",
    "open_index",
]

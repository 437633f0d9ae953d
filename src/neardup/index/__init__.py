"""The persistent online index: add, query and remove fingerprints on disk.

See :class:`neardup.index.Index`.
"""

from __future__ import annotations

from neardup.index.index import Index, IndexMatches, VerifiedMatches, choose_index_blocks
from neardup.index.storage import CorruptIndexError, IndexLockedError

__all__ = [
    "Index",
    "IndexMatches",
    "VerifiedMatches",
    "CorruptIndexError",
    "IndexLockedError",
    "choose_index_blocks",
]

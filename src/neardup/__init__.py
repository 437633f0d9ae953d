"""neardup: near-duplicate detection with 64-bit simhash fingerprints.

Bit order: a fingerprint is an unsigned 64-bit integer, bit 63 the most significant.

The names below are imported on first use, so ``import neardup`` (and every console script)
starts without loading numba until a kernel is needed.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"

#: public name -> module it comes from
_EXPORTS = {
    "Layout": "neardup.core.layout",
    "choose_blocks": "neardup.core.cost",
    "Bands": "neardup.core.bands",
    "Matches": "neardup.core.matches",
    "cluster_groups": "neardup.core.search",
    "find_all": "neardup.core.search",
    "find_all_values": "neardup.core.search",
    "find_clusters": "neardup.core.search",
    "query": "neardup.core.search",
    "similar_pairs": "neardup.core.similarity",
    "PRESETS": "neardup.fingerprints",
    "Fingerprinter": "neardup.fingerprints",
    "compute": "neardup.fingerprints",
    "fingerprint": "neardup.fingerprints",
    "Index": "neardup.index",
    "IndexBackend": "neardup.index",
    "open_index": "neardup.index",
    "decide": "neardup.pipeline.job",
    "dedup": "neardup.pipeline.job",
    "DedupResult": "neardup.pipeline.result",
}

if TYPE_CHECKING:  # pragma: no cover - for type checkers and editors only
    from neardup.core.bands import Bands
    from neardup.core.cost import choose_blocks
    from neardup.core.layout import Layout
    from neardup.core.matches import Matches
    from neardup.core.search import (
        cluster_groups,
        find_all,
        find_all_values,
        find_clusters,
        query,
    )
    from neardup.core.similarity import similar_pairs
    from neardup.fingerprints import PRESETS, Fingerprinter, compute, fingerprint
    from neardup.index import Index, IndexBackend, open_index
    from neardup.pipeline.job import decide, dedup
    from neardup.pipeline.result import DedupResult

__all__ = [
    "__version__",
    "Layout",
    "choose_blocks",
    "find_all",
    "find_all_values",
    "find_clusters",
    "cluster_groups",
    "query",
    "similar_pairs",
    "Matches",
    "Fingerprinter",
    "fingerprint",
    "compute",
    "PRESETS",
    "dedup",
    "Bands",
    "decide",
    "DedupResult",
    "Index",
    "IndexBackend",
    "open_index",
]


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'neardup' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value  # later lookups skip this function
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_EXPORTS))

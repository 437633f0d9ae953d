"""neardup: near-duplicate detection with 64-bit simhash fingerprints.

Bit order: a fingerprint is an unsigned 64-bit integer, bit 63 the most significant.
"""

from __future__ import annotations

__version__ = "0.1.0"

from neardup.core.layout import Layout, choose_blocks
from neardup.core.search import (
    QueryResult,
    cluster_groups,
    find_all,
    find_all_values,
    find_clusters,
    query,
)
from neardup.core.similarity import similar_pairs
from neardup.fingerprints import PRESETS, Fingerprinter, compute, fingerprint
from neardup.index import Index
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
    "QueryResult",
    "Fingerprinter",
    "fingerprint",
    "compute",
    "PRESETS",
    "dedup",
    "decide",
    "DedupResult",
    "Index",
]

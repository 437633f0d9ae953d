"""Stored fingerprints in Parquet files, deduplicated against in batch mode on Dask.

A :class:`ParquetCorpus` is an index backend with no capability of its own: its files (columns
``fingerprint`` and ``id``) are read by the Dask workers (:func:`neardup.distributed.query`),
it answers any distance, holds no ids to check and no sketches, and is never written: its files
are inputs of the run.
"""

from __future__ import annotations

from typing import Any

from neardup.index.backend import IndexBackend

__all__ = ["ParquetCorpus"]


class ParquetCorpus(IndexBackend):
    """Fingerprints stored in the Parquet files ``paths``; read-only.

    Parameters
    ----------
    paths : list of str
        The files (or globs) holding columns ``fingerprint`` (uint64) and ``id``.
    """

    capabilities = frozenset()
    backend = "parquet"
    #: only a cluster's workers read the files (batch mode); there is no search here
    needs_cluster = True

    def __init__(self, paths: list[str]) -> None:
        self.paths = paths
        self.path = ", ".join(paths)
        self.mode = "r"

    @property
    def distance(self) -> int:
        """Any distance: batch mode reads every fingerprint (64 bits)."""
        return 64

    @property
    def id_type(self) -> None:
        """No ids to check: the files are read by the workers only."""
        return None

    def batch_source(self) -> Any:
        return self.paths

    def input_files(self) -> list[str]:
        return list(self.paths)

"""Outputs a caller adds to a dedup run (the command line's saved dataset and HTML report), staged
and committed with the run's own: checked before any work, written after the kept documents,
clusters and drop list, and renamed into place in the same commit (or, on any failure, none of
them is). See :func:`neardup.pipeline.job.dedup` (``extra_outputs=``)."""

from __future__ import annotations

import os
from typing import Any, Protocol

from neardup.io.files import tree_size
from neardup.io.hf import save_dataset
from neardup.io.writers import OutputSet

__all__ = ["DatasetOutput", "ExtraOutput"]


class ExtraOutput(Protocol):
    """What :func:`neardup.pipeline.job.dedup` asks of an extra output. One may also have a
    ``near_misses`` attribute: when true, a verified run finds each kept document's nearest
    miss for it (``result.verified.near_for``, as the HTML report shows them)."""

    def register(self, outputs: OutputSet) -> None:
        """Register (and so check) its paths in the run's ``outputs``, before any work."""

    def write(self, result: Any, outputs: OutputSet) -> None:
        """Stage it in ``outputs`` from the run's :class:`~neardup.pipeline.result.DedupResult`
        (called before the JSON summary is written, so it may set ``bytes_in``/``bytes_out``)."""


class DatasetOutput:
    """The kept rows of a Hugging Face ``dataset`` (the run's input) saved with ``save_to_disk``
    to directory ``path``; ``source``, the directory the dataset was loaded from, is an input
    (never written into) and its size the run's ``bytes_in``."""

    def __init__(self, path: str | os.PathLike, dataset: Any, source: str | None = None) -> None:
        self.path = path
        self.dataset = dataset
        self.source = source

    def register(self, outputs: OutputSet) -> None:
        """Check the output directory (new or empty, not the input, see
        :meth:`OutputSet.directory`)."""
        if self.source is not None:
            outputs.add_inputs([self.source])
        outputs.directory(self.path, "the output dataset")

    def write(self, result: Any, outputs: OutputSet) -> None:
        """Stage the kept rows in ``outputs``; set the result's byte counts."""
        if self.source is not None:
            result.bytes_in = tree_size(self.source)
        result.bytes_out = save_dataset(result.filter(self.dataset), self.path, outputs=outputs)

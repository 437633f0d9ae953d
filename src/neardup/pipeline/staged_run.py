"""What a staged dedup run did (:mod:`neardup.pipeline.staged`): the figures the caller keeps
between stages, a few numbers per shard and per task."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

__all__ = ["StagedRun"]


@dataclass
class StagedRun:
    """What a staged run did: per-shard document counts, totals and per-stage figures."""

    work: str
    sizes: list[int]  #: documents per shard (bad records excluded)
    first_lines: list[int]  #: first line number of each shard
    skipped: int = 0
    dropped: int = 0
    clusters: int = 0
    no_shingles: int = 0
    bytes_in: int = 0
    bytes_out: int = 0
    n_decide: int = 0
    whole: bool = False  #: one task decided every document (``decide-all``)
    verify_tasks: list[str] = field(default_factory=list)  #: the verify stage's task names
    seconds: dict[str, float] = field(default_factory=dict)
    temp_bytes: dict[str, int] = field(default_factory=dict)
    tasks: dict[str, int] = field(default_factory=dict)
    moved_bytes: int = 0
    peak_rss: dict[str, int] = field(default_factory=dict)
    disk_reads: dict[str, int] = field(default_factory=dict)
    cpu: dict[str, float] = field(default_factory=dict)
    against: dict[str, Any] | None = None  #: the index check: how, path, distance, found, own
    added: int = 0  #: documents added to the index (``update``)
    near: dict[str, Any] | None = None  #: the report's near misses (a report asked for them)
    part_bytes: list[int] = field(default_factory=list)  #: bytes of each shard's kept part
    part_rows: list[int] = field(default_factory=list)  #: documents each shard kept
    part_clusters: list[int] = field(default_factory=list)  #: clusters each shard leads
    removed_bytes: list[int] = field(default_factory=list)  #: bytes of each removed part
    removed_rows: list[int] = field(default_factory=list)  #: documents each shard removed
    index_parts: int = 0  #: tasks of the index's rows (``--against``)
    reused: dict[str, int] = field(default_factory=dict)  #: tasks found finished, by stage
    executor: str = "local"  #: the executor's name
    workers: int = 1  #: its Dask workers or Ray CPUs (local: its threads)
    work_left: list[str] = field(default_factory=list)  #: names neardup did not write there
    common: dict[str, Any] | None = None  #: the common shingles left out (``common_shingles``)
    template: dict[str, Any] | None = None  #: clusters that look like a template (the hint)
    copies: int = 0  #: tasks of the exact stage (verified), each of ``copy_pairs`` links
    copy_pairs: int = 0  #: documents linked to an earlier copy of their shingle set
    family_tasks: list[str] = field(default_factory=list)  #: pairs tasks with family links
    family_links: int = 0  #: links of documents to their family's first (prefix candidates)
    family: list[Any] | None = None  #: the largest family: documents, the first, its id
    checks: int = 0  #: exact Jaccards the decide tasks computed (verified)
    candidates: int = 0  #: candidate pairs the decide tasks' rule looked at (verified)

    @property
    def offsets(self) -> list[int]:
        return [0, *np.cumsum(self.sizes, dtype=np.int64).tolist()]

    @property
    def n(self) -> int:
        return int(sum(self.sizes))

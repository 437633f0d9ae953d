"""The stages of a staged dedup, declared once: each step's name, the function its tasks run,
the stage directory it writes (its files: :data:`neardup.pipeline.layout.FILES`) and the stage
directories it reads.

A task runs ``fn(out, **arguments)``: ``out`` the directory it fills, its arguments named as
the function's parameters (typed there). Candidate generation is one interface: every
generator's last step writes the ``pairs`` directory (candidate pairs ``i < j`` by position,
and prefix families' links), which verify, the components and the report read whatever made
them; a generator is added by adding its steps here and one function in
:mod:`neardup.pipeline.staged`.

What a step reads is checked while the test suite runs
(:data:`neardup.config.CHECK_STAGE_READS`): a task that reads a stage its step does not
declare fails there.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from neardup.pipeline import common_shingles as T
from neardup.pipeline import layout
from neardup.pipeline import stage_against as A
from neardup.pipeline import stage_components as C
from neardup.pipeline import stage_decide as D
from neardup.pipeline import stage_near as N
from neardup.pipeline import stage_prefix as P
from neardup.pipeline import stage_search as Q
from neardup.pipeline import stages as S
from neardup.pipeline.shard_write import kept_bytes_task, write_task

__all__ = ["STAGES", "Step"]


@dataclass(frozen=True)
class Step:
    """One step of a staged dedup."""

    name: str  #: the step's name
    fn: Callable[..., Any]  #: what each task runs: ``fn(out, **arguments)``
    reads: tuple[str, ...]  #: the stage directories its tasks read (``cc-large-*``: any round)
    directory: str = ""  #: the stage directory it writes (default: its name)

    @property
    def stage(self) -> str:
        """The stage directory the step writes (``cc-large-*`` for a numbered round)."""
        return self.directory or self.name

    @property
    def writes(self) -> tuple[str, ...]:
        """The files each of its tasks may write (:func:`neardup.pipeline.layout.stage_files`)."""
        return layout.stage_files(self.stage)


_SETS = ("scan", "common")  # shingle keys: the scan's, or without the common shingles

#: Every step, in the order a run may take them.
STAGES: dict[str, Step] = {
    s.name: s
    for s in (
        Step("lines", S.count_lines, ()),
        Step("scan", S.scan_shard, ()),
        Step("ids", S.repeated_ids, ("scan",)),
        Step("dedup-ids", S.drop_docs, ("scan", "ids")),
        Step("own", A.own_task, _SETS),
        Step("against", A.against_task, ("scan", "common")),
        Step("common-count", T.count_task, ("scan",)),
        Step("common-merge", T.merge_task, ("common-count",)),
        Step("common", T.filter_task, ("scan", "common-merge")),
        Step("exact", S.exact_copies, ("scan", "common", "against")),
        # candidates, by the fingerprint search: one task, or split into buckets
        Step("search", Q.search_task, ("scan", "common", "exact"), "pairs"),
        Step("split", Q.split_task, ("scan", "common", "exact")),
        Step("search-buckets", Q.pairs_task, ("split",), "pairs"),
        # candidates, by prefix filtering (prefix-count and prefix-merge) or by bands
        Step("prefix-count", P.count_task, _SETS),
        Step("prefix-merge", P.merge_task, ("prefix-count",)),
        Step("prefix", P.prefix_task, ("scan", "common", "exact", "prefix-merge")),
        Step("prefix-pairs", P.pairs_task, ("prefix", *_SETS)),
        Step("prefix-dedupe", P.dedupe_task, ("prefix-pairs",), "pairs"),
        Step("verify", Q.verify_task, ("pairs", *_SETS)),
        Step("cc-edges", C.edges_task, ("verify", "pairs", "exact", "against")),
        Step("cc-labels", C.labels_task, ("cc-edges",)),
        Step("cc-large", C.large_star_task, ("cc-edges", "cc-small-*"), "cc-large-*"),
        Step("cc-small", C.small_star_task, ("cc-large-*",), "cc-small-*"),
        Step("cc-route", C.route_task, ("cc-edges", "cc-labels", "cc-large-*")),
        Step("decide", D.decide_task, ("cc-route", "prefix-merge", *_SETS)),
        # or, for a run that fits in one process, every document decided in one task
        Step("decide-all", D.decide_all_task, ("scan", "common", "against"), "decide"),
        Step("near-kept", N.near_kept_task, ("decide", "against", *_SETS)),
        Step("near", N.near_task, ("verify", "near-kept", "scan")),
        Step("near-pick", N.near_pick_task, ("near", "decide", "near-kept", "scan")),
        # the bytes of each shard's lines in an output written in place, then the write
        Step("kept-bytes", kept_bytes_task, ("scan", "decide", "against")),
        Step("write", write_task, ("scan", "decide", "against", "own")),
        Step("index-split", A.index_split_task, ("scan", "against", "decide")),
        Step("index-clusters", A.index_clusters_task, ("index-split", "scan", "against")),
    )
}

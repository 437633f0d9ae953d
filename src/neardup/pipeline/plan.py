"""A dedup run described once: :class:`DedupPlan`, made by :func:`build_plan`.

The plan holds what the run reads (input files, cut into shards of about ``shard_docs``
documents), how documents are compared (the fingerprinter and the rule: verified at a Jaccard
threshold with a search distance, or fingerprints only at a distance), the keep order, the index
to check against, the outputs and the work directory. It is small and picklable: executors send
it with every task (:mod:`neardup.pipeline.stages`). The default distance of each rule, the
expansion of input paths and the checks of the outputs live here only.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from neardup.core.bands import Bands
from neardup.core.common import check_common
from neardup.core.decide import DEFAULT_DEDUP_DISTANCE, DEFAULT_DEDUP_THRESHOLD, keep_field
from neardup.core.similarity import check_threshold, distance_for_threshold
from neardup.errors import InputError
from neardup.io.blocks import line_format
from neardup.io.files import compression_of, input_size, is_url, local_path, read_path
from neardup.io.readers import STDIN
from neardup.io.rows import MemoryRows
from neardup.io.sources import InputFile, expand_inputs
from neardup.io.writers import OutputSet
from neardup.pipeline.workdir import check_work_dir
from neardup.pipeline.write import register_outputs

__all__ = [
    "DEFAULT_SHARD_DOCS",
    "ONE_PROCESS_BYTES_PER_DOC",
    "DedupPlan",
    "Shard",
    "build_plan",
    "check_outputs",
    "search_distance",
]

#: Documents per shard when not given: a scan task then holds about 60 MB of shingle keys.
DEFAULT_SHARD_DOCS = 250_000
#: Fewest documents per shard that a memory budget makes (smaller shards cost more in tasks
#: than they save in memory).
MIN_SHARD_DOCS = 10_000
#: Shards per task slot (a thread of a Dask worker) that a cluster's run is cut into when the
#: shard size is not given: every worker gets work, and one slow task holds up a stage less.
SHARDS_PER_SLOT = 2
#: Fewest documents per shard that cutting an input for a cluster's workers makes (smaller
#: shards cost more in tasks and files than they gain in parallel work).
MIN_SPREAD_DOCS = 1_000
#: Peak memory of one task per document of its shard (scan, verify and write tasks: the
#: shard's ids, records, fingerprints and shingle keys; measured 360-460 MB for 250,000
#: documents of 60 words in a Dask worker, its Python included).
TASK_BYTES_PER_DOC = 1_600
#: Peak memory of a search task per fingerprint it searches (the fingerprints, positions, the
#: permuted copy of each table and the pairs found).
SEARCH_BYTES_PER_DOC = 96
#: Fingerprints one search task searches at once when no budget says otherwise (above, the
#: search is split into buckets per table group).
DEFAULT_SEARCH_DOCS = 1 << 22
#: Memory of one process deciding every document per document (ids, records, fingerprints,
#: search keys, clusters: 350 bytes measured at 4M documents); a run whose documents need more
#: than the memory budget goes through the candidate, component and decide stages instead.
ONE_PROCESS_BYTES_PER_DOC = 350
#: Where a small run on this process's threads keeps its work directory: the memory file
#: system, whose files are pages of memory (no disk written or read back) ...
MEMORY_FS = "/dev/shm"
#: ... when its work directory is estimated at this many bytes or fewer (a share of the memory
#: budget and of the file system's free space, too): there, creating, renaming and removing
#: the stages' files costs 3x less (five texts: 6 ms a call against 20 ms on disk)
MEMORY_WORK_BYTES = 64 << 20
#: In-memory data's work up to this stays in the process (:func:`work_in_memory`; five texts:
#: 0.7 ms a call, 3.4 ms in /dev/shm); 100,000 texts' 33 MB there: peak RSS +9%, no faster.
MEMORY_STORE_BYTES = 8 << 20
#: The work directory's bytes per byte of text and per document, about (the shingle keys and
#: the spills of the scan: 344 MB for the 1M documents of ``bench/scale.py``, 400 MB of
#: text); a file input's bytes count twice (records are at least 200 bytes in practice)
WORK_BYTES_PER_TEXT_BYTE, WORK_BYTES_PER_DOC, WORK_BYTES_PER_INPUT_BYTE = 1, 200, 2
#: Bytes read from the start of the first input to estimate bytes per document.
_SAMPLE_BYTES = 1 << 20


@dataclass(frozen=True)
class Shard:
    """Input files ``first`` to ``stop`` (exclusive) of a plan, or, for one uncompressed local
    JSONL or line file, its bytes ``start`` to ``end`` (``end`` -1: to the end of the file),
    cut just after a line end."""

    first: int
    stop: int
    start: int = 0
    end: int = -1

    @property
    def is_range(self) -> bool:
        return self.start > 0 or self.end >= 0


def search_distance(verify: bool, threshold: float, distance: int | None) -> int:
    """The search distance of a rule: ``distance`` when given, else (verified) the distance for
    ``threshold`` (:func:`neardup.core.similarity.distance_for_threshold`) or (fingerprints
    only) :data:`neardup.core.decide.DEFAULT_DEDUP_DISTANCE`."""
    if distance is not None:
        return int(distance)
    return distance_for_threshold(threshold) if verify else DEFAULT_DEDUP_DISTANCE


@dataclass(frozen=True)
class DedupPlan:
    """One dedup run (see the module docstring). ``files`` is empty for in-memory input, whose
    ``rows`` the shards cut."""

    files: tuple[InputFile, ...]
    shards: tuple[Shard, ...]
    fingerprinter: Any
    verify: bool
    threshold: float
    distance: int  #: the search distance (the rule's default applied)
    distance_given: int | None  #: as given (an index without sketches defaults to 6)
    blocks: int | None
    keep: str
    text_field: str
    id_field: str | None
    fmt: str
    skip_bad: bool = False
    output: str | None = None
    clusters: str | None = None
    drop_list: str | None = None
    json_summary: str | None = None
    removed: str | None = None  #: the dropped records, in the input's format
    against: Any = None
    update: bool = False
    shard_docs: int = DEFAULT_SHARD_DOCS
    work_dir: str | None = None
    #: remove the work directory (what the run wrote there) once the outputs are committed
    clean_work_dir: bool = False
    inputs: tuple[str, ...] = field(default=())
    search_docs: int = DEFAULT_SEARCH_DOCS  #: fingerprints one search task searches at once
    device: str = "cpu"  #: where the search stage searches (each task's process resolves it)
    #: the verify stage also keeps the pairs under the threshold (the report's near misses)
    near_misses: bool = False
    #: the write tasks write their clusters' lines without ``clusters`` too (the report's)
    cluster_parts: bool = False
    #: shingles in more than this share (float) or number (int) of the documents take no part
    #: in the candidates or the verification (None: all do)
    common_shingles: float | int | None = None
    #: where a verified run's candidates come from: ``"fingerprint"``, ``"prefix"`` or
    #: ``"bands"``
    candidates: str = "fingerprint"
    #: with ``candidates="bands"``: (bands, rows) of the MinHash band scheme
    scheme: tuple[int, int] | None = None
    #: a staged run of at most this many documents decides them all in one task (their
    #: candidates and the rule over the whole corpus at once, as one process does); 0: never
    whole_docs: int = 0
    #: where a run without ``work_dir`` keeps its temporary work directory (None: ``TMPDIR``)
    temp_dir: str | None = None
    #: a run on this process's threads with a temporary work directory writes each shard's
    #: kept (and removed) lines beside their output file, as temporary files of the run ending
    #: in this token, and the commit joins them into it (None: in the work directory)
    parts_beside: str | None = None
    #: the kept (and removed) lines go straight into their output file, each shard's at its
    #: offset (the scan saves each line's bytes; set by the run)
    placed: bool = False
    #: in-memory input (:class:`~neardup.io.rows.MemoryRows`): its number of rows, which the
    #: shards cut by position (``start`` to ``end``); None for file input
    rows: int | None = None
    #: the temporary work directory is on the memory file system (:data:`MEMORY_FS`), or the
    #: work is in this process's memory (``work_in_memory``)
    temp_in_memory: bool = False
    #: the run keeps its work in this process's memory, not in files
    #: (:func:`neardup.pipeline.store.memory_store`: in-memory data, this process's threads)
    work_in_memory: bool = False
    #: in-memory input without ids: its ids are positions, which name no document, so the
    #: check against an index finds none of them held by it as itself
    position_ids: bool = False

    def __post_init__(self) -> None:
        if self.clean_work_dir and self.work_dir is None:
            raise ValueError("clean_work_dir=True needs work_dir= (--clean-work-dir needs "
                             "--work-dir DIR; without it the work directory is temporary, "
                             "always removed)")  # fmt: skip

    @property
    def key_field(self) -> str | None:
        """The field whose highest (lowest) value is kept (``keep="max:FIELD"``), else None."""
        return keep_field(self.keep)

    @property
    def kind(self) -> str:
        """The inputs' reader kind (``"jsonl"`` for in-memory input)."""
        return self.files[0].kind if self.files else "jsonl"

    @property
    def set_fps(self) -> bool:
        """Whether the stages keep each document's set fingerprint (``sfp``): only a verified
        run whose candidates are the fingerprint search reads them; prefix and band candidates
        never do."""
        return self.verify and self.candidates == "fingerprint"

    @property
    def fingerprint_distance(self) -> int:
        """The distance of a fingerprint-only check: ``--no-verify``'s and an index's without
        sketches (:data:`neardup.core.decide.DEFAULT_DEDUP_DISTANCE` unless given)."""
        return DEFAULT_DEDUP_DISTANCE if self.distance_given is None else self.distance_given

    def key(self) -> str:
        """A hash of everything that decides the run's intermediate results and outputs (not
        the work directory, threads or executor): a work directory serves one plan only."""
        fper = self.fingerprinter
        spec = {
            "files": [[f.path, f.kind, f.relname] for f in self.files],
            "shards": [[s.first, s.stop, s.start, s.end] for s in self.shards],
            "fingerprinter": [type(fper).__name__, getattr(fper, "preset", None),
                              repr(sorted(getattr(fper, "params", {}).items()))],
            "rule": [self.verify, self.threshold, self.distance, self.blocks, self.keep],
            "fields": [self.text_field, self.id_field, self.fmt, self.skip_bad],
            "outputs": [self.output, self.clusters, self.drop_list]
            + ([self.removed] if self.removed is not None else []),
            "search": [self.search_docs, self.whole_docs],
            "near": [self.near_misses, self.cluster_parts],
            "against": [_against_key(self.against), self.update],
            "rows": self.rows,
        }  # fmt: skip
        if self.common_shingles is not None:
            spec["common"] = self.common_shingles
        if self.candidates != "fingerprint":
            spec["candidates"] = self.candidates
        if self.scheme is not None:
            spec["scheme"] = list(self.scheme)
        return hashlib.sha256(json.dumps(spec, sort_keys=True).encode()).hexdigest()[:32]


def _check_rule(
    verify: bool, threshold: float, distance: int | None, keep: str, blocks: int | None
) -> int:
    """The rule's search distance, once its threshold, keep policy and blocks are checked."""
    keep_field(keep)
    if verify:
        check_threshold(threshold)
    d = search_distance(verify, threshold, distance)
    if blocks is not None and blocks <= d:
        raise ValueError(
            f"blocks must be > distance (got blocks={blocks}, distance={d}); "
            f"use blocks={d + 1} or more"
        )
    return d


def _check_key_input(keep: str, files: Sequence[InputFile]) -> None:
    """A keep field needs records with fields: JSONL or Parquet files."""
    name = keep_field(keep)
    if name is None:
        return
    if not files:
        raise ValueError(f"keep={keep!r} needs file input (JSONL or Parquet records with a "
                         f"field {name!r}); in-memory input has no fields")  # fmt: skip
    if files[0].kind not in ("jsonl", "parquet"):
        raise InputError(
            files[0].path,
            None,
            f"--keep {keep} needs JSONL or Parquet input "
            f"(records with a field {name!r}); {files[0].kind} input has no fields",
        )


def _check_common(common: Any, verify: bool) -> float | int | None:
    """``common_shingles`` checked (:func:`neardup.core.common.check_common`); it changes the
    shingle sets, so it needs a verified run."""
    if common is None:
        return None
    if not verify:
        raise ValueError(
            "common_shingles= (--common-shingles) leaves shingles out of the verified "
            "comparison; it does nothing with verify=False (--no-verify): drop one of them"
        )
    return check_common(common)


#: where a verified run's candidates may come from (:func:`neardup.core.verify.decide_verified`)
CANDIDATES = ("fingerprint", "prefix", "bands")


def resolve_candidates(
    candidates: str | Bands | None,
    verify: bool,
    *,
    distance: int | None = None,
    blocks: int | None = None,
    device: str = "cpu",
) -> str:
    """``candidates`` checked (a :class:`~neardup.core.bands.Bands` is ``"bands"``), or chosen
    when None: ``"prefix"`` for a verified run on the CPU (every pair at the threshold, and a
    templated site costs what distinct pages cost: docs/guides/threshold.md),
    ``"fingerprint"`` without verification or when the caller set what only the fingerprint
    search uses (``distance``, ``blocks``, a GPU ``device``).

    Raises
    ------
    ValueError
        An unknown generator, or ``"prefix"`` or ``"bands"`` without verification.
    """
    if candidates is None:
        fingerprint = not verify or distance is not None or blocks is not None or device != "cpu"
        return "fingerprint" if fingerprint else "prefix"
    if isinstance(candidates, Bands):
        candidates = "bands"
    if candidates not in CANDIDATES:
        raise ValueError(f"candidates must be one of {', '.join(CANDIDATES)} (got {candidates!r})")
    if candidates != "fingerprint" and not verify:
        raise ValueError(
            f"candidates={candidates!r} (--candidates {candidates}) finds candidates in the "
            "shingle sets of a verified run; with verify=False (--no-verify) the fingerprints "
            "decide: drop one of them"
        )
    return candidates


def resolve_scheme(candidates: str | Bands | None, threshold: float) -> tuple[int, int] | None:
    """The (bands, rows) of band candidates at ``threshold`` (None for other candidates)."""
    if isinstance(candidates, Bands):
        return candidates.scheme(threshold)
    return Bands().scheme(threshold) if candidates == "bands" else None


def _expand(data: Any, fmt: str, output: Any, removed: Any,
            work_dir: Any) -> tuple[list[str], list[InputFile], int | None]:  # fmt: skip
    """The paths ``data`` names (as given), the files they expand to and, for in-memory input
    (:class:`~neardup.io.rows.MemoryRows`; no paths, no files), its rows; in-memory input
    has no ``output``, ``removed`` or ``work_dir``."""
    from neardup.io.sources import is_paths

    if not is_paths(data):
        if output is not None:
            raise ValueError("output= needs file input; filter in-memory data with result.kept")
        if removed is not None:
            raise ValueError("removed= needs file input; in-memory data's dropped documents "
                             "are result.dropped")  # fmt: skip
        if work_dir is not None:
            raise ValueError("work_dir= keeps a run over files for a rerun to resume; "
                             "in-memory data is read again by each call: run it without "
                             "work_dir=")  # fmt: skip
        if not isinstance(data, MemoryRows):
            raise TypeError("a dedup plan takes paths, or in-memory data as MemoryRows")
        return [], [], len(data)
    paths = [data] if isinstance(data, (str, os.PathLike)) else list(data)
    return [os.fspath(p) for p in paths], expand_inputs(paths, fmt), None


def _check_fingerprinter(fper: Any, verify: bool) -> None:
    """A verified run needs a fingerprinter that emits shingle keys."""
    if verify and not hasattr(fper, "features_many"):
        raise TypeError(f"{type(fper).__name__} does not emit shingle keys (features_many), "
                        "which verification needs; use a neardup.Fingerprinter or verify=False "
                        "(--no-verify)")  # fmt: skip


def build_plan(data: Any, *, threshold: float = DEFAULT_DEDUP_THRESHOLD, verify: bool = True,
               distance: int | None = None, keep: str = "first", blocks: int | None = None,
               fingerprinter: Any = None, preset: str = "default", text_field: str = "text",
               id_field: str | None = "id", fmt: str = "auto", skip_bad: bool = False,
               output: str | os.PathLike | None = None, clusters: str | os.PathLike | None = None,
               drop_list: str | os.PathLike | None = None,
               json_summary: str | os.PathLike | None = None, against: Any = None,
               update: bool = False, shard_docs: int | None = None,
               removed: str | os.PathLike | None = None,
               work_dir: str | os.PathLike | None = None, clean_work_dir: bool = False,
               memory: int | str | None = None, parallel: int = 1, slots: int = 1,
               client: bool = False, staged_only: bool = False, device: str = "cpu",
               temp_dir: str | os.PathLike | None = None,
               common_shingles: float | int | None = None,
               candidates: str | Bands | None = None) -> DedupPlan:  # fmt: skip
    """The :class:`DedupPlan` of a dedup run: options checked, defaults applied, file inputs
    expanded (``data`` a path or list of paths, or in-memory input as
    :class:`~neardup.io.rows.MemoryRows`) and cut into shards (byte ranges or files; rows).

    ``memory`` (bytes or a string such as ``"8G"``; default ``NEARDUP_MEMORY`` or half the
    available memory) is the run's budget: a run whose documents fit in it is decided in one
    task (``whole_docs``), and, unless ``shard_docs`` is given, it sets the shard size
    (``parallel`` tasks at a time, :data:`TASK_BYTES_PER_DOC` each per document) and the fingerprints of one search
    task (:data:`SEARCH_BYTES_PER_DOC` each); ``slots`` tasks at a time in all (a Dask
    cluster's threads) then cut the input into at least :data:`SHARDS_PER_SLOT` shards each
    (:func:`spread`). ``clean_work_dir``: remove ``work_dir`` once the outputs are committed
    (what the run wrote there). ``client``: a Dask client runs the work; ``staged_only``: another
    executor (Ray) does; on either, no task decides the whole run.
    ``device``: where the search stage searches, as in :func:`neardup.dedup`.
    ``common_shingles``, ``candidates``: as in :func:`neardup.dedup` (verified runs only).

    Raises
    ------
    ValueError
        For options that do not fit together (``update`` without ``against``, ``blocks`` not
        above the distance, a ``work_dir`` URL of a read-only scheme, an unknown keep policy,
        a bad threshold or shard size, ``work_dir`` with in-memory input, ``common_shingles``
        not a share in (0, 1) or a count >= 2, or without verification).
    InputError
        For inputs that cannot be read (missing, mixed formats, stdin).
    """
    from neardup.core.engine import memory_budget
    from neardup.fingerprints import Fingerprinter

    if update and against is None:
        raise ValueError("update=True needs against= (the index to add the kept documents to)")
    check_work_dir(work_dir)
    d = _check_rule(verify, threshold, distance, keep, blocks)
    common = _check_common(common_shingles, verify)
    scheme = resolve_scheme(candidates, threshold) if verify else None
    candidates = resolve_candidates(candidates, verify, distance=distance, blocks=blocks,
                                    device=device)  # fmt: skip
    if shard_docs is not None and shard_docs < 1:
        raise ValueError(f"shard_docs must be >= 1 (got {shard_docs})")
    inputs, files, rows = _expand(data, fmt, output, removed, work_dir)
    _check_key_input(keep, files)
    budget = memory_budget(memory)
    per, search = sizes_for(budget, parallel, shard_docs)
    if shard_docs is None and max(slots, parallel) > 1:  # every slot or thread busy
        docs = _cut_docs(files, text_field, id_field) if rows is None else rows
        per = spread(per, docs, max(slots, parallel))
    shards = cut_shards(files, per, text_field, id_field) if rows is None else cut_rows(rows, per)
    whole = shard_docs is None and not client and not staged_only and device == "cpu"
    here = temp_dir is None and work_dir is None and not client and not staged_only
    need = work_bytes(data, files) if here else None
    in_memory = isinstance(data, MemoryRows) and work_in_memory(need, budget)
    if here and not in_memory:
        temp_dir = memory_work_dir(need, budget)
    fper = fingerprinter if fingerprinter is not None else Fingerprinter(preset)
    _check_fingerprinter(fper, verify)
    return DedupPlan(
        files=tuple(files), shards=tuple(shards), fingerprinter=fper, verify=verify,
        threshold=float(threshold), distance=d,
        distance_given=None if distance is None else int(distance), blocks=blocks, keep=keep,
        text_field=text_field, id_field=id_field, fmt=fmt, skip_bad=skip_bad,
        output=_path(output), clusters=_path(clusters), drop_list=_path(drop_list),
        json_summary=_path(json_summary), removed=_path(removed), against=against,
        update=update, shard_docs=per,
        work_dir=_work_path(work_dir), clean_work_dir=clean_work_dir, inputs=tuple(inputs),
        search_docs=search, device=device, common_shingles=common, candidates=candidates,
        scheme=scheme, whole_docs=budget // ONE_PROCESS_BYTES_PER_DOC if whole else 0,
        temp_dir=_path(temp_dir), rows=rows, work_in_memory=in_memory,
        temp_in_memory=in_memory or temp_dir == MEMORY_FS,
        position_ids=isinstance(data, MemoryRows) and data.ids is None,
    )  # fmt: skip


def sizes_for(budget: int, parallel: int, shard_docs: int | None = None) -> tuple[int, int]:
    """Documents per shard and fingerprints per search task for a memory ``budget`` (bytes)
    shared by ``parallel`` tasks at a time: at most :data:`DEFAULT_SHARD_DOCS` and
    :data:`DEFAULT_SEARCH_DOCS`, at least :data:`MIN_SHARD_DOCS` (``shard_docs``, when
    given, is the shard size).

    Examples
    --------
    >>> sizes_for(8 << 30, 4)
    (250000, 4194304)
    >>> sizes_for(256 << 20, 2)
    (83886, 1398101)
    """
    each = budget // max(1, parallel)
    per = min(DEFAULT_SHARD_DOCS, max(MIN_SHARD_DOCS, each // TASK_BYTES_PER_DOC))
    if shard_docs is not None:
        per = int(shard_docs)
    search = min(DEFAULT_SEARCH_DOCS, max(MIN_SHARD_DOCS, each // SEARCH_BYTES_PER_DOC))
    return per, search


def spread(per: int, docs: float, slots: int) -> int:
    """Documents per shard for ``docs`` documents on ``slots`` tasks at a time: about
    :data:`SHARDS_PER_SLOT` shards per slot, at most ``per`` (the memory budget's size) and
    at least :data:`MIN_SPREAD_DOCS`.

    Examples
    --------
    >>> spread(250_000, 100_000, 2)
    25000
    >>> spread(250_000, 3_000, 2), spread(250_000, 100_000_000, 8)
    (1000, 250000)
    """
    want = math.ceil(docs / (SHARDS_PER_SLOT * max(1, slots)))
    return max(1, min(per, max(MIN_SPREAD_DOCS, want)))


def _cut_docs(files: Sequence[InputFile], text_field: str, id_field: str | None) -> float:
    """About how many documents :func:`cut_shards` cuts by ``shard_docs``: the text files,
    or the documents of the JSONL and line files it cuts into byte ranges (estimated from
    their bytes); the other files are a shard each whatever the size."""
    if files and files[0].kind == "text":
        return float(len(files))
    cut = [f for f in files if _splittable(f, text_field, id_field)]
    return sum(input_size(f.path) for f in cut) / _bytes_per_doc(files) if cut else 0.0


def _against_key(against: Any) -> Any:
    return os.fspath(against) if isinstance(against, (str, os.PathLike)) else None


def _path(p: str | os.PathLike | None) -> str | None:
    return None if p is None else os.fspath(p)


def _work_path(p: str | os.PathLike | None) -> str | None:
    """The work directory: a path (a ``file://`` URL as the path it names), or a URL of
    object storage without a closing ``/``."""
    if p is None:
        return None
    local = local_path(p)
    return os.fspath(p).rstrip("/") if local is None else local


def check_outputs(plan: DedupPlan, extras: Sequence[Any] = ()) -> None:
    """Check every output of ``plan`` (and ``extras``, see :mod:`neardup.pipeline.extra`)
    before any work: not an input, not another output, its directory writable."""
    protect = [plan.against] if isinstance(plan.against, (str, os.PathLike)) else []
    with OutputSet(plan.inputs, protect=protect) as check:
        check.add_inputs(f.path for f in plan.files)
        register_outputs(check, list(plan.files), plan.output, plan.clusters, plan.drop_list,
                         plan.json_summary, plan.removed)  # fmt: skip
        if plan.work_dir is not None:
            check.add_inputs([plan.work_dir])
        for extra in extras:
            extra.register(check)


def cut_shards(
    files: Sequence[InputFile], shard_docs: int, text_field: str, id_field: str | None
) -> list[Shard]:
    """Shards of about ``shard_docs`` documents: byte ranges of large uncompressed local JSONL
    and line files (cut after a line end; the bytes per document estimated from the first
    inputs' first MiB), groups of ``shard_docs`` text files, whole files otherwise."""
    shards: list[Shard] = []
    if files and files[0].kind == "text":
        for a in range(0, len(files), shard_docs):
            shards.append(Shard(a, min(a + shard_docs, len(files))))
        return shards
    per_doc = _bytes_per_doc(files)
    for k, f in enumerate(files):
        if not _splittable(f, text_field, id_field):
            shards.append(Shard(k, k + 1))
            continue
        cuts = _line_cuts(f.path, max(1, int(per_doc * shard_docs)))
        if len(cuts) <= 2:  # one shard: the whole file (read as any file is)
            shards.append(Shard(k, k + 1))
            continue
        for a, b in zip(cuts[:-1], cuts[1:], strict=True):
            shards.append(Shard(k, k + 1, a, b))
    return shards


def work_bytes(data: Any, files: Sequence[InputFile]) -> int | None:
    """A run's work in bytes, estimated from in-memory data's texts or the files' sizes; None
    where those are unknown here (piped or remote inputs)."""
    if isinstance(data, MemoryRows):
        return WORK_BYTES_PER_TEXT_BYTE * data.text_bytes() + WORK_BYTES_PER_DOC * len(data)
    if any(f.path == STDIN or is_url(f.path) for f in files):
        return None
    return WORK_BYTES_PER_INPUT_BYTE * sum(input_size(f.path) for f in files)


def work_in_memory(need: int | None, budget: int) -> bool:
    """Whether in-memory data whose work is estimated at ``need`` bytes (:func:`work_bytes`)
    keeps it in the process's memory (:func:`neardup.pipeline.store.memory_store`): at
    :data:`MEMORY_STORE_BYTES` or less, a 16th of the memory ``budget`` at most."""
    return need is not None and need <= min(MEMORY_STORE_BYTES, budget // 16)


def memory_work_dir(need: int | None, budget: int) -> str | None:
    """:data:`MEMORY_FS` for a run whose work is estimated at ``need`` bytes (:func:`work_bytes`;
    None: piped or remote inputs): :data:`MEMORY_WORK_BYTES` or less, a 16th of ``budget`` and
    a quarter of the file system's free space at most, where this machine has one and no
    temporary directory was chosen (``TMPDIR``, ``TEMP``, ``TMP``, ``tempfile.tempdir``); else
    None (``TMPDIR``)."""
    if need is None or not default_temp_dir():
        return None
    try:
        st = os.statvfs(MEMORY_FS)
    except OSError:
        return None
    if not os.access(MEMORY_FS, os.W_OK):
        return None
    room = min(MEMORY_WORK_BYTES, budget // 16, st.f_bavail * st.f_frsize // 4)
    return MEMORY_FS if need <= room else None


def default_temp_dir() -> bool:
    """Whether the system temporary directory is the platform's default, not one the user
    chose (``TMPDIR``, ``TEMP``, ``TMP``, ``tempfile.tempdir``)."""
    import tempfile

    if any(os.environ.get(v) for v in ("TMPDIR", "TEMP", "TMP")):
        return False
    return tempfile.gettempdir() in ("/tmp", "/var/tmp", "/usr/tmp")


def cut_rows(n: int, shard_docs: int) -> list[Shard]:
    """Shards of ``shard_docs`` rows of in-memory input (one, empty, for none).

    Examples
    --------
    >>> [(s.start, s.end) for s in cut_rows(5, 2)]
    [(0, 2), (2, 4), (4, 5)]
    """
    return [Shard(0, 0, a, min(n, a + shard_docs)) for a in range(0, max(n, 1), shard_docs)]


def _splittable(f: InputFile, text_field: str, id_field: str | None) -> bool:
    if f.kind not in ("jsonl", "lines") or f.path == STDIN or is_url(f.path):
        return False
    if compression_of(f.path) is not None:
        return False
    return line_format(f.path, f.kind == "jsonl", text_field, id_field) is not None


def _bytes_per_doc(files: Sequence[InputFile]) -> float:
    for f in files:
        if f.kind in ("jsonl", "lines") and not is_url(f.path) and compression_of(f.path) is None:
            with open(read_path(f.path), "rb") as r:
                sample = r.read(_SAMPLE_BYTES)
            if sample:
                return len(sample) / max(1, sample.count(b"\n"))
    return 1.0


def _line_cuts(path: str, every: int) -> list[int]:
    """Byte offsets ``[0, c1, ..., size]`` about ``every`` bytes apart, each just after a line
    end (a line longer than ``every`` makes a longer range)."""
    size = input_size(path)
    cuts = [0]
    with open(read_path(path), "rb") as r:
        at = every
        while at < size:
            r.seek(at - 1)
            while True:
                piece = r.read(1 << 16)
                if not piece:
                    at = size
                    break
                j = piece.find(b"\n")
                if j >= 0:
                    at += j
                    break
                at += len(piece)
            if at >= size:
                break
            cuts.append(at)
            at += every
    cuts.append(size)
    return cuts

"""The dedup job, one orchestration for :func:`neardup.dedup` and ``neardup dedup``:
scan -> seen (an index of earlier dumps) -> decide -> write -> update the index."""

from __future__ import annotations

import contextlib
import os
import time
import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

from neardup.core.bands import Bands
from neardup.core.bits import as_fingerprints
from neardup.core.common import template_hint
from neardup.core.decide import (
    DEFAULT_DEDUP_DISTANCE,
    DEFAULT_DEDUP_THRESHOLD,
    Decisions,
    from_kept_for,
)
from neardup.core.decide import decide as decide_on_arrays
from neardup.core.search import find_all
from neardup.core.sketch import set_sketches
from neardup.core.verify import (
    ShingleSets,
    VerifiedDecisions,
    decide_verified,
    distance_for_threshold,
    set_fingerprints,
)
from neardup.errors import InputError, holding
from neardup.io.display import plural
from neardup.io.files import spooled
from neardup.io.sources import is_paths, texts_and_ids
from neardup.io.writers import OutputSet
from neardup.pipeline.ahead import announce, dedup_groups, wait_ahead
from neardup.pipeline.common_shingles import filter_common, templates
from neardup.pipeline.executors import open_executor
from neardup.pipeline.extra import ExtraOutput
from neardup.pipeline.plan import DedupPlan, build_plan
from neardup.pipeline.result import DedupResult, report_no_shingles
from neardup.pipeline.scan import Scan, fingerprint_texts, scan_files, unique_ids
from neardup.pipeline.spool import ShingleSpool, subset_sets
from neardup.pipeline.stage_search import check_search_device
from neardup.pipeline.staged import run_staged
from neardup.pipeline.staged_result import summary as staged_summary
from neardup.pipeline.workdir import check_work_dir
from neardup.pipeline.write import (
    register_outputs,
    write_clusters,
    write_drop_list,
    write_kept,
    write_summary,
)

__all__ = ["decide", "decide_verified_sets", "dedup"]

OnBad = Callable[[InputError], None]

_HOLDING_SCAN = (
    "the id, record location, length and fingerprint of every document (about 280 bytes per "
    "document with short ids; docs/guides/memory.md)"
)
_HOLDING_SEARCH = (
    "the fingerprints, the search keys and the clusters (verified: also the shingle-set offsets "
    "and the candidate pairs; the shingle keys are on temporary disk)"
)
_FIX_SCAN = (
    "dedup the corpus in parts, one after another against an index (--against INDEX --update), "
    "or run the search on Dask (--workers, --scheduler)"
)


def _ignore(err: InputError) -> None:
    return None


def _on_gpu(device: str, client: Any) -> bool:
    """Whether the search runs on this machine's GPU (``device`` as in :func:`neardup.find_all`;
    with a Dask ``client`` the cluster searches, each worker on its GPU as ``device`` asks)."""
    if device == "cpu":
        return False
    from neardup.gpu import check_device, use_gpu

    if client is not None:
        check_device(device)
        return False
    return use_gpu(device)


def decide(
    fingerprints: Sequence[int] | np.ndarray,
    lengths: Sequence[int] | np.ndarray | None = None,
    *,
    keep: str = "first",
    distance: int = DEFAULT_DEDUP_DISTANCE,
    blocks: int | None = None,
    threads: int | None = None,
    already_seen: np.ndarray | None = None,
    client: Any = None,
    device: str = "cpu",
) -> Decisions:
    """Keep or drop each of ``n`` documents by its fingerprint alone.

    As :func:`neardup.core.decide.decide` (documents in keep order, each dropped for the first
    already kept document within ``distance`` bits, never through a chain), and with
    ``client`` (a ``distributed.Client``) the candidate pairs are found on that Dask cluster
    (:func:`neardup.distributed.find_all` over the distinct fingerprints, the same decisions);
    that needs ``pip install "neardup[dask]"``. ``device`` finds them on a GPU as in
    :func:`neardup.find_all` (the same decisions).

    Examples
    --------
    >>> d = decide([0b1111, 0b0111, 0b0011, 1 << 40], distance=1)
    >>> d.labels.tolist(), d.kept.tolist(), d.distance.tolist()
    ([0, 0, 2, 3], [True, False, True, True], [0, 1, 0, 0])
    """
    pairs = None
    if _on_gpu(device, client) or client is not None:
        fp = as_fingerprints(fingerprints)
        values, first = np.unique(fp, return_index=True)
        if client is None:
            found = find_all(values, distance, blocks, device="cuda")
        else:
            from neardup.distributed import find_all as find_all_on_dask

            found = find_all_on_dask(values, distance, blocks, client, device=device)
        pairs = first[found].reshape(-1, 2)
    return decide_on_arrays(
        fingerprints,
        lengths,
        keep=keep,
        distance=distance,
        blocks=blocks,
        threads=threads,
        already_seen=already_seen,
        pairs=pairs,
    )


def decide_verified_sets(
    sets: ShingleSets,
    lengths: np.ndarray | None = None,
    threshold: float = DEFAULT_DEDUP_THRESHOLD,
    *,
    keep: str = "first",
    distance: int | None = None,
    blocks: int | None = None,
    threads: int | None = None,
    client: Any = None,
    exclude: np.ndarray | None = None,
    device: str = "cpu",
    near_misses: bool = False,
    candidates: str = "fingerprint",
    scheme: tuple[int, int] | None = None,
) -> VerifiedDecisions:
    """:func:`neardup.core.verify.decide_verified` over the set fingerprints of ``sets``; with
    ``client`` the candidate pairs are found on that Dask cluster
    (:func:`neardup.distributed.find_all`, the same pairs, so the same decisions). Documents
    where ``exclude`` is True (decided against an index) take no part. ``device`` finds the
    candidate pairs on a GPU as in :func:`neardup.find_all` (the same pairs). ``near_misses``
    also finds each kept document's nearest miss under the threshold (for the report).
    ``candidates="prefix"`` finds the candidates by prefix filtering instead
    (:mod:`neardup.core.prefix`: every pair at the threshold; ``client``, ``device``,
    ``distance`` and ``blocks`` then take no part), ``"bands"`` by MinHash bands of the
    ``scheme`` (bands, rows; :mod:`neardup.core.bands`).

    Examples
    --------
    >>> sets = ShingleSets(np.array([0, 3, 6, 10]), np.array([1, 2, 3, 1, 2, 3, 1, 2, 3, 4]))
    >>> decide_verified_sets(sets, threshold=0.7).kept_for.tolist()
    [-1, 0, 0]
    """
    fp = set_fingerprints(sets, threads=threads)
    d = distance_for_threshold(threshold) if distance is None else int(distance)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # the job reports documents without shingles
        if candidates != "fingerprint":
            return decide_verified(
                sets, fp, threshold, keep=keep, lengths=lengths, threads=threads,
                exclude=exclude, near_misses=near_misses, candidates=candidates,
                **_scheme_args(scheme),
            )  # fmt: skip
        if _on_gpu(device, client) or client is not None:
            if client is None:
                pairs = find_all(fp, d, blocks, device="cuda")
            else:
                from neardup.distributed import find_all as find_all_on_dask

                pairs = find_all_on_dask(fp, d, blocks, client, device=device)
            return decide_verified(
                sets, fp, threshold, pairs=pairs, keep=keep, lengths=lengths, threads=threads,
                exclude=exclude, near_misses=near_misses,
            )  # fmt: skip
        return decide_verified(
            sets, fp, threshold, distance=d, keep=keep, lengths=lengths, blocks=blocks,
            threads=threads, exclude=exclude, near_misses=near_misses,
        )  # fmt: skip


def dedup(
    data: Any,
    *,
    threshold: float = DEFAULT_DEDUP_THRESHOLD,
    verify: bool = True,
    distance: int | None = None,
    keep: str = "first",
    blocks: int | None = None,
    preset: str = "default",
    fingerprinter: Any = None,
    text_field: str = "text",
    id_field: str | None = "id",
    fmt: str = "auto",
    output: str | os.PathLike | None = None,
    clusters: str | os.PathLike | None = None,
    drop_list: str | os.PathLike | None = None,
    json_summary: str | os.PathLike | None = None,
    skip_bad: bool = False,
    on_bad: OnBad | None = None,
    threads: int | None = None,
    progress: Callable[[str, int], None] | None = None,
    log: Callable[[str], None] | None = None,
    against: Any = None,
    update: bool = False,
    client: Any = None,
    executor: Any = None,
    extra_outputs: Sequence[ExtraOutput] = (),
    device: str = "cpu",
    temp_dir: str | os.PathLike | None = None,
    shard_docs: int | None = None,
    work_dir: str | os.PathLike | None = None,
    clean_work_dir: bool = False,
    stage_progress: Callable[[str, int, int], None] | None = None,
    memory: int | str | None = None,
    collect: bool = True,
    removed: str | os.PathLike | None = None,
    common_shingles: float | int | None = None,
    candidates: str | Bands | None = None,
) -> Any:
    """Find near-duplicate documents and choose one survivor per cluster.

    Parameters
    ----------
    data : path, list of paths, iterable of str, pyarrow Table/Array, pandas DataFrame/Series
        A ``str``/``os.PathLike`` (or a list of ``os.PathLike``) is read as files: JSONL,
        Parquet, a directory or glob of text files (streamed; see
        :func:`neardup.pipeline.scan.scan_files`). Anything else is in-memory text: a pyarrow
        Table or pandas DataFrame (column ``text_field``, ids from ``id_field`` when present,
        else positions / the DataFrame index), a pyarrow Array, pandas Series, numpy array or
        any iterable of ``str``, or a Hugging Face ``Dataset``/``DatasetDict`` (column
        ``text_field``; a DatasetDict across its splits). ``result.filter(data)`` gives the
        input without its dropped documents. Paths may be compressed or fsspec URLs.
    threshold : float, default 0.8
        Verified dedup: a document is dropped only when the exact Jaccard of its shingle set
        with an already kept document's is ``>= threshold`` (0 < threshold <= 1). The candidates
        compared come from ``candidates``. Documents in keep-priority order; a drop is never
        chained through a dropped document; documents without shingles are always kept. Shingle keys are spooled to a temporary
        file (4 bytes per distinct shingle, in ``temp_dir``), removed when the job ends.
    verify : bool, default True
        False: fingerprint-only decisions, faster and without temporary disk: documents in
        keep order, each dropped for the first already kept document whose fingerprint is
        within ``distance`` bits (default 6), never through a chain; nothing is checked
        against the texts.
    distance : int, optional
        Largest Hamming distance (bits, inclusive) between fingerprints that makes candidates
        (verified with ``candidates="fingerprint"``; default
        :func:`neardup.core.verify.distance_for_threshold`, 10 bits at 0.8, 6 at 0.9) or links
        documents (``verify=False``, default 6).
    keep : {"first", "longest", "max:FIELD", "min:FIELD"}
        Which document is kept: first in input order, most characters, or the highest
        (``"max:score"``) or lowest (``"min:crawl_date"``) value of a field of the records
        (ties: first). A keep field needs JSONL or Parquet input; its values must be all
        numbers or all dates (ISO-8601 strings, or Parquet dates and timestamps; without a
        zone: UTC); a record without one is a bad record (``skip_bad``).
    blocks : int, optional
        Search layout block count (default: chosen for the corpus size).
    preset : str
        Fingerprint preset (:data:`neardup.PRESETS`), unless ``fingerprinter``.
    fingerprinter : Fingerprinter, optional
        A configured :class:`neardup.Fingerprinter`.
    text_field, id_field : str
        JSONL field / Parquet or Table column / DataFrame column of the text and of the id.
    fmt : str
        File reader (``"auto"``, ``"text"``, ``"lines"``, ``"jsonl"``, ``"parquet"``).
    output : path, optional
        File input only: write the kept records here, in the input's format (atomically).
    clusters : path, optional
        Write each cluster of two or more documents (a kept document and those dropped for it)
        as a JSON line: kept id, size, member ids, each member's fingerprint distance in bits to
        the kept one and (verified) its Jaccard with it (``jaccards``, 1.0 for the kept one).
    drop_list : path, optional
        Write the ids of the dropped documents, one per line.
    removed : path, optional
        File input only: write the dropped records here, untouched, in input order and the
        input's format, as ``output`` writes the kept ones (a file, or a directory where
        ``output`` would be one); the kept and removed records together are the input's
        records (less any skipped as bad).
    json_summary : path, optional
        Write :meth:`DedupResult.summary` as one JSON object.

        Every output path is checked before any work starts (not an input, not another output,
        its directory writable); the outputs are written under temporary names and all renamed
        into place at the end, or none are.
    skip_bad, on_bad
        Skip bad records (malformed, missing or non-string text, duplicate id) instead of
        raising; ``on_bad`` is called with each one's error.
    threads : int, optional
        Worker threads for fingerprinting and search.
    progress : callable, optional
        In-memory data: ``progress(stage, count)`` with stage ``"read"`` (file input: see
        ``stage_progress``).
    log : callable, optional
        Called with one-line messages about the stages (for a command line's stderr).
    against : path or neardup.Index, optional
        An index of documents seen before: documents within ``distance`` bits (default 6) of
        anything in it are dropped (incremental dedup, one dump at a time). The index holds no
        shingle sets: these drops are by fingerprint distance only, not Jaccard-verified. With
        ``client`` this check runs in batch mode on the cluster, and ``against`` may also be
        Parquet files (paths or globs ending in ``.parquet``, columns ``fingerprint`` and ``id``).
    update : bool
        With ``against``: add the kept documents to the index, once the outputs are in place;
        if that fails the outputs are put back (their ids are checked against the index before
        anything is written). A document the index already holds as itself (same id, same
        fingerprint) is kept and not added again, and the index's entries of this input take
        no part in the check against it: a rerun on the same data writes the same outputs and
        changes nothing, and a rerun after a partial update completes it.
    client : distributed.Client, optional
        Run the search on this Dask cluster (same decisions; see :func:`decide` and
        :func:`decide_verified_sets`).
    executor : {"local", "ray"} or executor object, optional
        What runs the tasks of a staged run, instead of ``client``: ``"local"`` (the default),
        threads of this process; ``"ray"``, Ray (``pip install "neardup[ray]"``): the cluster
        this process is connected to (``ray.init(address="auto")`` first), else a local Ray of
        ``threads`` CPUs (default: all) started for the run and shut down at its end, its
        session in ``temp_dir``; or an executor object
        (:class:`~neardup.pipeline.ray_executor.RayExecutor`,
        :class:`~neardup.pipeline.executors.LocalExecutor`). On Ray a file input always runs
        staged, with the same outputs; its workers must reach the inputs, the outputs' and
        the work directory (``work_dir``, or the temporary one in ``TMPDIR``) at the same
        paths; ``device="cuda"``, in-memory data and what only the one-process run does are
        refused. See docs/guides/cluster.md.
    extra_outputs : sequence of ExtraOutput
        Further outputs of the run (:mod:`neardup.pipeline.extra`: the command line's saved
        dataset and ``--report``), checked with the others before any work, written in order
        after the kept documents, clusters and drop list (before the JSON summary) and
        committed with them. One with a true ``near_misses`` attribute (the report) has a
        verified run find each kept document's nearest miss (``result.verified.near_for``).
    device : {"cpu", "cuda", "auto"}
        Where the candidate search runs (verified or not), as in :func:`neardup.find_all`:
        the same pairs, so the same decisions. With ``client`` (or a staged run) each search
        task resolves it where it runs: ``"cuda"`` needs a usable GPU on every worker (checked
        before any work), ``"auto"`` uses a worker's GPU when it has one.
    temp_dir : path, optional
        Where a run keeps its temporary work directory (file input: the stages' files, the
        shingle keys among them) or spools its shingle keys (in-memory data); default: the
        system temporary directory, ``TMPDIR``. A directory that fills up is named in the
        error.
    shard_docs : int, optional
        File input runs as stages over shards (:mod:`neardup.pipeline.staged`): of about
        this many documents, with the candidate, component and decide stages. Without it, a
        run whose documents fit in ``memory`` (about 350 bytes each) cuts about two shards per
        thread (:func:`neardup.pipeline.plan.spread`) and decides every document in one task
        (``decide-all``, the whole corpus's candidates and rule at once); a larger one takes
        the shard size from ``memory`` (:func:`neardup.pipeline.plan.sizes_for`), and, on a
        ``client``, from its workers too. The outputs are the same, byte for byte, for every
        shard size, thread count and executor. Parquet files as ``against``, and an open
        index with ``client``, run in one process. ``extra_outputs`` (the report) are written
        from a result of the whole run, which holds arrays of every document.
    work_dir : path, optional
        Staged run: keep each finished task's results in this directory, so that running the
        same call again after a crash or Ctrl-C resumes it (a different run is refused). A
        path of a file system (local, or shared by a cluster's workers), or a prefix of object
        storage (``"s3://bucket/work"``, any fsspec URL; see the cluster guide). Default: a
        temporary directory, removed at the end.
    clean_work_dir : bool, default False
        With ``work_dir``: remove it once the outputs are committed (the files the run wrote
        there; the directory itself unless it holds anything else). Kept after a failure.
    stage_progress : callable, optional
        Staged run: ``stage_progress(stage, tasks done, tasks)``.
    memory : int or str, optional
        The run's memory budget (bytes, or a string such as ``"8G"``; default
        ``NEARDUP_MEMORY``, else half the available memory): it chooses the staged run for
        large file inputs, and a staged run's shard size and search task size
        (docs/guides/memory.md).
    collect : bool, default True
        False: a staged run returns only an object with its ``summary()``, not a
        :class:`DedupResult` (which holds arrays of every document).
    common_shingles : float or int, optional
        Verified dedup: shingles in more than this share of the documents (a float in (0, 1))
        or this many documents (an int >= 2) take no part in the candidates or the
        verification: templates and boilerplate (headers, footers, licences) no longer make
        distinct pages near-duplicates. The Jaccard is then that of what is left of each set,
        exactly; a document whose shingles are all common is kept (``result.common``).
        Default: every shingle counts. Without it, a run whose largest clusters look like
        pages sharing a template says so (``result.template``, the summary's
        ``template_hint``).
    candidates : {"prefix", "bands", "fingerprint"} or Bands, optional
        Verified dedup: where the candidate pairs that are verified come from. ``"prefix"``:
        documents that share one of their rarest shingles (prefix filtering,
        :mod:`neardup.core.prefix`): every pair at the threshold is found, so the decisions are
        those of the rule over all pairs, and pages that share only a template are not
        candidates, so a templated site costs what distinct pages cost. ``"fingerprint"``:
        documents whose set fingerprints differ in at most ``distance`` bits, a search that
        finds nearly every pair at the threshold (and the only one on a GPU). ``"bands"`` or
        ``Bands(bands=B, rows=R)``: documents that share one of ``B`` MinHash bands of ``R``
        rows (:mod:`neardup.core.bands`; chosen from the threshold unless given: a pair at
        the threshold is a candidate with probability 0.999), what MinHash-LSH dedups use;
        pages that share a template are candidates of each other at the rate of its S-curve
        (0.3 at Jaccard 0.53 with the 30 x 7 of threshold 0.8). Default:
        ``"prefix"``, or ``"fingerprint"`` when ``verify=False`` or ``distance``, ``blocks`` or
        ``device="cuda"`` is given (:func:`neardup.pipeline.plan.resolve_candidates`).

    Returns
    -------
    DedupResult
        ``kept``/``dropped`` masks, ``kept_ids``, ``labels``, ``clusters`` (pyarrow Table),
        ``fingerprints``, ``summary()``.

    Raises
    ------
    InputError
        Bad input (file and record named) unless ``skip_bad``.

    Examples
    --------
    >>> docs = ["the cat sat on the mat today", "The cat sat on the mat today!", "dogs bark"]
    >>> r = dedup(docs)
    >>> r.kept.tolist(), r.labels.tolist()
    ([True, False, True], [0, 0, 2])
    >>> float(r.jaccard[1])
    1.0
    """
    _refuse_early(executor, data, device, work_dir)
    with (
        spooled(_paths(data), temp_dir) as piped,  # pipes, /dev/stdin: to files read twice
        open_executor(executor, client, threads, temp_dir) as ex,
    ):
        opts = _Options(threads, client, ex, device, temp_dir, progress, stage_progress, log,
                        _bad(on_bad, skip_bad), extra_outputs)  # fmt: skip
        plan = build_plan(
            data, threshold=threshold, verify=verify, distance=distance, keep=keep,
            blocks=blocks, fingerprinter=fingerprinter, preset=preset, text_field=text_field,
            id_field=id_field, fmt=fmt, skip_bad=skip_bad, output=output, clusters=clusters,
            drop_list=drop_list, json_summary=json_summary, against=against, update=update,
            shard_docs=shard_docs, work_dir=work_dir, clean_work_dir=clean_work_dir,
            memory=memory, removed=removed, device=device, common_shingles=common_shingles,
            candidates=candidates, temp_dir=temp_dir, **_where(ex),
        )  # fmt: skip
        if plan.staged:
            return _staged(plan, opts, collect)
        return _one_process(plan, data, opts, piped)


def _bad(on_bad: OnBad | None, skip_bad: bool) -> OnBad | None:
    """What a bad record is given to: ``on_bad`` (else nothing) when skipped, else None (an
    error)."""
    return (on_bad or _ignore) if skip_bad else None


def _staged(plan: DedupPlan, opts: _Options, collect: bool) -> Any:
    """The run as stages over shards, on its executor (this process's threads, a Dask
    cluster, Ray)."""
    check_search_device(opts.device, opts.client)
    reads = any(getattr(e, "reads_parts", False) for e in opts.extra_outputs)
    plan = replace(plan, near_misses=plan.verify and _near(opts.extra_outputs),
                   cluster_parts=reads)  # fmt: skip
    run, result = run_staged(plan, executor=opts.executor, progress=opts.stage_progress,
                             on_bad=opts.on_bad, log=opts.log, collect=collect,
                             extra_outputs=opts.extra_outputs)  # fmt: skip
    return result if collect else StagedSummary(staged_summary(plan, run))


class StagedSummary:
    """What :func:`dedup` gives for a staged run with ``collect=False``: its summary only (no
    array of every document)."""

    def __init__(self, summary: dict[str, Any]) -> None:
        self._summary = summary

    def summary(self) -> dict[str, Any]:
        """The run's summary (:func:`neardup.pipeline.staged_result.summary`)."""
        return self._summary


@dataclass
class _Options:
    """How a run goes, beside its plan."""

    threads: int | None
    client: Any
    executor: Any  #: what runs a staged run's tasks
    device: str
    temp_dir: Any
    progress: Callable[[str, int], None] | None
    stage_progress: Any
    log: Callable[[str], None] | None
    on_bad: OnBad | None
    extra_outputs: Sequence[ExtraOutput]


@dataclass
class _Run:
    """The one-process run's state from one step to the next."""

    outputs: OutputSet
    files: list[Any] | None
    index: Any
    spool: ShingleSpool | None
    seconds: dict[str, float] = field(default_factory=dict)
    ids: list[Any] = field(default_factory=list)
    fps: Any = None
    lens: Any = None
    skipped: int = 0
    scan: Scan | None = None
    pos: np.ndarray | None = None
    sets: ShingleSets | None = None
    named_ids: list[Any] | None = None
    checked: Any = None
    sketches: Any = None
    exclude: np.ndarray | None = None
    already_seen: Any = None
    new: np.ndarray | None = None


def _paths(data: Any) -> list[str]:
    if not is_paths(data):
        return []
    return [os.fspath(q) for q in ([data] if isinstance(data, (str, os.PathLike)) else data)]


def _where(executor: Any) -> dict[str, Any]:
    """What the plan is told of where its work runs: the tasks at once in one process and in
    all, and whether a cluster runs them (Dask: also the one-process run's search; Ray:
    staged work only)."""
    name = executor.name
    return dict(parallel=executor.parallel, slots=executor.slots, client=name == "dask",
                staged_only=name not in ("local", "dask"))  # fmt: skip


def _refuse_early(executor: Any, data: Any, device: str, work_dir: Any) -> None:
    """Before anything starts: a ``work_dir`` URL that cannot hold one; an executor other than this process's
    threads (Ray), which runs staged work only, on in-memory data or with ``device="cuda"``."""
    check_work_dir(work_dir)
    name = executor if isinstance(executor, str) or executor is None else executor.name
    if name in (None, "local", "dask"):
        return
    if not is_paths(data):
        raise ValueError(f"executor={name!r} runs a staged dedup, over files (paths): "
                         "in-memory data runs in this process, without executor=")  # fmt: skip
    if device == "cuda":
        raise ValueError(f"device='cuda' does not run on executor={name!r} yet (its tasks ask "
                         "for CPUs): use device='cpu', or Dask (client=, --workers)")  # fmt: skip


def _one_process(plan: DedupPlan, data: Any, opts: _Options, piped: Any) -> DedupResult:
    """The run in this process: scan -> seen (an index) -> decide -> write -> update."""
    with contextlib.ExitStack() as stack:
        run = _open_run(stack, plan, data, opts)
        announce(dedup_groups(run.files, plan.verify, run.index is not None, plan.candidates),
                 opts.log)  # fmt: skip
        _read(run, plan, data, opts)
        if run.index is not None:
            _check_against(run, plan, opts)
        result = _decide(run, plan, opts)
        if result.verified is not None:
            result.temp_bytes += piped.nbytes
        _write_and_commit(run, plan, opts, result)
    return result


def _open_run(stack: contextlib.ExitStack, plan: DedupPlan, data: Any, opts: _Options) -> _Run:
    """Every output checked before any work starts (all committed together at the end), the
    index opened, the shingle spool made."""
    from neardup.pipeline.against import open_against

    outputs = stack.enter_context(OutputSet())
    files = None
    if is_paths(data):
        files = list(plan.files)
        outputs.add_inputs(_paths(data))
        outputs.add_inputs(f.path for f in files)
    index = None
    if plan.against is not None:
        index = open_against(stack, outputs, plan.against, plan.update, plan.verify)
    register_outputs(outputs, files or [], plan.output, plan.clusters, plan.drop_list,
                     plan.json_summary, plan.removed)  # fmt: skip
    for extra in opts.extra_outputs:
        extra.register(outputs)
    spool = stack.enter_context(ShingleSpool(opts.temp_dir)) if plan.verify else None
    return _Run(outputs, files, index, spool)


def _read(run: _Run, plan: DedupPlan, data: Any, opts: _Options) -> None:
    """Read and fingerprint every document (shingle keys to the spool)."""
    t0 = time.perf_counter()
    progress = opts.progress
    given_ids = None
    if run.files is not None:
        with holding(_HOLDING_SCAN, _FIX_SCAN):
            scan = run.scan = scan_files(
                [], fmt=plan.fmt, text_field=plan.text_field, id_field=plan.id_field,
                fingerprinter=plan.fingerprinter, threads=opts.threads, on_bad=opts.on_bad,
                progress=(lambda n: progress("read", n)) if progress else None,
                files=run.files, spool=run.spool, key_field=plan.key_field,
            )  # fmt: skip
        run.ids, run.fps, run.lens = scan.ids, scan.fingerprints, scan.lengths
        run.skipped = scan.skipped
    else:
        texts, given_ids = texts_and_ids(data, plan.text_field, plan.id_field)
        fps, lens, pos, skipped = fingerprint_texts(texts, plan.fingerprinter, opts.threads,
                                                    opts.on_bad, run.spool)  # fmt: skip
        ids = pos.tolist() if given_ids is None else [given_ids[i] for i in pos.tolist()]
        if given_ids is not None:
            read_pos = pos
            ids, fps, lens, pos, dup_skipped = unique_ids(ids, pos, fps, lens, opts.on_bad)
            skipped += dup_skipped
            if run.spool is not None and dup_skipped:
                run.sets = subset_sets(run.spool.sets(), np.isin(read_pos, pos))
        run.ids, run.fps, run.lens, run.pos, run.skipped = ids, fps, lens, pos, skipped
    run.seconds["read+fingerprint"] = time.perf_counter() - t0
    # ids that name documents (not positions in a list): an entry with one is that document
    run.named_ids = run.ids if run.files is not None or given_ids is not None else None


def _check_against(run: _Run, plan: DedupPlan, opts: _Options) -> None:
    """The documents the index has seen: dropped (with sketches: and no part in the input's
    own decisions)."""
    from neardup.pipeline.against import check_index, sketch_words

    t0 = time.perf_counter()
    index = run.index
    words = sketch_words(index)
    if words is not None:
        assert run.spool is not None
        if run.sets is None:
            run.sets = run.spool.sets()
        run.sketches = set_sketches(run.sets, words, threads=opts.threads)
        run.checked = check_index(
            index, run.fps, plan.distance, sketches=run.sketches, threshold=plan.threshold,
            client=opts.client, threads=opts.threads, ids=run.named_ids, device=opts.device,
        )  # fmt: skip
        run.exclude = run.checked.found  # decided here: no part in the batch's decisions
    else:
        run.checked = check_index(index, run.fps, plan.fingerprint_distance, client=opts.client,
                                  threads=opts.threads, ids=run.named_ids,
                                  device=opts.device)  # fmt: skip
    run.already_seen = run.checked.found
    run.seconds["against"] = time.perf_counter() - t0


def _decide(run: _Run, plan: DedupPlan, opts: _Options) -> DedupResult:
    """The search (and verification) and the decisions, as a result."""
    wait_ahead()  # search kernels compiled in another process meanwhile (a first run)
    t0 = time.perf_counter()
    verified = None
    temp_bytes = 0
    with holding(_HOLDING_SEARCH, _FIX_SCAN):
        # the keep order's key: characters for "longest", the field's values for "max:FIELD"
        values = run.lens if plan.key_field is None else run.scan.priority  # type: ignore[union-attr]
        if run.spool is None:
            decisions = decide(
                run.fps, values, keep=plan.keep, distance=plan.fingerprint_distance,
                blocks=plan.blocks, threads=opts.threads, already_seen=run.already_seen,
                client=opts.client, device=opts.device,
            )  # fmt: skip
        else:
            verified, common, template, temp_bytes = _verified(run, plan, opts, values)
            decisions = from_kept_for(verified.kept_for, run.fps, run.already_seen)
            # the keys' pages count as resident while mapped: unmap and remove them before
            # the outputs are written, so the peak is the larger of the two phases, not both
            run.sets = None
            run.spool.close()
    took = time.perf_counter() - t0 - run.seconds.get("common shingles", 0.0)
    run.seconds["search+verify" if verified is not None else "search"] = took
    result = DedupResult(run.ids, run.fps, run.lens, decisions, run.skipped, run.seconds,
                         run.scan, positions=run.pos)  # fmt: skip
    result.against = run.checked
    if verified is not None:
        result.verified, result.threshold = verified, plan.threshold
        result.temp_bytes, result.candidates = temp_bytes, plan.candidates
        result.scheme = plan.scheme
        result.common, result.template = common, template
        report_no_shingles(len(verified.kept), verified.n_no_shingles, opts.log)
    if opts.log is not None:
        n, c = len(result), result.n_clusters
        opts.log(f"{plural(n, 'document')} fingerprinted, {plural(c, 'cluster')} found")
    if run.scan is not None:
        result.bytes_in = run.scan.bytes_in
    return result


def _scheme_args(scheme: tuple[int, int] | None) -> dict[str, int]:
    """``bands=`` and ``rows=`` of :func:`~neardup.core.verify.decide_verified` for a band
    ``scheme`` (none for other candidates)."""
    return {} if scheme is None else {"bands": scheme[0], "rows": scheme[1]}


def _verified(
    run: _Run, plan: DedupPlan, opts: _Options, values: Any
) -> tuple[VerifiedDecisions, dict | None, dict | None, int]:
    """The verified decisions on the spooled sets (with ``common_shingles``: on the sets
    without the common shingles, spooled again), in the keep order of ``values``, what was
    left out or the template hint, and the bytes spooled."""
    assert run.spool is not None
    sets = run.sets if run.sets is not None else run.spool.sets()
    common = template = None
    with contextlib.ExitStack() as stack:
        used, temp_bytes = sets, run.spool.nbytes
        if plan.common_shingles is not None:
            t0 = time.perf_counter()
            spool = stack.enter_context(ShingleSpool(opts.temp_dir))
            used, common = filter_common(sets, plan.common_shingles, spool, opts.threads)
            temp_bytes += spool.nbytes
            run.seconds["common shingles"] = time.perf_counter() - t0
        verified = decide_verified_sets(
            used, values, plan.threshold, keep=plan.keep, distance=plan.distance_given,
            blocks=plan.blocks, threads=opts.threads, client=opts.client,
            exclude=run.exclude, device=opts.device, near_misses=_near(opts.extra_outputs),
            candidates=plan.candidates, scheme=plan.scheme,
        )  # fmt: skip
        if common is not None:  # documents without shingles as read; all common: beside them
            verified = replace(verified, no_shingles=sets.sizes == 0)
        else:
            template = template_hint(templates(sets, verified.kept_for))
    return verified, common, template, temp_bytes


def _near(extra_outputs: Sequence[ExtraOutput]) -> bool:
    """Whether an extra output (the report) asks for the kept documents' nearest misses."""
    return any(getattr(e, "near_misses", False) for e in extra_outputs)


def _write_and_commit(run: _Run, plan: DedupPlan, opts: _Options, result: DedupResult) -> None:
    """Stage every output and commit them together (with ``update``: and the index)."""
    from neardup.pipeline.against import add_survivors, check_survivors, commit_with_update

    index, update = run.index, plan.update
    if index is not None and update:  # those the index holds as themselves stay as they are
        kept, own = result.decisions.kept, run.checked.own
        run.new = kept if own is None else kept & ~own
        check_survivors(index, run.ids, run.fps, run.new, run.scan)
    t0 = time.perf_counter()
    _write_outputs(result, run.scan, plan.output, plan.clusters, plan.drop_list,
                   opts.extra_outputs, run.outputs, opts.progress, opts.threads)  # fmt: skip
    if plan.removed is not None:  # the dropped records, as the kept ones are written
        assert run.scan is not None
        write_kept(run.scan, result.dropped, plan.removed, outputs=run.outputs,
                   threads=opts.threads)  # fmt: skip
    wrote = plan.output is not None or plan.clusters is not None or plan.drop_list is not None
    wrote = wrote or plan.removed is not None
    if wrote or update or opts.extra_outputs:
        run.seconds["write"] = time.perf_counter() - t0
    if plan.json_summary is not None:
        write_summary(result.summary(), plan.json_summary, outputs=run.outputs)
    if index is None or not update:
        run.outputs.commit()
        return
    # the index learns the survivors once their outputs exist, or neither changes
    added: list[int] = []
    commit_with_update(run.outputs, index, lambda: added.append(
        add_survivors(index, run.ids, run.fps, run.new, run.sketches)))  # fmt: skip
    run.seconds["write"] = time.perf_counter() - t0
    if opts.log is not None:
        opts.log(f"added {plural(added[0], 'document')} to {index.path}")


def _write_outputs(
    result: DedupResult,
    scan: Scan | None,
    output: Any,
    clusters: Any,
    drop_list: Any,
    extra_outputs: Sequence[ExtraOutput],
    outputs: OutputSet,
    progress: Callable[[str, int], None] | None,
    threads: int | None,
) -> None:
    """Stage the kept records, clusters, drop list and extra outputs of ``result``."""
    if output is not None:
        assert scan is not None
        result.bytes_out = write_kept(
            scan,
            result.kept,
            output,
            (lambda n: progress("write", n)) if progress else None,
            outputs=outputs,
            threads=threads,
        )
    if clusters is not None:
        write_clusters(result, clusters, outputs=outputs)
    if drop_list is not None:
        write_drop_list(result, drop_list, outputs=outputs)
    for extra in extra_outputs:
        extra.write(result, outputs)

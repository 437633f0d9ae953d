"""The dedup job, one orchestration for :func:`neardup.dedup` and ``neardup dedup``: every
input (files, or in-memory data cut into shards by position) runs the stages of one plan
(:mod:`neardup.pipeline.staged`): scan -> seen (an index of earlier dumps) -> decide -> write
-> update the index."""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from neardup.core.bands import Bands
from neardup.core.bits import as_fingerprints
from neardup.core.decide import (
    DEFAULT_DEDUP_DISTANCE,
    DEFAULT_DEDUP_THRESHOLD,
    Decisions,
)
from neardup.core.decide import decide as decide_on_arrays
from neardup.core.search import find_all
from neardup.errors import InputError
from neardup.io.files import spooled
from neardup.io.rows import MemoryRows
from neardup.io.sources import is_paths
from neardup.pipeline.ahead import announce, dedup_groups
from neardup.pipeline.executors import open_executor
from neardup.pipeline.extra import ExtraOutput
from neardup.pipeline.plan import DedupPlan, build_plan
from neardup.pipeline.result import DedupResult
from neardup.pipeline.stage_search import check_search_device
from neardup.pipeline.staged import run_staged
from neardup.pipeline.staged_result import summary as staged_summary
from neardup.pipeline.workdir import check_work_dir

__all__ = ["decide", "dedup"]

OnBad = Callable[[InputError], None]


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
        Parquet, a directory or glob of text files (cut into shards: byte ranges of large
        JSONL and line files, whole files otherwise). Anything else is in-memory text (cut
        into shards by position, :mod:`neardup.io.rows`; a one-shot iterable is read into a
        list first): a pyarrow
        Table or pandas DataFrame (column ``text_field``, ids from ``id_field`` when present,
        else positions / the DataFrame index), a pyarrow Array, pandas Series, numpy array or
        any iterable of ``str``, or a Hugging Face ``Dataset``/``DatasetDict`` (column
        ``text_field``; a DatasetDict across its splits). ``result.filter(data)`` gives the
        input without its dropped documents. Paths may be compressed or fsspec URLs.
    threshold : float, default 0.8
        Verified dedup: a document is dropped only when the exact Jaccard of its shingle set
        with an already kept document's is ``>= threshold`` (0 < threshold <= 1). The candidates
        compared come from ``candidates``. Documents in keep-priority order; a drop is never
        chained through a dropped document; documents without shingles are always kept. The
        shingle keys are spilled to the run's work directory (4 bytes per distinct shingle, in
        ``temp_dir``), removed when the job ends.
    verify : bool, default True
        False: fingerprint-only decisions, faster and without shingle keys: documents in
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
    log : callable, optional
        Called with one-line messages about the stages (for a command line's stderr).
    against : path or neardup.Index, optional
        An index of documents seen before: documents within ``distance`` bits (default 6) of
        anything in it are dropped (incremental dedup, one dump at a time). The index holds no
        shingle sets: these drops are by fingerprint distance only, not Jaccard-verified. With
        ``client`` ``against`` may also be Parquet files (paths or globs ending in
        ``.parquet``, columns ``fingerprint`` and ``id``), checked in one batch query on the
        cluster; so is an open index (an object, not a path) on a cluster.
    update : bool
        With ``against``: add the kept documents to the index, once the outputs are in place;
        if that fails the outputs are put back (their ids are checked against the index before
        anything is written). A document the index already holds as itself (same id, same
        fingerprint) is kept and not added again, and the index's entries of this input take
        no part in the check against it: a rerun on the same data writes the same outputs and
        changes nothing, and a rerun after a partial update completes it.
    client : distributed.Client, optional
        Run the stages' tasks on this Dask cluster (the same decisions and outputs).
    executor : {"local", "ray"} or executor object, optional
        What runs the stages' tasks, instead of ``client``: ``"local"`` (the default),
        threads of this process; ``"ray"``, Ray (``pip install "neardup[ray]"``): the cluster
        this process is connected to (``ray.init(address="auto")`` first), else a local Ray of
        ``threads`` CPUs (default: all) started for the run and shut down at its end, its
        session in ``temp_dir``; or an executor object
        (:class:`~neardup.distributed.ray_executor.RayExecutor`,
        :class:`~neardup.pipeline.executors.LocalExecutor`). On Ray the outputs are the
        same; its workers must reach the inputs, the outputs' and the work directory
        (``work_dir``, or the temporary one in ``TMPDIR``) at the same paths (in-memory data
        travels with the scan tasks); ``device="cuda"`` is refused. See
        docs/guides/cluster.md.
    extra_outputs : sequence of ExtraOutput
        Further outputs of the run (:mod:`neardup.pipeline.extra`: the command line's saved
        dataset and ``--report``), checked with the others before any work, written in order
        after the kept documents, clusters and drop list (before the JSON summary) and
        committed with them. One with a true ``near_misses`` attribute (the report) has a
        verified run find each kept document's nearest miss (``result.verified.near_for``).
    device : {"cpu", "cuda", "auto"}
        Where the candidate search runs (verified or not), as in :func:`neardup.find_all`:
        the same pairs, so the same decisions. Each search task resolves it where it runs:
        ``"cuda"`` needs a usable GPU on every worker (checked before any work), ``"auto"``
        uses a worker's GPU when it has one.
    temp_dir : path, optional
        Where a run keeps its temporary work directory (the stages' files, the shingle keys
        among them); default: the system temporary directory, ``TMPDIR`` (a small run's: the
        memory file system, :func:`neardup.pipeline.plan.memory_work_dir`). A directory that
        fills up is named in the error.
    shard_docs : int, optional
        Every run goes as stages over shards (:mod:`neardup.pipeline.staged`): with this, of
        about this many documents, with the candidate, component and decide stages. Without it, a
        run whose documents fit in ``memory`` (about 350 bytes each) cuts about two shards per
        thread (:func:`neardup.pipeline.plan.spread`) and decides every document in one task
        (``decide-all``, the whole corpus's candidates and rule at once); a larger one takes
        the shard size from ``memory`` (:func:`neardup.pipeline.plan.sizes_for`), and, on a
        ``client``, from its workers too. The outputs are the same, byte for byte, for every
        shard size, thread count and executor. ``extra_outputs`` (the report) are written
        from a result of the whole run, which holds arrays of every document.
    work_dir : path, optional
        File input: keep each finished task's results in this directory, so that running the
        same call again after a crash or Ctrl-C resumes it (a different run is refused). A
        path of a file system (local, or shared by a cluster's workers), or a prefix of object
        storage (``"s3://bucket/work"``, any fsspec URL; see the cluster guide). Default: a
        temporary directory, removed at the end.
    clean_work_dir : bool, default False
        With ``work_dir``: remove it once the outputs are committed (the files the run wrote
        there; the directory itself unless it holds anything else). Kept after a failure.
    stage_progress : callable, optional
        ``stage_progress(stage, tasks done, tasks)``.
    memory : int or str, optional
        The run's memory budget (bytes, or a string such as ``"8G"``; default
        ``NEARDUP_MEMORY``, else half the available memory): whether one task decides every
        document (``decide-all``), the shard size and the search task size
        (docs/guides/memory.md).
    collect : bool, default True
        False: the result holds the run's summary and its counts, but no array of every
        document (``kept``, ``ids``, ``clusters``, ... raise
        :class:`~neardup.errors.NotCollectedError`), so that memory stays bounded
        however large the input; the outputs hold the decisions.
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
        ``fingerprints``, ``summary()``; with ``collect=False`` the summary and counts only.

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
    _refuse_early(executor, device, work_dir)
    in_memory = None if is_paths(data) else MemoryRows(data, text_field, id_field)
    with (
        spooled(_paths(data), temp_dir),  # pipes, /dev/stdin: to files read twice
        open_executor(executor, client, threads, temp_dir) as ex,
    ):
        opts = _Options(client, ex, device, stage_progress, log, _bad(on_bad, skip_bad),
                        extra_outputs)  # fmt: skip
        plan = build_plan(
            data if in_memory is None else in_memory, threshold=threshold, verify=verify,
            distance=distance, keep=keep, blocks=blocks, fingerprinter=fingerprinter,
            preset=preset, text_field=text_field,
            id_field=id_field, fmt=fmt, skip_bad=skip_bad, output=output, clusters=clusters,
            drop_list=drop_list, json_summary=json_summary, against=against, update=update,
            shard_docs=shard_docs, work_dir=work_dir, clean_work_dir=clean_work_dir,
            memory=memory, removed=removed, device=device, common_shingles=common_shingles,
            candidates=candidates, temp_dir=temp_dir, **_where(ex),
        )  # fmt: skip
        return _staged(plan, opts, collect, in_memory)


def _bad(on_bad: OnBad | None, skip_bad: bool) -> OnBad | None:
    """What a bad record is given to: ``on_bad`` (else nothing) when skipped, else None (an
    error)."""
    return (on_bad or _ignore) if skip_bad else None


def _staged(plan: DedupPlan, opts: _Options, collect: bool, memory: MemoryRows | None) -> Any:
    """The run as stages over shards, on its executor (this process's threads, a Dask
    cluster, Ray); ``memory``: the in-memory input of a plan of rows."""
    check_search_device(opts.device, opts.client)
    announce(dedup_groups(list(plan.files) or None, plan.verify, plan.against is not None,
                          plan.candidates), opts.log)  # fmt: skip
    reads = any(getattr(e, "reads_parts", False) for e in opts.extra_outputs)
    plan = replace(plan, near_misses=plan.verify and _near(opts.extra_outputs),
                   cluster_parts=reads)  # fmt: skip
    run, result = run_staged(plan, executor=opts.executor, progress=opts.stage_progress,
                             on_bad=opts.on_bad, log=opts.log, collect=collect,
                             extra_outputs=opts.extra_outputs, memory=memory)  # fmt: skip
    if result is None:
        return DedupResult.summary_only(staged_summary(plan, run))
    result.run_summary = staged_summary(plan, run)
    return result


@dataclass
class _Options:
    """How a run goes, beside its plan."""

    client: Any
    executor: Any  #: what runs the run's tasks
    device: str
    stage_progress: Any
    log: Callable[[str], None] | None
    on_bad: OnBad | None
    extra_outputs: Sequence[ExtraOutput]


def _paths(data: Any) -> list[str]:
    if not is_paths(data):
        return []
    return [os.fspath(q) for q in ([data] if isinstance(data, (str, os.PathLike)) else data)]


def _where(executor: Any) -> dict[str, Any]:
    """What the plan is told of where its work runs: the tasks at once in one process and in
    all, and whether a cluster runs them (Dask, or another executor: Ray)."""
    name = executor.name
    return dict(parallel=executor.parallel, slots=executor.slots, client=name == "dask",
                staged_only=name not in ("local", "dask"))  # fmt: skip


def _refuse_early(executor: Any, device: str, work_dir: Any) -> None:
    """Before anything starts: a ``work_dir`` URL that cannot hold one; an executor other than
    this process's threads and Dask (Ray) with ``device="cuda"``."""
    check_work_dir(work_dir)
    name = executor if isinstance(executor, str) or executor is None else executor.name
    if name in (None, "local", "dask"):
        return
    if device == "cuda":
        raise ValueError(f"device='cuda' does not run on executor={name!r} yet (its tasks ask "
                         "for CPUs): use device='cpu', or Dask (client=, --workers)")  # fmt: skip


def _near(extra_outputs: Sequence[ExtraOutput]) -> bool:
    """Whether an extra output (the report) asks for the kept documents' nearest misses."""
    return any(getattr(e, "near_misses", False) for e in extra_outputs)

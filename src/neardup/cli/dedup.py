"""``neardup dedup``: documents in, documents without their near-duplicates out."""

from __future__ import annotations

import contextlib
import time
from typing import Any, NamedTuple

import click

from neardup._optional import require
from neardup.cli.common import dask_options, device_option
from neardup.cli.fingerprint import (
    fingerprint_options,
    input_options,
    make_fingerprinter,
    resolve_input,
)
from neardup.cli.progress import Progress, TaskProgress, progress_option
from neardup.cli.report import report_option
from neardup.cli.style import announce_compile, plural, saved, size
from neardup.core.bands import MAX_BANDS, MAX_ROWS, Bands
from neardup.core.common import check_common
from neardup.core.decide import DEFAULT_DEDUP_DISTANCE, DEFAULT_DEDUP_THRESHOLD, keep_field
from neardup.core.verify import distance_for_threshold
from neardup.io.files import spooled
from neardup.io.formats import display_name
from neardup.io.hf import is_saved_dataset, load_saved_dataset
from neardup.io.sources import InputPath, expand_inputs
from neardup.io.writers import OutputSet
from neardup.pipeline.ahead import ahead_groups, compile_ahead, dedup_groups
from neardup.pipeline.plan import DEFAULT_SHARD_DOCS, resolve_candidates, resolve_scheme
from neardup.pipeline.plan import search_distance as plan_distance
from neardup.pipeline.result import family_note
from neardup.pipeline.workdir import check_work_dir

PROG = "neardup dedup"


def _summary_lines(
    s: dict[str, Any], written: list[str] = (), cluster: tuple[str, float] | None = None
) -> list[str]:
    """The summary on stderr: ``written``, the outputs' names; ``cluster``, where the run's
    work ran (Dask, Ray) and the seconds its cluster took to start (counted in the time)."""
    sec = s["seconds"]
    docs = s["documents"]
    pct = 100.0 * s["dropped"] / docs if docs else 0.0
    lines = [
        f"documents read   {docs:,}"
        + (f" ({plural(s['skipped'], 'bad record')} skipped)" if s["skipped"] else ""),
        f"clusters         {s['clusters']:,} (of 2 or more near-duplicates)",
        f"dropped          {s['dropped']:,} ({pct:.1f}%), kept {s['kept']:,}",
    ]
    against = s.get("against")
    if s["verified"]:
        within = " within the input" if against else ""
        lines.append(
            f"verified         every drop{within} Jaccard >= {s['threshold']:g}; "
            f"{plural(s['no_shingles'], 'document')} without shingles kept; "
            f"{size(s['temp_bytes'])} temporary "
            + ("memory" if s.get("temp_in_memory") else "disk")
        )
    lines += _common_lines(s)
    if (note := family_note(s)) is not None:
        lines.append(f"largest family   {note}")
    if against:
        if against["verified"] == "sketch":
            how = (
                f"Jaccard >= {s['threshold']:g} estimated from its sketches, candidates within "
                f"{against['distance']} bits"
            )
        else:
            how = (
                f"within {against['distance']} bits; not Jaccard-verified (the index keeps no "
                "sketches)"
            )
        own = against.get("already_in_index", 0)
        lines.append(
            f"against index    {plural(against['dropped'], 'document')} dropped as seen in "
            f"{against['index']}: {how}"
            + (f"; {own:,} already in it as themselves (same id and fingerprint)" if own else "")
        )
    if "bytes_in" in s:
        lines.append(
            f"bytes            {size(s['bytes_in'])} in, {size(s['bytes_out'])} out, "
            f"{saved(s['bytes_in'], s['bytes_out'])}"
        )
    lines += _staged_lines(s)
    stages = ", ".join(f"{k} {v:.2f} s" for k, v in sec.items() if k != "total")
    total, rate = sec["total"], s["documents_per_second"]
    if cluster is not None:  # the cluster's start-up is part of what the run took
        stages = f"{cluster[0]} start-up {cluster[1]:.2f} s, {stages}"
        total += cluster[1]
        rate = round(docs / total) if total > 0 and rate is not None else None
    lines.append(
        f"time             {total:.2f} s ({stages})" + (f", {rate:,} documents/s" if rate else "")
    )
    if written:
        lines.append(f"written          {', '.join(written)}")
    return lines


def _staged_lines(s: dict[str, Any]) -> list[str]:
    """A staged run's lines of the summary: its shards and where they ran, the tasks it
    reused (a run resumed: its rate is not shown) and its work directory, when given."""
    if "shards" not in s:
        return []
    executor = s.get("executor")
    where = (plural(s["workers"], "Dask worker") if executor == "dask"
             else f"Ray ({plural(s['workers'], 'CPU')})" if executor == "ray"
             else plural(s.get("threads", 1), "thread"))  # fmt: skip
    lines = [
        f"shards           {s['shards']:,} of about {plural(s['shard_docs'], 'document')}, on {where}"
    ]
    stages = s.get("stages", {})
    reused = sum(v["reused"] for v in stages.values())
    if s.get("resumed"):
        tasks = sum(v["tasks"] for v in stages.values())
        full = [k for k, v in stages.items() if v["reused"] == v["tasks"]]
        part = [f"{k} {v['reused']}/{v['tasks']}" for k, v in stages.items()
                if 0 < v["reused"] < v["tasks"]]  # fmt: skip
        which = "; ".join(([f"all of {', '.join(full)}"] if full else []) + part)
        lines.append(f"resumed          reused all {plural(tasks, 'task')}" if reused == tasks
                     else f"resumed          reused {reused:,} of {plural(tasks, 'task')} "
                     f"({which}); ran the other {tasks - reused:,}")  # fmt: skip
    work = s.get("work_dir")
    if work is None:
        return lines
    if work["removed"]:
        lines.append(f"work dir         {work['path']} removed (--clean-work-dir)")
    elif work.get("left"):
        lines.append(f"work dir         {work['path']}: neardup's files removed, the directory "
                     f"kept for what else it holds ({', '.join(work['left'][:3])})")  # fmt: skip
    else:
        lines.append(f"work dir         {work['path']} kept ({size(work['bytes'])}): the same "
                     "command reuses it; remove it when done, or add --clean-work-dir")  # fmt: skip
    return lines


def _common_lines(s: dict[str, Any]) -> list[str]:
    """The summary's lines about common shingles: what ``--common-shingles`` left out, or the
    hint that the largest clusters look like pages sharing a template."""
    common, hint = s.get("common_shingles"), s.get("template_hint")
    if common is not None:
        return [
            f"common shingles  {plural(common['keys'], 'shingle')} in more than "
            f"{common['limit']:,} documents left out; "
            f"{plural(common['all_common'], 'document')} with only common shingles kept"
        ]
    if hint is None:
        return []
    return [
        f"hint             {plural(hint['clusters'], 'large cluster')} (the largest "
        f"{hint['largest']:,} documents) look like pages sharing a template: "
        f"{100 * hint['share']:.0f}% of the other documents hold their shared shingles; "
        f"--common-shingles {hint['suggest']:g} leaves such shingles out "
        "(docs/guides/threshold.md#templates-and-boilerplate)"
    ]


class CommonShingles(click.ParamType):
    """``--common-shingles``: a share in (0, 1) or a count >= 2."""

    name = "F"

    def convert(self, value: Any, param: Any, ctx: Any) -> float | int:
        text = str(value).strip()
        try:
            number = int(text) if text.isdigit() else float(text)
            return check_common(number)
        except ValueError:
            self.fail(
                f"{value!r} is neither a share in (0, 1) (0.05: shingles in more than 5% of "
                "the documents) nor a count >= 2 (1000: in more than 1,000 documents)",
                param,
                ctx,
            )


def _band_option(candidates: str | None, bands: int | None, rows: int | None,
                 threshold: float) -> tuple[str | None, tuple[int, int] | None]:  # fmt: skip
    """``--candidates`` with ``--bands`` and ``--rows``, which imply ``bands``, and the scheme
    of band candidates at ``threshold`` (None for others)."""
    if (bands is not None or rows is not None) and candidates not in (None, "bands"):
        raise click.UsageError(
            f"--bands and --rows set the scheme of --candidates bands, not of --candidates "
            f"{candidates}: drop one of them"
        )
    if bands is not None or rows is not None:
        candidates = "bands"
    scheme = resolve_scheme(Bands(bands, rows) if candidates == "bands" else None, threshold)
    return candidates, scheme


def _check_verified_only(no_verify: bool, common: float | int | None,
                         candidates: str | None) -> None:  # fmt: skip
    """Options of a verified run, refused with ``--no-verify``."""
    if no_verify and common is not None:
        raise click.UsageError(
            "--common-shingles leaves shingles out of the verified comparison; it does "
            "nothing with --no-verify: drop one of them"
        )
    if no_verify and candidates not in (None, "fingerprint"):  # --bands and --rows: "bands"
        raise click.UsageError(
            f"--candidates {candidates} finds candidates in the shingle sets of a verified "
            "run; with --no-verify the fingerprints decide: drop one of them"
        )


@click.command("dedup", short_help="Remove near-duplicate documents.")
@click.argument("inputs", nargs=-1, required=True, metavar="INPUT...")
@click.option(
    "-o",
    "--output",
    required=True,
    help="Kept documents, in the input's format: JSONL/lines -> a file ('-' stdout) or, ending "
    "in '/', a directory of one file per shard; Parquet -> a Parquet file; text files -> a "
    "directory.",
)
@click.option(
    "--clusters",
    "clusters_path",
    default=None,
    help="Write each cluster (a kept document and those dropped for it) as a JSON line: kept id, "
    "size, member ids, each member's distance (bits) and Jaccard (jaccards) to the kept one.",
)
@click.option("--drop-list", default=None, help="Write the ids removed, one per line.")
@click.option(
    "--removed",
    default=None,
    metavar="PATH",
    help="Write the removed records, untouched, in input order and the input's format (as "
    "--output writes the kept ones): kept and removed together are the input's records.",
)
@report_option
@click.option(
    "--keep",
    default="first",
    show_default=True,
    callback=lambda ctx, param, value: _check_keep(value),
    help="Which near-duplicate is kept: 'first' in input order, 'longest' text, or the highest "
    "('max:FIELD') or lowest ('min:FIELD') value of a JSONL field or Parquet column, all "
    "numbers or all ISO-8601 dates (ties: first).",
)
@click.option(
    "-t",
    "--threshold",
    type=click.FloatRange(0, 1, min_open=True),
    default=DEFAULT_DEDUP_THRESHOLD,
    show_default=True,
    help="Drop a document only when the exact Jaccard of its shingle set with a kept "
    "document's is >= this.",
)
@click.option(
    "--no-verify",
    is_flag=True,
    help="Fingerprint-only decisions: faster, no shingle keys kept; a document is dropped for a "
    "kept one within --distance bits (default 6), never through a chain, and nothing is "
    "checked against the texts.",
)
@click.option(
    "-d",
    "--distance",
    type=click.IntRange(0, 63),
    default=None,
    help="Largest Hamming distance (bits) between fingerprints that makes candidates "
    f"[default: the rule for --threshold, 0.8 -> {distance_for_threshold(0.8)}; "
    f"with --no-verify or against an --against index without sketches: "
    f"{DEFAULT_DEDUP_DISTANCE}].",
)
@click.option(
    "--common-shingles",
    type=CommonShingles(),
    default=None,
    help="Leave out of the candidates and the verification the shingles in more than F of "
    "the documents (F in (0, 1): a share; F >= 2: a count), such as a site's template or "
    "boilerplate, so that pages that share it are compared by their own words; a page whose "
    "shingles are all common is kept. Verified runs only. Default: every shingle counts.",
)
@click.option(
    "--candidates",
    type=click.Choice(["prefix", "bands", "fingerprint"]),
    default=None,
    help="Where the verified pairs come from: ('prefix') documents that share one of their "
    "rarest shingles: every pair at --threshold is found, and pages that share only a "
    "template are not compared; ('bands') documents that share a MinHash band (--bands, "
    "--rows), as MinHash-LSH dedups do; or documents whose set fingerprints are within "
    "--distance bits. Default: prefix, or fingerprint with --no-verify, --distance, --blocks "
    "or --device cuda.",
)
@click.option(
    "--bands",
    "n_bands",
    type=click.IntRange(1, MAX_BANDS),
    default=None,
    help="MinHash bands of --candidates bands (implies it). Default: the fewest that find a "
    "pair at --threshold with probability 0.999.",
)
@click.option(
    "--rows",
    type=click.IntRange(1, MAX_ROWS),
    default=None,
    help="MinHash rows a band (--candidates bands; implies it). Default: the most whose bands "
    "fit in 256 MinHash values a document.",
)
@click.option(
    "--blocks",
    type=click.IntRange(1, 64),
    default=None,
    help="Search blocks (> distance); default: chosen for the corpus size.",
)
@fingerprint_options
@input_options
@click.option(
    "--skip-bad",
    is_flag=True,
    help="Report malformed records, non-string texts and duplicate ids on stderr and skip them "
    "(they are not written) instead of failing.",
)
@click.option("--threads", type=click.IntRange(min=1), default=None, help="Worker threads.")
@click.option("-q", "--quiet", is_flag=True, help="No progress bars, messages or summary.")
@progress_option
@click.option(
    "--json-summary",
    default=None,
    metavar="FILE",
    help="Write the summary as one JSON object to FILE ('-' stdout).",
)
@click.option(
    "--against",
    default=None,
    metavar="INDEX",
    help="Also drop documents seen before, in this neardup index (see `neardup index`): dedup a "
    "new dump against everything seen before. An index created with `neardup index create "
    "--threshold` keeps a MinHash sketch per document: a document is dropped when its Jaccard "
    "estimated from the sketches with an entry is >= --threshold. Any other index drops "
    "documents within --distance bits (default 6) of an entry, not Jaccard-verified. A staged "
    "run checks each shard in its own task (on --scheduler/--workers: on the workers, which "
    "must reach INDEX). With --scheduler/--workers INDEX may also be Parquet files of the "
    "stored corpus (a path or glob ending in .parquet; columns 'fingerprint' and 'id'; not "
    "verified; checked in one batch query on the cluster).",
)
@click.option(
    "--update",
    is_flag=True,
    help="With --against: add the kept documents to the index, together with the outputs (if "
    "the index cannot be updated, the outputs are put back). A rerun on the same dump is "
    "safe: a document the index holds as itself (same id and fingerprint) is kept, not "
    "dropped as its own near-duplicate, and not added again.",
)
@device_option
@click.option(
    "--temp-dir",
    type=click.Path(file_okay=False),
    default=None,
    metavar="DIR",
    help="Where a verified dedup spools its shingle keys (4 bytes per distinct shingle; "
    "default: TMPDIR, else the system temporary directory).",
)
@click.option(
    "--shard-docs",
    type=click.IntRange(min=1),
    default=None,
    metavar="N",
    help="Run as stages over shards of about N documents (scan, search, verify, decide, write: "
    "each task one shard or bucket; default: from --memory, at most "
    f"{DEFAULT_SHARD_DOCS:,}). Same outputs, byte for byte, for every N; memory bounded by N.",
)
@click.option(
    "--work-dir",
    default=None,
    metavar="DIR",
    callback=lambda ctx, param, value: _check_work_dir(value),
    help="Staged run: keep each finished task's results in DIR (must be new, empty or this "
    "command's; a file system path, local or shared by a cluster's workers, or a prefix of "
    "object storage such as s3://bucket/work, any fsspec URL); running the same command again "
    "after a crash, kill or Ctrl-C resumes it. Default: a temporary directory, removed at the "
    "end.",
)
@click.option(
    "--clean-work-dir",
    is_flag=True,
    help="With --work-dir: remove DIR once the outputs are written (the files this command "
    "wrote there; DIR itself unless it holds anything else). Kept when the run fails.",
)
@click.option(
    "--memory",
    default=None,
    metavar="BYTES",
    help="Memory budget of the run (e.g. 8G; default NEARDUP_MEMORY, else half the available "
    "memory): a corpus that fits is decided in one task after the scan; it sets the shards' "
    "size (unless --shard-docs) and the search tasks' (docs/guides/memory.md).",
)
@dask_options
@click.option(
    "--ray",
    "ray_address",
    metavar="ADDRESS",
    default=None,
    help="Run the stages on Ray (pip install \"neardup[ray]\"): 'local' starts a Ray of this "
    "machine for the run (--workers N CPUs; default: all) and stops it at the end; 'auto' or "
    "an address (HOST:6379, ray://HOST:10001) joins a running cluster, whose workers must reach "
    "the inputs, outputs and --work-dir at the same paths. Not with --scheduler.",
)
def dedup(inputs: tuple[str, ...], output: str, clusters_path: str | None, drop_list: str | None,
          removed: str | None, report_path: str | None, keep: str, threshold: float,
          no_verify: bool, distance: int | None, common_shingles: float | int | None,
          candidates: str | None, n_bands: int | None, rows: int | None,
          blocks: int | None, preset: str, window: int | None, in_format: str, lines: bool,
          field: str | None, column: str | None, id_field: str, skip_bad: bool,
          threads: int | None, quiet: bool, progress_mode: str, json_summary: str | None,
          against: str | None, update: bool, device: str, temp_dir: str | None,
          shard_docs: int | None, work_dir: str | None, clean_work_dir: bool, memory: str | None,
          scheduler: str | None, workers: int | None,
          ray_address: str | None) -> None:  # fmt: skip
    """Remove near-duplicate documents.

    Reads JSONL (--text-field, --id-field), Parquet (columns of those names), text files (a
    directory, glob or list; a document per file, or per line with --lines), compressed
    (.gz, .bz2, .xz, .zst) or remote (s3://, https://, ...), or a Hugging Face dataset saved
    with save_to_disk (written back as one), and writes the kept documents untouched, in
    input order and in the input's format.

    Verified (default): documents in --keep order; one is dropped only when the exact Jaccard
    of its shingle set with an already kept document's is >= --threshold, never through a
    chain of drops. Candidates come from --candidates (prefix filtering by default); with
    --common-shingles, the shingles of more than that share of the
    documents take no part (templates, boilerplate). Shingle keys are spooled to a temporary
    file in --temp-dir or TMPDIR (4 bytes per distinct shingle), removed at the end. Documents
    without shingles are always kept.
    Against an index with sketches (`neardup index create --threshold`), a document is dropped
    when its Jaccard estimated from the sketches with an entry is >= --threshold, and takes no
    part in the decisions within the input; against any other index, documents within
    --distance bits of an entry are dropped, not Jaccard-verified.

    --no-verify: the same keep order by 64-bit simhash fingerprints alone: a document is
    dropped for the first kept document within --distance bits of it, else kept; never
    through a chain, so every dropped document is within --distance bits of the one kept.

    The input is read twice, as stages over shards (scan, then the kept records copied);
    outputs appear only when complete. A corpus that fits in --memory is decided in one task;
    a larger one, --shard-docs, --workers, --scheduler and --ray take the candidate stages:
    the same outputs.
    """
    in_format, text_field = resolve_input(in_format, lines, field, column)
    search_distance = _check_options(output, json_summary, against, update, blocks,
                                      no_verify, threshold, distance)  # fmt: skip
    cluster = _check_cluster(scheduler, workers, ray_address, device, against)
    candidates, scheme = _band_option(candidates, n_bands, rows, threshold)
    _check_verified_only(no_verify, common_shingles, candidates)
    candidates = resolve_candidates(candidates, not no_verify, distance=distance, blocks=blocks,
                                    device=device)  # fmt: skip
    # a pipe is read once, into a temporary file, first: its content tells its format
    with spooled(inputs, temp_dir):
        dataset, files = _source(inputs, in_format, output)
        if dataset is not None and removed is not None:
            raise click.UsageError("--removed needs file input (JSONL, Parquet or text files), "
                                   "not a saved dataset")  # fmt: skip
        fingerprinter = make_fingerprinter(preset, window)
        settings = {"inputs": " ".join(inputs), "distance": search_distance, "keep": keep,
                    "preset": preset, "window": fingerprinter.window}  # fmt: skip
        if not no_verify:
            settings.update(threshold=threshold, candidates=candidates)
        if common_shingles is not None:
            settings["common_shingles"] = common_shingles
        if scheme is not None and not no_verify:
            settings["bands"] = list(scheme)
        extras = _extra_outputs(inputs, output, dataset, report_path, settings, text_field,
                                id_field)  # fmt: skip
        _check_outputs(inputs, files, output, clusters_path, drop_list, json_summary, against,
                       extras, removed)  # fmt: skip
        options = dict(
            threshold=threshold, verify=not no_verify, distance=distance, keep=keep,
            blocks=blocks, fingerprinter=fingerprinter,
            text_field=text_field, id_field=id_field or None, fmt=in_format,
            output=output if dataset is None else None, clusters=clusters_path,
            drop_list=drop_list, json_summary=json_summary, skip_bad=skip_bad, threads=threads,
            against=against, update=update, extra_outputs=extras, device=device,
            temp_dir=temp_dir, shard_docs=shard_docs, work_dir=work_dir,
            clean_work_dir=clean_work_dir, memory=memory, collect=False, removed=removed,
            common_shingles=common_shingles,
            candidates=candidates if scheme is None else Bands(*scheme),
        )  # fmt: skip
        _require_extras(files, against, device, cluster)
        source = [InputPath(p) for p in inputs] if dataset is None else dataset
        summary, where = _run(source, options, files, quiet, progress_mode, cluster)
    if not quiet:
        written = [display_name(p, output=True) for p in
                   (output, removed, clusters_path, drop_list, json_summary, report_path)
                   if p]  # fmt: skip
        for line in _summary_lines(summary, written, where):
            click.echo(f"{PROG}: {line}", err=True)


def _check_keep(keep: str) -> str:
    """``--keep`` as given, or one line saying what it may be."""
    try:
        keep_field(keep)
    except ValueError:
        raise click.UsageError(
            f"--keep must be first, longest, max:FIELD or min:FIELD (got {keep!r})"
        ) from None
    return keep


def _check_work_dir(work_dir: str | None) -> str | None:
    """``--work-dir`` as given, or (a URL that cannot hold one) one line saying why."""
    check_work_dir(work_dir)
    return work_dir


def _check_options(output: str, json_summary: str | None, against: str | None, update: bool,
                   blocks: int | None, no_verify: bool, threshold: float,
                   distance: int | None) -> int:  # fmt: skip
    """The options that do not fit together, refused before any work; the search distance."""
    search_distance = plan_distance(not no_verify, threshold, distance)
    if blocks is not None and blocks <= search_distance:
        raise click.BadParameter(
            f"blocks must be > distance (got blocks={blocks}, distance={search_distance}); "
            f"use --blocks {search_distance + 1} or more",
            param_hint="--blocks",
        )
    if output == "-" and json_summary == "-":
        raise click.UsageError("--output - and --json-summary - both want stdout; pick one")
    if update and against is None:
        raise click.UsageError("--update needs --against INDEX")
    return search_distance


def _source(inputs: tuple[str, ...], in_format: str, output: str) -> tuple[Any, list[Any]]:
    """A saved dataset (save_to_disk's directory) loaded, else the input files."""
    if len(inputs) == 1 and is_saved_dataset(inputs[0]):
        if output == "-":
            raise click.UsageError("a saved dataset is written as a directory: give -o DIR")
        return load_saved_dataset(inputs[0]), []
    return None, expand_inputs([InputPath(p) for p in inputs], in_format)


def _check_outputs(inputs: tuple[str, ...], files: list[Any], output: str,
                   clusters: str | None, drop_list: str | None, json_summary: str | None,
                   against: str | None, extras: list[Any],
                   removed: str | None = None) -> None:  # fmt: skip
    """Every output checked before any work (and again by the run, which stages them all,
    the report and a saved dataset included, and commits them together at its end)."""
    from neardup.pipeline.write import register_outputs

    with OutputSet(inputs, protect=[against] if against else []) as check:
        if files:
            check.add_inputs(f.path for f in files)
        register_outputs(check, files, output if files else None, clusters, drop_list,
                         json_summary, removed if files else None)  # fmt: skip
        for extra in extras:
            extra.register(check)


def _require_extras(files: list[Any], against: str | None, device: str,
                    cluster: _Cluster) -> None:  # fmt: skip
    """The optional packages the run needs, asked for before any work and before the notice
    that kernels compile, so that a missing one is the run's only line (outputs are checked
    by :func:`_check_outputs`, the report by :func:`_extra_outputs`)."""
    from neardup.gpu import use_gpu
    from neardup.io.sources import require_readers

    require_readers(files)
    if (against or "").endswith(".parquet"):  # a stored corpus (with --scheduler/--workers)
        require("pyarrow.parquet", "parquet", "Parquet")
    if cluster.ray is not None:
        require("ray", "ray", "running on Ray (--ray)")
    elif cluster.dask:
        for module in ("dask", "distributed"):
            require(module, "dask", "running on Dask (--scheduler, --workers)")
    elif device == "cuda":  # (on Dask the workers have the GPU)
        use_gpu(device)  # cupy and a usable GPU, or one line saying what is missing


class _Cluster(NamedTuple):
    """Where the run's work goes: ``--scheduler``, ``--workers`` and ``--ray`` as given."""

    scheduler: str | None
    workers: int | None
    ray: str | None

    @property
    def dask(self) -> bool:
        return self.ray is None and (self.scheduler is not None or self.workers is not None)

    @property
    def here(self) -> bool:
        """Whether the search runs in this process (no cluster)."""
        return self.scheduler is None and self.workers is None and self.ray is None


def _check_cluster(scheduler: str | None, workers: int | None, ray: str | None, device: str,
                   against: str | None) -> _Cluster:  # fmt: skip
    """``--scheduler``, ``--workers`` and ``--ray``, refused in one line where they do not fit
    together (or with what does not run on Ray), before any work."""
    if ray is None:
        return _Cluster(scheduler, workers, ray)
    if scheduler is not None:
        raise click.UsageError("use either --ray or --scheduler (Dask), not both")
    if ray != "local" and workers is not None:
        raise click.UsageError("--workers N sets the CPUs of --ray local; a running Ray "
                               f"cluster (--ray {ray}) has its own")  # fmt: skip
    if device == "cuda":
        raise click.UsageError("--device cuda does not run on Ray yet (its tasks ask for "
                               "CPUs): use --device cpu, or Dask (--workers, --scheduler)")  # fmt: skip
    if (against or "").endswith(".parquet"):
        raise click.UsageError("Parquet files as --against are checked in batch mode on Dask "
                               "(--workers, --scheduler), not on Ray: give an index")  # fmt: skip
    return _Cluster(scheduler, workers, ray)


def _run(source: Any, options: dict[str, Any], files: list[Any], quiet: bool,
         progress_mode: str,
         cluster: _Cluster) -> tuple[dict[str, Any], tuple[str, float] | None]:  # fmt: skip
    """The run with its progress (tasks by stage) and messages; its summary, and where its cluster (Dask, Ray) was with its
    start-up."""
    from neardup.pipeline.job import dedup as run_dedup

    bar = Progress(PROG, progress_mode, quiet)
    tasks = TaskProgress(PROG, progress_mode, quiet)

    def say(message: str) -> None:
        if not quiet:
            bar.message(message)

    verify, candidates = options["verify"], options["candidates"]  # resolved by dedup()
    if isinstance(candidates, Bands):
        candidates = "bands"
    later = ahead_groups(verify, candidates)
    groups = dedup_groups(files or None, verify, options["against"] is not None, candidates)
    first = [g for g in groups if g not in later]
    with contextlib.ExitStack() as stack:
        ahead = False
        if cluster.here:  # (on a cluster the search runs elsewhere)
            ahead = stack.enter_context(compile_ahead(verify, options["threads"], candidates))
        announce_compile(PROG, first if ahead else [*first, *later], quiet,
                         **({"alongside": later} if ahead else {}))  # fmt: skip
        on, where = _open_cluster(stack, cluster, options["temp_dir"])
        stack.callback(bar.close)
        stack.callback(tasks.close)
        result = run_dedup(source, stage_progress=tasks, log=say,
                           on_bad=lambda e: say(f"skipped {e}"), **on, **options)  # fmt: skip
    return result.summary(), where


def _extra_outputs(
    inputs: tuple[str, ...],
    output: str,
    dataset: Any,
    report_path: str | None,
    settings: dict[str, Any],
    text_field: str,
    id_field: str,
) -> list[Any]:
    """The outputs beside the kept records: a saved dataset (written before the report, whose
    summary has its sizes) and the HTML report."""
    from neardup.pipeline.extra import DatasetOutput
    from neardup.pipeline.report import ReportOutput

    extras: list[Any] = []
    if report_path is not None:  # before the run, not after its outputs are written
        require("matplotlib", "report", "the HTML report")
    if dataset is not None:
        extras.append(DatasetOutput(output, dataset, inputs[0]))
    if report_path is not None:
        source = dataset if dataset is not None else [InputPath(p) for p in inputs]
        extras.append(ReportOutput(report_path, source, text_field=text_field,
                                   id_field=id_field or None, settings=settings))  # fmt: skip
    return extras


def _open_cluster(
    stack: contextlib.ExitStack, cluster: _Cluster, temp_dir: str | None
) -> tuple[dict[str, Any], tuple[str, float] | None]:
    """What runs the work (``client=`` of ``--scheduler``/``--workers``, ``executor=`` of
    ``--ray``; nothing without them), and where the run goes with the seconds the cluster
    took to start, for the summary."""
    t0 = time.perf_counter()
    if cluster.ray is not None:
        from neardup.distributed.ray_executor import RayExecutor, ray_session

        where = stack.enter_context(ray_session(cluster.ray, cluster.workers, temp_dir))
        return {"executor": RayExecutor()}, (f"on Ray ({where}):", time.perf_counter() - t0)
    if not cluster.dask:
        return {}, None
    from neardup.distributed import connect

    scheduler, workers = cluster.scheduler, cluster.workers
    client = stack.enter_context(connect(scheduler, workers))
    where = f"the cluster at {scheduler}" if scheduler else f"{plural(workers, 'worker')}"
    return {"client": client}, (f"on Dask ({where}): cluster", time.perf_counter() - t0)

"""A staged dedup's outputs made from its write tasks' parts (:mod:`neardup.pipeline.staged`):
each output staged from the shards' parts in shard order, checked against the sizes their
tasks wrote, then committed with the run's other outputs."""

from __future__ import annotations

import contextlib
import heapq
import json
import os
import shutil
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from neardup.errors import damaged, reading_back
from neardup.io import objects
from neardup.io.files import is_url, open_output_stream
from neardup.io.writers import OutputSet
from neardup.pipeline import layout, store
from neardup.pipeline import task_files as F
from neardup.pipeline.plan import DedupPlan
from neardup.pipeline.shard_write import beside_part, records_output
from neardup.pipeline.staged_run import StagedRun
from neardup.pipeline.stream import reads_in_blocks

if TYPE_CHECKING:
    from neardup.pipeline.runner import Runner

__all__ = [
    "commit_parts",
    "decoded",
    "index_clusters",
    "index_lines",
    "part_lines",
    "place_records",
    "placed_plan",
]


def index_clusters(plan: DedupPlan, run: StagedRun) -> bool:
    """Whether the clusters output gets the index's entries (a task writes them)."""
    wanted = plan.clusters is not None or plan.cluster_parts
    return run.against is not None and wanted and bool(run.against["found"])


def index_lines(work: str, parts: int) -> Iterator[bytes]:
    """The index's rows as the index-clusters tasks wrote them, merged in input order of
    their first documents (the order of the whole run's clusters)."""

    def lines(p: int) -> Iterator[tuple[bytes, int]]:
        path = layout.path(work, "index-clusters", p, "clusters.jsonl")
        first = F.load(work, "index-clusters", p, "first").tolist()
        return zip(part_lines(path, len(first)), first)  # the lines first: they are checked

    for line, _ in heapq.merge(*(lines(p) for p in range(parts)), key=lambda x: x[1]):
        yield line


def part_lines(path: str, want: int) -> Iterator[bytes]:
    """The lines of a part a task wrote, which must be the ``want`` lines it wrote (checked
    when they run out)."""
    n = 0
    with _open_part(path, None) as f:
        for n, line in enumerate(f, 1):
            if n > want:
                break
            yield line
    if n != want:
        raise damaged(path, f"{n} lines where its task wrote {want}")


def decoded(where: str, lines: Iterable[bytes]) -> Iterator[dict[str, Any]]:
    """JSON ``lines`` read back from ``where`` (a part, or the stage that wrote them)."""
    for number, line in enumerate(lines, 1):
        with reading_back(f"{where}:{number}"):
            yield json.loads(line)


def commit_parts(plan: DedupPlan, run: StagedRun, outputs: OutputSet) -> None:
    """Each output staged from the shards' parts, in shard order."""
    work, unchecked = run.work, [None] * len(run.sizes)
    for path, name in ((plan.clusters, "clusters.jsonl"), (plan.drop_list, "drop.txt")):
        if path is not None:
            with outputs.open(outputs.get(path), "wb") as f:
                _copy_parts(f, work, unchecked, name)
                if name == "clusters.jsonl" and index_clusters(plan, run):
                    # the index's entries after the input's clusters
                    for line in index_lines(work, run.index_parts):
                        f.write(line)
    if plan.output is not None:
        run.bytes_out = _commit_records(plan, run, outputs, outputs.get(plan.output), "kept")
    if plan.removed is not None:
        _commit_records(plan, run, outputs, outputs.get(plan.removed), "removed")


def _commit_records(plan: DedupPlan, run: StagedRun, outputs: OutputSet, out: Any,
                    name: str) -> int:  # fmt: skip
    """The output ``out`` staged from the shards' record parts ``name`` (``"kept"`` or
    ``"removed"``); returns its bytes."""
    sizes, rows = (run.part_bytes, run.part_rows) if name == "kept" else (
        run.removed_bytes, run.removed_rows)  # fmt: skip
    if plan.placed:  # the write tasks wrote the lines into it in place
        outputs.placed(out)
        return sum(sizes)
    if plan.kind in ("jsonl", "lines") and out.kind == "directory":
        return _place_parts(plan, run, outputs, out, f"{name}.bin", sizes)
    if plan.kind in ("jsonl", "lines"):
        with outputs.open(out, "wb") as raw:
            with open_output_stream(raw, out.path) as w:
                if plan.parts_beside is not None:
                    beside = [beside_part(plan, name, s) for s in range(len(run.sizes))]
                    written = _join(w, beside, sizes, remove=True)
                else:
                    written = _copy_parts(w, run.work, sizes, f"{name}.bin")
            if out.path != "-" and _compressed(out.path):
                written = raw.tell()
        return written
    if plan.kind == "parquet":
        return _join_parquet_parts(plan, run, outputs, out, f"{name}.parquet", sizes, rows)
    return _place_parts(plan, run, outputs, out, "files" if name == "kept" else name, sizes)


def _join_parquet_parts(plan: DedupPlan, run: StagedRun, outputs: OutputSet, out: Any,
                        name: str = "kept.parquet", sizes: Sequence[int] | None = None,
                        rows: Sequence[int] | None = None) -> int:  # fmt: skip
    """The shards' Parquet parts ``name`` (of ``sizes`` bytes and ``rows`` rows each; default
    the kept ones') as one Parquet file, a row group at a time (this process holds one), each
    row group as the part has it: the input's row groups, whatever the shards."""
    import pyarrow.parquet as pq

    from neardup.pipeline.write import parquet_schema

    schema = parquet_schema(plan.files[0].path)
    sizes = run.part_bytes if sizes is None else sizes
    rows = run.part_rows if rows is None else rows
    with outputs.open(out, "wb") as w:
        with pq.ParquetWriter(w, schema) as writer:
            for s in range(len(run.sizes)):
                path = layout.path(run.work, "write", s, name)
                with _open_part(path, sizes[s]) as f:
                    for table in _row_groups(path, f, rows[s]):
                        writer.write_table(table)
        return w.tell()


def _row_groups(path: str, f: Any, rows: int) -> Iterator[Any]:
    """The row groups of the Parquet part ``path`` (open as ``f``), which must hold the
    ``rows`` its task wrote."""
    import pyarrow.parquet as pq

    with reading_back(path):
        part = pq.ParquetFile(f)
    if part.metadata.num_rows != rows:
        raise damaged(path, f"{part.metadata.num_rows} rows where its task wrote {rows}")
    for g in range(part.num_row_groups):
        with reading_back(path):
            table = part.read_row_group(g)
        yield table


def _place_parts(
    plan: DedupPlan,
    run: StagedRun,
    outputs: OutputSet,
    out: Any,
    name: str = "kept.bin",
    sizes: Sequence[int] | None = None,
) -> int:
    """Each shard's kept records into the output directory: JSONL and line inputs as a file
    ``part-NNNNN.jsonl`` (or ``.txt``) by shard number, shards that kept nothing left out
    (their concatenation in name order is the one-file output); text inputs as the kept
    files the shard's write task copied under ``name``. Moved from a temporary work
    directory (nothing goes through this process), copied from a kept one (a later run may
    reuse its parts, so they are not shared with files the user may edit) or across file
    systems."""
    ext = ".jsonl" if plan.kind == "jsonl" else ".txt"
    sizes = run.part_bytes if sizes is None else sizes
    if out.remote is not None:
        return _put_parts(run, outputs, out, name, sizes, ext)
    total = 0
    with outputs.open_directory(out) as tmp:
        for s in range(len(run.sizes)):
            part = layout.path(run.work, "write", s, name)
            if not name.endswith(".bin"):
                moved = _move_tree(part, tmp, plan.work_dir is not None, out.path)
                if moved != sizes[s]:
                    raise damaged(part, f"{moved} bytes where its task wrote {sizes[s]}")
                total += moved
                continue
            size = sizes[s]
            _open_part(part, size).close()  # there, with the bytes its task wrote
            if size:
                _move(
                    part,
                    os.path.join(tmp, f"part-{s:05d}{ext}"),
                    plan.work_dir is not None,
                    os.path.join(out.path, f"part-{s:05d}{ext}"),
                )
                total += size
    return total


def _put_parts(run: StagedRun, outputs: OutputSet, out: Any, name: str, sizes: Sequence[int],
               ext: str) -> int:  # fmt: skip
    """Each shard's records part ``name`` (of the ``sizes`` bytes its task wrote) as the object
    ``part-NNNNN.jsonl`` (or ``.txt``) of the output directory ``out`` on object storage, put at
    commit (:mod:`neardup.io.object_outputs`); returns their bytes."""
    found = objects.sizes(f"{run.work}/write") if is_url(run.work) else None  # one listing
    total = 0
    with outputs.open_objects(out) as add:
        for s, size in enumerate(sizes):
            part = layout.path(run.work, "write", s, name)
            if found is None:
                _open_part(part, size).close()
            elif found.get(f"{s}/{name}") != size:
                there = found.get(f"{s}/{name}")
                why = "missing" if there is None else f"{there} bytes where its task wrote {size}"
                raise damaged(part, why)
            if size:
                add(f"part-{s:05d}{ext}", part)
                total += size
    return total


def _copy_parts(dest: Any, work: str, sizes: Sequence[int | None], name: str) -> int:
    """The shards' parts ``name`` end to end into ``dest``, each checked to hold the ``sizes``
    bytes its write task wrote (None: not checked); in the kernel (no copy through this
    process) where both are plain files of one file system."""
    paths = [layout.path(work, "write", s, name) for s in range(len(sizes))]
    return _join(dest, paths, sizes)


def _join(dest: Any, paths: Sequence[str], sizes: Sequence[int | None],
          remove: bool = False) -> int:  # fmt: skip
    """The files ``paths`` end to end into ``dest`` (:func:`_copy_parts`); with ``remove``
    each is removed once copied, so that the parts and the output never hold more than the
    output and one part."""
    total = 0
    for path, want in zip(paths, sizes, strict=True):
        f = _open_part(path, want)
        with f:
            size = store.file_size(f)
            if not (size and _copy_in_kernel(f, dest, size)):
                size = 0
                while chunk := f.read(1 << 22):
                    dest.write(chunk)
                    size += len(chunk)
            total += size
        if remove:
            os.remove(path)
    return total


def _open_part(path: str, want: int | None) -> Any:
    """A part a task wrote, open for reading; missing, unreadable or not of the ``want`` bytes
    its task wrote: the work directory is damaged (never taken as empty)."""
    with reading_back(path):
        f = store.open_bytes(path)
    size = store.file_size(f)
    if want is not None and size != want:
        f.close()
        raise damaged(path, f"{size} bytes where its task wrote {want}")
    return f


def _copy_in_kernel(src: Any, dest: Any, size: int) -> bool:
    """``size`` bytes of ``src`` appended to ``dest`` by ``os.copy_file_range``; False (nothing
    copied) where that cannot be used."""
    copy = getattr(os, "copy_file_range", None)
    try:
        fd = dest.fileno()
    except (AttributeError, OSError, ValueError):
        return False
    if copy is None or type(dest).__name__ not in ("BufferedWriter", "FileIO"):
        return False
    dest.flush()
    done = 0
    try:
        while done < size:
            k = copy(src.fileno(), fd, size - done)
            if k == 0:
                break
            done += k
    except OSError:
        if done:
            raise
        return False
    dest.seek(0, os.SEEK_END)
    return done == size


def _move(src: str, dest: str, keep: bool, shown: str) -> None:
    """``src`` to ``dest``: renamed, or copied where ``keep`` or across file systems (an
    object of object storage: downloaded); a copy that fails names the output ``shown`` (a
    full disk is the output's, not the work directory's)."""
    if is_url(src):
        objects.get_file(src, dest)
        return
    if not keep:
        with contextlib.suppress(OSError):
            os.replace(src, dest)
            return
    try:
        shutil.copyfile(src, dest)
    except OSError as e:
        raise OSError(e.errno, e.strerror or str(e), shown) from e


def _move_tree(src: str, dest: str, keep: bool, shown: str) -> int:
    """Every file under ``src`` to the same place under ``dest`` (the output ``shown``);
    returns their bytes."""
    total = 0
    if is_url(src):
        found = objects.sizes(src)
        listed = [(f"{src}/{rel}", rel, n) for rel, n in found.items()]
    else:
        listed = [(os.path.join(root, n), os.path.relpath(os.path.join(root, n), src), None)
                  for root, _, names in os.walk(src) for n in names]  # fmt: skip
    for path, rel, n in listed:
        target = os.path.join(dest, *rel.split("/"))
        os.makedirs(os.path.dirname(target), exist_ok=True)
        total += os.path.getsize(path) if n is None else n
        _move(path, target, keep, os.path.join(shown, *rel.split("/")))
    return total


def _compressed(path: str) -> bool:
    from neardup.io.files import compression_of

    return compression_of(path) is not None


def place_records(r: Runner, plan: DedupPlan, run: StagedRun,
                  outputs: OutputSet) -> list[dict[str, tuple[str, int, int]]]:  # fmt: skip
    """Where each shard's kept (and removed) lines go in their output files, written in place
    (:attr:`DedupPlan.placed`): for each, the output's temporary file, the shard's offset in
    it and its bytes (:func:`~neardup.pipeline.shard_write.kept_bytes_task`)."""
    sizes = r.map("kept-bytes", [(str(s), dict(work=r.work, plan=plan, offsets=run.offsets,
                                               n_decide=run.n_decide, s=s))
                                 for s in range(len(run.sizes))])  # fmt: skip
    place: list[dict[str, tuple[str, int, int]]] = [{} for _ in sizes]
    for name in ("kept", "removed"):
        path = records_output(plan, name)
        if path is not None:
            tmp = outputs.place(outputs.get(path))
            at = 0
            for s, x in enumerate(sizes):
                place[s][name] = (tmp, at, x[name])
                at += x[name]
    return place


def placed_plan(plan: DedupPlan) -> DedupPlan:
    """``plan``, with :attr:`DedupPlan.placed` where the run writes its kept (and removed)
    lines straight into their output files: their parts would lie beside them
    (:attr:`DedupPlan.parts_beside`), the inputs are read a block at a time (the scan measures
    each line), and each output is a plain file (or none yet) whose bytes are the lines (not
    compressed)."""
    if plan.parts_beside is None or not reads_in_blocks(list(plan.files)):
        return plan
    outs = [os.fspath(o) for o in (plan.output, plan.removed) if o is not None]
    odd = any(_compressed(o) or (os.path.exists(o) and not os.path.isfile(o)) for o in outs)
    return plan if odd else replace(plan, placed=True)

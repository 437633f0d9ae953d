"""The write stage of a staged dedup (:mod:`neardup.pipeline.stages`): each shard its parts of
the outputs, byte for byte the same whatever the shards: its kept lines, its dropped ids
and the clusters whose first member it holds (members anywhere)."""

from __future__ import annotations

import contextlib
import json
import os
from collections.abc import Iterator
from typing import Any

import numpy as np

from neardup.core.bits import popcount
from neardup.core.order import lexorder
from neardup.errors import InputError
from neardup.io.blocks import iter_blocks, kept_lines
from neardup.io.files import open_input
from neardup.io.leftovers import TEMP_SUFFIX, temp_prefix
from neardup.pipeline import store
from neardup.pipeline.plan import DedupPlan
from neardup.pipeline.stages import ByteRange
from neardup.pipeline.stream import concat, reads_in_blocks
from neardup.pipeline.task_files import gather_array, load, load_ids, save
from neardup.pipeline.write import copy_file, json_id, parquet_schema, write_parquet_rows

__all__ = ["PositionLookup", "kept_bytes_task", "write_task"]


class PositionLookup:
    """Ids and fingerprints of documents at global positions, each shard's loaded once."""

    def __init__(self, work: str, offsets: np.ndarray) -> None:
        self.work, self.offsets = work, offsets
        self._ids: dict[int, list[Any]] = {}

    def ids(self, pos: np.ndarray) -> list[Any]:
        shard = np.searchsorted(self.offsets, pos, side="right") - 1
        out = []
        for s, p in zip(shard.tolist(), pos.tolist(), strict=True):
            if s not in self._ids:
                self._ids[s] = load_ids(self.work, s)
            out.append(self._ids[s][p - int(self.offsets[s])])
        return out

    def fps(self, pos: np.ndarray) -> np.ndarray:
        order = np.argsort(pos, kind="stable")
        out = np.empty(len(pos), dtype=np.uint64)
        out[order] = gather_array(self.work, self.offsets, pos[order], "fp", np.uint64)
        return out


def _rows_for(work: str, n_decide: int, lo: int, hi: int) -> dict[str, np.ndarray]:
    """Cluster rows whose label is in ``[lo, hi)``, and dropped positions in it, from every
    decide task."""
    cols: dict[str, list[np.ndarray]] = {"label": [], "pos": [], "surv": [], "jac": [], "drop": []}
    for k in range(n_decide):
        label = load(work, "decide", k, "label")
        a, b = np.searchsorted(label, [lo, hi])
        for name in ("label", "pos", "surv", "jac"):
            cols[name].append(np.asarray(load(work, "decide", k, name)[a:b]))
        drop = load(work, "decide", k, "drop")
        a, b = np.searchsorted(drop, [lo, hi])
        cols["drop"].append(np.asarray(drop[a:b]))
    out = {k: concat(v, np.float64 if k == "jac" else np.int64) for k, v in cols.items()}
    order = lexorder((out["pos"], out["label"]))
    for name in ("label", "pos", "surv", "jac"):
        out[name] = out[name][order]
    out["drop"] = np.sort(out["drop"])
    return out


def _cluster_lines(
    rows: dict[str, np.ndarray], look: PositionLookup, verify: bool
) -> Iterator[str]:
    pos, label = rows["pos"], rows["label"]
    if len(pos) == 0:
        return
    ids = look.ids(pos)
    kept_ids = look.ids(rows["surv"])
    dist = popcount(look.fps(pos) ^ look.fps(rows["surv"])).astype(np.int64)
    cuts = np.flatnonzero(label[1:] != label[:-1]) + 1
    for g in np.split(np.arange(len(pos)), cuts):
        a, b = int(g[0]), int(g[-1]) + 1
        c: dict[str, Any] = {
            "kept": json_id(kept_ids[a]),
            "size": b - a,
            "members": [json_id(m) for m in ids[a:b]],
            "distances": dist[a:b].tolist(),
        }
        if verify:
            c["jaccards"] = rows["jac"][a:b].tolist()
        yield json.dumps(c, ensure_ascii=False, allow_nan=False) + "\n"


def _dropped(work: str, plan: DedupPlan, off: np.ndarray, n_decide: int,
             s: int) -> tuple[dict[str, np.ndarray], np.ndarray]:  # fmt: skip
    """Shard ``s``'s cluster rows (:func:`_rows_for`) and which of its documents are dropped:
    by the rule, or found in the index."""
    lo, hi = int(off[s]), int(off[s + 1])
    rows = _rows_for(work, n_decide, lo, hi)
    dropped = np.zeros(hi - lo, dtype=bool)
    dropped[rows["drop"] - lo] = True
    if plan.against is not None and hi > lo:  # dropped as seen in the index
        dropped |= np.asarray(load(work, "against", s, "found"))
    return rows, dropped


def kept_bytes_task(out: str, work: str, plan: DedupPlan, offsets: list[int], n_decide: int,
                    s: int) -> dict[str, int]:  # fmt: skip
    """The bytes of shard ``s``'s kept lines and of its removed ones in their outputs (each
    line with one newline), from the line bytes its scan saved: where each shard's lines go
    in an output written in place (:attr:`DedupPlan.placed`)."""
    _, dropped = _dropped(work, plan, np.asarray(offsets, dtype=np.int64), n_decide, s)
    nb = np.asarray(load(work, "scan", s, "nb"))
    kept = int(nb[~dropped].sum(dtype=np.int64))
    return {"kept": kept, "removed": int(nb[dropped].sum(dtype=np.int64))}


def write_task(out: str, work: str, plan: DedupPlan, offsets: list[int], n_decide: int, s: int,
               first_line: int,
               place: dict[str, tuple[str, int, int]] | None = None) -> dict[str, int]:  # fmt: skip
    """Shard ``s``'s parts of the outputs: its kept lines (JSONL and line inputs), its dropped
    ids and the clusters whose first member it holds. ``place``: for each records output
    written in place (``"kept"``, ``"removed"``), its temporary file and where this shard's
    lines go in it, and their bytes (:func:`kept_bytes_task`)."""
    off = np.asarray(offsets, dtype=np.int64)
    lo, hi = int(off[s]), int(off[s + 1])
    rows, dropped = _dropped(work, plan, off, n_decide, s)
    if plan.against is not None and hi > lo:
        if plan.update:  # the survivors the index does not hold as themselves yet
            own = np.asarray(load(work, "own", s, "own"))
            save(out, new=np.flatnonzero(~dropped & ~own))
    result = {"dropped": int(dropped.sum()), "clusters": 0, "kept_bytes": 0,
              "kept": int(hi - lo - dropped.sum())}  # fmt: skip
    if plan.drop_list is not None:
        ids = load_ids(work, s)  # only the drop list names documents by id here
        with store.create(os.path.join(out, "drop.txt")) as f:
            f.writelines(f"{ids[i]}\n".encode() for i in np.flatnonzero(dropped).tolist())
    label = rows["label"]
    result["clusters"] = int(len(np.unique(label)))
    if plan.clusters is not None or plan.cluster_parts:
        with store.create(os.path.join(out, "clusters.jsonl")) as f:
            lines = _cluster_lines(rows, PositionLookup(work, off), plan.verify)
            f.writelines(line.encode() for line in lines)
    for path, name, mask in ((plan.output, "kept", ~dropped), (plan.removed, "removed", dropped)):
        if path is not None:
            at = (place or {}).get(name)
            result[f"{name}_bytes"] = _write_records(out, work, plan, s, first_line, mask, name,
                                                     at)  # fmt: skip
    if plan.removed is not None:
        result["removed"] = int(dropped.sum())
    return result


def _write_records(out: str, work: str, plan: DedupPlan, s: int, first_line: int,
                   mask: np.ndarray, name: str,
                   at: tuple[str, int, int] | None = None) -> int:  # fmt: skip
    """Shard ``s``'s records where ``mask`` is True (its kept or its removed ones), untouched,
    as the part ``name`` (``.bin`` of lines, ``.parquet``, or text files under ``name/``), or
    with ``at`` (a file, an offset, the bytes due) into that file at that offset."""
    rec = np.asarray(load(work, "scan", s, "rec"))[mask]
    if at is not None:
        try:  # into the output's temporary file: its disk, named so
            return _write_lines(at[0], plan, s, rec, first_line, at=at[1], due=at[2])
        except OSError as e:
            raise OSError(e.errno, e.strerror or str(e), records_output(plan, name)) from e
    if plan.kind in ("jsonl", "lines"):
        if plan.parts_beside is None:
            return _write_lines(os.path.join(out, f"{name}.bin"), plan, s, rec, first_line)
        try:  # beside the output, which the commit joins them into: its disk, named so
            return _write_lines(beside_part(plan, name, s), plan, s, rec, first_line)
        except OSError as e:
            raise OSError(e.errno, e.strerror or str(e), records_output(plan, name)) from e
    src = np.asarray(load(work, "scan", s, "src"))[mask]
    if plan.kind == "parquet":
        return _write_parquet_part(out, plan, s, src, rec, name)
    shown = records_output(plan, name)
    return _copy_text_files(out, plan, src, "files" if name == "kept" else name, shown)


def records_output(plan: DedupPlan, name: str) -> str | None:
    """The output of the records part ``name``: ``plan.output`` for the kept records,
    ``plan.removed`` for the removed ones."""
    return plan.output if name == "kept" else plan.removed


def beside_part(plan: DedupPlan, name: str, s: int) -> str:
    """Where shard ``s`` writes its lines of the records part ``name`` (``"kept"``,
    ``"removed"``) in a run whose parts lie beside their output file
    (:attr:`DedupPlan.parts_beside`): a temporary file of this process in the output's
    directory (:mod:`neardup.io.leftovers`: removed by a later run or ``neardup clean`` if the
    run is killed)."""
    assert plan.parts_beside is not None
    path = os.path.realpath(os.fspath(records_output(plan, name)))
    base = temp_prefix(f"{os.path.basename(path)}.part-{s:05d}")
    return os.path.join(os.path.dirname(path), base + plan.parts_beside + TEMP_SUFFIX)


def _write_parquet_part(out: str, plan: DedupPlan, s: int, src: np.ndarray, rec: np.ndarray,
                        name: str = "kept") -> int:  # fmt: skip
    """Shard ``s``'s rows (file indices ``src``, row numbers ``rec``) as ``name.parquet``
    (``kept``, ``removed``), in the row groups of the input (one per batch that keeps a row), whatever the shards."""
    import pyarrow.parquet as pq

    schema = parquet_schema(plan.files[0].path)
    dest = os.path.join(out, f"{name}.parquet")
    with pq.ParquetWriter(dest, schema) as writer:
        for k in range(plan.shards[s].first, plan.shards[s].stop):
            write_parquet_rows(writer, schema, plan.files[k].path, np.sort(rec[src == k]))
    return os.path.getsize(dest)


def _copy_text_files(out: str, plan: DedupPlan, src: np.ndarray, under: str = "files",
                     shown: Any = None) -> int:  # fmt: skip
    """The kept (or removed) text files of a shard (their file indices ``src``) copied under
    ``under/`` by their output names (in the output directory ``shown``)."""
    written = 0
    shown = plan.output if shown is None else shown
    for k in np.unique(src).tolist():
        f = plan.files[k]
        dest = os.path.join(out, under, f.relname)
        os.makedirs(os.path.dirname(dest), exist_ok=True)
        written += copy_file(f.path, dest, os.path.join(os.fspath(shown), f.relname))
    return written


def _write_lines(dest: str, plan: DedupPlan, s: int, numbers: np.ndarray, first_line: int,
                 at: int | None = None, due: int | None = None) -> int:  # fmt: skip
    """The lines of shard ``s`` numbered ``numbers`` (ascending), byte for byte, to ``dest``,
    or, with ``at``, into the file ``dest`` from byte ``at`` on: the ``due`` bytes the scan
    measured (else the input changed meanwhile: an error naming it)."""
    shard = plan.shards[s]
    f = plan.files[shard.first]
    with open(dest, "wb" if at is None else "r+b") as w:
        if at is not None:
            w.seek(at)
        written = _copy_lines(w, plan, s, numbers, first_line)
    if due is not None and written != due:
        raise InputError(f.path, None, f"changed while dedup ran: {written} bytes of kept "
                         f"lines where its first reading measured {due}")  # fmt: skip
    return written


def _copy_lines(w: Any, plan: DedupPlan, s: int, numbers: np.ndarray, first_line: int) -> int:
    """:func:`_write_lines` into the open file ``w``."""
    shard = plan.shards[s]
    f = plan.files[shard.first]
    written = 0
    kernel = reads_in_blocks(list(plan.files))  # small inputs: no kernel to load or compile
    if len(numbers) == 0:
        return 0
    if shard.is_range:
        reader: Any = contextlib.closing(ByteRange(f.path, shard.start, shard.end))
    else:
        reader = open_input(f.path)
        first_line = 1
    with reader as r:
        for first, block in iter_blocks(r, 4 << 20):
            if block is None:
                continue
            first += first_line - 1
            i = int(np.searchsorted(numbers, first))
            if i == len(numbers):
                break
            data, _ = kept_lines(block, first, numbers, i, kernel=kernel)
            w.write(data)
            written += len(data)
    return written

"""The stages of a dedup run, each a plain function of one shard (or one bucket, or one group of
clusters) of a :class:`~neardup.pipeline.plan.DedupPlan` and a few small inputs.

Every stage function takes the directory to write its results in (``out``, made fresh by the
caller and renamed into place when the function returns) and reads what earlier stages wrote in
the run's work directory (``work``): so a task's inputs and outputs are files, and what goes
between the caller and a task is a few integers (see :mod:`neardup.pipeline.staged`). Positions
are global: a document's shard offset plus its place in the shard.

scan (read, parse and fingerprint one shard; spill its ids, record numbers, lengths,
fingerprints and, verified, its shingle keys, set fingerprints and set digests) -> ids (ids
repeated across shards) -> exact (verified: the documents whose shingle set is a copy of an
earlier one's in keep order, by digest range; each is linked to the first copy, Jaccard 1, and
left out of the search) -> split (each shard's search fingerprints bucketed per table group) ->
pairs (one bucket's candidate pairs, :func:`neardup.distributed.plan.shard_pairs`) -> verify
(exact Jaccard of a bucket's pairs; only pairs that reach the threshold are kept) -> components
(connected components of the verified pairs and the exact stage's links, in tasks over
partitions of the positions; in
:mod:`neardup.pipeline.stage_components`) -> decide (the keep-order rule of
:func:`neardup.core.verify.decide_verified`, or :func:`neardup.core.decide.keep_order` for
fingerprint-only dedup) -> near (for a report, each kept document's nearest miss; in
:mod:`neardup.pipeline.stage_near`) -> write (each shard its kept lines, its drop list and the
clusters it leads; in :mod:`neardup.pipeline.shard_write`).
"""

from __future__ import annotations

import contextlib
import hashlib
import io
import itertools
import json
import os
import pickle
from collections.abc import Iterable, Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import numpy as np

from neardup.core.decide import keep_key
from neardup.core.search import find_all
from neardup.core.similarity import ShingleSets, pair_jaccard, set_fingerprints
from neardup.distributed.plan import (
    ShardPlan,
    distinct_nodes,
    shard_edges,
    shard_ids,
    shard_pairs,
)
from neardup.errors import InputError, reading_back
from neardup.index.storage import NPY_HEADERS
from neardup.io.blocks import hash_ids, id_key, iter_blocks, line_format
from neardup.io.files import input_size, read_path
from neardup.pipeline import layout
from neardup.pipeline.plan import DedupPlan
from neardup.pipeline.read_cache import local_file
from neardup.pipeline.scan import SeenDocuments, first_kinds
from neardup.pipeline.stream import (
    block_bytes,
    concat,
    fingerprint_item,
    in_order,
    input_items,
    reads_in_blocks,
)

__all__ = [
    "ByteRange",
    "by_digest",
    "check_search_device",
    "inbox",
    "count_lines",
    "key_stage",
    "shard_sets",
    "gather_sets",
    "exact_copies",
    "gather",
    "gather_array",
    "gather_spans",
    "id_buckets",
    "load",
    "pairs_task",
    "save",
    "save_records",
    "repeated_ids",
    "scan_shard",
    "slices",
    "search_task",
    "set_digests",
    "split_task",
    "verify_task",
]

#: Slack below the threshold when the verify stage filters pairs: the decide stage compares
#: again exactly, so a pair at the threshold is never lost to rounding.
_SLACK = 1e-9


def save(out: str, **arrays: np.ndarray) -> int:
    """Write each array as ``out/NAME.npy``; the bytes written."""
    n = 0
    for name, a in arrays.items():
        path = os.path.join(out, f"{name}.npy")
        np.save(path, a)
        n += os.path.getsize(path)
    return n


def load(work: str, stage: str, task: str | int, name: str) -> np.ndarray:
    """Array ``name`` written by task ``task`` of ``stage`` (memory-mapped)."""
    path = layout.path(work, stage, task, name)
    with reading_back(path), NPY_HEADERS:  # np.load parses its header with ast
        return np.load(local_file(path), mmap_mode="r")


def slices(work: str, stage: str, tasks: Iterable[str | int], p: int,
           cut: str = "c") -> Iterator[tuple[str | int, int, int]]:  # fmt: skip
    """``(task, lo, hi)`` of each task of ``stage`` whose slice ``p`` (a partition, group or
    shard), by its array of cuts ``cut``, holds anything: the reader's share of every writer."""
    for t in tasks:
        c = load(work, stage, t, cut)
        lo, hi = int(c[p]), int(c[p + 1])
        if hi > lo:
            yield t, lo, hi


def gather(work: str, stage: str, tasks: Iterable[str | int], p: int,
           columns: dict[str, Any], cut: str = "c") -> dict[str, np.ndarray]:  # fmt: skip
    """Slice ``p`` (by the cuts ``cut``, :func:`slices`) of the arrays ``columns`` (name: dtype)
    of every task of ``stage``, end to end, each column one array filled in place. One task's
    file is open at a time: a memory-mapped file holds a descriptor while any view of it
    lives, and a stage of a near-copy family can have tens of thousands of tasks."""
    return gather_spans(work, stage, list(slices(work, stage, tasks, p, cut)), columns)


def gather_spans(work: str, stage: str, spans: list[tuple[str | int, int, int]],
                 columns: dict[str, Any]) -> dict[str, np.ndarray]:  # fmt: skip
    """:func:`gather` over ``spans`` (``(task, lo, hi)``, as :func:`slices` yields them)."""
    total = sum(hi - lo for _, lo, hi in spans)
    out = {}
    for name, dtype in columns.items():
        whole: np.ndarray | None = None
        at = 0
        for t, lo, hi in spans:
            src = load(work, stage, t, name)
            if whole is None:
                whole = np.empty((total, *src.shape[1:]), dtype=dtype)
            whole[at : at + hi - lo] = src[lo:hi]
            at += hi - lo
            del src  # closes the mapping before the next file opens
        out[name] = whole if whole is not None else np.zeros(0, dtype=dtype)
    return out


def inbox(work: str, stage: str, tasks: list[str], p: int, name: str = "e",
          cut: str = "c") -> np.ndarray:  # fmt: skip
    """Partition (or group) ``p``'s slice of edges ``name`` of every task of ``stage``, end to
    end, shape (k, 2)."""
    return gather(work, stage, tasks, p, {name: np.int64}, cut)[name].reshape(-1, 2)


def load_ids(work: str, shard: int) -> list[Any]:
    """The ids of shard ``shard``'s documents, in input order."""
    path = layout.path(work, "scan", shard, "ids.pkl")
    with reading_back(path), open(local_file(path), "rb") as f:
        return pickle.load(f)


# ---------------------------------------------------------------------------------- scan
class ByteRange(io.RawIOBase):
    """Bytes ``start`` to ``end`` of a file, as a stream."""

    def __init__(self, path: str, start: int, end: int) -> None:
        self._f = open(read_path(path), "rb")  # noqa: SIM115 (closed with the stream)
        self._f.seek(start)
        self._left = end - start

    def readable(self) -> bool:
        return True

    def read(self, size: int = -1) -> bytes:
        size = self._left if size < 0 else min(size, self._left)
        data = self._f.read(size)
        self._left -= len(data)
        return data

    def close(self) -> None:
        self._f.close()
        super().close()


def count_lines(out: str, plan: DedupPlan, s: int) -> dict[str, int]:
    """Line ends in shard ``s`` (a byte range; 0 for other shards)."""
    shard = plan.shards[s]
    n = 0
    if shard.is_range:
        with contextlib.closing(
            ByteRange(plan.files[shard.first].path, shard.start, shard.end)
        ) as r:
            while chunk := r.read(1 << 22):
                n += chunk.count(b"\n")
    return {"lines": n}


def _shard_items(plan: DedupPlan, s: int, first_line: int) -> Iterator[tuple[Any, ...]]:
    """The reading items of :func:`neardup.pipeline.stream.fingerprint_files` for one shard,
    file indices those of the plan."""
    shard = plan.shards[s]
    files = list(plan.files)
    size = block_bytes(files[shard.first : shard.stop], 1)
    if shard.is_range:
        f = files[shard.first]
        fmt = line_format(f.path, f.kind == "jsonl", plan.text_field, plan.id_field,
                          plan.key_field)  # fmt: skip
        with contextlib.closing(ByteRange(f.path, shard.start, shard.end)) as r:
            for number, data in iter_blocks(r, size):
                yield "raw", shard.first, fmt, number + first_line - 1, data
        return
    sub = files[shard.first : shard.stop]
    arrow = reads_in_blocks(files, ("parquet",))
    for item in input_items(sub, plan.text_field, plan.id_field, size, reads_in_blocks(files),
                            arrow, plan.key_field):  # fmt: skip
        if item[0] == "docs":
            yield "docs", item[1] + np.int32(shard.first), item[2]
        else:
            yield (item[0], item[1] + shard.first, *item[2:])


def scan_shard(
    out: str, plan: DedupPlan, s: int, first_line: int, threads: int = 1
) -> dict[str, Any]:
    """Read, parse and fingerprint shard ``s``; spill its arrays to ``out``.

    Bad records are skipped and returned as ``[source, line, message]``: all of them with
    ``plan.skip_bad``, else the first, the scan ending with its block (the caller raises the
    first error of the input, which may be a repeated id of an earlier shard). Repeated ids,
    within the shard or across shards, are the ids stage's (:func:`repeated_ids`), which knows
    every first.
    """
    verify = plan.verify
    bad_records: list[list[Any]] = []

    def bad(err: InputError) -> None:
        if plan.skip_bad or not bad_records:
            bad_records.append([err.source, err.line, err.message])

    seen = SeenDocuments(list(plan.files), check_ids=False)  # the ids stage finds every repeat
    set_parts: list[tuple[np.ndarray, ...]] = []  # of each block: sizes, sfp, digests
    items = _shard_items(plan, s, first_line)
    work = lambda item: fingerprint_item(item, fper=plan.fingerprinter, keys=verify)  # noqa: E731
    with contextlib.ExitStack() as stack:
        pool = stack.enter_context(ThreadPoolExecutor(threads)) if threads > 1 else None
        batches = stack.enter_context(contextlib.closing(in_order(pool, work, items, threads + 1)))
        keys_file = stack.enter_context(open(os.path.join(out, "keys.u32"), "wb"))
        for batch in batches:
            keep = seen.add(batch, bad)
            if verify:  # keys go to disk block by block: the task holds one block's
                set_parts.append(_spill_sets(batch, keep, keys_file))
            if bad_records and not plan.skip_bad:
                break  # what follows is later in the input than the error raised
    fps = concat(seen.fp_parts, np.uint64)
    arrays = {
        "fp": fps,
        "len": concat(seen.len_parts, np.int64),
        "rec": concat(seen.rec_parts, np.int64),
        "src": concat(seen.src_parts, np.int32),
    }
    if plan.key_field is not None:  # the keep field's values and kinds
        arrays.update(prio=concat(seen.prio_parts, np.float64),
                      pkind=concat(seen.kind_parts, np.int8))  # fmt: skip
    no_shingles = 0
    if verify:
        sizes = concat([p[0] for p in set_parts], np.int64)
        koff = np.zeros(len(sizes) + 1, dtype=np.int64)
        np.cumsum(sizes, out=koff[1:])
        arrays.update(koff=koff, sfp=concat([p[1] for p in set_parts], np.uint64))
        digests = [p[2] for p in set_parts] or [np.zeros((0, 2), dtype=np.uint64)]
        arrays.update(by_digest(np.concatenate(digests), sizes))
        no_shingles = int(np.count_nonzero(sizes == 0))
    arrays["idh"] = hash_ids(seen.ids)  # for ids repeated across shards
    by_hash = np.argsort(arrays["idh"], kind="stable")  # the ids stage reads hash ranges
    arrays.update(idh_sorted=arrays["idh"][by_hash], idh_place=by_hash.astype(np.int64))
    nbytes = save(out, **arrays)
    with open(os.path.join(out, "ids.pkl"), "wb") as f:
        pickle.dump(seen.ids, f, protocol=pickle.HIGHEST_PROTOCOL)
    nbytes += os.path.getsize(os.path.join(out, "ids.pkl"))
    nbytes += os.path.getsize(os.path.join(out, "keys.u32"))
    nbytes += save_records(out, "bad", bad_records)
    return {"n": len(fps), "bad": len(bad_records), "first_bad": (bad_records or [None])[0],
            "bytes": nbytes, "no_shingles": no_shingles}  # fmt: skip


def _spill_sets(batch: Any, keep: np.ndarray, keys_file: Any) -> tuple[np.ndarray, ...]:
    """The shingle keys of a block's ``keep`` documents appended to ``keys_file``; returns
    their set sizes, set fingerprints and set digests."""
    offsets, keys = batch.key_offsets, batch.keys
    sizes = np.diff(offsets)
    if not keep.all():
        keys = keys[np.repeat(keep, sizes)]
        sizes = sizes[keep]
    offsets = np.zeros(len(sizes) + 1, dtype=np.int64)
    np.cumsum(sizes, out=offsets[1:])
    keys = np.ascontiguousarray(keys, dtype=np.uint32)
    keys.tofile(keys_file)
    sets = ShingleSets(offsets, keys)
    return sizes, set_fingerprints(sets, threads=1), set_digests(sets)


#: The scan spill's set digests of the documents with shingles, sorted by digest then place:
#: the digest's first and second 8 bytes and the document's place in the shard.
_DIGESTS = ("dig_hi", "dig_lo", "dig_place")


def set_digests(sets: ShingleSets) -> np.ndarray:
    """The 128-bit BLAKE2b digest of each shingle set's keys (as little-endian uint32), as
    uint64 (n, 2): equal sets have equal digests, and different sets (about 2**-128 for a pair)
    never do in practice.

    Parameters
    ----------
    sets : ShingleSets
        CSR shingle sets (sorted unique uint32 keys per document).

    Returns
    -------
    ndarray of uint64, shape (n, 2)
        The digest's first and second 8 bytes, read little-endian.

    Examples
    --------
    >>> d = set_digests(ShingleSets(np.array([0, 2, 4, 5]), np.array([1, 2, 1, 2, 3], np.uint32)))
    >>> (d[0] == d[1]).all(), (d[0] == d[2]).all()
    (np.True_, np.False_)
    """
    keys = np.ascontiguousarray(sets.keys, dtype="<u4")
    data = memoryview(keys).cast("B") if len(keys) else memoryview(b"")
    at = (np.asarray(sets.offsets, dtype=np.int64) * 4).tolist()
    blake = hashlib.blake2b
    joined = b"".join([blake(data[a:z], digest_size=16).digest() for a, z in zip(at, at[1:])])
    return np.frombuffer(joined, dtype="<u8").astype(np.uint64).reshape(-1, 2)


def by_digest(digests: np.ndarray, sizes: np.ndarray) -> dict[str, np.ndarray]:
    """The arrays :data:`_DIGESTS` of the documents with shingles, sorted by digest, then
    place: the exact stage reads a range of digests of each shard.

    Parameters
    ----------
    digests : ndarray of uint64, shape (n, 2)
        Each document's set digest (:func:`set_digests`).
    sizes : ndarray of int64
        Each document's number of shingle keys (those with none are left out).

    Returns
    -------
    dict of str to ndarray
        ``dig_hi``, ``dig_lo`` (uint64: the digest's two halves) and ``dig_place`` (int64: the
        document's place), in the order of the digests, then the places.
    """
    place = np.flatnonzero(sizes > 0).astype(np.int64)
    hi, lo = digests[place, 0], digests[place, 1]
    order = np.lexsort((place, lo, hi))
    return dict(zip(_DIGESTS, (hi[order], lo[order], place[order]), strict=True))


def save_records(out: str, name: str, records: list[list[Any]]) -> int:
    """Bad records ``[source, line, message]`` as JSON lines ``name.jsonl``, with ``name.npy``
    the byte offset of each line and of the end; returns the bytes written."""
    at = [0]
    with open(os.path.join(out, f"{name}.jsonl"), "wb") as f:
        for rec in records:
            f.write(json.dumps(rec, ensure_ascii=False).encode("utf-8") + b"\n")
            at.append(f.tell())
    return os.path.getsize(os.path.join(out, f"{name}.jsonl")) + save(
        out, **{name: np.asarray(at, dtype=np.int64)}
    )


def read_records(work: str, stage: str, task: str | int, name: str, lo: int = 0,
                 hi: int | None = None) -> list[list[Any]]:  # fmt: skip
    """Records ``lo`` to ``hi`` of :func:`save_records`' ``name`` in a task's results."""
    at = load(work, stage, task, name)
    hi = len(at) - 1 if hi is None else hi
    if hi <= lo:
        return []
    path = layout.path(work, stage, task, f"{name}.jsonl")
    with reading_back(path), open(local_file(path), "rb") as f:
        f.seek(int(at[lo]))
        return [json.loads(line) for line in f.read(int(at[hi] - at[lo])).splitlines()]


def id_buckets(n_shards: int) -> int:
    """Tasks of the repeated-ids check: a power of two, about one per shard (1 for one)."""
    return 1 << max(0, (max(1, n_shards) - 1).bit_length())


def repeated_ids(out: str, work: str, plan: DedupPlan, sizes: list[int], b: int,
                 buckets: int) -> dict[str, Any]:  # fmt: skip
    """Ids that repeat an earlier document's id (in any shard, its own included), among the
    ids whose 8-byte hash falls in range ``b`` of ``buckets`` (by its top bits), saved by
    shard (:func:`shard_repeats`); returns how many, the first ``[shard, place, source, line,
    message]`` in input order and the shards they are in. Every copy of an id has the same
    hash, so the ranges' answers together are the whole answer; a task reads its range of each
    shard's sorted hashes."""
    offsets = np.concatenate([[0], np.cumsum(sizes)]).astype(np.int64)
    hashes, places = [], []
    for s in range(len(sizes)):
        h = load(work, "scan", s, "idh_sorted")  # binary searches touch a few pages
        lo, hi = _hash_range(h, b, buckets)
        hashes.append(np.asarray(h[lo:hi]))
        places.append(np.asarray(load(work, "scan", s, "idh_place")[lo:hi]) + offsets[s])
    h, pos = concat(hashes, np.uint64), concat(places, np.int64)
    order = np.lexsort((pos, h))
    h, pos = h[order], pos[order]
    same = np.flatnonzero(h[1:] == h[:-1])
    docs = np.unique(np.concatenate([pos[same], pos[same + 1]]))
    found = _confirm_repeats(work, plan, offsets, docs) if len(same) else []
    shard = np.asarray([f[0] for f in found], dtype=np.int64)
    cut = np.searchsorted(shard, np.arange(len(sizes) + 1)).astype(np.int64)
    nbytes = save(out, place=np.asarray([f[1] for f in found], dtype=np.int64), c=cut)
    nbytes += save_records(out, "rep", [f[2:] for f in found])
    return {"n": len(found), "first": found[0] if found else None,
            "shards": sorted(set(shard.tolist())), "bytes": nbytes}  # fmt: skip


def _hash_range(h: np.ndarray, b: int, buckets: int) -> tuple[int, int]:
    """The slice of the sorted hashes ``h`` (uint64) in range ``b`` of ``buckets`` (a power of
    two; by their top bits)."""
    bits = buckets.bit_length() - 1
    lo_h = b << (64 - bits) if bits else 0
    hi_h = (b + 1) << (64 - bits) if bits else 1 << 64
    lo = int(np.searchsorted(h, np.uint64(lo_h)))
    hi = len(h) if hi_h >= 1 << 64 else int(np.searchsorted(h, np.uint64(hi_h)))
    return lo, hi


def shard_repeats(work: str, buckets: int, s: int) -> tuple[np.ndarray, list[list[Any]]]:
    """Shard ``s``'s repeated ids found by the ids stage's ``buckets`` tasks: their places in
    the shard and their records ``[source, line, message]``, in the same order (by task)."""
    spans = list(slices(work, "ids", range(buckets), s))
    records = [r for b, lo, hi in spans for r in read_records(work, "ids", b, "rep", lo, hi)]
    return gather_spans(work, "ids", spans, {"place": np.int64})["place"], records


def _confirm_repeats(
    work: str, plan: DedupPlan, offsets: np.ndarray, docs: np.ndarray
) -> list[list[Any]]:
    """Of the documents ``docs`` (global positions, ascending) whose id hashes are shared,
    those whose id equals an earlier one's (a shared hash of different ids is no repeat)."""

    def where(p: int) -> tuple[int, int]:
        s = int(np.searchsorted(offsets, p, side="right") - 1)
        return s, p - int(offsets[s])

    wanted: dict[int, Any] = {}  # the ids of ``docs`` only, one shard's list read at a time
    for s, p in _by_shard(offsets, docs):
        ids = load_ids(work, s)
        wanted.update((int(q), ids[int(q) - int(offsets[s])]) for q in p.tolist())
    ident = wanted.__getitem__

    first: dict[Any, int] = {}
    found = []
    for p in docs.tolist():  # only the documents whose id hash is shared
        k = first.setdefault(id_key(ident(p)), p)
        if k != p:
            s, j = where(p)
            fs, fj = where(k)
            src, rec = load(work, "scan", s, "src"), load(work, "scan", s, "rec")
            fsrc, frec = load(work, "scan", fs, "src"), load(work, "scan", fs, "rec")
            msg = (
                f"duplicate id {ident(p)!r} (first at {plan.files[int(fsrc[fj])].path}:"
                f"{int(frec[fj])}); ids must be unique: choose another --id-field or use "
                "--skip-bad"
            )
            found.append([s, j, plan.files[int(src[j])].path, int(rec[j]), msg])
    return found


def drop_docs(out: str, work: str, plan: DedupPlan, s: int, buckets: int) -> dict[str, Any]:
    """Shard ``s``'s spill without the documents whose ids repeat an earlier one's (found by
    the ids stage's ``buckets`` tasks; skipped as bad)."""
    keep = np.ones(len(load(work, "scan", s, "fp")), dtype=bool)
    keep[shard_repeats(work, buckets, s)[0]] = False
    names = ("fp", "len", "rec", "src", "idh") + (("prio", "pkind") if plan.key_field else ())
    arrays = {k: np.asarray(load(work, "scan", s, k))[keep] for k in names}
    no_shingles = 0
    if plan.verify:
        sets = _sets(work, s)
        sub = _subset(sets, np.flatnonzero(keep))
        arrays.update(koff=sub.offsets, sfp=np.asarray(load(work, "scan", s, "sfp"))[keep])
        sub.keys.tofile(os.path.join(out, "keys.u32"))
        no_shingles = int(np.count_nonzero(sub.sizes == 0))
        place = np.asarray(load(work, "scan", s, "dig_place"))
        live = keep[place]  # the order by digest stays: new places keep the old ones' order
        arrays.update({k: np.asarray(load(work, "scan", s, k))[live] for k in _DIGESTS[:2]},
                      dig_place=(np.cumsum(keep) - 1)[place[live]])  # fmt: skip
    nbytes = save(out, **arrays)
    ids = list(itertools.compress(load_ids(work, s), keep.tolist()))
    with open(os.path.join(out, "ids.pkl"), "wb") as f:
        pickle.dump(ids, f, protocol=pickle.HIGHEST_PROTOCOL)
    return {"n": int(keep.sum()), "bytes": nbytes, "no_shingles": no_shingles}


# ---------------------------------------------------------------------------- exact copies
def exact_copies(out: str, work: str, plan: DedupPlan, offsets: list[int], b: int,
                 buckets: int, aside: bool) -> dict[str, int]:  # fmt: skip
    """The copies among the documents whose set digest falls in range ``b`` of ``buckets``
    (the digests of the sets the later stages read, :func:`key_stage`: with common shingles
    left out, of the sets without them): documents with equal shingle sets are one class, led by its first member in keep order
    (:func:`neardup.core.verify.priority_order`; with ``aside``, documents found in the index
    take no part), as :func:`neardup.core.verify.decide_verified` forms them. Saves each other
    member's link ``(first, member)`` (``pairs``, Jaccard 1 in ``jac``) sorted by member, with
    the cuts ``c`` between the members' shards: the search leaves the members out, and the
    links bring them to their class's decision. Every copy of a set has the same digest, so the
    ranges' answers together are the whole answer; a task reads its range of each shard's
    sorted digests, and holds the documents in it."""
    off = np.asarray(offsets, dtype=np.int64)
    d, p = _shared_digests(work, off, b, buckets, key_stage(plan))
    if aside and len(p):
        live = ~gather_array(work, off, p, "found", bool, stage="against").astype(bool)
        d, p = d[live], p[live]
    key = keep_key(plan.keep, keep_values(work, plan, off, p), len(p)) if len(p) else None
    if key is None:  # "first": input order
        key = np.zeros(len(p), np.int64)
    order = np.lexsort((p, key, d[:, 1], d[:, 0]))  # each class in keep order: its first leads
    d, p = d[order], p[order]
    lead = np.r_[True, np.any(d[1:] != d[:-1], axis=1)] if len(p) else np.zeros(0, bool)
    first = p[lead][np.cumsum(lead) - 1]
    links = np.stack([first[~lead], p[~lead]], axis=1).reshape(-1, 2)
    links = links[np.argsort(links[:, 1], kind="stable")]
    cuts = np.searchsorted(links[:, 1], off).astype(np.int64)
    nbytes = save(out, pairs=links, jac=np.ones(len(links)), c=cuts)
    return {"pairs": len(links), "bytes": nbytes}


def _shared_digests(work: str, off: np.ndarray, b: int, buckets: int,
                    stage: str = "scan") -> tuple[np.ndarray, np.ndarray]:  # fmt: skip
    """The set digests (uint64 (k, 2)) in range ``b`` of ``buckets`` that two or more
    documents share, and those documents' global positions (ascending); the digests of the
    sets that ``stage`` spilled (:func:`key_stage`)."""
    parts: list[tuple[np.ndarray, np.ndarray]] = []
    for s in range(len(off) - 1):
        hi = load(work, stage, s, "dig_hi")  # binary searches touch a few pages
        a, z = _hash_range(hi, b, buckets)
        if z == a:  # the other arrays opened only where the range holds documents
            continue
        lo = load(work, stage, s, "dig_lo")[a:z]
        place = np.asarray(load(work, stage, s, "dig_place")[a:z]) + off[s]
        parts.append((np.stack([hi[a:z], lo], axis=1).astype(np.uint64), place))
    d = np.concatenate([x for x, _ in parts]) if parts else np.zeros((0, 2), np.uint64)
    p = concat([x for _, x in parts], np.int64)
    if len(p) < 2:
        return d[:0], p[:0]
    order = np.lexsort((d[:, 1], d[:, 0]))
    same = np.all(d[order][1:] == d[order][:-1], axis=1)
    shared = order[np.r_[same, False] | np.r_[False, same]]  # in a class of two or more
    shared = shared[np.argsort(p[shared], kind="stable")]  # read shard by shard, in order
    return d[shared], p[shared]


def copies_in(work: str, tasks: int, s: int) -> np.ndarray:
    """The global positions of shard ``s``'s documents that the exact stage's ``tasks`` tasks
    linked to an earlier copy of their shingle set (ascending within each task's slice)."""
    pairs = gather(work, "exact", range(tasks), s, {"pairs": np.int64})["pairs"]
    return pairs.reshape(-1, 2)[:, 1].copy()


# ------------------------------------------------------------------------------ candidates
def key_stage(plan: DedupPlan) -> str:
    """The stage whose spills hold the shingle sets that the candidates and the verification
    use: ``"common"`` (the sets without the common shingles) with ``plan.common_shingles``,
    else ``"scan"``."""
    return "scan" if plan.common_shingles is None else "common"


def shard_sets(work: str, s: int, stage: str = "scan") -> ShingleSets:
    """Shard ``s``'s shingle sets as ``stage`` spilled them, the keys memory-mapped."""
    koff = load(work, stage, s, "koff")
    n = int(koff[-1])
    if n == 0:  # an empty file cannot be mapped
        return ShingleSets(koff, np.zeros(0, dtype=np.uint32))
    path = layout.path(work, stage, s, "keys.u32")
    with reading_back(path):
        return ShingleSets(koff, np.memmap(local_file(path), dtype=np.uint32, mode="r", shape=(n,)))


def _sets(work: str, s: int) -> ShingleSets:
    """Shard ``s``'s shingle sets as the scan spilled them (:func:`shard_sets`)."""
    return shard_sets(work, s)


def _subset(sets: ShingleSets, idx: np.ndarray) -> ShingleSets:
    """The sets at ``idx`` (ascending), copied into memory."""
    starts = np.asarray(sets.offsets[idx], dtype=np.int64)
    sizes = np.asarray(sets.offsets[idx + 1], dtype=np.int64) - starts
    offsets = np.zeros(len(idx) + 1, dtype=np.int64)
    np.cumsum(sizes, out=offsets[1:])
    if offsets[-1] == 0:
        return ShingleSets(offsets, np.zeros(0, dtype=np.uint32))
    lo, hi = int(starts.min()), int((starts + sizes).max())
    window = np.asarray(sets.keys[lo:hi])
    at = np.repeat(starts - lo - offsets[:-1], sizes) + np.arange(offsets[-1], dtype=np.int64)
    return ShingleSets(offsets, np.ascontiguousarray(window[at]))


def gather_sets(work: str, offsets: np.ndarray, pos: np.ndarray,
                 stage: str = "scan") -> ShingleSets:  # fmt: skip
    """The shingle sets of the documents at global positions ``pos`` (ascending), from their
    shards' spills (of ``stage``, :func:`key_stage`)."""
    parts = [_subset(shard_sets(work, s, stage), p - offsets[s])
             for s, p in _by_shard(offsets, pos)]  # fmt: skip
    sizes = concat([np.diff(p.offsets) for p in parts], np.int64)
    out = np.zeros(len(sizes) + 1, dtype=np.int64)
    np.cumsum(sizes, out=out[1:])
    return ShingleSets(out, concat([p.keys for p in parts], np.uint32))


def gather_array(work: str, offsets: np.ndarray, pos: np.ndarray, name: str, dtype: Any,
                 stage: str = "scan") -> np.ndarray:  # fmt: skip
    """Array ``name`` of a per-shard stage's tasks (the scan spills) at global positions
    ``pos`` (ascending)."""
    parts = [np.asarray(load(work, stage, s, name))[p - offsets[s]]
             for s, p in _by_shard(offsets, pos)]  # fmt: skip
    return concat(parts, dtype)


def _by_shard(offsets: np.ndarray, pos: np.ndarray) -> list[tuple[int, np.ndarray]]:
    """``pos`` (global, ascending) cut by shard: ``[(shard, its positions)]``, shards in order,
    each with at least one position."""
    cuts = np.searchsorted(pos, offsets)
    return [(s, pos[cuts[s] : cuts[s + 1]]) for s in range(len(offsets) - 1)
            if cuts[s + 1] > cuts[s]]  # fmt: skip


def split_task(out: str, work: str, plan: DedupPlan, s: int, offset: int, sp: ShardPlan,
               copies: int = 0) -> int:  # fmt: skip
    """Shard ``s``'s search fingerprints (verified: set fingerprints of documents with
    shingles, but for the copies the exact stage's ``copies`` tasks found) bucketed for each
    table group of ``sp``; returns the bytes written."""
    fp, pos = _search_fps(work, plan, s, offset, copies)
    nbytes = 0
    for g in range(len(sp.groups)):
        sid = shard_ids(fp, sp, g)
        order = np.argsort(sid, kind="stable")
        cuts = np.searchsorted(sid[order], np.arange(sp.n_shards + 1)).astype(np.int64)
        nbytes += save(out, **{f"v{g}": fp[order], f"p{g}": pos[order], f"c{g}": cuts})
    return nbytes


def _search_fps(work: str, plan: DedupPlan, s: int, offset: int,
                copies: int = 0) -> tuple[np.ndarray, np.ndarray]:  # fmt: skip
    """Shard ``s``'s search fingerprints and their global positions (verified: the set
    fingerprints of the documents with shingles, but for the copies of an earlier set that the
    exact stage's ``copies`` tasks found; else every document's fingerprint)."""
    if plan.verify:
        take = np.diff(load(work, key_stage(plan), s, "koff")) > 0
        if copies:
            take[copies_in(work, copies, s) - offset] = False
        pos = np.flatnonzero(take)
        fp = np.asarray(load(work, key_stage(plan), s, "sfp"))[pos]
    else:
        fp = np.asarray(load(work, "scan", s, "fp"))
        pos = np.arange(len(fp))
    return fp, pos.astype(np.int64) + np.int64(offset)


def check_search_device(device: str, client: Any = None) -> None:
    """Before any stage runs: ``device="cuda"`` needs a usable GPU here, or with a Dask
    ``client`` on every worker; else one line (:class:`~neardup.gpu.DeviceUnavailable`)."""
    if device == "cpu":
        return
    if client is not None:
        from neardup.distributed import check_workers

        check_workers(client, device)
    else:
        from neardup.gpu import use_gpu

        use_gpu(device)


def search_task(out: str, work: str, plan: DedupPlan, offsets: list[int], threads: int,
                copies: int = 0) -> dict:  # fmt: skip
    """Every candidate pair (fingerprint-only: cluster edges) in one task, by the search the
    one-process job uses (:func:`neardup.core.search.find_all`, its cost model's scheme): for
    corpora whose search fingerprints fit one task. The copies that the exact stage's
    ``copies`` tasks found are left out."""
    parts = [_search_fps(work, plan, s, offsets[s], copies) for s in range(len(offsets) - 1)]
    fp, pos = concat([p[0] for p in parts], np.uint64), concat([p[1] for p in parts], np.int64)
    if plan.verify:
        found = find_all(fp, plan.distance, plan.blocks, threads=threads, device=plan.device)
    else:
        found = _value_edges(fp, plan, threads)
    pairs = pos[found].reshape(-1, 2)
    return {"pairs": len(pairs), "bytes": save(out, pairs=pairs), "moved": 0}


def _value_edges(fp: np.ndarray, plan: DedupPlan, threads: int) -> np.ndarray:
    """Fingerprint-only candidate edges (positions into ``fp``), as
    :func:`neardup.distributed.plan.shard_edges` makes them: each distinct value searched once,
    by its first document, and every other copy of a value linked to that first one."""
    values, first, value = np.unique(fp, return_index=True, return_inverse=True)
    copies = np.flatnonzero(first[value] != np.arange(len(fp)))
    found = find_all(values, plan.distance, plan.blocks, threads=threads, device=plan.device)
    return np.concatenate([np.stack([first[value[copies]], copies], axis=1),
                           np.sort(first[found].reshape(-1, 2), axis=1)])  # fmt: skip


def pairs_task(out: str, work: str, plan: DedupPlan, n_shards: int, sp: ShardPlan, g: int,
               b: int) -> dict[str, int]:  # fmt: skip
    """Candidate pairs (fingerprint-only dedup: cluster edges) of bucket ``b`` of group ``g``,
    from every shard's split, as global positions."""
    pieces = []
    for s in range(n_shards):
        c = load(work, "split", s, f"c{g}")
        lo, hi = int(c[b]), int(c[b + 1])
        pieces.append(
            (load(work, "split", s, f"v{g}")[lo:hi], load(work, "split", s, f"p{g}")[lo:hi])
        )
    moved = sum(len(v) for v, _ in pieces) * 16
    search = shard_pairs if plan.verify else shard_edges
    pairs = search(pieces, sp, g, plan.device)
    return {"pairs": len(pairs), "bytes": save(out, pairs=pairs), "moved": moved}


def verify_task(
    out: str, work: str, plan: DedupPlan, offsets: list[int], task: str, lo: int, hi: int
) -> dict[str, int]:
    """Exact Jaccard of candidate pairs ``lo`` to ``hi`` of a search task, the keys read from
    both documents' shards; keeps the pairs that reach the threshold."""
    pairs = np.asarray(load(work, "pairs", task, "pairs")[lo:hi])
    if len(pairs) == 0:
        none = {"mpairs": pairs, "mjac": np.zeros(0)} if plan.near_misses else {}
        return {"pairs": 0, "bytes": save(out, pairs=pairs, jac=np.zeros(0), **none)}
    pos, local = distinct_nodes(pairs)
    sets = gather_sets(work, np.asarray(offsets, dtype=np.int64), pos, key_stage(plan))
    jac = pair_jaccard(sets, local, threads=1)
    ok = jac >= plan.threshold - _SLACK
    missed = {}
    if plan.near_misses:  # the report's near misses are chosen among these after the decisions
        missed = {"mpairs": pairs[~ok], "mjac": jac[~ok]}
    nbytes = save(out, pairs=pairs[ok], jac=jac[ok], **missed)
    return {"pairs": int(ok.sum()), "bytes": nbytes}


def keep_values(work: str, plan: DedupPlan, offsets: np.ndarray, pos: np.ndarray) -> Any:
    """The keep order's values of the documents at global positions ``pos`` (ascending):
    characters for ``keep="longest"``, the keep field's values for ``"max:FIELD"``, None for
    ``"first"``."""
    if plan.keep == "first":
        return None
    if plan.key_field is None:
        return gather_array(work, offsets, pos, "len", np.int64)
    return gather_array(work, offsets, pos, "prio", np.float64)


def key_kinds(work: str, plan: DedupPlan, s: int) -> list[list[Any]]:
    """The first document of each kind of keep value in shard ``s``
    (:func:`~neardup.pipeline.scan.first_kinds`)."""
    src, rec = load(work, "scan", s, "src"), load(work, "scan", s, "rec")
    return first_kinds(np.asarray(load(work, "scan", s, "pkind")), src, rec, list(plan.files))


def input_bytes(plan: DedupPlan) -> int:
    """Total size of the inputs as stored."""
    return sum(input_size(f.path) for f in plan.files)

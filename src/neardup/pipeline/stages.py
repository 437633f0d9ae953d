"""The first stages of a staged dedup run, each a plain function of one shard (or one range of
id hashes or set digests) of a :class:`~neardup.pipeline.plan.DedupPlan` and a few small inputs.

Every stage function takes the directory to write its results in (``out``, made fresh by the
caller and renamed into place when the function returns) and reads what earlier stages wrote in
the run's work directory (``work``, :mod:`neardup.pipeline.layout`): so a task's inputs and
outputs are files, and what goes between the caller and a task is a few integers. Positions
are global: a document's shard offset plus its place in the shard. The whole flow, each step
and what it reads and writes, is :mod:`neardup.pipeline.stage_table`.

lines (each shard's lines counted) -> scan (read, parse and fingerprint one shard; spill its
ids, record numbers, lengths, fingerprints and, verified, its shingle keys, set fingerprints
and set digests) -> ids (ids repeated across shards) -> dedup-ids (the documents of repeated
ids taken out of the spills) -> exact (verified: the documents whose shingle set is a copy of
an earlier one's in keep order, by digest range; each is linked to the first copy, Jaccard 1,
and left out of the candidate search)."""

from __future__ import annotations

import contextlib
import io
import itertools
import os
import pickle
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import numpy as np

from neardup import config
from neardup.core import verify_kernels as VK
from neardup.core.decide import keep_key
from neardup.core.order import lexorder
from neardup.core.similarity import ShingleSets, set_fingerprints
from neardup.errors import InputError
from neardup.io.blocks import count_line_ends, id_key, iter_blocks, line_format
from neardup.io.files import input_size, read_path
from neardup.io.rows import MEMORY_SOURCE, Rows, row_blocks
from neardup.pipeline import store
from neardup.pipeline.plan import DedupPlan
from neardup.pipeline.scan import SeenDocuments, first_kinds
from neardup.pipeline.stream import (
    block_bytes,
    concat,
    fingerprint_item,
    in_order,
    input_items,
    reads_in_blocks,
)
from neardup.pipeline.task_files import (
    by_shard,
    gather,
    gather_array,
    gather_spans,
    keep_values,
    key_stage,
    load,
    load_ids,
    read_records,
    save,
    save_records,
    shard_sets,
    slices,
    subset_sets,
)

__all__ = [
    "ByteRange",
    "by_digest",
    "copies_in",
    "count_lines",
    "drop_docs",
    "exact_copies",
    "id_buckets",
    "input_bytes",
    "key_kinds",
    "repeated_ids",
    "scan_shard",
    "set_digests",
    "shard_repeats",
]


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
    if not shard.is_range or plan.rows is not None:
        return {"lines": 0}
    return {"lines": _line_ends(plan.files[shard.first].path, shard.start, shard.end)}


def _line_ends(path: str, start: int, end: int) -> int:
    """The line ends from ``start`` to ``end`` of the file ``path``
    (:func:`~neardup.io.blocks.count_line_ends`: measured on 1M documents, 0.04 s against
    0.13 s with ``bytes.count``, two threads). A file cut short meanwhile ends the count (the
    run's check of its inputs then refuses it)."""
    n = 0
    with contextlib.closing(ByteRange(path, start, end)) as r:
        while chunk := r.read(1 << 22):
            n += count_line_ends(chunk)
    return n


def _shard_items(
    plan: DedupPlan, s: int, first_line: int, rows: Rows | None
) -> Iterator[tuple[Any, ...]]:
    """The reading items of :func:`neardup.pipeline.stream.fingerprint_files` for one shard,
    file indices those of the plan (in-memory input: its ``rows``)."""
    if rows is not None:
        for item in row_blocks(rows):
            yield ("rows", *item)
        return
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
    out: str, plan: DedupPlan, s: int, first_line: int, threads: int = 1,
    rows: Rows | None = None,
) -> dict[str, Any]:  # fmt: skip
    """Read, parse and fingerprint shard ``s`` (in-memory input: its ``rows``, which travel
    with the task); spill its arrays to ``out``.

    Bad records are skipped and returned as ``[source, line, message]``: all of them with
    ``plan.skip_bad``, else the first, the scan ending with its block (the caller raises the
    first error of the input, which may be a repeated id of an earlier shard). Repeated ids,
    within the shard or across shards, are the ids stage's (:func:`repeated_ids`), which knows
    every first.
    """
    verify = plan.verify
    bad_records: list[list[Any]] = []
    if rows is not None and len(rows) <= config.BATCH_DOCS:  # one block: no pool to start
        threads = 1

    def bad(err: InputError) -> None:
        if plan.skip_bad or not bad_records:
            bad_records.append([err.source, err.line, err.message])

    # the ids stage finds every repeat, by the id hashes kept here
    seen = SeenDocuments()
    set_parts: list[tuple[np.ndarray, ...]] = []  # of each block: sizes, sfp, digests
    items = _shard_items(plan, s, first_line, rows)
    work = lambda item: fingerprint_item(item, fper=plan.fingerprinter, keys=verify)  # noqa: E731
    with contextlib.ExitStack() as stack:
        pool = stack.enter_context(ThreadPoolExecutor(threads)) if threads > 1 else None
        batches = stack.enter_context(contextlib.closing(in_order(pool, work, items, threads + 1)))
        keys_file = stack.enter_context(store.create(os.path.join(out, "keys.u32")))
        for batch in batches:
            seen.add(batch, bad)
            if verify:  # keys go to disk block by block: the task holds one block's
                set_parts.append(_spill_sets(batch, keys_file, plan.set_fps))
            if bad_records and not plan.skip_bad:
                break  # what follows is later in the input than the error raised
        key_bytes = keys_file.tell()
    fps = concat(seen.fp_parts, np.uint64)
    arrays = {
        "fp": fps,
        "len": concat(seen.len_parts, np.int64),
        "rec": concat(seen.rec_parts, np.int64),
        "src": concat(seen.src_parts, np.int32),
    }
    arrays.update(_line_bytes(plan, seen))
    if plan.key_field is not None:  # the keep field's values and kinds
        arrays.update(prio=concat(seen.prio_parts, np.float64),
                      pkind=concat(seen.kind_parts, np.int8))  # fmt: skip
    no_shingles = 0
    if verify:
        sizes = concat([p[0] for p in set_parts], np.int64)
        koff = np.zeros(len(sizes) + 1, dtype=np.int64)
        np.cumsum(sizes, out=koff[1:])
        arrays["koff"] = koff
        if plan.set_fps:
            arrays["sfp"] = concat([p[1] for p in set_parts], np.uint64)
        digests = [p[2] for p in set_parts] or [np.zeros((0, 2), dtype=np.uint64)]
        arrays.update(by_digest(np.concatenate(digests), sizes))
        no_shingles = int(np.count_nonzero(sizes == 0))
    arrays["idh"] = concat(seen.hash_parts, np.uint64)  # for ids repeated across shards
    by_hash = np.argsort(arrays["idh"])  # the ids stage reads hash ranges (ties: any order)
    arrays.update(idh_sorted=arrays["idh"][by_hash], idh_place=by_hash.astype(np.int64))
    nbytes = save(out, **arrays) + _save_ids(out, seen.ids) + key_bytes
    nbytes += save_records(out, "bad", bad_records)
    return {"n": len(fps), "bad": len(bad_records), "first_bad": (bad_records or [None])[0],
            "bytes": nbytes, "no_shingles": no_shingles}  # fmt: skip


def _line_bytes(plan: DedupPlan, seen: SeenDocuments) -> dict[str, np.ndarray]:
    """Each document's line bytes (``nb``) for a run that writes its lines in place."""
    if not plan.placed:
        return {}
    if seen.nb_missing:
        raise RuntimeError("a block of a placed run's input was read without its line bytes")
    nb = concat(seen.nb_parts, np.int64)
    small = nb.max(initial=0) <= 0xFFFFFFFF  # lines are at most MAX_RECORD_BYTES: 4 bytes each
    return {"nb": nb.astype(np.uint32) if small else nb}


def _save_ids(out: str, ids: list[Any]) -> int:
    """The ids of a shard's documents as ``ids.pkl``; the bytes written."""
    with store.create(os.path.join(out, "ids.pkl")) as f:
        pickle.dump(ids, f, protocol=pickle.HIGHEST_PROTOCOL)
        return f.tell()


def _spill_sets(batch: Any, keys_file: Any, sfp: bool) -> tuple[Any, ...]:
    """The shingle keys of a block's documents appended to ``keys_file``; returns their set
    sizes, set fingerprints (with ``sfp``, else None) and set digests."""
    given = np.asarray(batch.key_offsets, dtype=np.int64)
    offsets = given - given[0]
    sizes = np.diff(offsets)
    keys = np.ascontiguousarray(batch.keys[given[0] : given[-1]], dtype=np.uint32)
    store.write_values(keys_file, keys)
    sets = ShingleSets(offsets, keys)
    return sizes, set_fingerprints(sets, threads=1) if sfp else None, set_digests(sets)


#: The scan spill's set digests of the documents with shingles, sorted by digest then place:
#: the digest's first and second 8 bytes and the document's place in the shard.
_DIGESTS = ("dig_hi", "dig_lo", "dig_place")


def set_digests(sets: ShingleSets) -> np.ndarray:
    """A 128-bit digest of each shingle set's keys
    (:func:`neardup.core.verify_kernels.set_digests`, compiled, without the GIL), as uint64
    (n, 2): equal sets have equal digests, and different sets (about 2**-128 for a pair) never
    do in practice.

    Parameters
    ----------
    sets : ShingleSets
        CSR shingle sets (sorted unique uint32 keys per document).

    Returns
    -------
    ndarray of uint64, shape (n, 2)
        The digest's two 64-bit lanes.

    Examples
    --------
    >>> d = set_digests(ShingleSets(np.array([0, 2, 4, 5]), np.array([1, 2, 1, 2, 3], np.uint32)))
    >>> (d[0] == d[1]).all(), (d[0] == d[2]).all()
    (np.True_, np.False_)
    """
    n = len(sets.offsets) - 1
    out = np.empty((n, 2), dtype=np.uint64)
    offsets = np.ascontiguousarray(sets.offsets, dtype=np.int64)
    keys = np.ascontiguousarray(sets.keys, dtype=np.uint32)
    VK.set_digests(offsets, keys, out, 0, n)
    return out


def by_digest(digests: np.ndarray, sizes: np.ndarray) -> dict[str, np.ndarray]:
    """The arrays :data:`_DIGESTS` of the documents with shingles, sorted by the digest's first
    half: the exact stage reads a range of them of each shard (and orders the range itself).

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
        document's place), ``dig_hi`` ascending.
    """
    place = np.flatnonzero(sizes > 0).astype(np.int64)
    hi, lo = digests[place, 0], digests[place, 1]
    order = np.argsort(hi)  # a sort of one uint64 key: a tenth of a sort of three
    return dict(zip(_DIGESTS, (hi[order], lo[order], place[order]), strict=True))


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
    order = np.argsort(h)  # equal hashes side by side, in any order: their places are kept
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
    for s, p in by_shard(offsets, docs):
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
            if plan.rows is None:
                msg = (f"duplicate id {ident(p)!r} (first at {plan.files[int(fsrc[fj])].path}:"
                       f"{int(frec[fj])}); ids must be unique: choose another --id-field or "
                       "use --skip-bad")  # fmt: skip
                source = plan.files[int(src[j])].path
            else:  # in-memory input: records are positions
                msg = f"duplicate id {ident(p)!r} (first at document {int(frec[fj])}); ids must be unique"
                source = MEMORY_SOURCE
            found.append([s, j, source, int(rec[j]), msg])
    return found


def drop_docs(out: str, work: str, plan: DedupPlan, s: int, buckets: int) -> dict[str, Any]:
    """Shard ``s``'s spill without the documents whose ids repeat an earlier one's (found by
    the ids stage's ``buckets`` tasks; skipped as bad)."""
    keep = np.ones(len(load(work, "scan", s, "fp")), dtype=bool)
    keep[shard_repeats(work, buckets, s)[0]] = False
    names = ("fp", "len", "rec", "src", "idh") + (("prio", "pkind") if plan.key_field else ())
    names += ("nb",) if plan.placed else ()
    arrays = {k: np.asarray(load(work, "scan", s, k))[keep] for k in names}
    no_shingles = 0
    if plan.verify:
        sets = _sets(work, s)
        sub = subset_sets(sets, np.flatnonzero(keep))
        arrays["koff"] = sub.offsets
        if plan.set_fps:
            arrays["sfp"] = np.asarray(load(work, "scan", s, "sfp"))[keep]
        with store.create(os.path.join(out, "keys.u32")) as f:
            store.write_values(f, sub.keys)
        no_shingles = int(np.count_nonzero(sub.sizes == 0))
        place = np.asarray(load(work, "scan", s, "dig_place"))
        live = keep[place]  # the order by digest stays: new places keep the old ones' order
        arrays.update({k: np.asarray(load(work, "scan", s, k))[live] for k in _DIGESTS[:2]},
                      dig_place=(np.cumsum(keep) - 1)[place[live]])  # fmt: skip
    nbytes = save(out, **arrays)
    nbytes += _save_ids(out, list(itertools.compress(load_ids(work, s), keep.tolist())))
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
    order = lexorder((p, key, d[:, 1], d[:, 0]))  # each class in keep order: its first leads
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
    order = lexorder((d[:, 1], d[:, 0]))
    same = np.all(d[order][1:] == d[order][:-1], axis=1)
    shared = order[np.r_[same, False] | np.r_[False, same]]  # in a class of two or more
    shared = shared[np.argsort(p[shared], kind="stable")]  # read shard by shard, in order
    return d[shared], p[shared]


def copies_in(work: str, tasks: int, s: int) -> np.ndarray:
    """The global positions of shard ``s``'s documents that the exact stage's ``tasks`` tasks
    linked to an earlier copy of their shingle set (ascending within each task's slice)."""
    pairs = gather(work, "exact", range(tasks), s, {"pairs": np.int64})["pairs"]
    return pairs.reshape(-1, 2)[:, 1].copy()


def _sets(work: str, s: int) -> ShingleSets:
    """Shard ``s``'s shingle sets as the scan spilled them (:func:`shard_sets`)."""
    return shard_sets(work, s)


def key_kinds(work: str, plan: DedupPlan, s: int) -> list[list[Any]]:
    """The first document of each kind of keep value in shard ``s``
    (:func:`~neardup.pipeline.scan.first_kinds`)."""
    src, rec = load(work, "scan", s, "src"), load(work, "scan", s, "rec")
    return first_kinds(np.asarray(load(work, "scan", s, "pkind")), src, rec, list(plan.files))


def input_bytes(plan: DedupPlan) -> int:
    """Total size of the inputs as stored."""
    return sum(input_size(f.path) for f in plan.files)

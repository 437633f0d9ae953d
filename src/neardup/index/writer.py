"""The write half of :class:`neardup.index.Index`: add, remove, compact, each one durable commit.

Every change writes new immutable files, then switches the manifest atomically (see
:mod:`neardup.index.storage`); a crash at any point leaves the last committed state.
"""

from __future__ import annotations

import copy
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import numpy as np

from neardup import config
from neardup.config import default_threads
from neardup.core.bits import as_fingerprints
from neardup.core.sketch import Sketches, as_sketches
from neardup.errors import IdError
from neardup.index import _kernels
from neardup.index.codec import set_codec, write_table
from neardup.index.segments import Segment, concat_strings, convert_ids, show_id
from neardup.index.storage import remove_unreferenced, write_array, write_manifest

__all__ = ["IndexWriter"]


class IndexWriter:
    """Mixin of :class:`neardup.index.Index` holding its writes (needs ``mode="w"``)."""

    def _check_writable(self) -> None:
        self._check_open()
        if self.mode != "w" or self._lock is None:
            raise ValueError(f"index {self.path} is open read-only; open it with mode='w'")

    def _next_name(self, body: dict[str, Any]) -> str:
        name = f"s{body['next_file']:08d}"
        body["next_file"] += 1
        return name

    def _write_segment(
        self,
        name: str,
        fps: np.ndarray,
        keys: np.ndarray,
        blob: Any,
        off: Any,
        codec: str | None = None,
        sketches: Sketches | None = None,
    ) -> dict[str, Any]:
        order = np.argsort(fps, kind="stable")
        fps = fps[order]
        keys = keys[order]
        files: dict[str, Any] = {}
        if sketches is not None:
            files["sketch"] = write_array(self.path, f"{name}.sketch.npy", sketches.words[order])
            files["ssize"] = write_array(self.path, f"{name}.ssize.npy", sketches.sizes[order])
        if blob is not None:
            blob, off = _kernels._gather_strings(blob, off, order.astype(np.int64))
        distinct = fps[np.concatenate(([True], fps[1:] != fps[:-1]))] if len(fps) else fps
        kord = np.argsort(keys, kind="stable").astype(np.uint32 if len(keys) < 2**32 else np.int64)

        def table(t: int) -> tuple[str, dict[str, Any]]:
            v = self.layout.apply(distinct, t)
            v.sort()
            return f"t{t}", write_table(self.path, f"{name}.t{t}.npy", v, codec)

        todo = [t for t in range(self.layout.n_tables) if not self._spec.identity[t]]
        with ThreadPoolExecutor(min(default_threads(), max(1, len(todo)))) as ex:
            files.update(ex.map(table, todo))
        files["fp"] = write_table(self.path, f"{name}.fp.npy", fps, codec)
        files["key"] = write_array(self.path, f"{name}.key.npy", keys)
        files["kord"] = write_array(self.path, f"{name}.kord.npy", kord)
        if blob is not None:
            files["sblob"] = write_array(self.path, f"{name}.sblob.npy", blob)
            files["soff"] = write_array(self.path, f"{name}.soff.npy", off)
        entry = {"name": name, "rows": len(fps), "files": files, "deleted": None}
        if codec is not None:
            entry["codec"] = codec
        return entry

    def _gather(
        self, segs: list[Segment]
    ) -> tuple[np.ndarray, np.ndarray, Any, Any, Sketches | None]:
        """Live rows of ``segs`` concatenated, older segments first (with their sketches in an
        index that keeps them)."""
        fps, keys, blobs, offs, words, sizes = [], [], [], [], [], []
        for s in segs:
            rows = s.live_rows()
            fps.append(s.fps[rows])
            keys.append(s.keys[rows])
            if s.sketch is not None:
                words.append(s.sketch[rows])
                sizes.append(s.ssize[rows])
            if s.blob is not None:
                b, o = _kernels._gather_strings(s.blob, s.off, rows)
                blobs.append(b)
                offs.append(o)
        blob = off = None
        if self.id_type == "str":
            blob, off = concat_strings(blobs, offs)
        sketches = None
        if self.sketch_words is not None:
            sketches = Sketches(np.concatenate(words), np.concatenate(sizes))
        return np.concatenate(fps), np.concatenate(keys), blob, off, sketches

    def _commit(self, body: dict[str, Any]) -> None:
        body["generation"] += 1
        write_manifest(self.path, body)
        self._install(body)
        remove_unreferenced(self.path, body)

    def add(
        self,
        fingerprints: Sequence[int] | np.ndarray | None,
        ids: Sequence[int] | Sequence[str] | np.ndarray | None = None,
        *,
        sketches: Sketches | tuple[Any, Any] | None = None,
    ) -> None:
        """Add fingerprints with their ids and commit them durably.

        Parameters
        ----------
        fingerprints : sequence of int or ndarray, or None
            uint64 fingerprints (bit 63 most significant). In an index with sketches they are
            the sketches' first words: pass None (or exactly those).
        ids : sequence of int or str, optional
            One id per fingerprint, all int64 or all str (the first add fixes the kind); ids
            must not already be in the index. ``None`` numbers the fingerprints with integer
            ids following the largest integer id added so far.
        sketches : Sketches, optional
            Required by an index with sketches (:attr:`sketch_words`), refused by others: the
            MinHash sketch and shingle count of each document,
            ``neardup.core.sketch.set_sketches((offsets, keys), words=index.sketch_words)``
            from ``Fingerprinter().features_many(texts)``.

        Raises
        ------
        neardup.errors.IdError
            A ``ValueError`` naming the first bad id and its position: an id already in the
            index, repeated in the batch, of the other kind, not an int64 or str, or a count or
            shape that does not match the fingerprints. Nothing is written.
        ValueError
            Sketches missing, unexpected, malformed, or fingerprints other than their first
            words.
        """
        self._check_writable()
        sk = self._check_sketches(fingerprints, sketches)
        fp = sk.fingerprints if sk is not None else as_fingerprints(fingerprints, "fingerprints")
        body = copy.deepcopy(self._body)
        if ids is None:
            if self.id_type == "str":
                raise ValueError("this index has string ids; pass ids to add()")
            start = int(body["next_id"])
            ids = np.arange(start, start + len(fp), dtype=np.int64)
        conv = convert_ids(ids, len(fp), self.id_type, unique=True)
        if len(fp) == 0:
            return
        found, _, _ = self._find(conv)
        if len(found):
            k = int(found.min())
            raise IdError(
                f"id {show_id(conv.values[k])} is already in the index; remove it first", k
            )
        body["id_type"] = conv.kind
        if conv.kind == "int64":
            body["next_id"] = max(int(body["next_id"]), int(conv.keys.max()) + 1)
        # merge the new run with the trailing delta runs while they are not much larger
        delta = self._segs[1:]
        j = len(delta)
        acc = len(fp)
        while j > 0 and (
            2 * acc >= delta[j - 1].live
            or len(self._segs) - (len(delta) - j) + 1 > (self.max_segments or config.MAX_SEGMENTS)
        ):
            j -= 1
            acc += delta[j].live
        merged = delta[j:]
        name = self._next_name(body)
        if merged:
            f0, k0, b0, o0, s0 = self._gather(merged)
            fps = np.concatenate([f0, fp])
            keys = np.concatenate([k0, conv.keys])
            blob, off = (
                concat_strings([b0, conv.blob], [o0, conv.off])
                if conv.kind == "str"
                else (None, None)
            )
            if sk is not None:
                assert s0 is not None
                sk = Sketches(
                    np.concatenate([s0.words, sk.words]), np.concatenate([s0.sizes, sk.sizes])
                )
        else:
            fps, keys, blob, off = fp, conv.keys, conv.blob, conv.off
        entry = self._write_segment(name, fps, keys, blob, off, body.get("codec"), sk)
        gone = {s.name for s in merged}
        body["segments"] = [e for e in body["segments"] if e["name"] not in gone] + [entry]
        self._commit(body)

    def _check_sketches(self, fingerprints: Any, sketches: Any) -> Sketches | None:
        """The sketches of an :meth:`add` checked against the index and the fingerprints."""
        words = self.sketch_words
        if words is None:
            if sketches is not None:
                raise ValueError(
                    f"index {self.path} keeps no sketches; create one with threshold= (or "
                    "`neardup index create --threshold`) to keep them"
                )
            if fingerprints is None:
                raise ValueError("pass the fingerprints to add")
            return None
        if sketches is None:
            raise ValueError(
                f"index {self.path} keeps a MinHash sketch per entry: pass sketches= "
                f"(neardup.core.sketch.set_sketches(shingle sets, words={words}))"
            )
        sk = as_sketches(sketches, words)
        if fingerprints is not None:
            fp = as_fingerprints(fingerprints, "fingerprints")
            if fp.shape != (len(sk),) or not np.array_equal(fp, sk.fingerprints):
                raise ValueError(
                    f"index {self.path} searches the sketches' first words: pass "
                    "fingerprints=None or sketches.fingerprints"
                )
        return sk

    def remove(
        self, ids: Sequence[int] | Sequence[str] | np.ndarray, *, missing: str = "error"
    ) -> int:
        """Remove entries by id and commit; return how many were removed.

        Parameters
        ----------
        ids : sequence of int or str
            Ids to remove (repeats are removed once).
        missing : {"error", "ignore"}
            ``"error"``: an id not in the index raises ``KeyError`` and nothing is removed.
            ``"ignore"``: unknown ids are skipped (the return value counts what was removed).
        """
        self._check_writable()
        if missing not in ("error", "ignore"):
            raise ValueError(f"missing must be 'error' or 'ignore' (got {missing!r})")
        if self.id_type is None:
            conv = convert_ids(ids, None, None)
        else:
            conv = convert_ids(ids, None, self.id_type)
        if len(conv.keys) == 0:
            return 0
        owner, si, rows = self._find(conv)
        if missing == "error":
            hit = np.zeros(len(conv.keys), dtype=bool)
            hit[owner] = True
            if not hit.all():
                first = int(np.flatnonzero(~hit)[0])
                raise KeyError(
                    f"id {show_id(conv.values[first])} is not in the index "
                    f"({int((~hit).sum())} of {len(hit)} ids are not); nothing removed"
                )
        if len(rows) == 0:
            return 0
        body = copy.deepcopy(self._body)
        removed = 0
        keep_entries = []
        for s_idx, (seg, e) in enumerate(zip(self._segs, body["segments"], strict=True)):
            r = np.unique(rows[si == s_idx])
            if len(r) == 0:
                keep_entries.append(e)
                continue
            removed += len(r)
            dead = np.union1d(seg.dead, r).astype(np.int64)
            if len(dead) == seg.n:
                continue  # every row removed: drop the segment
            e["deleted"] = write_array(
                self.path, f"{seg.name}.del{body['generation'] + 1}.npy", dead
            )
            keep_entries.append(e)
        body["segments"] = keep_entries
        self._commit(body)
        return removed

    def compact(self, compress: bool | None = None) -> None:
        """Merge every run into one sorted base without removed entries, and commit.

        Parameters
        ----------
        compress : bool, optional
            ``True`` converts the index to compressed tables (:mod:`neardup.index.codec`),
            ``False`` to plain ones; later runs are written the same way. ``None`` keeps the
            index's setting. A conversion rewrites the base even when there is nothing to merge.
        """
        self._check_writable()
        body = copy.deepcopy(self._body)
        codec = body.get("codec") if compress is None else ("ef" if compress else None)
        convert = codec != body.get("codec")
        if not convert and len(self._segs) <= 1 and all(s.live == s.n for s in self._segs):
            return
        set_codec(body, codec)
        live = [s for s in self._segs if s.live]
        if live:
            fps, keys, blob, off, sk = self._gather(live)
            name = self._next_name(body)
            body["segments"] = [self._write_segment(name, fps, keys, blob, off, codec, sk)]
        else:
            body["segments"] = []
        self._commit(body)

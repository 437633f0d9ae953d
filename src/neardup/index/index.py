"""The persistent online index: sorted permuted runs on disk, add / query / remove / compact.

An index is a list of immutable *segments* (sorted runs). The first is the base; later ones are
the delta, one small run per :meth:`Index.add` call, merged geometrically so there are never more
than ``max_segments``. :meth:`Index.compact` merges everything into one base. Each segment holds
its fingerprints sorted (which doubles as the identity-permuted table 0), its other permuted
tables over the distinct fingerprints, and the ids. A match found in table ``t`` is permuted back
to a fingerprint and mapped to the segment's rows by binary search in the sorted fingerprints.
Removed rows are listed per segment (tombstones) until a merge drops them.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Sequence
from typing import Any

import numpy as np

from neardup.config import DEFAULT_DEDUP_DISTANCE
from neardup.core.cost import choose_query_blocks as choose_index_blocks
from neardup.core.layout import Layout
from neardup.core.similarity import check_threshold, distance_for_threshold
from neardup.core.sketch import SKETCH_WORDS, check_sketch_words
from neardup.index import _kernels
from neardup.index.base import IndexBase
from neardup.index.codec import set_codec, verify_table
from neardup.index.matches import IndexMatches, IndexMatching, VerifiedMatches
from neardup.index.probe import IndexProbe
from neardup.index.segments import (
    Ids,
    Segment,
    convert_ids,
    expand_ranges,
    segment_files,
)
from neardup.index.storage import (
    FORMAT_VERSION,
    MAGIC,
    CorruptIndexError,
    WriterLock,
    create_directory,
    read_manifest,
    remove_unreferenced,
    verify_file,
)
from neardup.index.writer import IndexWriter

__all__ = ["Index", "IndexMatches", "VerifiedMatches", "choose_index_blocks"]


class Index(IndexWriter, IndexMatching, IndexProbe, IndexBase):
    """A persistent index of 64-bit fingerprints answering "what is within k bits of F?".

    Create one with :meth:`create`, open one with :meth:`open`. A writer (``mode="w"``) holds an
    exclusive lock; any number of readers (``mode="r"``) see the snapshot committed when they
    opened (or last called :meth:`refresh`). Every :meth:`add`, :meth:`remove` and
    :meth:`compact` is committed durably before it returns; a crash at any point leaves the last
    committed state.

    Fingerprints are unsigned 64-bit integers, bit 63 the most significant; a match is
    ``popcount(a ^ b) <= distance``. Ids are int64 or str (fixed by the first :meth:`add`) and
    unique in the index.

    Examples
    --------
    >>> import tempfile
    >>> path = tempfile.mkdtemp() + "/idx"
    >>> with Index.create(path, distance=3) as ix:
    ...     ix.add([0b1011, 0xFFFF << 40], ids=[7, 8])
    ...     ix.query([0b1000, 0b1011])
    [[(7, 2)], [(7, 0)]]
    """

    #: Most segments (base + delta runs) before add() merges delta runs.
    max_segments: int | None = None  # None: config.MAX_SEGMENTS

    def __init__(self, path: str | os.PathLike, mode: str = "r", *, _lock: Any = None) -> None:
        if mode not in ("r", "w"):
            raise ValueError(f"mode must be 'r' or 'w' (got {mode!r})")
        self.path = os.fspath(path)
        self.mode = mode
        self._lock = _lock
        self._segs: list[Segment] = []
        self._body: dict[str, Any] = {}
        self._closed = False
        try:
            if mode == "w" and self._lock is None:
                read_manifest(self.path)  # clear error before creating a LOCK file
                self._lock = WriterLock(self.path)
            self._load()
            if mode == "w":
                remove_unreferenced(self.path, self._body)
        except BaseException:
            self.close()
            raise

    # ------------------------------------------------------------------ opening and closing
    @classmethod
    def create(
        cls,
        path: str | os.PathLike,
        distance: int | None = None,
        blocks: int | None = None,
        *,
        expected_size: int = 1_000_000,
        compress: bool = False,
        threshold: float | None = None,
        sketch_words: int | None = None,
    ) -> Index:
        """Create an empty index in directory ``path`` and open it for writing.

        Parameters
        ----------
        path : str or PathLike
            Directory; created if missing (with its parents), else it must be empty. A
            ``redis://host:port/db?name=NAME`` location creates the index in Redis.
        distance : int, optional
            Largest Hamming distance (bits, inclusive) queries can ask for. Default:
            :data:`neardup.config.DEFAULT_DEDUP_DISTANCE` (6: dedup's, for the ``dedup --against``
            an index serves), or with ``threshold`` the candidate distance of that threshold
            (:func:`neardup.core.similarity.distance_for_threshold`: 10 bits at 0.8).
        blocks : int, optional
            Blocks the 64 bits are split into; the index keeps ``C(blocks, distance)`` permuted
            tables of 8 bytes per fingerprint each. ``None`` chooses the fastest layout for
            ``expected_size`` fingerprints (:func:`choose_index_blocks`); with ``threshold``,
            ``distance + 1``: the fewest tables (11 at 10 bits), as fast for the batches of
            ``dedup --against``, which search the fingerprints by the batch engine, and about a
            tenth of the disk of the fastest layout for single queries at 1M entries (README).
        expected_size : int
            Fingerprints the index is expected to hold (only used when ``blocks`` is None).
        compress : bool
            Store every table in Elias-Fano form (:mod:`neardup.index.codec`, about ``66 - log2(n)``
            bits per fingerprint per table instead of 64, same answers); :meth:`compact` converts.
        threshold : float, optional
            Create an index for verified dedup down to this Jaccard threshold: it keeps, per
            entry, a MinHash sketch of the document's shingle set (``sketch_words`` uint64) and
            its shingle count (uint32), and its fingerprints are the sketches' first words (the
            set fingerprints of :func:`neardup.core.similarity.set_fingerprints`). Adds then
            need sketches (:meth:`add`); :meth:`verified_query` and ``neardup dedup --against``
            drop a document only when its estimated Jaccard with an entry is ``>= threshold``.
            Not in Redis.
        sketch_words : int, optional
            Words per sketch with ``threshold`` (2 to 64, default 16: 128 bytes; more words
            estimate more closely, see the README's verified dedup section).

        The index is built in a temporary directory beside ``path`` and renamed into place,
        so an interrupted ``create`` leaves ``path`` as it was.

        Raises
        ------
        FileExistsError
            If ``path`` already holds an index, is a file, or is a non-empty directory.
        ValueError
            For an invalid ``distance``/``blocks``.
        """
        words = None
        if threshold is not None:
            threshold = check_threshold(threshold)
            words = SKETCH_WORDS if sketch_words is None else sketch_words
            check_sketch_words(words)
            if distance is None:
                distance = distance_for_threshold(threshold)
        elif sketch_words is not None:
            raise ValueError("sketch_words= needs threshold= (an index for verified dedup)")
        if distance is None:  # an index serves dedup --against: dedup's distance
            distance = DEFAULT_DEDUP_DISTANCE
        if isinstance(path, str) and path.startswith(("redis://", "rediss://", "unix://")):
            if words is not None:
                raise ValueError(
                    f"{path}: the Redis backend keeps no sketches; create an index for verified "
                    "dedup (threshold=) in a directory"
                )
            from neardup.index.redis import RedisIndex

            return RedisIndex.create(path, distance, blocks, expected_size=expected_size)  # type: ignore[return-value]
        if blocks is None and words is not None:
            blocks = distance + 1
        elif blocks is None:
            blocks = choose_index_blocks(max(1, int(expected_size)), distance)
        layout = Layout(blocks, distance)
        p = os.fspath(path)
        body = {
            "magic": MAGIC,
            "format_version": FORMAT_VERSION,
            "byte_order": sys.byteorder,
            "fingerprint_dtype": "<u8",
            "distance": layout.distance,
            "blocks": layout.blocks,
            "tables": layout.n_tables,
            "id_type": None,
            "generation": 0,
            "next_file": 0,
            "next_id": 0,
            "segments": [],
        }
        if words is not None:
            body["sketch_words"] = words
        set_codec(body, "ef" if compress else None)
        lock = create_directory(p, body)
        return cls(p, "w", _lock=lock)

    @classmethod
    def open(cls, path: str | os.PathLike, mode: str = "r") -> Index:
        """Open an existing index: ``mode="r"`` for a read-only snapshot, ``"w"`` to write.

        Opening memory-maps the array files and checks their sizes and headers against the
        manifest (a truncated file is reported by name); content checksums are checked by
        :meth:`verify`. Raises :class:`IndexLockedError` when ``mode="w"`` and another process
        writes the index. A ``redis://host:port/db?name=NAME`` location opens the index stored
        in Redis (:class:`neardup.index.redis.RedisIndex`, same API and answers).
        """
        if isinstance(path, str) and path.startswith(("redis://", "rediss://", "unix://")):
            from neardup.index.redis import RedisIndex

            return RedisIndex.open(path, mode)  # type: ignore[return-value]
        return cls(path, mode)

    def _load(self) -> None:
        for attempt in range(10):
            body = read_manifest(self.path)
            try:
                self._install(body)
                return
            except CorruptIndexError:
                # a writer may have committed and deleted files between our two reads
                if self.mode == "w" or attempt == 9:
                    raise
                if read_manifest(self.path)["generation"] == body["generation"]:
                    raise

    def _install(self, body: dict[str, Any]) -> None:
        try:
            layout = Layout(body["blocks"], body["distance"])
        except ValueError as e:
            raise CorruptIndexError(
                f"{self.path}: the manifest's layout is invalid ({e})"
            ) from None
        if layout.n_tables != body["tables"]:
            raise CorruptIndexError(
                f"{self.path}: the manifest records {body['tables']} tables, its layout has "
                f"{layout.n_tables}; the manifest is damaged, restore the index"
            )
        self.layout = layout
        self._spec = self.layout.spec
        # load the compiled table kernels now (about a second, once per process) rather than
        # inside the first add or query
        self.layout.apply(np.zeros(1, dtype=np.uint64), 0)
        old = {s.name: s for s in self._segs}
        segs = []
        for e in body["segments"]:
            s = old.get(e["name"])
            if s is None:
                s = Segment(self.path, e, self._spec)
            elif s.entry.get("deleted") != e.get("deleted"):
                s.set_deleted(self.path, e.get("deleted"))
            s.entry = e
            segs.append(s)
        self._segs = segs
        self._body = body

    def refresh(self) -> None:
        """Readers: move to the newest committed state."""
        self._load()

    def close(self) -> None:
        """Release the writer lock and the memory maps. Committed data needs no flush."""
        self._segs = []
        self._closed = True
        if self._lock is not None:
            self._lock.release()
            self._lock = None

    def __del__(self) -> None:
        lock = getattr(self, "_lock", None)
        if lock is not None:
            lock.release()

    # ------------------------------------------------------------------ properties
    @property
    def codec(self) -> str | None:
        """``"ef"`` for compressed tables (:mod:`neardup.index.codec`), ``None`` for plain."""
        return self._body.get("codec")

    @property
    def sketch_words(self) -> int | None:
        """Words of the MinHash sketch kept per entry, or None for an index without sketches."""
        return self._body.get("sketch_words")

    @property
    def id_type(self) -> str | None:
        """``"int64"``, ``"str"`` or ``None`` before the first add."""
        return self._body.get("id_type")

    @property
    def generation(self) -> int:
        """Number of commits so far."""
        return int(self._body["generation"])

    def __len__(self) -> int:
        return sum(s.live for s in self._segs)

    def __contains__(self, id: object) -> bool:
        if self.id_type is None or isinstance(id, bool):
            return False
        if isinstance(id, str) != (self.id_type == "str"):
            return False
        if not isinstance(id, (str, int, np.integer)):
            return False
        try:
            ids = convert_ids([id], None, self.id_type)
        except ValueError:
            return False
        return len(self._find(ids)[0]) > 0

    def contains(self, ids: Sequence[int] | Sequence[str] | np.ndarray) -> np.ndarray:
        """Batch form of ``id in index``: a bool per id.

        Raises
        ------
        neardup.errors.IdError
            For ids that are not all int64 or all str, or of the other kind than the index's
            (where ``in`` says False).
        """
        self._check_open()
        conv = convert_ids(ids, None, self.id_type)
        found = np.zeros(len(conv.keys), dtype=bool)
        if self.id_type is not None:
            found[self._find(conv)[0]] = True
        return found

    def info(self) -> dict[str, Any]:
        """Layout, sizes and segments of the committed state."""
        files = [(e, s) for s in self._body["segments"] for e in segment_files(s)]
        return {
            "path": self.path,
            "format_version": self._body["format_version"],
            "distance": self.distance,
            "blocks": self.blocks,
            "tables": self.layout.n_tables,
            "codec": self.codec,
            "sketch_words": self.sketch_words,
            "id_type": self.id_type,
            "entries": len(self),
            "generation": self.generation,
            "segments": [
                {"name": s.name, "rows": s.n, "removed": s.n - s.live} for s in self._segs
            ],
            "bytes": sum(e["bytes"] for e, _ in files),
        }

    def verify(self) -> None:
        """Recompute the CRC-32 of every file of the committed state (and check that each
        sketch's first word is its entry's fingerprint).

        Raises
        ------
        CorruptIndexError
            Naming every missing, truncated or corrupt file.
        """
        bad = []
        for seg in self._body["segments"]:
            for e in segment_files(seg):
                try:
                    verify_file(self.path, e)
                    verify_table(self.path, e)  # a compressed table is also decoded and checked
                except CorruptIndexError as err:
                    bad.append(str(err))
        if not bad:
            bad = [s for s in map(self._check_sketch_words, self._segs) if s]
        if bad:
            raise CorruptIndexError("; ".join(bad))

    def _check_sketch_words(self, seg: Segment) -> str:
        if seg.sketch is None or np.array_equal(seg.sketch[:, 0], seg.fps):
            return ""
        row = int(np.flatnonzero(seg.sketch[:, 0] != seg.fps)[0])
        name = os.path.join(self.path, seg.entry["files"]["sketch"]["name"])
        return f"{name}: the sketch of row {row} does not start with its fingerprint; the index is damaged"

    # ------------------------------------------------------------------ lookups by id
    def _find(self, ids: Ids) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(id index, segment index, row) of every live row holding one of ``ids``."""
        self._check_open()
        parts: list[tuple[np.ndarray, np.ndarray, np.ndarray]] = []
        for si, seg in enumerate(self._segs if len(ids.keys) else []):
            lo, hi = _kernels._lookup(seg.keys, seg.kord, ids.keys)
            owner, pos = expand_ranges(lo, hi)
            if len(owner) == 0:
                continue
            rows = seg.kord[pos].astype(np.int64)
            keep = seg.alive(rows)
            if ids.kind == "str":
                keep &= _kernels._strings_equal(seg.blob, seg.off, rows, ids.blob, ids.off, owner)
            parts.append((owner[keep], np.full(int(keep.sum()), si, np.int64), rows[keep]))
        if not parts:
            e = np.empty(0, dtype=np.int64)
            return e, e.copy(), e.copy()
        return tuple(np.concatenate(p) for p in zip(*parts, strict=True))  # type: ignore[return-value]

    # ------------------------------------------------------------------ writes
    def _check_open(self) -> None:
        if self._closed:
            raise ValueError(f"index {self.path} is closed; open it again with Index.open")

"""The persistent online index: sorted permuted runs on disk, add / query / remove / compact.

An index is a list of immutable *segments* (sorted runs). The first is the base; later ones are
the delta, one small run per :meth:`Index.add` call, merged by size tiers as log-structured
stores do (``merge_factor`` runs of a tier become one run of the next, the base included), so a
row is rewritten about ``log(n)`` times and there are never more than ``max_segments``.
:meth:`Index.compact` merges everything into one base. Each segment holds
its fingerprints sorted (which doubles as the identity-permuted table 0), its other permuted
tables over the distinct fingerprints, and the ids. A match found in table ``t`` is permuted back
to a fingerprint and mapped to the segment's rows by binary search in the sorted fingerprints.
Removed rows are listed per segment (tombstones) until a merge drops them.
"""

from __future__ import annotations

import contextlib
import copy
import os
import sys
import threading
from collections.abc import Iterator, Sequence
from typing import Any

import numpy as np

from neardup.config import DEFAULT_DEDUP_DISTANCE
from neardup.core.bits import as_fingerprints
from neardup.core.cost import choose_query_blocks as choose_index_blocks
from neardup.core.layout import Layout
from neardup.core.matches import Matches
from neardup.core.order import lexorder
from neardup.core.similarity import check_threshold, distance_for_threshold
from neardup.core.sketch import SKETCH_WORDS, Sketches, as_sketches, check_sketch_words
from neardup.errors import IdError
from neardup.index import merger, probe, verified, writer
from neardup.index.backend import CAPABILITIES, IndexBackend, IndexMatches
from neardup.index.codec import set_codec, verify_table
from neardup.index.redis_store import is_redis_url
from neardup.index.segments import Ids, Segment, convert_ids, segment_files, show_id
from neardup.index.storage import (
    FORMAT_VERSION,
    MAGIC,
    CorruptIndexError,
    WriterLock,
    create_directory,
    read_manifest,
    referenced_files,
    remove_unreferenced,
    retire,
    verify_file,
    write_array,
    write_manifest,
)

#: IndexMatches: the deprecated flat form of Matches, kept importable from here for the service
__all__ = ["Index", "IndexMatches", "choose_index_blocks"]


def _copy_body(body: dict[str, Any]) -> dict[str, Any]:
    """A manifest body to change for the next commit: a copy of it, its segment list and each
    segment entry (changes replace an entry's keys, never edit their values in place)."""
    return {**body, "segments": [dict(e) for e in body["segments"]]}


class Index(IndexBackend):
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

    capabilities = CAPABILITIES
    backend = "local"
    #: Most segments (base + delta runs) before add() merges delta runs.
    max_segments: int = writer.MAX_SEGMENTS
    #: Runs of one size tier before add() merges them into a run of the next tier, the size
    #: ratio of two tiers (:func:`neardup.index.writer.merge_start`): larger merges less often
    #: and leaves more runs for queries to probe.
    merge_factor: int = writer.MERGE_FACTOR
    #: Merge runs in a background thread of the writer (:mod:`neardup.index.merger`) instead of
    #: in add(): an add then only writes its own rows; readers are never blocked either way.
    background_merges: bool = False

    def __init__(self, path: str | os.PathLike, mode: str = "r", *, _lock: Any = None) -> None:
        if mode not in ("r", "w"):
            raise ValueError(f"mode must be 'r' or 'w' (got {mode!r})")
        self.path = os.fspath(path)
        self.mode = mode
        self._lock = _lock
        self._segs: list[Segment] = []
        self._body: dict[str, Any] = {}
        self._few: probe.FewPlan | None = None
        self._wlock = threading.RLock()
        self._merger: merger.BackgroundMerger | None = None
        self._writing: set[str] = set()
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
            tenth of the disk of the fastest layout for single queries at 1M entries (measured in
            docs/benchmarks/index-store.md).
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
            estimate more closely; docs/guides/index.md, "Against an index: sketches").

        Notes
        -----
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
        if is_redis_url(path):
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
            body["threshold"] = threshold
        set_codec(body, "ef" if compress else None)
        lock = create_directory(p, body)
        return cls(p, "w", _lock=lock)

    @classmethod
    def open(cls, path: str | os.PathLike, mode: str = "r") -> IndexBackend:  # type: ignore[override]
        """Open an existing index: ``mode="r"`` for a read-only snapshot, ``"w"`` to write.

        The same as :func:`neardup.open_index` (a ``redis://host:port/db?name=NAME`` location
        opens the index stored in Redis, :class:`neardup.index.redis.RedisIndex`, same API and
        answers). Opening memory-maps the array files and checks their sizes and headers
        against the manifest (a truncated file is reported by name); content checksums are
        checked by :meth:`verify`. Raises :class:`IndexLockedError` when ``mode="w"`` and
        another process writes the index.
        """
        from neardup.index.location import open_index

        return open_index(path, mode)

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
        kept = {s.name for s in segs}
        gone = [s for s in self._segs if s.name not in kept]
        old_plan = self._few
        self._segs = segs
        self._body = body
        self._few = probe.FewPlan.of(segs, self.layout)
        if gone:
            retire((gone, old_plan))  # their files' blocks are freed off this thread

    def refresh(self) -> None:
        """Readers: move to the newest committed state."""
        self._load()

    def close(self) -> None:
        """Release the writer lock and the memory maps, once a background merge running is
        done (:attr:`background_merges`). Committed data needs no flush."""
        merger_ = getattr(self, "_merger", None)
        if merger_ is not None and not self._closed:
            merger_.wait()
        self._segs = []
        self._few = None
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
    def threshold(self) -> float | None:
        """The Jaccard threshold an index with sketches was created for (None: an index
        without sketches, or one created before neardup recorded it)."""
        return self._body.get("threshold")

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
            "threshold": self.threshold,
            "id_type": self.id_type,
            "entries": len(self),
            "generation": self.generation,
            "segments": [
                {"name": s.name, "rows": s.n, "removed": s.n - s.live} for s in self._segs
            ],
            "bytes": sum(e["bytes"] for e, _ in files),
            "background_merges": self._merger.merges if self._merger is not None else 0,
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

    @property
    def segment_entries(self) -> list[dict[str, Any]]:
        """The manifest entries of the committed segments (copies): what batch mode and Dask
        workers read (:func:`neardup.index.batch.index_parts`)."""
        return copy.deepcopy(self._body["segments"])

    # ------------------------------------------------------------------ lookups by id
    def _find(self, ids: Ids) -> tuple[np.ndarray, ...]:
        """(id index, segment index, row) of every live row holding one of ``ids``."""
        self._check_open()
        return probe.find_rows(self._segs, ids)

    # ------------------------------------------------------------------ queries
    def _probe(
        self,
        fingerprints: Any,
        distance: int | None,
        threads: int | None,
        segs: list[Segment] | None = None,
    ) -> tuple:
        """(query index, segment index, row, distance) of every match in ``segs`` (default:
        the committed state's; a query that reads rows after probing passes the list it took,
        so a merge committed meanwhile by a background thread changes nothing it reads)."""
        self._check_open()
        q = as_fingerprints(fingerprints, "fingerprints")
        segs = self._segs if segs is None else segs
        return probe.probe(segs, self.layout, q, self._query_distance(distance), threads)

    def search(
        self,
        fingerprints: Sequence[int] | np.ndarray,
        distance: int | None = None,
        *,
        threads: int | None = None,
    ) -> Matches:
        """Every indexed id within ``distance`` bits of each query (see
        :meth:`IndexBackend.search <neardup.index.backend.IndexBackend.search>`). A large batch
        is probed table by table in one sorted pass, like :func:`neardup.find_all`."""
        q = as_fingerprints(fingerprints, "fingerprints")
        few = self._few
        if len(q) <= probe.FEW_QUERIES and few is not None:
            self._check_open()
            found, offsets = probe.probe_few(few, q, self._query_distance(distance))
            values = found[2]
            if self.id_type == "str":
                values = probe.ids_of(self.path, few.segs, "str", found[3], found[4])[1]
            return Matches(offsets, values, found[1])
        segs = self._segs
        qi, si, rows, d = self._probe(q, distance, threads, segs)
        keys, values = probe.ids_of(self.path, segs, self.id_type, si, rows)
        order = lexorder((keys, d, qi))
        return Matches.from_sorted(qi[order], values[order], d[order], len(q))

    def nearest(
        self,
        fingerprints: Sequence[int] | np.ndarray,
        distance: int | None = None,
        *,
        threads: int | None = None,
    ) -> Matches:
        """For each query with a match within ``distance`` bits, its nearest entry (ties: the
        smallest id; string ids in the index's fixed order): the first match of each query in
        :meth:`search`, with ids looked up for those only."""
        q = as_fingerprints(fingerprints, "fingerprints")
        segs = self._segs
        qi, si, rows, d = self._probe(q, distance, threads, segs)
        keys = probe.row_keys(segs, si, rows)
        order = lexorder((keys, d, qi))
        qi, si, rows, d = qi[order], si[order], rows[order], d[order]
        head = np.ones(len(qi), dtype=bool)
        head[1:] = qi[1:] != qi[:-1]
        _, values = probe.ids_of(self.path, segs, self.id_type, si[head], rows[head])
        return Matches.from_sorted(qi[head], values, d[head], len(q))

    def dedup_mask(
        self, fingerprints: Sequence[int] | np.ndarray, distance: int | None = None
    ) -> np.ndarray:
        """Boolean array, True where a fingerprint is within ``distance`` bits of an indexed one
        (no id is looked up)."""
        q = as_fingerprints(fingerprints, "fingerprints")
        mask = np.zeros(len(q), dtype=bool)
        mask[self._probe(q, distance, None)[0]] = True
        return mask

    def verified_query(
        self,
        sketches: Sketches | tuple[Any, Any],
        threshold: float,
        distance: int | None = None,
        *,
        threads: int | None = None,
        candidates: Matches | None = None,
    ) -> Matches:
        """Every entry whose estimated Jaccard with each query reaches ``threshold``.

        Candidates are the entries whose fingerprints (the sketches' first words) lie within
        ``distance`` bits of the query's first word; each is decided by
        :func:`neardup.core.sketch.sketch_decide`: both sets non-empty, the exact size bound
        ``min / max >= threshold`` and the Jaccard estimated from the other words
        ``>= threshold``.

        Parameters
        ----------
        sketches : Sketches
            The queries' sketches and sizes (:func:`neardup.core.sketch.set_sketches` with
            ``words=index.sketch_words``).
        threshold : float
            Jaccard threshold in (0, 1].
        distance : int, optional
            Candidate distance in bits (default: :func:`distance_for_threshold` of
            ``threshold``), at most the index's distance.
        threads : int, optional
            Threads for the search and the estimates.
        candidates : Matches, optional
            Candidates found elsewhere (``neardup.distributed.query`` of the first words on
            Dask): decided here instead of searching (``distance`` is then not used).

        Returns
        -------
        Matches
            With ``jaccards``; per query sorted by estimated Jaccard (highest first), then
            distance, then id. :meth:`Matches.first` gives each query's best match.

        Raises
        ------
        ValueError
            For an index without sketches, sketches of other words, or a distance above the
            index's.
        """
        self._check_open()
        words = self.sketch_words
        if words is None:
            raise ValueError(
                f"index {self.path} keeps no sketches; a verified query needs an index created "
                "with threshold= (`neardup index create --threshold`)"
            )
        sk = as_sketches(sketches, words)
        t = check_threshold(threshold)
        d = distance_for_threshold(t) if distance is None else distance
        if candidates is not None:
            qi, si, rows, dist, jac = self._decide_candidates(sk, t, candidates, threads)
        else:
            parts = []
            step = max(1, verified.VERIFY_QUERY_CHUNK)
            for lo in range(0, len(sk), step):
                part = sk.take(np.arange(lo, min(lo + step, len(sk))))
                found = self._probe(part.fingerprints, d, threads)
                qi, si, rows, dist, jac = verified.decide(self._segs, part, t, found, threads)
                parts.append((qi + lo, si, rows, dist, jac))
            qi, si, rows, dist, jac = verified.concat(parts)
        keys, values = probe.ids_of(self.path, self._segs, self.id_type, si, rows)
        order = lexorder((keys, dist, -jac, qi))
        return Matches.from_sorted(qi[order], values[order], dist[order], len(sk), jac[order])

    def _decide_candidates(
        self, sk: Sketches, t: float, candidates: Matches, threads: int | None
    ) -> verified.Decided:
        """:func:`verified.decide` for candidates given by id: each id is found in the index
        (ids removed meanwhile are no candidates)."""
        if len(candidates) != len(sk):
            raise ValueError(
                f"candidates are for {len(candidates)} queries, not the {len(sk)} sketches given"
            )
        if candidates.size == 0 or self.id_type is None:
            return verified.no_decisions()
        cq, cd = candidates.query_index, candidates.distances
        owner, si, rows = self._find(convert_ids(candidates.ids, None, self.id_type))
        return verified.decide(self._segs, sk, t, (cq[owner], si, rows, cd[owner]), threads)

    # ------------------------------------------------------------------ writes
    def _check_open(self) -> None:
        if self._closed:
            raise ValueError(f"index {self.path} is closed; open it again with Index.open")

    def _check_writable(self) -> None:
        self._check_open()
        if self.mode != "w" or self._lock is None:
            raise ValueError(f"index {self.path} is open read-only; open it with mode='w'")

    @contextlib.contextmanager
    def lock(self) -> Iterator[Index]:
        """Inside the block no other writer changes the index: a local index open for writing
        holds its writer lock from :meth:`open` to :meth:`close`, so this only checks that."""
        self._check_writable()
        yield self

    def _reserve_name(self) -> str:
        """A new segment name (holding the writer's lock): the counter is raised in the
        committed body, which every later commit copies."""
        name = f"s{self._body['next_file']:08d}"
        self._body["next_file"] += 1
        self._writing.add(name)  # the caller discards it once committed or given up
        return name

    def _commit(self, body: dict[str, Any]) -> None:
        with self._wlock:
            body["generation"] += 1
            body["next_file"] = max(int(body["next_file"]), int(self._body["next_file"]))
            new = sorted(referenced_files(body) - referenced_files(self._body))
            write_manifest(self.path, body, unsynced=new)
            self._install(body)
            remove_unreferenced(self.path, body, self._busy())

    def add(
        self,
        fingerprints: Sequence[int] | np.ndarray | None,
        ids: Sequence[int] | Sequence[str] | np.ndarray | None = None,
        *,
        sketches: Sketches | tuple[Any, Any] | None = None,
    ) -> None:
        """Add fingerprints with their ids and commit them durably (many adds in one commit:
        :meth:`session`).

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
        self._raise_merge_error()
        sk = writer.check_sketches(self.path, self.sketch_words, fingerprints, sketches)
        fp = sk.fingerprints if sk is not None else as_fingerprints(fingerprints, "fingerprints")
        next_id = int(self._body["next_id"])
        if ids is None:
            if self.id_type == "str":
                raise ValueError("this index has string ids; pass ids to add()")
            ids = np.arange(next_id, next_id + len(fp), dtype=np.int64)
        conv = convert_ids(ids, len(fp), self.id_type, unique=True)
        if len(fp) == 0:
            return
        fresh = conv.kind == "int64" and self.id_type == "int64"
        if fresh and int(conv.keys.min()) >= next_id:
            found: np.ndarray = np.empty(0, dtype=np.int64)  # above every id ever added
        else:
            found = self._find(conv)[0]
        if len(found):
            k = int(found.min())
            raise IdError(
                f"id {show_id(conv.values[k])} is already in the index; remove it first", k
            )
        self._add_rows(conv, writer.Rows(fp, conv.keys, conv.blob, conv.off, sk))

    def _add_rows(self, conv: Ids, rows: writer.Rows) -> None:
        """Write checked rows as a run (merged with the runs the policy says) and commit."""
        background = self.background_merges
        segs = self._segs
        if background and len(segs) + 1 > self.max_segments and self._merger is not None:
            self._merger.wait()  # the cap: merge here, with no merge running
            self._raise_merge_error()
            segs = self._segs
        start = len(segs)
        if not background or len(segs) + 1 > self.max_segments:
            start = writer.merge_start(segs, len(rows.fps), self.max_segments, self.merge_factor)
        merged = segs[start:]
        if merged:
            rows = writer.gather(merged, self.id_type, self.sketch_words).then(rows)
        with self._wlock:
            name = self._reserve_name()
            codec = self._body.get("codec")
        runs = merged if codec is None and writer.mergeable(merged) else None
        try:
            entry = writer.write_segment(self.path, self.layout, name, rows, codec, runs)
            with self._wlock:
                body = _copy_body(self._body)
                body["id_type"] = conv.kind
                if conv.kind == "int64":
                    body["next_id"] = max(int(body["next_id"]), int(conv.keys.max()) + 1)
                gone = {s.name for s in merged}
                body["segments"] = [e for e in body["segments"] if e["name"] not in gone]
                body["segments"].append(entry)
                self._commit(body)
        finally:
            self._writing.discard(name)
        if background:
            if self._merger is None:
                self._merger = merger.BackgroundMerger(self)
            self._merger.kick()

    def _replace_runs(
        self, merged: list[Segment], deleted: list[Any], entry: dict[str, Any]
    ) -> None:
        """Commit a background merge (holding the writer's lock): ``entry`` in place of the runs
        ``merged`` (whose tombstones were ``deleted`` when it read them), unless one of them
        changed or left meanwhile (then its files go)."""
        now = {e["name"]: e for e in self._body["segments"]}
        if self.codec != entry.get("codec") or any(
            s.name not in now or now[s.name].get("deleted") != d
            for s, d in zip(merged, deleted, strict=True)
        ):
            remove_unreferenced(self.path, self._body, self._busy())
            return
        body = _copy_body(self._body)
        gone = {s.name for s in merged}
        first = next(i for i, e in enumerate(body["segments"]) if e["name"] in gone)
        rest = [e for e in body["segments"] if e["name"] not in gone]
        body["segments"] = rest[:first] + [entry] + rest[first:]
        self._commit(body)

    def _raise_merge_error(self) -> None:
        m = self._merger
        if m is not None and m.error is not None:
            err, m.error = m.error, None
            raise OSError(f"index {self.path}: a background merge failed ({err}); nothing was lost")

    def _busy(self) -> tuple[str, ...]:
        """Segments being written, by add() or a background merge (their files are not to be
        deleted by a commit meanwhile)."""
        return tuple(self._writing)

    def wait_merges(self) -> None:
        """Wait until no background merge runs (:attr:`background_merges`); raise what made one
        fail. :meth:`close` and :meth:`compact` wait too."""
        if self._merger is not None:
            self._merger.wait()
        self._raise_merge_error()

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
        with self._wlock:
            return self._remove_rows(*self._find(conv)) if len(rows) else 0

    def _remove_rows(self, owner: np.ndarray, si: np.ndarray, rows: np.ndarray) -> int:
        """Tombstone rows ``rows`` of segments ``si`` and commit (holding the writer's lock)."""
        body = _copy_body(self._body)
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
        self.wait_merges()
        with self._wlock:
            self._compact(compress)

    def _compact(self, compress: bool | None) -> None:
        body = _copy_body(self._body)
        codec = body.get("codec") if compress is None else ("ef" if compress else None)
        convert = codec != body.get("codec")
        if not convert and len(self._segs) <= 1 and all(s.live == s.n for s in self._segs):
            return
        set_codec(body, codec)
        live = [s for s in self._segs if s.live]
        if live:
            rows = writer.gather(live, self.id_type, self.sketch_words)
            name = self._reserve_name()
            self._writing.discard(name)  # (the lock is held to the commit)
            runs = live if codec is None and writer.mergeable(live) else None
            entry = writer.write_segment(self.path, self.layout, name, rows, codec, runs)
            body["segments"] = [entry]
        else:
            body["segments"] = []
        self._commit(body)

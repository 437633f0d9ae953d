"""The index on Redis (or Redis Cluster): per table, fingerprints bucketed by leading bits.

Keys of an index named ``NAME`` (all plain strings, no hash tags, so Redis Cluster spreads them
over its slots)::

    NAME:meta            hash: magic, format version, distance, blocks, bucket bits, id kind,
                         next automatic id, generation (writes so far)
    NAME:t{t}:{b:x}      string: the bucket of table t whose permuted fingerprints start with
                         the bucket_bits-bit value b; 16-byte records, each the fingerprint
                         (uint64, little-endian, bit 63 most significant) and the id key (int64)
    NAME:e:{s:x}         hash, one of ``entry_shards``: id key (8 bytes) -> fingerprint
                         (8 bytes), followed by the UTF-8 id for string ids
    NAME:lock            the writers' lease (one write at a time per index)

A query reads one bucket per table, all in one pipeline, checks the distance of every record,
then confirms the matches' entries in a second pipeline. The entry hash is the commit point: an
add appends the bucket records first and writes the entries last; a remove deletes the entries
first and then the records. A write that fails midway (a node down) is not acknowledged; it
leaves records with no entry, which queries ignore, and possibly some of its entries (written
shard by shard), each with all its records, so every answer is still exact for the entries
present. Durability is Redis's own:
with ``appendonly yes`` and ``appendfsync always`` every reply comes after the write is on disk.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Sequence
from typing import Any

import numpy as np

from neardup import config
from neardup.config import DEFAULT_DEDUP_DISTANCE
from neardup.core.bits import as_fingerprints
from neardup.core.layout import Layout
from neardup.core.matches import Matches
from neardup.core.order import lexorder
from neardup.index.backend import CAPABILITIES, IndexBackend
from neardup.index.redis_store import (
    FORMAT_VERSION,
    RECORD,
    IndexUnavailableError,
    RedisStore,
    choose_redis_layout,
    create_meta,
    is_redis_url,
)
from neardup.index.redis_writer import RedisWriter
from neardup.index.segments import convert_ids, expand_ranges
from neardup.index.storage import CorruptIndexError

__all__ = ["RedisIndex", "IndexUnavailableError", "choose_redis_layout", "is_redis_url"]


class RedisIndex(IndexBackend):
    """:class:`neardup.Index` over Redis: the same API and the same answers.

    Open one with ``neardup.Index.open("redis://host:6379/0?name=crawl")`` (or
    :meth:`create`); a server in cluster mode is detected and used through redis-py's
    ``RedisCluster``. Any number of processes may open the same index: reads are always live
    (:meth:`refresh` only rereads the layout), and writes (``mode="w"``) take a lease in Redis
    for their duration, so writers from several machines serialize.

    Raises :class:`IndexUnavailableError` (a ``ConnectionError``) when Redis cannot be reached.
    """

    #: No sketches are kept (dedup against Redis is by fingerprint distance, not
    #: Jaccard-verified), and Dask workers cannot read segment files.
    capabilities = CAPABILITIES - {"verified", "parts"}
    backend = "redis"
    partial_adds = True  # a failed batch of adds may have stored some of its entries
    #: Words of the MinHash sketch kept per entry: None, the Redis backend keeps no sketches.
    sketch_words: int | None = None

    def __init__(self, url: str, mode: str = "r") -> None:
        if mode not in ("r", "w"):
            raise ValueError(f"mode must be 'r' or 'w' (got {mode!r})")
        self._store = RedisStore(url)
        self._writer = RedisWriter(self._store, mode)
        self.path = self._store.path  # shown in messages and info(): no password
        self.name = self._store.name
        self.mode = mode

    # ------------------------------------------------------------------ opening
    @classmethod
    def create(
        cls,
        url: str,
        distance: int = DEFAULT_DEDUP_DISTANCE,
        blocks: int | None = None,
        *,
        expected_size: int = 1_000_000,
        bucket_bits: int | None = None,
    ) -> RedisIndex:
        """Create an empty index at ``url`` (``redis://host:port/db?name=NAME``), open for writing.

        ``blocks`` and ``bucket_bits`` default to :func:`choose_redis_layout` for
        ``expected_size``; ``bucket_bits`` is capped at the shortest table prefix. Raises
        ``FileExistsError`` if an index of that name exists there.
        """
        auto_blocks, auto_bits = choose_redis_layout(max(1, int(expected_size)), distance)
        layout = Layout(auto_blocks if blocks is None else blocks, distance)
        shortest = min(t.prefix_bits for t in layout.tables)
        bits = auto_bits if bucket_bits is None else int(bucket_bits)
        if not 1 <= bits <= shortest:
            raise ValueError(
                f"bucket_bits must be between 1 and {shortest} for blocks={layout.blocks} "
                f"(got {bits})"
            )
        meta = {
            "format_version": FORMAT_VERSION,
            "distance": layout.distance,
            "blocks": layout.blocks,
            "bucket_bits": bits,
            "entry_shards": config.REDIS_ENTRY_SHARDS,
            "id_type": "",
            "next_id": 0,
            "generation": 0,
        }
        create_meta(url, meta)
        return cls(url, "w")

    @classmethod
    def open(cls, url: str, mode: str = "r") -> RedisIndex:
        """Open the index at ``url``; ``mode="w"`` allows writes."""
        return cls(url, mode)

    def refresh(self) -> None:
        """Reread the layout, id kind and generation (queries always read live data)."""
        self._store.load()

    def close(self) -> None:
        """Close the connections."""
        self._store.close()

    # ------------------------------------------------------------------ properties
    @property
    def layout(self) -> Layout:  # type: ignore[override]
        """The tables' layout (blocks and distance)."""
        return self._store.layout

    @property
    def bucket_bits(self) -> int:
        """Leading bits of a table's permuted fingerprint that name its bucket."""
        return self._store.bucket_bits

    @property
    def id_type(self) -> str | None:
        """``"int64"``, ``"str"`` or ``None`` before the first add."""
        return self._store.id_type

    @property
    def generation(self) -> int:
        """Number of writes committed so far (as of the last read of the metadata)."""
        return int(self._store.meta["generation"])

    def __len__(self) -> int:
        return self._store.count()

    def __contains__(self, id: object) -> bool:
        if isinstance(id, bool) or not isinstance(id, (str, int, np.integer)):
            return False
        self.refresh()
        if self.id_type is None or isinstance(id, str) != (self.id_type == "str"):
            return False
        try:
            ids = convert_ids([id], None, self.id_type)
        except ValueError:
            return False
        return bool(self._store.lookup(ids)[0][0])

    def contains(self, ids: Sequence[int] | Sequence[str] | np.ndarray) -> np.ndarray:
        """As :meth:`neardup.Index.contains`: a bool per id, whether an entry has it (one
        HMGET per entry shard, pipelined).

        Raises
        ------
        neardup.errors.IdError
            For ids that are not all int64 or all str, or of the other kind than the index's
            (where ``in`` says False).
        """
        self._store.check_open()
        self.refresh()  # the id kind may have been fixed by another process's first add
        conv = convert_ids(ids, None, self.id_type)
        if self.id_type is None:
            return np.zeros(len(conv.keys), dtype=bool)
        return self._store.lookup(conv)[0]

    def info(self) -> dict[str, Any]:
        """Layout, size and generation."""
        self.refresh()
        return {
            "path": self.path,
            "backend": "redis",
            "format_version": FORMAT_VERSION,
            "distance": self.distance,
            "blocks": self.blocks,
            "tables": self.layout.n_tables,
            "bucket_bits": self.bucket_bits,
            "id_type": self.id_type,
            "entries": len(self),
            "generation": self.generation,
        }

    # ------------------------------------------------------------------ writes
    @contextlib.contextmanager
    def lock(self) -> Iterator[RedisIndex]:
        """Hold the index's write lease (re-entrant): writes inside run as one unit against
        other writers (e.g. a query and the add that depends on it)."""
        with self._writer.lock():
            yield self

    def add(
        self,
        fingerprints: Sequence[int] | np.ndarray,
        ids: Sequence[int] | Sequence[str] | np.ndarray | None = None,
        *,
        sketches: Any = None,
    ) -> None:
        """As :meth:`neardup.Index.add` (``sketches`` must be None: the Redis backend keeps
        none, so ``fingerprints`` are required); durable once it returns (with Redis's
        ``appendfsync always``). Raises :class:`IndexUnavailableError` if Redis fails midway:
        the add is then not acknowledged; it may be partly visible (entries are written shard
        by shard), and ``neardup serve``'s ``/add`` retried with the same ids completes it.

        A large batch is one bulk write: per table its records are grouped by bucket and many
        buckets go in one script call, pipelined in rounds of
        ``neardup.index.redis_writer.REDIS_WRITE_BYTES`` (prefer a few large adds to many
        small ones when loading)."""
        if sketches is not None or fingerprints is None:
            raise ValueError(
                f"index {self.path}: the Redis backend keeps no sketches; add fingerprints"
            )
        self._writer.add(as_fingerprints(fingerprints, "fingerprints"), ids)

    def remove(
        self, ids: Sequence[int] | Sequence[str] | np.ndarray, *, missing: str = "error"
    ) -> int:
        """As :meth:`neardup.Index.remove`: remove entries by id, return how many."""
        return self._writer.remove(ids, missing)

    def compact(self, compress: bool | None = None) -> None:
        """Nothing to merge on Redis (buckets are rewritten by each remove); ``compress`` must
        be None (Redis keeps no tables to compress)."""
        if compress is not None:
            raise ValueError(f"index {self.path}: the Redis backend keeps no tables to compress")

    # ------------------------------------------------------------------ queries
    def _probe(
        self, fingerprints: Any, distance: int | None, threads: int | None = None
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray, list[Any]]:
        """(query index, id key, distance, raw entry per match) of confirmed matches (one
        pipeline per round trip: ``threads`` is not used)."""
        q = as_fingerprints(fingerprints, "fingerprints")
        k = self._query_distance(distance)
        e = np.empty(0, dtype=np.int64)
        if len(q) == 0:
            return e, e.copy(), e.copy(), []
        T = self.layout.n_tables
        cmds, inv = [], []
        for t in range(T):
            uniq, where = np.unique(self._store.buckets(q, t), return_inverse=True)
            inv.append(where + len(cmds))
            cmds.extend(("get", self._store.bucket_key(t, b)) for b in uniq.tolist())
        values = self._store.pipeline(cmds)
        sizes = np.array([0 if v is None else len(v) // RECORD.itemsize for v in values])
        recs = np.frombuffer(b"".join(v for v in values if v is not None), RECORD)
        hi = np.cumsum(sizes)
        u = np.concatenate(inv)
        owner, pos = expand_ranges((hi - sizes)[u], hi[u])
        qi = np.tile(np.arange(len(q), dtype=np.int64), T)[owner]
        fp, key = recs["fp"][pos], recs["key"][pos]
        d = np.bitwise_count(q[qi] ^ fp).astype(np.int64)
        keep = d <= k
        qi, fp, key, d = qi[keep], fp[keep], key[keep], d[keep]
        # one match per (query, id): a record is in every table and may repeat after a retry
        order = lexorder((fp, key, qi))
        qi, fp, key, d = qi[order], fp[order], key[order], d[order]
        first = np.ones(len(qi), dtype=bool)
        first[1:] = (qi[1:] != qi[:-1]) | (key[1:] != key[:-1]) | (fp[1:] != fp[:-1])
        qi, fp, key, d = qi[first], fp[first], key[first], d[first]
        if len(key) and self.id_type is None:
            self._store.load()  # another process made the first add since we read the id kind
        ukeys, kinv = np.unique(key, return_inverse=True)
        present, stored, raw = self._store.entries(ukeys)
        ok = present[kinv] & (stored[kinv] == fp)
        sel = np.flatnonzero(ok)
        return qi[sel], key[sel], d[sel], [raw[i] for i in kinv[sel].tolist()]

    def search(
        self,
        fingerprints: Sequence[int] | np.ndarray,
        distance: int | None = None,
        *,
        threads: int | None = None,
    ) -> Matches:
        """As :meth:`neardup.Index.search`: per query, its matches sorted by distance, then id
        (string ids: in the local index's order). One pipeline per round trip: ``threads`` is
        not used."""
        q = as_fingerprints(fingerprints, "fingerprints")
        qi, key, d, raw = self._probe(q, distance)
        order = lexorder((key, d, qi))
        if self.id_type == "str":
            ids = np.empty(len(order), dtype=object)
            ids[:] = [raw[i][8:].decode("utf-8") for i in order.tolist()]
        else:
            ids = key[order]
        return Matches.from_sorted(qi[order], ids, d[order], len(q))

    def verify(self) -> None:
        """Check that every entry has its record in the bucket of every table.

        Raises
        ------
        CorruptIndexError
            Naming the first entry whose record is missing (data lost by Redis, e.g. a node
            restarted without persistence) and how many are.
        """
        shards = self._store.entry_shards
        keys, fps = [], []
        for h in self._store.pipeline(
            [("hgetall", self._store.shard_key(s)) for s in range(shards)]
        ):
            for k, v in h.items():
                keys.append(k)
                fps.append(v[:8])
        if not keys:
            return
        key = np.frombuffer(b"".join(keys), "<i8")
        fp = np.frombuffer(b"".join(fps), "<u8")
        want = np.empty(len(key), RECORD)
        want["fp"], want["key"] = fp, key
        want_v = want.view("V16")
        missing = 0
        for t in range(self.layout.n_tables):
            b = self._store.buckets(fp, t)
            vals = self._store.pipeline(
                [("get", self._store.bucket_key(t, x)) for x in np.unique(b).tolist()]
            )
            have = np.frombuffer(b"".join(v for v in vals if v is not None), "V16")
            missing += int((~np.isin(want_v, have)).sum())
        if missing:
            raise CorruptIndexError(
                f"{self.path}: {missing} table records of {len(key)} entries are missing; "
                f"Redis lost writes (run it with appendonly yes, appendfsync always)"
            )

"""The writes of :class:`neardup.index.redis.RedisIndex`: the writers' lease, add, remove.

The entry hashes are the commit point: an add appends the bucket records first and writes the
entries last; a remove deletes the entries first, then the records (see
:mod:`neardup.index.redis`).
"""

from __future__ import annotations

import contextlib
import functools
import os
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any

import numpy as np

from neardup import config
from neardup.core.bits import as_fingerprints
from neardup.index import redis_store
from neardup.index._redis_kernels import counting_order
from neardup.index.redis_store import RECORD, IndexUnavailableError, RedisStore
from neardup.index.segments import Ids, convert_ids, show_id

__all__ = ["RedisWriter"]

#: Redis index: payload bytes per pipeline round trip of a write (bounds a bulk add's buffers).
REDIS_WRITE_BYTES = 16 << 20

#: Redis index: buckets appended by one script call in a write.
REDIS_SCRIPT_KEYS = 1000

#: Redis index: entries written or looked up by one script call in a write.
REDIS_SCRIPT_ITEMS = 20_000


# Removes the records of the given id keys (8 bytes each) from one bucket; one key, so it runs
# on whichever Redis Cluster node holds the bucket.
DROP_RECORDS = """
local v = redis.call('GET', KEYS[1])
if not v then return 0 end
local drop = {}
for i = 1, #ARGV do drop[ARGV[i]] = true end
local out, n = {}, 0
for p = 1, #v, 16 do
  local rec = string.sub(v, p, p + 15)
  if drop[string.sub(rec, 9, 16)] then n = n + 1 else out[#out + 1] = rec end
end
if #out == 0 then redis.call('DEL', KEYS[1]) else redis.call('SET', KEYS[1], table.concat(out)) end
return n
"""


# Appends ARGV[n + i] to the key named ARGV[i] for i = 1..n (n = #ARGV / 2): many buckets per
# command, so a bulk write costs one command per thousand buckets instead of one per bucket. The
# names are arguments, not declared keys, because on Redis Cluster the keys lie in different slots
# of the node the caller sent the call to (Redis 7's allow-cross-slot-keys flag).
APPEND_MANY = """
local n = #ARGV / 2
for i = 1, n do redis.call('APPEND', ARGV[i], ARGV[n + i]) end
return n
"""
APPEND_MANY_CLUSTER = "#!lua flags=allow-cross-slot-keys\n" + APPEND_MANY

# Extends the writer's lease (ARGV[2] ms) if it still holds it (token ARGV[1]); 0 if it lost it.
RENEW_LEASE = """
if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('PEXPIRE', KEYS[1], ARGV[2]) end
return 0
"""

# Takes the writers' lease for token ARGV[1] (ARGV[2] ms) if it is free, or already ours: a
# client that retries the call after a lost reply (redis-py does) finds its own token there.
ACQUIRE_LEASE = """
local held = redis.call('GET', KEYS[1])
if held == ARGV[1] then return redis.call('PEXPIRE', KEYS[1], ARGV[2]) end
if held then return 0 end
redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
return 1
"""

RELEASE_LEASE = """
if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end
return 0
"""


class RedisWriter:
    """The writes of one open :class:`neardup.index.redis.RedisIndex`: the writers' lease,
    add and remove, through the index's :class:`~neardup.index.redis_store.RedisStore`.

    Parameters
    ----------
    store
        The open index's connection and metadata (shared with its queries).
    mode
        ``"w"`` allows writes; with ``"r"`` every write raises ``ValueError``.
    """

    def __init__(self, store: RedisStore, mode: str) -> None:
        self.store = store
        self.mode = mode
        self._held = 0  # depth of re-entrant lock() calls
        self._lost = False  # the heartbeat saw another writer take the lease
        self._stale: list[str] = []  # tokens of leases we may still hold
        self._tlock = threading.RLock()

    @contextlib.contextmanager
    def lock(self) -> Iterator[None]:
        """Hold the index's write lease (re-entrant): writes inside run as one unit against
        other writers (e.g. a query and the add that depends on it)."""
        self._check_writable()
        with self._tlock:
            if self._held:
                self._held += 1
                try:
                    yield
                finally:
                    self._held -= 1
                return
            self._release_stale()
            token = os.urandom(16).hex()
            self._stale.append(token)  # until released: a lost reply may have granted it
            deadline = time.monotonic() + config.SERVE_WRITE_WAIT_S
            lease_ms = int(config.REDIS_LOCK_LEASE_S * 1000)
            st = self.store
            while not st.call(st.client.eval, ACQUIRE_LEASE, 1, st.lease_key, token, lease_ms):
                if time.monotonic() > deadline:
                    raise IndexUnavailableError(
                        f"{st.path}: another writer held the index for "
                        f"{config.SERVE_WRITE_WAIT_S} s; retry later"
                    )
                time.sleep(0.005)
            self._held = 1
            self._lost = False
            stop = threading.Event()
            beat = threading.Thread(target=self._heartbeat, args=(token, stop), daemon=True)
            beat.start()
            try:
                st.load()
                yield
            finally:
                stop.set()
                beat.join()
                self._held = 0
                self._release_stale()

    def _heartbeat(self, token: str, stop: threading.Event) -> None:
        """While a write holds the lease, extend it every third of its length (a bulk add of
        many millions outlasts it); note when another writer could have taken it."""
        lease = config.REDIS_LOCK_LEASE_S
        while not stop.wait(lease / 3):
            try:
                held = self.store.client.eval(
                    RENEW_LEASE, 1, self.store.lease_key, token, int(lease * 1000)
                )
            except self.store.errors:
                continue  # the write's own commands fail too while Redis is down
            if not held:
                self._lost = True
                return

    def _check_lease(self) -> None:
        """Raise before the next round trip of a write whose lease ran out."""
        if self._lost:
            raise IndexUnavailableError(
                f"{self.store.path}: this write lost the index's lease (Redis was unreachable for "
                f"config.REDIS_LOCK_LEASE_S = {config.REDIS_LOCK_LEASE_S} s); retry it"
            )

    def _release_stale(self) -> None:
        """Give back the leases we may hold; kept for later while Redis is down."""
        while self._stale:
            try:
                self.store.client.eval(RELEASE_LEASE, 1, self.store.lease_key, self._stale[-1])
            except self.store.errors:
                return
            self._stale.pop()

    def _check_writable(self) -> None:
        self.store.check_open()
        if self.mode != "w":
            raise ValueError(f"index {self.store.path} is open read-only; open it with mode='w'")

    # ------------------------------------------------------------------ writes
    def add(
        self, fingerprints: np.ndarray, ids: Sequence[int] | Sequence[str] | np.ndarray | None
    ) -> None:
        """Add entries (see :meth:`neardup.index.redis.RedisIndex.add`): the records of every
        table first, then the entries, which commit the add."""
        fp = as_fingerprints(fingerprints, "fingerprints")
        st = self.store
        with self.lock():
            if ids is None:
                if st.id_type == "str":
                    raise ValueError("this index has string ids; pass ids to add()")
                start = int(st.meta["next_id"])
                ids = np.arange(start, start + len(fp), dtype=np.int64)
            conv = convert_ids(ids, len(fp), st.id_type)
            if len(fp) == 0:
                return
            self._check_new(conv)
            self._append_records(fp, conv.keys)
            # the entries commit the add (records without entries are ignored by queries)
            self._set_entries(fp, conv)
            meta: dict[str, Any] = {"id_type": conv.kind}
            if conv.kind == "int64":
                meta["next_id"] = max(int(st.meta["next_id"]), int(conv.keys.max()) + 1)
            st.pipeline([("hset", st.meta_key, None, None, meta)])
            self._bump()

    def _check_new(self, conv: Ids) -> None:
        """Raise ``ValueError`` if an id of the batch repeats or is in the index already."""
        if conv.kind == "str" and len(set(conv.values)) != len(conv.values):
            raise ValueError("ids repeat within the batch; ids must be unique")
        ordered = np.sort(conv.keys)
        if (ordered[1:] == ordered[:-1]).any():
            what = "ids repeat" if conv.kind == "int64" else "two string ids share a hash"
            raise ValueError(f"{what} within the batch; ids must be unique")
        # under the lease nobody else adds: an empty index needs no per-id check
        if not self.store.count():
            return
        present = self._present(conv.keys)
        if not present.any():
            return
        i = int(np.flatnonzero(present)[0])
        raw = self.store.entries(conv.keys[i : i + 1])[2][0]
        if conv.kind == "str" and raw[8:].decode("utf-8") != conv.values[i]:
            raise ValueError(
                f"id {show_id(conv.values[i])} has the same 64-bit hash as stored id "
                f"{raw[8:].decode('utf-8')!r}; use another id"
            )
        raise ValueError(
            f"id {show_id(conv.values[i])} is already in the index "
            f"({int(present.sum())} of the batch are); remove them first"
        )

    # ------------------------------------------------------------------ bulk plumbing
    def _by_shard(self, keys: np.ndarray) -> tuple[np.ndarray, list[tuple[int, int, int]]]:
        """(order, [(shard, start, end), ...]): ``keys[order[start:end]]`` fall in ``shard``."""
        shards = self.store.shards(keys).astype(np.int64)
        order, starts = counting_order(shards, self.store.entry_shards)
        used = np.flatnonzero(np.diff(starts)).tolist()
        return order, [(s, int(starts[s]), int(starts[s + 1])) for s in used]

    def _overlapped(self, rounds: Iterable[Callable[[], list[Any]]]) -> list[Any]:
        """Run round trips in order on one helper thread while the caller's generator prepares
        the next one (numpy and packing overlap Redis's work); their results in order. After a
        failure no later round starts."""
        out: list[Any] = []
        with ThreadPoolExecutor(1) as ex:
            pending: Future[list[Any]] | None = None
            for fn in rounds:
                if pending is not None:
                    out.extend(pending.result())
                self._check_lease()
                pending = ex.submit(fn)
            if pending is not None:
                out.extend(pending.result())
        return out

    def _bounded(self, commands: Iterable[tuple[int, tuple[Any, ...]]]) -> list[Any]:
        """Run ``(payload bytes, command)`` pairs in pipelines of at most
        ``REDIS_WRITE_BYTES`` payload (and ``redis_store.REDIS_PIPELINE`` commands) each."""

        def rounds() -> Iterator[Callable[[], list[Any]]]:
            batch: list[tuple[Any, ...]] = []
            size = 0
            for nbytes, cmd in commands:
                if batch and (
                    size + nbytes > REDIS_WRITE_BYTES or len(batch) >= redis_store.REDIS_PIPELINE
                ):
                    yield functools.partial(self.store.pipeline, batch)
                    batch, size = [], 0
                batch.append(cmd)
                size += nbytes
            if batch:
                yield functools.partial(self.store.pipeline, batch)

        return self._overlapped(rounds())

    def _present(self, keys: np.ndarray) -> np.ndarray:
        """Whether each int64 id key has an entry (HMGET per shard, ids packed as 8 bytes)."""
        present = np.zeros(len(keys), dtype=bool)
        if len(keys) == 0:
            return present
        order, groups = self._by_shard(keys)
        fields = np.ascontiguousarray(keys[order], dtype="<i8").view("V8")
        step = REDIS_SCRIPT_ITEMS
        parts = [(s, a, min(e, a + step)) for s, a0, e in groups for a in range(a0, e, step)]
        cmds = (
            (8 * (e - a), ("hmget", self.store.shard_key(s), fields[a:e].tolist()))
            for s, a, e in parts
        )
        for (_, a, _), values in zip(parts, self._bounded(cmds), strict=True):
            hit = [j for j, v in enumerate(values) if v is not None]
            if hit:
                present[order[a + np.asarray(hit, dtype=np.int64)]] = True
        return present

    def _set_entries(self, fp: np.ndarray, conv: Ids) -> None:
        """Write the entries (id key -> fingerprint, then the UTF-8 id for string ids)."""
        order, groups = self._by_shard(conv.keys)
        pairs = np.empty((len(order), 2), dtype="<u8")
        pairs[:, 0] = conv.keys[order].view(np.uint64)
        pairs[:, 1] = fp[order]
        step = REDIS_SCRIPT_ITEMS
        parts = [(s, a, min(e, a + step)) for s, a0, e in groups for a in range(a0, e, step)]

        def hset(s: int, a: int, e: int) -> tuple[int, tuple[Any, ...]]:
            flat = pairs[a:e].reshape(-1).view("V8").tolist()  # field, value, field, ...
            if conv.kind == "str":
                for j, i in enumerate(order[a:e].tolist()):
                    flat[2 * j + 1] += conv.values[i].encode("utf-8")
            return 16 * (e - a), ("execute_command", "HSET", self.store.shard_key(s), *flat)

        cmds = (hset(*part) for part in parts)
        self._bounded(cmds)

    def _append_records(self, fp: np.ndarray, keys: np.ndarray) -> None:
        """Append the 16-byte records of ``fp``/``keys`` to their bucket in every table.

        Table by table, the records are ordered by bucket (a counting sort) and sent in slices
        of ``REDIS_WRITE_BYTES``: each bucket gets one APPEND per slice, and one script
        call carries ``REDIS_SCRIPT_KEYS`` buckets (on Redis Cluster, buckets of one
        node), so a bulk load costs about one command per thousand buckets.
        """
        self._overlapped(self._append_rounds(fp, keys))

    def _append_rounds(self, fp: np.ndarray, keys: np.ndarray) -> Iterator[Callable[[], Any]]:
        n = len(fp)
        n_buckets = 1 << self.store.bucket_bits
        step = max(1, REDIS_WRITE_BYTES // RECORD.itemsize)
        for t in range(self.store.layout.n_tables):
            b = self.store.buckets(fp, t).astype(np.int64)
            if n_buckets <= 4 * n + 1024:
                order = counting_order(b, n_buckets)[0]
            else:  # a few records in a huge key space: a comparison sort is cheaper
                order = np.argsort(b, kind="stable")
            for s in range(0, n, step):
                o = order[s : s + step]
                rec = np.empty(len(o), RECORD)
                rec["fp"], rec["key"] = fp[o], keys[o]
                data = rec.tobytes()
                bs = b[o]
                first = np.flatnonzero(np.concatenate(([True], bs[1:] != bs[:-1])))
                cuts = (np.append(first, len(o)) * RECORD.itemsize).tolist()
                names = [self.store.bucket_key(t, x) for x in bs[first].tolist()]
                yield self._append_many(names, [data[a:e] for a, e in zip(cuts, cuts[1:])])

    def _append_many(self, names: list[str], values: list[bytes]) -> Callable[[], Any]:
        """The round trip that APPENDs ``values[i]`` to key ``names[i]``, many keys per script
        call (on Redis Cluster, one pipeline per node holding some of the keys)."""
        step = REDIS_SCRIPT_KEYS
        if not self.store.cluster:
            cmds = [
                ("execute_command", "EVAL", APPEND_MANY, 0, *names[a : a + step],
                 *values[a : a + step])
                for a in range(0, len(names), step)
            ]  # fmt: skip
            return functools.partial(self.store.pipeline, cmds)
        from redis.crc import key_slot

        nodes: dict[str, tuple[Any, list[int]]] = {}
        slot_node = self.store.client.nodes_manager.get_node_from_slot
        for i, name in enumerate(names):
            node = self.store.call(slot_node, key_slot(name.encode()))
            nodes.setdefault(node.name, (node, []))[1].append(i)
        pipes = []
        for node, idx in nodes.values():
            pipe = node.redis_connection.pipeline(transaction=False)
            for a in range(0, len(idx), step):
                part = idx[a : a + step]
                pipe.eval(
                    APPEND_MANY_CLUSTER,
                    0,
                    *[names[i] for i in part],
                    *[values[i] for i in part],
                )
            pipes.append(pipe)
        return lambda: [self.store.call(p.execute) for p in pipes]

    def _bump(self) -> None:
        self.store.pipeline([("hincrby", self.store.meta_key, "generation", 1)])
        self.store.load()

    def remove(self, ids: Sequence[int] | Sequence[str] | np.ndarray, missing: str) -> int:
        """Remove entries by id (see :meth:`neardup.index.redis.RedisIndex.remove`): the
        entries first, then their records; how many were removed."""
        if missing not in ("error", "ignore"):
            raise ValueError(f"missing must be 'error' or 'ignore' (got {missing!r})")
        st = self.store
        with self.lock():
            conv = convert_ids(ids, None, st.id_type)
            if len(conv.keys) == 0:
                return 0
            present, fps, _ = st.lookup(conv)
            if missing == "error" and not present.all():
                first = int(np.flatnonzero(~present)[0])
                raise KeyError(
                    f"id {show_id(conv.values[first])} is not in the index "
                    f"({int((~present).sum())} of {len(present)} ids are not); nothing removed"
                )
            keys, sel = np.unique(conv.keys[present], return_index=True)
            fps = fps[present][sel]
            if len(keys) == 0:
                return 0
            kb = keys.astype("<i8").tobytes()
            kbs = [kb[8 * i : 8 * i + 8] for i in range(len(keys))]
            shards = st.shards(keys).tolist()
            removed = sum(st.pipeline([("hdel", st.shard_key(s), k) for s, k in zip(shards, kbs)]))
            cmds = []
            for t in range(st.layout.n_tables):
                b = st.buckets(fps, t)
                for bucket in np.unique(b).tolist():
                    drop = [kbs[i] for i in np.flatnonzero(b == bucket).tolist()]
                    cmds.append(
                        (
                            "execute_command",
                            "EVAL",
                            DROP_RECORDS,
                            1,
                            st.bucket_key(t, bucket),
                            *drop,
                        )
                    )
            st.pipeline(cmds)
            self._bump()
            return int(removed)

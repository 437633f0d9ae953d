"""The write half of :class:`neardup.index.redis.RedisIndex`: the writers' lease, add, remove.

The entry hashes are the commit point: an add appends the bucket records first and writes the
entries last; a remove deletes the entries first, then the records (see
:mod:`neardup.index.redis`).
"""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Iterator, Sequence
from typing import Any

import numpy as np

from neardup import config
from neardup.core.bits import as_fingerprints
from neardup.index.redis_store import (
    _DROP_RECORDS,
    _RELEASE,
    RECORD,
    IndexUnavailableError,
)
from neardup.index.segments import convert_ids, show_id

__all__ = ["RedisWriter"]


class RedisWriter:
    """Mixin of :class:`neardup.index.redis.RedisIndex` holding its writes (``mode="w"``)."""

    _stale: list[str]
    _held: int

    @contextlib.contextmanager
    def lock(self) -> Iterator[Any]:
        """Hold the index's write lease (re-entrant): writes inside run as one unit against
        other writers (e.g. a query and the add that depends on it)."""
        self._check_writable()
        with self._tlock:
            if self._held:
                self._held += 1
                try:
                    yield self
                finally:
                    self._held -= 1
                return
            self._release_stale()
            token = os.urandom(16).hex()
            self._stale.append(token)  # until released: a lost reply may have granted it
            deadline = time.monotonic() + config.SERVE_WRITE_WAIT_S
            lease_ms = int(config.REDIS_LOCK_LEASE_S * 1000)
            while not self._call(self._client.set, self._lease, token, nx=True, px=lease_ms):
                if time.monotonic() > deadline:
                    raise IndexUnavailableError(
                        f"{self.path}: another writer held the index for "
                        f"{config.SERVE_WRITE_WAIT_S} s; retry later"
                    )
                time.sleep(0.005)
            self._held = 1
            try:
                self._load()
                yield self
            finally:
                self._held = 0
                self._release_stale()

    @property
    def _lease(self) -> str:
        return f"{self.name}:lock"

    def _release_stale(self) -> None:
        """Give back the leases we may hold; kept for later while Redis is down."""
        while self._stale:
            try:
                self._client.eval(_RELEASE, 1, self._lease, self._stale[-1])
            except self._redis.exceptions.RedisError:
                return
            self._stale.pop()

    def _check_writable(self) -> None:
        if self._closed:
            raise ValueError(f"index {self.path} is closed; open it again with Index.open")
        if self.mode != "w":
            raise ValueError(f"index {self.path} is open read-only; open it with mode='w'")

    # ------------------------------------------------------------------ writes
    def add(
        self,
        fingerprints: Sequence[int] | np.ndarray,
        ids: Sequence[int] | Sequence[str] | np.ndarray | None = None,
    ) -> None:
        """As :meth:`neardup.Index.add`; durable once it returns (with Redis's
        ``appendfsync always``). Raises :class:`IndexUnavailableError` if Redis fails midway:
        nothing is then visible, and the same call may be retried."""
        fp = as_fingerprints(fingerprints, "fingerprints")
        with self.lock():
            if ids is None:
                if self.id_type == "str":
                    raise ValueError("this index has string ids; pass ids to add()")
                start = int(self._meta_fields["next_id"])
                ids = np.arange(start, start + len(fp), dtype=np.int64)
            conv = convert_ids(ids, len(fp), self.id_type)
            if len(fp) == 0:
                return
            if conv.kind == "str" and len(set(conv.values)) != len(conv.values):
                raise ValueError("ids repeat within the batch; ids must be unique")
            if len(np.unique(conv.keys)) != len(conv.keys):
                what = "ids repeat" if conv.kind == "int64" else "two string ids share a hash"
                raise ValueError(f"{what} within the batch; ids must be unique")
            present, _, raw = self._entries(conv.keys)
            if present.any():
                i = int(np.flatnonzero(present)[0])
                if conv.kind == "str" and raw[i][8:].decode("utf-8") != conv.values[i]:
                    raise ValueError(
                        f"id {show_id(conv.values[i])} has the same 64-bit hash as stored id "
                        f"{raw[i][8:].decode('utf-8')!r}; use another id"
                    )
                raise ValueError(
                    f"id {show_id(conv.values[i])} is already in the index "
                    f"({int(present.sum())} of the batch are); remove them first"
                )
            recs = np.empty(len(fp), RECORD)
            recs["fp"], recs["key"] = fp, conv.keys
            cmds: list[tuple[Any, ...]] = []
            for t in range(self.layout.n_tables):
                b = self._buckets(fp, t)
                order = np.argsort(b, kind="stable")
                data = recs[order].tobytes()
                bs = b[order]
                starts = np.flatnonzero(np.concatenate(([True], bs[1:] != bs[:-1])))
                ends = np.append(starts[1:], len(bs)) * RECORD.itemsize
                for s, e_, bucket in zip(
                    (starts * RECORD.itemsize).tolist(),
                    ends.tolist(),
                    bs[starts].tolist(),
                ):
                    cmds.append(("append", self._bucket_key(t, bucket), data[s:e_]))
            self._pipeline(cmds)
            # the entries commit the add (records without entries are ignored by queries)
            kb = conv.keys.astype("<i8").tobytes()
            vb = fp.astype("<u8").tobytes()
            shards = self._shards(conv.keys)
            fields: dict[int, dict[bytes, bytes]] = {}
            utf8 = [v.encode("utf-8") for v in conv.values] if conv.kind == "str" else None
            for i, s in enumerate(shards.tolist()):
                value = vb[8 * i : 8 * i + 8] + (utf8[i] if utf8 is not None else b"")
                fields.setdefault(s, {})[kb[8 * i : 8 * i + 8]] = value
            self._pipeline([("hset", self._shard_key(s), None, None, m) for s, m in fields.items()])
            meta: dict[str, Any] = {"id_type": conv.kind}
            if conv.kind == "int64":
                meta["next_id"] = max(int(self._meta_fields["next_id"]), int(conv.keys.max()) + 1)
            self._pipeline([("hset", self._meta, None, None, meta)])
            self._bump()

    def _bump(self) -> None:
        self._pipeline([("hincrby", self._meta, "generation", 1)])
        self._load()

    def remove(
        self, ids: Sequence[int] | Sequence[str] | np.ndarray, *, missing: str = "error"
    ) -> int:
        """As :meth:`neardup.Index.remove`: remove entries by id, return how many."""
        if missing not in ("error", "ignore"):
            raise ValueError(f"missing must be 'error' or 'ignore' (got {missing!r})")
        with self.lock():
            conv = convert_ids(ids, None, self.id_type)
            if len(conv.keys) == 0:
                return 0
            present, fps, _ = self._lookup(conv)
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
            shards = self._shards(keys).tolist()
            removed = sum(
                self._pipeline([("hdel", self._shard_key(s), k) for s, k in zip(shards, kbs)])
            )
            cmds = []
            for t in range(self.layout.n_tables):
                b = self._buckets(fps, t)
                for bucket in np.unique(b).tolist():
                    drop = [kbs[i] for i in np.flatnonzero(b == bucket).tolist()]
                    cmds.append(
                        (
                            "execute_command",
                            "EVAL",
                            _DROP_RECORDS,
                            1,
                            self._bucket_key(t, bucket),
                            *drop,
                        )
                    )
            self._pipeline(cmds)
            self._bump()
            return int(removed)

    def compact(self) -> None:
        """Nothing to merge on Redis (buckets are rewritten by each remove)."""

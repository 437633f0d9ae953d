"""Redis plumbing of the Redis index: the key layout, connecting, the layout choice, and
:class:`RedisStore`, one open index's connection, metadata and round trips (what the index's
queries and its writer share).

See :mod:`neardup.index.redis` for the data model.
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import Sequence
from typing import Any
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

import numpy as np

from neardup import config
from neardup._optional import require
from neardup.core import cost as cost_model
from neardup.core.layout import Layout
from neardup.index.segments import Ids
from neardup.index.storage import CorruptIndexError

__all__ = [
    "IndexUnavailableError",
    "RedisStore",
    "choose_redis_layout",
    "connect",
    "is_redis_url",
    "shown_url",
    "split_url",
]

#: Redis index: records per bucket the automatic layout aims at (measured in docs/benchmarks/service.md, "Redis bucket width").
REDIS_BUCKET_RECORDS = 128

#: Redis index: cost of reading one more bucket in a query, in records scanned (layout choice).
REDIS_READ_COST = 1000.0

#: Commands per pipeline round trip.
REDIS_PIPELINE = 10_000

MAGIC = "neardup-redis-index"
FORMAT_VERSION = 1
RECORD = np.dtype([("fp", "<u8"), ("key", "<i8")])
#: Fibonacci hashing multiplier that spreads id keys over the entry shards
GOLDEN = np.uint64(0x9E3779B97F4A7C15)
_SCHEMES = ("redis://", "rediss://", "unix://")


class IndexUnavailableError(ConnectionError):
    """The storage behind an index cannot be reached; a write that raised this was not
    acknowledged (it may be partly applied, which queries ignore; retrying it is safe)."""


def is_redis_url(location: object) -> bool:
    """True for ``redis://``, ``rediss://`` and ``unix://`` locations."""
    return isinstance(location, str) and location.startswith(_SCHEMES)


def choose_redis_layout(n: int, distance: int) -> tuple[int, int]:
    """``(blocks, bucket_bits)`` for about ``n`` fingerprints on Redis.

    A query reads one bucket per table (``C(blocks, distance)`` reads) of about
    ``n / 2**bucket_bits`` records each. Buckets aim at ``REDIS_BUCKET_RECORDS`` records
    (smaller buckets mean more keys, and Redis spends about 60-80 bytes per key); a table's
    bucket bits cannot exceed its leading prefix, so large ``n`` needs more blocks. The layout
    with the least ``tables * (REDIS_READ_COST + records per bucket)`` wins (constants measured
    by ``bench/serve.py --sweep``).
    """
    want = max(1, math.ceil(math.log2(max(2.0, n / REDIS_BUCKET_RECORDS))))
    best, best_cost = (distance + 1, 1), math.inf
    for blocks in range(distance + 1, 65):
        layout = Layout(blocks, distance)
        if layout.n_tables > cost_model.MAX_INDEX_TABLES:
            break
        bits = min(want, min(t.prefix_bits for t in layout.tables))
        cost = layout.n_tables * (REDIS_READ_COST + n / 2.0**bits)
        if cost < best_cost:
            best, best_cost = (blocks, bits), cost
    return best


def shown_url(url: str) -> str:
    """``url`` as it may be shown (messages, ``/stats``): a password in it replaced by
    ``***``, and ``password=`` query values too."""
    parts = urlsplit(url)
    netloc = parts.netloc
    if "@" in netloc:
        auth, host = netloc.rsplit("@", 1)
        user = auth.split(":", 1)[0] if ":" in auth else ""
        netloc = f"{user}:***@{host}" if ":" in auth else f"***@{host}"
    query = parse_qsl(parts.query, keep_blank_values=True)
    if any(k == "password" for k, _ in query):
        query = [(k, "***" if k == "password" else v) for k, v in query]
    return _unsplit(parts._replace(netloc=netloc, query=urlencode(query, safe="*")))


def _unsplit(parts: Any) -> str:
    """``urlunsplit`` that keeps the ``//`` of a URL without a host (``unix:///run/r.sock``)."""
    if parts.netloc:
        return urlunsplit(parts)
    out = f"{parts.scheme}://{parts.path}"
    return out + (f"?{parts.query}" if parts.query else "")


def split_url(url: str) -> tuple[str, str]:
    """(URL for redis-py, index name from ``?name=``)."""
    parts = urlsplit(url)
    query = parse_qsl(parts.query, keep_blank_values=True)
    name = next((v for k, v in query if k == "name"), "neardup")
    if not name or any(c in name for c in "{}: "):
        raise ValueError(
            f"{shown_url(url)}: index name {name!r} must be non-empty without '{{}}: '"
        )
    rest = urlencode([(k, v) for k, v in query if k != "name"])
    return _unsplit(parts._replace(query=rest)), name


def connect(url: str) -> Any:
    """A redis-py client for ``url``: a RedisCluster when the server runs in cluster mode."""
    redis = require("redis", "server", "the Redis index backend")
    kw = {
        "socket_timeout": config.REDIS_TIMEOUT_S,
        "socket_connect_timeout": config.REDIS_TIMEOUT_S,
    }
    client = redis.Redis.from_url(url, **kw)
    try:
        cluster = int(client.info("cluster").get("cluster_enabled", 0)) == 1
    except redis.exceptions.RedisError as e:
        client.close()
        raise IndexUnavailableError(f"{shown_url(url)}: Redis is unavailable ({e})") from None
    if not cluster:
        return client
    client.close()
    from redis.cluster import RedisCluster

    try:
        return RedisCluster.from_url(url, **kw)
    except redis.exceptions.RedisError as e:
        raise IndexUnavailableError(
            f"{shown_url(url)}: Redis Cluster is unavailable ({e})"
        ) from None


def redis_errors() -> tuple[type[Exception], ...]:
    """The exceptions of redis-py that mean Redis could not answer."""
    errors = require("redis", "server", "the Redis index backend").exceptions
    return (errors.RedisError, errors.RedisClusterException)


def create_meta(url: str, meta: dict[str, Any]) -> None:
    """Write the metadata hash of a new index at ``url`` (``?name=`` names it).

    Raises
    ------
    FileExistsError
        If an index of that name exists there.
    IndexUnavailableError
        If Redis cannot be reached.
    """
    redis_url, name = split_url(url)
    client = connect(redis_url)
    try:
        if not client.hsetnx(f"{name}:meta", "magic", MAGIC):
            raise FileExistsError(f"{shown_url(url)}: an index named {name!r} already exists there")
        client.hset(f"{name}:meta", mapping={"magic": MAGIC, **meta})
    except redis_errors() as e:
        raise IndexUnavailableError(f"{shown_url(url)}: Redis is unavailable ({e})") from None
    finally:
        client.close()


class RedisStore:
    """One open Redis index: its connection, keys, metadata and round trips.

    :class:`neardup.index.redis.RedisIndex` reads through it and its
    :class:`~neardup.index.redis_writer.RedisWriter` writes through it; both see the metadata
    as of the last :meth:`load`.

    Parameters
    ----------
    url
        ``redis://host:port/db?name=NAME`` (or ``rediss://``, ``unix://``).

    Raises
    ------
    IndexUnavailableError
        When Redis cannot be reached.
    FileNotFoundError
        When no index of that name is there.
    CorruptIndexError
        When the metadata is not a neardup index of this format.
    """

    def __init__(self, url: str) -> None:
        self.path = shown_url(url)  # shown in messages and info(): no password
        redis_url, self.name = split_url(url)
        self.errors = redis_errors()
        self.client = connect(redis_url)
        self.cluster = hasattr(self.client, "nodes_manager")  # a redis-py RedisCluster
        self.closed = False
        try:
            self.load()
        except BaseException:
            self.close()
            raise

    # ------------------------------------------------------------------ metadata
    def load(self) -> None:
        """Reread the metadata: layout, bucket bits, entry shards, id kind, generation."""
        raw = self.call(self.client.hgetall, self.meta_key)
        meta = {k.decode(): v.decode() for k, v in raw.items()}
        if not meta:
            raise FileNotFoundError(f"{self.path}: no index named {self.name!r} in this Redis")
        if meta.get("magic") != MAGIC or int(meta.get("format_version", -1)) != FORMAT_VERSION:
            raise CorruptIndexError(
                f"{self.path}: {self.meta_key} is not a neardup index of format {FORMAT_VERSION}"
            )
        self.layout = Layout(int(meta["blocks"]), int(meta["distance"]))
        self.bucket_bits = int(meta["bucket_bits"])
        self.entry_shards = int(meta["entry_shards"])
        self._shard_shift = np.uint64(64 - self.entry_shards.bit_length() + 1)
        self.meta = meta

    @property
    def id_type(self) -> str | None:
        """``"int64"``, ``"str"`` or ``None`` before the first add."""
        return self.meta.get("id_type") or None

    @property
    def meta_key(self) -> str:
        return f"{self.name}:meta"

    @property
    def lease_key(self) -> str:
        return f"{self.name}:lock"

    def bucket_key(self, t: int, b: int) -> str:
        """The key of bucket ``b`` of table ``t``."""
        return f"{self.name}:t{t}:{b:x}"

    def shard_key(self, s: int) -> str:
        """The key of entry shard ``s``."""
        return f"{self.name}:e:{s:x}"

    def shards(self, keys: np.ndarray) -> np.ndarray:
        """The entry shard of each int64 id key (Fibonacci hashing)."""
        return (keys.view(np.uint64) * GOLDEN) >> self._shard_shift

    def buckets(self, fps: np.ndarray, t: int) -> np.ndarray:
        """The bucket of each fingerprint in table ``t``."""
        return self.layout.apply(fps, t) >> np.uint64(64 - self.bucket_bits)

    # ------------------------------------------------------------------ round trips
    def check_open(self) -> None:
        if self.closed:
            raise ValueError(f"index {self.path} is closed; open it again with Index.open")

    def call(self, fn: Any, *args: Any, **kw: Any) -> Any:
        """``fn(*args, **kw)``, a Redis failure raised as :class:`IndexUnavailableError`."""
        try:
            return fn(*args, **kw)
        except self.errors as e:
            raise IndexUnavailableError(f"{self.path}: Redis is unavailable ({e})") from None

    def pipeline(self, commands: Sequence[tuple[Any, ...]]) -> list[Any]:
        """Run ``(method, *args)`` commands in pipelines of ``REDIS_PIPELINE``."""
        self.check_open()
        out: list[Any] = []
        step = REDIS_PIPELINE
        for s in range(0, len(commands), step):
            pipe = self.client.pipeline(transaction=False)
            for name, *args in commands[s : s + step]:
                getattr(pipe, name)(*args)
            out.extend(self.call(pipe.execute))
        return out

    def count(self) -> int:
        """Number of entries (one HLEN per entry shard)."""
        lens = self.pipeline([("hlen", self.shard_key(s)) for s in range(self.entry_shards)])
        return int(sum(lens))

    def lookup(self, ids: Ids) -> tuple[np.ndarray, np.ndarray, list[Any]]:
        """(present, stored fingerprint, raw entry values) of each id of ``ids``."""
        present, fps, raw = self.entries(ids.keys)
        if ids.kind == "str":
            for i, v in enumerate(raw):
                if v is not None and v[8:].decode("utf-8") != ids.values[i]:
                    present[i] = False
        return present, fps, raw

    def entries(self, keys: np.ndarray) -> tuple[np.ndarray, np.ndarray, list[Any]]:
        """(present, fingerprint, raw value) of the entries of int64 id keys ``keys``."""
        n = len(keys)
        present = np.zeros(n, dtype=bool)
        fps = np.zeros(n, dtype=np.uint64)
        raw: list[Any] = [None] * n
        if n == 0:
            return present, fps, raw
        shards = self.shards(keys)
        order = np.argsort(shards, kind="stable")
        groups = np.split(order, np.flatnonzero(np.diff(shards[order])) + 1)
        kb = keys.astype("<i8").tobytes()
        cmds = [
            ("hmget", self.shard_key(int(shards[g[0]])), [kb[8 * i : 8 * i + 8] for i in g])
            for g in groups
        ]
        for g, values in zip(groups, self.pipeline(cmds), strict=True):
            for i, v in zip(g.tolist(), values, strict=True):
                raw[i] = v
        present[:] = [v is not None for v in raw]
        if present.any():
            fps[present] = np.frombuffer(b"".join(v[:8] for v in raw if v is not None), "<u8")
        return present, fps, raw

    def close(self) -> None:
        """Close the connections."""
        self.closed = True
        with contextlib.suppress(Exception):
            self.client.close()

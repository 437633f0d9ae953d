"""Redis plumbing of the Redis index: key layout constants, connecting, the layout choice.

See :mod:`neardup.index.redis` for the data model.
"""

from __future__ import annotations

import math
from typing import Any
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

import numpy as np

from neardup import config
from neardup._optional import require
from neardup.core import cost as cost_model
from neardup.core.layout import Layout

__all__ = [
    "IndexUnavailableError",
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

# Removes the records of the given id keys (8 bytes each) from one bucket; one key, so it runs
# on whichever Redis Cluster node holds the bucket.
_DROP_RECORDS = """
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
_APPEND_MANY = """
local n = #ARGV / 2
for i = 1, n do redis.call('APPEND', ARGV[i], ARGV[n + i]) end
return n
"""
_APPEND_MANY_CLUSTER = "#!lua flags=allow-cross-slot-keys\n" + _APPEND_MANY

# Extends the writer's lease (ARGV[2] ms) if it still holds it (token ARGV[1]); 0 if it lost it.
_RENEW = """
if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('PEXPIRE', KEYS[1], ARGV[2]) end
return 0
"""

# Takes the writers' lease for token ARGV[1] (ARGV[2] ms) if it is free, or already ours: a
# client that retries the call after a lost reply (redis-py does) finds its own token there.
_ACQUIRE = """
local held = redis.call('GET', KEYS[1])
if held == ARGV[1] then return redis.call('PEXPIRE', KEYS[1], ARGV[2]) end
if held then return 0 end
redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
return 1
"""

_RELEASE = """
if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end
return 0
"""


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

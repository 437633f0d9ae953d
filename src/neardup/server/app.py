"""The FastAPI application of ``neardup serve``: endpoints, authentication, one-line errors.

Every error is a JSON object ``{"error": "one line"}`` with a 4xx status for a bad request
(400 malformed JSON or a value the index refuses, 401 missing or wrong token, 404 unknown id,
413 batch or body too large, 422 wrong types or values) and 503 when the storage is unavailable
or the writer stayed busy (retry; nothing was acknowledged). A 500 says only the exception's
type; its traceback goes to the server log.
"""

from __future__ import annotations

import gc
import json
import logging
import os
from typing import Any

import numpy as np

from neardup import config
from neardup._optional import require
from neardup.core.decide import DEFAULT_DEDUP_THRESHOLD
from neardup.errors import NO_SPACE
from neardup.index.redis import IndexUnavailableError
from neardup.index.storage import CorruptIndexError
from neardup.server import _kernels
from neardup.server.backends import open_backend
from neardup.server.guard import Access, Guard, access_log, error_response
from neardup.server.metrics import Metrics
from neardup.server.schemas import (
    AddResponse,
    BadRequest,
    Batch,
    DedupRequest,
    DedupResponse,
    QueryRequest,
    QueryResponse,
    RemoveRequest,
    RemoveResponse,
    WriteRequest,
    to_fingerprints,
    to_ids,
)

__all__ = ["create_app", "app_from_env", "CONFIG_ENV", "READ_TOKEN_ENV", "WRITE_TOKEN_ENV"]

#: Environment variable carrying the service's settings (JSON) to uvicorn's worker processes.
CONFIG_ENV = "NEARDUP_SERVE_CONFIG"
#: Environment variables with the tokens (never on a command line, where ``ps`` shows them).
WRITE_TOKEN_ENV = "NEARDUP_TOKEN"
READ_TOKEN_ENV = "NEARDUP_READ_TOKEN"

log = logging.getLogger("neardup.serve")

#: Local index: queries of at most this many fingerprints run on the event loop itself (tens
#: of microseconds) instead of hopping to the thread pool.
INLINE_QUERIES = 64


def _json(body: Any, status: int = 200, headers: dict[str, str] | None = None) -> Any:
    from starlette.responses import Response

    data = json.dumps(body, separators=(",", ":")).encode()
    return Response(data, status_code=status, media_type="application/json", headers=headers)


def _error(status: int, message: str, **headers: str) -> Any:
    return error_response(status, message, headers or None)


def _matches(m: Any, n: int) -> list[list[dict[str, Any]]]:
    """Per query, its matches as JSON objects (``jaccard``: the estimate of a verified match,
    else null)."""
    bounds = m.offsets.tolist()
    ids = m.ids.tolist()
    dist = m.distances.tolist()
    jac = [None] * len(ids) if m.jaccards is None else [round(j, 6) for j in m.jaccards.tolist()]
    return [
        [{"id": i, "distance": d, "jaccard": j} for i, d, j in zip(ids[a:b], dist[a:b], jac[a:b])]
        for a, b in zip(bounds[:-1], bounds[1:])
    ]


def _failure(exc: BaseException) -> Any:
    """The one-line error response for an exception raised while answering a request."""
    if isinstance(exc, BadRequest):
        return _error(exc.status, str(exc))
    if isinstance(exc, IndexUnavailableError):
        return _error(503, str(exc), **{"Retry-After": "1"})
    if isinstance(exc, CorruptIndexError):
        log.error("index error: %s", exc)
        return _error(503, str(exc))
    if isinstance(exc, OSError) and exc.errno in NO_SPACE:
        log.error("storage full: %s", exc)
        return _error(
            503,
            f"the index's storage is full ({os.strerror(exc.errno)}); nothing was "
            "acknowledged: free space, then retry",
            **{"Retry-After": "10"},
        )
    if isinstance(exc, ValueError):
        return _error(400, str(exc))
    if isinstance(exc, KeyError):
        return _error(404, exc.args[0] if exc.args else "unknown id")
    log.error("unexpected error", exc_info=exc)
    return _error(500, f"internal error ({type(exc).__name__}); see the server log")


def _plain_query(body: bytes) -> tuple[np.ndarray, int | None] | None:
    """(fingerprints, distance) of a ``/query`` body that is a JSON object holding at most
    ``INLINE_QUERIES`` integer fingerprints in ``[0, 2**64)`` and an optional integer
    distance, else None (anything else takes the validating route and its error messages)."""
    try:
        req = json.loads(body)
    except ValueError:
        return None
    if type(req) is not dict or not req.keys() <= {"fingerprints", "distance"}:
        return None
    fps, distance = req.get("fingerprints"), req.get("distance")
    if type(fps) is not list or not 0 < len(fps) <= INLINE_QUERIES:
        return None
    if (distance is not None and type(distance) is not int) or any(type(v) is not int for v in fps):
        return None
    try:
        return np.array(fps, dtype=np.uint64), distance
    except OverflowError:  # negative or >= 2**64
        return None


def _results_body(m: Any, n: int) -> bytes:
    """The JSON text of ``[{"matches": [...]}, ...]`` for ``n`` queries (integer ids: written
    by a numba kernel, about 30x faster than building and dumping the objects)."""
    if m.ids.dtype.kind == "i" and m.jaccards is None:
        ids = np.ascontiguousarray(m.ids, dtype=np.int64)
        dist = np.ascontiguousarray(m.distances, dtype=np.int64)
        return _kernels.results_json(m.offsets, ids, dist).tobytes()
    return json.dumps([{"matches": r} for r in _matches(m, n)], separators=(",", ":")).encode()


def _query_response(m: Any, n: int, shown: list[str] | None, generation: int) -> Any:
    """The ``/query`` answer: results, then the texts' fingerprints if any, then generation."""
    from starlette.responses import Response

    parts = [b'{"results":', _results_body(m, n)]
    if shown is not None:
        parts += [b',"fingerprints":', json.dumps(shown, separators=(",", ":")).encode()]
    parts.append(b',"generation":%d}' % generation)
    return Response(b"".join(parts), media_type="application/json")


def create_app(
    index: str,
    *,
    token: str | None = None,
    read_token: str | None = None,
    hosts: list[str] | None = None,
    preset: str = "default",
    window: int | None = None,
) -> Any:
    """The service over the index at ``index`` (a directory or a ``redis://`` URL).

    Parameters
    ----------
    index : str
        Index directory or ``redis://host:port/db?name=NAME``.
    token : str, optional
        The write token: when set, ``/add``, ``/remove`` and ``/dedup`` need
        ``Authorization: Bearer TOKEN``.
    read_token : str, optional
        When set, ``/query``, ``/stats`` and ``/metrics`` need ``Authorization: Bearer`` with
        it (or with the write token); ``/health`` and the docs stay open.
    hosts : list of str, optional
        The ``Host`` header values served (host names without port); None serves any.
    preset, window :
        The :class:`neardup.Fingerprinter` applied to ``texts``; use the settings the index's
        fingerprints were made with.
    """
    require("fastapi", "server", "neardup serve")
    FastAPIOffline = require("fastapi_offline", "server", "neardup serve").FastAPIOffline

    from neardup.fingerprints import Fingerprinter

    access = Access(token, read_token, None if hosts is None else frozenset(hosts))
    backend = open_backend(index)
    e = np.empty(0, dtype=np.int64)
    _kernels.results_json(np.zeros(1, np.int64), e, e)  # compiled or loaded now, not mid-request
    fingerprinter = Fingerprinter(preset, **({} if window is None else {"window": window}))
    app = FastAPIOffline(
        title="neardup",
        summary="Near-duplicate lookups over 64-bit simhash fingerprints",
        description=(
            "Fingerprints are unsigned 64-bit integers (bit 63 most significant), sent as JSON "
            "integers or decimal strings. A match is popcount(a ^ b) <= distance. Batches hold "
            f"at most {config.SERVE_MAX_BATCH} items. Writes are durable before the response."
        ),
        version="1",
        swagger_ui_parameters={"validatorUrl": None},
    )
    metrics = Metrics(lambda: _index_state(backend))
    app.add_middleware(
        Guard, access=access, fast_query=_fast_lane(backend), observe=metrics.observe
    )
    _handlers(app)
    _routes(app, backend, fingerprinter, metrics)
    return app


def _index_state(backend: Any) -> tuple[int, int]:
    ix = backend.reader()
    return len(ix), ix.generation


def _fast_lane(backend: Any) -> Any:
    """The fast lane: a small plain ``/query`` body answered without FastAPI's routing and
    validation (about half the CPU time of a one-fingerprint query), the same JSON; None for
    any other body (the route answers it)."""
    from starlette.concurrency import run_in_threadpool

    def answer(q: np.ndarray, distance: int | None) -> Any:
        try:
            m, gen = backend.query(q, distance)
        except Exception as e:
            return _failure(e)
        return _query_response(m, len(q), None, gen)

    async def fast(body: bytes) -> Any:
        plain = _plain_query(body)
        if plain is None:
            return None
        if backend.kind == "local":
            return answer(*plain)  # microseconds: cheaper than a thread hop
        return await run_in_threadpool(answer, *plain)

    return fast


def _handlers(app: Any) -> None:
    """One-line JSON errors for everything FastAPI or an endpoint raises."""
    from fastapi.exceptions import RequestValidationError
    from starlette.exceptions import HTTPException

    @app.exception_handler(RequestValidationError)
    async def invalid(_request: Any, exc: RequestValidationError) -> Any:
        errs = exc.errors()
        e = errs[0] if errs else {"msg": "invalid request", "loc": (), "type": ""}
        if e.get("type") == "json_invalid":
            return _error(400, f"malformed JSON: {e.get('ctx', {}).get('error', e['msg'])}")
        path = [p for p in e.get("loc", ()) if p != "body"]
        msg = e["msg"]
        if path and path[-1] in ("int", "str"):  # a member of the int-or-string union
            path = path[:-1]
            msg = f"must be an integer or a string of decimal digits (got {e.get('input')!r:.40})"
        loc = "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in path).lstrip(".")
        n = len({tuple(p for p in x.get("loc", ()) if p not in ("int", "str")) for x in errs}) - 1
        more = f" ({n} more errors)" if n > 0 else ""
        return _error(422, f"{loc or 'body'}: {msg}{more}")

    @app.exception_handler(HTTPException)
    async def http_error(_request: Any, exc: HTTPException) -> Any:
        return _error(exc.status_code, exc.detail)

    # each class named: a handler for Exception alone would answer, then re-raise (traceback)
    @app.exception_handler(BadRequest)
    @app.exception_handler(IndexUnavailableError)
    @app.exception_handler(CorruptIndexError)
    @app.exception_handler(ValueError)
    @app.exception_handler(KeyError)
    @app.exception_handler(OSError)
    @app.exception_handler(Exception)
    async def failed(_request: Any, exc: Exception) -> Any:
        return _failure(exc)


def _batch_of(
    req: Any, backend: Any, fingerprinter: Any, need_sketches: bool = False
) -> tuple[Batch, list[str] | None]:
    """A request's :class:`Batch` and, for texts, their fingerprints as strings; texts to an
    index with sketches get their sketches, which a write there needs."""
    words = backend.sketch_words
    b = to_fingerprints(req, fingerprinter, words)
    if need_sketches and words is not None and b.sketches is None:
        raise BadRequest(
            "this index keeps a MinHash sketch of each document's shingles (created with "
            "--threshold): send 'texts', not 'fingerprints'",
            400,
        )
    if getattr(req, "threshold", None) is not None and b.sketches is None:
        raise BadRequest(
            "'threshold' needs 'texts' and an index with sketches (`neardup index create "
            "--threshold`)",
            400,
        )
    return b, ([str(v) for v in b.fingerprints.tolist()] if b.from_texts else None)


def _routes(app: Any, backend: Any, fingerprinter: Any, metrics: Metrics) -> None:
    """The endpoints (their docstrings are the descriptions shown at /docs)."""
    _read_routes(app, backend, fingerprinter, metrics)
    _write_routes(app, backend, fingerprinter)


def _read_routes(app: Any, backend: Any, fingerprinter: Any, metrics: Metrics) -> None:
    from starlette.concurrency import run_in_threadpool
    from starlette.responses import Response

    def answer(req: QueryRequest) -> Any:
        b, shown = _batch_of(req, backend, fingerprinter)
        m, gen = backend.query(b.fingerprints, req.distance, b.sketches, req.threshold)
        return _query_response(m, len(b.fingerprints), shown, gen)

    @app.post("/query", response_model=QueryResponse, tags=["read"])
    async def query(req: QueryRequest) -> Any:
        """Every indexed id within ``distance`` bits of each fingerprint or text, nearest first.
        Texts sent to an index with sketches (``neardup index create --threshold``) match when
        their estimated Jaccard reaches ``threshold`` (default: the index's own), best first,
        with it in ``jaccard``."""
        small = req.fingerprints is not None and len(req.fingerprints) <= INLINE_QUERIES
        if small and backend.kind == "local":
            return answer(req)  # microseconds: cheaper than a hop to the thread pool
        return await run_in_threadpool(answer, req)

    @app.get("/stats", tags=["read"])
    def stats() -> Any:
        """Layout, entries, generation and limits of the index (no paths, no credentials)."""
        full = backend.stats()
        info = {k: v for k, v in full.items() if k not in ("path", "segments")}
        info.update(
            segments=len(full.get("segments", ())),
            max_batch=config.SERVE_MAX_BATCH,
            max_body_bytes=config.SERVE_MAX_BODY,
        )
        return _json(info)

    @app.get("/health", tags=["read"])
    def health() -> Any:
        """200 when the index answers, 503 when its storage is unavailable."""
        return _json(backend.health())

    @app.get("/metrics", tags=["read"])
    def metrics_text() -> Any:
        """Prometheus metrics: requests, latency, errors, index entries and generation."""
        body, media = metrics.render()
        return Response(body, media_type=media)


def _write_routes(app: Any, backend: Any, fingerprinter: Any) -> None:
    @app.post("/add", response_model=AddResponse, tags=["write"])
    def add(req: WriteRequest) -> Any:
        """Store fingerprints (or texts) with their ids, durably. An id already stored with the
        same fingerprint is skipped (counted in ``already``), so a retried call is safe; an id
        stored with another fingerprint is refused (400)."""
        b, _ = _batch_of(req, backend, fingerprinter, need_sketches=True)
        ids = to_ids(req.ids, len(b.fingerprints))
        added, already, gen = backend.add(b.fingerprints, ids, b.sketches)
        return _json({"added": added, "already": already, "generation": gen})

    @app.post("/remove", response_model=RemoveResponse, tags=["write"])
    def remove(req: RemoveRequest) -> Any:
        """Remove entries by id, durably."""
        removed, gen = backend.remove(to_ids(req.ids), req.missing)
        return _json({"removed": removed, "generation": gen})

    @app.post("/dedup", response_model=DedupResponse, tags=["write"])
    def dedup(req: DedupRequest) -> Any:
        """Which items are new, and store the new ones, in one write.

        An item is new when nothing indexed is within ``distance`` bits and no earlier new item
        of the same request is (first survivor; a duplicate's ``matches`` name what it
        duplicates). On an index with sketches a match must also reach ``threshold`` (default
        0.8), estimated from the sketches. Items already stored under their own id (a retried
        call) are not stored again and get the same answer."""
        b, shown = _batch_of(req, backend, fingerprinter, need_sketches=True)
        q, ids = b.fingerprints, to_ids(req.ids, len(b.fingerprints))
        threshold = None
        if b.sketches is not None:
            threshold = DEFAULT_DEDUP_THRESHOLD if req.threshold is None else req.threshold
        o, gen = backend.dedup(q, ids, req.distance, b.sketches, threshold)
        return _json(_dedup_body(o, len(q), ids, shown, gen))


def _dedup_body(o: Any, n: int, ids: np.ndarray, shown: list[str] | None, gen: int) -> dict:
    """The ``/dedup`` answer: per item ``new`` and its matches (an earlier item of the batch
    marked ``in_batch``), ``added``, the texts' fingerprints if any, and the generation."""
    per = _matches(o.matches, n)
    idl = ids.tolist()
    for j in np.flatnonzero(o.by >= 0).tolist():
        i = int(o.by[j])
        per[j].append(
            {"id": idl[i], "distance": int(o.by_distance[j]), "jaccard": None, "in_batch": True}
        )
    results = [{"new": bool(v), "matches": r} for v, r in zip(o.new.tolist(), per)]
    out: dict[str, Any] = {"results": results, "added": o.added}
    if shown is not None:
        out["fingerprints"] = shown
    out["generation"] = gen
    return out


def app_from_env() -> Any:
    """The app configured by ``NEARDUP_SERVE_CONFIG`` (what uvicorn's workers import)."""
    from neardup.server.protocol import LIMITS

    settings = json.loads(os.environ[CONFIG_ENV])
    for k in LIMITS:
        LIMITS[k] = settings.get(k, LIMITS[k])
    if settings.get("access_log"):
        handler = logging.StreamHandler()
        handler.setFormatter(logging.Formatter("%(message)s"))
        access_log.addHandler(handler)
        access_log.setLevel(logging.INFO)
        access_log.propagate = False
    app = create_app(
        settings["index"],
        token=os.environ.get(WRITE_TOKEN_ENV) or None,
        read_token=os.environ.get(READ_TOKEN_ENV) or None,
        hosts=settings.get("hosts"),
        preset=settings.get("preset", "default"),
        window=settings.get("window"),
    )
    # The modules and the open index are ~150,000 long-lived objects: a full collection over
    # them stops a worker for ~100 ms. Freezing them leaves the collector only the requests'.
    gc.collect()
    gc.freeze()
    return app

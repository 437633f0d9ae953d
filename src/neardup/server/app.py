"""The FastAPI application of ``neardup serve``: endpoints, authentication, one-line errors.

Every error is a JSON object ``{"error": "one line"}`` with a 4xx status for a bad request
(400 malformed JSON or a value the index refuses, 401 missing or wrong token, 404 unknown id,
413 batch or body too large, 422 wrong types or values) and 503 when the storage is unavailable
or the writer stayed busy (retry; nothing was acknowledged). A 500 says only the exception's
type; its traceback goes to the server log.
"""

from __future__ import annotations

import gc
import hmac
import json
import logging
import os
from typing import Any

import numpy as np

from neardup import config
from neardup._optional import require
from neardup.index.redis import IndexUnavailableError
from neardup.index.storage import CorruptIndexError
from neardup.server import _kernels
from neardup.server.backends import open_backend
from neardup.server.schemas import (
    AddResponse,
    BadRequest,
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

__all__ = ["create_app", "app_from_env", "CONFIG_ENV"]

#: Environment variable carrying the service's settings (JSON) to uvicorn's worker processes.
CONFIG_ENV = "NEARDUP_SERVE_CONFIG"

log = logging.getLogger("neardup.serve")
_WRITE_PATHS = ("/add", "/remove", "/dedup")


def _json(body: Any, status: int = 200, headers: dict[str, str] | None = None) -> Any:
    from starlette.responses import Response

    data = json.dumps(body, separators=(",", ":")).encode()
    return Response(data, status_code=status, media_type="application/json", headers=headers)


def _error(status: int, message: str, **headers: str) -> Any:
    return _json({"error": " ".join(str(message).split())}, status, headers or None)


def _matches(m: Any, n: int) -> list[list[dict[str, Any]]]:
    """Per query, its matches as JSON objects (``jaccard`` stays null: no sketches yet)."""
    bounds = np.searchsorted(m.query_index, np.arange(n + 1)).tolist()
    ids = m.id.tolist()
    dist = m.distance.tolist()
    return [
        [{"id": i, "distance": d, "jaccard": None} for i, d in zip(ids[a:b], dist[a:b])]
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
    if isinstance(exc, ValueError):
        return _error(400, str(exc))
    if isinstance(exc, KeyError):
        return _error(404, exc.args[0] if exc.args else "unknown id")
    log.error("unexpected error", exc_info=exc)
    return _error(500, f"internal error ({type(exc).__name__}); see the server log")


def _plain_query(body: bytes) -> tuple[np.ndarray, int | None] | None:
    """(fingerprints, distance) of a ``/query`` body that is a JSON object holding at most
    ``config.SERVE_INLINE`` integer fingerprints in ``[0, 2**64)`` and an optional integer
    distance, else None (anything else takes the validating route and its error messages)."""
    try:
        req = json.loads(body)
    except ValueError:
        return None
    if type(req) is not dict or not req.keys() <= {"fingerprints", "distance"}:
        return None
    fps, distance = req.get("fingerprints"), req.get("distance")
    if type(fps) is not list or not 0 < len(fps) <= config.SERVE_INLINE:
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
    if m.id.dtype.kind == "i":
        bounds = np.searchsorted(m.query_index, np.arange(n + 1)).astype(np.int64)
        ids = np.ascontiguousarray(m.id, dtype=np.int64)
        dist = np.ascontiguousarray(m.distance, dtype=np.int64)
        return _kernels._results_json(bounds, ids, dist).tobytes()
    return json.dumps([{"matches": r} for r in _matches(m, n)], separators=(",", ":")).encode()


def _query_response(m: Any, n: int, shown: list[str] | None, generation: int) -> Any:
    """The ``/query`` answer: results, then the texts' fingerprints if any, then generation."""
    from starlette.responses import Response

    parts = [b'{"results":', _results_body(m, n)]
    if shown is not None:
        parts += [b',"fingerprints":', json.dumps(shown, separators=(",", ":")).encode()]
    parts.append(b',"generation":%d}' % generation)
    return Response(b"".join(parts), media_type="application/json")


class _Guard:
    """Pure ASGI middleware: body size limit and the write token, checked before parsing, and
    the fast lane for small plain ``/query`` requests.

    The fast lane answers ``POST /query`` bodies accepted by :func:`_plain_query` without
    FastAPI's routing and validation (about half the CPU time of a single-fingerprint query);
    the answer is the same JSON. Any other body is passed on unchanged to the FastAPI route.
    """

    def __init__(self, app: Any, token: str | None, query: Any = None) -> None:
        self.app = app
        self.token = None if token is None else f"Bearer {token}".encode()
        self.query = query

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] == "http":
            headers = dict(scope["headers"])
            size = headers.get(b"content-length")
            refusal = None
            if size is not None and (not size.isdigit() or int(size) > config.SERVE_MAX_BODY):
                refusal = _error(413, f"request body over {config.SERVE_MAX_BODY} bytes; split it")
            elif (
                self.token is not None
                and scope["method"] == "POST"
                and scope["path"] in _WRITE_PATHS
                and not hmac.compare_digest(headers.get(b"authorization", b""), self.token)
            ):
                refusal = _error(401, "writes need the header 'Authorization: Bearer <token>'")
            elif self.query is not None and scope["method"] == "POST" and scope["path"] == "/query":
                body, receive = await _read_body(receive)
                if body is _GONE:  # the client went away: nobody to answer
                    return
                plain = _plain_query(body) if body is not None else None
                if plain is not None:
                    refusal = await self.query(*plain)
                elif body is None:
                    refusal = _error(
                        413, f"request body over {config.SERVE_MAX_BODY} bytes; split it"
                    )
            if refusal is not None:
                await refusal(scope, receive, send)
                return
        await self.app(scope, receive, send)


_GONE = object()  # the body of a request whose client disconnected


async def _read_body(receive: Any) -> tuple[Any, Any]:
    """(the whole request body, None past ``config.SERVE_MAX_BODY`` or ``_GONE``; a
    ``receive`` that replays it to the next application)."""
    chunks, size, more = [], 0, True
    while more:
        message = await receive()
        if message["type"] != "http.request":
            return _GONE, receive
        chunks.append(message.get("body", b""))
        size += len(chunks[-1])
        more = message.get("more_body", False)
        if size > config.SERVE_MAX_BODY:
            return None, receive
    body = b"".join(chunks)
    sent = False

    async def replay() -> Any:
        nonlocal sent
        if not sent:
            sent = True
            return {"type": "http.request", "body": body, "more_body": False}
        return await receive()

    return body, replay


def create_app(
    index: str,
    *,
    token: str | None = None,
    preset: str = "default",
    window: int | None = None,
) -> Any:
    """The service over the index at ``index`` (a directory or a ``redis://`` URL).

    Parameters
    ----------
    index : str
        Index directory or ``redis://host:port/db?name=NAME``.
    token : str, optional
        When set, ``/add``, ``/remove`` and ``/dedup`` need ``Authorization: Bearer TOKEN``.
    preset, window :
        The :class:`neardup.Fingerprinter` applied to ``texts``; use the settings the index's
        fingerprints were made with.
    """
    fastapi = require("fastapi", "server", "neardup serve")
    from fastapi.exceptions import RequestValidationError
    from starlette.concurrency import run_in_threadpool
    from starlette.exceptions import HTTPException

    from neardup.fingerprints import Fingerprinter

    backend = open_backend(index)
    e = np.empty(0, dtype=np.int64)
    _kernels._results_json(np.zeros(1, np.int64), e, e)  # compiled or loaded now, not mid-request
    fingerprinter = Fingerprinter(preset, **({} if window is None else {"window": window}))
    app = fastapi.FastAPI(
        title="neardup",
        summary="Near-duplicate lookups over 64-bit simhash fingerprints",
        description=(
            "Fingerprints are unsigned 64-bit integers (bit 63 most significant), sent as JSON "
            "integers or decimal strings. A match is popcount(a ^ b) <= distance. Batches hold "
            f"at most {config.SERVE_MAX_BATCH} items. Writes are durable before the response."
        ),
        version="1",
    )

    def plain_answer(q: np.ndarray, distance: int | None) -> Any:
        try:
            m, gen = backend.query(q, distance)
        except Exception as e:
            return _failure(e)
        return _query_response(m, len(q), None, gen)

    async def fast_query(q: np.ndarray, distance: int | None) -> Any:
        if backend.kind == "local":
            return plain_answer(q, distance)  # microseconds: cheaper than a thread hop
        return await run_in_threadpool(plain_answer, q, distance)

    app.add_middleware(_Guard, token=token, query=fast_query)

    @app.exception_handler(RequestValidationError)
    async def invalid(request: Any, exc: RequestValidationError) -> Any:
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
    async def http_error(request: Any, exc: HTTPException) -> Any:
        return _error(exc.status_code, exc.detail)

    @app.exception_handler(BadRequest)
    @app.exception_handler(IndexUnavailableError)
    @app.exception_handler(CorruptIndexError)
    @app.exception_handler(ValueError)
    @app.exception_handler(KeyError)
    @app.exception_handler(Exception)
    async def failed(request: Any, exc: Exception) -> Any:
        return _failure(exc)

    def fps_of(req: Any) -> tuple[np.ndarray, list[str] | None]:
        q, from_texts = to_fingerprints(req, fingerprinter)
        return q, ([str(v) for v in q.tolist()] if from_texts else None)

    def answer(req: QueryRequest) -> Any:
        q, shown = fps_of(req)
        m, gen = backend.query(q, req.distance)
        return _query_response(m, len(q), shown, gen)

    @app.post("/query", response_model=QueryResponse, tags=["read"])
    async def query(req: QueryRequest) -> Any:
        """Every indexed id within ``distance`` bits of each fingerprint or text, nearest first."""
        small = req.fingerprints is not None and len(req.fingerprints) <= config.SERVE_INLINE
        if small and backend.kind == "local":
            return answer(req)  # microseconds: cheaper than a hop to the thread pool
        return await run_in_threadpool(answer, req)

    @app.post("/add", response_model=AddResponse, tags=["write"])
    def add(req: WriteRequest) -> Any:
        """Store fingerprints (or texts) with their ids, durably. An id already stored with the
        same fingerprint is skipped (counted in ``already``), so a retried call is safe; an id
        stored with another fingerprint is refused (400)."""
        q, _ = fps_of(req)
        added, already, gen = backend.add(q, to_ids(req.ids, len(q)))
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
        duplicates). Items already stored under their own id (a retried call) are not stored
        again and get the same answer."""
        q, shown = fps_of(req)
        o, gen = backend.dedup(q, to_ids(req.ids, len(q)), req.distance)
        per = _matches(o.matches, len(q))
        ids = to_ids(req.ids).tolist()
        for j in np.flatnonzero(o.by >= 0).tolist():
            i = int(o.by[j])
            per[j].append(
                {"id": ids[i], "distance": int(o.by_distance[j]), "jaccard": None, "in_batch": True}
            )
        results = [{"new": bool(v), "matches": r} for v, r in zip(o.new.tolist(), per)]
        out: dict[str, Any] = {"results": results, "added": o.added}
        if shown is not None:
            out["fingerprints"] = shown
        out["generation"] = gen
        return _json(out)

    @app.get("/stats", tags=["read"])
    def stats() -> Any:
        """Layout, entries, generation and limits of the index."""
        info = backend.stats()
        info.update(
            max_batch=config.SERVE_MAX_BATCH,
            max_body_bytes=config.SERVE_MAX_BODY,
            refresh_ms=int(config.SERVE_REFRESH_S * 1000),
            pid=os.getpid(),
        )
        return _json(info)

    @app.get("/health", tags=["read"])
    def health() -> Any:
        """200 when the index answers, 503 when its storage is unavailable."""
        return _json(backend.health())

    return app


def app_from_env() -> Any:
    """The app configured by ``NEARDUP_SERVE_CONFIG`` (what uvicorn's workers import)."""
    settings = json.loads(os.environ[CONFIG_ENV])
    app = create_app(
        settings["index"],
        token=settings.get("token"),
        preset=settings.get("preset", "default"),
        window=settings.get("window"),
    )
    # The modules and the open index are ~150,000 long-lived objects: a full collection over
    # them stops a worker for ~100 ms. Freezing them leaves the collector only the requests'.
    gc.collect()
    gc.freeze()
    return app

"""Request and response shapes of ``neardup serve`` (pydantic models, shown at /docs), and the
conversion of a request's fingerprints, texts and ids to arrays.

Fingerprints are unsigned 64-bit integers (bit 63 most significant). Many JSON parsers lose
integers above 2**53, so each fingerprint may be sent as a JSON integer or as a string of
decimal digits; both must be in ``[0, 2**64)``. Ids are all integers (int64) or all strings.
"""

from __future__ import annotations

from typing import Any, Literal, NamedTuple

import numpy as np
from pydantic import BaseModel, ConfigDict, Field, StrictInt, StrictStr

from neardup import config
from neardup.core.sketch import Sketches, set_sketches

__all__ = [
    "BadRequest",
    "Batch",
    "Fingerprints",
    "QueryRequest",
    "WriteRequest",
    "DedupRequest",
    "RemoveRequest",
    "QueryResponse",
    "DedupResponse",
    "AddResponse",
    "RemoveResponse",
    "to_fingerprints",
    "to_ids",
]

_MAX = 2**64

Fingerprint = StrictInt | StrictStr
Id = StrictInt | StrictStr


class BadRequest(ValueError):
    """A request the service refuses: ``status`` (400, 413 or 422) and a one-line reason."""

    def __init__(self, message: str, status: int = 422) -> None:
        super().__init__(message)
        self.status = status


class Fingerprints(BaseModel):
    """Fingerprints or texts (exactly one of them)."""

    model_config = ConfigDict(extra="forbid")

    fingerprints: list[Fingerprint] | None = Field(
        None,
        description="uint64 fingerprints as JSON integers or decimal strings, each < 2**64",
        examples=[[123456789, "18446744073709551615"]],
    )
    texts: list[StrictStr] | None = Field(
        None, description="documents, fingerprinted by the server's fingerprinter"
    )


_THRESHOLD = (
    "index with sketches (`neardup index create --threshold`), texts only: a match must also "
    "reach this Jaccard, estimated from the sketches (then `jaccard` carries the estimate)"
)


class QueryRequest(Fingerprints):
    distance: StrictInt | None = Field(
        None, description="bits (inclusive); at most the index's distance, which is the default"
    )
    threshold: float | None = Field(
        None,
        gt=0,
        le=1,
        description=_THRESHOLD + "; default: the threshold the index was created with",
    )


class WriteRequest(Fingerprints):
    ids: list[Id] = Field(description="one id per fingerprint or text: all ints or all strings")


class DedupRequest(WriteRequest):
    distance: StrictInt | None = Field(
        None, description="bits (inclusive); at most the index's distance, which is the default"
    )
    threshold: float | None = Field(
        None, gt=0, le=1, description=_THRESHOLD + "; default 0.8 (as `neardup dedup`)"
    )


class RemoveRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")

    ids: list[Id]
    missing: Literal["error", "ignore"] = Field(
        "error", description="'error': an unknown id fails the call (404), nothing is removed"
    )


class Match(BaseModel):
    id: Id
    distance: int = Field(description="Hamming distance in bits")
    jaccard: float | None = Field(
        None,
        description="verified Jaccard similarity of the shingle sets where the index keeps "
        "them; null while the index holds fingerprints only",
    )
    in_batch: bool | None = Field(
        None, description="dedup only: the match is an earlier item of the same request"
    )


class Result(BaseModel):
    matches: list[Match]


class QueryResponse(BaseModel):
    results: list[Result] = Field(description="one per query, in request order")
    fingerprints: list[str] | None = Field(
        None, description="for texts: their fingerprints as decimal strings"
    )
    generation: int = Field(description="writes committed to the index when answered")


class DedupResult(Result):
    new: bool = Field(description="no indexed or earlier-in-batch fingerprint within distance")


class DedupResponse(BaseModel):
    results: list[DedupResult]
    added: int = Field(description="new items stored by this call")
    fingerprints: list[str] | None = None
    generation: int


class AddResponse(BaseModel):
    added: int
    already: int = Field(description="items whose id was already stored with that fingerprint")
    generation: int


class RemoveResponse(BaseModel):
    removed: int
    generation: int


def _check_size(n: int, what: str) -> None:
    if n > config.SERVE_MAX_BATCH:
        raise BadRequest(
            f"{n} {what} in one request; the limit is {config.SERVE_MAX_BATCH}, split the batch",
            413,
        )


def _parse_one(v: object, i: int) -> int:
    if isinstance(v, str):
        if not (v.isascii() and v.isdigit()) or len(v) > 20:
            raise BadRequest(f"fingerprints[{i}]: {v[:40]!r} is not an unsigned decimal integer")
        v = int(v)
    if not isinstance(v, int) or not 0 <= v < _MAX:
        raise BadRequest(f"fingerprints[{i}]: {v!r} is not in [0, 2**64)")
    return v


class Batch(NamedTuple):
    """A request's items: uint64 fingerprints, whether they came from texts, and, for texts
    sent to an index with sketches, the texts' MinHash sketches (whose first words are the
    fingerprints)."""

    fingerprints: np.ndarray
    from_texts: bool
    sketches: Sketches | None


def to_fingerprints(
    req: Fingerprints, fingerprinter: Any, sketch_words: int | None = None
) -> Batch:
    """The :class:`Batch` of a request; with ``sketch_words`` (an index with sketches) texts
    get the sketches of their shingle sets and the sets' fingerprints, as ``neardup index``
    gives them."""
    if (req.fingerprints is None) == (req.texts is None):
        raise BadRequest("give exactly one of 'fingerprints' and 'texts'")
    if req.texts is not None:
        _check_size(len(req.texts), "texts")
        if sketch_words is None:
            return Batch(fingerprinter.fingerprint_many(req.texts), True, None)
        f = fingerprinter.features_many(req.texts)
        sk = set_sketches((f.offsets, f.keys), sketch_words)
        return Batch(sk.fingerprints, True, sk)
    values = req.fingerprints
    _check_size(len(values), "fingerprints")
    if not any(type(v) is str for v in values):
        try:
            return Batch(np.fromiter(values, dtype=np.uint64, count=len(values)), False, None)
        except OverflowError:
            pass
    fps = np.array([_parse_one(v, i) for i, v in enumerate(values)], dtype=np.uint64)
    return Batch(fps, False, None)


def to_ids(ids: list, n: int | None = None) -> np.ndarray:
    """Request ids as an int64 array or an object array of str."""
    _check_size(len(ids), "ids")
    if n is not None and len(ids) != n:
        raise BadRequest(f"got {n} items but {len(ids)} ids; give one id per item")
    kinds = {type(v) for v in ids}
    if kinds <= {int}:
        try:
            return np.fromiter(ids, dtype=np.int64, count=len(ids))
        except OverflowError:
            bad = next(v for v in ids if not -(2**63) <= v < 2**63)
            raise BadRequest(f"id {bad} does not fit in int64") from None
    if kinds == {str}:
        out = np.empty(len(ids), dtype=object)
        out[:] = ids
        return out
    raise BadRequest("ids must be all integers or all strings")

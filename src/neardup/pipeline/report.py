"""The dedup report's data: clusters (from a result or a ``--clusters`` file), a sample of them,
the texts of the sampled documents (read back from the input), the summary; rendered to one
self-contained HTML file by :mod:`neardup.pipeline.report_html` (``pip install "neardup[report]"``).

A cluster is a dict as written by ``--clusters``: ``kept`` (id of the survivor), ``size``,
``members`` (ids, input order), ``distances`` (bits from each member's fingerprint to the kept
one's, bit 63 most significant) and, when the dedup verified its matches, ``jaccards`` (each
member's Jaccard similarity to the kept one, ``null`` where not computed).
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Mapping
from typing import Any

import numpy as np

from neardup import config
from neardup.errors import InputError
from neardup.io.readers import Record
from neardup.io.writers import OutputSet, atomic_output

__all__ = [
    "borderline",
    "embedded_ids",
    "ReportOutput",
    "json_id",
    "hundredths",
    "near_counts",
    "near_miss_ids",
    "near_misses",
    "read_clusters",
    "report_ids",
    "result_clusters",
    "result_index_rows",
    "result_texts",
    "sample_clusters",
    "split_index_rows",
    "summary_from_clusters",
    "texts_from_records",
    "write_report",
    "write_result_report",
]

#: Dropped documents the report shows nearest the threshold, each against its kept document
#: (lowest Jaccard of a verified run; most bits apart of a fingerprint-only one).
REPORT_BORDERLINE = 12

#: Kept documents the report shows nearest the threshold from below, each against its nearest
#: kept candidate (verified runs of ``dedup --report``).
REPORT_NEAR = 12

#: How far under the threshold the report counts the kept documents whose nearest candidate
#: reaches it (each a lower threshold a rerun could take).
NEAR_STEPS = (0.01, 0.02, 0.05, 0.1)

#: Runs with at most this many documents in clusters embed the texts of every cluster (the first
#: REPORT_EMBED_CHARS characters of each), shown on demand from the search; larger runs show
#: the sampled and borderline clusters' texts only (the page stays small).
REPORT_EMBED_DOCS = 5_000
REPORT_EMBED_CHARS = 2_000


def json_id(v: Any) -> Any:
    """An id as the ``--clusters`` file writes it (strings, numbers, booleans and null as they
    are, anything else as its text), so ids from the input and from the file compare equal."""
    return v if isinstance(v, (str, int, float, bool)) or v is None else str(v)


def _check_row(row: Any, path: str, line: int) -> dict[str, Any]:
    if not isinstance(row, dict):
        raise InputError(path, line, f"expected a JSON object, got {type(row).__name__}")
    for key in ("kept", "members", "distances"):
        if key not in row:
            raise InputError(path, line, f"missing field {key!r}; is this a --clusters file?")
    members, dist = row["members"], row["distances"]
    if not isinstance(members, list) or not isinstance(dist, list) or len(members) != len(dist):
        raise InputError(path, line, "'members' and 'distances' must be lists of one length")
    if not all(isinstance(d, int) and 0 <= d <= 64 for d in dist):
        raise InputError(path, line, "'distances' must be integers from 0 to 64 (bits)")
    jac = row.get("jaccards")
    if jac is not None and (not isinstance(jac, list) or len(jac) != len(members)):
        raise InputError(path, line, "'jaccards' must be a list as long as 'members'")
    row.setdefault("size", len(members))
    return row


def read_clusters(path: str | os.PathLike) -> list[dict[str, Any]]:
    """The clusters of a ``--clusters`` JSONL file (blank lines skipped).

    Raises
    ------
    InputError
        A line that is not a cluster row, naming the file and line.
    """
    from neardup.io.files import open_input

    source = os.fspath(path)
    rows = []
    with open_input(source) as f:
        for number, raw in enumerate(f, start=1):
            if not raw.strip():
                continue
            try:
                row = json.loads(raw)
            except (json.JSONDecodeError, UnicodeDecodeError) as e:
                raise InputError(source, number, f"not valid JSON: {e}") from None
            rows.append(_check_row(row, source, number))
    return rows


def split_index_rows(
    rows: list[dict[str, Any]],
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """(clusters within the input, index rows) of a ``--clusters`` file's rows. An index row
    (``"index": true``, from ``dedup --against``) is an index entry that documents were dropped
    for: ``kept`` and first member the entry's id, then the dropped documents, their distances
    (bits) to the entry and, when the index keeps sketches (``"verified": "sketch"``), their
    Jaccards estimated from the sketches."""
    clusters = [r for r in rows if not r.get("index")]
    return clusters, [r for r in rows if r.get("index")]


def sample_clusters(clusters: list[dict[str, Any]], n: int, seed: int = 0) -> list[int]:
    """Positions of ``n`` clusters chosen at random (seeded, so a report is reproducible),
    in their order in ``clusters``; all of them when there are ``n`` or fewer."""
    if len(clusters) <= n:
        return list(range(len(clusters)))
    rng = np.random.default_rng(seed)
    return sorted(rng.choice(len(clusters), size=n, replace=False).tolist())


def borderline(clusters: list[dict[str, Any]], n: int) -> list[tuple[int, int]]:
    """(cluster, member) positions of the ``n`` dropped documents nearest the threshold: the
    lowest Jaccard with their kept document when the clusters carry Jaccards, else the most
    bits apart; ties in cluster order."""
    scored = []
    for i, c in enumerate(clusters):
        kept, js = json_id(c["kept"]), c.get("jaccards")
        for k, m in enumerate(c["members"]):
            if json_id(m) == kept:
                continue
            if js is not None and js[k] is not None:
                scored.append((float(js[k]), i, k))
            elif js is None:
                scored.append((-float(c["distances"][k]), i, k))
    scored.sort()
    return [(i, k) for _, i, k in scored[:n]]


def hundredths(jaccards: Any) -> np.ndarray:
    """The bar of 0.01 each Jaccard falls in (0 to 99; 1.0 in the last), exact for ratios of
    counts under ten million (the product by 100 rounds a hair under the edge)."""
    j = np.asarray(jaccards, dtype=np.float64)
    return np.clip(np.floor(j * 100 + 1e-9), 0, 99).astype(np.int64)


def near_counts(jaccards: Any, threshold: float) -> dict[str, list]:
    """What the report counts of the kept documents' nearest misses with Jaccards
    ``jaccards``: ``counts``, documents per 0.01 of Jaccard (:func:`hundredths`, 100 of
    them), and ``reach``, ``[lower threshold, documents at or above it]`` for each of
    :data:`NEAR_STEPS` under ``threshold``. Counts of parts of the documents add up to the
    counts of all of them."""
    j = np.asarray(jaccards, dtype=np.float64)
    steps = [round(threshold - s, 2) for s in NEAR_STEPS if threshold - s > 0]
    return {
        "counts": np.bincount(hundredths(j), minlength=100).tolist(),
        "reach": [[t, int(np.count_nonzero(j >= t))] for t in steps],
    }


def near_misses(result: Any, n: int = REPORT_NEAR) -> dict[str, Any] | None:
    """The kept documents' nearest misses of a verified ``result`` run with ``near_misses``
    (else None): ``threshold``; ``pairs``, the ``n`` highest (at most :data:`REPORT_NEAR`),
    each a dict of ``kept`` (id), ``nearest`` (the id of the kept candidate before it with the
    highest Jaccard) and ``jaccard`` (highest first, ties in input order); and the
    :func:`near_counts` of every kept document that has one. A staged run's tasks found
    these (``result.near``); else they come from ``result.verified``'s ``near_for``."""
    if getattr(result, "near", None) is not None:
        return {**result.near, "pairs": result.near["pairs"][:n]}
    v = getattr(result, "verified", None)
    if v is None or v.near_for is None:
        return None
    has = np.flatnonzero(v.near_for >= 0)
    jac = v.near_jaccard[has]
    top = has[np.lexsort((has, -jac))[:n]]
    ids = result.ids
    pairs = [
        {"kept": json_id(ids[i]), "nearest": json_id(ids[int(v.near_for[i])]),
         "jaccard": float(v.near_jaccard[i])}
        for i in top.tolist()
    ]  # fmt: skip
    threshold = float(result.threshold)
    return {"threshold": threshold, "pairs": pairs, **near_counts(jac, threshold)}


def near_miss_ids(near: Mapping[str, Any] | None) -> set[Any]:
    """Ids whose texts the report's near misses show (none without ``near``)."""
    if near is None:
        return set()
    return {p[k] for p in near["pairs"] for k in ("kept", "nearest")}


def embedded_ids(clusters: list[dict[str, Any]]) -> set[Any]:
    """Ids whose texts the report embeds for the search to show, cluster by cluster: every
    member's when the clusters hold at most :data:`REPORT_EMBED_DOCS`
    documents, else none."""
    if sum(len(c["members"]) for c in clusters) > REPORT_EMBED_DOCS:
        return set()
    return {json_id(m) for c in clusters for m in c["members"]}


def report_ids(clusters: list[dict[str, Any]], sample: Iterable[int]) -> set[Any]:
    """Ids whose text the report shows: each sampled cluster's kept document and its first
    :data:`neardup.config.REPORT_MEMBERS` dropped ones, and the :func:`borderline` drops with
    their kept documents, and the :func:`embedded_ids`."""
    ids: set[Any] = embedded_ids(clusters)
    for i, k in borderline(clusters, REPORT_BORDERLINE):
        ids.update((json_id(clusters[i]["kept"]), json_id(clusters[i]["members"][k])))
    for i in sample:
        c = clusters[i]
        ids.add(json_id(c["kept"]))
        dropped = [json_id(m) for m in c["members"] if json_id(m) != json_id(c["kept"])]
        ids.update(dropped[: config.REPORT_MEMBERS])
    return ids


def texts_from_records(
    records: Iterable[Record], wanted: set[Any], *, read_all: bool = False
) -> dict[Any, str]:
    """The text of each record whose id is in ``wanted`` (first occurrence), read until all
    are found (or to the end with ``read_all``); texts longer than
    :data:`neardup.config.REPORT_TEXT_CHARS` are cut there."""
    found: dict[Any, str] = {}
    for rec in records:
        key = json_id(rec.id)
        if key in wanted and key not in found:
            found[key] = rec.text[: config.REPORT_TEXT_CHARS]
            if len(found) == len(wanted) and not read_all:
                break
    return found


def result_clusters(result: Any) -> list[dict[str, Any]]:
    """The clusters of a :class:`~neardup.pipeline.result.DedupResult` as the ``--clusters``
    file has them (ids in :func:`json_id` form)."""
    out = []
    for c in result.iter_clusters():
        c["kept"] = json_id(c["kept"])
        c["members"] = [json_id(m) for m in c["members"]]
        out.append(c)
    return out


def result_index_rows(result: Any) -> list[dict[str, Any]]:
    """The index rows of a :class:`~neardup.pipeline.result.DedupResult` (``against=``) as the
    ``--clusters`` file has them (see :func:`split_index_rows`; ids in :func:`json_id` form)."""
    out = []
    for c in result.iter_index_clusters():
        c["kept"] = json_id(c["kept"])
        c["members"] = [json_id(m) for m in c["members"]]
        out.append(c)
    return out


def result_texts(
    result: Any, data: Any, wanted: set[Any], text_field: str = "text", id_field: str | None = "id"
) -> dict[Any, str]:
    """Texts of the ``wanted`` ids of a dedup ``result``, read again from its input ``data``
    (paths: the files, read until all are found; in-memory data: by position)."""
    from neardup.io.readers import read_documents
    from neardup.io.sources import expand_inputs, is_paths, texts_and_ids

    if not wanted:
        return {}
    if result.scan is not None or is_paths(data):
        files = result.scan.files if result.scan is not None else expand_inputs(data)
        records = read_documents(
            [f.path for f in files], files[0].kind if files else "auto", text_field,
            id_field, on_bad=lambda err: None,
        )  # fmt: skip
        return texts_from_records(records, wanted)
    pos = result.positions if result.positions is not None else np.arange(len(result))
    at = {int(p): json_id(result.ids[k]) for k, p in enumerate(pos.tolist())
          if json_id(result.ids[k]) in wanted}  # fmt: skip
    texts, _ = texts_and_ids(data, text_field, None)
    found = {}
    for k, t in enumerate(texts):
        if k in at and isinstance(t, str):
            found[at[k]] = t[: config.REPORT_TEXT_CHARS]
    return found


def write_result_report(
    path: str | os.PathLike,
    result: Any,
    data: Any,
    *,
    text_field: str = "text",
    id_field: str | None = "id",
    settings: Mapping[str, Any] | None = None,
    sample: int | None = None,
    outputs: OutputSet | None = None,
) -> int:
    """Write the HTML report of ``result`` = ``neardup.dedup(data, ...)`` (the same ``data``,
    ``text_field`` and ``id_field``) to ``path``; returns the bytes written. With ``outputs``
    (where ``path`` is registered) it is staged there, as :func:`write_report`.

    Examples
    --------
    >>> r = neardup.dedup(texts)  # doctest: +SKIP
    >>> write_result_report("report.html", r, texts)  # doctest: +SKIP
    """
    clusters = result_clusters(result)
    chosen = sample_clusters(clusters, config.REPORT_SAMPLE if sample is None else sample)
    near = near_misses(result)
    wanted = report_ids(clusters, chosen) | near_miss_ids(near)
    texts = result_texts(result, data, wanted, text_field, id_field)
    return write_report(
        path, result.summary(), clusters, texts, chosen, settings=settings, outputs=outputs,
        index_rows=result_index_rows(result), near=near,
    )  # fmt: skip


class ReportOutput:
    """The HTML report of a dedup run as one of its outputs (``neardup dedup --report``):
    registered with the run's other outputs before any work (:meth:`register`), written
    after them (:meth:`write`) and committed in the same commit, so a failure while writing
    it leaves none of them. Arguments as :func:`write_result_report`. A verified run finds
    its kept documents' nearest misses for it (:attr:`near_misses`)."""

    #: Asks :func:`neardup.pipeline.job.dedup` for the kept documents' nearest misses.
    near_misses = True

    def __init__(
        self,
        path: str | os.PathLike,
        data: Any,
        *,
        text_field: str = "text",
        id_field: str | None = "id",
        settings: Mapping[str, Any] | None = None,
    ) -> None:
        self.path = path
        self.data = data
        self.text_field = text_field
        self.id_field = id_field
        self.settings = settings

    def register(self, outputs: OutputSet) -> None:
        """Check the report's path (see :meth:`OutputSet.file`)."""
        outputs.file(self.path, "--report")

    def write(self, result: Any, outputs: OutputSet) -> None:
        """Stage the report of ``result`` in ``outputs``."""
        write_result_report(
            self.path, result, self.data, text_field=self.text_field, id_field=self.id_field,
            settings=self.settings, outputs=outputs,
        )  # fmt: skip


def summary_from_clusters(
    clusters: list[dict[str, Any]],
    documents: int,
    index_rows: list[dict[str, Any]] | None = None,
) -> dict[str, Any]:
    """The counts of a summary from clusters alone (for ``neardup report``): every member but
    the kept one was dropped, and every member but the entry of an index row
    (:func:`split_index_rows`)."""
    members = sum(len(c["members"]) for c in clusters)
    dropped = sum(
        sum(1 for m in c["members"] if json_id(m) != json_id(c["kept"])) for c in clusters
    )
    out: dict[str, Any] = {"documents": documents, "clusters": len(clusters)}
    if index_rows:
        seen = sum(len(r["members"]) - 1 for r in index_rows)
        out["against"] = {"dropped": seen, "verified": index_rows[0].get("verified")}
        dropped += seen
    out.update(dropped=dropped, kept=documents - dropped, in_clusters=members)
    return out


def write_report(
    path: str | os.PathLike,
    summary: Mapping[str, Any],
    clusters: list[dict[str, Any]],
    texts: Mapping[Any, str],
    sample: list[int],
    *,
    settings: Mapping[str, Any] | None = None,
    title: str = "neardup dedup report",
    outputs: OutputSet | None = None,
    index_rows: list[dict[str, Any]] | None = None,
    near: Mapping[str, Any] | None = None,
) -> int:
    """Render the report and write it to ``path`` (appears only when complete).

    Parameters
    ----------
    path : path
        The HTML file to write.
    summary : mapping
        ``documents``, ``clusters``, ``dropped``, ``kept`` and optionally ``skipped``,
        ``bytes_in``, ``bytes_out``, ``seconds`` (as :meth:`DedupResult.summary`).
    clusters : list of dict
        Every cluster (see the module's docstring).
    texts : mapping
        Text of the documents to show, by id (:func:`json_id` form).
    sample : list of int
        Positions in ``clusters`` of the clusters to show side by side.
    settings : mapping, optional
        Options of the run (distance, keep, inputs, ...), listed in the report.
    title : str
        The page's title.
    outputs : OutputSet, optional
        The run's outputs, with ``path`` registered: the report is staged there and appears
        when the caller commits them. Default: written and committed now.
    index_rows : list of dict, optional
        The documents dropped as seen in an index (``--against``), as index rows
        (:func:`split_index_rows`): listed with the entry each matched, its distance and, when
        the index keeps sketches, the estimated Jaccard; the search finds them too.
    near : mapping, optional
        The kept documents' nearest misses (:func:`near_misses`): the pairs shown side by side
        and their counts (:func:`near_counts`) per 0.01 beside the drops'.

    Returns
    -------
    int
        Bytes written.
    """
    from neardup.pipeline.report_html import render

    page = render(
        summary, clusters, texts, sample, settings=settings or {}, title=title,
        index_rows=index_rows or [], near=near,
    )  # fmt: skip
    data = page.encode("utf-8")
    if outputs is None:
        with atomic_output(path, "wb") as f:
            f.write(data)
    else:
        with outputs.open(outputs.get(path), "wb") as f:
            f.write(data)
    return len(data)

"""The dedup report's data: clusters (from a result or a ``--clusters`` file), a sample of them,
the texts of the sampled documents (read back from the input), the summary; rendered to one
self-contained HTML file by :mod:`neardup.pipeline.report_html` (``pip install "neardup[report]"``).

A cluster is a dict as written by ``--clusters``: ``kept`` (id of the survivor), ``size``,
``members`` (ids, input order), ``distances`` (bits from each member's fingerprint to the kept
one's, bit 63 most significant) and, when the dedup verified its matches, ``jaccards`` (each
member's Jaccard similarity to the kept one, ``null`` where not computed).
"""

from __future__ import annotations

import itertools
import json
import os
from collections import Counter
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from neardup import config
from neardup.errors import InputError
from neardup.io.readers import Record
from neardup.io.writers import OutputSet, atomic_output

__all__ = [
    "ClusterDigest",
    "borderline",
    "cluster_head",
    "digest_clusters",
    "digest_clusters_file",
    "embedded_ids",
    "ReportOutput",
    "json_id",
    "hundredths",
    "iter_clusters_file",
    "jaccard_range",
    "near_counts",
    "near_miss_ids",
    "near_misses",
    "read_clusters",
    "report_ids",
    "result_texts",
    "sample_clusters",
    "sample_positions",
    "split_index_rows",
    "summary_from_clusters",
    "summary_from_digest",
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

#: The page embeds at most this many texts, each cut at REPORT_EMBED_CHARS characters (about
#: 10 MB at most), for the largest clusters and the search to show on demand: every member's
#: when the clusters hold no more documents than that, else the largest clusters' first, then
#: the borderline drops', then those of the clusters the search lists, in order
#: (:func:`embedded_ids`); the page says how many clusters have them.
REPORT_EMBED_TEXTS = 5_000
REPORT_EMBED_CHARS = 2_000

#: Dropped documents of a cluster whose texts the page shows beside the kept one's, on demand.
REPORT_EMBED_MEMBERS = 5

#: Rows of the report's "largest clusters" table.
REPORT_LARGEST = 20


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
    return list(iter_clusters_file(path))


def iter_clusters_file(path: str | os.PathLike, index: bool | None = None) -> Iterator[dict]:
    """The rows of a ``--clusters`` JSONL file one at a time (blank lines skipped): all of
    them, or with ``index`` only the index rows (True) or only the others (False); see
    :func:`read_clusters`."""
    from neardup.io.files import open_input

    source = os.fspath(path)
    with open_input(source) as f:
        for number, raw in enumerate(f, start=1):
            if not raw.strip():
                continue
            try:
                row = json.loads(raw)
            except (json.JSONDecodeError, UnicodeDecodeError) as e:
                raise InputError(source, number, f"not valid JSON: {e}") from None
            row = _check_row(row, source, number)
            if index is None or bool(row.get("index")) == index:
                yield row


def digest_clusters_file(path: str | os.PathLike, sample: int, seed: int = 0) -> ClusterDigest:
    """The :class:`ClusterDigest` of a ``--clusters`` file (``sample`` clusters drawn with
    ``seed``), read in passes (count, clusters, index rows) rather than held."""
    source = os.fspath(path)
    count = sum(1 for _ in iter_clusters_file(source, index=False))
    try:
        d = digest_clusters(iter_clusters_file(source, index=False), count,
                            sample_positions(count, sample, seed))  # fmt: skip
    except InputError:
        raise
    except ValueError:  # another number of clusters on the second pass
        raise InputError(source, None, "changed while the report read it") from None
    d.add_index_rows(iter_clusters_file(source, index=True))
    return d


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
    return sample_positions(len(clusters), n, seed)


def sample_positions(count: int, n: int, seed: int = 0) -> list[int]:
    """Positions of ``n`` of ``count`` clusters chosen at random (seeded), ascending; all of
    them when there are ``n`` or fewer."""
    if count <= n:
        return list(range(count))
    rng = np.random.default_rng(seed)
    return sorted(rng.choice(count, size=n, replace=False).tolist())


@dataclass
class ClusterDigest:
    """What the report shows of a run's clusters (each a dict as the ``--clusters`` file has
    it), gathered in one pass over them by :func:`digest_clusters`: counts (sizes, bits and
    Jaccards of the drops), the rows chosen by rank (largest clusters, drops nearest the
    threshold), the first clusters for the search and the sampled ones. It holds a bounded part
    of the clusters, so a staged run's report reads its shards' cluster parts once, in order."""

    count: int  #: clusters
    sample: list[int]  #: positions of the clusters shown side by side, ascending
    members: int = 0  #: documents in clusters
    sizes: Counter = field(default_factory=Counter)  #: clusters by size
    bits: Counter = field(default_factory=Counter)  #: dropped documents by bits from the kept
    drop_hundredths: np.ndarray = field(default_factory=lambda: np.zeros(100, np.int64))
    drop_jaccards: int = 0  #: dropped documents with a Jaccard
    min_jaccard: float | None = None
    has_jaccard: bool = False  #: some cluster carries Jaccards
    largest: list[tuple[int, dict]] = field(default_factory=list)  #: (position, cluster)
    borderline: list[tuple[int, int, dict]] = field(default_factory=list)  #: (pos, member, c)
    listed: list[dict] = field(default_factory=list)  #: the first clusters, for the search
    sampled: dict[int, dict] = field(default_factory=dict)  #: the sampled clusters by position
    #: :func:`embedded_ids`, in the order chosen (the page is the same in every run)
    embedded: dict[Any, None] = field(default_factory=dict)
    index_count: int = 0  #: rows of documents dropped as seen in an index (``--against``)
    index_dropped: int = 0  #: documents in them but their entries
    index_sketch: bool = False  #: some row carries estimated Jaccards
    index_listed: list[dict] = field(default_factory=list)  #: the first rows

    def add_index_rows(self, rows: Iterable[dict[str, Any]]) -> None:
        """Count the index's rows (:func:`split_index_rows`), read once in order, keeping the
        first :data:`neardup.config.REPORT_MAX_CLUSTERS`."""
        for r in rows:
            if self.index_count < config.REPORT_MAX_CLUSTERS:
                self.index_listed.append(r)
            self.index_count += 1
            self.index_dropped += len(r["members"]) - 1
            self.index_sketch |= r.get("jaccards") is not None

    @property
    def where(self) -> dict[int, int]:
        """Each sampled cluster's place in the sample, by position."""
        return {i: k for k, i in enumerate(self.sample)}

    def ids(self) -> set[Any]:
        """Ids whose text the report shows: each sampled cluster's kept document and its first
        :data:`neardup.config.REPORT_MEMBERS` dropped ones, the :attr:`borderline` drops with
        their kept documents, and the embedded ones."""
        ids: set[Any] = set(self.embedded)
        for _, k, c in self.borderline:
            ids.update((json_id(c["kept"]), json_id(c["members"][k])))
        for i in self.sample:
            c = self.sampled[i]
            ids.add(json_id(c["kept"]))
            dropped = [json_id(m) for m in c["members"] if json_id(m) != json_id(c["kept"])]
            ids.update(dropped[: config.REPORT_MEMBERS])
        return ids


def digest_clusters(clusters: Iterable[dict[str, Any]], count: int, sample: list[int],
                    n_borderline: int = REPORT_BORDERLINE) -> ClusterDigest:  # fmt: skip
    """The :class:`ClusterDigest` of ``clusters`` (``count`` of them, read once, in order),
    those at positions ``sample`` kept whole, and the first
    :data:`neardup.config.REPORT_MAX_CLUSTERS`."""
    d = ClusterDigest(count, list(sample))
    chosen = set(d.sample)
    scored: list[tuple] = []
    seen = 0
    for i, c in enumerate(clusters):
        seen += 1
        _count_cluster(d, i, c, scored)
        if i < config.REPORT_MAX_CLUSTERS:
            d.listed.append(c)
        if i in chosen:
            d.sampled[i] = c
        if len(d.largest) > 4 * REPORT_LARGEST:  # the ranks are cut now and then: bounded
            d.largest = sorted(d.largest, key=_by_size)[:REPORT_LARGEST]
        if len(scored) > 4 * n_borderline + 64:
            scored = sorted(scored, key=_by_score)[:n_borderline]
    if seen != count:
        raise ValueError(f"{seen:,} clusters where {count:,} were counted")
    d.largest = sorted(d.largest, key=_by_size)[:REPORT_LARGEST]
    d.borderline = [(i, k, c) for _, i, k, c in sorted(scored, key=_by_score)[:n_borderline]]
    d.embedded = _embedded(d)
    return d


def cluster_head(c: dict[str, Any], n: int = REPORT_EMBED_MEMBERS) -> list[Any]:
    """Ids of a cluster's kept document and its first ``n`` dropped ones (:func:`json_id`
    form): whose texts the page shows for it."""
    kept = json_id(c["kept"])
    dropped = (json_id(m) for m in c["members"] if json_id(m) != kept)
    return [kept, *itertools.islice(dropped, n)]


def jaccard_range(c: dict[str, Any]) -> tuple[float, float] | None:
    """(lowest, highest) Jaccard of a cluster's dropped documents with its kept one; None when
    the cluster carries none (a fingerprint-only run)."""
    js, kept = c.get("jaccards"), json_id(c["kept"])
    if js is None:
        return None
    got = [float(j) for m, j in zip(c["members"], js, strict=True)
           if j is not None and json_id(m) != kept]  # fmt: skip
    return (min(got), max(got)) if got else None


def _embedded(d: ClusterDigest) -> dict[Any, None]:
    """The ids whose texts the page embeds (see :data:`REPORT_EMBED_TEXTS`), in order: the
    heads (:func:`cluster_head`) of the largest clusters, the borderline drops with their kept
    documents, the heads of the clusters the search lists, then their other members."""
    order = itertools.chain(
        (cluster_head(c) for _, c in d.largest),
        ([json_id(c["kept"]), json_id(c["members"][k])] for _, k, c in d.borderline),
        (cluster_head(c) for c in d.listed),
        ([json_id(m) for m in c["members"]] for c in d.listed),
    )
    out: dict[Any, None] = {}
    for ids in order:
        for i in ids:
            if len(out) == REPORT_EMBED_TEXTS:
                return out
            out[i] = None
    return out


def _by_size(row: tuple[int, dict]) -> tuple[int, int]:
    return -len(row[1]["members"]), row[0]


def _by_score(row: tuple) -> tuple[float, int, int]:
    return row[0], row[1], row[2]


def _count_cluster(d: ClusterDigest, i: int, c: dict[str, Any], scored: list[tuple]) -> None:
    """Cluster ``c`` (position ``i``) counted into ``d``; each of its drops scored for the
    borderline: the lowest Jaccard with its kept document when the cluster carries Jaccards,
    else the most bits apart; ties in cluster order."""
    members, kept, js = c["members"], json_id(c["kept"]), c.get("jaccards")
    d.members += len(members)
    d.sizes[len(members)] += 1
    d.has_jaccard |= js is not None
    d.largest.append((i, c))
    jac = []
    for k, m in enumerate(members):
        if json_id(m) == kept:
            continue
        d.bits[c["distances"][k]] += 1
        if js is not None and js[k] is not None:
            jac.append(float(js[k]))
            scored.append((float(js[k]), i, k, c))
        elif js is None:
            scored.append((-float(c["distances"][k]), i, k, c))
    if jac:
        d.drop_hundredths += np.bincount(hundredths(jac), minlength=100)
        d.drop_jaccards += len(jac)
        d.min_jaccard = min(jac) if d.min_jaccard is None else min(d.min_jaccard, *jac)


def borderline(clusters: list[dict[str, Any]], n: int) -> list[tuple[int, int]]:
    """(cluster, member) positions of the ``n`` dropped documents nearest the threshold: the
    lowest Jaccard with their kept document when the clusters carry Jaccards, else the most
    bits apart; ties in cluster order."""
    d = digest_clusters(clusters, len(clusters), [], n_borderline=n)
    return [(i, k) for i, k, _ in d.borderline]


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
    """Ids whose texts the report embeds for the largest clusters and the search to show: every
    member's when the clusters hold at most :data:`REPORT_EMBED_TEXTS` documents, else that
    many, chosen as :data:`REPORT_EMBED_TEXTS` says."""
    return set(digest_clusters(clusters, len(clusters), []).embedded)


def report_ids(clusters: list[dict[str, Any]], sample: Iterable[int]) -> set[Any]:
    """Ids whose text the report shows (:meth:`ClusterDigest.ids`) for the clusters at
    positions ``sample`` side by side."""
    return digest_clusters(clusters, len(clusters), sorted(sample)).ids()


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
    n = config.REPORT_SAMPLE if sample is None else sample
    count, clusters, index_rows = result.report_clusters()
    digest = digest_clusters(clusters, count, sample_positions(count, n))
    near = near_misses(result)
    wanted = digest.ids() | near_miss_ids(near)
    texts = result_texts(result, data, wanted, text_field, id_field)
    return write_report(
        path, result.summary(), digest, texts, settings=settings, outputs=outputs,
        index_rows=index_rows, near=near,
    )  # fmt: skip


class ReportOutput:
    """The HTML report of a dedup run as one of its outputs (``neardup dedup --report``):
    registered with the run's other outputs before any work (:meth:`register`), written
    after them (:meth:`write`) and committed in the same commit, so a failure while writing
    it leaves none of them. Arguments as :func:`write_result_report`. A verified run finds
    its kept documents' nearest misses for it (:attr:`near_misses`)."""

    #: Asks :func:`neardup.pipeline.job.dedup` for the kept documents' nearest misses.
    near_misses = True
    #: A staged run gives it a view that reads the clusters from the shards' parts (no array
    #: of every document in the calling process).
    reads_parts = True

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
    d = digest_clusters(clusters, len(clusters), [])
    d.add_index_rows(index_rows or [])
    return summary_from_digest(d, documents)


def summary_from_digest(d: ClusterDigest, documents: int) -> dict[str, Any]:
    """:func:`summary_from_clusters` from the clusters' :class:`ClusterDigest` (index rows
    added)."""
    dropped = sum(d.bits.values())  # one count per member that is not its cluster's kept one
    out: dict[str, Any] = {"documents": documents, "clusters": d.count}
    if d.index_count:
        out["against"] = {"dropped": d.index_dropped,
                          "verified": d.index_listed[0].get("verified")}  # fmt: skip
        dropped += d.index_dropped
    out.update(dropped=dropped, kept=documents - dropped, in_clusters=d.members)
    return out


def write_report(
    path: str | os.PathLike,
    summary: Mapping[str, Any],
    clusters: list[dict[str, Any]] | ClusterDigest,
    texts: Mapping[Any, str],
    sample: list[int] | None = None,
    *,
    settings: Mapping[str, Any] | None = None,
    title: str = "neardup dedup report",
    outputs: OutputSet | None = None,
    index_rows: Iterable[dict[str, Any]] | None = None,
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
    clusters : list of dict, or ClusterDigest
        Every cluster (see the module's docstring), or their :class:`ClusterDigest` (which
        holds its sample).
    texts : mapping
        Text of the documents to show, by id (:func:`json_id` form).
    sample : list of int
        Positions in ``clusters`` (a list) of the clusters to show side by side.
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
    digest = clusters
    if not isinstance(digest, ClusterDigest):
        digest = digest_clusters(clusters, len(clusters), sorted(sample or ()))
    from neardup.pipeline.report_html import render

    if index_rows is not None:
        digest.add_index_rows(index_rows)
    page = render(summary, digest, texts, settings=settings or {}, title=title, near=near)
    data = page.encode("utf-8")
    if outputs is None:
        with atomic_output(path, "wb") as f:
            f.write(data)
    else:
        with outputs.open(outputs.get(path), "wb") as f:
            f.write(data)
    return len(data)

"""The result of a dedup run: decisions with ids, fingerprints, sizes and stage times."""

from __future__ import annotations

import copy
import warnings
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from neardup._optional import require
from neardup.core.decide import Decisions
from neardup.core.order import lexorder
from neardup.core.verify import NO_SHINGLES_WARN_FRACTION, VerifiedDecisions
from neardup.errors import NotCollectedError
from neardup.pipeline.against import IndexCheck
from neardup.pipeline.report import json_id
from neardup.pipeline.scan import Scan
from neardup.pipeline.stage_prefix import FAMILY_DOCS

__all__ = [
    "DedupResult",
    "common_figures",
    "family_figures",
    "family_note",
    "report_no_shingles",
    "summary_head",
]


def common_figures(common: dict[str, Any] | None, template: dict[str, Any] | None) -> dict:
    """The summary's keys about common shingles: ``common_shingles`` (with the option: the
    most documents a shingle may be in, the shingles left out, the documents with shingles
    of which none was left) and ``template_hint`` (without it: the clusters that look like a
    template, :func:`neardup.core.common.template_hint`); each only when there is one."""
    out: dict[str, Any] = {}
    if common is not None:
        out["common_shingles"] = dict(common)
    if template is not None:
        out["template_hint"] = dict(template)
    return out


def family_figures(documents: int, first: Any) -> dict:
    """The summary's ``largest_family`` (prefix candidates): the most documents whose prefixes
    share one shingle, the candidate pairs they could make (``documents * (documents - 1) /
    2``) and the id of the first (``first``, as the clusters file writes it); only when two or
    more documents share one."""
    if documents < 2:
        return {}
    return {"largest_family": {"documents": int(documents),
                               "pairs": int(documents) * (int(documents) - 1) // 2,
                               "first": first}}  # fmt: skip


def summary_head(
    *,
    documents: int,
    skipped: int,
    clusters: int,
    dropped: int,
    verified: bool,
    threshold: float | None = None,
    candidates: str | None = None,
    no_shingles: int = 0,
    temp_bytes: int = 0,
    scheme: tuple[int, int] | None = None,
    common: dict[str, Any] | None = None,
    template: dict[str, Any] | None = None,
    family: tuple[int, Any] | None = None,
    against: dict[str, Any] | None = None,
    bytes_in: int = 0,
    bytes_out: int = 0,
) -> dict[str, Any]:
    """The summary's keys before ``seconds``, in their order, for a result
    (:meth:`DedupResult.summary`) and a run's summary
    (:func:`neardup.pipeline.staged_result.summary`) alike: the counts; verified, the
    threshold, candidates (``bands``: the scheme), documents without shingles, temporary bytes,
    the common shingles or the template hint and the largest family (``family``: its documents
    and its first document's id); the index check (``against``, as the summary has it); and
    the bytes read, written and saved."""
    out: dict[str, Any] = {"documents": documents, "skipped": skipped, "clusters": clusters,
                           "dropped": dropped, "kept": documents - dropped,
                           "verified": verified}  # fmt: skip
    if verified:
        out.update(threshold=threshold, candidates=candidates, no_shingles=no_shingles)
        if scheme is not None:
            out["bands"] = list(scheme)
        out.update(common_figures(common, template))
        if family is not None:
            out.update(family_figures(*family))
    out["temp_bytes"] = temp_bytes
    if against is not None:
        out["against"] = against
    if bytes_in:
        out.update(bytes_in=bytes_in, bytes_out=bytes_out, bytes_saved=bytes_in - bytes_out)
    return out


def family_note(summary: Mapping[str, Any]) -> str | None:
    """The summary's ``largest_family`` in words, when more than
    :data:`~neardup.pipeline.stage_prefix.FAMILY_DOCS` documents share a prefix shingle (what
    makes a family cost time: documents checked against its kept ones); None otherwise."""
    fam = summary.get("largest_family")
    if not isinstance(fam, Mapping) or int(fam["documents"]) <= FAMILY_DOCS:
        return None
    return (f"{int(fam['documents']):,} documents share a rare shingle (the first: id "
            f"{fam['first']}): up to {int(fam['pairs']):,} candidate pairs, each checked only "
            f"against the family's kept documents")  # fmt: skip


class _NotCollected:
    """What a result made with ``collect=False`` holds in place of each per-document field:
    any use of it raises :class:`~neardup.errors.NotCollectedError` naming the field."""

    __slots__ = ("name",)

    def __init__(self, name: str) -> None:
        self.name = name

    def _refuse(self, *_: Any) -> Any:
        raise NotCollectedError(
            f"this result has no {self.name}: dedup(collect=False) keeps only the run's "
            "summary, not arrays of every document; call dedup() with collect=True (the "
            "default), or read the outputs it wrote"
        )

    __getattr__ = __len__ = __iter__ = __getitem__ = __array__ = _refuse

    def __repr__(self) -> str:
        return f"<{self.name}: not collected>"


#: The fields of :class:`DedupResult` that hold something of every document.
_PER_DOCUMENT = ("ids", "fingerprints", "lengths", "decisions", "scan", "positions",
                 "verified", "against", "near")  # fmt: skip


@dataclass
class DedupResult:
    """Decisions for ``n`` documents, with their ids and fingerprints.

    A result made with ``collect=False`` (:meth:`summary_only`) holds the summary and its
    figures (``len``, ``n_clusters``, ``n_dropped``, ``skipped``, ``seconds``, the bytes, ...)
    but no per-document field: using one (``ids``, ``kept``, ``clusters``, ...) raises
    :class:`~neardup.errors.NotCollectedError`.

    Attributes
    ----------
    ids : list
        Id of each document in input order (position for in-memory input without ids).
    fingerprints : ndarray of uint64, shape (n,)
    lengths : ndarray of int64, shape (n,)
        Characters of text.
    decisions : Decisions
        labels, survivor, distance and kept arrays.
    skipped : int
        Bad records skipped (``skip_bad=True``); they are not among the ``n`` documents.
    seconds : dict
        Wall time of each stage: ``read+fingerprint``, ``search+verify`` (``search`` when not
        verified), ``write`` (when written).
    scan : Scan or None
        For file input: the source file and record number of every document.
    bytes_in, bytes_out : int
        Input size and written output size in bytes (file input; 0 for in-memory data, and
        ``bytes_out`` 0 without an output).
    positions : ndarray of int64 or None
        In-memory input: the input position of each document. All arrays are aligned with the
        documents read, which are the whole input unless ``skip_bad`` skipped some; then map
        back with ``positions``.
    verified : VerifiedDecisions or None
        Verified dedup: each document's ``kept_for``, ``jaccard``, ``no_shingles`` (None when
        fingerprint-only).
    threshold : float or None
        Jaccard threshold of a verified dedup.
    temp_bytes : int
        Bytes the run's stages wrote to its work directory (removed at the end unless a
        ``work_dir`` was given to keep).
    against : IndexCheck or None
        With ``against=``: for each document, the index entry it was dropped for (``id``, None
        when not found), the distance, the estimated Jaccard and ``how`` the index decided:
        ``"sketch"`` (estimated Jaccard >= threshold) or ``"fingerprint"`` (distance only).
    common : dict or None
        With ``common_shingles``: ``limit`` (the most documents a shingle may be in and still
        count), ``keys`` (the shingles left out) and ``all_common`` (documents with shingles,
        all of them common: kept, like documents without shingles).
    template : dict or None
        Without ``common_shingles``, when some of the largest clusters look like pages that
        share a template (:func:`neardup.core.common.template_hint`): how many, the largest,
        the share of the corpus that holds their shared shingles and the ``common_shingles``
        to try.
    near : dict or None
        A staged run with a report: the report's near misses as its tasks found them (see
        :func:`neardup.pipeline.report.near_misses`), so that the report needs no array of
        them.
    candidates : str or None
        Verified dedup: where the verified pairs came from (``"prefix"``, ``"bands"`` or
        ``"fingerprint"``).
    scheme : (int, int) or None
        With ``candidates="bands"``: the bands and rows (the summary's ``bands``).
    run_summary : dict or None
        The run's summary (:meth:`summary`).
    """

    ids: list[Any]
    fingerprints: np.ndarray
    lengths: np.ndarray
    decisions: Decisions
    skipped: int = 0
    seconds: dict[str, float] = field(default_factory=dict)
    scan: Scan | None = None
    bytes_in: int = 0
    bytes_out: int = 0
    positions: np.ndarray | None = None
    verified: VerifiedDecisions | None = None
    threshold: float | None = None
    temp_bytes: int = 0
    against: IndexCheck | None = None
    near: dict[str, Any] | None = None
    candidates: str | None = None
    scheme: tuple[int, int] | None = None
    common: dict[str, Any] | None = None
    template: dict[str, Any] | None = None
    run_summary: dict[str, Any] | None = field(default=None, repr=False)

    @classmethod
    def summary_only(cls, summary: Mapping[str, Any]) -> DedupResult:
        """A result of the run that ``summary`` (:meth:`summary`) describes, without its
        per-document fields (``collect=False``)."""
        s = dict(summary)
        return cls(
            **{name: _NotCollected(name) for name in _PER_DOCUMENT},  # type: ignore[arg-type]
            skipped=s["skipped"], seconds=dict(s["seconds"]), bytes_in=s.get("bytes_in", 0),
            bytes_out=s.get("bytes_out", 0), threshold=s.get("threshold"),
            temp_bytes=s.get("temp_bytes", 0), candidates=s.get("candidates"),
            scheme=tuple(s["bands"]) if "bands" in s else None,
            common=s.get("common_shingles"), template=s.get("template_hint"), run_summary=s,
        )  # fmt: skip

    @property
    def collected(self) -> bool:
        """Whether the result holds arrays of every document (``collect=True``)."""
        return not isinstance(self.decisions, _NotCollected)

    def __len__(self) -> int:
        if not self.collected:
            return int(self.summary()["documents"])
        return len(self.ids)

    def __repr__(self) -> str:
        return (
            f"DedupResult(documents={len(self)}, clusters={self.n_clusters}, "
            f"dropped={self.n_dropped})"
        )

    @property
    def kept(self) -> np.ndarray:
        """Boolean mask (n,) of the documents kept; use it to filter a DataFrame or Table."""
        return self.decisions.kept

    @property
    def dropped(self) -> np.ndarray:
        """Boolean mask (n,) of the documents removed."""
        return self.decisions.dropped

    @property
    def labels(self) -> np.ndarray:
        """Cluster of each document: the smallest position in its cluster."""
        return self.decisions.labels

    @property
    def n_clusters(self) -> int:
        """Clusters with two or more members."""
        if not self.collected:
            return int(self.summary()["clusters"])
        return self.decisions.n_clusters

    @property
    def n_dropped(self) -> int:
        """Documents removed (by a cluster's survivor or by the index)."""
        if not self.collected:
            return int(self.summary()["dropped"])
        return int(np.count_nonzero(self.dropped))

    @property
    def jaccard(self) -> np.ndarray:
        """float64 (n,): exact Jaccard of each document's shingle set with its survivor's (1.0
        for a survivor itself; NaN throughout when not verified)."""
        if self.verified is None:
            return np.full(len(self), np.nan)
        jac = self.verified.jaccard.copy()
        jac[self.verified.kept] = 1.0
        return jac

    def _ids_array(self, positions: np.ndarray) -> Any:
        pa = require("pyarrow", feature="ids and clusters as Arrow")
        values = [self.ids[i] for i in positions.tolist()]
        try:
            return pa.array(values)
        except (pa.ArrowInvalid, pa.ArrowTypeError):
            return pa.array([None if v is None else str(v) for v in values], type=pa.string())

    @property
    def kept_ids(self) -> Any:
        """pyarrow Array of the kept documents' ids, in input order."""
        return self._ids_array(np.flatnonzero(self.kept))

    @property
    def dropped_ids(self) -> Any:
        """pyarrow Array of the removed documents' ids, in input order."""
        return self._ids_array(np.flatnonzero(self.dropped))

    def cluster_members(self) -> np.ndarray:
        """Positions of the members of clusters with >= 2 members, by cluster then position."""
        pos = np.flatnonzero(self.decisions.in_cluster)
        return pos[lexorder((pos, self.labels[pos]))]

    @property
    def clusters(self) -> Any:
        """pyarrow Table, one row per member of each cluster of two or more documents.

        Columns: ``index`` (position in the input), ``id``, ``cluster`` (position of the
        cluster's first member), ``kept_id`` (id of its survivor), ``kept`` (bool), ``distance``
        (bits between this member's fingerprint and the survivor's), ``jaccard`` (exact Jaccard
        of the shingle sets with the survivor's, 1.0 for the survivor; null when not verified).
        """
        pa = require("pyarrow", feature="ids and clusters as Arrow")
        pos = self.cluster_members()
        d = self.decisions
        return pa.table(
            {
                "index": pa.array(pos, type=pa.int64()),
                "id": self._ids_array(pos),
                "cluster": pa.array(d.labels[pos], type=pa.int64()),
                "kept_id": self._ids_array(d.survivor[pos]),
                "kept": pa.array(d.kept[pos], type=pa.bool_()),
                "distance": pa.array(d.distance[pos], type=pa.int64()),
                "jaccard": pa.array(
                    self.jaccard[pos], type=pa.float64(), from_pandas=self.verified is None
                ),
            }
        )

    @property
    def index_matches(self) -> Any:
        """pyarrow Table, one row per document dropped against the index (``against=``).

        Columns: ``index`` (position in the input), ``id``, ``index_id`` (the entry it was
        dropped for), ``distance`` (bits between their fingerprints), ``jaccard`` (estimated from
        the index's sketches; null when the index keeps none), ``verified`` (``"sketch"`` or
        ``"fingerprint"``).
        """
        pa = require("pyarrow", feature="ids and clusters as Arrow")
        a = self.against
        pos = np.flatnonzero(a.found) if a is not None else np.zeros(0, dtype=np.int64)
        entry = [a.id[i] for i in pos.tolist()] if a is not None else []
        try:
            index_ids = pa.array(entry)
        except (pa.ArrowInvalid, pa.ArrowTypeError):
            index_ids = pa.array([str(v) for v in entry], type=pa.string())
        return pa.table(
            {
                "index": pa.array(pos, type=pa.int64()),
                "id": self._ids_array(pos),
                "index_id": index_ids,
                "distance": pa.array(a.distance[pos] if a else pos, type=pa.int64()),
                "jaccard": pa.array(
                    a.jaccard[pos] if a else np.zeros(0), type=pa.float64(), from_pandas=True
                ),
                "verified": pa.array([a.how if a else ""] * len(pos), type=pa.string()),
            }
        )

    def iter_index_clusters(self) -> Iterator[dict[str, Any]]:
        """One dict per index entry that documents were dropped for (``against=``), in the
        order of their first such document: as :meth:`iter_clusters`, with the entry as
        ``kept`` and first member, ``"index": True`` and ``verified`` (``"sketch"``: the
        ``jaccards`` are estimated from the index's sketches; ``"fingerprint"``: distance
        only, no ``jaccards``)."""
        a = self.against
        if a is None or not a.found.any():
            return
        groups: dict[Any, list[int]] = {}
        for i in np.flatnonzero(a.found).tolist():
            groups.setdefault(a.id[i], []).append(i)
        for entry, members in groups.items():
            row: dict[str, Any] = {
                "kept": entry,
                "size": 1 + len(members),
                "members": [entry] + [self.ids[i] for i in members],
                "distances": [0] + a.distance[members].tolist(),
            }
            if a.how == "sketch":
                row["jaccards"] = [1.0] + a.jaccard[members].tolist()
            row["index"] = True
            row["verified"] = a.how
            yield row

    def iter_clusters(self) -> Iterator[dict[str, Any]]:
        """One dict per cluster of two or more documents: ``kept`` (id of the survivor),
        ``size``, ``members`` (ids, input order), ``distances`` (bits to the survivor) and, when
        verified, ``jaccards`` (exact Jaccard with the survivor, 1.0 for itself). Documents
        dropped against an index are in :meth:`iter_index_clusters`."""
        pos = self.cluster_members()
        if len(pos) == 0:
            return
        lab = self.labels[pos]
        cuts = np.flatnonzero(lab[1:] != lab[:-1]) + 1
        dist = self.decisions.distance
        surv = self.decisions.survivor
        jac = self.jaccard if self.verified is not None else None
        for g in np.split(pos, cuts):
            row = {
                "kept": self.ids[int(surv[g[0]])],
                "size": len(g),
                "members": [self.ids[i] for i in g.tolist()],
                "distances": dist[g].tolist(),
            }
            if jac is not None:
                row["jaccards"] = jac[g].tolist()
            yield row

    def report_clusters(self) -> tuple[int, list[dict[str, Any]], list[dict[str, Any]]]:
        """The number of clusters, the clusters (:meth:`iter_clusters`) and the index's rows
        (:meth:`iter_index_clusters`) as the ``--clusters`` file has them, ids in
        :func:`~neardup.pipeline.report.json_id` form: what the report reads of any run
        (a staged run's :meth:`~neardup.pipeline.staged_result.StagedView.report_clusters`
        reads them from its parts)."""
        clusters = [_json_ids(c) for c in self.iter_clusters()]
        return len(clusters), clusters, [_json_ids(c) for c in self.iter_index_clusters()]

    def filter(self, data: Any) -> Any:
        """``data``, the in-memory input that was deduplicated, without its dropped documents
        (and without records skipped as bad).

        A Hugging Face ``Dataset`` gives a ``Dataset`` (``DatasetDict``: each split filtered),
        a pandas DataFrame/Series ``data[mask]``, a pyarrow Table/Array ``data.filter(mask)``,
        a numpy array ``data[mask]``, anything else a list of the kept items.
        """
        from neardup.io.hf import is_dataset, select_rows

        if not self.collected:
            self.decisions._refuse()
        if self.scan is not None:
            raise ValueError("file input was written with output=; filter in-memory data only")
        n = sum(map(len, data.values())) if type(data).__name__ == "DatasetDict" else len(data)
        given = len(self) + self.skipped  # every input item was read or skipped
        if n != given:
            raise ValueError(f"data has {n} rows but the deduplicated input had {given}")
        mask = self.kept
        if self.positions is not None and self.skipped:
            mask = np.zeros(n, dtype=bool)
            mask[self.positions[self.kept]] = True
        if is_dataset(data):
            return select_rows(data, mask)
        mod = type(data).__module__.split(".")[0]
        if mod == "pandas" or isinstance(data, np.ndarray):
            return data[mask]
        if mod == "pyarrow":
            return data.filter(require("pyarrow").array(mask))
        return [x for x, k in zip(data, mask.tolist(), strict=True) if k]

    def summary(self) -> dict[str, Any]:
        """The run's summary as a JSON-ready dict: counts, sizes, stage times and where the run
        ran (:func:`neardup.pipeline.staged_result.summary`, what ``--json-summary`` writes)."""
        return copy.deepcopy(self.run_summary or {})


def report_no_shingles(n: int, no_shingles: int, log: Callable[[str], None] | None) -> None:
    """Say that many documents have no shingles, when more than
    :data:`~neardup.core.verify.NO_SHINGLES_WARN_FRACTION` of them have none.

    Parameters
    ----------
    n : int
        Documents decided (bad records excluded).
    no_shingles : int
        Documents among them without shingles (empty, or no words): all kept.
    log : callable or None
        Where the line goes (``"warning: ..."``, the command line's messages); None: a
        :class:`UserWarning`.

    Warns
    -----
    UserWarning
        Without ``log``, when the line is due.

    Examples
    --------
    >>> lines = []
    >>> report_no_shingles(120, 40, lines.append)
    >>> lines[0].split(" (empty")[0]
    'warning: 40 of 120 documents (33.3%) have no shingles'
    """
    if not n or no_shingles <= NO_SHINGLES_WARN_FRACTION * n:
        return
    message = (
        f"{no_shingles} of {n} documents ({100 * no_shingles / n:.1f}%) have no shingles (empty "
        "or no words); they are all kept, never dropped as near-duplicates"
    )
    if log is not None:
        log(f"warning: {message}")
    else:
        warnings.warn(message, UserWarning, stacklevel=3)


def _json_ids(cluster: dict[str, Any]) -> dict[str, Any]:
    """``cluster`` with its ``kept`` and ``members`` ids in :func:`json_id` form."""
    cluster["kept"] = json_id(cluster["kept"])
    cluster["members"] = [json_id(m) for m in cluster["members"]]
    return cluster

"""Near-duplicate removal: documents -> fingerprints -> clusters -> one survivor per cluster.

The flow has three stages, each usable on its own:

1. :func:`scan_files` streams files (JSONL, Parquet, plain text) once and keeps only, per
   document, its id, its location (input file and 1-based record number), its length and its
   64-bit simhash fingerprint (bit 63 most significant). Texts are never all held at once.
2. :func:`decide` is a function of arrays only -- fingerprints and lengths in, decisions out:
   the clusters (connected components of ``popcount(a ^ b) <= distance``), the survivor of each
   cluster and every document's distance to it. An ``already_seen`` mask (e.g. documents found in
   a persistent index) is OR-ed into the dropped set.
3. :func:`write_kept` re-reads the inputs and writes the kept records byte for byte, in input
   order and in the input's format, to a temporary name renamed over the target when complete.

:func:`dedup` joins them for paths, iterables of strings, pyarrow Tables and pandas objects and
returns a :class:`DedupResult`.
"""

from __future__ import annotations

import glob
import json
import os
import shutil
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from neardup.bits import as_fingerprints, popcount
from neardup.errors import InputError
from neardup.io import atomic_directory, atomic_output
from neardup.readers import (
    STDIN,
    detect_format,
    read_jsonl,
    read_lines,
    read_parquet,
    read_text_file,
)
from neardup.search import find_clusters

__all__ = [
    "DEFAULT_DEDUP_DISTANCE",
    "KEEP_POLICIES",
    "Decisions",
    "DedupResult",
    "Scan",
    "decide",
    "dedup",
    "expand_inputs",
    "scan_files",
    "write_kept",
]

#: Default Hamming distance for dedup (recall 0.88 on Jaccard >= 0.9 pairs in the evaluation).
DEFAULT_DEDUP_DISTANCE = 6
#: How the survivor of a cluster is chosen.
KEEP_POLICIES = ("first", "longest")
#: Documents read before each fingerprinting round (the next batch is read meanwhile).
BATCH_DOCS = 16384
#: Rows per batch when copying Parquet rows in the second pass.
PARQUET_BATCH_ROWS = 65536

OnBad = Callable[[InputError], None]
Progress = Callable[[int], None]


# ----------------------------------------------------------------------------------------------
# decisions: arrays in, arrays out


@dataclass(frozen=True)
class Decisions:
    """What to do with each of ``n`` documents (all arrays have shape ``(n,)``).

    Attributes
    ----------
    labels : ndarray of int64
        Cluster of each document: the smallest position in its cluster (its own for a singleton).
    survivor : ndarray of int64
        Position of the member its cluster keeps.
    distance : ndarray of int64
        ``popcount(fp ^ fp[survivor])`` in bits. Clusters are connected components, so this may
        exceed the search distance (A~B~C with A and C further apart).
    kept : ndarray of bool
        True for documents to keep: survivors not marked ``already_seen``.
    """

    labels: np.ndarray
    survivor: np.ndarray
    distance: np.ndarray
    kept: np.ndarray

    @property
    def dropped(self) -> np.ndarray:
        """Boolean mask of the documents removed."""
        return ~self.kept

    @property
    def in_cluster(self) -> np.ndarray:
        """Boolean mask of the documents in a cluster of two or more members."""
        if len(self.labels) == 0:
            return np.zeros(0, dtype=bool)
        sizes = np.bincount(self.labels, minlength=len(self.labels))
        return sizes[self.labels] >= 2

    @property
    def n_clusters(self) -> int:
        """Number of clusters with two or more members."""
        if len(self.labels) == 0:
            return 0
        return int(np.count_nonzero(np.bincount(self.labels) >= 2))


def _survivors(labels: np.ndarray, lengths: np.ndarray | None, keep: str) -> np.ndarray:
    n = len(labels)
    if keep == "first" or n == 0:
        return labels.copy()
    # longest: order by cluster, then length descending, then position; take each group's head
    pos = np.arange(n, dtype=np.int64)
    order = np.lexsort((pos, -lengths, labels))
    lab = labels[order]
    head = np.ones(n, dtype=bool)
    head[1:] = lab[1:] != lab[:-1]
    best = np.empty(n, dtype=np.int64)
    best[lab[head]] = order[head]
    return best[labels]


def decide(
    fingerprints: Sequence[int] | np.ndarray,
    lengths: Sequence[int] | np.ndarray | None = None,
    *,
    keep: str = "first",
    distance: int = DEFAULT_DEDUP_DISTANCE,
    blocks: int | None = None,
    threads: int | None = None,
    already_seen: np.ndarray | None = None,
    client: Any = None,
) -> Decisions:
    """Clusters, survivors and distances for ``n`` fingerprints.

    Parameters
    ----------
    fingerprints : sequence of int or ndarray
        Unsigned 64-bit simhash fingerprints (bit 63 most significant), one per document in
        input order.
    lengths : sequence of int or ndarray, optional
        Document lengths (characters); needed for ``keep="longest"``.
    keep : {"first", "longest"}
        Survivor of a cluster: its first member in input order, or its longest member (ties go
        to the first).
    distance : int, default 6
        Largest Hamming distance (bits, inclusive) that links two documents.
    blocks : int, optional
        Block count of the search layout (default: chosen for ``n``).
    threads : int, optional
        Worker threads for the search.
    already_seen : ndarray of bool, optional
        Documents to drop whatever their cluster (e.g. found in an existing index).
    client : distributed.Client, optional
        Run the search on this Dask cluster (:func:`neardup.distributed.find_clusters`, same
        clusters); needs ``pip install "neardup[dask]"``.

    Returns
    -------
    Decisions

    Examples
    --------
    >>> d = decide([0b1111, 0b0111, 1 << 40], distance=1)
    >>> d.labels.tolist(), d.kept.tolist(), d.distance.tolist()
    ([0, 0, 2], [True, False, True], [0, 1, 0])
    """
    if keep not in KEEP_POLICIES:
        raise ValueError(f"keep must be one of {list(KEEP_POLICIES)} (got {keep!r})")
    fp = as_fingerprints(fingerprints)
    n = len(fp)
    lens: np.ndarray | None = None
    if keep == "longest":
        if lengths is None:
            raise ValueError("keep='longest' needs the document lengths")
    if lengths is not None:
        lens = np.ascontiguousarray(lengths, dtype=np.int64).ravel()
        if len(lens) != n:
            raise ValueError(f"got {n} fingerprints but {len(lens)} lengths")
    if client is not None:
        from neardup.distributed import find_clusters as find_clusters_on_dask

        labels = find_clusters_on_dask(fp, distance, blocks, client)
    else:
        labels = find_clusters(fp, distance, blocks, threads=threads)
    survivor = _survivors(labels, lens, keep)
    dist = popcount(fp ^ fp[survivor]).astype(np.int64) if n else np.zeros(0, np.int64)
    kept = survivor == np.arange(n, dtype=np.int64)
    if already_seen is not None:
        seen = np.asarray(already_seen, dtype=bool).ravel()
        if len(seen) != n:
            raise ValueError(f"already_seen has {len(seen)} entries for {n} documents")
        kept &= ~seen
    return Decisions(labels, survivor, dist, kept)


# ----------------------------------------------------------------------------------------------
# inputs


@dataclass(frozen=True)
class InputFile:
    """One input file: its path, the reader kind and its name inside a text output directory."""

    path: str
    kind: str  #: "text", "lines", "jsonl" or "parquet"
    relname: str


_GLOB_CHARS = frozenset("*?[")


def expand_inputs(inputs: Iterable[str | os.PathLike], fmt: str = "auto") -> list[InputFile]:
    """Files named by ``inputs``: files as given, directories walked (sorted, dot-files skipped),
    glob patterns that name no file expanded (sorted).

    Raises
    ------
    InputError
        For a missing input, an empty glob, ``-`` (stdin cannot be read twice), or inputs of
        different formats (dedup writes one output in the input's format).
    """
    files: list[InputFile] = []
    for raw in inputs:
        path = os.fspath(raw)
        if path == STDIN:
            raise InputError(
                "<stdin>", None, "dedup reads its input twice; save stdin to a file first"
            )
        if os.path.isdir(path):
            found = []
            for dirpath, dirs, names in os.walk(path):
                dirs[:] = sorted(d for d in dirs if not d.startswith("."))
                found += [os.path.join(dirpath, nm) for nm in sorted(names) if nm[:1] != "."]
            files += [InputFile(p, detect_format(p, fmt), os.path.relpath(p, path)) for p in found]
        elif os.path.exists(path):
            files.append(InputFile(path, detect_format(path, fmt), os.path.basename(path)))
        elif _GLOB_CHARS & set(path):
            matches = sorted(p for p in glob.glob(path, recursive=True) if os.path.isfile(p))
            if not matches:
                raise InputError(path, None, "no file matches this pattern")
            files += [InputFile(p, detect_format(p, fmt), os.path.basename(p)) for p in matches]
        else:
            raise InputError(path, None, "no such file")
    kinds = {f.kind for f in files}
    if len(kinds) > 1:
        first = {k: next(f.path for f in files if f.kind == k) for k in sorted(kinds)}
        shown = ", ".join(f"{p} is {k}" for k, p in first.items())
        raise InputError(
            files[0].path,
            None,
            f"inputs mix formats ({shown}); dedup writes one output in the input's format",
        )
    if kinds == {"text"}:
        seen: dict[str, str] = {}
        for f in files:
            if f.relname in seen:
                raise InputError(
                    f.path,
                    None,
                    f"two inputs would be written as {f.relname!r} (also {seen[f.relname]}); "
                    "rename one or pass their directory",
                )
            seen[f.relname] = f.path
    return files


# ----------------------------------------------------------------------------------------------
# pass 1


@dataclass
class Scan:
    """What the first pass keeps of every document read (arrays of shape ``(n,)``)."""

    files: list[InputFile]
    ids: list[Any]  #: the id of each document (field/column value, else ``file:number``)
    source: np.ndarray  #: int32 index into ``files``
    record: np.ndarray  #: int64 1-based line / row number (1 for a whole text file)
    lengths: np.ndarray  #: int64 characters of text
    fingerprints: np.ndarray  #: uint64
    skipped: int = 0  #: bad records skipped (only with ``on_bad``)
    bytes_in: int = 0  #: total size of the input files in bytes


def _id_key(v: Any) -> Any:
    try:
        hash(v)
    except TypeError:
        return ("json", json.dumps(v, sort_keys=True, default=str))
    return (type(v) is str, v)


def _records(f: InputFile, text_field: str, id_field: str | None, on_bad: OnBad | None):
    if f.kind == "text":
        return read_text_file(f.path, on_bad)
    if f.kind == "lines":
        return read_lines(f.path, on_bad)
    if f.kind == "jsonl":
        return read_jsonl(f.path, text_field, id_field, on_bad)
    return read_parquet(f.path, text_field, id_field, on_bad)


def _check_parquet_schemas(files: list[InputFile]) -> None:
    if not files or files[0].kind != "parquet":
        return
    import pyarrow.parquet as pq

    schema = pq.read_schema(files[0].path)
    for f in files[1:]:
        other = pq.read_schema(f.path)
        if not other.equals(schema, check_metadata=False):
            raise InputError(
                f.path,
                None,
                f"Parquet schema differs from {files[0].path}'s; dedup writes one file, so all "
                "inputs need the same columns and types",
            )


def scan_files(
    inputs: Iterable[str | os.PathLike],
    *,
    fmt: str = "auto",
    text_field: str = "text",
    id_field: str | None = "id",
    fingerprinter: Any = None,
    threads: int | None = None,
    on_bad: OnBad | None = None,
    progress: Progress | None = None,
) -> Scan:
    """First pass: fingerprint every document of ``inputs``, keeping only ids and arrays.

    Documents are read in batches of :data:`BATCH_DOCS`; one batch is fingerprinted (on all
    cores) while the next is read. Duplicate ids raise :class:`InputError` naming both records,
    or are passed to ``on_bad`` and skipped.

    Parameters
    ----------
    inputs : iterable of path
        Files, directories or glob patterns (see :func:`expand_inputs`).
    fmt : str
        Reader: ``"auto"`` (by extension), ``"text"``, ``"lines"``, ``"jsonl"``, ``"parquet"``.
    text_field, id_field : str
        JSONL field / Parquet column of the text and of the id (``None``: ``file:number``).
    fingerprinter : neardup.fingerprints.Fingerprinter, optional
        Default: ``Fingerprinter("default")``.
    threads : int, optional
        Fingerprinting threads.
    on_bad : callable, optional
        Called with each bad record's :class:`InputError` instead of raising; the record is
        skipped and counted in ``Scan.skipped``.
    progress : callable, optional
        Called with the number of documents read after each batch.
    """
    from neardup.fingerprints import Fingerprinter

    fper = fingerprinter if fingerprinter is not None else Fingerprinter("default")
    files = expand_inputs(inputs, fmt)
    _check_parquet_schemas(files)
    skipped = 0

    def bad(err: InputError) -> None:
        nonlocal skipped
        if on_bad is None:
            raise err
        skipped += 1
        on_bad(err)

    ids: list[Any] = []
    first_at: dict[Any, int] = {}
    src_parts: list[np.ndarray] = []
    rec_parts: list[np.ndarray] = []
    len_parts: list[np.ndarray] = []
    fp_parts: list[Future] = []
    texts: list[str] = []
    srcs: list[int] = []
    recs: list[int] = []

    with ThreadPoolExecutor(max_workers=1) as pool:
        pending: Future | None = None

        def flush() -> None:
            nonlocal pending, texts, srcs, recs
            if not texts:
                return
            if pending is not None:
                pending.result()  # at most one batch in flight: bounded memory
            pending = pool.submit(fper.fingerprint_many, texts, threads)
            fp_parts.append(pending)
            len_parts.append(np.fromiter(map(len, texts), dtype=np.int64, count=len(texts)))
            src_parts.append(np.array(srcs, dtype=np.int32))
            rec_parts.append(np.array(recs, dtype=np.int64))
            texts, srcs, recs = [], [], []
            if progress is not None:
                progress(len(ids))

        for k, f in enumerate(files):
            for rec in _records(f, text_field, id_field, on_bad and bad):
                key = _id_key(rec.id)
                j = first_at.setdefault(key, len(ids))
                if j != len(ids):
                    where = f"{files[_locate(j, src_parts, srcs)].path}:"
                    where += str(_locate(j, rec_parts, recs))
                    bad(
                        InputError(
                            rec.source,
                            rec.number,
                            f"duplicate id {rec.id!r} (first at {where}); ids must be unique: "
                            "choose another --id-field or use --skip-bad",
                        )
                    )
                    continue
                ids.append(rec.id)
                texts.append(rec.text)
                srcs.append(k)
                recs.append(rec.number)
                if len(texts) >= BATCH_DOCS:
                    flush()
        flush()
        fps = [p.result() for p in fp_parts]

    def cat(parts: list[np.ndarray], dtype: Any) -> np.ndarray:
        return np.concatenate(parts) if parts else np.zeros(0, dtype=dtype)

    return Scan(
        files=files,
        ids=ids,
        source=cat(src_parts, np.int32),
        record=cat(rec_parts, np.int64),
        lengths=cat(len_parts, np.int64),
        fingerprints=cat(fps, np.uint64),
        skipped=skipped,
        bytes_in=sum(os.path.getsize(f.path) for f in files),
    )


def _locate(j: int, parts: list[np.ndarray], tail: list[int]) -> int:
    for p in parts:
        if j < len(p):
            return int(p[j])
        j -= len(p)
    return int(tail[j])


# ----------------------------------------------------------------------------------------------
# pass 2


def _kept_by_file(scan: Scan, kept: np.ndarray) -> list[np.ndarray]:
    """Sorted kept record numbers of each input file."""
    src, rec = scan.source[kept], scan.record[kept]
    order = np.lexsort((rec, src))
    src, rec = src[order], rec[order]
    cuts = np.searchsorted(src, np.arange(len(scan.files) + 1))
    return [rec[cuts[k] : cuts[k + 1]] for k in range(len(scan.files))]


def write_kept(
    scan: Scan, kept: np.ndarray, output: str | os.PathLike, progress: Progress | None = None
) -> int:
    """Second pass: write the kept records of ``scan``'s inputs, untouched and in input order.

    JSONL and line inputs give one file of the original line bytes (a newline is added only
    after a last line that had none); Parquet inputs give one Parquet file with the inputs'
    schema (rows copied in batches); text files give a directory holding copies of the kept
    files (named relative to the directory given as input, else by base name). Records skipped
    as bad are not written. The output appears only when complete.

    Parameters
    ----------
    scan : Scan
        The first pass's result.
    kept : ndarray of bool, shape (n,)
        Which scanned documents to write.
    output : path
        Output file (``-`` for stdout with line formats) or directory (text inputs).
    progress : callable, optional
        Called with the number of documents written so far.

    Returns
    -------
    int
        Bytes written.
    """
    kept = np.asarray(kept, dtype=bool)
    if len(kept) != len(scan.ids):
        raise ValueError(f"kept has {len(kept)} entries for {len(scan.ids)} documents")
    out = os.fspath(output)
    if out != "-":
        target = os.path.realpath(out)
        for f in scan.files:
            if os.path.realpath(f.path) == target:
                raise InputError(out, None, "the output would overwrite an input")
    per_file = _kept_by_file(scan, kept)
    kind = scan.files[0].kind if scan.files else "jsonl"
    if kind == "text":
        return _write_text_dir(scan, per_file, out, progress)
    if kind == "parquet":
        if out == "-":
            raise InputError(out, None, "Parquet output needs a file name, not stdout")
        return _write_parquet(scan, per_file, out, progress)
    return _write_lines(scan, per_file, out, progress)


def _write_lines(
    scan: Scan, per_file: list[np.ndarray], out: str, progress: Progress | None
) -> int:
    written = done = 0
    with atomic_output(out, "wb") as w:
        for f, numbers in zip(scan.files, per_file, strict=True):
            if len(numbers) == 0:
                continue
            wanted = numbers.tolist()
            i, m = 0, len(wanted)
            with open(f.path, "rb") as r:
                for number, line in enumerate(r, start=1):
                    if number != wanted[i]:
                        continue
                    if not line.endswith(b"\n"):
                        line += b"\n"
                    w.write(line)
                    written += len(line)
                    i += 1
                    if i == m:
                        break
            done += m
            if progress is not None:
                progress(done)
    return written


def _write_parquet(
    scan: Scan, per_file: list[np.ndarray], out: str, progress: Progress | None
) -> int:
    import pyarrow as pa
    import pyarrow.parquet as pq

    schema = pq.read_schema(scan.files[0].path)
    done = 0
    with atomic_output(out, "wb") as w:
        with pq.ParquetWriter(w, schema) as writer:
            for f, numbers in zip(scan.files, per_file, strict=True):
                pf = pq.ParquetFile(f.path)
                mask = np.zeros(pf.metadata.num_rows, dtype=bool)
                mask[numbers - 1] = True
                row = 0
                for batch in pf.iter_batches(batch_size=PARQUET_BATCH_ROWS):
                    m = mask[row : row + batch.num_rows]
                    row += batch.num_rows
                    if m.any():
                        part = pa.Table.from_batches([batch.filter(pa.array(m))])
                        writer.write_table(part.cast(schema) if part.schema != schema else part)
                done += len(numbers)
                if progress is not None:
                    progress(done)
    return os.path.getsize(out)


def _write_text_dir(
    scan: Scan, per_file: list[np.ndarray], out: str, progress: Progress | None
) -> int:
    if out == "-":
        raise InputError(out, None, "text inputs give an output directory, not stdout")
    written = done = 0
    with atomic_directory(out) as tmp:
        for f, numbers in zip(scan.files, per_file, strict=True):
            if len(numbers) == 0:
                continue
            dest = os.path.join(tmp, f.relname)
            os.makedirs(os.path.dirname(dest), exist_ok=True)
            shutil.copyfile(f.path, dest)
            written += os.path.getsize(dest)
            done += 1
            if progress is not None:
                progress(done)
    return written


# ----------------------------------------------------------------------------------------------
# the one call


@dataclass
class DedupResult:
    """Decisions for ``n`` documents, with their ids and fingerprints.

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
        Wall time of each stage: ``read+fingerprint``, ``search``, ``write`` (when written).
    scan : Scan or None
        For file input: the source file and record number of every document.
    bytes_in, bytes_out : int
        Input size and written output size in bytes (file input with an output; else 0).
    positions : ndarray of int64 or None
        In-memory input: the input position of each document. All arrays are aligned with the
        documents read, which are the whole input unless ``skip_bad`` skipped some; then map
        back with ``positions``.
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

    def __len__(self) -> int:
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
        return self.decisions.n_clusters

    @property
    def n_dropped(self) -> int:
        return int(np.count_nonzero(self.dropped))

    def _ids_array(self, positions: np.ndarray) -> Any:
        pa = _pyarrow()
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
        return pos[np.lexsort((pos, self.labels[pos]))]

    @property
    def clusters(self) -> Any:
        """pyarrow Table, one row per member of each cluster of two or more documents.

        Columns: ``index`` (position in the input), ``id``, ``cluster`` (position of the
        cluster's first member), ``kept_id`` (id of its survivor), ``kept`` (bool), ``distance``
        (bits between this member's fingerprint and the survivor's).
        """
        pa = _pyarrow()
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
            }
        )

    def iter_clusters(self) -> Iterator[dict[str, Any]]:
        """One dict per cluster of two or more documents: ``kept`` (id of the survivor),
        ``size``, ``members`` (ids, input order) and ``distances`` (bits to the survivor)."""
        pos = self.cluster_members()
        if len(pos) == 0:
            return
        lab = self.labels[pos]
        cuts = np.flatnonzero(lab[1:] != lab[:-1]) + 1
        dist = self.decisions.distance
        surv = self.decisions.survivor
        for g in np.split(pos, cuts):
            yield {
                "kept": self.ids[int(surv[g[0]])],
                "size": len(g),
                "members": [self.ids[i] for i in g.tolist()],
                "distances": dist[g].tolist(),
            }

    def summary(self) -> dict[str, Any]:
        """Counts, sizes and stage times as a JSON-ready dict."""
        total = sum(self.seconds.values())
        out: dict[str, Any] = {
            "documents": len(self),
            "skipped": self.skipped,
            "clusters": self.n_clusters,
            "dropped": self.n_dropped,
            "kept": len(self) - self.n_dropped,
        }
        if self.bytes_in:
            out.update(
                bytes_in=self.bytes_in,
                bytes_out=self.bytes_out,
                bytes_saved=self.bytes_in - self.bytes_out,
            )
        out["seconds"] = {k: round(v, 3) for k, v in self.seconds.items()}
        out["seconds"]["total"] = round(total, 3)
        out["documents_per_second"] = round(len(self) / total) if total > 0 else None
        return out


def _ignore(err: InputError) -> None:
    return None


def _pyarrow() -> Any:
    try:
        import pyarrow as pa
    except ImportError:  # pragma: no cover - depends on the environment
        raise ImportError("this needs pyarrow: pip install 'neardup[parquet]'") from None
    return pa


def _is_paths(data: Any) -> bool:
    if isinstance(data, (str, os.PathLike)):
        return True
    return (
        isinstance(data, (list, tuple))
        and len(data) > 0
        and all(isinstance(x, os.PathLike) for x in data)
    )


def _texts_and_ids(data: Any, text_field: str, id_field: str | None) -> tuple[Any, list | None]:
    """Texts (an iterable) and ids (or None: positions) of in-memory input."""
    mod = type(data).__module__.split(".")[0]
    if mod == "pyarrow":
        if hasattr(data, "column_names"):  # Table / RecordBatch
            if text_field not in data.column_names:
                raise ValueError(
                    f"no column {text_field!r} (columns: {', '.join(data.column_names)})"
                )
            ids = data.column(id_field).to_pylist() if id_field in data.column_names else None
            return data.column(text_field).to_pylist(), ids
        return data.to_pylist(), None
    if mod == "pandas":
        if hasattr(data, "columns"):  # DataFrame
            if text_field not in data.columns:
                cols = ", ".join(map(str, data.columns))
                raise ValueError(f"no column {text_field!r} (columns: {cols})")
            ids = data[id_field].tolist() if id_field in data.columns else data.index.tolist()
            return data[text_field].tolist(), ids
        return data.tolist(), data.index.tolist()  # Series
    if isinstance(data, np.ndarray):
        return data.tolist(), None
    if isinstance(data, (str, bytes)):
        raise TypeError("pass a path as str/os.PathLike, or texts as a list of strings")
    return data, None


def _fingerprint_texts(
    texts: Iterable[Any], fper: Any, threads: int | None, on_bad: OnBad | None
) -> tuple[np.ndarray, np.ndarray, np.ndarray, int]:
    """Fingerprints, lengths and positions of the valid texts, in batches."""
    fps: list[np.ndarray] = []
    lens: list[np.ndarray] = []
    keep_pos: list[int] = []
    batch: list[str] = []
    skipped = 0
    for i, t in enumerate(texts):
        if not isinstance(t, str):
            what = "missing (None)" if t is None else f"a {type(t).__name__}"
            err = InputError("<input>", i, f"text is {what}, expected a string")
            if on_bad is None:
                raise ValueError(f"document {i}: text is {what}, expected a string")
            skipped += 1
            on_bad(err)
            continue
        batch.append(t)
        keep_pos.append(i)
        if len(batch) >= BATCH_DOCS:
            fps.append(fper.fingerprint_many(batch, threads))
            lens.append(np.fromiter(map(len, batch), dtype=np.int64, count=len(batch)))
            batch = []
    if batch:
        fps.append(fper.fingerprint_many(batch, threads))
        lens.append(np.fromiter(map(len, batch), dtype=np.int64, count=len(batch)))
    fp = np.concatenate(fps) if fps else np.zeros(0, dtype=np.uint64)
    ln = np.concatenate(lens) if lens else np.zeros(0, dtype=np.int64)
    return fp, ln, np.array(keep_pos, dtype=np.int64), skipped


def dedup(
    data: Any,
    *,
    distance: int = DEFAULT_DEDUP_DISTANCE,
    keep: str = "first",
    blocks: int | None = None,
    preset: str = "default",
    fingerprinter: Any = None,
    text_field: str = "text",
    id_field: str | None = "id",
    fmt: str = "auto",
    output: str | os.PathLike | None = None,
    skip_bad: bool = False,
    on_bad: OnBad | None = None,
    threads: int | None = None,
    already_seen: np.ndarray | None = None,
    progress: Callable[[str, int], None] | None = None,
    against: Any = None,
    update: bool = False,
    client: Any = None,
) -> DedupResult:
    """Find near-duplicate documents and choose one survivor per cluster.

    Parameters
    ----------
    data : path, list of paths, iterable of str, pyarrow Table/Array, pandas DataFrame/Series
        A ``str``/``os.PathLike`` (or a list of ``os.PathLike``) is read as files: JSONL,
        Parquet, a directory or glob of text files (streamed; see :func:`scan_files`). Anything
        else is in-memory text: a pyarrow Table or pandas DataFrame (column ``text_field``, ids
        from ``id_field`` when present, else positions / the DataFrame index), a pyarrow Array,
        pandas Series, numpy array or any iterable of ``str``.
    distance : int, default 6
        Largest Hamming distance (bits, inclusive) between fingerprints that links documents.
    keep : {"first", "longest"}
        Survivor of a cluster: first in input order, or most characters (ties: first).
    blocks : int, optional
        Search layout block count (default: chosen for the corpus size).
    preset : str
        Fingerprint preset (:data:`neardup.fingerprints.PRESETS`), unless ``fingerprinter``.
    fingerprinter : Fingerprinter, optional
        A configured :class:`neardup.fingerprints.Fingerprinter`.
    text_field, id_field : str
        JSONL field / Parquet or Table column / DataFrame column of the text and of the id.
    fmt : str
        File reader (``"auto"``, ``"text"``, ``"lines"``, ``"jsonl"``, ``"parquet"``).
    output : path, optional
        File input only: write the kept records here, in the input's format (atomically).
    skip_bad, on_bad
        Skip bad records (malformed, missing or non-string text, duplicate id) instead of
        raising; ``on_bad`` is called with each one's error.
    threads : int, optional
        Worker threads for fingerprinting and search.
    already_seen : ndarray of bool, optional
        Documents to drop regardless (aligned with the documents read, bad ones excluded).
    against : path or neardup.index.Index, optional
        An index of documents seen before: documents within ``distance`` bits of anything in it
        are dropped (incremental dedup, one dump at a time).
    update : bool
        With ``against``: add the kept documents to the index (after the output is written).
    client : distributed.Client, optional
        Run the search on this Dask cluster (same decisions; see :func:`decide`).
    progress : callable, optional
        ``progress(stage, count)`` with stage ``"read"`` or ``"write"``.

    Returns
    -------
    DedupResult
        ``kept``/``dropped`` masks, ``kept_ids``, ``labels``, ``clusters`` (pyarrow Table),
        ``fingerprints``, ``summary()``.

    Raises
    ------
    InputError
        Bad input (file and record named) unless ``skip_bad``.

    Examples
    --------
    >>> docs = ["the cat sat on the mat today", "The cat sat on the mat today!", "dogs bark"]
    >>> r = dedup(docs)
    >>> r.kept.tolist(), r.labels.tolist()
    ([True, False, True], [0, 0, 2])
    """
    from neardup.fingerprints import Fingerprinter

    fper = fingerprinter if fingerprinter is not None else Fingerprinter(preset)
    if not skip_bad:
        on_bad = None
    elif on_bad is None:
        on_bad = _ignore
    seconds: dict[str, float] = {}
    t0 = time.perf_counter()
    scan: Scan | None = None
    pos: np.ndarray | None = None
    if _is_paths(data):
        paths = [data] if isinstance(data, (str, os.PathLike)) else list(data)
        scan = scan_files(
            paths,
            fmt=fmt,
            text_field=text_field,
            id_field=id_field,
            fingerprinter=fper,
            threads=threads,
            on_bad=on_bad,
            progress=(lambda n: progress("read", n)) if progress else None,
        )
        ids, fps, lens, skipped = scan.ids, scan.fingerprints, scan.lengths, scan.skipped
    else:
        if output is not None:
            raise ValueError("output= needs file input; filter in-memory data with result.kept")
        texts, given_ids = _texts_and_ids(data, text_field, id_field)
        fps, lens, pos, skipped = _fingerprint_texts(texts, fper, threads, on_bad)
        ids = pos.tolist() if given_ids is None else [given_ids[i] for i in pos.tolist()]
        if given_ids is not None:
            ids, fps, lens, pos, dup_skipped = _unique_ids(ids, pos, fps, lens, on_bad)
            skipped += dup_skipped
    seconds["read+fingerprint"] = time.perf_counter() - t0
    index = None
    if against is not None:
        from neardup.index.hooks import open_index, seen_mask

        index = open_index(against, update)
        already_seen = seen_mask(index, fps, distance, already_seen)

    t0 = time.perf_counter()
    decisions = decide(
        fps,
        lens,
        keep=keep,
        distance=distance,
        blocks=blocks,
        threads=threads,
        already_seen=already_seen,
        client=client,
    )
    seconds["search"] = time.perf_counter() - t0
    result = DedupResult(ids, fps, lens, decisions, skipped, seconds, scan, positions=pos)
    if scan is not None:
        result.bytes_in = scan.bytes_in
    if output is not None:
        assert scan is not None
        t0 = time.perf_counter()
        result.bytes_out = write_kept(
            scan, decisions.kept, output, (lambda n: progress("write", n)) if progress else None
        )
        seconds["write"] = time.perf_counter() - t0
    if index is not None:
        from neardup.index.hooks import add_survivors

        if update:
            add_survivors(index, ids, fps, decisions.kept)
        if index is not against:
            index.close()
    return result


def _unique_ids(
    ids: list[Any], pos: np.ndarray, fps: np.ndarray, lens: np.ndarray, on_bad: OnBad | None
) -> tuple[list[Any], np.ndarray, np.ndarray, np.ndarray, int]:
    first: dict[Any, int] = {}
    keep = np.ones(len(ids), dtype=bool)
    for k, v in enumerate(ids):
        j = first.setdefault(_id_key(v), k)
        if j != k:
            if on_bad is None:
                raise ValueError(
                    f"document {int(pos[k])}: duplicate id {v!r} (first at document "
                    f"{int(pos[j])}); ids must be unique"
                )
            on_bad(InputError("<input>", int(pos[k]), f"duplicate id {v!r}"))
            keep[k] = False
    if keep.all():
        return ids, fps, lens, pos, 0
    return (
        [v for v, k in zip(ids, keep.tolist(), strict=True) if k],
        fps[keep],
        lens[keep],
        pos[keep],
        int(np.count_nonzero(~keep)),
    )

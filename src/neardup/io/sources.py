"""Where documents come from: input paths expanded to files, and in-memory tables and arrays
(pyarrow, pandas, numpy, iterables of str) turned into texts and ids."""

from __future__ import annotations

import glob
import os
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

import numpy as np

from neardup._optional import require
from neardup.errors import InputError
from neardup.io.arrow import ArrowTexts
from neardup.io.files import compression_of, is_spooled, is_url, list_url
from neardup.io.hf import dataset_texts_and_ids, is_dataset, is_saved_dataset
from neardup.io.readers import DEFAULT_ID_FIELD, STDIN, detect_format, sniff_format

__all__ = [
    "InputFile",
    "InputPath",
    "expand_inputs",
    "is_paths",
    "require_readers",
    "texts_and_ids",
]


class InputPath(str):
    """A path or URL (``s3://bucket/x.jsonl``) that names input files, as text: unlike a plain
    ``str`` in a list (a text to deduplicate), a list of these is read as files, and unlike
    ``pathlib.Path`` it keeps a URL's ``//``."""

    __slots__ = ()

    def __fspath__(self) -> str:
        return str.__str__(self)


@dataclass(frozen=True)
class InputFile:
    """One input file: its path, the reader kind and its name inside a text output directory."""

    path: str
    kind: str  #: "text", "lines", "jsonl" or "parquet"
    relname: str


_GLOB_CHARS = frozenset("*?[")


def expand_inputs(
    inputs: Iterable[str | os.PathLike], fmt: str = "auto", *, one_output: bool = True
) -> list[InputFile]:
    """Files named by ``inputs``: files as given, directories walked (sorted, dot-files skipped),
    glob patterns that name no file expanded (sorted); the same for fsspec URLs (``s3://...``).

    With ``one_output=False`` (commands that read their inputs once, such as ``fingerprint``),
    ``-`` (stdin) is kept as is and formats may mix.

    Raises
    ------
    InputError
        For a missing input, an empty glob, ``-`` (stdin cannot be read twice), or inputs of
        different formats (dedup writes one output in the input's format).
    """
    files: list[InputFile] = []
    for raw in inputs:
        path = os.fspath(raw)
        if path == STDIN and not one_output:
            files.append(InputFile(path, detect_format(path, fmt), path))
            continue
        if path == STDIN:
            raise InputError(
                "<stdin>",
                None,
                "dedup reads its input twice; name it /dev/stdin (read once into a temporary "
                "file) or save stdin to a file first",
            )
        if is_url(path):
            files += [InputFile(p, detect_format(p, fmt), rel) for p, rel in list_url(path)]
        elif is_saved_dataset(path):
            raise InputError(
                path,
                None,
                "is a Hugging Face dataset saved with save_to_disk: pass "
                "datasets.load_from_disk(path) instead (`neardup dedup` reads it as is)",
            )
        elif os.path.isdir(path):
            found = []
            for dirpath, dirs, names in os.walk(path):
                dirs[:] = sorted(d for d in dirs if not d.startswith("."))
                found += [os.path.join(dirpath, nm) for nm in sorted(names) if nm[:1] != "."]
            files += [InputFile(p, detect_format(p, fmt), os.path.relpath(p, path)) for p in found]
        elif os.path.exists(path):
            files.append(InputFile(path, _file_kind(path, fmt), os.path.basename(path)))
        elif _GLOB_CHARS & set(path):
            matches = sorted(p for p in glob.glob(path, recursive=True) if os.path.isfile(p))
            if not matches:
                raise InputError(path, None, "no file matches this pattern")
            files += [InputFile(p, detect_format(p, fmt), os.path.basename(p)) for p in matches]
        else:
            raise InputError(path, None, "no such file")
    if one_output:
        _check_one_output(files)
    return files


#: Where files are named by a descriptor (``/dev/stdin``, ``/dev/fd/0``, ``/proc/self/fd/0``),
#: a name that says nothing of the file's format.
_DESCRIPTOR_DIRS = ("/dev/", "/proc/")


def _file_kind(path: str, fmt: str) -> str:
    """:func:`detect_format` of a file named as such; for a pipe read from its copy
    (:func:`neardup.io.files.spooled`) or a file named by a descriptor, whose name says no
    format (read as text), the format its content has (:func:`sniff_format`).

    Raises
    ------
    InputError
        For such a file whose content is neither JSONL nor Parquet: its format must be given.
    """
    kind = detect_format(path, fmt)
    if fmt != "auto" or kind != "text":
        return kind
    if not is_spooled(path) and not os.path.abspath(path).startswith(_DESCRIPTOR_DIRS):
        return kind
    found = sniff_format(path)
    if found is None:
        raise InputError(
            path,
            None,
            "is a pipe or descriptor whose name says no format, and whose content is neither "
            "JSONL ('{' first) nor Parquet: pass --format text (all of it one document), lines "
            "(a document per line) or jsonl",
        )
    return found


def require_readers(files: Iterable[InputFile]) -> None:
    """Import what reading ``files`` needs (pyarrow for Parquet, zstandard for ``.zst``), so
    that a command names a missing optional package before any work.

    Raises
    ------
    MissingDependency
        Naming the package and the extra that installs it.
    """
    files = list(files)
    if any(f.kind == "parquet" for f in files):
        require("pyarrow.parquet", "parquet", "Parquet")
    if any(compression_of(f.path) == "zstd" for f in files):
        require("zstandard", "zstd", "reading .zst files")


def _check_one_output(files: list[InputFile]) -> None:
    """Refuse inputs of several formats, or text files that would be written under one name
    (dedup writes one output in the input's format)."""
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


def is_paths(data: Any) -> bool:
    """True when ``data`` names files: a ``str``/``os.PathLike``, or a non-empty list or tuple
    of ``os.PathLike`` (a list of ``str`` is a list of texts)."""
    if isinstance(data, (str, os.PathLike)):
        return True
    return (
        isinstance(data, (list, tuple))
        and len(data) > 0
        and all(isinstance(x, os.PathLike) for x in data)
    )


def _no_id_column(id_field: str | None, columns: Any) -> None:
    """A named id column (other than the default ``id``) must exist."""
    if id_field and id_field != DEFAULT_ID_FIELD:
        cols = ", ".join(map(str, columns))
        raise ValueError(f"no id column {id_field!r} (columns: {cols}); pass id_field=None")


def _arrow_chunks(column: Any) -> list[Any]:
    """The arrays of a pyarrow Array or ChunkedArray."""
    return list(column.chunks) if hasattr(column, "chunks") else [column]


def texts_and_ids(data: Any, text_field: str, id_field: str | None) -> tuple[Any, list | None]:
    """Texts (an iterable) and ids (or None: positions) of in-memory input.

    The default id column ``id`` is used when present; any other ``id_field`` must exist.
    """
    if is_dataset(data):
        return dataset_texts_and_ids(data, text_field, id_field)
    mod = type(data).__module__.split(".")[0]
    if mod == "pyarrow":
        if hasattr(data, "column_names"):  # Table / RecordBatch
            if text_field not in data.column_names:
                raise ValueError(
                    f"no column {text_field!r} (columns: {', '.join(data.column_names)})"
                )
            texts = ArrowTexts(_arrow_chunks(data.column(text_field)))
            if id_field in data.column_names:
                return texts, data.column(id_field).to_pylist()
            _no_id_column(id_field, data.column_names)
            return texts, None
        return ArrowTexts(_arrow_chunks(data)), None
    if mod == "pandas":
        if hasattr(data, "columns"):  # DataFrame
            if text_field not in data.columns:
                cols = ", ".join(map(str, data.columns))
                raise ValueError(f"no column {text_field!r} (columns: {cols})")
            if id_field in data.columns:
                return data[text_field].tolist(), data[id_field].tolist()
            _no_id_column(id_field, data.columns)
            return data[text_field].tolist(), data.index.tolist()
        return data.tolist(), data.index.tolist()  # Series
    if isinstance(data, np.ndarray):
        return data.tolist(), None
    if isinstance(data, (str, bytes)):
        raise TypeError("pass a path as str/os.PathLike, or texts as a list of strings")
    return data, None

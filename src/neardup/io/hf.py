"""Hugging Face ``datasets``: a ``Dataset`` or ``DatasetDict`` as documents, kept rows selected back,
and datasets saved with ``save_to_disk`` read and written (``pip install "neardup[hf]"``).

A ``DatasetDict`` is deduplicated across its splits, taken in the dict's order (a document in
``test`` near one in ``train`` is dropped); deduplicate split by split by passing each split.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from typing import Any

import numpy as np

from neardup import config
from neardup._optional import require
from neardup.errors import InputError
from neardup.io.arrow import ArrowTexts
from neardup.io.files import tree_size
from neardup.io.writers import OutputSet

__all__ = [
    "dataset_texts_and_ids",
    "is_dataset",
    "is_saved_dataset",
    "load_saved_dataset",
    "save_dataset",
    "select_rows",
]

_DATASET_TYPES = ("Dataset", "DatasetDict")


def is_dataset(data: Any) -> bool:
    """True for a ``datasets.Dataset`` or ``datasets.DatasetDict`` (without importing
    ``datasets``)."""
    t = type(data)
    return t.__module__.split(".")[0] == "datasets" and t.__name__ in _DATASET_TYPES


def _splits(data: Any) -> list[tuple[str | None, Any]]:
    if type(data).__name__ == "DatasetDict":
        return list(data.items())
    return [(None, data)]


def _check_column(name: str | None, ds: Any, column: str) -> None:
    if column not in ds.column_names:
        where = f"split {name!r} has " if name is not None else ""
        raise ValueError(
            f"{where}no column {column!r} (columns: {', '.join(ds.column_names)}); "
            "choose one with text_field="
        )


def _chunks(parts: list[tuple[str | None, Any]], column: str) -> Iterator[Any]:
    for _, ds in parts:
        table_batches = ds.select_columns([column]).with_format("arrow")
        for batch in table_batches.iter(batch_size=config.BATCH_DOCS):
            yield from batch.column(0).chunks


def dataset_texts_and_ids(
    data: Any, text_field: str, id_field: str | None
) -> tuple[Iterator[Any], list[Any] | None]:
    """Texts (:class:`~neardup.io.arrow.ArrowTexts`, streamed in Arrow batches, never all at
    once) and ids of a Dataset or DatasetDict.

    Ids are the ``id_field`` column when every split has it, else None (positions, counted
    across the splits in order).
    """
    parts = _splits(data)
    for name, ds in parts:
        _check_column(name, ds, text_field)
    ids = None
    if id_field and all(id_field in ds.column_names for _, ds in parts):
        ids = []
        for _, ds in parts:
            ids += ds.select_columns([id_field]).with_format("arrow")[id_field].to_pylist()
    return ArrowTexts(_chunks(parts, text_field)), ids


def select_rows(data: Any, keep: np.ndarray) -> Any:
    """The rows of a Dataset or DatasetDict where ``keep`` (bool, one per row, splits in order)
    is True, as the same type (a DatasetDict keeps every split, possibly empty)."""
    keep = np.asarray(keep, dtype=bool)
    parts = _splits(data)
    total = sum(len(ds) for _, ds in parts)
    if len(keep) != total:
        raise ValueError(f"the mask has {len(keep)} entries for {total} rows; pass the data given")
    out = {}
    start = 0
    for name, ds in parts:
        rows = np.flatnonzero(keep[start : start + len(ds)])
        start += len(ds)
        out[name] = ds.select(rows)
    if out.keys() == {None}:
        return out[None]
    return type(data)(out)


def is_saved_dataset(path: str | os.PathLike) -> bool:
    """True for a directory written by ``Dataset.save_to_disk`` or ``DatasetDict.save_to_disk``."""
    p = os.fspath(path)
    return os.path.isdir(p) and (
        os.path.isfile(os.path.join(p, "dataset_dict.json"))
        or (
            os.path.isfile(os.path.join(p, "state.json"))
            and os.path.isfile(os.path.join(p, "dataset_info.json"))
        )
    )


def load_saved_dataset(path: str | os.PathLike) -> Any:
    """The Dataset or DatasetDict saved at ``path`` (memory-mapped Arrow files)."""
    datasets = require("datasets", "hf", "reading a saved Hugging Face dataset")
    try:
        return datasets.load_from_disk(os.fspath(path))
    except (FileNotFoundError, json.JSONDecodeError, ValueError) as e:
        raise InputError(os.fspath(path), None, f"cannot load the saved dataset: {e}") from None


def save_dataset(data: Any, path: str | os.PathLike, *, outputs: OutputSet | None = None) -> int:
    """Save ``data`` with ``save_to_disk`` under a temporary name beside ``path``, renamed to
    ``path`` when complete; an existing non-empty ``path`` is refused. Returns bytes written.

    With ``outputs`` (where ``path`` is registered as a directory, see
    :meth:`OutputSet.directory`) the dataset is staged there and appears when the caller
    commits, together with the run's other outputs."""
    if outputs is None:
        with OutputSet() as own:
            own.directory(path, "the output dataset")
            size = save_dataset(data, path, outputs=own)
            own.commit()
        return size
    dlog = require("datasets", "hf", "writing a Hugging Face dataset").utils.logging
    was_enabled = dlog.is_progress_bar_enabled()
    with outputs.open_directory(outputs.get(path)) as tmp:
        if was_enabled:  # the command's own --progress policy applies, not datasets' bars
            dlog.disable_progress_bar()
        try:
            data.save_to_disk(tmp)
        finally:
            if was_enabled:
                dlog.enable_progress_bar()
        return tree_size(tmp)

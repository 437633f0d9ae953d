"""Hugging Face datasets: Dataset and DatasetDict in, the same decisions as the texts themselves,
the result's mask selecting the kept rows back; save_to_disk directories through the CLI."""

from __future__ import annotations

import functools
import json
import os

import numpy as np
import pytest
from cli import invoke

import neardup
from neardup.errors import InputError

datasets = pytest.importorskip("datasets")

SAMPLE = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "data", "sample")


@functools.lru_cache(maxsize=1)
def _rows() -> tuple:
    with open(os.path.join(SAMPLE, "corpus.jsonl"), encoding="utf-8") as f:
        return tuple(json.loads(line) for line in f)


@functools.lru_cache(maxsize=1)
def _on_texts():
    return neardup.dedup([r["text"] for r in _rows()])


def _dataset():
    return datasets.Dataset.from_list([dict(r) for r in _rows()])


def test_dataset_same_decisions_as_its_texts_and_filter_selects_kept_rows():
    ds = _dataset()
    r = neardup.dedup(ds, text_field="text")
    ref = _on_texts()
    np.testing.assert_array_equal(r.kept, ref.kept)
    np.testing.assert_array_equal(r.fingerprints, ref.fingerprints)
    assert r.ids == [row["id"] for row in _rows()]  # the id column
    kept = r.filter(ds)
    assert isinstance(kept, datasets.Dataset)
    assert list(kept["id"]) == [row["id"] for row, k in zip(_rows(), ref.kept) if k]
    assert len(kept) == len(ds) - r.n_dropped < len(ds)


def test_fingerprints_as_a_uint64_column():
    ds = _dataset()
    r = neardup.dedup(ds)
    ds = r.filter(ds).add_column("simhash", r.fingerprints[r.kept])
    assert ds.features["simhash"].dtype == "uint64"
    assert ds[0]["simhash"] == neardup.fingerprint(ds[0]["text"])


def test_dataset_dict_across_splits_and_split_by_split():
    ds = _dataset()
    dd = datasets.DatasetDict({"train": ds.select(range(700)), "test": ds.select(range(700, 1200))})
    across = neardup.dedup(dd)
    np.testing.assert_array_equal(across.kept, _on_texts().kept)
    out = across.filter(dd)
    assert isinstance(out, datasets.DatasetDict) and list(out) == ["train", "test"]
    kept_ids = [row["id"] for row, k in zip(_rows(), _on_texts().kept) if k]
    assert list(out["train"]["id"]) + list(out["test"]["id"]) == kept_ids
    each = datasets.DatasetDict({k: neardup.dedup(v).filter(v) for k, v in dd.items()})
    assert len(each["train"]) == len(out["train"])  # train comes first either way
    assert len(each["test"]) >= len(out["test"])  # alone, test keeps what train had


def test_missing_column_bad_texts_and_mask_of_another_length():
    ds = datasets.Dataset.from_dict({"body": ["a b c d", None, "a b c d"], "id": [5, 6, 7]})
    with pytest.raises(ValueError, match=r"no column 'text' \(columns: body, id\)"):
        neardup.dedup(ds)
    r = neardup.dedup(ds, text_field="body", skip_bad=True)
    assert r.skipped == 1 and r.ids == [5, 7]
    assert list(r.filter(ds)["id"]) == [5]  # the bad row is not kept
    with pytest.raises(ValueError, match="3 rows"):
        neardup.dedup(["x y z"]).filter(ds)


def test_filter_other_inputs():
    pd = pytest.importorskip("pandas")
    pa = pytest.importorskip("pyarrow")
    texts = ["the cat sat on the mat today", "The cat sat on the mat today!", "dogs bark"]
    r = neardup.dedup(texts)
    assert r.filter(texts) == [texts[0], texts[2]]
    df = pd.DataFrame({"text": texts})
    assert neardup.dedup(df).filter(df)["text"].tolist() == [texts[0], texts[2]]
    t = pa.table({"text": texts})
    assert neardup.dedup(t).filter(t).column("text").to_pylist() == [texts[0], texts[2]]
    with pytest.raises(ValueError, match="file input"):
        neardup.dedup(os.path.join(SAMPLE, "corpus.jsonl")).filter(texts)


def test_cli_reads_and_writes_saved_datasets(tmp_path):
    ds = _dataset()
    ds.save_to_disk(str(tmp_path / "ds"))
    out = tmp_path / "kept"
    clusters = tmp_path / "clusters.jsonl"
    r = invoke("neardup", "dedup", str(tmp_path / "ds"), "-o", str(out),
               "--clusters", str(clusters), "--json-summary", "-", "-q", text=True)  # fmt: skip
    assert r.returncode == 0, r.stderr
    assert r.stderr == ""  # datasets' own bars are silenced too
    got = datasets.load_from_disk(str(out))
    ref = _on_texts()
    assert list(got["id"]) == [row["id"] for row, k in zip(_rows(), ref.kept) if k]
    assert json.loads(r.stdout)["dropped"] == ref.n_dropped
    first = json.loads(clusters.read_text().splitlines()[0])
    assert first["kept"].startswith("doc-")  # ids from the id column
    again = invoke("neardup", "dedup", str(tmp_path / "ds"), "-o", str(out), text=True)
    assert again.returncode == 2 and "not empty" in again.stderr


def test_cli_saved_dataset_dict(tmp_path):
    ds = _dataset()
    dd = datasets.DatasetDict({"a": ds.select(range(600)), "b": ds.select(range(600, 1200))})
    dd.save_to_disk(str(tmp_path / "dd"))
    r = invoke("neardup", "dedup", str(tmp_path / "dd"), "-o", str(tmp_path / "o"), "-q")
    assert r.returncode == 0, r.stderr
    got = datasets.load_from_disk(str(tmp_path / "o"))
    assert sum(map(len, got.values())) == int(_on_texts().kept.sum())


def test_python_api_points_at_load_from_disk(tmp_path):
    _dataset().save_to_disk(str(tmp_path / "ds"))
    with pytest.raises(InputError, match="load_from_disk"):
        neardup.dedup(str(tmp_path / "ds"))


@pytest.mark.slow
def test_report_command_reads_a_saved_dataset(tmp_path):
    pytest.importorskip("matplotlib")
    _dataset().save_to_disk(str(tmp_path / "ds"))
    clusters = tmp_path / "c.jsonl"
    r = invoke("neardup", "dedup", str(tmp_path / "ds"), "-o", str(tmp_path / "o"),
               "--clusters", str(clusters), "-q")  # fmt: skip
    assert r.returncode == 0
    r = invoke("neardup", "report", "--clusters", str(clusters), str(tmp_path / "ds"), "-o",
               str(tmp_path / "r.html"), text=True)  # fmt: skip
    assert r.returncode == 0, r.stderr
    assert "130 clusters from 1,200 documents" in r.stderr and "not found" not in r.stderr
    assert "was not found in the input" not in (tmp_path / "r.html").read_text()

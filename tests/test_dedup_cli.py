"""``neardup dedup``, run in process."""

from __future__ import annotations

import json
import os

import naive
import pytest
from cli import Result, invoke

SAMPLE = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "data", "sample")

BASE = (
    "the quick brown fox jumps over the lazy dog while the farmer counts his sheep in the rain "
    "and the miller grinds the wheat that the baker will turn into bread for the whole village "
    "before the market opens on saturday morning near the old stone bridge by the river"
)
ROWS = [
    {"id": "a", "text": BASE},
    {"id": "b", "text": "compilers, caches and the price of coffee beans in a small town"},
    {"id": "c", "text": BASE.replace("farmer", "farmer slowly")},
    {"id": "d", "text": BASE.upper() + "!"},
]


def run(*args: str) -> Result:
    return invoke("neardup", "dedup", *args, text=True)


def write_jsonl(path, rows) -> list[str]:
    lines = [r if isinstance(r, str) else json.dumps(r) for r in rows]
    path.write_text("".join(x + "\n" for x in lines))
    return lines


def test_jsonl_outputs_and_summary(tmp_path):
    src = tmp_path / "docs.jsonl"
    lines = write_jsonl(src, ROWS)
    out, cl, drop, js = (tmp_path / n for n in ("kept.jsonl", "c.jsonl", "drop.txt", "s.json"))
    r = run(str(src), "-o", str(out), "--clusters", str(cl), "--drop-list", str(drop),
            "--json-summary", str(js))  # fmt: skip
    assert r.returncode == 0, r.stderr
    assert out.read_text() == lines[0] + "\n" + lines[1] + "\n"
    assert drop.read_text() == "c\nd\n"
    (cluster,) = [json.loads(x) for x in cl.read_text().splitlines()]
    assert cluster["kept"] == "a" and cluster["members"] == ["a", "c", "d"]
    assert cluster["size"] == 3 and cluster["distances"][0] == 0 and cluster["distances"][2] == 0
    assert 0 < cluster["distances"][1] <= 6
    s = json.loads(js.read_text())
    assert (s["documents"], s["clusters"], s["dropped"], s["kept"]) == (4, 1, 2, 2)
    assert s["bytes_saved"] == src.stat().st_size - out.stat().st_size
    assert "documents read   4" in r.stderr and "dropped          2 (50.0%)" in r.stderr
    r = run(str(src), "-o", str(out), "--keep", "longest", "-q", "--drop-list", str(drop))
    assert r.returncode == 0 and r.stderr == "" and r.stdout == ""
    assert drop.read_text() == "a\nd\n"
    r = run(str(src), "-o", "-", "-d", "0", "-q")
    assert r.stdout == lines[0] + "\n" + lines[1] + "\n" + lines[2] + "\n"


def test_text_field_and_sample(tmp_path):
    src = tmp_path / "docs.jsonl"
    write_jsonl(src, [{"key": r["id"], "body": r["text"]} for r in ROWS])
    out = tmp_path / "kept.jsonl"
    r = run(str(src), "-o", str(out), "--text-field", "body", "--id-field", "key",
            "--json-summary", "-", "-q")  # fmt: skip
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["dropped"] == 2
    r = run(os.path.join(SAMPLE, "corpus.jsonl"), "-o", str(out))
    assert r.returncode == 0, r.stderr
    assert "documents read   1,200" in r.stderr and "clusters" in r.stderr
    assert f"written          {out}\n" in r.stderr  # every command names what it wrote


def test_bad_input_errors_and_skip_bad(tmp_path):
    src = tmp_path / "docs.jsonl"
    write_jsonl(src, [ROWS[0], "{oops", {"id": "x", "text": None}, ROWS[0], ROWS[1]])
    out = tmp_path / "kept.jsonl"
    r = run(str(src), "-o", str(out))
    assert r.returncode == 2 and "Traceback" not in r.stderr
    assert f"{src}:2: not valid JSON" in r.stderr
    assert not out.exists() and os.listdir(tmp_path) == ["docs.jsonl"]
    r = run(str(src), "-o", str(out), "--skip-bad")
    assert r.returncode == 0, r.stderr
    assert f"{src}:3: field 'text' is null" in r.stderr
    assert f"{src}:4: duplicate id 'a' (first at {src}:1)" in r.stderr
    assert "(3 bad records skipped)" in r.stderr
    assert [json.loads(x)["id"] for x in out.read_text().splitlines()] == ["a", "b"]
    r = run(str(tmp_path / "nope.jsonl"), "-o", str(out))
    assert r.returncode == 2 and "nope.jsonl: no such file" in r.stderr
    r = run("-", "-o", str(out))
    assert r.returncode == 2 and "save stdin to a file" in r.stderr and "/dev/stdin" in r.stderr
    r = run(str(src), "-o", str(out), "-d", "6", "--blocks", "5")
    assert r.returncode == 2 and "blocks must be > distance" in r.stderr


def test_parquet_and_text_directory(tmp_path):
    pa = pytest.importorskip("pyarrow")
    pq = pytest.importorskip("pyarrow.parquet")
    src = tmp_path / "docs.parquet"
    pq.write_table(
        pa.table({"id": [r["id"] for r in ROWS], "text": [r["text"] for r in ROWS]}), src
    )
    out = tmp_path / "kept.parquet"
    r = run(str(src), "-o", str(out), "-q")
    assert r.returncode == 0, r.stderr
    assert pq.read_table(out).column("id").to_pylist() == ["a", "b"]
    d = tmp_path / "texts"
    d.mkdir()
    for row in ROWS:
        (d / f"{row['id']}.txt").write_text(row["text"])
    outdir = tmp_path / "kept"
    r = run(str(d), "-o", str(outdir), "-q")
    assert r.returncode == 0, r.stderr
    assert sorted(os.listdir(outdir)) == ["a.txt", "b.txt"]
    r = run(str(d), "-o", str(outdir))
    assert r.returncode == 2 and "not empty" in r.stderr


def test_verified_clusters_threshold_and_no_verify(tmp_path):
    src = tmp_path / "docs.jsonl"
    write_jsonl(src, ROWS + [{"id": "e", "text": ""}, {"id": "f", "text": "..."}])
    out, cl, js = tmp_path / "kept.jsonl", tmp_path / "c.jsonl", tmp_path / "s.json"
    r = run(str(src), "-o", str(out), "--clusters", str(cl), "--json-summary", str(js))
    assert r.returncode == 0, r.stderr
    (cluster,) = [json.loads(x) for x in cl.read_text().splitlines()]
    assert cluster["members"] == ["a", "c", "d"] and cluster["kept"] == "a"
    jac = cluster["jaccards"]
    assert jac[0] == 1.0 and jac[2] == 1.0 and 0.8 <= jac[1] < 1.0
    assert len(cluster["distances"]) == 3
    s = json.loads(js.read_text())
    assert s["verified"] and s["threshold"] == 0.8 and s["no_shingles"] == 2
    assert s["temp_bytes"] > 0 and s["dropped"] == 2
    assert "verified         every drop Jaccard >= 0.8" in r.stderr
    assert "warning: 2 of 6 documents (33.3%) have no shingles" in r.stderr
    assert [json.loads(x)["id"] for x in out.read_text().splitlines()] == ["a", "b", "e", "f"]
    # above the edited copy's Jaccard it is kept
    r = run(str(src), "-o", str(out), "-q", "--threshold", str(min(1.0, jac[1] + 0.01)))
    assert [json.loads(x)["id"] for x in out.read_text().splitlines()] == ["a", "b", "c", "e", "f"]
    r = run(str(src), "-o", str(out), "--no-verify", "--clusters", str(cl), "--json-summary", "-")
    assert r.returncode == 0, r.stderr
    s = json.loads(r.stdout)
    assert not s["verified"] and "threshold" not in s and s["dropped"] == 3  # e and f too
    assert s["temp_bytes"] > 0  # the work directory of the stages, as a verified run reports it
    assert all("jaccards" not in json.loads(x) for x in cl.read_text().splitlines())
    for bad in ("0", "1.5"):
        r = run(str(src), "-o", str(out), "--threshold", bad)
        assert r.returncode == 2 and "--threshold" in r.stderr
    r = run(str(src), "-o", str(out), "--blocks", "10")  # 0.8 -> 10 bits
    assert r.returncode == 2 and "distance=10" in r.stderr
    r = run("--help")
    assert "not Jaccard-verified" in " ".join(r.stdout.split())
    assert "--no-verify" in r.stdout and "--threshold" in r.stdout


def test_no_verify_keeps_what_only_a_chain_links_to_a_kept_document(tmp_path):
    """60 near-copies in a chain (each a word more replaced than the one before): the first
    and the last are about 14 bits apart, linked only through the others. ``--no-verify``
    drops a document only for a kept one within ``--distance`` bits, so some of the chain is
    kept, and every cluster's members are within 6 bits of its kept document."""
    docs = naive.text_chain(60, seed=2)
    src = tmp_path / "chain.jsonl"
    write_jsonl(src, [{"id": f"c{k}", "text": t} for k, t in enumerate(docs)])
    out, cl = tmp_path / "kept.jsonl", tmp_path / "clusters.jsonl"
    r = run(str(src), "-o", str(out), "--no-verify", "--clusters", str(cl), "--json-summary", "-")
    assert r.returncode == 0, r.stderr
    clusters = [json.loads(x) for x in cl.read_text().splitlines()]
    kept = [json.loads(x)["id"] for x in out.read_text().splitlines()]
    assert kept[0] == "c0" and kept[-1] != "c0" and len(kept) == json.loads(r.stdout)["kept"]
    assert sorted(c["kept"] for c in clusters) == sorted(kept)
    assert all(max(c["distances"]) <= 6 for c in clusters)
    assert sum(c["size"] for c in clusters) == 60

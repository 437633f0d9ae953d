"""A staged dedup whose work directory (``--work-dir s3://...``) and output of parts
(``-o s3://.../kept/``) are on object storage: a real S3-compatible server (moto in server mode,
on a free localhost port) reached through ``AWS_ENDPOINT_URL`` and credentials in the
environment, as a user's store is. The kept bytes are a local run's; a resumed run trusts only
the tasks whose completion record is there with the sizes it recorded; a damaged object is one
line naming it; the credentials are never printed."""

from __future__ import annotations

import json
import logging
import os
import tempfile
from pathlib import Path

import naive
import pytest
from cli import invoke
from servers import free_port
from test_staged import _write

pytest.importorskip("s3fs", reason="s3fs is not installed (pip install 'neardup[s3]')")
moto_server = pytest.importorskip(
    "moto.server", reason="moto's server is not installed (pip install 'moto[server]')"
)

#: a secret no message may show
SECRET = "nd-secret-7Hq2xZ"
#: 1,200 documents in shards of 300; a few ids repeated across shards (skipped as bad)
N, SHARD = 1200, "300"


@pytest.fixture(scope="module")
def s3():
    """The server's s3fs filesystem, with ``AWS_ENDPOINT_URL`` and credentials set for the
    module (what neardup and its subprocesses, Dask's workers, read)."""
    import s3fs

    port = free_port()
    logging.getLogger("werkzeug").setLevel(logging.ERROR)  # no line per request
    server = moto_server.ThreadedMotoServer(ip_address="127.0.0.1", port=port, verbose=False)
    server.start()
    env = {"AWS_ENDPOINT_URL": f"http://127.0.0.1:{port}", "AWS_ACCESS_KEY_ID": "nd-key",
           "AWS_SECRET_ACCESS_KEY": SECRET, "AWS_DEFAULT_REGION": "us-east-1"}  # fmt: skip
    with pytest.MonkeyPatch.context() as mp:
        for k, v in env.items():
            mp.setenv(k, v)
        s3fs.S3FileSystem.clear_instance_cache()
        fs = s3fs.S3FileSystem(use_listings_cache=False)
        fs.mkdir("ndtest")
        try:
            yield fs
        finally:
            s3fs.S3FileSystem.clear_instance_cache()
            server.stop()


@pytest.fixture(scope="module")
def corpus(tmp_path_factory) -> Path:
    where = tmp_path_factory.mktemp("corpus")
    docs = naive.text_families(N, seed=11, vocab=200, words=(20, 40))
    ids = [f"d{i}" for i in range(N)]
    for i in (350, 700, 1100):  # repeated ids: the dedup-ids stage moves spills over the scan's
        ids[i] = ids[i - 340]
    _write(where / "in.jsonl", docs, ids)
    return where / "in.jsonl"


def _args(corpus: Path, where: Path, tag: str, threads: bool = True) -> list[str]:
    return [str(corpus), "--shard-docs", SHARD, "--skip-bad", "-q",
            *(["--threads", "2"] if threads else []),
            "--clusters", str(where / f"{tag}.clusters"),
            "--drop-list", str(where / f"{tag}.drop")]  # fmt: skip


@pytest.fixture(scope="module")
def local(corpus, tmp_path_factory) -> Path:
    """The outputs of the same run with a work directory on the local disk."""
    where = tmp_path_factory.mktemp("local")
    r = invoke("neardup", "dedup", *_args(corpus, where, "a"), "-o", str(where / "a.jsonl"),
               "--work-dir", str(where / "work"), text=True)  # fmt: skip
    assert r.returncode == 0, r.stderr
    return where


def _same_outputs(local: Path, where: Path, tag: str) -> None:
    for ext in ("jsonl", "clusters", "drop"):
        assert (where / f"{tag}.{ext}").read_bytes() == (local / f"a.{ext}").read_bytes(), ext


def _copies_left() -> list[str]:
    """This process's local copies of object storage's files still in the temporary directory."""
    mine = ".neardup-copies.neardup-"
    return [n for n in os.listdir(tempfile.gettempdir())
            if n.startswith(mine) and f"-{os.getpid()}-" in n]  # fmt: skip


@pytest.mark.slow
def test_a_work_dir_on_object_storage_gives_a_local_runs_bytes(s3, corpus, local, tmp_path):
    r = invoke("neardup", "dedup", *_args(corpus, tmp_path, "b"), "-o", str(tmp_path / "b.jsonl"),
               "--work-dir", "s3://ndtest/w1", text=True)  # fmt: skip
    assert r.returncode == 0, r.stderr
    _same_outputs(local, tmp_path, "b")
    names = s3.find("ndtest/w1")
    assert "ndtest/w1/manifest.json" in names and "ndtest/w1/write/3/done.json" in names
    assert (
        "ndtest/w1/dedup-ids/1/done.json" in names
    )  # the repeated ids' spills moved over the scan's
    assert not [n for n in names if ".tmp" in n]  # nothing renamed, nothing half written
    assert not _copies_left()  # the local copies of the run's files are removed at its end
    # each task's record names its files with the sizes the listing shows
    record = json.loads(s3.cat("ndtest/w1/scan/2/done.json"))
    for name, (size, _) in record["files"].items():
        assert s3.size(f"ndtest/w1/scan/2/{name}") == size


@pytest.mark.slow
def test_a_resumed_run_reruns_only_the_task_whose_record_is_gone(s3, corpus, local, tmp_path):
    args = [*_args(corpus, tmp_path, "c"), "-o", str(tmp_path / "c.jsonl"), "--work-dir",
            "s3://ndtest/w2", "--json-summary", str(tmp_path / "s.json")]  # fmt: skip
    assert invoke("neardup", "dedup", *args, text=True).returncode == 0
    s3.rm("ndtest/w2/decide/0/done.json")
    r = invoke("neardup", "dedup", *args, text=True)
    assert r.returncode == 0, r.stderr
    _same_outputs(local, tmp_path, "c")
    stages = json.loads((tmp_path / "s.json").read_text())["stages"]
    rerun = {k: v["tasks"] - v["reused"] for k, v in stages.items() if v["tasks"] != v["reused"]}
    assert rerun == {"decide": 1}, stages
    s3.pipe("ndtest/w2/notes.txt", b"not neardup's")
    r = invoke("neardup", "dedup", *args, "--clean-work-dir", text=True)  # every task reused
    assert r.returncode == 0, r.stderr
    assert s3.find("ndtest/w2") == ["ndtest/w2/notes.txt"]  # only what the run wrote removed


@pytest.mark.slow
def test_a_damaged_object_is_named_in_one_line(s3, corpus, local, tmp_path):
    args = [*_args(corpus, tmp_path, "d"), "-o", str(tmp_path / "d.jsonl"), "--work-dir",
            "s3://ndtest/w3"]  # fmt: skip
    assert invoke("neardup", "dedup", *args, text=True).returncode == 0
    kept = s3.cat("ndtest/w3/write/1/kept.bin")
    s3.pipe("ndtest/w3/write/1/kept.bin", kept[: len(kept) // 2])  # truncated
    r = invoke("neardup", "dedup", *args, text=True)
    assert r.returncode == 2 and r.stderr.count("\n") == 1, r.stderr
    assert (f"s3://ndtest/w3/write/1/kept.bin: cannot be read back ({len(kept) // 2} bytes where "
            f"its task wrote {len(kept)}): the work directory is damaged") in r.stderr  # fmt: skip
    s3.pipe("ndtest/w3/write/1/kept.bin", kept)
    s3.rm("ndtest/w3/scan/0/fp.npy")  # missing
    r = invoke("neardup", "dedup", *args, text=True)
    assert r.returncode == 2 and r.stderr.count("\n") == 1, r.stderr
    assert "s3://ndtest/w3/scan/0/fp.npy: cannot be read back (missing)" in r.stderr
    assert SECRET not in r.stderr and "nd-key" not in r.stderr


@pytest.mark.slow
def test_kept_parts_go_to_object_storage_at_the_end(s3, corpus, local, tmp_path):
    parts = tmp_path / "parts"
    r = invoke("neardup", "dedup", *_args(corpus, tmp_path, "e"), "-o", f"{parts}/", text=True)
    assert r.returncode == 0, r.stderr
    want = {p.name: p.read_bytes() for p in sorted(parts.iterdir())}
    assert len(want) == 4
    for out, work in (
        ("s3://ndtest/o1/", []),
        ("s3://ndtest/o2/", ["--work-dir", "s3://ndtest/w4"]),
    ):
        r = invoke("neardup", "dedup", *_args(corpus, tmp_path, "e"), "-o", out, *work, text=True)
        assert r.returncode == 0, r.stderr
        prefix = out[len("s3://") :]
        got = {n.rsplit("/", 1)[1]: s3.cat(n) for n in s3.find(prefix)}
        assert got == want, out
    # a prefix that holds anything is refused before any work, as a local directory is
    r = invoke(
        "neardup", "dedup", *_args(corpus, tmp_path, "f"), "-o", "s3://ndtest/o1/", text=True
    )
    assert r.returncode == 2 and r.stderr.count("\n") == 1, r.stderr
    assert "s3://ndtest/o1/: output directory exists and is not empty; remove it first" in r.stderr
    assert not (tmp_path / "f.clusters").exists()


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["-o", "s3://ndtest/kept.jsonl"], "s3://ndtest/kept.jsonl: the output cannot go to object "
         "storage: only the records (-o, --removed) of JSONL or line inputs can, as a directory"),
        (["-o", "s3://missing-bucket/kept/"], "s3://missing-bucket/kept/: bucket missing-bucket "
         "does not exist; create it first"),
        (["--work-dir", "s3://missing-bucket/w"], "s3://missing-bucket/w: bucket missing-bucket "
         "does not exist; create it first"),
        (["-o", "s3://ndtest/w5/kept/", "--work-dir", "s3://ndtest/w5"], "s3://ndtest/w5/kept/: the output "
         "directory would overwrite an input (s3://ndtest/w5)"),
    ],
)  # fmt: skip
def test_what_object_storage_cannot_hold_is_one_line(s3, corpus, tmp_path, args, message):
    base = [str(corpus), "--shard-docs", SHARD, "--skip-bad", "-q"]
    if "-o" not in args:
        base += ["-o", str(tmp_path / "g.jsonl")]
    r = invoke("neardup", "dedup", *base, *args, text=True)
    assert r.returncode == 2 and r.stderr.count("\n") == 1, r.stderr
    assert message in r.stderr
    assert not s3.exists("ndtest/w5/manifest.json")


@pytest.mark.slow
def test_dask_workers_share_a_work_dir_on_object_storage(s3, corpus, local, tmp_path):
    """Two Dask worker processes (a LocalCluster) read and write the same prefix."""
    pytest.importorskip("distributed")
    r = invoke("neardup", "dedup", *_args(corpus, tmp_path, "h", threads=False), "-o",
               str(tmp_path / "h.jsonl"),
               "--work-dir", "s3://ndtest/w6", "--workers", "2", text=True)  # fmt: skip
    assert r.returncode == 0, r.stderr
    _same_outputs(local, tmp_path, "h")
    assert s3.exists("ndtest/w6/write/3/done.json")


@pytest.mark.slow
def test_ray_workers_share_a_work_dir_on_object_storage(s3, corpus, local, tmp_path):
    """A local Ray's worker processes read and write the same prefix, and put the parts."""
    pytest.importorskip("ray")
    r = invoke("neardup", "dedup", *_args(corpus, tmp_path, "k", threads=False), "-o",
               "s3://ndtest/o3/", "--work-dir", "s3://ndtest/w7", "--ray", "local", "--workers",
               "2", text=True)  # fmt: skip
    assert r.returncode == 0, r.stderr
    for ext in ("clusters", "drop"):
        assert (tmp_path / f"k.{ext}").read_bytes() == (local / f"a.{ext}").read_bytes(), ext
    parts = b"".join(s3.cat(n) for n in sorted(s3.find("ndtest/o3")))
    assert parts == (local / "a.jsonl").read_bytes()

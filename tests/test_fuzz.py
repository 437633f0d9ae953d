"""Fuzz every console script and the public functions with hostile input.

Console scripts (in process) get bad bytes, encodings, numbers, JSON shapes and Parquet schemas.
Whatever the input, a command either succeeds or exits with status 2 and one line on stderr
without a traceback; a failed command leaves its directory exactly as it was (no output, no
temporary file), and no command ever changes an input. Public functions raise ``ValueError`` or
``TypeError`` with a one-line message, nothing else.
"""

from __future__ import annotations

import json
import math
import os
import shutil
import tempfile
from typing import Any

import numpy as np
import pytest
from cli import invoke
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import neardup
from neardup.index import Index

#: Examples per test (a few hundred in all); NEARDUP_FUZZ_EXAMPLES=1000 for a long hunt.
N = int(os.environ.get("NEARDUP_FUZZ_EXAMPLES", "30"))
FUZZ = settings(
    max_examples=N,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)


@pytest.fixture(scope="module")
def scratch(tmp_path_factory):
    return str(tmp_path_factory.mktemp("fuzz"))


def _snapshot(d: str) -> dict[str, bytes | None]:
    out: dict[str, bytes | None] = {}
    for root, dirs, files in os.walk(d):
        for name in dirs + files:
            p = os.path.join(root, name)
            out[os.path.relpath(p, d)] = None if os.path.isdir(p) else open(p, "rb").read()
    return out


def check_command(workdir: str, tool: str, *args: str, inputs: tuple[str, ...] = ()) -> int:
    """Run a console script and check what it promises; return its exit status."""
    before = _snapshot(workdir)
    r = invoke(tool, *args, text=False)
    err = r.stderr.decode("utf-8", "replace")
    after = _snapshot(workdir)
    assert "Traceback" not in err, err
    if r.returncode != 0:
        assert r.returncode == 2, err
        assert err.count("\n") == 1 and err.split(": error: ", 1)[1].strip(), err
        assert after == before, err  # no output, no temporary file, inputs untouched
    else:
        for p in inputs:
            rel = os.path.relpath(p, workdir)
            assert after.get(rel) == before.get(rel), f"{rel} changed"
        assert not [p for p in after if os.path.basename(p).endswith(".tmp")], after.keys()
    return r.returncode


# ------------------------------------------------------------------ decimal fingerprint files
TOKENS = st.one_of(
    st.integers(0, 2**64 - 1).map(str),
    st.integers(-(2**70), 2**70).map(str),
    st.sampled_from(
        [
            "",
            " 7 ",
            "\t8",
            "+5",
            "0x1f",
            "1e5",
            "1.5",
            "١٢",
            "18446744073709551616",
            "0" * 40 + "1",
            "9" * 30,
            "nan",
            "-0",
            "\x00",
            "\ufeff12",
        ]
    ),  # fmt: skip
    st.text(max_size=8),
)


@st.composite
def decimal_files(draw) -> bytes:
    lines = draw(st.lists(TOKENS, max_size=12))
    data = draw(st.sampled_from(["\n", "\r\n"])).join(lines).encode("utf-8", "surrogatepass")
    if draw(st.booleans()):
        data += draw(st.binary(max_size=8))
    return data


@pytest.mark.slow
@FUZZ
@given(
    data=decimal_files(),
    command=st.sampled_from(
        [
            ("simhash-find-all", "-i", "{f}", "-o", "{o}"),
            ("simhash-find-clusters", "-i", "{f}", "-o", "{o}", "--singletons"),
            ("neardup", "find-all", "{f}", "-o", "{o}"),
            ("neardup", "clusters", "{f}", "-o", "{o}"),
            ("neardup", "index", "add", "{ix}", "--fingerprints", "{f}"),
            ("neardup", "index", "query", "{ix}", "--fingerprints", "{f}", "-o", "{o}"),
        ]
    ),
    distance=st.integers(-1, 6),
)
def test_decimal_inputs(scratch, data, command, distance):
    with tempfile.TemporaryDirectory(dir=scratch) as d:
        f = os.path.join(d, "fps.txt")
        with open(f, "wb") as fh:
            fh.write(data)
        Index.create(os.path.join(d, "ix"), distance=3).close()
        args = [a.format(f=f, o=os.path.join(d, "out.json"), ix=os.path.join(d, "ix"))
                for a in command]  # fmt: skip
        if "query" not in args and "add" not in args:
            args += ["-d", str(distance)]
        check_command(d, args[0], *args[1:], "-q", inputs=(f,))


# ------------------------------------------------------------------ JSONL documents
JSON_SCALARS = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-(2**70), 2**70),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=12),
)
JSON_VALUES = st.recursive(
    JSON_SCALARS,
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=4), inner, max_size=3)
    ),  # fmt: skip
    max_leaves=8,
)
WORDS = st.lists(st.sampled_from(["the", "fox", "river", "bank", "jumps", "dog", "x"]),
                 max_size=12).map(" ".join)  # fmt: skip


@st.composite
def jsonl_lines(draw) -> bytes:
    kind = draw(st.sampled_from(["record", "record", "record", "bytes", "deep", "number", "odd"]))
    if kind == "record":  # a record, its text and id of any JSON shape
        obj = draw(st.dictionaries(st.sampled_from(["a", "b", "url"]), JSON_VALUES, max_size=2))
        obj["text"] = draw(st.one_of(WORDS, WORDS, JSON_VALUES))
        if draw(st.booleans()):
            obj["id"] = draw(st.one_of(st.integers(-(2**70), 2**70), st.text(max_size=6),
                                       JSON_VALUES))  # fmt: skip
        return json.dumps(obj, ensure_ascii=draw(st.booleans())).encode("utf-8", "surrogatepass")
    if kind == "bytes":
        return draw(st.binary(max_size=20))
    if kind == "deep":  # absurd nesting: past the bound, and past Python's recursion limit
        depth = draw(st.sampled_from([257, 5000]))
        return b'{"text": "deep", "x": ' + b"[" * depth + b"]" * depth + b"}"
    if kind == "number":
        return b'{"text": "big", "n": ' + b"7" * draw(st.sampled_from([4000, 5000])) + b"}"
    return draw(st.sampled_from([b'{"text": "a"', b"[]", b"null", b'{"text": "\\ud800"}',
                                 b'{"text": "a", "id": NaN}', b'{"text": "a", "id": "\\udc00"}',
                                 b"\xef\xbb\xbf{}", b""]))  # fmt: skip


@FUZZ
@given(
    lines=st.lists(jsonl_lines(), max_size=6),
    command=st.sampled_from(
        [
            ("neardup", "fingerprint", "{f}", "-o", "{d}/o.jsonl"),
            ("neardup", "fingerprint", "{f}", "-o", "{d}/o.txt", "--id-field", "url"),
            (
                "neardup",
                "dedup",
                "{f}",
                "-o",
                "{d}/k.jsonl",
                "--clusters",
                "{d}/c.jsonl",
                "--drop-list",
                "{d}/drop.txt",
                "--json-summary",
                "{d}/s.json",
            ),
            ("neardup", "dedup", "{f}", "-o", "{d}/k.jsonl", "--id-field", "url", "-d", "3"),
            ("neardup", "index", "add", "{ix}", "{f}"),
            ("neardup", "index", "query", "{ix}", "{f}", "-o", "{d}/m.jsonl"),
        ]
    ),  # fmt: skip
    skip_bad=st.booleans(),
)
@pytest.mark.slow
def test_jsonl_inputs(scratch, lines, command, skip_bad):
    with tempfile.TemporaryDirectory(dir=scratch) as d:
        f = os.path.join(d, "in.jsonl")
        with open(f, "wb") as fh:
            fh.write(b"\n".join(lines) + b"\n")
        ix = os.path.join(d, "ix")
        with Index.create(ix, distance=6) as w:
            w.add([12345, 2**64 - 1], ids=["x", "y"])
        args = [a.format(f=f, d=d, ix=ix) for a in command] + ["-q"]
        if skip_bad:
            args.append("--skip-bad")
        check_command(d, args[0], *args[1:], inputs=(f,))


# ------------------------------------------------------------------ text files
@FUZZ
@given(
    files=st.lists(st.binary(max_size=40), min_size=1, max_size=4),
    lines=st.booleans(),
    skip_bad=st.booleans(),
    fingerprint=st.booleans(),
)
def test_text_inputs(scratch, files, lines, skip_bad, fingerprint):
    with tempfile.TemporaryDirectory(dir=scratch) as d:
        pages = os.path.join(d, "pages")
        os.mkdir(pages)
        for k, data in enumerate(files):
            with open(os.path.join(pages, f"p{k}.txt"), "wb") as fh:
                fh.write(data)
        if fingerprint:
            args = ["fingerprint", pages + "/p0.txt", os.path.join(pages, "p1.txt"), "-o",
                    os.path.join(d, "o.txt")]  # fmt: skip
        else:
            args = ["dedup", pages, "-o", os.path.join(d, "kept")]
        args += (["--lines"] if lines else []) + (["--skip-bad"] if skip_bad else []) + ["-q"]
        inputs = tuple(os.path.join(pages, n) for n in os.listdir(pages))
        check_command(d, "neardup", *args, inputs=inputs)


# ------------------------------------------------------------------ compressed streams
def _compressors() -> dict[str, Any]:
    import bz2
    import gzip
    import lzma

    out: dict[str, Any] = {
        ".gz": lambda b: gzip.compress(b, mtime=0),
        ".bz2": bz2.compress,
        ".xz": lzma.compress,
    }
    try:
        import zstandard
    except ImportError:
        return out
    out[".zst"] = zstandard.ZstdCompressor(write_checksum=True).compress
    return out


@FUZZ
@given(
    parts=st.lists(st.integers(0, 4), min_size=1, max_size=3),
    suffix=st.sampled_from(sorted(_compressors())),
    damage=st.sampled_from(["cut", "flip", "garbage", "nul", "none"]),
    boundary=st.integers(0, 3),
    shift=st.integers(-3, 3),
)
def test_compressed_streams_damaged_at_a_boundary(scratch, parts, suffix, damage, boundary, shift):
    """Concatenated streams, cut short, damaged, padded or followed by garbage near a stream
    boundary: either every document of the whole streams read is fingerprinted (a cut exactly
    at a boundary, NUL padding, a byte no check covers), or exit status 2 in one line."""
    compress = _compressors()[suffix]
    streams, counts = [], [0]
    for k, n in enumerate(parts):
        docs = [json.dumps({"id": f"{k}-{i}", "text": f"part {k} doc {i}"}) for i in range(n)]
        streams.append(compress("".join(d + "\n" for d in docs).encode()))
        counts.append(counts[-1] + n)
    data = b"".join(streams)
    at = min(max(sum(map(len, streams[: boundary % (len(streams) + 1)])) + shift, 0), len(data))
    if damage == "cut":
        data = data[:at]
    elif damage == "flip" and at < len(data):
        data = data[:at] + bytes([data[at] ^ 0xFF]) + data[at + 1 :]
    elif damage in ("garbage", "nul"):
        data = data[:at] + (b"\xfe\x01garbage" if damage == "garbage" else b"\0" * 4) + data[at:]
    with tempfile.TemporaryDirectory(dir=scratch) as d:
        f = os.path.join(d, "in.jsonl" + suffix)
        with open(f, "wb") as fh:
            fh.write(data)
        out = os.path.join(d, "o.txt")
        if check_command(d, "neardup", "fingerprint", f, "-o", out, "-q", inputs=(f,)) != 0:
            return
        with open(out) as fh:
            got = len(fh.read().split())
        assert got in counts if damage == "cut" else got == counts[-1], (got, counts)


# ------------------------------------------------------------------ Parquet schemas
@st.composite
def parquet_tables(draw):
    pa = pytest.importorskip("pyarrow")
    n = draw(st.integers(0, 5))
    texts = draw(st.lists(st.one_of(WORDS, st.none()), min_size=n, max_size=n))
    kind = draw(st.sampled_from(["string", "large_string", "binary", "int", "list", "null"]))
    if kind == "int":
        text_col = pa.array(draw(st.lists(st.integers(0, 9), min_size=n, max_size=n)))
    elif kind == "list":
        text_col = pa.array([[t] for t in texts], type=pa.list_(pa.string()))
    elif kind == "null":
        text_col = pa.nulls(n)
    elif kind == "binary":
        text_col = pa.array(draw(st.lists(st.binary(max_size=8), min_size=n, max_size=n)))
    else:
        text_col = pa.array(texts, type=getattr(pa, kind)())
    cols = {"text": text_col}
    id_kind = draw(st.sampled_from(["none", "int", "uint", "float", "str", "bool", "list"]))
    if id_kind == "int":
        cols["id"] = pa.array(draw(st.lists(st.integers(-(2**63), 2**63 - 1), min_size=n,
                                            max_size=n)))  # fmt: skip
    elif id_kind == "uint":
        cols["id"] = pa.array(draw(st.lists(st.integers(0, 2**64 - 1), min_size=n, max_size=n)),
                              type=pa.uint64())  # fmt: skip
    elif id_kind == "float":
        cols["id"] = pa.array(draw(st.lists(st.floats(), min_size=n, max_size=n)))
    elif id_kind == "str":
        cols["id"] = pa.array(draw(st.lists(st.text(max_size=4), min_size=n, max_size=n)))
    elif id_kind == "bool":
        cols["id"] = pa.array(draw(st.lists(st.booleans(), min_size=n, max_size=n)))
    elif id_kind == "list":
        cols["id"] = pa.array([[i] for i in range(n)])
    fp_kind = draw(st.sampled_from(["uint64", "int64", "float64", "string"]))
    fps = draw(st.lists(st.integers(0, 2**63 - 1), min_size=n, max_size=n))
    convert = {"string": str, "float64": float}.get(fp_kind, int)
    cols["fingerprint"] = pa.array([convert(v) for v in fps], type=getattr(pa, fp_kind)())
    return pa.table(cols), draw(st.integers(-1, 400))


@FUZZ
@given(
    table=parquet_tables(),
    command=st.sampled_from(
        [
            ("neardup", "fingerprint", "{f}", "-o", "{d}/o.parquet"),
            ("neardup", "fingerprint", "{f}", "-o", "{d}/o.jsonl", "--skip-bad"),
            ("neardup", "dedup", "{f}", "-o", "{d}/k.parquet", "--clusters", "{d}/c.jsonl"),
            ("neardup", "dedup", "{f}", "-o", "{d}/k.parquet", "--skip-bad"),
            ("neardup", "find-all", "{f}", "-o", "{d}/p.json"),
            ("neardup", "index", "add", "{ix}", "{f}"),
        ]
    ),
)
@pytest.mark.slow
def test_parquet_inputs(scratch, table, command):
    pq = pytest.importorskip("pyarrow.parquet")
    tbl, cut = table
    with tempfile.TemporaryDirectory(dir=scratch) as d:
        f = os.path.join(d, "in.parquet")
        pq.write_table(tbl, f)
        if cut >= 0:  # damage the file: cut it short or flip bytes
            data = bytearray(open(f, "rb").read())
            if cut % 2:
                data = data[: cut % len(data)]
            else:
                for i in range(cut % len(data), min(len(data), cut % len(data) + 8)):
                    data[i] ^= 0x5A
            with open(f, "wb") as fh:
                fh.write(bytes(data))
        ix = os.path.join(d, "ix")
        Index.create(ix, distance=3).close()
        args = [a.format(f=f, d=d, ix=ix) for a in command] + ["-q"]
        check_command(d, args[0], *args[1:], inputs=(f,))


# ------------------------------------------------------------------ public functions
ODD = st.one_of(
    st.binary(max_size=4),
    st.text(max_size=4),
    st.dictionaries(st.integers(0, 9), st.integers(0, 9), max_size=3),
    st.sets(st.integers(0, 9), max_size=3),
    st.booleans(),
    st.none(),
    st.floats(allow_nan=True),
    st.integers(-(2**70), 2**70),
    st.lists(
        st.one_of(
            st.integers(-(2**70), 2**70),
            st.booleans(),
            st.floats(),
            st.text(max_size=2),
            st.lists(st.integers(0, 3), max_size=2),
        ),
        max_size=4,
    ),  # fmt: skip
    st.sampled_from(
        [
            np.array([[1, 2]]),
            np.array([1.5]),
            np.array([True]),
            np.array(["a"]),
            np.array([-1]),
            np.array([1, 2], dtype=np.int8),
            np.array([object(), 1], dtype=object),
            np.zeros(0, dtype=np.float32),
            np.array(5),
            np.array([[5000], [5001]]),
            np.array([5000, 5001], dtype=np.uint64),
            np.array(["a", "b"]),
            [True, False],
            [1, 2],
            ["a", "b"],
            [2**63, 1],
        ]
    ),
)


def _one_line(e: BaseException) -> None:
    assert "\n" not in str(e) and str(e), repr(e)


def _is_int(v) -> bool:
    return isinstance(v, (int, np.integer)) and not isinstance(v, (bool, np.bool_))


def valid_fingerprints(v) -> bool:
    """What the API must accept as fingerprints: a 1-D integer array or a list of ints, all in
    [0, 2**64); anything else must be refused."""
    if isinstance(v, np.ndarray):
        return v.ndim == 1 and (v.size == 0 or (v.dtype.kind in "iu" and v.min() >= 0))
    return isinstance(v, list) and all(_is_int(x) and 0 <= x < 2**64 for x in v)


def valid_ids(v, n: int, kind: str) -> bool:
    """What Index.add must accept as ids for ``n`` fingerprints in an index of ``kind``."""
    if v is None:
        return kind == "int"  # numbered automatically
    if isinstance(v, np.ndarray):
        if v.ndim != 1 or v.dtype.kind not in "iuU":
            return False
        v = v.tolist()
    if not isinstance(v, list) or len(v) != n or len(set(map(repr, v))) != n:
        return False
    if kind == "int":
        return all(_is_int(x) and -(2**63) <= x < 2**63 for x in v)
    return all(isinstance(x, str) and x.encode("utf-8", "surrogatepass").decode("utf-8",
               "replace") == x for x in v)  # fmt: skip


@settings(FUZZ, max_examples=2 * N)
@given(value=ODD, other=ODD)
def test_public_functions_refuse_odd_values_with_one_line(value, other):
    calls = [
        lambda: neardup.find_all(value, 2),
        lambda: neardup.find_clusters(value, 2),
        lambda: neardup.find_all_values(value, 2),
        lambda: neardup.query([1, 2, 3], value, distance=2),
        lambda: neardup.decide(value),
    ]
    for call in calls:
        try:
            call()
        except (ValueError, TypeError) as e:
            _one_line(e)
            assert not valid_fingerprints(value), f"{value!r} refused: {e}"
        else:
            assert valid_fingerprints(value), f"{value!r} accepted as fingerprints"
    try:  # an odd distance: refused with ValueError/TypeError (the message may show an array)
        neardup.find_all([1, 2], other)
    except (ValueError, TypeError):
        pass


@settings(FUZZ, max_examples=N + N // 3)
@given(fps=ODD, ids=ODD, str_index=st.booleans())
@pytest.mark.slow
def test_index_refuses_odd_values_and_stays_usable(scratch, fps, ids, str_index):
    with tempfile.TemporaryDirectory(dir=scratch) as d:
        path = os.path.join(d, "ix")
        base = ["p", "q"] if str_index else [10, 11]
        kind = "str" if str_index else "int"
        with Index.create(path, distance=3) as ix:
            ix.add([5, 2**64 - 1], ids=base)
            for fp_arg in (fps, [7, 8]):
                good = valid_fingerprints(fp_arg) and valid_ids(ids, len(fp_arg), kind)
                try:
                    ix.add(fp_arg, ids=ids)
                except (ValueError, TypeError) as e:
                    _one_line(e)
                    good = good and bool(set(map(repr, ids)) & set(map(repr, base)))
                    assert not good, f"add({fp_arg!r}, ids={ids!r}) refused: {e}"
                else:
                    assert good, f"add({fp_arg!r}, ids={ids!r}) accepted"
                    assert ids is None or ix.contains(list(ids)).all()
            for call in (
                lambda: ix.remove(ids, missing="ignore"),
                lambda: ix.contains(ids),
                lambda: ix.query(fps),
                lambda: ids in ix,
            ):
                try:
                    call()
                except (ValueError, TypeError) as e:
                    _one_line(e)
        with Index.open(path, "w") as ix:  # whatever was accepted, the index still works
            ix.verify()
            ix.compact()
            got = ix.query([5], distance=0)[0]
            assert got == [(base[0], 0)] or base[0] not in ix


@pytest.mark.slow
@settings(FUZZ, max_examples=N)
@given(
    texts=st.lists(st.one_of(WORDS, JSON_SCALARS), max_size=5),
    ids=st.one_of(st.none(), st.lists(JSON_SCALARS, min_size=5, max_size=5)),
    skip_bad=st.booleans(),
)
def test_dedup_api_on_odd_in_memory_input(scratch, texts, ids, skip_bad):
    pd = pytest.importorskip("pandas")
    df = pd.DataFrame({"text": texts})
    if ids is not None:
        df["id"] = ids[: len(texts)]
    with tempfile.TemporaryDirectory(dir=scratch) as d:
        out = os.path.join(d, "c.jsonl")
        try:
            r = neardup.dedup(df, clusters=out, drop_list=os.path.join(d, "drop"),
                              skip_bad=skip_bad)  # fmt: skip
        except (ValueError, TypeError) as e:
            _one_line(e)
            assert os.listdir(d) == []
            return
        assert len(r.kept) == len(texts) - r.skipped

        def strict(name):
            raise AssertionError(f"non-standard JSON {name}")

        for line in open(out, encoding="utf-8"):
            json.loads(line, parse_constant=strict)


def test_the_fuzz_corpus_covers_what_the_issue_named(scratch):
    """A fixed sample of the inputs above, so a regression shows even with few examples."""
    d = tempfile.mkdtemp(dir=scratch)
    try:
        f = os.path.join(d, "in.jsonl")
        deep = b'{"text": "a", "x": ' + b"[" * 100_000 + b"]" * 100_000 + b"}"
        with open(f, "wb") as fh:
            fh.write(b'{"text": "ok"}\n' + deep + b"\n")
        assert check_command(d, "neardup", "fingerprint", f, "-q", inputs=(f,)) == 2
        assert check_command(d, "neardup", "fingerprint", f, "-q", "--skip-bad", inputs=(f,)) == 0
        with pytest.raises(ValueError, match="sequence"):
            neardup.find_all(b"\x01\x02", 1)
        assert not math.isnan(0.0)
    finally:
        shutil.rmtree(d)


@pytest.mark.filterwarnings("ignore:.*no shingles:UserWarning")
@settings(max_examples=max(3, N // 6), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    seed=st.integers(0, 2**16),
    cut=st.integers(5, 35),
    overlap=st.integers(0, 10),
    how=st.sampled_from(["verified", "fingerprint", "sketch"]),
    keep=st.sampled_from(["first", "longest"]),
)
@pytest.mark.slow
def test_update_retries_change_nothing(scratch, seed, cut, overlap, how, keep):
    """Dumps deduplicated one after another against an index with ``update``, each run twice
    (a retry) and the first again at the end: a retry keeps what the run kept and adds nothing."""
    import naive
    import pyarrow as pa

    docs = naive.text_families(40, seed)
    ids = [f"d{i}" for i in range(len(docs))]
    lo = max(0, cut - overlap)
    dumps = [pa.table({"id": ids[:cut], "text": docs[:cut]}),
             pa.table({"id": ids[lo:], "text": docs[lo:]})]  # fmt: skip
    d = tempfile.mkdtemp(dir=scratch)
    kw = {"verify": how != "fingerprint", "keep": keep}
    if how == "sketch":
        ix = Index.create(os.path.join(d, "ix"), threshold=0.8, sketch_words=8)
    else:
        ix = Index.create(os.path.join(d, "ix"), distance=10)
    try:
        first = []
        for k in (0, 0, 1, 1, 0):
            size = len(ix)
            r = neardup.dedup(dumps[k], against=ix, update=True, **kw)
            kept = [r.ids[i] for i in np.flatnonzero(r.kept)]
            # what the index held as itself (a document of both dumps) is kept, not added
            assert r.against.own[r.kept].sum() == len(kept) - (len(ix) - size)
            if len(first) <= k:
                first.append(kept)
                continue
            assert kept == first[k]  # a retry keeps the same documents...
            assert len(ix) == size and r.against.own[r.kept].all()  # ... all held already
    finally:
        ix.close()
        shutil.rmtree(d)

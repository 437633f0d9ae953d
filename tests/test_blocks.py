"""io/blocks: JSONL and text lines parsed a block at a time by the kernel give exactly the Python
readers' documents, ids and errors (tests/naive.py reads them line by line)."""

from __future__ import annotations

import gzip
import io
import json
import math
import os

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from naive import kept_lines_one_by_one, read_lines_one_by_one

from neardup import config
from neardup.errors import InputError
from neardup.io.blocks import (
    IdTable,
    hash_ids,
    id_key,
    iter_blocks,
    kept_lines,
    line_format,
    parse_block,
    read_blocks,
)
from neardup.io.readers import iter_lines

SOURCE = "in.jsonl"


@pytest.fixture(autouse=True)
def _defaults():
    yield
    config._reset()


def _parsed(data: bytes, jsonl: bool = True, field="text", id_field="id", size=1 << 20):
    """``[(line, (id, text, length) or error message)]`` of ``data`` read in blocks."""
    fmt = line_format(SOURCE, jsonl, field, id_field)
    assert fmt is not None
    out = []
    for number, raw in iter_blocks(io.BytesIO(data), size):
        b = parse_block(fmt, number, raw)
        assert b.data is not None and b.offsets is not None
        assert len(b.ids) == len(b.numbers) == len(b.lengths) == len(b.offsets) - 1
        assert (b.id_hashes == hash_ids(b.ids)).all()
        texts = b.strings()
        assert b.lengths.tolist() == [len(t) for t in texts]
        events = [(int(n), (i, t, len(t))) for n, i, t in zip(b.numbers, b.ids, texts)]
        for at, err in zip(b.bad_at, b.bad, strict=True):
            assert at == int(np.searchsorted(b.numbers, err.line))
            events.append((err.line, str(err)))
        out += sorted(events, key=lambda e: e[0])
    return out


def _expected(data: bytes, jsonl: bool = True, field="text", id_field="id"):
    return [
        (n, str(r) if isinstance(r, InputError) else (r.id, r.text, len(r.text)))
        for n, r in read_lines_one_by_one(data, SOURCE, jsonl, field, id_field)
    ]


def _same(a, b) -> bool:
    """Equal, NaN ids included (none are kept, but compare them as Python would)."""
    if len(a) != len(b):
        return False
    for x, y in zip(a, b, strict=True):
        if x != y and not (
            isinstance(x[1], tuple)
            and isinstance(y[1], tuple)
            and x[1][1:] == y[1][1:]
            and id_key(x[1][0]) == id_key(y[1][0])
        ):
            return False
    return True


# ----------------------------------------------------------------------------------------------
# JSON lines, written with every escape and spacing json accepts, and broken in every way


def _weighted(*options):
    """One of the strategies ``(weight, strategy)``, chosen by weight."""
    table = [strategy for weight, strategy in options for _ in range(weight)]
    return st.integers(0, len(table) - 1).flatmap(lambda k: table[k])


_CHARS = _weighted(
    (4, st.characters(codec="utf-8")),
    (1, st.sampled_from(list('"\\/\b\f\n\r\t\x00\x1f\x7f') + ["\u2028", "\U0001f600", "é"])),
)
_LONE = st.characters(min_codepoint=0xD800, max_codepoint=0xDFFF)  # (written as escapes)
_STRINGS = _weighted((4, st.text(_CHARS, max_size=12)), (1, st.text(_CHARS | _LONE, max_size=6)))
_KEYS = _weighted(
    (1, st.just("text")),
    (1, st.just("id")),
    (4, st.sampled_from(["url", "t\u00e9xt", "", "meta"])),
    (4, _STRINGS),
)
_SCALARS = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-(2**70), 2**70),
    st.floats(allow_nan=True, allow_infinity=True),
    _STRINGS,
)
_VALUES = st.recursive(
    _SCALARS,
    lambda inner: st.one_of(
        st.lists(inner, max_size=3), st.lists(st.tuples(_KEYS, inner), max_size=3)
    ),
    max_leaves=8,
)
_WS = st.text(st.sampled_from(" \t\r"), max_size=2)


@st.composite
def _json(draw, value, key: bool = False) -> str:
    """``value`` as JSON text: tuples-lists are objects (keys may repeat), strings with
    random escapes (``\\uXXXX`` in either case, short forms, ``\\/``) and spacing."""
    ws = draw(_WS)
    if isinstance(value, list) and value and all(isinstance(v, tuple) for v in value):
        items = [f"{draw(_json(k, True))}{draw(_WS)}:{draw(_WS)}{draw(_json(v))}" for k, v in value]
        return "{" + ws + f"{draw(_WS)},{draw(_WS)}".join(items) + draw(_WS) + "}"
    if isinstance(value, list):
        return "[" + ws + ",".join(draw(_json(v)) for v in value) + draw(_WS) + "]"
    if isinstance(value, str):
        short = {'"': '\\"', "\\": "\\\\", "\n": "\\n", "\t": "\\t", "\b": "\\b", "/": "\\/"}
        # in 5: escape a character that need not be (rarely in keys: the kernel leaves those)
        rate = draw(st.sampled_from([0] * 9 + [1] if key else [0, 0, 0, 1, 3]))
        out = []
        for ch in value:
            must = 0xD800 <= ord(ch) <= 0xDFFF or ord(ch) < 0x20 or ch in '"\\'
            if not must and (rate == 0 or draw(st.integers(0, 4)) >= rate):
                out.append(ch)
                continue
            form = draw(st.integers(0, 2))
            if form == 0 and ch in short:
                out.append(short[ch])
            elif ord(ch) > 0xFFFF:
                hi, lo = divmod(ord(ch) - 0x10000, 0x400)
                out.append(f"\\u{0xD800 + hi:04x}\\u{0xDC00 + lo:04X}")
            else:
                out.append(f"\\u{ord(ch):04x}" if form == 1 else f"\\u{ord(ch):04X}")
        return '"' + "".join(out) + '"'
    if isinstance(value, float) and math.isfinite(value) and draw(st.booleans()):
        return repr(value).replace("e+", "E")
    return json.dumps(value)


@st.composite
def _record(draw) -> bytes:
    """One line: an object with (usually) a text and an id among other keys, or not an object,
    then perhaps broken."""
    pairs = draw(st.lists(st.tuples(_KEYS, _VALUES), max_size=3))
    if draw(st.integers(0, 9)):
        pairs.insert(draw(st.integers(0, len(pairs))), ("text", draw(_STRINGS)))
    kind = draw(st.integers(0, 9))
    if kind < 8:
        rid = [draw(st.integers(-(2**64), 2**64)), draw(_STRINGS), 7, "a"][kind % 4]
        pairs.insert(draw(st.integers(0, len(pairs))), ("id", rid))
    elif kind == 8:
        pairs.append(("id", draw(_SCALARS)))
    value: object = pairs if draw(st.integers(0, 15)) else draw(_VALUES)
    if not isinstance(value, list):
        value = [value]  # a top-level array
    line = (draw(_WS) + draw(_json(value)) + draw(_WS)).encode("utf-8", "surrogatepass")
    damage = draw(st.integers(0, 14))
    if damage == 0 and line:
        cut = draw(st.integers(0, len(line) - 1))
        line = line[:cut]
    elif damage == 1:
        at = draw(st.integers(0, len(line)))
        junk = draw(st.sampled_from([b"\xff", b"\xc3", b"\xed\xa0\x80", b"\xef\xbb\xbf", b"x",
                                     b",", b"]", b"\x0b", b"\\", b'"', b"\x00"]))  # fmt: skip
        line = line[:at] + junk + line[at:]
    elif damage == 2:
        line = draw(st.sampled_from([b"", b"  ", b"\x0b\x0c", b"\r", b"[]", b"{}", b"null"]))
    return line


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    lines=st.lists(_record(), max_size=12),
    crlf=st.booleans(),
    last_newline=st.booleans(),
    id_field=st.sampled_from(["id", "url", None]),
    size=st.integers(1, 300),
)
@pytest.mark.slow
def test_jsonl_blocks_read_as_the_python_reader_reads_lines(
    lines, crlf, last_newline, id_field, size
):
    data = (b"\r\n" if crlf else b"\n").join(lines) + (b"\n" if last_newline else b"")
    assert _same(_parsed(data, id_field=id_field, size=size), _expected(data, id_field=id_field))


@settings(max_examples=60, deadline=None)
@given(lines=st.lists(_record(), max_size=8), limit=st.integers(0, 40), depth=st.integers(0, 4))
@pytest.mark.slow
def test_size_and_depth_bounds_as_the_python_reader(lines, limit, depth):
    config.MAX_RECORD_BYTES = limit
    config.MAX_JSON_DEPTH = depth
    data = b"\n".join(lines)
    assert _same(_parsed(data, size=16), _expected(data))


@settings(max_examples=200, deadline=None)
@given(
    lines=st.lists(st.binary(max_size=12) | _STRINGS.map(lambda s: s.encode("utf-8", "replace"))),
    size=st.integers(1, 50),
)
@pytest.mark.slow
def test_text_lines_as_read_lines(lines, size):
    data = b"\n".join(lines)
    assert _parsed(data, jsonl=False, size=size) == _expected(data, jsonl=False)


@pytest.mark.slow
def test_every_kind_of_line_the_kernel_leaves_to_python(tmp_path):
    config.MAX_JSON_DEPTH = 3
    lines = [
        b'{"text": "plain", "id": 1}',
        b'{"text": "esc \\u00e9\\n\\ud83d\\ude00", "id": "a\\u00e9"}',  # kernel
        b'{"text": "lone \\ud800", "id": 2}',  # str with a lone surrogate
        b'{"t\\u0065xt": "escaped key", "id": 3}',  # an escaped key spelling "text"
        b'{"text": "a", "text": "last wins", "id": 4}',  # repeated key
        b'{"text": "b", "id": 5.0}',  # float id (equal to 5)
        b'{"text": "c", "id": 99999999999999999999}',  # beyond int64
        b'{"text": "d", "id": "new\\nline"}',  # newline in a string id
        b'{"text": "e", "id": [1, {"b": 2}]}',  # a list as id
        b'{"text": "f", "x": [[[1]]]}',  # deeper than MAX_JSON_DEPTH
        b'{"text": "g", "x": [[1]]}',  # as deep as allowed
        b'\xef\xbb\xbf{"text": "bom"}',
        b'{"text": "caf\xe9"}',
        b'{"text": "ok", "n": ' + b"9" * 700 + b"}",  # Python may refuse the integer
        b'{"text": 5}',
        b"  \x0b ",
        b"[1]",
        b'{"text": "h", "id": -0}',
        b'{"text": "i", "id": true}',
        b'{"text": "j", "id": null}',
        b'{"text": "k", "id": NaN}',
        b'{"text":"l","id":-Infinity,"z":Infinity}',
    ]
    data = b"\n".join(lines) + b"\n"
    assert _same(_parsed(data), _expected(data))
    got = _parsed(data)
    assert got[1] == (2, ("a\u00e9", "esc \u00e9\n\U0001f600", 7))
    assert got[3] == (4, (3, "escaped key", 11)) and got[4] == (5, (4, "last wins", 9))


def test_ids_absent_named_or_file_line(tmp_path):
    data = b'{"text": "a", "url": "u"}\n{"text": "b", "id": 7}\n'
    assert _parsed(data) == [(1, (f"{SOURCE}:1", "a", 1)), (2, (7, "b", 1))]
    assert _parsed(data, id_field=None) == [
        (1, (f"{SOURCE}:1", "a", 1)),
        (2, (f"{SOURCE}:2", "b", 1)),
    ]
    assert _parsed(data, id_field="url")[0] == (1, ("u", "a", 1))
    assert "missing id field 'url'" in _parsed(data, id_field="url")[1][1]
    assert line_format(SOURCE, True, "text", "text") is None  # the Python reader serves it
    assert line_format(SOURCE, True, "te\udcffxt", "id") is None
    odd = line_format("a\nb.jsonl", True)  # ids made in Python, not by the kernel
    assert odd is not None and len(odd.prefix) == 0
    b = parse_block(odd, 1, b'{"text": "x"}\n')
    assert b.ids == ["a\nb.jsonl:1"] and (b.id_hashes == hash_ids(b.ids)).all()


@settings(max_examples=200, deadline=None)
@given(
    lines=st.lists(st.binary(max_size=30).filter(lambda b: b"\n" not in b), max_size=10),
    last_newline=st.booleans(),
    size=st.integers(1, 40),
    limit=st.integers(0, 25),
)
def test_blocks_hold_whole_lines_and_bound_long_ones(lines, last_newline, size, limit):
    data = b"\n".join(lines) + (b"\n" if last_newline and lines else b"")
    want = list(iter_lines(io.BytesIO(data), limit=limit))
    got = []
    for number, block in iter_blocks(io.BytesIO(data), size, limit):
        if block is None:
            got.append((number, None))
            continue
        parts = block.split(b"\n")
        chunks = [p + b"\n" for p in parts[:-1]] + ([parts[-1]] if parts[-1] else [])
        for k, line in enumerate(chunks):
            too_big = len(line.removesuffix(b"\n")) > limit
            got.append((number + k, None if too_big else line))
    assert got == want


@given(
    lines=st.lists(
        st.sampled_from([b"", b"a", b"bc\r", b'{"text": "x"}', b"\xff\x00"]), max_size=30
    ),
    last_newline=st.booleans(),
    size=st.integers(1, 40),
    data=st.data(),
)
def test_kept_lines_of_blocks_are_the_kept_lines_of_the_input(lines, last_newline, size, data):
    raw = b"\n".join(lines) + (b"\n" if last_newline and lines else b"")
    count = raw.count(b"\n") + (0 if raw.endswith(b"\n") or not raw else 1)
    picks = data.draw(st.lists(st.integers(1, max(count, 1)), unique=True)) if count else []
    numbers = np.array(sorted(picks), dtype=np.int64)
    want = kept_lines_one_by_one(raw, numbers)
    for kernel in (True, False):
        got, taken = [], 0
        for first, block in iter_blocks(io.BytesIO(raw), size):
            i = int(np.searchsorted(numbers, first))
            part, n = kept_lines(block, first, numbers, i, kernel=kernel)
            assert n == len(kept_lines_one_by_one(block, numbers[i:] - first + 1).split(b"\n")) - 1
            got.append(bytes(part))
            taken += n
        assert b"".join(got) == want
        assert taken == len(numbers)


def test_compressed_input_reads_in_blocks(tmp_path):
    src = tmp_path / "x.jsonl.gz"
    rows = [json.dumps({"text": f"doc {i} é", "id": i}) for i in range(3000)]
    src.write_bytes(gzip.compress(("\n".join(rows) + "\n").encode()))
    fmt = line_format(src, True)
    docs = [parse_block(fmt, n, raw) for n, raw in read_blocks(src, 4096)]
    assert len(docs) > 5
    assert [i for d in docs for i in d.ids] == list(range(3000))
    assert [t for d in docs for t in d.strings()][-1] == "doc 2999 é"


def test_id_hashes_follow_python_equality():
    ids = [1, 1.0, True, "1", 2**70, float(2**70), [1, 2], {"a": 1}, None, "é", -5, 0.5]
    h = hash_ids(ids)
    assert h[0] == h[1] == h[2] and h[0] != h[3] and h[4] == h[5]
    for i, a in enumerate(ids):
        for j, b in enumerate(ids):
            if id_key(a) == id_key(b):
                assert h[i] == h[j]
    table = IdTable()
    assert table.first(h[:3], 0).tolist() == [-1, 0, 0]
    assert table.first(h, 3).tolist() == [0, 0, 0, -1, -1, 7, -1, -1, -1, -1, -1, -1]
    big = hash_ids(list(range(5000)))  # the table grows
    assert (table.first(big, 100) >= 0).tolist() == [False, True] + [False] * 4998  # 1 was
    assert (table.first(big, 9000) == np.arange(100, 5100)).sum() == 4999


@pytest.mark.slow
def test_id_hashes_are_the_same_in_every_process():
    """Workers and resumed runs hash ids in other processes: no per-process salt may enter."""
    import subprocess
    import sys

    code = (
        "from neardup.io.blocks import hash_ids; import datetime as d; "
        "print(hash_ids([b'x', None, [1, 2], {'a': 1}, 0.5, 2**70, 'é', 7, "
        "d.date(2020, 1, 2), (1, 'a')]).tolist())"
    )
    outs = {
        subprocess.run(
            [sys.executable, "-c", code],
            capture_output=True,
            text=True,
            check=True,
            env={**os.environ, "PYTHONHASHSEED": seed},
        ).stdout  # fmt: skip
        for seed in ("1", "2", "random")
    }
    assert len(outs) == 1 and outs.pop().startswith("[")

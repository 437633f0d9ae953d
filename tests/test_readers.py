"""io/readers: every data error names the file and the line; nothing recurses or grows unbounded."""

from __future__ import annotations

import io
import json

import pytest

from neardup import config
from neardup.errors import InputError
from neardup.io.readers import (
    iter_lines,
    parse_json_line,
    read_documents,
    read_jsonl,
    read_lines,
    read_parquet,
    read_text_file,
)


@pytest.fixture(autouse=True)
def _defaults():
    yield
    config._reset()


def _records(path, **kw):
    bad: list[InputError] = []
    got = list(read_jsonl(path, on_bad=bad.append, **kw))
    return got, [str(e) for e in bad]


def test_deep_nesting_is_a_record_error_not_a_recursion(tmp_path):
    src = tmp_path / "d.jsonl"
    deep = '{"text": "a", "x": ' + "[" * 100_000 + "]" * 100_000 + "}"
    near = '{"text": "b", "x": ' + "[" * 200 + "]" * 200 + "}"
    brackets_in_string = json.dumps({"text": "[" * 5000})
    src.write_text("\n".join([deep, near, brackets_in_string]) + "\n")
    got, bad = _records(src)
    assert [r.number for r in got] == [2, 3]
    assert bad == [f"{src}:1: JSON nested more than 256 levels deep "
                   "(neardup.config.MAX_JSON_DEPTH); flatten the record or use --skip-bad"]  # fmt: skip
    with pytest.raises(InputError, match=rf"{src}:1: JSON nested"):
        list(read_jsonl(src))


@pytest.mark.parametrize(
    "line, message",
    [
        ('{"text": "a", "n": ' + "9" * 5000 + "}", "unusable JSON: Exceeds the limit"),
        ('{"text": "a"', "not valid JSON: Expecting ',' delimiter"),
        ("[1, 2]", "expected a JSON object, got an array"),
        ('"text"', "expected a JSON object, got a string"),
        ('{"text": 5}', "field 'text' is a number"),
        ('{"body": "x"}', "missing field 'text'"),
        ('{"text": "a", "id": NaN}', "id field 'id' is nan"),
        ('{"text": "a", "id": -Infinity}', "id field 'id' is -inf"),
        ('{"text": "a", "id": "x\\udc00"}', "unpaired surrogate"),
        (b'{"text": "caf\xe9"}', "not valid UTF-8 \\(byte 0xe9"),
    ],
)
def test_each_bad_record_names_its_file_and_line(tmp_path, line, message):
    src = tmp_path / "x.jsonl"
    raw = line if isinstance(line, bytes) else line.encode()
    src.write_bytes(b'{"text": "fine"}\n\n' + raw + b"\n")
    got, bad = _records(src)
    assert [r.text for r in got] == ["fine"]
    assert len(bad) == 1 and bad[0].startswith(f"{src}:3: ")
    assert pytest.importorskip("re").search(message, bad[0]), bad[0]


def test_a_named_id_field_must_be_present_the_default_falls_back(tmp_path):
    src = tmp_path / "x.jsonl"
    src.write_text('{"text": "a", "url": "u1"}\n{"text": "b"}\n')
    got, bad = _records(src, id_field="url")
    assert [r.id for r in got] == ["u1"] and "x.jsonl:2: missing id field 'url'" in bad[0]
    got, bad = _records(src, id_field="URL")
    assert got == [] and len(bad) == 2
    got, bad = _records(src)  # default "id": file:line when absent
    assert [r.id for r in got] == [f"{src}:1", f"{src}:2"] and bad == []
    got, bad = _records(src, id_field=None)
    assert [r.id for r in got] == [f"{src}:1", f"{src}:2"]


def test_records_over_the_size_bound_are_skipped_without_holding_them(tmp_path):
    config.MAX_RECORD_BYTES = 64
    src = tmp_path / "x.jsonl"
    src.write_text('{"text": "a"}\n{"text": "' + "b" * 1000 + '"}\n{"text": "c"}\n')
    got, bad = _records(src)
    assert [r.text for r in got] == ["a", "c"] and bad[0].startswith(f"{src}:2: the line is over")
    lines = tmp_path / "x.txt"
    lines.write_bytes(b"short\n" + b"x" * 65 + b"\n" + b"y" * 64 + b"\nend")
    bad2: list[InputError] = []
    assert [r.text for r in read_lines(lines, bad2.append)] == ["short", "y" * 64, "end"]
    assert "x.txt:2" in str(bad2[0])
    big = tmp_path / "big.txt"
    big.write_bytes(b"z" * 100)
    with pytest.raises(InputError, match=rf"{big}:1: the file is 100 bytes, more than the 64"):
        list(read_text_file(big))


def test_iter_lines_numbers_lines_and_bounds_them():
    data = b"a\n" + b"b" * 10 + b"\n\nc" + b"d" * 10
    assert list(iter_lines(io.BytesIO(data), limit=10)) == [
        (1, b"a\n"),
        (2, b"b" * 10 + b"\n"),
        (3, b"\n"),
        (4, None),
    ]
    assert parse_json_line(b'{"a": [1]}', "s", 1) == {"a": [1]}


def test_parquet_errors_name_the_file(tmp_path):
    pa = pytest.importorskip("pyarrow")
    pq = pytest.importorskip("pyarrow.parquet")
    bad = tmp_path / "bad.parquet"
    bad.write_bytes(b"PAR1 not really")
    with pytest.raises(InputError, match=rf"{bad}: not a readable Parquet file"):
        list(read_parquet(bad))
    good = tmp_path / "g.parquet"
    pq.write_table(pa.table({"text": ["a", "b"], "id": [1.5, float("nan")]}), good)
    skipped: list[InputError] = []
    assert [r.id for r in read_parquet(good, on_bad=skipped.append)] == [1.5]
    assert str(skipped[0]).startswith(f"{good}:2: the id is nan")
    with pytest.raises(InputError, match="no id column 'url'"):
        list(read_parquet(good, id_column="url"))
    # damage the data pages but keep the footer: an error naming the file, not a crash
    raw = bytearray(good.read_bytes())
    for i in range(8, min(len(raw) - 200, 60)):
        raw[i] ^= 0xFF
    good.write_bytes(bytes(raw))
    with pytest.raises(InputError, match=str(good)):
        list(read_documents([good]))

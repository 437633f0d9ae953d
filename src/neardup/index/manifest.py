"""Validation of an index manifest's fields before anything is read through them.

:func:`neardup.index.storage.read_manifest` calls :func:`check_manifest` on every manifest it
reads, so a damaged or hostile manifest is a one-line :class:`CorruptIndexError`, never a read
outside the index directory or an out-of-bounds array access.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

import numpy as np

from neardup.index.storage import (
    CODEC_FORMAT_VERSION,
    FILE_KINDS,
    FORMAT_VERSION,
    SKETCH_FORMAT_VERSION,
    TABLE_CODECS,
    CorruptIndexError,
)

__all__ = ["check_manifest"]

#: Names a manifest may give a data file: the segment's name and a kind, inside the directory.
_FILE_NAME = re.compile(rf"^(s\d{{8}})\.{FILE_KINDS}\.npy$")
_SEGMENT = re.compile(r"^s\d{8}$")


def _is_int(v: Any, lo: int = 0, hi: int | None = None) -> bool:
    return isinstance(v, int) and not isinstance(v, bool) and v >= lo and (hi is None or v <= hi)


def _check_entry(e: Any, name: str, segment: str, bad: Any) -> None:
    if not isinstance(e, dict):
        bad(f"{name} is not an object")
    fname = e.get("name")
    m = _FILE_NAME.match(fname) if isinstance(fname, str) else None
    if m is None or m.group(1) != segment:
        bad(f"{name} names the file {fname!r}, expected {segment}.<kind>.npy in the index")
    if not _is_int(e.get("bytes")) or not _is_int(e.get("crc32"), 0, 0xFFFFFFFF):
        bad(f"{name} has no valid 'bytes' and 'crc32'")
    shape = e.get("shape")
    if not isinstance(shape, list) or not 1 <= len(shape) <= 2 or not all(map(_is_int, shape)):
        bad(f"{name} has shape {shape!r}, expected a list of sizes")
    try:
        dt = np.dtype(e.get("dtype"))
    except Exception:  # numpy raises TypeError, ValueError or SyntaxError for bad names
        dt = None
    if dt is None or dt.kind not in "biuf" or dt.str != e.get("dtype"):
        bad(f"{name} has dtype {e.get('dtype')!r}, expected a numeric dtype")
    codec = e.get("codec")
    if codec is not None and codec not in TABLE_CODECS:
        bad(f"{name} has unknown table codec {codec!r}, expected one of {', '.join(TABLE_CODECS)}")
    if codec is not None and (
        not _is_int(e.get("values")) or e.get("dtype") != "<u8" or len(shape) != 1
    ):
        bad(f"{name} is a coded table without a uint64 array and a count of 'values'")


# the arrays that the index's kernels index with: dtype and shape from the segment's rows
_EXPECT = {
    "fp": ("<u8", 0),
    "key": ("<i8", 0),
    "kord": (("<u4", "<i8"), 0),
    "soff": ("<i8", 1),
    "ssize": ("<u4", 0),
}
#: Words a sketch may have (:data:`neardup.core.sketch.MAX_WORDS`).
_MAX_SKETCH_WORDS = 64


def check_manifest(doc: dict[str, Any], path: str) -> None:
    """Check every field of a manifest body for type and range, every file name for being a
    plain index file name (``s00000007.kind.npy``, nothing outside the directory), and the
    dtype and shape of the arrays the index indexes with; raise one-line
    :class:`CorruptIndexError`."""

    def bad(what: str) -> None:
        raise CorruptIndexError(f"{path}: {what}; the manifest is damaged, restore the index")

    def shown(key: str) -> str:
        return repr(doc[key]) if key in doc else "missing"

    for key in ("distance", "blocks", "tables", "generation", "next_file"):
        if not _is_int(doc.get(key)):
            bad(f"{key!r} is {shown(key)}, expected an integer >= 0")
    if not _is_int(doc.get("next_id"), -(2**63), 2**63):
        bad(f"'next_id' is {shown('next_id')}, expected an integer")
    if doc.get("fingerprint_dtype") != "<u8":
        bad(f"'fingerprint_dtype' is {doc.get('fingerprint_dtype')!r}, expected '<u8'")
    version = doc.get("format_version")
    codec = doc.get("codec")
    words = doc.get("sketch_words")
    if words is not None and not _is_int(words, 2, _MAX_SKETCH_WORDS):
        bad(f"'sketch_words' is {words!r}, expected null or an integer from 2 to 64")
    if (words is not None) != (version == SKETCH_FORMAT_VERSION):
        bad(f"'sketch_words' is {words!r} in a version {version!r} index")
    t = doc.get("threshold")
    if t is not None and (words is None or type(t) is not float or not 0 < t <= 1):
        bad(f"'threshold' is {t!r}, expected null or, with sketches, a number in (0, 1]")
    plain = {FORMAT_VERSION: True, CODEC_FORMAT_VERSION: False}.get(version, codec is None)
    if (codec is None) != plain or not (codec is None or codec in TABLE_CODECS):
        bad(f"'codec' is {codec!r} in a version {version!r} index, expected one of {TABLE_CODECS}")
    id_type = doc.get("id_type", "missing")
    if id_type not in (None, "int64", "str"):
        bad(f"'id_type' is {id_type!r}, expected null, 'int64' or 'str'")
    segs = doc.get("segments")
    if not isinstance(segs, list) or (segs and id_type is None):
        bad("'segments' is not a list of segments of a typed index")
    names: set[str] = set()
    for i, seg in enumerate(segs):
        _check_segment(doc, i, seg, names, id_type, words, bad)


def _check_segment(
    doc: dict[str, Any],
    i: int,
    seg: Any,
    names: set[str],
    id_type: str | None,
    words: int | None,
    bad: Callable[[str], None],
) -> None:
    """Check segment ``i`` of a manifest: its name, rows, files and the names they take."""
    if not isinstance(seg, dict) or not isinstance(seg.get("files"), dict):
        bad(f"segment {i} is not an object with 'files'")
    sname = seg.get("name")
    if not isinstance(sname, str) or not _SEGMENT.match(sname) or sname in names:
        bad(f"segment {i} is named {sname!r}, expected a new s followed by 8 digits")
    names.add(sname)
    rows = seg.get("rows")
    if not _is_int(rows):
        bad(f"segment {sname} has {rows!r} rows")
    files = seg["files"]
    strings = {"sblob", "soff"}
    need = {"fp", "key", "kord"} | (strings if id_type == "str" else set())
    if need - files.keys() or (id_type != "str" and strings & files.keys()):
        bad(f"segment {sname} lists files {sorted(files)}, which do not fit ids {id_type}")
    sketch = {"sketch", "ssize"}
    if (sketch <= files.keys()) != (words is not None) or (words is None and sketch & files.keys()):
        bad(f"segment {sname} lists files {sorted(files)}, which do not fit sketch words {words}")
    entries = [(f"segment {sname} file {k!r}", e) for k, e in files.items()]
    if seg.get("deleted") is not None:
        entries.append((f"segment {sname} tombstones", seg["deleted"]))
    for what, e in entries:
        _check_entry(e, what, sname, bad)
        if e["name"] in names:
            bad(f"{what}: {e['name']} is listed twice")
        names.add(e["name"])
    _check_segment_arrays(doc, seg, sname, rows, words, bad)


def _check_segment_arrays(
    doc: dict[str, Any],
    seg: dict[str, Any],
    sname: str,
    rows: int,
    words: int | None,
    bad: Callable[[str], None],
) -> None:
    """Check the codec, dtype and shape of the arrays a segment lists."""
    files = seg["files"]
    codec = seg.get("codec")
    if codec != doc.get("codec") and not (codec is None and doc.get("codec") in TABLE_CODECS):
        bad(f"segment {sname} has codec {codec!r}, the index {doc.get('codec')!r}")
    for key, e in files.items():
        if e.get("codec") != (codec if key == "fp" or key[0] == "t" else None):
            bad(f"segment {sname} file {key!r} has codec {e.get('codec')!r}, not {codec!r}")
    if codec is not None and files["fp"]["values"] != rows:
        bad(f"segment {sname} file 'fp' holds {files['fp']['values']} values for {rows} rows")
    for key, (dtypes, extra) in _EXPECT.items():
        e = files.get(key)
        if key == "fp" and codec is not None:
            continue  # checked through 'values' above
        if e is not None and (e["dtype"] not in dtypes or e["shape"] != [rows + extra]):
            bad(f"segment {sname} file {key!r} is {e['dtype']}{e['shape']} for {rows} rows")
    if "sketch" in files and (
        files["sketch"]["dtype"] != "<u8" or files["sketch"]["shape"] != [rows, words]
    ):
        e = files["sketch"]
        bad(f"segment {sname} file 'sketch' is {e['dtype']}{e['shape']} for {rows} rows of {words}")
    if "sblob" in files and (files["sblob"]["dtype"] != "|u1" or len(files["sblob"]["shape"]) != 1):
        bad(f"segment {sname} file 'sblob' is not bytes")
    dead = seg.get("deleted")
    if dead is not None and (
        dead["dtype"] != "<i8" or len(dead["shape"]) != 1 or dead["shape"][0] > rows
    ):
        bad(f"segment {sname} tombstones are {dead['dtype']}{dead['shape']} for {rows} rows")

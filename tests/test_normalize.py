"""Normalization kernels (NFKC, case folding) against Python's unicodedata, code point by code
point, pair by pair, and on random text; the tables they use; UTF-8 and UTF-16 input."""

from __future__ import annotations

import random
import unicodedata

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from naive import naive_normalize

from neardup.fingerprints import _normalize as N
from neardup.fingerprints.unicode_tables import CATEGORIES, categories, empty_tables, norm_tables

FORMS = {"casefold": N.NORM_CASEFOLD, "nfkc": N.NORM_NFKC, "nfkc_casefold": N.NORM_NFKC_CASEFOLD}
MODES = {**FORMS, "none": N.NORM_NONE}
SURROGATES = range(0xD800, 0xE000)


def kernel_normalize(text: str, form: str, encoding: str = "utf-8") -> str:
    """The kernels' normalization of ``text`` given as UTF-8 (``surrogatepass``) or UTF-16."""
    if encoding == "utf-8":
        buf = np.frombuffer(text.encode("utf-8", "surrogatepass") + b"\0", dtype=np.uint8)
    else:
        buf = np.frombuffer(text.encode("utf-16-le") + b"\0\0", dtype="<u2")
    n = buf.shape[0] - 1
    out = np.empty(8, dtype=np.uint8)
    work = np.empty(4, dtype=np.int32)  # small, so that it has to grow
    out, m, work = N._normalize_doc(buf, 0, n, MODES[form], norm_tables(), out, work)
    return out[:m].tobytes().decode("utf-8", "surrogatepass")


def joined(chars) -> str:
    """Strings joined by NUL, a boundary that never composes, decomposes or folds: each
    string's result is the same as alone."""
    return "\0".join(chars)


@pytest.fixture(scope="module")
def tables():
    return norm_tables()


def test_tables_shape_and_content(tables):
    assert tables.props.shape == tables.slow.shape == (0x110000,)
    assert all(not a.flags.writeable for a in tables)
    fold = tables.props & N.FOLD_MASK
    assert fold[ord("A")] == ord("a") and fold[ord("a")] == ord("a")
    assert tables.props[ord("ß")] & N.FOLD_MULTI  # ß -> ss
    assert tables.slow[0x301] & 0xFF == 230  # combining acute accent
    assert tables.props[0x301] & N.COMP_LAST and tables.props[ord("e")] & N.COMP_FIRST
    assert tables.props[0x1161] & N.COMP_LAST and tables.props[0x11A8] & N.COMP_LAST  # Hangul
    stable = (tables.props & N.NFKC_STABLE) != 0
    assert stable[:128].all()
    assert not stable[0xFB01] and not stable[0x301] and not stable[0xFF21]  # ﬁ, mark, Ａ
    assert stable[ord("é")] and stable[0xAC00] and stable[0x4E00]
    assert len(tables.pair_keys) > 900 and np.all(np.diff(tables.pair_keys) > 0)
    cats = categories()
    assert CATEGORIES[cats[ord("a")]] == "Ll" and CATEGORIES[cats[0x10FFFF]] == "Cn"
    assert empty_tables().props.dtype == tables.props.dtype


@pytest.mark.parametrize("form", sorted(FORMS))
@pytest.mark.slow
def test_every_code_point_alone(form):
    # UTF-8 (lone surrogates as surrogatepass writes them) and UTF-16 (no lone surrogates)
    chars = [chr(c) for c in range(1, 0x110000)]
    assert kernel_normalize(joined(chars), form).split("\0") == [
        naive_normalize(ch, form) for ch in chars
    ]
    chars = [chr(c) for c in range(1, 0x110000) if c not in SURROGATES]
    assert kernel_normalize(joined(chars), form, "utf-16") == naive_normalize(joined(chars), form)


def _composing(tables) -> tuple[list[int], list[int]]:
    """Characters that start compositions (or decompose to something that does) and the
    characters that may follow them in one (marks, second characters, Hangul V and T)."""
    firsts = {int(k >> 21) for k in tables.pair_keys}
    starts = sorted(
        c
        for c in range(0x110000)
        if c in firsts
        or (
            c not in SURROGATES
            and any(ord(x) in firsts for x in unicodedata.normalize("NFKD", chr(c)))
        )
    )
    seconds = {int(k & ((1 << 21) - 1)) for k in tables.pair_keys}
    seconds |= {c for c in range(0x110000) if tables.slow[c] & 0xFF}
    seconds |= set(range(0x1161, 0x1176)) | set(range(0x11A7, 0x11C3))
    return starts, sorted(seconds)


@pytest.mark.slow
def test_every_composing_pair(tables):
    starts, seconds = _composing(tables)
    pairs = [chr(a) + chr(b) for a in starts for b in seconds]
    assert len(pairs) > 1_000_000
    for form in ("nfkc", "nfkc_casefold"):
        got = kernel_normalize(joined(pairs), form, "utf-16").split("\0")
        want = naive_normalize(joined(pairs), form).split("\0")
        bad = [p for p, g, w in zip(pairs, got, want, strict=True) if g != w]
        assert not bad, [(p, [hex(ord(c)) for c in p]) for p in bad[:5]]


@pytest.mark.slow
def test_random_sequences_of_composing_characters(tables):
    starts, seconds = _composing(tables)
    rng = random.Random(17)
    pool = starts + seconds + list(range(0x1100, 0x1113)) + [0x41, 0x20, 0x3099, 0xFF9E, 0xFDFA]
    seqs = ["".join(chr(rng.choice(pool)) for _ in range(rng.randint(1, 9))) for _ in range(60_000)]
    for form in ("nfkc", "nfkc_casefold"):
        for enc in ("utf-8", "utf-16"):
            got = kernel_normalize(joined(seqs), form, enc).split("\0")
            assert got == [naive_normalize(s, form) for s in seqs]


CASES = [
    "",
    "ABC",
    "Straße ΣΑΣ İstanbul ǅ ŉ ΐ ﬃ",
    "ＡＢＣ１２３ ｶﾞ ㍻ ﷺ ﷽ ½ Ⅻ 𝐀𝐁 ①",
    "e\u0301 a\u0301\u0323\u0300\u0316 \u1e9b\u0323 \u0344 \u0f73 \u2adc",
    "\u1100\u1161\u11a8 \u1100\u1161 가\u11a8 \u1161\u11a8",
    "か\u3099 ｶ\uff9e \u0b47\u0b3e \u0b47\u0b56 \U00011099\U000110ba",
    "a\u0301" * 3000,  # one long segment
    "\ufdfa" * 2000,  # 18 characters each
    "x" + "\u0301\u0316" * 5000,  # many marks to reorder and compose
    "\u0390" * 3000 + "ß" * 3000,  # case folding to several characters
]


@pytest.mark.slow
@pytest.mark.parametrize("form", sorted(MODES))
@pytest.mark.parametrize("text", CASES)
def test_cases_and_buffer_growth(text, form):
    want = naive_normalize(text, form)
    assert kernel_normalize(text, form) == want
    assert kernel_normalize(text, form, "utf-16") == want


def test_lone_surrogates_pass_through():
    text = "a\ud800b \udfff \ud83d\ude00 x\ud800\u0301 E\udc80"
    for form in MODES:
        assert kernel_normalize(text, form) == naive_normalize(text, form)


ALPHABET = st.one_of(
    st.characters(exclude_categories=()),
    st.sampled_from(
        list("aAzZ ßſİıΣσςﬁＡｶﾞ\u0301\u0316\u0345\u3099\uff9e\u1100\u1161\u11a8가\ufdfa①Ⅻ")
    ),
)


@pytest.mark.slow
@settings(max_examples=300, deadline=None)
@given(st.text(alphabet=ALPHABET, max_size=40), st.sampled_from(sorted(MODES)))
def test_random_text(text, form):
    want = naive_normalize(text, form)
    assert kernel_normalize(text, form) == want
    if not any(0xD800 <= ord(c) < 0xE000 for c in text):
        assert kernel_normalize(text, form, "utf-16") == want


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=12))
def test_valid_utf8_is_python_strict_utf8(data):
    try:
        data.decode("utf-8")
        valid = True
    except UnicodeDecodeError:
        valid = False
    buf = np.frombuffer(data + b"\0", dtype=np.uint8)
    assert bool(N._valid_utf8(buf, 0, len(data))) is valid


def test_valid_utf8_edges():
    for good in ("é", "€", "𝐀", "\U0010ffff", "\ud7ff", "\ue000"):
        data = good.encode()
        assert N._valid_utf8(np.frombuffer(data, np.uint8), 0, len(data))
    for bad in (b"\xc0\xaf", b"\xe0\x80\xaf", b"\xed\xa0\x80", b"\xf4\x90\x80\x80", b"\xe6\x97"):
        assert not N._valid_utf8(np.frombuffer(bad, np.uint8), 0, len(bad))
    docs = [b"ok", b"\xe6\x97\xa5", b"\xff", b"fine"]
    buf = np.frombuffer(b"".join(docs), np.uint8)
    off = np.cumsum([0] + [len(d) for d in docs]).astype(np.int64)
    assert N.first_invalid_utf8(buf, off) == 2
    assert N.first_invalid_utf8(buf, off[:3]) == -1


def test_char_to_unit_offsets():
    docs = ["", "ab", "\U0001f600x", "", "日本\U00020000", "\U0001f600", ""]
    data = "".join(docs).encode("utf-16-le")
    buf = np.frombuffer(data, dtype="<u2")
    chars = np.cumsum([0] + [len(d) for d in docs]).astype(np.int64)
    units = np.cumsum([0] + [len(d.encode("utf-16-le")) // 2 for d in docs])
    assert N._char_to_unit_offsets(buf, chars).tolist() == units.tolist()
    assert chars.tolist() == np.cumsum([0] + [len(d) for d in docs]).tolist()  # not modified


def test_ascii_helpers():
    data = b"Hello, WORLD! [az] @Z`"
    buf = np.frombuffer(data, np.uint8)
    out = np.empty(len(data), np.uint8)
    N._lower_ascii(buf, 0, len(data), out)
    assert out.tobytes() == data.lower()
    assert N._is_ascii(buf, 0, len(data))
    assert not N._is_ascii(np.frombuffer("é".encode(), np.uint8), 0, 2)
    wide = np.frombuffer("aé\0Z日\U0001f600".encode("utf-16-le"), dtype="<u2")
    out = np.empty(8, np.uint8)
    assert N._narrow_ascii(wide, 0, wide.shape[0], out) == 7
    assert out[:7].tobytes() == b"a\x80\x00Z\x80\x80\x80"

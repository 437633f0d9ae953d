"""Tokenizers: the simhash-cpp tokenizer's published cases, Unicode scripts, kernel == Python."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from neardup.fingerprints import _kernels as K
from neardup.fingerprints.tokenize import (
    NORMALIZATIONS,
    ascii_char_classes,
    ascii_letters,
    char_classes,
    nfkc_casefold,
    unicode_tokens,
    unicode_words,
)

SIMHASH_CPP_TOKENS = ["what", "s", "new", "How", "is", "the", "stuff"]


# seomoz/simhash-cpp, src/tokenizers_test.cpp (removed in 2016): strings and expected tokens.
@pytest.mark.parametrize(
    "text",
    [
        "what's new?How5is _ the ^# stuff",
        "@#$@$! what's new?How5is _ the ^# stuff",
        "what's new?How5is _ the ^# stuff !~@#!@$",
    ],
)
def test_ascii_letters_simhash_cpp_cases(text):
    assert ascii_letters(text) == SIMHASH_CPP_TOKENS
    assert _kernel_tokens(text, K.TOK_ASCII_LETTERS) == SIMHASH_CPP_TOKENS


def test_ascii_letters_empty_and_nul():
    assert ascii_letters("") == []
    assert ascii_letters("a b c\0d e f\0\0") == ["a", "b", "c"]
    assert _kernel_tokens("a b c\0d e f\0\0", K.TOK_ASCII_LETTERS) == ["a", "b", "c"]
    assert ascii_letters("naïve café") == ["na", "ve", "caf"]


def _kernel_tokens(text: str, code: int) -> list[str]:
    data = text.encode("utf-8", "surrogatepass")
    buf = np.frombuffer(data + b"\0", dtype=np.uint8)  # padding so empty text has a buffer
    n = len(data)
    starts = np.empty(n + 1, dtype=np.int64)
    ends = np.empty(n + 1, dtype=np.int64)
    if code == K.TOK_ASCII_LETTERS:
        m = K._tokens_ascii(buf, 0, n, starts, ends)
    else:
        m = K._tokens_unicode(buf, 0, n, char_classes(), code == K.TOK_UNICODE, starts, ends)
    return [data[starts[i] : ends[i]].decode("utf-8", "surrogatepass") for i in range(m)]


def test_unicode_tokens_scripts():
    assert unicode_tokens("Grüße, 世界 2024!") == ["Grüße", "世", "界", "2024"]
    assert unicode_tokens("Привет, мир") == ["Привет", "мир"]
    assert unicode_tokens("日本語のテキスト") == list("日本語のテキスト")
    assert unicode_tokens("한국어 텍스트") == ["한국어", "텍스트"]  # Korean uses spaces
    assert unicode_tokens("नमस्ते दुनिया") == ["नमस्ते", "दुनिया"]  # marks stay in the word
    # a Thai consonant keeps its combining marks: ที่ = ท + ี + ่
    assert unicode_tokens("ที่นี่") == ["ที่", "นี่"]
    assert unicode_tokens("abc日本def") == ["abc", "日", "本", "def"]
    assert unicode_words("abc日本def 世界") == ["abc日本def", "世界"]


@settings(deadline=None)
@given(st.text(alphabet=st.characters(codec="utf-8"), max_size=60))
def test_kernel_tokenizers_match_python(text):
    assert _kernel_tokens(text, K.TOK_UNICODE) == unicode_tokens(text)
    assert _kernel_tokens(text, K.TOK_UNICODE_WORDS) == unicode_words(text)
    assert _kernel_tokens(text, K.TOK_ASCII_LETTERS) == ascii_letters(text)


@settings(deadline=None)
@given(
    st.text(
        alphabet=st.sampled_from(list("ab 1.\u0e17\u0e35\u0e48\u65e5\u0301\u0915\u093e")),
        max_size=40,
    )
)
def test_kernel_tokenizers_match_python_mixed_scripts(text):
    assert _kernel_tokens(text, K.TOK_UNICODE) == unicode_tokens(text)


def test_char_classes_table():
    t = char_classes()
    assert t.shape == (0x110000,) and t.dtype == np.uint8
    assert t[ord("a")] == K.CLS_WORD and t[ord("7")] == K.CLS_WORD and t[ord(" ")] == K.CLS_SEP
    assert t[ord("_")] == K.CLS_SEP and t[ord("。")] == K.CLS_SEP
    assert t[ord("日")] == K.CLS_CHAR and t[ord("\u0e48")] == K.CLS_CHAR_MARK


def test_ascii_char_classes_are_the_start_of_the_table():
    small = ascii_char_classes()
    assert small.dtype == np.uint8 and small.tolist() == char_classes()[:128].tolist()


def test_normalizations():
    assert nfkc_casefold("ＡＢＣ Straße ﬁ") == "abc strasse fi"
    assert nfkc_casefold("ABC") == "abc"
    assert NORMALIZATIONS["none"]("ABC") == "ABC"
    assert NORMALIZATIONS["nfkc"]("ﬁ") == "fi"
    assert NORMALIZATIONS["casefold"]("Straße") == "strasse"

"""Tokenizers and normalizations for fingerprints.

Three built-in tokenizers, each with a pure-Python form (returned tokens are ``str``) and a numba
form over UTF-8 bytes used by the batch path (``_kernels._tokens_ascii``/``_tokens_unicode``); the
two forms give the same tokens:

``ascii_letters``
    Runs of ASCII letters ``[A-Za-z]``; every other byte separates; case is kept; a NUL character
    ends the text (C-string semantics). The tokenizer of seomoz/simhash-cpp.
``unicode``
    Runs of letters, digits and combining marks of every script (Unicode categories L*, N*, M*);
    each character of a script written without spaces between words (Han, Hiragana, Katakana,
    Bopomofo, Thai, Lao, Khmer, Myanmar, Yi, Tibetan) is a token of its own, with the combining
    marks that follow it, so shingles of tokens are character n-grams there.
``unicode_words``
    As ``unicode`` without splitting those scripts into characters.

Normalizations (``str -> str``): ``none``, ``casefold``, ``nfkc``, ``nfkc_casefold``.
"""

from __future__ import annotations

import functools
import unicodedata
from collections.abc import Callable, Iterable

import numpy as np

from neardup.fingerprints import _kernels as K
from neardup.fingerprints.unicode_tables import CATEGORIES, categories

__all__ = [
    "NORMALIZATIONS",
    "TOKENIZERS",
    "ascii_char_classes",
    "ascii_letters",
    "char_classes",
    "nfkc_casefold",
    "unicode_tokens",
    "unicode_words",
]

# Code-point ranges of scripts written without spaces between words (letters/digits/marks in them
# become one token per character). Hangul is not here: Korean separates words with spaces.
NO_SPACE_RANGES: tuple[tuple[int, int], ...] = (
    (0x0E00, 0x0E7F),  # Thai
    (0x0E80, 0x0EFF),  # Lao
    (0x0F00, 0x0FFF),  # Tibetan
    (0x1000, 0x109F),  # Myanmar
    (0x1780, 0x17FF),  # Khmer
    (0x19E0, 0x19FF),  # Khmer symbols
    (0x2E80, 0x2FDF),  # CJK radicals, Kangxi radicals
    (0x3005, 0x3007),  # 々 〆 〇
    (0x3021, 0x3029),  # Hangzhou numerals
    (0x3031, 0x3035),  # kana repeat marks
    (0x3038, 0x303C),
    (0x3040, 0x30FF),  # Hiragana, Katakana
    (0x3100, 0x312F),  # Bopomofo
    (0x31A0, 0x31BF),  # Bopomofo extended
    (0x31F0, 0x31FF),  # Katakana phonetic extensions
    (0x3400, 0x4DBF),  # CJK extension A
    (0x4E00, 0x9FFF),  # CJK unified ideographs
    (0xA000, 0xA4CF),  # Yi
    (0xA9E0, 0xA9FF),  # Myanmar extended-B
    (0xAA60, 0xAA7F),  # Myanmar extended-A
    (0xF900, 0xFAFF),  # CJK compatibility ideographs
    (0xFF66, 0xFF9F),  # halfwidth Katakana
    (0x1B000, 0x1B16F),  # Kana supplement / extended
    (0x20000, 0x3FFFF),  # CJK extensions B.. and supplementary ideographic planes
)


@functools.lru_cache(maxsize=1)
def char_classes() -> np.ndarray:
    """Token class of every code point as ``uint8[0x110000]``.

    0 separates, 1 is a word character (categories L*, N*, M*), 2 is a letter/digit of a script
    written without spaces (one token per character), 3 a combining mark of such a script. Built
    once per process from :mod:`unicodedata` (about 0.2 s).
    """
    cats = categories()
    word = np.isin(cats, [i for i, c in enumerate(CATEGORIES) if c[0] in "LNM"])
    mark = np.isin(cats, [i for i, c in enumerate(CATEGORIES) if c[0] == "M"])
    table = word.astype(np.uint8)  # 0 or CLS_WORD
    for lo, hi in NO_SPACE_RANGES:
        seg = slice(lo, hi + 1)
        table[seg] = np.where(
            word[seg], np.where(mark[seg], K.CLS_CHAR_MARK, K.CLS_CHAR), K.CLS_SEP
        )
    return table


@functools.lru_cache(maxsize=1)
def ascii_char_classes() -> np.ndarray:
    """``char_classes()[:128]``, the token classes of ASCII, without building the whole table
    (what the kernels read of it for ASCII text)."""
    word = [unicodedata.category(chr(c))[0] in "LNM" for c in range(128)]
    return np.array(word, dtype=np.uint8)  # 0 or CLS_WORD: no ASCII script lacks spaces


def ascii_letters(text: str) -> list[str]:
    """Runs of ASCII letters; everything else separates, case is kept, NUL ends the text.

    Examples
    --------
    >>> ascii_letters("what's new?How5is _ the ^# stuff")
    ['what', 's', 'new', 'How', 'is', 'the', 'stuff']
    """
    text = text.split("\0", 1)[0]
    out: list[str] = []
    start = -1
    for i, ch in enumerate(text):
        if ("a" <= ch <= "z") or ("A" <= ch <= "Z"):
            if start < 0:
                start = i
        elif start >= 0:
            out.append(text[start:i])
            start = -1
    if start >= 0:
        out.append(text[start:])
    return out


def _unicode(text: str, split_chars: bool) -> list[str]:
    table = char_classes()
    out: list[str] = []
    cur: list[str] = []
    for ch in text:
        cls = table[ord(ch)]
        if cls == K.CLS_SEP:
            if cur:
                out.append("".join(cur))
                cur = []
        elif cls == K.CLS_WORD or not split_chars:
            cur.append(ch)
        elif cls == K.CLS_CHAR:
            if cur:
                out.append("".join(cur))
            cur = [ch]
        else:  # a mark of a no-space script joins the current token
            cur.append(ch)
    if cur:
        out.append("".join(cur))
    if not split_chars:
        return out
    # a character token ends after its marks: split tokens before each class-2 character
    # and after a class-2 character (plus marks) that is followed by anything else
    res: list[str] = []
    for tok in out:
        piece: list[str] = []
        for k, ch in enumerate(tok):
            cls = table[ord(ch)]
            piece.append(ch)
            nxt = table[ord(tok[k + 1])] if k + 1 < len(tok) else -1
            if cls in (K.CLS_CHAR, K.CLS_CHAR_MARK) and nxt != K.CLS_CHAR_MARK:
                res.append("".join(piece))
                piece = []
        if piece:
            res.append("".join(piece))
    return res


def unicode_tokens(text: str) -> list[str]:
    """Words of every script; characters of scripts written without spaces are tokens each.

    Examples
    --------
    >>> unicode_tokens("Grüße, 世界 2024!")
    ['Grüße', '世', '界', '2024']
    """
    return _unicode(text, True)


def unicode_words(text: str) -> list[str]:
    """Runs of letters, digits and marks of every script (no splitting into characters)."""
    return _unicode(text, False)


def nfkc_casefold(text: str) -> str:
    """Unicode NFKC normalization followed by full case folding (``str.casefold``)."""
    if text.isascii():
        return text.lower()  # NFKC is the identity on ASCII; casefold == lower there
    return unicodedata.normalize("NFKC", text).casefold()


def _nfkc(text: str) -> str:
    return text if text.isascii() else unicodedata.normalize("NFKC", text)


def _casefold(text: str) -> str:
    return text.lower() if text.isascii() else text.casefold()


def _identity(text: str) -> str:
    return text


#: Built-in tokenizers by name: (python function, kernel code).
TOKENIZERS: dict[str, tuple[Callable[[str], Iterable[str]], int]] = {
    "ascii_letters": (ascii_letters, K.TOK_ASCII_LETTERS),
    "unicode": (unicode_tokens, K.TOK_UNICODE),
    "unicode_words": (unicode_words, K.TOK_UNICODE_WORDS),
}

#: Built-in normalizations by name.
NORMALIZATIONS: dict[str, Callable[[str], str]] = {
    "none": _identity,
    "casefold": _casefold,
    "nfkc": _nfkc,
    "nfkc_casefold": nfkc_casefold,
}

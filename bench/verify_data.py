"""Data for the verification evaluation: a real-text corpus, shingle keys and exact truth.

- :func:`verify_documents`: license texts and package copyright files, man pages of every
  installed language and section, and docstrings of the Python modules on this machine (all real
  text; byte-identical documents and documents of fewer than 10 words left out).
- :func:`standin_shingle_sets`: sorted unique uint32 shingle keys per document, the keys the
  ``default`` Fingerprinter hashes (NFKC + casefold, unicode tokens, FNV-1a 64 per token, chained
  3-token windows, MurmurHash3 finalizer, low 32 bits). A stand-in until the fingerprinter emits
  them itself; ``eval_verify.py`` checks it against ``tests/naive.py``'s pure-Python version.
- :func:`exact_similar_pairs`: every pair with Jaccard >= t, exactly, without n^2 work (prefix
  filtering: two sets with Jaccard >= t share a token among their rarest ``|x| - ceil(t|x|) + 1``).
"""

from __future__ import annotations

import ast
import functools
import glob
import os
import random
import re
import site
import sysconfig

import numpy as np
from corpus import _read, license_files, man_pages
from numba import njit

from neardup.fingerprints.tokenize import char_classes, nfkc_casefold, unicode_tokens

# -- corpus ----------------------------------------------------------------------------------


def _module_docstrings(path: str) -> list[str]:
    try:
        with open(path, encoding="utf-8") as f:
            tree = ast.parse(f.read())
    except (OSError, SyntaxError, UnicodeDecodeError, ValueError):
        return []
    out = []
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            doc = ast.get_docstring(node)
            if doc:
                out.append(doc)
    return out


def python_files() -> list[str]:
    roots = [sysconfig.get_paths()["stdlib"], *site.getsitepackages()]
    paths: set[str] = set()
    for root in roots:
        paths.update(glob.glob(os.path.join(root, "**", "*.py"), recursive=True))
    return sorted(paths)


def verify_documents(n_man: int = 11000, n_doc: int = 4000, seed: int = 0) -> list[tuple[str, str]]:
    """(source, text): every license/copyright file, ``n_man`` man pages and about ``n_doc``
    docstrings (all those of Python files taken in a seeded order), sampled with ``seed``;
    byte-identical repeats and texts under 10 words dropped."""
    rng = random.Random(seed)
    mans = man_pages()
    items: list[tuple[str, str | None]] = [(p, None) for p in license_files()]
    items += [(p, None) for p in sorted(rng.sample(mans, min(n_man, len(mans))))]
    files = python_files()
    rng.shuffle(files)
    got = 0
    for p in files:
        if got >= n_doc:
            break
        found = [d for d in _module_docstrings(p) if len(d.split()) >= 10]
        items += [(p, d) for d in found]
        got += len(found)
    seen: set[str] = set()
    out = []
    for path, text in items:
        text = _read(path) if text is None else text
        if text is None or text in seen or len(text.split()) < 10:
            continue
        seen.add(text)
        out.append((path, text))
    return out


# -- shingle keys (stand-in for the fingerprinter's own) --------------------------------------


@functools.lru_cache(maxsize=1)
def _odd_chars() -> np.ndarray:
    """bool[0x110000]: characters where ``[^\\W_]+`` and the unicode tokenizer may disagree
    (combining marks, and characters of scripts written without spaces: one token each)."""
    import unicodedata

    odd = char_classes() >= 2
    for c in range(0x80, 0x110000):
        if unicodedata.category(chr(c)).startswith("M"):
            odd[c] = True
    return odd


_WORD = re.compile(r"[^\W_]+")


def _token_bytes(text: str, odd: np.ndarray) -> bytes:
    """UTF-8 bytes in which every ASCII byte other than [a-z0-9] separates tokens: an ASCII text
    lowercased as is (NFKC is the identity there), any other text normalized and tokenized here
    and joined with NUL."""
    if text.isascii():
        return text.lower().encode()
    text = nfkc_casefold(text)
    codes = np.frombuffer(text.encode("utf-32-le", "surrogatepass"), dtype=np.uint32)
    tokens = unicode_tokens(text) if odd[codes].any() else _WORD.findall(text)
    return "\0".join(tokens).encode("utf-8", "surrogatepass")


_U = np.uint64
_FNV_OFFSET = _U(0xCBF29CE484222325)
_FNV_PRIME = _U(0x100000001B3)
_GOLDEN = _U(0x9E3779B97F4A7C15)
_C1 = _U(0xFF51AFD7ED558CCD)
_C2 = _U(0xC4CEB9FE1A85EC53)
_S33 = _U(33)


@njit(cache=True, nogil=True, inline="always")
def _in_token(c):
    return c >= 0x80 or (0x61 <= c <= 0x7A) or (0x30 <= c <= 0x39)


@njit(cache=True, nogil=True)
def _shingle_csr(buf, doc_off, window, out_off, out_keys):
    n = doc_off.shape[0] - 1
    th = np.empty(max(buf.shape[0], 1), dtype=np.uint64)
    sh = np.empty(max(buf.shape[0], 1), dtype=np.uint32)
    pos = 0
    for d in range(n):
        ntok = 0
        a = doc_off[d]
        b = doc_off[d + 1]
        i = a
        while i < b:
            if not _in_token(buf[i]):
                i += 1
                continue
            h = _FNV_OFFSET
            while i < b and _in_token(buf[i]):
                h = (h ^ _U(buf[i])) * _FNV_PRIME
                i += 1
            th[ntok] = h
            ntok += 1
        m = 0
        if ntok > 0:
            width = min(window, ntok)
            for s in range(ntok - width + 1):
                h = th[s]
                for k in range(1, width):
                    h = h * _GOLDEN + th[s + k]
                h ^= h >> _S33
                h *= _C1
                h ^= h >> _S33
                h *= _C2
                h ^= h >> _S33
                sh[m] = np.uint32(h & _U(0xFFFFFFFF))
                m += 1
        srt = np.sort(sh[:m])
        for k in range(m):
            if k == 0 or srt[k] != srt[k - 1]:
                out_keys[pos] = srt[k]
                pos += 1
        out_off[d + 1] = pos
    return pos


def standin_shingle_sets(texts: list[str], window: int = 3) -> tuple[np.ndarray, np.ndarray]:
    """CSR (offsets int64[n + 1], sorted unique uint32 keys) of each text's shingle keys."""
    odd = _odd_chars()
    parts = [_token_bytes(t, odd) for t in texts]
    doc_off = np.zeros(len(parts) + 1, dtype=np.int64)
    np.cumsum([len(p) for p in parts], out=doc_off[1:])
    buf = np.frombuffer(b"".join(parts) or b"\0", dtype=np.uint8)
    out_off = np.zeros(len(parts) + 1, dtype=np.int64)
    out_keys = np.empty(max(len(buf), 1), dtype=np.uint32)
    total = _shingle_csr(buf, doc_off, window, out_off, out_keys)
    return out_off, out_keys[:total].copy()


# -- exact truth -----------------------------------------------------------------------------


@njit(cache=True, nogil=True)
def _prefix_candidates(ranked_off, ranked, sizes, plen, t, post_off, post_docs):
    """Pairs (i < j) sharing a token among their prefixes and passing the size bound."""
    n = sizes.shape[0]
    out = np.empty(1 << 20, dtype=np.uint64)
    cnt = 0
    fill = post_off[:-1].copy()
    for d in range(n):
        for p in range(ranked_off[d], ranked_off[d] + plen[d]):
            tok = ranked[p]
            # earlier documents holding this prefix token
            for q in range(post_off[tok], fill[tok]):
                e = post_docs[q]
                small = min(sizes[d], sizes[e])
                big = max(sizes[d], sizes[e])
                if small < t * big - 1e-9:
                    continue
                if cnt == out.shape[0]:
                    grown = np.empty(2 * cnt, dtype=np.uint64)
                    grown[:cnt] = out
                    out = grown
                out[cnt] = np.uint64(e) * np.uint64(n) + np.uint64(d)
                cnt += 1
            post_docs[fill[tok]] = d
            fill[tok] += 1
    return out[:cnt]


@njit(cache=True, nogil=True)
def _merge_counts(offsets, keys, pi, pj, inter):
    for k in range(pi.shape[0]):
        a, a_end = offsets[pi[k]], offsets[pi[k] + 1]
        b, b_end = offsets[pj[k]], offsets[pj[k] + 1]
        c = 0
        while a < a_end and b < b_end:
            if keys[a] == keys[b]:
                c += 1
                a += 1
                b += 1
            elif keys[a] < keys[b]:
                a += 1
            else:
                b += 1
        inter[k] = c


def exact_similar_pairs(
    offsets: np.ndarray, keys: np.ndarray, t: float
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(i, j, jaccard) of every pair with exact Jaccard >= t (sets with no keys: none)."""
    n = len(offsets) - 1
    sizes = np.diff(offsets)
    uniq, inv, df = np.unique(keys, return_inverse=True, return_counts=True)
    # global order: rarest tokens first (prefixes then hold few documents per token)
    order = np.lexsort((uniq, df))
    rank_of = np.empty(len(uniq), dtype=np.int64)
    rank_of[order] = np.arange(len(uniq))
    ranked = rank_of[inv.ravel()]
    doc = np.repeat(np.arange(n), sizes)
    ranked = ranked[np.lexsort((ranked, doc))]
    plen = np.where(sizes > 0, sizes - np.ceil(t * sizes - 1e-9).astype(np.int64) + 1, 0)
    plen = np.minimum(plen, sizes)
    in_prefix = np.arange(len(ranked)) - np.repeat(offsets[:-1], sizes) < np.repeat(plen, sizes)
    post_count = np.bincount(ranked[in_prefix], minlength=len(uniq))
    post_off = np.zeros(len(uniq) + 1, dtype=np.int64)
    np.cumsum(post_count, out=post_off[1:])
    post_docs = np.empty(max(int(post_off[-1]), 1), dtype=np.int64)
    cand = np.unique(_prefix_candidates(offsets, ranked, sizes, plen, t, post_off, post_docs))
    i = (cand // np.uint64(n)).astype(np.int64)
    j = (cand % np.uint64(n)).astype(np.int64)
    inter = np.empty(len(i), dtype=np.int64)
    _merge_counts(offsets, keys, i, j, inter)
    jac = inter / (sizes[i] + sizes[j] - inter)
    ok = jac >= t
    return i[ok], j[ok], jac[ok]


# -- a synthetic family ----------------------------------------------------------------------


def template_family(n: int, words: int = 500, max_edits: int = 3, seed: int = 0) -> list[str]:
    """``n`` near-identical documents: the first ``words`` words of the Apache-2.0 license text,
    each with its own record number in front and 0..``max_edits`` words replaced at random (a
    templated page: nearly every shingle set differs, all at Jaccard >= ~0.9 to one another)."""
    with open("/usr/share/common-licenses/Apache-2.0", encoding="utf-8") as f:
        base = f.read().split()[:words]
    rng = np.random.default_rng(seed)
    edits = rng.integers(0, max_edits + 1, n)
    out = []
    for i in range(n):
        w = list(base)
        for pos in rng.integers(0, len(w), edits[i]):
            w[pos] = f"x{rng.integers(1_000_000)}"
        out.append(f"record {i} " + " ".join(w))
    return out

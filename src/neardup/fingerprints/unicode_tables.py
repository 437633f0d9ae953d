"""Unicode tables for the normalization kernels, generated from the running interpreter.

The kernels in ``_normalize.py`` compute ``unicodedata.normalize("NFKC", s).casefold()`` (and the
``nfkc`` and ``casefold`` forms alone) over UTF-8 or UTF-16 without the GIL. Their tables come
from the :mod:`unicodedata` of the interpreter that runs them, built at first use (about 0.1 s of
CPU, after the 0.1 s pass over general categories that the tokenizer's table shares) and kept for
the life of the process, so results equal Python's for the interpreter's Unicode version
(``unicodedata.unidata_version``).

Per code point (``uint32[0x110000]`` each):

``props``
    bits 0-20: the case folding of the code point when it is one code point, else the index of
    its sequence in ``fold``/``fold_off``; bit 21 (``FOLD_MULTI``): case folding gives several
    code points; bit 22 (``NFKC_STABLE``): a normalization boundary unchanged by NFKC (NFKC of
    the character alone is itself, its canonical combining class is 0, and neither it nor the
    first character of its decomposition combines with a preceding character), so NFKC never
    looks across it; bit 23 (``COMP_FIRST``) / bit 24 (``COMP_LAST``): first / second character
    of a canonical composition pair (Hangul jamo V and T count as ``COMP_LAST``).
``slow``
    bits 0-7: canonical combining class; bits 8-31: 1 + index of the full compatibility
    decomposition (NFKD of the character alone) in ``decomp``/``decomp_off``, 0 for none.

Composition pairs (first, second) -> composite, sorted by ``first << 21 | second`` in
``pair_keys``: the primary composites, i.e. two-character canonical decompositions whose first
character is a starter and whose composite NFC keeps (not a composition exclusion).
"""

from __future__ import annotations

import functools
import unicodedata
from typing import NamedTuple

import numpy as np

from neardup.fingerprints import _normalize as N

__all__ = ["CATEGORIES", "NormTables", "categories", "empty_tables", "norm_tables"]

NCODE = 0x110000

#: General categories, in the order of the codes returned by :func:`categories`.
CATEGORIES = (
    "Cn Lu Ll Lt Lm Lo Mn Mc Me Nd Nl No Pc Pd Ps Pe Pi Pf Po Sm Sc Sk So Zs Zl Zp Cc Cf Cs Co"
).split()


class NormTables(NamedTuple):
    """The packed tables the normalization kernels take (see the module docstring)."""

    props: np.ndarray  # uint32[0x110000]
    slow: np.ndarray  # uint32[0x110000]
    decomp: np.ndarray  # int32[*]: NFKD sequences, one after another
    decomp_off: np.ndarray  # int64[k + 1]
    fold: np.ndarray  # int32[*]: case foldings of more than one code point
    fold_off: np.ndarray  # int64[f + 1]
    pair_keys: np.ndarray  # int64[p], sorted: first << 21 | second
    pair_vals: np.ndarray  # int32[p]: the composite


@functools.lru_cache(maxsize=1)
def categories() -> np.ndarray:
    """General category of every code point as ``uint8[0x110000]`` (an index in
    :data:`CATEGORIES`), from :func:`unicodedata.category`."""
    code = {c: i for i, c in enumerate(CATEGORIES)}
    cats = map(code.__getitem__, map(unicodedata.category, map(chr, range(NCODE))))
    out = np.fromiter(cats, dtype=np.uint8, count=NCODE)
    out.flags.writeable = False
    return out


def _sequences(seqs: list[str]) -> tuple[np.ndarray, np.ndarray]:
    """CSR of code point sequences: (data int32, offsets int64)."""
    lengths = np.fromiter(map(len, seqs), dtype=np.int64, count=len(seqs))
    off = np.zeros(len(seqs) + 1, dtype=np.int64)
    np.cumsum(lengths, out=off[1:])
    data = np.fromiter(map(ord, "".join(seqs)), dtype=np.int32, count=int(off[-1]))
    return data, off


@functools.lru_cache(maxsize=1)
def norm_tables() -> NormTables:
    """The normalization tables of this interpreter's :mod:`unicodedata` (built once)."""
    cats = categories()
    # Unassigned, private-use and surrogate code points have no decomposition, no case
    # folding and combining class 0: only the others are looked at one by one.
    skip = np.isin(cats, [CATEGORIES.index(c) for c in ("Cn", "Co", "Cs")])
    skip[0] = True  # NUL separates the characters below (it is a starter that never composes)
    cps = np.flatnonzero(~skip)
    chars = list(map(chr, cps.tolist()))
    joined = "\0".join(chars)
    # Per-character results from one call each: NUL is a starter that no character composes
    # with, decomposes to or folds to, and case folding is context-free.
    nfkd = unicodedata.normalize("NFKD", joined).split("\0")
    nfkc = unicodedata.normalize("NFKC", joined).split("\0")
    folded = joined.casefold().split("\0")
    ccc_of = np.fromiter(map(unicodedata.combining, chars), dtype=np.uint8, count=len(chars))

    ccc = np.zeros(NCODE, dtype=np.uint32)
    ccc[cps] = ccc_of

    # decompositions (only where NFKD changes the character)
    dec_idx = [k for k, (c, d) in enumerate(zip(chars, nfkd, strict=True)) if d != c]
    decomp, decomp_off = _sequences([nfkd[k] for k in dec_idx])
    slow = ccc.copy()
    slow[cps[dec_idx]] |= (np.arange(1, len(dec_idx) + 1, dtype=np.uint32)) << np.uint32(8)

    # case folding: one code point in place, longer ones in a side table
    fold_cp = np.arange(NCODE, dtype=np.uint32)
    multi = [k for k, f in enumerate(folded) if len(f) != 1]
    one = [k for k, f in enumerate(folded) if len(f) == 1 and f != chars[k]]
    fold_cp[cps[one]] = [ord(folded[k]) for k in one]
    fold, fold_off = _sequences([folded[k] for k in multi])
    fold_cp[cps[multi]] = np.arange(len(multi), dtype=np.uint32) | np.uint32(N.FOLD_MULTI)

    firsts, seconds, pair_keys, pair_vals = _composites(chars, cps, dec_idx, ccc)

    props = fold_cp
    props[firsts] |= np.uint32(N.COMP_FIRST)
    props[seconds] |= np.uint32(N.COMP_LAST)
    props[N.V_BASE : N.V_BASE + N.V_COUNT] |= np.uint32(N.COMP_LAST)
    props[N.T_BASE + 1 : N.T_BASE + N.T_COUNT] |= np.uint32(N.COMP_LAST)

    props[_stable(props, ccc, chars, cps, nfkd, nfkc, dec_idx)] |= np.uint32(N.NFKC_STABLE)
    stable = (props & np.uint32(N.NFKC_STABLE)) != 0
    if not stable[:128].all():  # pragma: no cover - a property of every Unicode version
        raise RuntimeError("unicodedata: ASCII is not NFKC-stable in this interpreter")

    tables = NormTables(
        props=props,
        slow=slow,
        decomp=decomp,
        decomp_off=decomp_off,
        fold=fold,
        fold_off=fold_off,
        pair_keys=pair_keys,
        pair_vals=pair_vals,
    )
    for arr in tables:
        arr.flags.writeable = False
    return tables


def _stable(
    props: np.ndarray,
    ccc: np.ndarray,
    chars: list[str],
    cps: np.ndarray,
    nfkd: list[str],
    nfkc: list[str],
    dec_idx: list[int],
) -> np.ndarray:
    """Boundaries (bool per code point): unchanged by NFKC, a starter, and neither it nor its
    decomposition's first character combines backwards."""
    last = (props & np.uint32(N.COMP_LAST)) != 0
    stable = (ccc == 0) & ~last
    changed = [int(cps[k]) for k, (c, d) in enumerate(zip(chars, nfkc, strict=True)) if d != c]
    stable[changed] = False
    lead = np.array([ord(nfkd[k][0]) if nfkd[k] else 0 for k in dec_idx], dtype=np.int64)
    stable[cps[dec_idx]] &= (ccc[lead] == 0) & ~last[lead]
    return stable


def _composites(
    chars: list[str], cps: np.ndarray, dec_idx: list[int], ccc: np.ndarray
) -> tuple[list[int], list[int], np.ndarray, np.ndarray]:
    """Primary composites: canonical pairs of a starter and a character that NFC composes, as
    (first characters, second characters, sorted pair keys, their composites)."""
    firsts, seconds, composites = [], [], []
    for k in dec_idx:
        parts = unicodedata.decomposition(chars[k]).split()
        if len(parts) != 2 or parts[0].startswith("<"):
            continue
        a, b = int(parts[0], 16), int(parts[1], 16)
        if ccc[a] == 0 and _nfc_keeps(chars[k]):
            firsts.append(a)
            seconds.append(b)
            composites.append(int(cps[k]))
    keys = (np.array(firsts, dtype=np.int64) << 21) | np.array(seconds, dtype=np.int64)
    order = np.argsort(keys, kind="stable")
    pair_keys = np.ascontiguousarray(keys[order])
    pair_vals = np.array(composites, dtype=np.int32)[order]
    return firsts, seconds, pair_keys, pair_vals


def _nfc_keeps(ch: str) -> bool:
    """True where NFC keeps ``ch`` (a composite that is not a composition exclusion)."""
    return unicodedata.normalize("NFC", ch) == ch


@functools.lru_cache(maxsize=1)
def empty_tables() -> NormTables:
    """Tables of the right types and no content, for kernels that do not normalize."""
    u32 = np.zeros(1, dtype=np.uint32)
    i32 = np.zeros(1, dtype=np.int32)
    i64 = np.zeros(1, dtype=np.int64)
    tables = NormTables(u32, u32.copy(), i32, i64, i32.copy(), i64.copy(), i64.copy(), i32.copy())
    for arr in tables:
        arr.flags.writeable = False
    return tables

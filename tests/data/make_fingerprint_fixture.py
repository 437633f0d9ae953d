"""Build the fingerprint regression fixture: a multilingual sample and its fingerprints.

Users' indexes hold fingerprints, so every preset and option must keep giving the same values.
This script writes, next to itself:

``fingerprint_sample.jsonl.gz``
    The documents, one JSON object a line (UTF-8 with ``surrogatepass``, so lone surrogates
    survive): ``{"t": text}`` for a ``str`` document, ``{"b": hex}`` for a ``bytes`` document,
    ``{"raw": hex}`` for bytes that are not valid UTF-8 (only fingerprinted with
    ``normalize="none"``, which hands bytes to the tokenizer as they are).
``fingerprint_expected.json``
    The interpreter's Unicode version, the fingerprints of every document under the presets
    (decimal strings), and a SHA-256 of the fingerprints (``uint64`` little-endian) for each
    combination of options.

The documents are generated (seeded, no data from elsewhere): words of every script the
``unicode`` tokenizer knows, combining marks in any order, compatibility characters, full-width
forms, ligatures, Turkish dotted I, German sharp s, Greek final sigma, Hangul syllables and jamo,
CJK, emoji sequences, lone surrogates, noncharacters, private use and unassigned code points.

The expected values were made with the implementation of the time the fixture was committed;
regenerate them only on purpose (``python tests/data/make_fingerprint_fixture.py``), never to make
a failing test pass.
"""

from __future__ import annotations

import gzip
import hashlib
import itertools
import json
import os
import random
import unicodedata

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
SAMPLE = os.path.join(HERE, "fingerprint_sample.jsonl.gz")
EXPECTED = os.path.join(HERE, "fingerprint_expected.json")

R = list[tuple[int, int]]

# (letters, combining marks) by script; ranges may hold unassigned code points on purpose.
SCRIPTS: dict[str, tuple[R, R]] = {
    "latin": (
        [(0x41, 0x5A), (0x61, 0x7A), (0xC0, 0x24F), (0x250, 0x2AF), (0x1E00, 0x1EFF)],
        [(0x300, 0x36F), (0x1AB0, 0x1ACE), (0x1DC0, 0x1DFF), (0x20D0, 0x20F0)],
    ),
    "greek": ([(0x370, 0x3FF), (0x1F00, 0x1FFF)], [(0x300, 0x345)]),
    "cyrillic": ([(0x400, 0x52F), (0x1C80, 0x1C88), (0xA640, 0xA69F)], [(0x483, 0x489)]),
    "armenian": ([(0x531, 0x58A), (0xFB13, 0xFB17)], []),
    "hebrew": ([(0x5D0, 0x5EA), (0xFB1D, 0xFB4F)], [(0x591, 0x5C7)]),
    "arabic": (
        [(0x620, 0x64A), (0x671, 0x6D3), (0xFB50, 0xFDFF), (0xFE70, 0xFEFC)],
        [(0x64B, 0x65F), (0x670, 0x670), (0x6D6, 0x6ED)],
    ),
    "syriac_thaana": ([(0x710, 0x72F), (0x780, 0x7A5)], [(0x730, 0x74A), (0x7A6, 0x7B0)]),
    "devanagari": ([(0x904, 0x939), (0x958, 0x97F)], [(0x900, 0x903), (0x93A, 0x94F)]),
    "bengali": ([(0x985, 0x9B9), (0x9DC, 0x9DF)], [(0x981, 0x983), (0x9BC, 0x9D7)]),
    "gurmukhi_gujarati": ([(0xA05, 0xA39), (0xA85, 0xAB9)], [(0xA3C, 0xA51), (0xABC, 0xACD)]),
    "oriya_tamil": ([(0xB05, 0xB39), (0xB85, 0xBB9)], [(0xB3C, 0xB57), (0xBBE, 0xBD7)]),
    "telugu_kannada": ([(0xC05, 0xC39), (0xC85, 0xCB9)], [(0xC3C, 0xC56), (0xCBC, 0xCD6)]),
    "malayalam_sinhala": ([(0xD05, 0xD3A), (0xD85, 0xDC6)], [(0xD3E, 0xD57), (0xDCA, 0xDDF)]),
    "thai_lao": (
        [(0xE01, 0xE30), (0xE81, 0xEB0), (0xEDC, 0xEDF)],
        [(0xE31, 0xE4E), (0xEB1, 0xECE)],
    ),
    "tibetan": ([(0xF40, 0xF6C), (0xF00, 0xF17)], [(0xF71, 0xF87), (0xF8D, 0xFBC)]),
    "myanmar": ([(0x1000, 0x102A), (0xAA60, 0xAA7F), (0xA9E0, 0xA9FE)], [(0x102B, 0x103E)]),
    "georgian": ([(0x10A0, 0x10FF), (0x1C90, 0x1CBF), (0x2D00, 0x2D2D)], []),
    "hangul": (
        [(0xAC00, 0xD7A3), (0x3131, 0x318E), (0xFFA0, 0xFFDC), (0x1100, 0x1112)],
        [(0x1161, 0x1175), (0x11A8, 0x11C2), (0x302E, 0x302F)],
    ),
    "ethiopic_cherokee": ([(0x1200, 0x137C), (0x13A0, 0x13FD), (0xAB70, 0xABBF)], []),
    "khmer_mongolian": ([(0x1780, 0x17B3), (0x19E0, 0x19FF), (0x1820, 0x1878)], [(0x17B4, 0x17D3)]),
    "balinese_kaithi": (
        [(0x1B05, 0x1B33), (0x11083, 0x110AF)],
        [(0x1B34, 0x1B44), (0x110B0, 0x110BA)],
    ),
    "cjk": (
        [
            (0x4E00, 0x9FFF),
            (0x3400, 0x4DBF),
            (0x20000, 0x2A6DF),
            (0xF900, 0xFAFF),
            (0x2F800, 0x2FA1F),
        ],
        [],
    ),
    "kana": (
        [
            (0x3041, 0x3096),
            (0x30A1, 0x30FA),
            (0x31F0, 0x31FF),
            (0xFF66, 0xFF9D),
            (0x1B000, 0x1B11F),
        ],
        [(0x3099, 0x309A), (0xFF9E, 0xFF9F)],
    ),
    "bopomofo_yi": ([(0x3105, 0x312F), (0x31A0, 0x31BF), (0xA000, 0xA48C)], []),
    "compat": (
        [
            (0x2100, 0x218F),  # letterlike symbols, Roman numerals
            (0x2460, 0x24FF),  # enclosed alphanumerics
            (0x2070, 0x209F),  # superscripts and subscripts
            (0x1D400, 0x1D7FF),  # mathematical alphanumerics
            (0xFB00, 0xFB06),  # ligatures
            (0xFF01, 0xFF5E),  # full-width ASCII
            (0x3200, 0x33FF),  # enclosed CJK, CJK compatibility
            (0x2F00, 0x2FD5),  # Kangxi radicals
            (0x1F100, 0x1F1FF),  # enclosed alphanumeric supplement
        ],
        [(0x20D0, 0x20F0)],
    ),
}

SEPARATORS = (
    " " * 8
    + "\n\t.,;:!?-'\"()[]/_"
    + "\u00a0\u2000\u2003\u200b\u3000\u3001\u3002\uff0c\uff0e\u060c\u0964\u2026\u00b7\u2019"
)

EMOJI = [
    "\U0001f600", "\U0001f44d\U0001f3fd", "\u2764\ufe0f", "\U0001f468\u200d\U0001f469\u200d"
    "\U0001f467\u200d\U0001f466", "\U0001f1e9\U0001f1ea", "1\ufe0f\u20e3", "\U0001f3f3\ufe0f\u200d"
    "\U0001f308", "\u263a", "\U0001faf6", "\U0001f9d1\U0001f3ff\u200d\U0001f4bb",
]  # fmt: skip

SPECIAL = [
    "İstanbul ISTANBUL istanbul ıiİI", "Straße STRASSE strasse ẞ ß", "ΣΑΣ σας ΟΔΟΣ οδός ς σ Σ",
    "ﬁ ﬂ ﬀ ﬃ ﬄ ﬅ ﬆ ﬓ ﬔ", "ＡＢＣ１２３！？ ｱｲｳｶﾞﾊﾟ ＦＵＬＬ　ｗｉｄｔｈ", "① ② ⑳ ㉑ ⓐ Ⓐ ⒜ ⑴ ⒈",
    "㎏ ㍻ ㈱ ㌔ ㋀ ㏿", "½ ⅓ ⅞ ² ³ ₁₂ ⁿ ℡ ™ ℃ №", "Å Å Å Ω Ω K K", "ǅ ǈ ǋ ǲ Ǆ ǆ ŉ ſ ẛ ẞ",
    "ΐ ΰ ᾳ ᾼ ῼ ᾀ ᾈ ͅ ι ι", "ẛ̣ ḍ̇ ḍ̇ q̣̇ q̣̇", "각 각 각 ᄀ ᅡ ᆨ ㄱ ㅏ ﾡ ￂ",
    "가\u11a8 \u1100\u1161\u11a8\u11a8 \u1100\u1100\u1161 \u1161\u11a8",
    "Ⅻ ⅻ ⅰⅱⅲ Ⅰ ⅿ ↉", "𝐀𝐁𝐂 𝓗𝓮𝓵𝓵𝓸 𝕎𝕠𝕣𝕝𝕕 𝟎𝟏𝟐", "ﷺ ﷽ ﻻ ﻼ ﺍﻟﻌﺮﺑﻴﺔ", "ǰ ǰ ǰ̣ ǰ̣ ǰ̣",
    "a\u0301\u0323\u0300\u0316 a\u0316\u0300\u0323\u0301 e\u0301\u0301 o\u0308\u0304\u0301",
    "\u0340 \u0341 \u0343 \u0344 \u0374 \u037e \u0387 \u0f73 \u0f75 \u0f81 \u2adc \u0958 \u2126",
    "\u0b47\u0b3e \u0b47\u0b56 \u0b47\u0b57 \u0bc6\u0bbe \u0dd9\u0dca \u1025\u102e \u1b05\u1b35",
    "\U00011099\U000110ba \U0001109b\U000110ba \U000110a5\U000110ba \U00011131\U00011127",
    "か\u3099 カ\u3099 ｶ\uff9e ﾊ\uff9f は\u309a う\u3099 ゝ\u3099 \u309b \u309c",
    "\ud800 \udfff \ud83d\ude00 a\udc80b \udbff\udfff x\ud800\u0301",
    "\ufffe \uffff \U0010ffff \U0001fffe \ufffd \ue000 \uf8ff \U000f0000 \u0378 \u2fe0 \U000e0001",
    "a\x00b \x00 \x01\x1f\x7f\x80\x9f \ufeff\u200b\u200c\u200d\u00ad\u2060 \u00a0\u2007\u202f",
    "\u0041\u030a \u212b\u0301 \u00c5\u0323 \u1e9e\u0301 \u0130\u0307 \u0049\u0307\u0301",
    "\u03a3\u0301 \u03c2\u0308 \u1fbe \u0345\u0301 \u03b9\u0345 \u1f80\u0345",
    "\u13a0\u13f8 \uab70 \u13f5 Ꭰ ꭰ \u1c90\u10d0 \u10a0 \u2d00",
    "ǉ Ǉ ǈ ﬀi ﬃ ff Ꜳꜳ Ꝏ", "ⅠⅡⅢ ⅰⅱⅲ ⓚ Ⓚ ꟸ ꟹ ᵃᵇᶜ ₐₑ",
]  # fmt: skip


def pick(rng: random.Random, ranges: R) -> str:
    lo, hi = rng.choice(ranges)
    return chr(rng.randint(lo, hi))


def word(rng: random.Random, letters: R, marks: R, p_mark: float, p_upper: float) -> str:
    out = []
    for _ in range(rng.randint(1, 10)):
        ch = pick(rng, letters)
        if rng.random() < p_upper:
            ch = ch.upper()
        out.append(ch)
        while marks and rng.random() < p_mark:
            out.append(pick(rng, marks))
    return "".join(out)


def script_doc(rng: random.Random, names: list[str], nwords: int) -> str:
    p_mark = rng.choice([0.0, 0.05, 0.3, 0.7])
    p_upper = rng.choice([0.0, 0.1, 0.5])
    parts = []
    for _ in range(nwords):
        letters, marks = SCRIPTS[rng.choice(names)]
        parts.append(word(rng, letters, marks, p_mark, p_upper))
        parts.append(rng.choice(SEPARATORS))
        if rng.random() < 0.02:
            parts.append(rng.choice(EMOJI) + " ")
        if rng.random() < 0.01:
            parts.append(rng.choice(SPECIAL) + " ")
    return "".join(parts)


ASCII_WORDS = (
    "the of and to in is that for it as with was on be by this are or from at which but not "
    "have an they you were his all can one had there been if more when will would who so no "
    "Linux GNU License FILE Options README neardup Simhash UTF-8 NFKC don't it's e-mail"
).split()


def ascii_doc(rng: random.Random, nwords: int) -> str:
    parts = []
    for _ in range(nwords):
        w = rng.choice(ASCII_WORDS)
        r = rng.random()
        if r < 0.1:
            w = w.upper()
        elif r < 0.3:
            w = w.capitalize()
        elif r < 0.35:
            w = str(rng.randint(0, 10**6))
        parts.append(w)
        parts.append(rng.choice(" " * 10 + "\n.,;:!?-()_/\t"))
    return "".join(parts)


def random_doc(rng: random.Random, n: int, top: int) -> str:
    return "".join(chr(rng.randint(0, top)) for _ in range(n))


def make_documents(seed: int = 17) -> list[str | bytes]:
    rng = random.Random(seed)
    names = sorted(SCRIPTS)
    docs: list[str | bytes] = ["", " ", "\n\n", ".", "a", "A", "ﬁ", "ß", "İ", "Σ", "\0", "\ud800"]
    docs += SPECIAL
    docs += [" ".join(SPECIAL), "".join(SPECIAL), " ".join(EMOJI), "".join(EMOJI)]
    for s in SPECIAL:  # every special character alone and within words
        docs += [ch for ch in sorted(set(s)) if not ch.isspace()][:40:3]
        docs.append(ascii_doc(rng, 20) + " " + s + " " + ascii_doc(rng, 20))
    for name in names:  # every script alone, short and long
        for nwords in (1, 3, 10, 60, 400):
            docs.append(script_doc(rng, [name], nwords))
    for _ in range(700):  # mixtures of scripts, of every size
        k = rng.randint(1, 4)
        docs.append(
            script_doc(rng, rng.sample(names, k), min(800, int(rng.paretovariate(1.2) * 6)))
        )
    for _ in range(600):
        docs.append(ascii_doc(rng, min(5000, int(rng.paretovariate(1.1) * 20))))
    for _ in range(200):  # repeated shingles (count/unique/log weighting)
        base = script_doc(rng, rng.sample(names, 2), rng.randint(2, 8))
        docs.append((base + " ") * rng.randint(2, 30))
    for _ in range(80):
        docs.append(random_doc(rng, rng.randint(1, 300), 0xFFFF))
        docs.append(random_doc(rng, rng.randint(1, 300), 0x10FFFF))
        docs.append(random_doc(rng, rng.randint(1, 100), 0x7F))
    docs.append(ascii_doc(rng, 12000))
    docs.append(script_doc(rng, names, 2500))
    docs.append(script_doc(rng, ["cjk", "kana", "compat"], 1500))
    # some as UTF-8 bytes (only strings a strict UTF-8 decoder accepts: no lone surrogates)
    for i in range(0, len(docs), 7):
        d = docs[i]
        if isinstance(d, str) and not any(0xD800 <= ord(c) <= 0xDFFF for c in d):
            docs[i] = d.encode("utf-8")
    return docs


RAW = [  # bytes that are not valid UTF-8: normalize="none" only
    b"\xff\xfe abc", b"caf\xe9 na\xefve", b"\xc3", b"\xe6\x97", b"\xf0\x9f\x98", b"\xed\xa0\x80 x",
    b"\xc0\xaf overlong", b"\xf4\x90\x80\x80 big", b"ok \x80\x80 ok", b"A\x00B c d e f",
    b"\xe6\x97\xa5\xe6\x9c\xac\xe8\xaa\x9e \xe6\x97", "日本語のテキスト ไทย".encode()[:-1],
]  # fmt: skip

NORMALIZE = ("none", "casefold", "nfkc", "nfkc_casefold")
TOKENIZER = ("ascii_letters", "unicode", "unicode_words")
CROSS = {
    "tokenizer": TOKENIZER,
    "window": (1, 2, 3, 5),
    "hash": ("jenkins", "fnv1a64"),
    "shingle": ("chain", "cyclic"),
    "weighting": ("count", "unique", "log"),
    "bit_order": ("natural", "reversed"),
}


def configs() -> list[dict]:
    """Option sets checked on the whole sample (normalize x tokenizer, the presets) and on every
    tenth document (the full cross of the other options, with normalize none / nfkc_casefold)."""
    out = [{"preset": p, "subset": "all"} for p in ("default", "reference")]
    for norm, tok in itertools.product(NORMALIZE, TOKENIZER):
        out.append({"preset": "default", "normalize": norm, "tokenizer": tok, "subset": "all"})
    for norm in ("none", "nfkc_casefold"):
        for values in itertools.product(*CROSS.values()):
            cfg = dict(zip(CROSS, values, strict=True))
            out.append({"preset": "default", "normalize": norm, **cfg, "subset": "tenth"})
    return out


def config_key(cfg: dict) -> str:
    return ",".join(f"{k}={cfg[k]}" for k in sorted(cfg))


def documents_for(cfg: dict, docs: list[str | bytes]) -> list[str | bytes]:
    chosen = docs if cfg["subset"] == "all" else docs[::10]
    raw_ok = cfg.get("normalize", "none" if cfg["preset"] == "reference" else "x") == "none"
    return chosen + RAW if raw_ok else chosen


def digest(fps: np.ndarray) -> str:
    return hashlib.sha256(np.ascontiguousarray(fps, dtype="<u8").tobytes()).hexdigest()


def write_sample(docs: list[str | bytes]) -> None:
    with open(SAMPLE, "wb") as raw, gzip.GzipFile("", "wb", 9, raw, mtime=0) as f:
        for d in docs:
            rec = {"t": d} if isinstance(d, str) else {"b": d.hex()}
            f.write(json.dumps(rec, ensure_ascii=False).encode("utf-8", "surrogatepass") + b"\n")


def read_sample(path: str = SAMPLE) -> list[str | bytes]:
    docs: list[str | bytes] = []
    with gzip.open(path, "rb") as f:
        for line in f:
            rec = json.loads(line.decode("utf-8", "surrogatepass"))
            docs.append(rec["t"] if "t" in rec else bytes.fromhex(rec["b"]))
    return docs


def main() -> None:
    from neardup.fingerprints import Fingerprinter

    docs = make_documents()
    write_sample(docs)
    docs = read_sample()
    result: dict = {"unidata_version": unicodedata.unidata_version, "presets": {}, "digests": {}}
    for cfg in configs():
        opts = {k: v for k, v in cfg.items() if k not in ("preset", "subset")}
        fp = Fingerprinter(cfg["preset"], **opts)
        fps = fp.fingerprint_many(documents_for(cfg, docs), threads=1)
        result["digests"][config_key(cfg)] = digest(fps)
        if len(opts) == 0:
            result["presets"][cfg["preset"]] = [str(int(x)) for x in fps]
    with open(EXPECTED, "w", encoding="utf-8") as f:
        json.dump(result, f, indent=0)
        f.write("\n")
    size = sum(len(d if isinstance(d, bytes) else d.encode("utf-8", "surrogatepass")) for d in docs)
    print(f"{len(docs)} documents, {size / 1e6:.2f} MB; {len(result['digests'])} configurations")


if __name__ == "__main__":
    main()
